// Package simulate emits Graphite traffic shaped like Apache Spark's
// GraphiteSink: the metric names, Dropwizard suffixes and value formats of
// a Spark 3.5/4.x driver and its executors, one report per period per
// process, each report over its own TCP connection as the real reporter
// sends it.
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
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/sparkpulse/sparkpulse/sparkui"
)

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
}

// process is one Spark JVM: the driver or an executor.
type process struct {
	ns     string // spark.metrics.namespace: the app id
	id     string // "driver" or the executor id
	offset time.Duration
	rng    *rand.Rand
	app    *timeline // its application's jobs; nil: always busy

	// cumulative task metrics (ExecutorSource counters)
	tasks, cpuNs, runMs, gcMs, readBytes, shuffleRead, shuffleWrite, records int64
	jvmCPU, gcCount, gcTime                                                  int64
	heap                                                                     int64
	jobs                                                                     int64
}

// Report writes one report of p at time t, in the order and format of
// Dropwizard's GraphiteReporter (gauges, then counters, then timers).
func (p *process) report(w io.Writer, prefix string, t time.Time) error {
	active := 1 + p.rng.Int64N(4)
	finished := 2 + p.rng.Int64N(8)
	if p.app != nil && !p.app.busy() {
		active, finished = 0, 0
	}
	p.tasks += finished
	p.cpuNs += finished * (200_000_000 + p.rng.Int64N(800_000_000))
	p.runMs += finished * (300 + p.rng.Int64N(1200))
	p.gcMs += finished * p.rng.Int64N(40)
	p.readBytes += finished * p.rng.Int64N(64<<20)
	p.shuffleRead += finished * p.rng.Int64N(16<<20)
	p.shuffleWrite += finished * p.rng.Int64N(16<<20)
	p.records += finished * p.rng.Int64N(100_000)
	p.jvmCPU += int64(float64(10*time.Second) * (0.2 + float64(active)*0.9))
	p.gcCount += p.rng.Int64N(4)
	p.gcTime += p.rng.Int64N(60)
	p.heap = 256<<20 + p.rng.Int64N(1<<30)
	p.jobs += p.rng.Int64N(2)

	base := p.ns + "." + p.id + "."
	if prefix != "" {
		base = prefix + "." + base
	}
	ts := strconv.FormatInt(t.Add(p.offset).Unix(), 10)
	var buf []byte
	line := func(name string, v string) {
		buf = append(buf, base...)
		buf = append(buf, name...)
		buf = append(buf, ' ')
		buf = append(buf, v...)
		buf = append(buf, ' ')
		buf = append(buf, ts...)
		buf = append(buf, '\n')
	}
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

	// Gauges, in Java string order as the reporter's sorted map gives them.
	if p.id == "driver" {
		line("BlockManager.memory.memUsed_MB", i(p.heap>>22))
		line("DAGScheduler.job.activeJobs", i(active%2))
		line("DAGScheduler.job.allJobs", i(p.jobs))
		line("DAGScheduler.stage.runningStages", i(active%3))
	}
	line("ExecutorMetrics.JVMHeapMemory", i(p.heap))
	line("ExecutorMetrics.MajorGCCount", i(p.gcCount/10))
	line("ExecutorMetrics.MinorGCCount", i(p.gcCount))
	line("ExecutorMetrics.OnHeapExecutionMemory", i(p.heap/4))
	line("ExecutorMetrics.ProcessTreeJVMRSSMemory", i(p.heap+(300<<20)))
	line("ExecutorMetrics.TotalGCTime", i(p.gcTime))
	line("JVMCPU.jvmCpuTime", i(p.jvmCPU))
	if p.id != "driver" {
		line("executor.filesystem.hdfs.read_bytes", i(p.readBytes))
		line("executor.threadpool.activeTasks", i(active))
		line("executor.threadpool.completeTasks", i(p.tasks))
	}
	line("jvm.heap.usage", f(float64(p.heap)/float64(2<<30)))
	line("jvm.heap.used", i(p.heap))
	line("jvm.pools.G1-Eden-Space.used", i(p.heap/3))
	line("jvm.pools.G1-Survivor-Space.usage", "NaN") // Spark really sends NaN ratios
	// Counters.
	if p.id == "driver" {
		line("appStatus.jobs.succeededJobs.count", i(p.jobs))
	} else {
		line("executor.bytesRead.count", i(p.readBytes))
		line("executor.cpuTime.count", i(p.cpuNs))
		line("executor.jvmGCTime.count", i(p.gcMs))
		line("executor.recordsRead.count", i(p.records))
		line("executor.runTime.count", i(p.runMs))
		line("executor.shuffleBytesWritten.count", i(p.shuffleWrite))
		line("executor.shuffleTotalBytesRead.count", i(p.shuffleRead))
		line("executor.succeededTasks.count", i(p.tasks))
	}
	// A timer on the driver: the reporter's 15 attributes.
	if p.id == "driver" {
		const t = "DAGScheduler.messageProcessingTime."
		for _, a := range []string{"max", "mean", "min", "stddev", "p50", "p75", "p95", "p98", "p99", "p999"} {
			line(t+a, f(0.5+p.rng.Float64()*3))
		}
		line(t+"count", i(p.jobs*40))
		for _, a := range []string{"m1_rate", "m5_rate", "m15_rate", "mean_rate"} {
			line(t+a, f(p.rng.Float64()*5))
		}
	}
	_, err := w.Write(buf)
	return err
}

