package annotate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sparkpulse/sparkpulse/attempt"
	"github.com/sparkpulse/sparkpulse/facts"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/sparkapi"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Sink receives encoded points: complete lines of line protocol. It must
// copy what it keeps, and deliver them in the order it receives them: a
// later write of an item overwrites the earlier one.
type Sink interface {
	Append(lines []byte, wait bool) bool
}

// Config configures a Poller. Zero durations take the defaults.
type Config struct {
	// Sources are base URLs of Spark UIs or History Servers
	// ("http://hs:18080"), or templates holding {app_id}
	// ("http://rm:8088/proxy/{app_id}").
	Sources  []string
	Interval time.Duration // between polls of a source; default 10s
	Timeout  time.Duration // per request; default 5s
	// Lookback bounds how far back the first poll of a History Server
	// reads finished applications; default 1h.
	Lookback time.Duration
	MaxText  int // names and descriptions are trimmed to this many characters; default 200
	// MaxResponseBytes bounds one answer of a source; a larger one is a
	// failed request. Default 16 MiB: a list of 1000 stages is a few MB.
	MaxResponseBytes int64
	// MaxApps bounds the applications whose {app_id} instances are polled
	// at once; default 256.
	MaxApps int
	// NewAppsPerPoll bounds the applications admitted per Interval to
	// {app_id} polling; default 8.
	NewAppsPerPoll int
	// StageDetailsMinDuration: a stage attempt that ended after running
	// at least this long gets its task distribution and slowest task read
	// (two requests); shorter ones are skipped unless tasks failed.
	// Default 5s; negative: every stage.
	StageDetailsMinDuration time.Duration
	// StageDetailsRequests bounds the requests for stage details per sync
	// of an application attempt (one poll); stages beyond it are written
	// without details, which says so. Default 20; negative: none.
	StageDetailsRequests int
	// FailedTasksPerStage bounds the failed tasks read of a stage attempt;
	// default 20.
	FailedTasksPerStage int
	// Stream, when set, reads the metrics stream for the accounting and
	// reconciliation of each application (see usage.go), UsageDelay after
	// its end (default 1m: its processes' last reports are in by then).
	Stream     Stream
	UsageDelay time.Duration
	// StreamRetry is how long a failing read of the stream is retried,
	// with backoff, before the accounting goes without it (default 6h: an
	// InfluxDB restart or upgrade must not cost applications their
	// accounting). The application is kept that long, even once its
	// source no longer lists it.
	StreamRetry time.Duration
	// CloseOutAfter is how long an application its source no longer
	// shows waits for another source (a History Server) to show its end
	// before its running items are closed out as UNKNOWN with what was
	// last seen (default 10m). With only live UIs among the sources, no
	// other source will show it: a minute is enough.
	CloseOutAfter time.Duration
	// LostDriverAfter is how long an attempt a History Server lists as
	// running, whose live UI went while it ran, waits with its event log
	// unread and its metrics quiet (the last half of it) before it is
	// closed out as lost (gone.go; default 10m). Shorter than the time a
	// History Server takes to read a completed log, an application that
	// ended would read lost.
	LostDriverAfter time.Duration
	Auth            Auth
	// Transport carries the requests (TLS settings live there); nil uses
	// http.DefaultTransport.
	Transport http.RoundTripper
	Sink      Sink
	// History, when set, receives spark_app_history: each application's
	// final usage again, by name rather than by application, for a target
	// that keeps it longer (docs/retention.md).
	History Sink
	Log     *zap.Logger
	Now     func() time.Time
}

// Defaults.
const (
	DefaultInterval         = 10 * time.Second
	DefaultTimeout          = sparkapi.DefaultTimeout
	DefaultLookback         = time.Hour
	DefaultMaxText          = 200
	DefaultMaxResponseBytes = sparkapi.DefaultMaxResponseBytes
	DefaultMaxApps          = 256
	DefaultNewAppsPerPoll   = 8

	DefaultStageDetailsMinDuration = attempt.DefaultStageDetailsMinDuration
	DefaultStageDetailsRequests    = attempt.DefaultStageDetailsRequests
	DefaultFailedTasksPerStage     = attempt.DefaultFailedTasksPerStage
	DefaultUsageDelay              = attempt.DefaultUsageDelay
	DefaultStreamRetry             = 6 * time.Hour
	DefaultCloseOutAfter           = 10 * time.Minute
	DefaultLostDriverAfter         = 10 * time.Minute
)

const (
	// recheck is how long after its end an application is still listed:
	// a History Server picks up a finished log with a delay, and a lost
	// application is handed over within it.
	recheck = 10 * time.Minute
	// giveUp is how long an id from the metrics that no source knew is
	// not admitted again for {app_id} templates.
	giveUp = 10 * time.Minute
	// lostAfter consecutive failed polls make a source lose its
	// applications.
	lostAfter = 3
	// maxBackoff bounds the wait after failures.
	maxBackoff = 5 * time.Minute
	// emitStripes is the number of locks that serialise one
	// application's emits.
	emitStripes = 64
	// parallel bounds the sources polled at once, but for slow ones
	// (startWorkers); maxWorkers bounds them all.
	parallel   = 8
	maxWorkers = 4 * parallel
	// syncsPerSource bounds the applications of one configured source
	// synchronised at once (pollSource).
	syncsPerSource = 4
)

