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

// Cluster is the simulated applications: their driver and executor
// processes, their jobs, and the REST model of both.
type Cluster struct {
	cfg   Config
	apps  []*timeline
	procs []*process
	// UI answers Spark's REST API for the applications (History Server
	// mode).
	UI *sparkui.Server
}

// NewCluster sets up cfg.Apps applications started at start. Application
// 2 is a PySpark application (Python workers' memory is reported) and
// application 1 runs a structured streaming query named orders_agg.
func NewCluster(cfg Config, start time.Time) *Cluster {
	rng := rand.New(rand.NewPCG(cfg.Seed, 1))
	model := &sparkui.Model{}
	c := &Cluster{cfg: cfg, UI: sparkui.NewServer(sparkui.HistoryServer, model)}
	for a := range cfg.Apps {
		ns := AppID(start, a+1)
		tl := newTimeline(ns, appNames[a%len(appNames)], start, cfg.Period, rand.New(rand.NewPCG(cfg.Seed, uint64(a+1))), model)
		c.apps = append(c.apps, tl)
		for e := 0; e <= cfg.Executors; e++ {
			id := "driver"
			if e > 0 {
				id = strconv.Itoa(e)
			}
			p := &process{
				ns: ns, id: id, app: tl, pyspark: a == 1,
				offset: time.Duration(rng.Int64N(int64(time.Second))),
				rng:    rand.New(rand.NewPCG(cfg.Seed, uint64(a*10_000+e+2))),
			}
			if a == 0 && e == 0 {
				p.stream = "orders_agg"
			}
			c.procs = append(c.procs, p)
		}
	}
	return c
}

// Step advances every application's jobs to now.
func (c *Cluster) Step(now time.Time) {
	c.UI.Update(func(*sparkui.Model) {
		for _, tl := range c.apps {
			tl.step(now)
		}
	})
}

// End ends every application at now, as a History Server then shows them.
func (c *Cluster) End(now time.Time) {
	c.UI.Update(func(*sparkui.Model) {
		for _, tl := range c.apps {
			tl.end(now)
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
var appNames = []string{"nightly-sales", "orders-features", "clickstream", "ml-training"}

// send delivers every process's report at now, each over its own TCP
// connection as Spark's reporter does. It returns the lines sent and the
// reports that failed.
func (c *Cluster) send(ctx context.Context, d *net.Dialer, now time.Time) (lines, failed int) {
	for n := range c.procs {
		conn, err := d.DialContext(ctx, "tcp", c.cfg.Addr)
		if err != nil {
			failed++
			continue
		}
		cw := &countingWriter{w: conn}
		if c.Report(n, cw, now) != nil {
			failed++
		}
		if conn.Close() != nil {
			failed++
		}
		lines += cw.lines
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
