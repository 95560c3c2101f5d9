package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/net/netutil"

	"github.com/sparkpulse/sparkpulse/annotate"
	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/graphite"
	"github.com/sparkpulse/sparkpulse/influx"
	"github.com/sparkpulse/sparkpulse/queue"
	"github.com/sparkpulse/sparkpulse/relay"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/selfmetrics"
	"github.com/sparkpulse/sparkpulse/statefile"
)

// pipeline is sparkpulse started from a Plan. For each [[graphite]] block
// a listener reads lines, a relay turns them into points (with deltas from
// the shared delta state) and a writer batches, queues and sends them; the
// annotation poller and sparkpulse's own metrics have writers of their
// own; the admin endpoint serves /metrics, /healthz and /readyz.
//
// startPipeline opens everything (InfluxDB is checked, every socket bound)
// before anything is served, so a bad address fails start-up with nothing
// half-running. Ready is closed once it serves; Flush waits until what was
// received so far is delivered; Shutdown stops it, losing nothing that was
// received.
type pipeline struct {
	plan   *config.Plan
	log    *zap.Logger
	blocks []*block
	deltas *deltaState // nil when the delta stage is off
	// stateLock holds state-dir for this process while it runs.
	stateLock *statefile.Locked

	annotator *annotate.Poller // nil without [annotate] urls
	annWriter *influx.Writer
	hisWriter *influx.Writer // spark_app_history's, nil without [annotate] history-*
	annCancel context.CancelFunc
	annDone   chan struct{}

	reporter   *selfmetrics.Reporter // nil when [internal] is off
	reporterMu sync.Mutex            // Report is called by the ticker and at shutdown
	intWriter  *influx.Writer

	registry *prometheus.Registry
	admin    *http.Server
	adminLn  net.Listener

	ready    chan struct{}  // closed once everything serves
	stopping chan struct{}  // closed when Shutdown begins: background loops end
	bg       sync.WaitGroup // listeners, admin endpoint and background loops

	shutdownOnce sync.Once
	shutdownErr  error
}

// block is one started [[graphite]] block.
type block struct {
	*config.Listener
	srv    server
	relay  *relay.Relay
	writer *influx.Writer
	hist   prometheus.Histogram
}

// server is what TCP and UDP listeners have in common.
type server interface {
	Addr() net.Addr
	Serve() error
	Shutdown(ctx context.Context) error
	Stats() *graphite.Stats
}

func startPipeline(ctx context.Context, plan *config.Plan, log *zap.Logger) (_ *pipeline, err error) {
	p := &pipeline{plan: plan, log: log, ready: make(chan struct{}), stopping: make(chan struct{})}
	defer func() {
		if err != nil {
			p.abort()
		}
	}()
	p.logWarnings()
	if plan.StateDir != "" {
		// Before anything under it is read or written: a second process
		// on the directory would overwrite this one's state unseen.
		if p.stateLock, err = statefile.Lock(plan.StateDir); err != nil {
			return nil, err
		}
	}
	if err := p.checkTargets(ctx); err != nil {
		return nil, err
	}
	if err := p.openAnnotator(); err != nil {
		return nil, err
	}
	if plan.Deltas != nil {
		p.deltas = openDeltaState(plan, log)
	}
	for _, l := range plan.Listeners {
		b, err := p.openBlock(l)
		if err != nil {
			return nil, fmt.Errorf("[[graphite]] #%d: %w", l.Index, err)
		}
		p.blocks = append(p.blocks, b)
	}
	// Before any listener serves: the lines a crashed run took after its
	// last saved baselines come first (a minute of input at most).
	p.deltas.recover()
	if err := p.openInternal(); err != nil {
		return nil, err
	}
	p.warnOrphanQueues()
	if err := p.openAdmin(); err != nil {
		return nil, err
	}
	p.serve()
	return p, nil
}

// Ready is closed once every listener serves.
func (p *pipeline) Ready() <-chan struct{} { return p.ready }