// source is one configured URL, or one instance of a template for one
// application. Its fields after busy are only used by the goroutine
// polling it.
type source struct {
	name  string // as configured, for logs and metrics
	base  string // without trailing slash, template filled
	appID string // template instances: the application they serve
	// rm is the ResourceManager's base URL of a YARN proxy template's
	// instance (…/proxy/{app_id}), whose REST API says the application's
	// queue and user; "" for other sources.
	rm string
	// slots holds a token per application being synchronised, at most
	// syncsPerSource; nil for a template instance, which serves one
	// application and synchronises it within its poll.
	slots chan struct{}

	busy atomic.Bool

	apps     map[attempt.Key]*appState
	done     map[attempt.Key]int64 // attempts written in their final state, by end ms
	listed   bool                  // a listing has succeeded once
	failures int                   // consecutive failed listings
	backoff  int                   // of them, those that back off: not refused, not a UI starting up
	next     time.Time
}

func newSource(name, base, appID string) *source {
	s := &source{name: name, base: strings.TrimRight(base, "/"), appID: appID,
		apps: map[attempt.Key]*appState{}, done: map[attempt.Key]int64{}}
	if appID == "" {
		s.slots = make(chan struct{}, syncsPerSource)
	}
	if rm, ok := strings.CutSuffix(strings.TrimRight(name, "/"), yarnProxy); ok && appID != "" && !strings.Contains(rm, "{app_id}") {
		s.rm = rm
	}
	return s
}

// yarnProxy ends the path of a YARN ResourceManager's proxy template.
const yarnProxy = "/proxy/{app_id}"

// Poller polls the sources and writes points to the sink. Create it with
// New, then call Run, or PollOnce from tests.
type Poller struct {
	cfg       Config
	client    *sparkapi.Client
	reader    *attempt.Reader // reads the attempts synced, through client (get)
	log       *zap.Logger
	static    []*source
	templates []template

	mu       sync.Mutex
	perApp   map[string][]*source  // template instances by application id
	retired  map[string]time.Time  // application id → when its template instances were retired
	nominees map[string]int        // ids seen since the last poll → how often (see discovery.go)
	refused  map[string]uint64     // ids refused for {app_id}, by reason
	queue    []*source             // sources due, waiting for a worker
	running  int                   // workers running
	polling  map[*source]time.Time // sources being polled → when their poll began
	// wake asks the next round to poll the failing configured sources
	// now; woken holds the application ids that have woken them.
	wake  bool
	woken map[string]struct{}
	// Applications only the stream shows (unseen.go): metrics keys no
	// source has answered for, and those answered for (shown, denied or
	// written) lately.
	unseen   map[string]*unseenApp
	answered map[string]time.Time
	owners   map[attempt.Key]*source          // which source syncs an attempt
	seconded map[attempt.Key]map[*source]bool // other sources that showed an owned attempt, counted once
	orphans  map[attempt.Key]*appState        // attempts whose source lost them
	// Drivers gone under a History Server (gone.go): the attempts a live
	// UI lost while they ran, the live UIs that list an attempt another
	// source syncs, and when the stream last named a dropped attempt's
	// id or metrics key (zero: not since).
	drops       map[attempt.Key]*drop
	liveSeconds map[attempt.Key]liveSecond
	watched     map[string]*watch
	errors      map[[2]string]uint64 // (source, kind) → failed polls
	facts       *facts.Store         // facts written, and their journal
	addrs       addrBook             // where Spark lists each process (peers.go)
	inFlight    sync.WaitGroup
	// emitLocks serialise the emits of one application (emit), striped
	// by its id.
	emitLocks [emitStripes]sync.Mutex
	emitSeed  maphash.Seed

	stats counters
}

type counters struct {
	polls, points atomic.Uint64
	closedOut     atomic.Uint64
	invalid       atomic.Uint64
	invalidLogged atomic.Int64 // unix s of the last log of impossible values
	secondSource  atomic.Uint64
	deferred      atomic.Uint64
	unseenWritten atomic.Uint64 // applications written as seen only in the stream
	unseenFull    atomic.Uint64 // metrics keys not kept: the table was full
}

