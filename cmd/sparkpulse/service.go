package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sparkpulse/sparkpulse/annotate"
	"github.com/sparkpulse/sparkpulse/delta"
	"github.com/sparkpulse/sparkpulse/graphite"
	"github.com/sparkpulse/sparkpulse/influx"
	"github.com/sparkpulse/sparkpulse/relay"
	"github.com/sparkpulse/sparkpulse/selfmetrics"
)

// server is what TCP and UDP listeners have in common.
type server interface {
	Addr() net.Addr
	Serve() error
	Shutdown(ctx context.Context) error
	Stats() *graphite.Stats
}

// running is one started [[graphite]] block.
type running struct {
	*Listener
	srv    server
	relay  *relay.Relay
	writer *influx.Writer
	hist   prometheus.Histogram
}

// service is sparkpulse started from a Plan: listeners, relays, writers and
// the admin endpoint. Tests start it in-process on port 0.
type service struct {
	log      *zap.Logger
	blocks   []*running
	admin    *http.Server
	adminLn  net.Listener
	served   sync.WaitGroup
	tracker  *delta.Tracker // nil when the delta stage is off
	stateDir string
	stop     chan struct{} // ends background work

	registry *prometheus.Registry
	// sparkpulse's own metrics written to InfluxDB; nil when [internal] is off.
	reporter   *selfmetrics.Reporter
	reporterMu sync.Mutex // Report is called by the ticker and at shutdown
	intWriter  *influx.Writer

	// The annotation poller and its writer; nil without [annotate] urls.
	annotator *annotate.Poller
	annWriter *influx.Writer
	annStop   context.CancelFunc
	annDone   chan struct{}

	shutdownOnce sync.Once
	shutdownErr  error
}