// boundAddrs are the addresses the pipeline bound, what run --ready-file
// writes: they differ from the configured ones where a port is 0.
type boundAddrs struct {
	Graphite []boundListener `json:"graphite"`        // in the order of the enabled [[graphite]] blocks
	Admin    string          `json:"admin,omitempty"` // absent when the admin endpoint is off
}

type boundListener struct {
	Protocol string `json:"protocol"` // tcp or udp
	Address  string `json:"address"`  // host:port
}

// Bound returns the addresses of the listeners and of the admin endpoint.
func (p *pipeline) Bound() boundAddrs {
	a := boundAddrs{Graphite: []boundListener{}}
	for _, b := range p.blocks {
		a.Graphite = append(a.Graphite, boundListener{Protocol: b.Config.Protocol, Address: b.srv.Addr().String()})
	}
	if p.adminLn != nil {
		a.Admin = p.adminLn.Addr().String()
	}
	return a
}

// writeReadyFile writes a as JSON to path atomically (a file beside it,
// renamed over it), so that a reader sees either no file or all of it.
func writeReadyFile(path string, a boundAddrs) error {
	data, err := json.Marshal(a)
	if err != nil {
		return err
	}
	// Replaced whole, as the state files are: a reader sees none or all.
	err = statefile.Replace(filepath.Dir(path), filepath.Base(path), func(w io.Writer) error {
		_, err := w.Write(append(data, '\n'))
		return err
	})
	if err != nil {
		return fmt.Errorf("--ready-file: %w", err)
	}
	return nil
}

func (p *pipeline) logWarnings() {
	for _, w := range p.plan.Warnings {
		p.log.Warn(w)
	}
	for _, l := range p.plan.Listeners {
		if l.Templates != nil {
			for _, w := range l.Templates.Warnings() {
				p.log.Warn(w, zap.String("listener", l.Name()))
			}
		}
	}
}

// checkTargets checks every target InfluxDB will be written to, once each.
// An unreachable InfluxDB is not fatal: points are kept until it is up.
func (p *pipeline) checkTargets(ctx context.Context) error {
	url := influx.RedactURL(p.plan.Influx.WithDefaults().URL)
	for _, c := range checkTargets(ctx, p.plan, p.plan.CreateDatabase) {
		switch {
		case errors.Is(c.err, influx.ErrUnreachable):
			p.log.Warn("InfluxDB is not reachable; points are kept and sent when it is", zap.String("url", url), zap.Error(c.err))
			return nil
		case c.err != nil:
			return c.err
		}
		p.log.Info("InfluxDB target ready", zap.String("url", url), zap.String("bucket", c.target.Bucket), zap.String("server", c.res.String()))
		for _, w := range append(c.res.Warnings, schemaWarnings(p.plan, c.target, c.res)...) {
			p.log.Warn(w, zap.String("url", url), zap.String("bucket", c.target.Bucket))
		}
	}
	return nil
}

// targetCheck is the outcome of influx.Check for one target.
type targetCheck struct {
	target influx.Target
	res    influx.CheckResult
	err    error
}

// checkTargets checks each target the plan writes to, once; it stops at
// the first that cannot be reached.
func checkTargets(ctx context.Context, plan *config.Plan, create bool) []targetCheck {
	targets := make([]influx.Target, 0, len(plan.Listeners)+2)
	for _, l := range plan.Listeners {
		targets = append(targets, l.Target)
	}
	if a := plan.Annotate; a != nil {
		targets = append(targets, a.Target)
		if a.History != nil {
			targets = append(targets, *a.History)
		}
	}
	if in := plan.Internal; in != nil {
		targets = append(targets, in.Target)
	}
	var out []targetCheck
	checked := map[influx.Target]bool{}
	for _, t := range targets {
		if checked[t] {
			continue
		}
		checked[t] = true
		res, err := influx.Check(ctx, plan.Influx, t, create)
		out = append(out, targetCheck{t, res, err})
		if errors.Is(err, influx.ErrUnreachable) {
			break
		}
	}
	return out
}