// WithDefaults fills zero values.
func (cfg Config) WithDefaults() Config {
	cfg.Interval = cmp.Or(cfg.Interval, DefaultInterval)
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	cfg.Lookback = cmp.Or(cfg.Lookback, DefaultLookback)
	cfg.MaxText = cmp.Or(cfg.MaxText, DefaultMaxText)
	cfg.MaxResponseBytes = cmp.Or(cfg.MaxResponseBytes, DefaultMaxResponseBytes)
	cfg.MaxApps = cmp.Or(cfg.MaxApps, DefaultMaxApps)
	cfg.NewAppsPerPoll = cmp.Or(cfg.NewAppsPerPoll, DefaultNewAppsPerPoll)
	// The settings of reading an attempt take attempt's defaults.
	a := cfg.Attempt().WithDefaults()
	cfg.StageDetailsMinDuration, cfg.StageDetailsRequests, cfg.FailedTasksPerStage, cfg.UsageDelay, cfg.Now =
		a.StageDetailsMinDuration, a.StageDetailsRequests, a.FailedTasksPerStage, a.UsageDelay, a.Now
	cfg.StreamRetry = cmp.Or(cfg.StreamRetry, DefaultStreamRetry)
	cfg.CloseOutAfter = cmp.Or(cfg.CloseOutAfter, DefaultCloseOutAfter)
	cfg.LostDriverAfter = cmp.Or(cfg.LostDriverAfter, DefaultLostDriverAfter)
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	return cfg
}

// Attempt is the part of cfg that reads one application attempt: what
// `sparkpulse report` reads an application with, as the poller would.
func (cfg Config) Attempt() attempt.Config {
	return attempt.Config{Sources: cfg.Sources, Timeout: cfg.Timeout, MaxResponseBytes: cfg.MaxResponseBytes, Auth: cfg.Auth,
		Transport: cfg.Transport, StageDetailsMinDuration: cfg.StageDetailsMinDuration, StageDetailsRequests: cfg.StageDetailsRequests,
		FailedTasksPerStage: cfg.FailedTasksPerStage, Stream: cfg.Stream, UsageDelay: cfg.UsageDelay, Now: cfg.Now}
}

// Validate checks the settings; zero values select the defaults.
func (cfg Config) Validate() error {
	var errs []error
	if cfg.Interval != 0 && cfg.Interval < time.Second {
		errs = append(errs, fmt.Errorf("interval %s: must be at least 1s", cfg.Interval))
	}
	if cfg.Timeout < 0 || cfg.Lookback < 0 {
		errs = append(errs, fmt.Errorf("timeout %s, lookback %s: must not be negative", cfg.Timeout, cfg.Lookback))
	}
	if cfg.MaxText != 0 && cfg.MaxText < 20 {
		errs = append(errs, fmt.Errorf("max-text %d: must be at least 20", cfg.MaxText))
	}
	if cfg.UsageDelay < 0 || cfg.StreamRetry < 0 || cfg.CloseOutAfter < 0 || cfg.LostDriverAfter < 0 {
		errs = append(errs, fmt.Errorf("usage-delay %s, stream-retry %s, close-out-after %s, lost-driver-after %s: must not be negative", cfg.UsageDelay, cfg.StreamRetry, cfg.CloseOutAfter, cfg.LostDriverAfter))
	}
	if cfg.FailedTasksPerStage < 0 {
		errs = append(errs, fmt.Errorf("failed-tasks-per-stage %d: must not be negative", cfg.FailedTasksPerStage))
	}
	if cfg.MaxResponseBytes < 0 || cfg.MaxApps < 0 || cfg.NewAppsPerPoll < 0 {
		errs = append(errs, fmt.Errorf("max-response-bytes %d, max-apps %d, new-apps-per-poll %d: must not be negative",
			cfg.MaxResponseBytes, cfg.MaxApps, cfg.NewAppsPerPoll))
	}
	return errors.Join(errs...)
}

