// Package simulate emits Graphite traffic shaped like Apache Spark's
// GraphiteSink: the metric names, Dropwizard suffixes and value formats of
// a Spark 3.5 driver and its executors, one report per period per process,
// each report over its own TCP connection as the real reporter sends it.
// Every source Spark registers is there, as with JvmSource, the appStatus
// source, process-tree metrics and dynamic allocation enabled: about 190
// lines per executor and 360 per driver, in the reporter's order (gauges,
// counters, histograms, meters, timers, each by name), with NaN where a
// ratio gauge divides by zero.
//
// Each application runs jobs of two stages, one after the other with idle
// gaps, and its executors finish tasks only while a stage runs; task
// counters grow as tasks finish (cumulative, like Spark's), gauges move
// around, and every executor has its own clock offset. With Config.UIAddr
// the jobs, stages and SQL executions are also served as Spark's REST API
// (a History Server listing every simulated application), so annotations
// line up with the load. The same seed gives the same stream, which makes
// the simulator usable in tests and demos.
package simulate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/sparkpulse/sparkpulse/sizing"
	"github.com/sparkpulse/sparkpulse/sparkui"
)

// CERNTemplates is the template list of the CERN Spark dashboard's
// InfluxDB graphite listener. It maps this package's traffic when Config's
// Prefix has one component (the template's "username"), the way Spark's
// GraphiteSink is configured for that dashboard.
var CERNTemplates = []string{
	"*.*.jvm.pools.* username.applicationid.process.namespace.namespace.measurement*",
	"*.*.applicationMaster.* username.applicationid.namespace.measurement*",
	"*.shuffleService.* username.namespace.measurement*",
	"*.*.*.spark.streaming.* username.applicationid.process.namespace.namespace.id.measurement*",
	"username.applicationid.process.namespace.measurement*",
}

// Config describes the simulated cluster.
type Config struct {
	Addr      string        // host:port of the Graphite listener
	Prefix    string        // GraphiteSink prefix; "" for none
	Apps      int           // concurrent applications
	Executors int           // executors per application
	Period    time.Duration // reporting period (Spark's default is 10s)
	Seed      uint64
	// UIAddr, when set, serves the applications' Spark REST API there
	// (host:port), as a History Server would.
	UIAddr string
	// UDP sends every line as its own datagram, as GraphiteSink with
	// protocol=udp does, instead of a TCP connection per report.
	UDP bool
	// AppLifetime, when set, ends each application after it and starts a
	// new one (a new application id) in its place; the first ones end
	// spread over the first lifetime, so applications come and go evenly.
	// Four in five start no job in their last few periods and succeed
	// (unless that job was one of the failing ones); the fifth is stopped
	// in the middle of a job and fails.
	AppLifetime time.Duration
	// ExecutorLifetime, when set, replaces each executor after it by a
	// new one with the next executor id, as dynamic allocation does.
	ExecutorLifetime time.Duration
	// Confirm half-closes each TCP report and waits for the listener to
	// close the connection, which sparkpulse does once its handler has
	// every line: when a round returns, every line of it was taken. Spark's
	// reporter does not wait; tests do.
	Confirm bool
	// ByName lists applications (by start order, from 0) that run with
	// spark.metrics.namespace=${spark.app.name}: their metrics carry the
	// application's name instead of its id.
	ByName []int
}

// Cluster is the simulated applications: their driver and executor
// processes, their jobs, and the REST model of both.
type Cluster struct {
	cfg   Config
	rng   *rand.Rand
	apps  []*app
	procs []*process // of the running applications, in order
	seq   int        // applications started
	// UI answers Spark's REST API for the applications (History Server
	// mode).
	UI *sparkui.Server
}

// app is a running application and its processes.
type app struct {
	index   int // 0 for the first application started
	tl      *timeline
	driver  *process
	execs   []*process
	ends    time.Time // zero: runs until the end
	nextID  int       // the next executor id
	replace []time.Time
}

// NewCluster sets up cfg.Apps applications started at start. Application
// 1 runs a structured streaming query named orders_agg. Of every four
// applications started, the second is a PySpark application (Python
// workers' memory is reported, and the CERN SparkPlugins' cgroup metrics
// with the container's CPU), the third uses few of its executors' cores,
// and the fourth's executors come near their memory limit. An executor
// killed over its memory limit never sends its last report: its last
// tasks are in Spark's totals only.
func NewCluster(cfg Config, start time.Time) *Cluster {
	c := &Cluster{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 1)), UI: sparkui.NewServer(sparkui.HistoryServer, &sparkui.Model{})}
	c.UI.Update(func(m *sparkui.Model) {
		for a := range cfg.Apps {
			var ends time.Time
			if cfg.AppLifetime > 0 {
				ends = start.Add(cfg.AppLifetime * time.Duration(a+1) / time.Duration(cfg.Apps))
			}
			c.startApp(m, start, ends)
		}
	})
	c.list()
	return c
}

