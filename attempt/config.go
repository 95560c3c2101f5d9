package attempt

import (
	"cmp"
	"net/http"
	"time"

	"github.com/sparkpulse/sparkpulse/sparkapi"
)

// Config says where and how to read an application. Zero values take the
// defaults.
type Config struct {
	// Sources are base URLs of Spark UIs or History Servers, or
	// templates holding {app_id}, asked in order.
	Sources          []string
	Timeout          time.Duration // per request; default sparkapi.DefaultTimeout
	MaxResponseBytes int64         // bounds one answer; default sparkapi.DefaultMaxResponseBytes
	Auth             sparkapi.Auth
	// Transport carries the requests (TLS settings live there); nil uses
	// http.DefaultTransport.
	Transport http.RoundTripper
	// StageDetailsMinDuration: a stage attempt that ended after running
	// at least this long gets its task distribution and slowest task read
	// (two requests); shorter ones are skipped unless tasks failed.
	// Negative: every stage.
	StageDetailsMinDuration time.Duration
	// StageDetailsRequests bounds the requests for stage details per
	// read; stages beyond it go without. Negative: none.
	StageDetailsRequests int
	// FailedTasksPerStage bounds the failed tasks read of a stage attempt.
	FailedTasksPerStage int
	// Stream, when set, is read for the accounting and reconciliation, up
	// to UsageDelay after the end (its processes' last reports are in by
	// then).
	Stream     Stream
	UsageDelay time.Duration
	Now        func() time.Time
}

// Defaults.
const (
	DefaultStageDetailsMinDuration = 5 * time.Second
	DefaultStageDetailsRequests    = 20
	DefaultFailedTasksPerStage     = 20
	DefaultUsageDelay              = time.Minute
)

// WithDefaults fills zero values; the client's own (Timeout,
// MaxResponseBytes) are sparkapi.NewClient's.
func (cfg Config) WithDefaults() Config {
	cfg.StageDetailsMinDuration = cmp.Or(cfg.StageDetailsMinDuration, DefaultStageDetailsMinDuration)
	cfg.StageDetailsRequests = cmp.Or(cfg.StageDetailsRequests, DefaultStageDetailsRequests)
	cfg.FailedTasksPerStage = cmp.Or(cfg.FailedTasksPerStage, DefaultFailedTasksPerStage)
	cfg.UsageDelay = cmp.Or(cfg.UsageDelay, DefaultUsageDelay)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return cfg
}