// New validates cfg and returns a Poller.
func New(cfg Config) (*Poller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("annotate: %w", err)
	}
	cfg = cfg.WithDefaults()
	if cfg.Sink == nil {
		return nil, errors.New("annotate: no sink")
	}
	p := &Poller{
		cfg:         cfg,
		client:      newClient(cfg),
		perApp:      map[string][]*source{},
		retired:     map[string]time.Time{},
		nominees:    map[string]int{},
		woken:       map[string]struct{}{},
		unseen:      map[string]*unseenApp{},
		polling:     map[*source]time.Time{},
		answered:    map[string]time.Time{},
		emitSeed:    maphash.MakeSeed(),
		refused:     map[string]uint64{},
		owners:      map[attempt.Key]*source{},
		seconded:    map[attempt.Key]map[*source]bool{},
		orphans:     map[attempt.Key]*appState{},
		watched:     map[string]*watch{},
		drops:       map[attempt.Key]*drop{},
		liveSeconds: map[attempt.Key]liveSecond{},
		errors:      map[[2]string]uint64{},
	}
	// A source that fails keeps failing every poll: a few entries a second.
	p.log = cfg.Log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, time.Second, 3, 0)
	}))
	p.facts = facts.New(facts.Config{Sink: cfg.Sink, History: cfg.History, Timeout: cfg.Timeout, Log: p.log, Now: cfg.Now})
	p.reader = &attempt.Reader{Get: p.get, StageDetailsMinDuration: cfg.StageDetailsMinDuration,
		StageDetailsRequests: cfg.StageDetailsRequests, FailedTasksPerStage: cfg.FailedTasksPerStage, Now: cfg.Now,
		// A stage whose end fact is in the ledger was read before a restart.
		EndWritten: func(st *attempt.State, k attempt.StageKey, startMs int64) bool {
			return p.facts.Has(st.Key.App, facts.NewKey(schema.MeasurementStage, stageFactTime(k, startMs, phaseEnd)), p.cfg.Now())
		}}
	var errs []error
	for i, s := range cfg.Sources {
		if err := CheckSource(s); err != nil {
			errs = append(errs, fmt.Errorf("source %d %q: %w", i+1, s, err))
			continue
		}
		if strings.Contains(s, "{app_id}") {
			p.templates = append(p.templates, parseTemplate(s))
		} else {
			p.static = append(p.static, newSource(s, s, ""))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
}

// CheckSource validates one source URL or template.
func CheckSource(s string) error {
	u, err := url.Parse(strings.ReplaceAll(s, "{app_id}", "application_0_0"))
	var ue *url.Error
	switch {
	case errors.As(err, &ue):
		return ue.Err // without the URL, which may hold a password
	case err != nil:
		return err
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("must start with http:// or https://")
	case u.Host == "":
		return errors.New("has no host")
	case u.User != nil:
		return errors.New("must not hold credentials; use the username, password or token settings")
	case u.RawQuery != "" || u.Fragment != "":
		return errors.New("must not have a query or fragment")
	case strings.Count(s, "{") != strings.Count(s, "{app_id}"):
		return errors.New("the only placeholder is {app_id}")
	}
	return checkTemplate(s)
}

// Run polls every source each Interval until ctx ends, then waits for the
// polls in flight. A source still busy with its last poll is skipped.
// Once Facts().Recover has opened the journal, it checkpoints beside the
// polls, each Interval once a minute has passed: a checkpoint waits for
// the sink, which an InfluxDB outage makes it wait every time, and
// polling must go on.
func (p *Poller) Run(ctx context.Context) {
	checkpoints := make(chan struct{})
	go func() {
		defer close(checkpoints)
		p.facts.Checkpoints(ctx, p.cfg.Interval)
	}()
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	for {
		p.round(ctx, false)
		select {
		case <-ctx.Done():
			p.inFlight.Wait()
			<-checkpoints
			return
		case <-t.C:
		}
	}
}

// PollOnce polls every source that is due and returns when all are done.
func (p *Poller) PollOnce(ctx context.Context) {
	p.round(ctx, true)
}

// round admits new applications, queues every due, idle source for the
// workers, and handles lost applications. With wait it returns once the
// queue is done.
func (p *Poller) round(ctx context.Context, wait bool) {
	now := p.cfg.Now()
	p.mu.Lock()
	p.admit()
	due := slices.Clone(p.static)
	for _, l := range p.perApp {
		due = append(due, l...)
	}
	wake := p.wake
	p.wake = false
	for _, s := range due {
		// busy first: s.next is the polling goroutine's until then.
		if !s.busy.CompareAndSwap(false, true) {
			continue
		}
		// A configured source that is failing is asked again at once
		// when the stream names an application it has not seen: a short
		// application must not end inside a backoff.
		if !now.Before(s.next) || wake && s.appID == "" && s.failures > 0 {
			p.queue = append(p.queue, s)
		} else {
			s.busy.Store(false)
		}
	}
	p.mu.Unlock()
	p.startWorkers(ctx, wait)
	if wait {
		p.inFlight.Wait()
	}
	p.closeOutOrphans(now)
	p.closeOutUnseen(ctx, now)
	p.facts.Forget(now, p.factsKept())
	p.addrs.forget(now.Add(-recheck - max(giveUp, p.cfg.CloseOutAfter)))
}

// factsKept is how long the ledger keeps an application's facts after
// its last check: an application is listed again, at most, for recheck
// after it ended, or after a restart for Lookback.
func (p *Poller) factsKept() time.Duration {
	return p.cfg.Lookback + recheck + max(giveUp, p.cfg.CloseOutAfter)
}

// Facts is the record of the facts written, which keeps each from being
// written twice: across restarts once Load and Recover have read the last
// run's, before Run.
func (p *Poller) Facts() *facts.Store { return p.facts }

// startWorkers starts workers for the queue. A worker polls queued
// sources until the queue is empty. At most parallel workers are busy
// with a poll younger than Interval, or between two polls: a source that
// answers slowly (a UI taking seconds per answer, or one that never
// answers before the timeout) holds its worker, but not the others'
// turns, so the sources that answer keep their interval beside it. At
// most maxWorkers run in all.
func (p *Poller) startWorkers(ctx context.Context, patient bool) {
	for {
		p.mu.Lock()
		if len(p.queue) == 0 || p.running >= maxWorkers || p.freshLocked() >= parallel {
			p.mu.Unlock()
			return
		}
		p.running++
		p.mu.Unlock()
		p.inFlight.Add(1)
		go func() {
			defer p.inFlight.Done()
			defer func() {
				p.mu.Lock()
				p.running--
				p.mu.Unlock()
			}()
			for s := p.next(); s != nil; s = p.next() {
				p.pollSource(ctx, s, patient)
				p.mu.Lock()
				delete(p.polling, s)
				p.mu.Unlock()
				s.busy.Store(false)
			}
		}()
	}
}

// freshLocked is how many workers count against parallel: those between
// two polls, and those whose poll began less than Interval ago. Called
// with mu held.
func (p *Poller) freshLocked() int {
	now := p.cfg.Now()
	n := p.running - len(p.polling)
	for _, began := range p.polling {
		if now.Sub(began) < p.cfg.Interval {
			n++
		}
	}
	return n
}

// next takes a source off the queue, nil when it is empty.
func (p *Poller) next() *source {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queue) == 0 {
		return nil
	}
	s := p.queue[0]
	p.queue[0] = nil
	p.queue = p.queue[1:]
	p.polling[s] = p.cfg.Now()
	return s
}