// newWriter opens a writer for t named name (in logs, metrics and its disk
// queue's directory).
func (p *pipeline) newWriter(name string, cfg influx.Config, t influx.Target) (*influx.Writer, error) {
	cfg.Logger = p.log.With(zap.String("listener", name))
	cfg.Queue.Dir = queueDir(p.plan.StateDir, name, t)
	cfg.CreateMissing = p.plan.CreateDatabase // also when InfluxDB was down at start
	return influx.NewWriter(cfg, t)
}

// openBlock opens one [[graphite]] block: its writer, relay and listener.
func (p *pipeline) openBlock(l *config.Listener) (*block, error) {
	b := &block{Listener: l}
	b.hist = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:        "sparkpulse_influxdb_write_duration_seconds",
		Help:        "Duration of write requests to InfluxDB.",
		ConstLabels: prometheus.Labels{"listener": l.Name()},
		Buckets:     prometheus.ExponentialBuckets(0.001, 2, 15),
	})
	wcfg := l.Writer(p.plan.Influx)
	wcfg.OnBatch = func(_ int, took time.Duration, _ error) { b.hist.Observe(took.Seconds()) }
	var err error
	if b.writer, err = p.newWriter(l.Name(), wcfg, l.Target); err != nil {
		return nil, err
	}
	rc := relay.Config{
		Mapper:    l.Mapper,
		Sink:      b.writer,
		Log:       sampled(p.log).With(zap.String("listener", l.Name())),
		CacheSize: l.Config.MaxCachedSeries,
		MaxFuture: p.plan.MaxFuture,
		// UDP senders cannot be slowed down: a full queue drops, counted,
		// rather than stop the reader draining the socket.
		NonBlocking: l.Config.Protocol == "udp",
		JoinReports: l.Templates == nil && l.Schema == schema.Wide,
	}
	if a := p.plan.Annotate; a != nil {
		rc.AppTag = a.AppIDTag
	}
	if p.deltas != nil {
		rc.Deltas = &relay.Deltas{Rules: p.plan.Deltas.Rules, Tracker: p.deltas.tracker, Bucket: l.Target.Bucket,
			MatchField: l.Templates == nil && l.Schema == schema.Wide}
		if p.deltas.ingest != nil {
			rc.Ingest, rc.IngestBlock = p.deltas.ingest, len(p.blocks)
		}
	}
	if p.annotator != nil {
		rc.OnApp = p.annotator.SeeApp
		if l.Config.CheckPeer {
			rc.PeerCheck, rc.PeerVersion = p.annotator.PeerAllowed, p.annotator.PeerVersion
		}
	}
	b.relay = relay.New(rc)
	if p.deltas != nil {
		p.deltas.relays = append(p.deltas.relays, b.relay)
		p.deltas.writers = append(p.deltas.writers, b.writer)
	}
	if b.srv, err = p.listen(l, b); err != nil {
		return nil, err
	}
	return b, nil
}

// listen binds a block's TCP or UDP listener.
func (p *pipeline) listen(l *config.Listener, b *block) (server, error) {
	fields := []zap.Field{zap.String("listener", l.Name()), zap.String("bucket", l.Target.Bucket)}
	if l.Config.Protocol == "tcp" {
		cfg := l.TCP()
		cfg.Admit = b.writer.WaitRoom // no new connection while the queue is nearly full
		t, err := graphite.ListenTCP(cfg, b.relay)
		if err != nil {
			return nil, err
		}
		p.log.Info("listening", append(fields, zap.Stringer("addr", t.Addr()))...)
		return t, nil
	}
	u, err := graphite.ListenUDP(l.UDP(), b.relay)
	if err != nil {
		return nil, err
	}
	if want := l.Config.UDPReadBuffer; want > 0 && u.ReadBufferGranted() < want {
		p.log.Warn("the kernel granted a smaller UDP receive buffer than udp-read-buffer asks for (raise net.core.rmem_max)",
			append(fields, zap.Int("asked", want), zap.Int("granted", u.ReadBufferGranted()))...)
	}
	p.log.Info("listening", append(fields, zap.Stringer("addr", u.Addr()), zap.Int("udp_read_buffer_granted", u.ReadBufferGranted()))...)
	return u, nil
}