// startService checks InfluxDB, then binds every socket before serving any,
// so a bad address fails start-up with nothing half-running.
func startService(ctx context.Context, plan *Plan, log *zap.Logger) (_ *service, err error) {
	s := &service{log: log, stateDir: plan.StateDir, stop: make(chan struct{})}
	defer func() {
		if err != nil {
			s.abort()
		}
	}()

	for _, w := range plan.Warnings {
		log.Warn(w)
	}
	for _, l := range plan.Listeners {
		for _, w := range l.Warnings {
			log.Warn(w, zap.String("listener", l.Name()))
		}
	}
	base, err := influxConfig(plan, log)
	if err != nil {
		return nil, err
	}
	targets := make([]influx.Target, 0, len(plan.Listeners)+1)
	for _, l := range plan.Listeners {
		targets = append(targets, l.Target)
	}
	if plan.Annotate != nil {
		targets = append(targets, plan.Annotate.Target)
	}
	if plan.Internal != nil {
		targets = append(targets, plan.Internal.Target)
	}
	checked := map[influx.Target]bool{}
	for _, t := range targets {
		if checked[t] {
			continue
		}
		checked[t] = true
		res, err := influx.Check(ctx, base, t, plan.InfluxDB.CreateDatabase)
		switch {
		case errors.Is(err, influx.ErrUnreachable):
			log.Warn("InfluxDB is not reachable; points are kept and sent when it is", zap.String("url", influx.RedactURL(base.URL)), zap.Error(err))
		case err != nil:
			return nil, err
		default:
			log.Info("InfluxDB target ready", zap.String("url", influx.RedactURL(base.URL)), zap.String("bucket", t.Bucket), zap.String("server", res.String()))
		}
	}

	if plan.Annotate != nil {
		if err := s.startAnnotator(plan, base, log); err != nil {
			return nil, err
		}
	}

	var deltas *relay.Deltas
	if plan.DeltaRules != nil {
		s.tracker = delta.New(plan.DeltaSettings, time.Now())
		s.loadState()
		deltas = &relay.Deltas{Rules: plan.DeltaRules, Tracker: s.tracker}
	}

	perLine := sampled(log)
	for _, l := range plan.Listeners {
		b := &running{Listener: l}
		b.hist = prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:        "sparkpulse_influxdb_write_duration_seconds",
			Help:        "Duration of write requests to InfluxDB.",
			ConstLabels: prometheus.Labels{"listener": l.Name()},
			Buckets:     prometheus.ExponentialBuckets(0.001, 2, 15),
		})
		wcfg := base
		wcfg.BatchSize = l.Config.BatchSize
		wcfg.BatchTimeout = time.Duration(l.Config.BatchTimeout)
		wcfg.Logger = log.With(zap.String("listener", l.Name()))
		wcfg.QueueDir = queueDir(plan.StateDir, l.Name(), l.Target)
		hist := b.hist
		wcfg.OnBatch = func(points int, took time.Duration, err error) { hist.Observe(took.Seconds()) }
		b.writer, err = influx.NewWriter(wcfg, l.Target)
		if err != nil {
			return nil, fmt.Errorf("[[graphite]] #%d: %w", l.Index, err)
		}
		s.blocks = append(s.blocks, b)
		rc := relay.Config{
			Mapper:    l.Mapper,
			Sink:      b.writer,
			Log:       perLine.With(zap.String("listener", l.Name())),
			CacheSize: l.Config.MaxCachedSeries,
		}
		if deltas != nil {
			rc.Deltas = &relay.Deltas{Rules: deltas.Rules, Tracker: deltas.Tracker, Bucket: l.Target.Bucket}
		}
		if s.annotator != nil {
			rc.OnApp, rc.AppTag = s.annotator.SeeApp, plan.Annotate.AppIDTag
		}
		// UDP senders cannot be slowed down: a full queue drops, counted,
		// rather than stop the reader draining the socket.
		rc.NonBlocking = l.Config.Protocol == "udp"
		b.relay = relay.New(rc)
		switch l.Config.Protocol {
		case "udp":
			u, err := graphite.ListenUDP(l.udpConfig(), b.relay)
			if err != nil {
				return nil, fmt.Errorf("[[graphite]] #%d: %w", l.Index, err)
			}
			b.srv = u
			if want := l.Config.UDPReadBuffer; want > 0 && u.ReadBufferGranted() < want {
				log.Warn("the kernel granted a smaller UDP receive buffer than udp-read-buffer asks for (raise net.core.rmem_max)",
					zap.String("listener", l.Name()), zap.Int("asked", want), zap.Int("granted", u.ReadBufferGranted()))
			}
			log.Info("listening", zap.String("listener", l.Name()), zap.Stringer("addr", u.Addr()),
				zap.Int("udp_read_buffer_granted", u.ReadBufferGranted()), zap.String("bucket", l.Target.Bucket))
		default:
			t, err := graphite.ListenTCP(l.tcpConfig(), b.relay)
			if err != nil {
				return nil, fmt.Errorf("[[graphite]] #%d: %w", l.Index, err)
			}
			b.srv = t
			log.Info("listening", zap.String("listener", l.Name()), zap.Stringer("addr", t.Addr()), zap.String("bucket", l.Target.Bucket))
		}
	}

	if plan.Internal != nil {
		wcfg := base
		wcfg.Logger = log.With(zap.String("listener", "internal"))
		wcfg.QueueDir = queueDir(plan.StateDir, "internal", plan.Internal.Target)
		if s.intWriter, err = influx.NewWriter(wcfg, plan.Internal.Target); err != nil {
			return nil, fmt.Errorf("[internal]: %w", err)
		}
	}
	warnOrphanQueues(plan, log)
	s.registry = prometheus.NewRegistry()
	s.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.registry.MustRegister(&statsCollector{blocks: s.blocks, tracker: s.tracker, annotator: s.annotator,
		annWriter: s.annWriter, intWriter: s.intWriter})
	for _, b := range s.blocks {
		s.registry.MustRegister(b.hist)
	}
	if plan.Internal != nil {
		host, _ := os.Hostname()
		s.reporter = selfmetrics.New(s.registry, s.intWriter, host, internalFamily)
		log.Info("writing sparkpulse's own metrics to InfluxDB", zap.String("bucket", plan.Internal.Target.Bucket),
			zap.Duration("interval", plan.Internal.Interval))
	}

	if plan.AdminAddr != "" {
		s.adminLn, err = net.Listen("tcp", plan.AdminAddr)
		if err != nil {
			return nil, fmt.Errorf("[admin] bind-address %q: %w", plan.AdminAddr, err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}))
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
		if plan.Pprof {
			mux.HandleFunc("GET /debug/pprof/", pprof.Index)
			mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
			mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
			mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		}
		s.admin = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		log.Info("admin endpoint", zap.String("metrics", "http://"+s.adminLn.Addr().String()+"/metrics"))
	}

	for _, b := range s.blocks {
		s.served.Go(func() {
			if err := b.srv.Serve(); err != nil {
				log.Error("listener stopped", zap.String("listener", b.Name()), zap.Error(err))
			}
		})
	}
	if s.admin != nil {
		s.served.Go(func() {
			if err := s.admin.Serve(s.adminLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("admin endpoint stopped", zap.Error(err))
			}
		})
	}
	if s.tracker != nil {
		s.served.Go(s.evictIdle)
	}
	if s.reporter != nil {
		s.served.Go(func() { s.reportEvery(plan.Internal.Interval) })
	}
	if s.annotator != nil {
		actx, cancel := context.WithCancel(context.Background())
		s.annStop, s.annDone = cancel, make(chan struct{})
		go func() {
			defer close(s.annDone)
			s.annotator.Run(actx)
		}()
	}
	return s, nil
}