// pollSource lists a source's applications and synchronises each attempt
// it owns. A configured source synchronises up to syncsPerSource at once
// and, unless patient (PollOnce), leaves those still running after half
// an interval to its next poll.
func (p *Poller) pollSource(ctx context.Context, s *source, patient bool) {
	now := p.cfg.Now()
	p.stats.polls.Add(1)
	apps, err := p.list(ctx, s, now)
	if err != nil {
		if ctx.Err() == nil {
			p.listFailed(ctx, s, err, now)
		}
		return
	}
	if s.failures > 0 {
		p.log.Info("Spark REST source answers again", zap.String("source", s.name), zap.String("url", s.base))
	}
	s.failures, s.backoff, s.listed = 0, 0, true
	listed, ok := p.syncListed(ctx, s, apps, now, patient)
	if !ok {
		return
	}
	p.closeUnlisted(ctx, s, listed, now)
}

// listFailed retries, retires or loses a source whose listing failed
// with err: soon where nothing listens yet, after a backoff otherwise; an
// id of the metrics no source knows is retired; a source failing
// lostAfter times in a row loses its applications.
func (p *Poller) listFailed(ctx context.Context, s *source, err error, now time.Time) {
	s.failures++
	refused := sparkapi.IsRefused(err)
	if refused || sparkapi.IsStartingUp(err) {
		// Nothing listens, as at a driver's UI port between two
		// applications, or the driver's UI says it is starting:
		// asking again costs nothing, and the application's UI is
		// read as soon as it is up. Neither makes a later failure
		// (a first slow answer) back off longer.
		s.next = now.Add(p.cfg.Interval)
	} else {
		s.backoff++
		s.next = now.Add(min(p.cfg.Interval<<min(s.backoff, 16), maxBackoff))
	}
	p.countError(s, err)
	if !s.listed && errorKind(err) != kindWrongApp && p.yarnVouches(ctx, s) {
		// A YARN application starting up: its UI answers within
		// moments. Asked again at the next poll, not retired.
		s.next = now.Add(p.cfg.Interval)
		p.log.Debug("YARN application's UI not answering yet", zap.String("url", s.base), zap.Error(err))
		return
	}
	if unproven(s, err) {
		// An id from the metrics that no source knows: not logged per
		// id, as a flood of them would flood the log.
		p.mu.Lock()
		p.retireLocked(s.appID)
		if sparkapi.IsNotFound(err) {
			// Spark's word that it runs no such application: the id
			// gets no facts of the stream's either (unseen.go).
			p.answerLocked(s.appID)
		}
		p.mu.Unlock()
		return
	}
	if !refused || s.failures&(s.failures-1) == 0 {
		// A refused source is logged at its 1st, 2nd, 4th, 8th… failure:
		// an idle driver UI port is asked every interval.
		p.log.Warn("Spark REST source failed", zap.String("source", s.name), zap.String("url", s.base),
			zap.Int("failures", s.failures), zap.Duration("retry_in", s.next.Sub(now)), zap.Error(err))
	}
	if s.failures >= lostAfter {
		p.loseAll(ctx, s, now)
	}
}