// AppID returns the standalone-style application id of app n, started at t.
func AppID(t time.Time, n int) string {
	return fmt.Sprintf("app-%s-%04d", t.UTC().Format("20060102150405"), n)
}

// Run reports every period until ctx ends. Each report of each process
// opens a new TCP connection, as Spark's reporter does; a failed report is
// counted and skipped, as the reporter skips it. onReport, if not nil, is
// called after each round with the number of lines sent and failed reports.
func Run(ctx context.Context, cfg Config, onReport func(lines, failed int)) (err error) {
	if cfg.Period <= 0 {
		return fmt.Errorf("simulate: period %s must be positive", cfg.Period)
	}
	start := time.Now()
	rng := rand.New(rand.NewPCG(cfg.Seed, 1))
	model := &sparkui.Model{}
	var procs []*process
	var apps []*timeline
	for a := range cfg.Apps {
		ns := AppID(start, a+1)
		tl := newTimeline(ns, appNames[a%len(appNames)], start, cfg.Period, rand.New(rand.NewPCG(cfg.Seed, uint64(a+1))), model)
		apps = append(apps, tl)
		for e := 0; e <= cfg.Executors; e++ {
			id := "driver"
			if e > 0 {
				id = strconv.Itoa(e)
			}
			procs = append(procs, &process{
				ns: ns, id: id, app: tl,
				offset: time.Duration(rng.Int64N(int64(time.Second))),
				rng:    rand.New(rand.NewPCG(cfg.Seed, uint64(a*10_000+e+2))),
			})
		}
	}
	ui := sparkui.NewServer(sparkui.HistoryServer, model)
	if cfg.UIAddr != "" {
		ln, lerr := net.Listen("tcp", cfg.UIAddr)
		if lerr != nil {
			return fmt.Errorf("simulate: Spark REST API on %q: %w", cfg.UIAddr, lerr)
		}
		hs := &http.Server{Handler: ui, ReadHeaderTimeout: 10 * time.Second}
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
			ui.Update(func(*sparkui.Model) {
				for _, tl := range apps {
					tl.step(now)
				}
			})
			lines, failed := 0, 0
			for _, p := range procs {
				c, derr := d.DialContext(ctx, "tcp", cfg.Addr)
				if derr != nil {
					failed++
					continue
				}
				cw := &countingWriter{w: c}
				if p.report(cw, cfg.Prefix, now) != nil {
					failed++
				}
				c.Close()
				lines += cw.lines
			}
			if onReport != nil {
				onReport(lines, failed)
			}
		}
	}
}

// appNames are spark.app.name of the simulated applications.
var appNames = []string{"nightly-sales", "orders-features", "clickstream", "ml-training"}

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