// startApp starts the next application at now, to end at ends (zero:
// never). The model must be locked.
func (c *Cluster) startApp(m *sparkui.Model, now, ends time.Time) {
	a := c.seq
	c.seq++
	ns := AppID(now, a+1)
	seed := func(n int) *rand.Rand { return rand.New(rand.NewPCG(c.cfg.Seed, uint64(a*10_000+n))) }
	tl := newTimeline(ns, appNames[a%len(appNames)], now, c.cfg.Period, rand.New(rand.NewPCG(c.cfg.Seed, uint64(a+1))), m)
	ap := &app{index: a, tl: tl, ends: ends, nextID: 1}
	if !ends.IsZero() && a%5 != 4 {
		// Four in five end after their last job; the fifth's driver is
		// stopped in the middle of one, which fails it.
		tl.lastJob = ends.Add(-jobPeriods * c.cfg.Period)
	}
	metricsNS := ns
	if slices.Contains(c.cfg.ByName, a) {
		metricsNS = tl.att.Properties["spark.app.name"]
		tl.att.Properties["spark.metrics.namespace"] = "${spark.app.name}"
	}
	ap.driver = &process{ns: metricsNS, id: "driver", app: tl, pyspark: a%4 == 1, idle: a%4 == 2, hungry: a%4 == 3, offset: c.offset(), rng: seed(2),
		rest: &sparkui.Executor{ID: "driver", HostPort: fmt.Sprintf("driver-%d.spark:7078", a+1), MaxMemory: 2 << 30, Added: now}}
	tl.att.Executors = append(tl.att.Executors, ap.driver.rest)
	if a == 0 {
		ap.driver.stream = "orders_agg"
	}
	if ap.driver.pyspark {
		// On Kubernetes, where the plugin's cgroup files are the pod's
		// own; on YARN they would be the node's.
		tl.att.Properties["spark.plugins"] = "ch.cern.CgroupMetrics"
		tl.att.Properties["spark.master"] = "k8s://https://kubernetes.default.svc:443"
	}
	for range c.cfg.Executors {
		ap.addExecutor(c, now)
	}
	c.apps = append(c.apps, ap)
}

// addExecutor starts the application's next executor at now.
func (ap *app) addExecutor(c *Cluster, now time.Time) {
	id := ap.nextID
	ap.nextID++
	d := ap.driver
	p := &process{ns: d.ns, id: strconv.Itoa(id), app: ap.tl, pyspark: d.pyspark, idle: d.idle, hungry: d.hungry, offset: c.offset(),
		rng: rand.New(rand.NewPCG(c.cfg.Seed, uint64(ap.index*10_000+id+2))),
		rest: &sparkui.Executor{ID: strconv.Itoa(id), HostPort: fmt.Sprintf("worker-%d.spark:%d", 1+(ap.index*7+id)%16, 40000+id),
			Cores: 4, MaxMemory: 5 << 30, Added: now}}
	ap.tl.att.Executors = append(ap.tl.att.Executors, p.rest)
	ap.execs = append(ap.execs, p)
	var replace time.Time
	if lt := c.cfg.ExecutorLifetime; lt > 0 {
		if id <= c.cfg.Executors { // the first ones: spread over a lifetime
			replace = now.Add(lt * time.Duration(id) / time.Duration(c.cfg.Executors))
		} else {
			replace = now.Add(lt)
		}
	}
	ap.replace = append(ap.replace, replace)
}

// offset is a process's clock offset: up to a second.
func (c *Cluster) offset() time.Duration { return time.Duration(c.rng.Int64N(int64(time.Second))) }

// list rebuilds the list of reporting processes.
func (c *Cluster) list() {
	c.procs = c.procs[:0]
	for _, ap := range c.apps {
		c.procs = append(c.procs, ap.driver)
		c.procs = append(c.procs, ap.execs...)
	}
}