// syncListed syncs the attempts a source listed (apps), each by the one
// source that owns it, and returns them; false when ctx ended. A
// configured source waits half an interval for its applications' syncs
// unless patient.
func (p *Poller) syncListed(ctx context.Context, s *source, apps []sparkapi.Application, now time.Time, patient bool) (map[attempt.Key]bool, bool) {
	byName := map[string][]interval{}
	for _, app := range apps {
		for _, att := range app.Attempts {
			end := att.EndMs()
			if !att.Completed || end <= 0 {
				end = now.UnixMilli()
			}
			byName[app.Name] = append(byName[app.Name], interval{attempt.Key{App: app.ID, Start: att.StartMs()}, end})
		}
	}
	overlaps := namesakes(byName)
	listed := map[attempt.Key]bool{}
	var started []*appState
	var deadline <-chan time.Time // nil: wait for every sync
	if !patient {
		t := time.NewTimer(p.cfg.Interval / 2)
		defer t.Stop()
		deadline = t.C
	}
	for _, app := range apps {
		for i := range app.Attempts {
			att := &app.Attempts[i]
			key := attempt.Key{App: app.ID, Start: att.StartMs()}
			listed[key] = true
			st := s.apps[key]
			if st != nil && p.settle(ctx, s, st) {
				continue // its sync still runs: left to a later poll
			}
			if end, ok := s.done[key]; ok && end == att.EndMs() {
				continue
			}
			if st = s.apps[key]; st != nil && !p.owns(s, key) {
				delete(s.apps, key) // a configured source took it over
				st = nil
			}
			if st == nil {
				if st = p.claim(s, key); st == nil {
					if isLive(att.Completed, att.StartMs(), att.LastUpdatedMs()) {
						p.secondedLive(s, key, now)
					}
					continue // another source syncs it
				}
				s.apps[key] = st
			}
			st.refresh(s, &app, att)
			if d := p.driverGone(st, now); d != nil {
				p.closeOutGone(s, key, st, d, now)
				continue
			}
			if ids := overlaps[key]; ids != nil && st.namesakes == nil {
				st.namesakes = ids // kept: a namesake that ended may drop out of later listings
			}
			if s.slots == nil {
				p.synced(ctx, s, st, p.syncApp(ctx, st, now))
			} else if p.startSync(ctx, s, st, now, deadline) {
				started = append(started, st)
			}
			if ctx.Err() != nil {
				return nil, false
			}
		}
	}
	// A configured source waits half an interval for its applications'
	// syncs; one that is slower (a large or slow application in a History
	// Server) is left running and taken at a later poll, so that it does
	// not hold the source's other applications to its pace.
	for _, st := range started {
		if st.syncing == nil {
			continue // listed twice, and taken already
		}
		if deadline != nil {
			select {
			case <-st.syncing:
			case <-deadline:
				deadline = closed
			}
		} else {
			<-st.syncing
		}
		p.settle(ctx, s, st)
	}
	return listed, ctx.Err() == nil
}

// closeUnlisted settles the attempts the source no longer lists: one read
// in full after its end is accounted and finished, any other lost; and
// forgets the attempts done long enough ago.
func (p *Poller) closeUnlisted(ctx context.Context, s *source, listed map[attempt.Key]bool, now time.Time) {
	p.mu.Lock()
	p.dropSecondsLocked(s, listed, now)
	p.mu.Unlock()
	for key, st := range s.apps {
		if listed[key] || p.settle(ctx, s, st) || st.final {
			continue
		}
		if st.Completed && st.endRead && !st.accounted {
			// Read in full after its end, waiting only for the stream:
			// the source need not list it any more.
			p.account(ctx, st, now)
			p.emit(st, now, false)
			if st.final = st.accounted; st.final {
				p.finish(s, key, st.End)
			}
		} else {
			p.lose(s, key, st, now)
		}
	}
	for key, end := range s.done {
		// A running attempt closed out as lost (gone.go), end -1, is
		// remembered while the source lists it running.
		if end < 0 && !listed[key] || end >= 0 && end < now.Add(-recheck-p.cfg.Lookback).UnixMilli() {
			delete(s.done, key)
		}
	}
}

// closed is a channel that is always ready.
var closed = func() chan time.Time {
	c := make(chan time.Time)
	close(c)
	return c
}()

// startSync starts a sync of st beside the poll, once the source has a
// slot for it; or, when deadline passes first, leaves it to the next
// poll and reports false.
func (p *Poller) startSync(ctx context.Context, s *source, st *appState, now time.Time, deadline <-chan time.Time) bool {
	select {
	case s.slots <- struct{}{}:
	case <-deadline:
		return false
	case <-ctx.Done():
		return false
	}
	done := make(chan struct{})
	st.syncing = done
	p.inFlight.Add(1)
	go func() {
		defer p.inFlight.Done()
		st.syncErr = p.syncApp(ctx, st, now)
		<-s.slots
		close(done)
	}()
	return true
}

// settle takes the outcome of st's sync if it has ended, and reports
// whether it still runs.
func (p *Poller) settle(ctx context.Context, s *source, st *appState) (running bool) {
	if st.syncing == nil {
		return false
	}
	select {
	case <-st.syncing:
	default:
		return true
	}
	st.syncing = nil
	err := st.syncErr
	st.syncErr = nil
	p.synced(ctx, s, st, err)
	return false
}

// synced handles the outcome of a sync of st: a failure is counted and
// logged, a final state finishes the attempt.
func (p *Poller) synced(ctx context.Context, s *source, st *appState, err error) {
	if err != nil {
		if ctx.Err() == nil {
			p.countError(s, err)
			p.log.Warn("Spark REST application sync failed", zap.String("source", s.name),
				zap.String("application", st.Key.String()), zap.Error(err))
		}
		return
	}
	if st.final {
		p.finish(s, st.Key, st.End)
	}
}