// openAnnotator creates the annotation poller and its writer.
func (p *pipeline) openAnnotator() error {
	a := p.plan.Annotate
	if a == nil {
		return nil
	}
	var err error
	if p.annWriter, err = p.newWriter("annotate", p.plan.Influx, a.Target); err != nil {
		return fmt.Errorf("[annotate]: %w", err)
	}
	pc := a.Poller
	pc.Sink, pc.Log = p.annWriter, p.log.With(zap.String("component", "annotate"))
	if a.History != nil {
		if p.hisWriter, err = p.newWriter("history", p.plan.Influx, *a.History); err != nil {
			return fmt.Errorf("[annotate] history: %w", err)
		}
		pc.History = p.hisWriter
	}
	pc.Stream = newStream(p.plan, p.blockWriters)
	if p.annotator, err = annotate.New(pc); err != nil {
		return fmt.Errorf("[annotate]: %w", err)
	}
	if err := p.loadFacts(); err != nil {
		return fmt.Errorf("[annotate]: %w", err)
	}
	p.log.Info("polling Spark REST sources for annotations", zap.Strings("urls", pc.Sources),
		zap.Duration("interval", pc.WithDefaults().Interval), zap.String("bucket", a.Target.Bucket), zap.Stringer("auth", pc.Auth))
	return nil
}

// openInternal creates the writer of sparkpulse's own metrics.
func (p *pipeline) openInternal() error {
	in := p.plan.Internal
	p.registry = prometheus.NewRegistry()
	p.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if in != nil {
		var err error
		if p.intWriter, err = p.newWriter("internal", p.plan.Influx, in.Target); err != nil {
			return fmt.Errorf("[internal]: %w", err)
		}
	}
	p.registry.MustRegister(&statsCollector{p: p})
	for _, b := range p.blocks {
		p.registry.MustRegister(b.hist)
	}
	if in != nil {
		host, _ := os.Hostname()
		p.reporter = selfmetrics.New(p.registry, p.intWriter, host, internalFamily)
		p.log.Info("writing sparkpulse's own metrics to InfluxDB", zap.String("bucket", in.Target.Bucket), zap.Duration("interval", in.Interval))
	}
	return nil
}

// openAdmin binds the admin endpoint.
// The admin endpoint's bounds: a client that holds connections open,
// idle or silent, costs at most adminMaxConns file descriptors (the rest
// wait in the kernel's accept queue), each for at most its timeout; the
// Graphite listeners keep theirs. Its write timeout leaves room for
// /debug/pprof/profile's default 30 s.
const (
	adminMaxConns      = 64
	adminHeaderTimeout = 10 * time.Second
	adminIdleTimeout   = 30 * time.Second
	adminWriteTimeout  = 2 * time.Minute
)