// Step advances every application's jobs to now, and with churn ends
// applications and executors whose time has come and starts their
// successors.
func (c *Cluster) Step(now time.Time) {
	c.UI.Update(func(m *sparkui.Model) {
		changed := false
		for i := 0; i < len(c.apps); i++ {
			ap := c.apps[i]
			if !ap.ends.IsZero() && !now.Before(ap.ends) {
				ap.tl.end(now)
				c.apps = append(c.apps[:i], c.apps[i+1:]...)
				i--
				c.startApp(m, now, now.Add(c.cfg.AppLifetime))
				changed = true
				continue
			}
			for j := range ap.execs {
				if r := ap.replace[j]; !r.IsZero() && !now.Before(r) {
					p := ap.execs[j]
					reason := removeReasons[ap.nextID%len(removeReasons)]
					if p.pyspark && sizing.RemoveKind(reason) == sizing.RemovedContainerOOM {
						reason = fmt.Sprintf(k8sOOMKilled, p.id)
					}
					if sizing.RemoveKind(reason) == sizing.RemovedContainerOOM && (!ap.tl.busy() || p.idle) {
						reason = "Executor killed by driver." // no tasks, no memory to run out of
					}
					if sizing.RemoveKind(reason) == sizing.RemovedContainerOOM {
						// Killed in the middle of its tasks: they are in
						// Spark's totals, and its last report never goes
						// out. An executor dynamic allocation lets go was
						// idle: its last report had everything.
						p.advance()
						p.record()
					}
					p.rest.Removed, p.rest.RemoveReason = now, reason
					ap.execs = append(ap.execs[:j], ap.execs[j+1:]...)
					ap.replace = append(ap.replace[:j], ap.replace[j+1:]...)
					ap.addExecutor(c, now)
					changed = true
					break // one a step per application is churn enough
				}
			}
			// Tasks finish up to now: the executors' counters and Spark's
			// totals move together, and this round's reports carry them.
			for _, p := range append([]*process{ap.driver}, ap.execs...) {
				p.advance()
				p.record()
			}
			ap.tl.step(now)
		}
		if changed {
			c.list()
		}
	})
}

// End ends every application at now, as a History Server then shows them.
func (c *Cluster) End(now time.Time) {
	c.UI.Update(func(*sparkui.Model) {
		for _, ap := range c.apps {
			ap.tl.end(now)
		}
	})
}

// Processes returns the number of simulated processes.
func (c *Cluster) Processes() int { return len(c.procs) }

// Report writes process n's report at now to w.
func (c *Cluster) Report(n int, w io.Writer, now time.Time) error {
	return c.procs[n].report(w, c.cfg.Prefix, now)
}

// AppID returns the standalone-style application id of app n, started at t.
func AppID(t time.Time, n int) string {
	return fmt.Sprintf("app-%s-%04d", t.UTC().Format("20060102150405"), n)
}

// appNames are spark.app.name of the simulated applications.
// removeReasons are why executors go, in turn: dynamic allocation lets
// an idle one go, and now and then YARN kills one over its memory limit:
// the 4g heap and its 409.6 MiB overhead, rounded up by YARN to its
// 512 MiB minimum allocation, 4.5 GiB.
var removeReasons = []string{
	"Executor killed by driver.",
	"Executor killed by driver.",
	"Container killed by YARN for exceeding physical memory limits. 4.5 GB of 4.5 GB physical memory used. Consider boosting spark.executor.memoryOverhead.",
}

// k8sOOMKilled is how Spark on Kubernetes (ExecutorPodsLifecycleManager)
// words an executor pod its container's memory limit killed.
const k8sOOMKilled = "\nThe executor with id %s exited with exit code 137(SIGKILL, possible container OOM).\n\n\n\nThe API gave the following container statuses:\n\n\t container name: spark-kubernetes-executor\n\t container state: terminated\n\t exit code: 137\n\t termination reason: OOMKilled\n"

var appNames = []string{"nightly-sales", "orders-features", "clickstream", "ml-training"}

// send delivers every process's report at now, each over its own TCP
// connection as Spark's reporter does, or with Config.UDP a datagram per
// line. It returns the lines sent and the reports that failed.
func (c *Cluster) send(ctx context.Context, d *net.Dialer, now time.Time) (lines, failed int) {
	if c.cfg.UDP {
		return c.sendUDP(ctx, d, now)
	}
	for n := range c.procs {
		if ctx.Err() != nil {
			break // the caller stopped: the rest of the round is not a failure
		}
		conn, err := d.DialContext(ctx, "tcp", c.cfg.Addr)
		if err != nil {
			failed++
			continue
		}
		cw := &countingWriter{w: conn}
		if c.Report(n, cw, now) != nil {
			failed++
		}
		if tc, ok := conn.(*net.TCPConn); ok && c.cfg.Confirm {
			if tc.CloseWrite() != nil {
				failed++
			} else if _, err := io.Copy(io.Discard, tc); err != nil {
				failed++
			}
		}
		if conn.Close() != nil {
			failed++
		}
		lines += cw.lines
	}
	return lines, failed
}