// list asks a source for its running and recently ended applications. The
// first listing of a source reaches back Lookback.
func (p *Poller) list(ctx context.Context, s *source, now time.Time) ([]sparkapi.Application, error) {
	if s.appID != "" {
		var app sparkapi.Application
		u := s.base + "/api/v1/applications/" + url.PathEscape(s.appID)
		if err := p.get(ctx, u, &app); err != nil {
			return nil, err
		}
		if app.ID != s.appID {
			return nil, &sparkapi.Error{Kind: kindWrongApp, URL: u, Err: fmt.Errorf("answered for application %q: refused", trim(app.ID, 100))}
		}
		return []sparkapi.Application{app}, nil
	}
	since := now.Add(-recheck)
	if !s.listed {
		since = now.Add(-max(p.cfg.Lookback, recheck))
	}
	var apps []sparkapi.Application
	err := p.get(ctx, s.base+"/api/v1/applications?minEndDate="+url.QueryEscape(formatQueryDate(since.UnixMilli())), &apps)
	return apps, err
}

// claim makes s the owner of key, taking over a lost attempt's state, and
// returns the state; or nil when another source owns it.
func (p *Poller) claim(s *source, key attempt.Key) *appState {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answerLocked(key.App) // shown, whether or not its facts are written
	if o := p.owners[key]; o != nil && o != s && o.appID != "" && s.appID == "" {
		// A configured source takes an application over from a template
		// instance, whose URL the metrics chose: with its own state, as
		// the instance's worker may be reading it; the instance lets it go
		// at its next poll (owns), and the ledger keeps facts once.
		p.owners[key] = s
		p.stats.secondSource.Add(1)
		p.log.Info("Spark application taken over by a configured source from an {app_id} template's",
			zap.String("application", key.String()), zap.String("template", o.name), zap.String("source", s.name))
		return p.newAppStateLocked(key)
	}
	if o := p.owners[key]; o != nil && o != s {
		if p.seconded[key] == nil {
			p.seconded[key] = map[*source]bool{}
		}
		if !p.seconded[key][s] {
			p.seconded[key][s] = true
			p.stats.secondSource.Add(1)
			p.log.Info("Spark application shown by a second source: the first one's answers are written",
				zap.String("application", key.String()), zap.String("first", o.name), zap.String("second", s.name))
		}
		return nil
	}
	p.owners[key] = s
	if st := p.orphans[key]; st != nil {
		delete(p.orphans, key)
		st.lostAt = time.Time{}
		st.synced = false // the new source is read in full once
		p.log.Info("Spark application taken over by another source", zap.String("application", key.String()),
			zap.String("source", s.name), zap.String("url", s.base))
		return st
	}
	return p.newAppStateLocked(key)
}

// newAppStateLocked starts the state of an attempt a source claims. An
// application that a YARN proxy template serves keeps its
// ResourceManager, whichever source reads it (a History Server takes it
// over from the template's instance): YARN's word on its queue, user and
// what it held is read from there (sync.go, usage.go). Called with mu
// held.
func (p *Poller) newAppStateLocked(key attempt.Key) *appState {
	st := newAppState(key)
	st.rm = p.rmLocked(key.App)
	return st
}

// rmLocked is the ResourceManager whose proxy serves the application's
// UI, from its YARN proxy template's instance, "" without one. Called
// with mu held.
func (p *Poller) rmLocked(app string) string {
	for _, inst := range p.perApp[app] {
		if inst.rm != "" {
			return inst.rm
		}
	}
	return ""
}

// owns reports whether s still syncs key.
func (p *Poller) owns(s *source, key attempt.Key) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.owners[key] == s
}

// finish forgets an attempt written in its final state.
func (p *Poller) finish(s *source, key attempt.Key, end int64) {
	delete(s.apps, key)
	s.done[key] = end
	p.mu.Lock()
	if p.owners[key] == s { // not taken over meanwhile
		delete(p.owners, key)
		delete(p.seconded, key)
		p.forgetLocked(key)
	}
	if s.appID != "" {
		p.retireLocked(s.appID)
	}
	p.mu.Unlock()
}

// retireLocked stops polling the template instances of an application.
func (p *Poller) retireLocked(app string) {
	delete(p.perApp, app)
	p.retired[app] = p.cfg.Now()
}

// lose hands an attempt that s no longer shows to whichever source shows
// it next.
func (p *Poller) lose(s *source, key attempt.Key, st *appState, now time.Time) {
	delete(s.apps, key)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.owners[key] != s {
		return // taken over by a configured source meanwhile
	}
	delete(p.owners, key)
	delete(p.seconded, key)
	st.lostAt = now
	p.orphans[key] = st
	if isLive(st.Completed, st.Key.Start, st.Updated) {
		p.dropLocked(key, now, st.lastSeen)
	}
	p.log.Info("Spark application no longer shown by its source; waiting for another source (a History Server) to show it",
		zap.String("application", key.String()), zap.String("source", s.name), zap.String("url", s.base))
}