// startAnnotator creates the annotation poller and the writer its points
// go through.
func (s *service) startAnnotator(plan *Plan, base influx.Config, log *zap.Logger) error {
	a := plan.Annotate
	transport := http.DefaultTransport.(*http.Transport).Clone()
	t, err := loadTLS("[annotate]", a.Config.TLSCA, "", "", a.Config.TLSInsecureSkipVerify)
	if err != nil {
		return err
	}
	transport.TLSClientConfig = t
	wcfg := base
	wcfg.Logger = log.With(zap.String("listener", "annotate"))
	wcfg.QueueDir = queueDir(plan.StateDir, "annotate", a.Target)
	// An item's point is rewritten as it progresses: one request at a time
	// keeps the writes in order, so an older state never lands last.
	wcfg.MaxInFlight = 1
	if s.annWriter, err = influx.NewWriter(wcfg, a.Target); err != nil {
		return fmt.Errorf("[annotate]: %w", err)
	}
	s.annotator, err = annotate.New(annotate.Config{
		Sources:   a.Config.URLs,
		Interval:  time.Duration(a.Config.Interval),
		Timeout:   time.Duration(a.Config.Timeout),
		Lookback:  time.Duration(a.Config.Lookback),
		MaxText:   a.Config.MaxText,
		Auth:      a.Auth,
		Transport: transport,
		Sink:      s.annWriter,
		Log:       log.With(zap.String("component", "annotate")),
	})
	if err != nil {
		return fmt.Errorf("[annotate]: %w", err)
	}
	log.Info("polling Spark REST sources for annotations", zap.Strings("urls", a.Config.URLs),
		zap.Duration("interval", time.Duration(a.Config.Interval)), zap.String("bucket", a.Target.Bucket), zap.Stringer("auth", a.Auth))
	return nil
}

// queueDir is a writer's disk queue under state-dir, named after the
// writer and its target; "" (no disk queue) without state-dir.
func queueDir(stateDir, writer string, t influx.Target) string {
	if stateDir == "" {
		return ""
	}
	safe := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' {
				return r
			}
			return '_'
		}, s)
	}
	return filepath.Join(stateDir, "queue", safe(writer)+"-"+safe(t.Bucket))
}

// warnOrphanQueues names the disk queues under state-dir that no writer of
// this config uses and that still hold points: a listener's address or
// target has changed since they were written. They are left as they are.
func warnOrphanQueues(plan *Plan, log *zap.Logger) {
	if plan.StateDir == "" {
		return
	}
	used := map[string]bool{}
	for _, l := range plan.Listeners {
		used[queueDir(plan.StateDir, l.Name(), l.Target)] = true
	}
	if plan.Annotate != nil {
		used[queueDir(plan.StateDir, "annotate", plan.Annotate.Target)] = true
	}
	if plan.Internal != nil {
		used[queueDir(plan.StateDir, "internal", plan.Internal.Target)] = true
	}
	root := filepath.Join(plan.StateDir, "queue")
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		if !e.IsDir() || used[dir] {
			continue
		}
		if n := influx.DiskQueueBytes(dir); n > 0 {
			log.Warn("a disk queue that no listener of this config uses holds undelivered points: give the listener its former bind-address and target to deliver them, or delete the directory",
				zap.String("dir", dir), zap.Int64("bytes", n))
		}
	}
}