func (c *Cluster) sendUDP(ctx context.Context, d *net.Dialer, now time.Time) (lines, failed int) {
	conn, err := d.DialContext(ctx, "udp", c.cfg.Addr)
	if err != nil {
		return 0, len(c.procs)
	}
	defer conn.Close()
	var buf bytes.Buffer
	for n := range c.procs {
		buf.Reset()
		if c.Report(n, &buf, now) != nil {
			failed++
			continue
		}
		ok := true
		for _, l := range bytes.SplitAfter(buf.Bytes(), []byte("\n")) {
			if len(l) == 0 {
				continue
			}
			if _, err := conn.Write(l); err != nil {
				ok = false
				continue
			}
			lines++
		}
		if !ok {
			failed++
		}
	}
	return lines, failed
}

// SendRound advances the jobs to now and sends every process's report at
// now. It returns the lines sent and the reports that could not be sent
// (the listener refused the connection).
func (c *Cluster) SendRound(ctx context.Context, now time.Time) (lines, failed int) {
	var d net.Dialer
	c.Step(now)
	return c.send(ctx, &d, now)
}

// SendAgain sends every process's report at now again without moving the
// applications: a round the listener may have lost (it was killed while
// it read it), as a sender that retries would. It returns what SendRound
// does.
func (c *Cluster) SendAgain(ctx context.Context, now time.Time) (lines, failed int) {
	var d net.Dialer
	return c.send(ctx, &d, now)
}

// SetAddr makes the following rounds report to addr (host:port), e.g. a
// Graphite listener started again on another port. Call it between
// rounds, not while one is sent: a Cluster is not safe for concurrent
// use, and SendRound and Replay return only once their round is sent.
func (c *Cluster) SetAddr(addr string) { c.cfg.Addr = addr }

// Replay sends rounds reports of every process, with report times start,
// start+Period, …, as fast as the listener takes them; the applications'
// jobs advance with the report times. It returns the number of lines sent.
func (c *Cluster) Replay(ctx context.Context, start time.Time, rounds int) (int, error) {
	var d net.Dialer
	total := 0
	for r := range rounds {
		now := start.Add(time.Duration(r) * c.cfg.Period)
		c.Step(now)
		lines, failed := c.send(ctx, &d, now)
		total += lines
		if failed > 0 {
			return total, fmt.Errorf("simulate: %d reports to %s failed", failed, c.cfg.Addr)
		}
	}
	return total, nil
}

// Run reports every period until ctx ends. Each report of each process
// opens a new TCP connection, as Spark's reporter does; a failed report is
// counted and skipped, as the reporter skips it. onReport, if not nil, is
// called after each round with the number of lines sent and failed reports.
func Run(ctx context.Context, cfg Config, onReport func(lines, failed int)) (err error) {
	if cfg.Period <= 0 {
		return fmt.Errorf("simulate: period %s must be positive", cfg.Period)
	}
	c := NewCluster(cfg, time.Now())
	if cfg.UIAddr != "" {
		ln, lerr := net.Listen("tcp", cfg.UIAddr)
		if lerr != nil {
			return fmt.Errorf("simulate: Spark REST API on %q: %w", cfg.UIAddr, lerr)
		}
		hs := &http.Server{Handler: c.UI, ReadHeaderTimeout: 10 * time.Second}
		served := make(chan error, 1)
		go func() { served <- hs.Serve(ln) }()
		defer func() {
			hs.Close()
			if serr := <-served; !errors.Is(serr, http.ErrServerClosed) && err == nil {
				err = fmt.Errorf("simulate: Spark REST API: %w", serr)
			}
		}()
	}
	tick := time.NewTicker(cfg.Period)
	defer tick.Stop()
	var d net.Dialer
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-tick.C:
			if ctx.Err() != nil {
				return nil // both were ready: stopping wins over a round that would only fail
			}
			c.Step(now)
			lines, failed := c.send(ctx, &d, now)
			if onReport != nil {
				onReport(lines, failed)
			}
		}
	}
}

type countingWriter struct {
	w     io.Writer
	lines int
}

func (c *countingWriter) Write(b []byte) (int, error) {
	for _, x := range b {
		if x == '\n' {
			c.lines++
		}
	}
	return c.w.Write(b)
}
