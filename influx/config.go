package influx

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/sparkpulse/sparkpulse/queue"
)

// Config holds the settings shared by every writer of a service. Zero
// values select the defaults below; Validate says what is wrong with the
// others.
type Config struct {
	URL   string // http:// or https://, without /api/v2
	Org   string // 2.x/3.x organization; ignored by 1.x
	Token string // 1.x: "user:password" or empty; never logged

	TLS  *tls.Config // nil = Go's default
	Gzip Gzip        // compress write requests; zero: GzipAuto

	BatchSize int // points per write request
	// BatchBytes bounds a write request's bytes as well: 5 000 points of
	// the wide schema, each a process's report of one Spark source with
	// tens of values, would make requests of several MiB, which cost
	// InfluxDB more per value than requests of about one (bench/README.md).
	BatchBytes      int
	BatchTimeout    time.Duration // a partial batch is sent this long after its first point
	MaxInFlight     int           // concurrent write requests
	RequestTimeout  time.Duration // per request
	MaxRetryBackoff time.Duration // longest wait between retries

	// Queue bounds the batches held in memory and, when Queue.Dir is
	// set, on disk: batches beyond the memory bound, and those undelivered
	// at Close, wait there and are delivered first when InfluxDB takes
	// writes again, also after a restart. Each writer needs its own Dir.
	Queue queue.Config

	Logger *zap.Logger // nil = no logging

	// CreateMissing: a write answered 404 (InfluxDB 1.x: database not
	// found, as after InfluxDB was down at start or its data was reset)
	// creates the database or retention policy (Check with create), at
	// most once every createEvery, and the write is retried.
	CreateMissing bool

	// OnBatch, when set, is called after every write request (from the
	// sending goroutine) with the number of lines sent, the duration and
	// the result, e.g. to feed a latency histogram. By then the outcome is
	// in Stats and logged. Requests cut short by Close giving up are not
	// reported.
	OnBatch func(points int, took time.Duration, err error)

	// transport replaces the network in tests (nil = the client's own).
	transport http.RoundTripper
}

// Target is where a Writer writes.
type Target struct {
	Bucket string // 2.x/3.x bucket; 1.x "db/rp", "db/" or "db"
	Org    string // "" = Config.Org
}

// Defaults.
const (
	DefaultURL             = "http://127.0.0.1:8086"
	DefaultBatchSize       = 5000
	DefaultBatchBytes      = 1 << 20
	DefaultBatchTimeout    = time.Second
	DefaultMaxInFlight     = 2
	DefaultRequestTimeout  = 10 * time.Second
	DefaultMaxRetryBackoff = 30 * time.Second
)

// WithDefaults fills zero values.
func (c Config) WithDefaults() Config {
	if c.URL == "" {
		c.URL = DefaultURL
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.BatchSize, DefaultBatchSize)
	def(&c.BatchBytes, DefaultBatchBytes)
	def(&c.MaxInFlight, DefaultMaxInFlight)
	defDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	defDur(&c.BatchTimeout, DefaultBatchTimeout)
	defDur(&c.RequestTimeout, DefaultRequestTimeout)
	defDur(&c.MaxRetryBackoff, DefaultMaxRetryBackoff)
	c.Queue = c.Queue.WithDefaults()
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}

// Validate rejects bad values, naming the setting and quoting the value.
// Zero values are valid: they select the defaults.
func (c Config) Validate() error {
	var errs []error
	if c.URL != "" {
		if _, err := parseURL(c.URL); err != nil {
			errs = append(errs, err)
		}
	}
	for _, s := range []struct {
		name string
		v    int
	}{{"batch-size", c.BatchSize}, {"max-in-flight", c.MaxInFlight}} {
		if s.v < 0 {
			errs = append(errs, fmt.Errorf("%s %d: must not be negative", s.name, s.v))
		}
	}
	for _, s := range []struct {
		name string
		v    time.Duration
	}{{"batch-timeout", c.BatchTimeout}, {"timeout", c.RequestTimeout}, {"max-retry-backoff", c.MaxRetryBackoff}} {
		if s.v < 0 {
			errs = append(errs, fmt.Errorf("%s %q: must not be negative", s.name, s.v.String()))
		}
	}
	if err := c.Queue.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// validTarget checks a target's bucket.
func validTarget(t Target) error {
	if t.Bucket == "" {
		return errors.New("influx: target bucket is empty")
	}
	if strings.HasPrefix(t.Bucket, "/") {
		return fmt.Errorf("influx: bucket %q: empty database name", t.Bucket)
	}
	return nil
}

// parseURL checks an InfluxDB base URL. Errors show it without a password.
func parseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("url %q: cannot be parsed", RedactURL(raw))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("url %q: must start with http:// or https://", u.Redacted())
	}
	if u.Host == "" {
		return nil, fmt.Errorf("url %q: has no host", u.Redacted())
	}
	return u, nil
}

// RedactURL is raw with any password in it replaced, for logs and errors.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		if strings.Contains(raw, "@") {
			return "(unparsable URL with credentials)"
		}
		return raw
	}
	return u.Redacted()
}

// splitDBRP splits a 1.x bucket the way InfluxDB 1.8 does: at the first '/'.
func splitDBRP(bucket string) (db, rp string, err error) {
	db, rp, _ = strings.Cut(bucket, "/")
	if db == "" {
		return "", "", fmt.Errorf("influx: bucket %q: empty database name", bucket)
	}
	return db, rp, nil
}