// internalFamily selects what [internal] writes: sparkpulse's own metrics,
// and the process's CPU, memory and goroutines.
func internalFamily(name string) bool {
	return strings.HasPrefix(name, "sparkpulse_") || strings.HasPrefix(name, "process_") ||
		name == "go_goroutines" || name == "go_memstats_heap_inuse_bytes"
}

// reportEvery writes sparkpulse's own metrics to InfluxDB every interval
// until the service stops.
func (s *service) reportEvery(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			s.reportInternal(now)
		}
	}
}

// reportInternal writes one sample of sparkpulse's own metrics.
func (s *service) reportInternal(now time.Time) {
	s.reporterMu.Lock()
	defer s.reporterMu.Unlock()
	if _, err := s.reporter.Report(now); err != nil {
		s.log.Warn("own metrics not all written", zap.Error(err))
	}
}

// evictIdle removes idle delta series once a minute until the service stops.
func (s *service) evictIdle() {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			if n := s.tracker.Evict(now.UnixNano()); n > 0 {
				s.log.Debug("evicted idle delta series", zap.Int("series", n))
			}
		}
	}
}

const stateFile = "delta.state"

// loadState restores the delta baselines saved at the last shutdown. A
// missing, stale or damaged file is not an error: sparkpulse starts with
// no baselines, which costs one interval of deltas.
func (s *service) loadState() {
	if s.stateDir == "" {
		s.log.Info("no state-dir: delta baselines are not kept across restarts")
		return
	}
	path := filepath.Join(s.stateDir, stateFile)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err != nil {
		s.log.Warn("cannot read delta state; starting without baselines", zap.String("file", path), zap.Error(err))
		return
	}
	defer f.Close()
	n, err := s.tracker.Load(bufio.NewReader(f), time.Now().UnixNano())
	if err != nil {
		s.log.Warn("ignoring delta state; starting without baselines", zap.String("file", path), zap.Error(err))
		return
	}
	s.log.Info("restored delta baselines", zap.String("file", path), zap.Int("series", n))
}

// saveState writes the delta baselines for the next start, atomically.
func (s *service) saveState() error {
	if s.tracker == nil || s.stateDir == "" {
		return nil
	}
	if err := os.MkdirAll(s.stateDir, 0o750); err != nil {
		return fmt.Errorf("state-dir: %w", err)
	}
	path := filepath.Join(s.stateDir, stateFile)
	tmp, err := os.CreateTemp(s.stateDir, stateFile+".*")
	if err != nil {
		return fmt.Errorf("saving delta state: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if err := s.tracker.Save(tmp, time.Now().UnixNano()); err != nil {
		tmp.Close()
		return fmt.Errorf("saving delta state to %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("saving delta state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("saving delta state: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("saving delta state: %w", err)
	}
	s.log.Info("saved delta baselines", zap.String("file", path), zap.Int("series", s.tracker.Len()))
	return nil
}

// abort releases what a failed start-up opened.
func (s *service) abort() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, b := range s.blocks {
		if b.srv != nil {
			_ = b.srv.Shutdown(ctx)
		}
		_ = b.writer.Close(ctx)
	}
	for _, w := range []*influx.Writer{s.annWriter, s.intWriter} {
		if w != nil {
			_ = w.Close(ctx)
		}
	}
	if s.adminLn != nil {
		s.adminLn.Close()
	}
}

// Shutdown stops accepting, lets open connections finish, then delivers
// everything buffered to InfluxDB. Points that could not be delivered before
// ctx ends are reported in the error. Later calls wait for the first and
// return its result.
func (s *service) Shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() { s.shutdownErr = s.shutdown(ctx) })
	return s.shutdownErr
}