// loseAll is lose for every attempt of a source that stopped answering,
// but those whose sync still runs: a later poll loses them.
func (p *Poller) loseAll(ctx context.Context, s *source, now time.Time) {
	p.mu.Lock()
	p.dropSecondsLocked(s, nil, now)
	p.mu.Unlock()
	for key, st := range s.apps {
		if p.settle(ctx, s, st) || st.final {
			continue
		}
		p.lose(s, key, st, now)
	}
	if s.appID != "" {
		p.mu.Lock()
		p.retireLocked(s.appID)
		p.mu.Unlock()
	}
}

// closeOutOrphans writes the running items of attempts lost for longer
// than CloseOutAfter with status UNKNOWN, and forgets them.
func (p *Poller) closeOutOrphans(now time.Time) {
	p.mu.Lock()
	var expired []*appState
	for key, st := range p.orphans {
		if now.Sub(st.lostAt) >= p.cfg.CloseOutAfter {
			expired = append(expired, st)
			delete(p.orphans, key)
			p.forgetLocked(key)
		}
	}
	p.mu.Unlock()
	for _, st := range expired {
		n := p.emit(st, st.lastSeen, true)
		p.stats.closedOut.Add(1)
		p.log.Warn("Spark application closed out: no source has shown it since it was lost; its running items are written as UNKNOWN",
			zap.String("application", st.Key.String()), zap.Duration("lost_for", now.Sub(st.lostAt)), zap.Int("points", n))
	}
}

func (p *Poller) countError(s *source, err error) {
	kind := errorKind(err)
	p.mu.Lock()
	p.errors[[2]string{s.name, kind}]++
	p.mu.Unlock()
}

// Stats is a snapshot of a Poller's counters.
type Stats struct {
	Requests  uint64                       // HTTP requests made
	Bytes     uint64                       // response bytes read
	Polls     uint64                       // polls of a source
	Points    uint64                       // points handed to the sink
	ClosedOut uint64                       // lost attempts closed out as UNKNOWN
	Errors    map[string]map[string]uint64 // source → kind (network, http_status, decode, wrong_app) → failures
	Tracked   int                          // attempts being synchronised
	Lost      int                          // attempts waiting for another source
	Sources   int                          // configured sources plus template instances
	Refused   map[string]uint64            // application ids refused for {app_id}, by reason
	// StageDetails counts the stage attempts that ended by what became of
	// their details: read, short and budget (skipped), unavailable (read,
	// and the source had none: counted in read too).
	StageDetails map[string]uint64
	// Invalid counts values a source answered that were not written:
	// peak metric names not of Spark's form, or past 40 on one item, and
	// numbers no Spark could have written (sparkapi.Check), read as absent.
	Invalid uint64
	// Capped counts what the bounds on one application turned away:
	// executors past attempt.MaxExecutors (not tracked), and points past an
	// application's share of a poll (written at a later poll).
	Capped map[string]uint64
	// SecondSource counts applications a second source showed while
	// another answered for them (once per application and source): the
	// first one's answers are written.
	SecondSource uint64
	// StreamOnly counts the metrics keys of applications no source showed
	// (unseen.go): written (their stream facts), not_kept (the table was
	// full); StreamOnlyWaiting is the keys waiting, quiet or not.
	StreamOnly        map[string]uint64
	StreamOnlyWaiting int
	// JournalDamaged counts the journal's whole records that failed
	// their checksum at a start, skipped (facts.Store.Damaged).
	JournalDamaged uint64
}

// Stats returns the counters. Tracked only counts attempts of idle sources
// exactly; a source being polled is counted as it was when last idle.
func (p *Poller) Stats() Stats {
	reads := p.reader.Counts()
	st := Stats{
		Requests: p.client.Requests(), Bytes: p.client.Bytes(), Polls: p.stats.polls.Load(),
		Points: p.stats.points.Load(), ClosedOut: p.stats.closedOut.Load(), Invalid: p.stats.invalid.Load(), Errors: map[string]map[string]uint64{},
		Capped:       map[string]uint64{"executors": reads.CappedExecutors, "points": p.stats.deferred.Load()},
		SecondSource: p.stats.secondSource.Load(), JournalDamaged: p.facts.Damaged(),
		StreamOnly:   map[string]uint64{"written": p.stats.unseenWritten.Load(), "not_kept": p.stats.unseenFull.Load()},
		StageDetails: reads.Details,
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, v := range p.errors {
		if st.Errors[k[0]] == nil {
			st.Errors[k[0]] = map[string]uint64{}
		}
		st.Errors[k[0]][k[1]] = v
	}
	st.Tracked, st.Lost, st.StreamOnlyWaiting = len(p.owners), len(p.orphans), len(p.unseen)
	st.Refused = maps.Clone(p.refused)
	st.Sources = len(p.static)
	for _, l := range p.perApp {
		st.Sources += len(l)
	}
	return st
}