func (p *pipeline) openAdmin() error {
	if p.plan.AdminAddr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", p.plan.AdminAddr)
	if err != nil {
		return fmt.Errorf("[admin] bind-address %q: %w", p.plan.AdminAddr, err)
	}
	p.adminLn = netutil.LimitListener(ln, adminMaxConns)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(p.registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", p.serveReadyz)
	if p.plan.Pprof {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	}
	p.admin = &http.Server{Handler: mux, ReadHeaderTimeout: adminHeaderTimeout, IdleTimeout: adminIdleTimeout, WriteTimeout: adminWriteTimeout}
	p.log.Info("admin endpoint", zap.String("metrics", "http://"+p.adminLn.Addr().String()+"/metrics"))
	return nil
}

// serveReadyz answers 200 while the listeners serve, 503 before and once
// shutdown has begun, so that a load balancer sends no new senders to a
// stopping replica.
func (p *pipeline) serveReadyz(w http.ResponseWriter, r *http.Request) {
	select {
	case <-p.stopping: // first: once stopping, ready is closed too
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	default:
	}
	select {
	case <-p.ready:
		io.WriteString(w, "ready\n")
	default:
		http.Error(w, "starting", http.StatusServiceUnavailable)
	}
}

// serve starts the listeners, the admin endpoint and the background loops.
func (p *pipeline) serve() {
	for _, b := range p.blocks {
		p.bg.Go(func() {
			if err := b.srv.Serve(); err != nil {
				p.log.Error("listener stopped", zap.String("listener", b.Name()), zap.Error(err))
			}
		})
	}
	if p.admin != nil {
		p.bg.Go(func() {
			if err := p.admin.Serve(p.adminLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				p.log.Error("admin endpoint stopped", zap.Error(err))
			}
		})
	}
	if p.reporter != nil {
		p.bg.Go(func() { p.reportEvery(p.plan.Internal.Interval) })
	}
	if p.deltas != nil {
		p.bg.Go(func() { p.deltas.checkpoints(p.stopping) })
	}
	if p.annotator != nil {
		ctx, cancel := context.WithCancel(context.Background())
		p.annCancel, p.annDone = cancel, make(chan struct{})
		go func() {
			defer close(p.annDone)
			var wg sync.WaitGroup
			// The last run's journal, beside ingest and polling: a start
			// after a long outage does not keep port 2003 closed.
			wg.Go(func() {
				if _, err := p.annotator.Facts().Resend(ctx); err != nil && ctx.Err() == nil {
					p.log.Warn("the journal's points were not all handed on again; the next start sends them", zap.Error(err))
				}
			})
			p.annotator.Run(ctx)
			wg.Wait()
		}()
	}
	close(p.ready)
}

// writers returns every writer: the blocks', then those of annotations and
// own metrics, with their names.
func (p *pipeline) writers() (names []string, ws []*influx.Writer) {
	for _, b := range p.blocks {
		names, ws = append(names, b.Name()), append(ws, b.writer)
	}
	if p.annWriter != nil {
		names, ws = append(names, "annotations"), append(ws, p.annWriter)
	}
	if p.hisWriter != nil {
		names, ws = append(names, "history"), append(ws, p.hisWriter)
	}
	if p.intWriter != nil {
		names, ws = append(names, "own metrics"), append(ws, p.intWriter)
	}
	return names, ws
}

// Flush waits until every point the writers have taken so far is delivered
// to InfluxDB or refused, without waiting for batch timers. Lines still in
// a connection's buffer are not covered: a TCP sender knows its lines are
// taken once the server has closed the connection after its own half-close.
func (p *pipeline) Flush(ctx context.Context) error {
	_, ws := p.writers()
	for _, w := range ws {
		if err := w.Idle(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Shutdown stops accepting, lets open connections finish, then delivers
// everything buffered to InfluxDB. Points that could not be delivered before
// ctx ends are reported in the error. Later calls return the first's result.
func (p *pipeline) Shutdown(ctx context.Context) error {
	p.shutdownOnce.Do(func() { p.shutdownErr = p.shutdown(ctx) })
	return p.shutdownErr
}

func (p *pipeline) shutdown(ctx context.Context) error {
	close(p.stopping)
	var wg sync.WaitGroup
	for _, b := range p.blocks {
		wg.Go(func() {
			if err := b.srv.Shutdown(ctx); err != nil {
				p.log.Warn("closing listener", zap.String("listener", b.Name()), zap.Error(err))
			}
		})
	}
	closed := make(chan struct{})
	watched := make(chan struct{})
	go p.watchBlockedReaders(closed, watched)
	wg.Wait()
	close(closed)
	<-watched
	if p.annCancel != nil {
		p.annCancel()
		<-p.annDone
	}
	if p.reporter != nil {
		p.reportInternal(time.Now()) // the final counts
	}
	errs := p.closeWriters(ctx)
	// Every line is read: the baselines are final, and saved when the
	// blocks' writers delivered or kept every point.
	delivered := true
	for i := range p.blocks {
		delivered = delivered && errs[i] == nil
	}
	stateErr := p.deltas.save(delivered)
	// The annotation writer's points, and the history's, are delivered
	// or in their disk queues.
	stateErr = errors.Join(stateErr, p.saveFacts(ctx, p.closedCleanly(errs, p.annWriter) && p.closedCleanly(errs, p.hisWriter)))
	if p.admin != nil {
		_ = p.admin.Shutdown(ctx)
	}
	p.bg.Wait()
	p.stateLock.Unlock() // every state is saved
	for _, b := range p.blocks {
		st := b.relay.Stats()
		p.log.Info("stopped", zap.String("listener", b.Name()),
			zap.Uint64("lines", st.Lines.Load()), zap.Uint64("points", st.Points.Load()))
	}
	return errors.Join(append(errs, stateErr)...)
}

// blockWriters are the [[graphite]] blocks' writers, once the blocks are
// open.
func (p *pipeline) blockWriters() []*influx.Writer {
	var ws []*influx.Writer
	for _, b := range p.blocks {
		ws = append(ws, b.writer)
	}
	return ws
}

// closedCleanly says whether w, if there is one, closed without error:
// errs are closeWriters', in the order of writers().
func (p *pipeline) closedCleanly(errs []error, w *influx.Writer) bool {
	if w == nil {
		return true
	}
	_, ws := p.writers()
	i := slices.Index(ws, w)
	return i >= 0 && errs[i] == nil
}

// shutdownStall bounds how long a stop waits for an InfluxDB that takes
// nothing (down, or hung): once no writer has had a point accepted or
// refused for this long, the writers give up. With state-dir what they
// hold goes to the disk queue, sent at the next start; without one it is
// lost, counted, and the stop fails. While InfluxDB takes points the stop
// waits for them, up to the caller's deadline.
const shutdownStall = 5 * time.Second

// closeWriters closes every writer at once, each delivering what it holds,
// and says where what was not delivered went. The errors are the points
// lost; sparkpulse's own metrics are not counted as lost data: they are
// logged only.
func (p *pipeline) closeWriters(ctx context.Context) []error {
	names, ws := p.writers()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	stalled := make(chan struct{})
	go p.watchStall(ws, done, stalled, cancel)
	errs := make([]error, len(ws))
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Go(func() {
			if err := w.Close(ctx); err != nil {
				errs[i] = fmt.Errorf("%s: %w", names[i], err)
			}
		})
	}
	wg.Wait()
	close(done)
	<-stalled
	var keptBytes int64
	var keptIn []string
	for i, w := range ws {
		st := w.Stats()
		if st.DiskBytes > 0 {
			keptBytes += st.DiskBytes
			keptIn = append(keptIn, names[i])
		}
		switch {
		case errs[i] == nil:
		case w == p.intWriter:
			p.log.Warn("sparkpulse's own metrics were not all delivered (not an error: the data received is not affected)", zap.Error(errs[i]))
			errs[i] = nil
		case p.plan.StateDir == "":
			p.log.Error("points lost: InfluxDB did not take them and, without state-dir, there is no disk queue to keep them", zap.String("writer", names[i]), zap.Error(errs[i]))
		default:
			p.log.Error("points lost", zap.String("writer", names[i]), zap.Error(errs[i]))
		}
	}
	if keptBytes > 0 {
		p.log.Warn("undelivered points are kept in the disk queue and sent at the next start",
			zap.String("dir", filepath.Join(p.plan.StateDir, "queue")), zap.Int64("bytes", keptBytes), zap.Strings("writers", keptIn))
	}
	return errs
}

// watchStall cancels the writers' close once none of them has had a point
// accepted or refused for shutdownStall, and closes stalled when done is.
func (p *pipeline) watchStall(ws []*influx.Writer, done <-chan struct{}, stalled chan<- struct{}, cancel context.CancelFunc) {
	defer close(stalled)
	last, since := progress(ws), time.Now()
	tick := time.NewTicker(shutdownStall / 20)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		if n := progress(ws); n != last {
			last, since = n, time.Now()
			continue
		}
		if time.Since(since) >= shutdownStall {
			where := "keeping the rest in the disk queue for the next start"
			if p.plan.StateDir == "" {
				where = "without state-dir the rest is lost"
			}
			p.log.Warn("InfluxDB has taken nothing for "+shutdownStall.String()+"; stopping without it: "+where, zap.String("url", influx.RedactURL(p.plan.Influx.WithDefaults().URL)))
			cancel()
			return
		}
	}
}

// watchBlockedReaders ends a stop's wait for connections whose readers
// wait for room in a full memory queue (no state-dir) that InfluxDB does
// not empty: once no writer has had a point accepted or refused for
// shutdownStall, those writers refuse what their readers hold and what
// comes after, counted as dropped, and the connections end. It returns
// when closed is.
func (p *pipeline) watchBlockedReaders(closed <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	ws := p.blockWriters()
	last, since := progress(ws), time.Now()
	tick := time.NewTicker(shutdownStall / 20)
	defer tick.Stop()
	for {
		select {
		case <-closed:
			return
		case <-tick.C:
		}
		if n := progress(ws); n != last {
			last, since = n, time.Now()
			continue
		}
		if time.Since(since) < shutdownStall {
			continue
		}
		for i, w := range ws {
			if w.Blocked() {
				p.log.Warn("InfluxDB has taken nothing for "+shutdownStall.String()+" and the memory queue is full: dropping what the listener's connections still send, to stop",
					zap.String("listener", p.blocks[i].Name()), zap.String("url", influx.RedactURL(p.plan.Influx.WithDefaults().URL)))
				w.Refuse()
			}
		}
		since = time.Now()
	}
}

// progress counts the points and batches ws have had accepted or refused.
func progress(ws []*influx.Writer) (n uint64) {
	for _, w := range ws {
		st := w.Stats()
		n += st.PointsWritten + st.BatchesWritten
		for _, d := range st.PointsDropped {
			n += d
		}
	}
	return n
}

// abort releases what a failed start-up opened.
func (p *pipeline) abort() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, b := range p.blocks {
		_ = b.srv.Shutdown(ctx)
	}
	_, ws := p.writers()
	for _, w := range ws {
		_ = w.Close(ctx)
	}
	if p.adminLn != nil {
		p.adminLn.Close()
	}
	p.stateLock.Unlock()
}

// reportEvery writes sparkpulse's own metrics every interval until
// Shutdown.
func (p *pipeline) reportEvery(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-p.stopping:
			return
		case now := <-t.C:
			p.reportInternal(now)
		}
	}
}