func (s *service) shutdown(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, b := range s.blocks {
		wg.Go(func() {
			if err := b.srv.Shutdown(ctx); err != nil {
				s.log.Warn("closing listener", zap.String("listener", b.Name()), zap.Error(err))
			}
		})
	}
	wg.Wait()
	close(s.stop)
	if s.annStop != nil {
		s.annStop()
		<-s.annDone
	}
	if s.reporter != nil {
		s.reportInternal(time.Now()) // the final counts
	}
	// Every line is read: the baselines are final.
	stateErr := s.saveState()
	if stateErr != nil {
		s.log.Error("delta baselines not saved; the next start loses one interval of deltas", zap.Error(stateErr))
	}
	errs := make([]error, len(s.blocks)+2)
	for i, b := range s.blocks {
		wg.Go(func() {
			if err := b.writer.Close(ctx); err != nil {
				s.log.Error("flushing to InfluxDB", zap.String("listener", b.Name()), zap.Error(err))
				errs[i] = fmt.Errorf("%s: %w", b.Name(), err)
			}
		})
	}
	for i, w := range []*influx.Writer{s.annWriter, s.intWriter} {
		if w == nil {
			continue
		}
		what := [...]string{"annotations", "own metrics"}[i]
		wg.Go(func() {
			if err := w.Close(ctx); err != nil {
				s.log.Error("flushing "+what+" to InfluxDB", zap.Error(err))
				errs[len(s.blocks)+i] = fmt.Errorf("%s: %w", what, err)
			}
		})
	}
	wg.Wait()
	if s.admin != nil {
		_ = s.admin.Shutdown(ctx)
	}
	s.served.Wait()
	for _, b := range s.blocks {
		st := b.relay.Stats()
		s.log.Info("stopped", zap.String("listener", b.Name()),
			zap.Uint64("lines", st.Lines.Load()), zap.Uint64("points", st.Points.Load()))
	}
	return errors.Join(append(errs, stateErr)...)
}

// influxConfig builds the writer settings shared by all blocks.
func influxConfig(plan *Plan, log *zap.Logger) (influx.Config, error) {
	in := plan.InfluxDB
	gzip := true
	if in.Gzip != nil {
		gzip = *in.Gzip
	}
	cfg := influx.Config{
		URL:            in.URL,
		Org:            in.Org,
		Token:          plan.Token,
		Gzip:           gzip,
		MaxInFlight:    in.MaxInFlight,
		MaxQueueBytes:  in.MaxQueueBytes,
		MaxDiskBytes:   in.MaxDiskQueueBytes,
		RequestTimeout: time.Duration(in.Timeout),
		Logger:         log,
	}
	t, err := loadTLS("[influxdb]", in.TLSCA, in.TLSCert, in.TLSKey, in.TLSInsecureSkipVerify)
	cfg.TLS = t
	return cfg, err
}

// loadTLS builds a client TLS configuration from a section's settings, or
// returns nil when they are all unset.
func loadTLS(section, ca, cert, key string, insecure bool) (*tls.Config, error) {
	if ca == "" && cert == "" && !insecure {
		return nil, nil
	}
	t := &tls.Config{InsecureSkipVerify: insecure} //nolint:gosec // only when the operator asks for it
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("%s tls-ca: %w", section, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s tls-ca %q: no PEM certificate found", section, ca)
		}
		t.RootCAs = pool
	}
	if cert != "" {
		c, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("%s tls-cert/tls-key: %w", section, err)
		}
		t.Certificates = []tls.Certificate{c}
	}
	return t, nil
}

// newLogger builds the service logger: human-readable console by default,
// JSON for log shippers.
func newLogger(c LogConfig, w io.Writer) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(c.Level)
	if err != nil {
		return nil, fmt.Errorf("[log] level %q: %w", c.Level, err)
	}
	ec := zap.NewProductionEncoderConfig()
	ec.EncodeTime = zapcore.ISO8601TimeEncoder
	var enc zapcore.Encoder
	if c.Format == "json" {
		enc = zapcore.NewJSONEncoder(ec)
	} else {
		ec.EncodeLevel = zapcore.CapitalLevelEncoder
		enc = zapcore.NewConsoleEncoder(ec)
	}
	return zap.New(zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), level)), nil
}

// sampled wraps log for per-line problems: per message and second, the first
// three entries are written and the rest only counted in /metrics.
func sampled(log *zap.Logger) *zap.Logger {
	return log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, time.Second, 3, 0)
	}))
}