// reportInternal writes one sample of sparkpulse's own metrics.
func (p *pipeline) reportInternal(now time.Time) {
	p.reporterMu.Lock()
	defer p.reporterMu.Unlock()
	if _, err := p.reporter.Report(now); err != nil {
		p.log.Warn("own metrics not all written", zap.Error(err))
	}
}

// internalFamily selects what [internal] writes: sparkpulse's own metrics,
// and the process's CPU, memory and goroutines.
func internalFamily(name string) bool {
	return strings.HasPrefix(name, "sparkpulse_") || strings.HasPrefix(name, "process_") ||
		name == "go_goroutines" || name == "go_memstats_heap_inuse_bytes"
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
func (p *pipeline) warnOrphanQueues() {
	if p.plan.StateDir == "" {
		return
	}
	used := map[string]bool{}
	for _, l := range p.plan.Listeners {
		used[queueDir(p.plan.StateDir, l.Name(), l.Target)] = true
	}
	if a := p.plan.Annotate; a != nil {
		used[queueDir(p.plan.StateDir, "annotate", a.Target)] = true
	}
	if in := p.plan.Internal; in != nil {
		used[queueDir(p.plan.StateDir, "internal", in.Target)] = true
	}
	root := filepath.Join(p.plan.StateDir, "queue")
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		if !e.IsDir() || used[dir] {
			continue
		}
		if n := queue.DiskBytes(dir); n > 0 {
			p.log.Warn("a disk queue that no listener of this config uses holds undelivered points: give the listener its former bind-address and target to deliver them, or delete the directory",
				zap.String("dir", dir), zap.Int64("bytes", n))
		}
	}
}

// sampled wraps log for per-line problems: per message and second, the first
// three entries are written and the rest only counted in /metrics.
func sampled(log *zap.Logger) *zap.Logger {
	return log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, time.Second, 3, 0)
	}))
}

// newLogger builds the service logger: human-readable console by default,
// JSON for log shippers.
func newLogger(c config.LogConfig, w io.Writer) (*zap.Logger, error) {
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
