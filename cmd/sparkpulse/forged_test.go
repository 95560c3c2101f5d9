package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/influx"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
	"github.com/sparkpulse/sparkpulse/simulate"
	"github.com/sparkpulse/sparkpulse/sizing"
	"github.com/sparkpulse/sparkpulse/sparkui"
)

// The stream rows of the forged-numbers table, through the real binary
// into a real InfluxDB while two simulated applications report: into the first,
// one forged task-CPU line, one forged run-time line near 2^63 and one
// forged resident-memory gauge of 60 GiB for an executor Spark lists;
// into the second, six lines dated 2037 and values no counter has. The
// first's accounting and advice are Spark's own figures, what was set
// aside is said, and its reconciliation is above_spark; the second is
// untouched: exact, as without them.
func TestForgedNumbers(t *testing.T) {
	const rounds = 60
	srv, p, cluster, start, end := startForged(t, rounds)
	tcpAddr := p.bound.graphiteAddr(t, 0)
	c := simulate.NewCluster(simulate.Config{Addr: tcpAddr, Apps: 2, Executors: 3, Period: 10 * time.Second, Seed: 3, Confirm: true}, start)
	cluster.Store(c)
	victim, other := simulate.AppID(start, 1), simulate.AppID(start, 2)
	ctx := context.Background()
	if _, err := c.Replay(ctx, start, rounds/2); err != nil {
		t.Fatal(err)
	}
	// Between two genuine reports: the genuine one after it would read as
	// a counter reset, counted whole, before the screen.
	forgedAt := start.Add((rounds/2-1)*10*time.Second + 5*time.Second).Unix()
	var forged strings.Builder
	fmt.Fprintf(&forged, "%s.1.executor.cpuTime.count 1e13 %d\n", victim, forgedAt)
	fmt.Fprintf(&forged, "%s.1.executor.runTime.count 9.2e18 %d\n", victim, forgedAt)
	fmt.Fprintf(&forged, "%s.1.ExecutorMetrics.ProcessTreeJVMRSSMemory 64424509440 %d\n", victim, forgedAt)
	for i := range 6 {
		fmt.Fprintf(&forged, "%s.2.executor.cpuTime.count 0 %d\n", other, time.Date(2037, 1, 1, 0, 0, i, 0, time.UTC).Unix())
	}
	fmt.Fprintf(&forged, "%s.1.executor.runTime.count 1e300 %d\n", other, forgedAt)
	fmt.Fprintf(&forged, "%s.1.executor.cpuTime.count -4 %d\n", other, forgedAt)
	sendTCP(t, tcpAddr, forged.String())
	if _, err := c.Replay(ctx, start.Add(rounds/2*10*time.Second), rounds/2); err != nil {
		t.Fatal(err)
	}
	c.End(end)
	// Both applications reconciled: the accounting has run.
	p.reconciled(srv, "spark", 2)
	m := p.metrics()
	const listener = "tcp://127.0.0.1:0#1"
	if f, n := m[`sparkpulse_lines_dropped_total{listener="`+listener+`",reason="future"}`], m[`sparkpulse_lines_dropped_total{listener="`+listener+`",reason="not_counter"}`]; f != 6 || n != 2 {
		t.Errorf("dropped %v future, %v not_counter; want 6 and 2", f, n)
	}
	row := func(q string) map[string]any { return oneRow(t, srv, "spark", q) }
	num := func(v any) float64 { f, _ := influx.Number(v); return f }
	// Spark's own figures for the victim, from the model.
	var sparkNs int64
	c.UI.Update(func(m *sparkui.Model) {
		for _, a := range m.Apps {
			if a.ID == victim {
				for _, s := range a.Attempts[0].Stages {
					sparkNs += s.CPUTimeNs
				}
			}
		}
	})
	sparkCPU := float64(sparkNs) / 1e9

	u := row(fmt.Sprintf(`SELECT "cpu_from", "task_cpu_seconds", "cpu_utilisation", "peak_rss_bytes", "memory_utilisation", "recommended", "set_aside", "set_aside_count" FROM "spark_app_usage" WHERE "fact" = 'end' AND "applicationid" = '%s'`, victim))
	r := row(fmt.Sprintf(`SELECT "verdict", "above_executors", "text" FROM "spark_reconcile" WHERE "applicationid" = '%s'`, victim))
	t.Logf("victim: usage %v\nreconcile %v", u, r)
	if u["cpu_from"] != "stages" || num(u["task_cpu_seconds"]) != sparkCPU || num(u["cpu_utilisation"]) > 1 {
		t.Errorf("victim's CPU from %v: %v s, utilisation %v; want Spark's stage list, %v s", u["cpu_from"], u["task_cpu_seconds"], u["cpu_utilisation"], sparkCPU)
	}
	if num(u["peak_rss_bytes"]) >= 60<<30 || num(u["memory_utilisation"]) > 1.1 || strings.Contains(fmt.Sprint(u["recommended"]), "64") && strings.Contains(fmt.Sprint(u["recommended"]), "memoryOverhead") {
		t.Errorf("victim's peak %v (%v of the container), recommended %v", u["peak_rss_bytes"], u["memory_utilisation"], u["recommended"])
	}
	if text := fmt.Sprint(u["set_aside"]); !strings.HasPrefix(text, "process 1: cpu_time_ns 1.13e+13 > ") || !strings.Contains(text, "run_time_ms 9.2e+18 > 1.85305e+06, Spark's total") ||
		// Twice the 5 GiB container YARN enforces for 4g and its overhead.
		!strings.Contains(text, "ProcessTreeJVMRSSMemory peak 60.0 GiB > 10.0 GiB it could hold") {
		t.Errorf("victim's set_aside %q", text)
	}
	if r["verdict"] != "above_spark" || r["above_executors"] != "1" {
		t.Errorf("victim reconciled %v above %v: %v", r["verdict"], r["above_executors"], r["text"])
	}

	o := row(fmt.Sprintf(`SELECT "cpu_from", "task_cpu_seconds", "set_aside_count" FROM "spark_app_usage" WHERE "fact" = 'end' AND "applicationid" = '%s'`, other))
	or := row(fmt.Sprintf(`SELECT "verdict", "text" FROM "spark_reconcile" WHERE "applicationid" = '%s'`, other))
	if or["verdict"] != "exact" || o["cpu_from"] == "stages" || num(o["set_aside_count"]) != 0 {
		t.Errorf("the other application: reconciled %v (%v), CPU from %v, %v set aside", or["verdict"], or["text"], o["cpu_from"], o["set_aside_count"])
	}
	// Nothing of 2037 is stored.
	if late := srv.Query(t, "spark", fmt.Sprintf(`SELECT count("cpuTime.count") FROM "executor" WHERE time > '%s'`, end.Add(time.Hour).UTC().Format(time.RFC3339))); len(late) != 0 {
		t.Errorf("points dated ahead stored: %v", late)
	}
}

// startForged starts the real binary into a real InfluxDB, its annotator
// reading a History Server that serves the simulated cluster stored in
// cluster, for applications that ran rounds reporting periods of 10 s up
// to end.
func startForged(t *testing.T, rounds int) (srv *influxtest.Server, p *proc, cluster *atomic.Pointer[simulate.Cluster], start, end time.Time) {
	t.Helper()
	bin := sparkpulseBinary(t, "runs a real sparkpulse")
	srv = influxtest.Start(t)
	end = time.Now().Truncate(time.Second)
	start = end.Add(-time.Duration(rounds) * 10 * time.Second)
	ui, cluster := lateHistoryServer(t)
	p = startBinary(t, bin, config.Config{
		InfluxDB: config.InfluxDBConfig{URL: srv.URL},
		Annotate: config.AnnotateConfig{URLs: []string{ui.URL}, Interval: seconds(1), UsageDelay: seconds(5)}, // the stream's last points are in by then
		Deltas:   config.DeltaSettings{FirstSampleGrace: new(config.Duration(0))},
		Graphite: []config.GraphiteConfig{{Database: "spark"}},
	})
	return srv, p, cluster, start, end
}

// reconciled waits until n applications have their reconciliation in
// database db of srv (their accounting has run), for up to 60 s.
func (p *proc) reconciled(srv influxtest.Influxd, db string, n int) {
	p.t.Helper()
	p.until(60*time.Second, fmt.Sprintf("%d applications reconciled", n), func() bool {
		return len(srv.Query(p.t, db, `SELECT count("verdict") FROM "spark_reconcile" GROUP BY "applicationid"`)) >= n
	})
}

// oneRow runs q, which must answer one row, and returns it by column.
func oneRow(t *testing.T, srv influxtest.Influxd, db, q string) map[string]any {
	t.Helper()
	series := srv.Query(t, db, q)
	if len(series) != 1 || len(series[0].Values) != 1 {
		t.Fatalf("%s: %v", q, series)
	}
	r := map[string]any{}
	for i, col := range series[0].Columns {
		r[col] = series[0].Values[0][i]
	}
	return r
}

// InfluxDB down when an application's accounting is due, through the real
// binary: the read is retried, and once InfluxDB is back and the metrics'
// backlog delivered, the application is accounted once, from the whole
// stream (exact), not given up on as no_stream after a few seconds.
func TestAccountingAcrossInfluxDBRestart(t *testing.T) {
	bin := sparkpulseBinary(t, "runs a real sparkpulse")
	srv := influxtest.Start(t)
	end := time.Now().Truncate(time.Second)
	const rounds = 30
	start := end.Add(-rounds * 10 * time.Second)
	ui, cluster := lateHistoryServer(t)
	p := startBinary(t, bin, config.Config{
		StateDir: t.TempDir(),
		InfluxDB: config.InfluxDBConfig{URL: srv.URL},
		Annotate: config.AnnotateConfig{URLs: []string{ui.URL}, Interval: seconds(1), UsageDelay: seconds(3)},
		Deltas:   config.DeltaSettings{FirstSampleGrace: new(config.Duration(0))},
		Graphite: []config.GraphiteConfig{{Database: "spark"}},
	})
	tcpAddr := p.bound.graphiteAddr(t, 0)
	c := simulate.NewCluster(simulate.Config{Addr: tcpAddr, Apps: 1, Executors: 2, Period: 10 * time.Second, Seed: 4, Confirm: true}, start)
	cluster.Store(c)
	app := simulate.AppID(start, 1)
	if _, err := c.Replay(context.Background(), start, rounds); err != nil {
		t.Fatal(err)
	}
	c.End(end)
	// InfluxDB goes once some of the stream is in, the rest maybe not:
	// the accounting waits for the writers' backlog too.
	waitFor(t, p, "some of the stream delivered", func(m map[string]float64) bool {
		return m[`sparkpulse_influxdb_points_written_total{listener="tcp://127.0.0.1:0#1"}`] > 0
	})
	srv.Kill()
	p.until(30*time.Second, "the accounting's read failing while InfluxDB is down", func() bool {
		return strings.Contains(p.logs.String(), "metrics stream not read for an application's accounting")
	})
	srv.Restart(t)
	p.reconciled(srv, "spark", 1)
	// From the whole stream, once InfluxDB was back and the backlog in.
	if res := srv.Query(t, "spark", `SELECT "verdict", "text" FROM "spark_reconcile"`); len(res) != 1 || len(res[0].Values) != 1 || res[0].Values[0][1] != "exact" {
		t.Errorf("reconciliation %v, want one, exact", res)
	}
	if res := srv.Query(t, "spark", fmt.Sprintf(`SELECT "cpu_from" FROM "spark_app_usage" WHERE "fact" = 'end' AND "applicationid" = '%s'`, app)); len(res) != 1 || len(res[0].Values) != 1 || res[0].Values[0][1] == nil {
		t.Errorf("usage %v, want one end fact with the stream's CPU", res)
	}
}

// Forgeries that stay inside every bound one process's figures are held
// to, each against an application of its own, through the real binary
// into a real InfluxDB: a counter sent as 0 between two genuine reports
// (the next counts whole), CPU lines dated after the application's last
// report at 95 % of each executor's task time, a resident size half as
// much again as Spark's own peak, resident and Python memory of 2^63,
// 60 GiB of resident memory for an application whose metrics carry its
// name, a heap above its setting and Python workers of 9 GiB beside the
// JVM, past twice the 5 GiB YARN container. Each
// application's accounting takes Spark's figure, names what it set
// aside, and keeps its peak as Spark and a genuine stream give it; a
// fifth, untouched, reconciles exact with nothing set aside.
func TestPlausibleForgeries(t *testing.T) {
	const rounds = 60
	srv, p, cluster, start, end := startForged(t, rounds)
	tcpAddr := p.bound.graphiteAddr(t, 0)
	// The fourth sends its metrics under its name
	// (spark.metrics.namespace=${spark.app.name}), which no other running
	// application has (the simulator names them from four names, in turn).
	c := simulate.NewCluster(simulate.Config{Addr: tcpAddr, Apps: 7, Executors: 3, Period: 10 * time.Second, Seed: 5, Confirm: true, ByName: []int{3}}, start)
	cluster.Store(c)
	reset, late, rss, named, control, overflow := simulate.AppID(start, 1), simulate.AppID(start, 2), simulate.AppID(start, 3), simulate.AppID(start, 4), simulate.AppID(start, 5), simulate.AppID(start, 6)
	memory := simulate.AppID(start, 7) // a heap and Python workers, on two executors
	var name string
	c.UI.Update(func(m *sparkui.Model) { name = m.App(named).Name })
	ctx := context.Background()
	if _, err := c.Replay(ctx, start, rounds/2); err != nil {
		t.Fatal(err)
	}
	// Spark's own figures, from the model.
	partPeak := map[string]int64{} // of the app peaks last read: each executor's largest part
	peaks := func(app string) (rssPeak map[string]int64, taskMs map[string]int64, cpuNs int64) {
		rssPeak, taskMs = map[string]int64{}, map[string]int64{}
		clear(partPeak)
		c.UI.Update(func(m *sparkui.Model) {
			a := m.App(app).Attempts[0]
			for _, x := range a.Executors {
				rssPeak[x.ID] = x.Peak["ProcessTreeJVMRSSMemory"] + x.Peak["ProcessTreePythonRSSMemory"] + x.Peak["ProcessTreeOtherRSSMemory"]
				partPeak[x.ID] = max(x.Peak["ProcessTreeJVMRSSMemory"], x.Peak["ProcessTreePythonRSSMemory"], x.Peak["ProcessTreeOtherRSSMemory"])
				taskMs[x.ID] = x.TaskTimeMs
			}
			for _, s := range a.Stages {
				cpuNs += s.CPUTimeNs
			}
		})
		return
	}
	forgedAt := start.Add((rounds/2-1)*10*time.Second + 5*time.Second).Unix()
	mid, _, _ := peaks(rss)
	var forged strings.Builder
	fmt.Fprintf(&forged, "%s.1.executor.cpuTime.count 0 %d\n", reset, forgedAt)
	fmt.Fprintf(&forged, "%s.1.ExecutorMetrics.ProcessTreeJVMRSSMemory %d %d\n", rss, mid["1"]*16/10, forgedAt)
	fmt.Fprintf(&forged, "%s.2.ExecutorMetrics.ProcessTreeJVMRSSMemory 9.2e18 %d\n", overflow, forgedAt)
	fmt.Fprintf(&forged, "%s.2.ExecutorMetrics.ProcessTreePythonRSSMemory 9.2e18 %d\n", overflow, forgedAt)
	fmt.Fprintf(&forged, "%s.1.ExecutorMetrics.ProcessTreeJVMRSSMemory 64424509440 %d\n", name, forgedAt)
	fmt.Fprintf(&forged, "%s.1.ExecutorMetrics.JVMHeapMemory %d %d\n", memory, int64(5<<30), forgedAt)
	fmt.Fprintf(&forged, "%s.2.ExecutorMetrics.ProcessTreePythonRSSMemory %d %d\n", memory, int64(9<<30), forgedAt)
	sendTCP(t, tcpAddr, forged.String())
	if _, err := c.Replay(ctx, start.Add(rounds/2*10*time.Second), rounds/2); err != nil {
		t.Fatal(err)
	}
	// Dated after the application's last report, in the accounting's
	// window; sent before Spark says it ended, so that the accounting
	// reads them.
	_, taskMs, _ := peaks(late)
	forged.Reset()
	for _, x := range []string{"1", "2", "3"} {
		fmt.Fprintf(&forged, "%s.%s.executor.cpuTime.count %d %d\n", late, x, taskMs[x]*950_000, end.Add(time.Second).Unix())
	}
	sendTCP(t, tcpAddr, forged.String())
	// In InfluxDB before Spark says the application ended: the accounting
	// reads the stream once it has.
	q := fmt.Sprintf(`SELECT count("cpuTime.count") FROM "executor" WHERE "applicationid" = '%s' AND time = %ds`, late, end.Add(time.Second).Unix())
	p.until(30*time.Second, "the forged lines after the last report stored", func() bool {
		res := srv.Query(t, "spark", q)
		return len(res) == 1 && len(res[0].Values) == 1 && fmt.Sprint(res[0].Values[0][1]) == "3"
	})
	c.End(end)

	p.reconciled(srv, "spark", 7)
	usage := func(app string) map[string]any {
		return oneRow(t, srv, "spark", fmt.Sprintf(`SELECT "cpu_from", "task_cpu_seconds", "peak_rss_bytes", "set_aside", "set_aside_count", "recommendations", "notes" FROM "spark_app_usage" WHERE "fact" = 'end' AND "app_id" = '%s'`, app))
	}
	num := func(v any) float64 { f, _ := influx.Number(v); return f }
	for _, tc := range []struct {
		name, app, aside string
		sparkCPU         bool // task CPU is Spark's stage total
	}{
		// Above Spark's total for the executor, or the executors' sum
		// above Spark's stage totals: whichever the figures cross first.
		{"reset", reset, "Spark's", true},
		{"after the last report", late, "Spark's stage totals over every task", true},

		{"overflowing memory", overflow, "ProcessTreeJVMRSSMemory peak 9.2e+18 is no amount of memory", false},
		{"60 GiB under the application's name", named, "process 1: ProcessTreeJVMRSSMemory peak 60.0 GiB > ", false},
		{"a heap above its 4 GiB setting", memory, "process 1: JVMHeapMemory peak 5.0 GiB > 4.0 GiB it could hold", false},
		// Python workers' memory is not held to Spark's peaks (they keep
		// memory after their tasks, which Spark's peaks miss), but the
		// container holds the whole process tree.
		{"Python workers of 9 GiB", memory, "process 2: resident memory peak ", false},
	} {
		u := usage(tc.app)
		t.Logf("%s: %v", tc.name, u)
		rssPeak, _, cpuNs := peaks(tc.app)
		if !strings.Contains(fmt.Sprint(u["set_aside"]), tc.aside) || num(u["set_aside_count"]) < 1 {
			t.Errorf("%s: set aside %v, want %q", tc.name, u["set_aside"], tc.aside)
		}
		if tc.sparkCPU && (u["cpu_from"] != "stages" || num(u["task_cpu_seconds"]) != float64(cpuNs)/1e9) {
			t.Errorf("%s: CPU from %v, %v s; want Spark's stage list, %v s", tc.name, u["cpu_from"], u["task_cpu_seconds"], float64(cpuNs)/1e9)
		}
		// No forged figure in the peak: at most the largest sum of an
		// executor's parts' peaks as Spark lists them, and at least its
		// largest part (the stream's one-moment peak of the process
		// tree, where it stands, lies between).
		var most, least int64
		for id, v := range rssPeak {
			if id != "driver" {
				most, least = max(most, v), max(least, partPeak[id])
			}
		}
		if got := num(u["peak_rss_bytes"]); got > float64(most) || got < float64(least) {
			t.Errorf("%s: peak_rss_bytes %v, want Spark's figures: at most %d, the sum of parts, and at least %d, the largest part", tc.name, u["peak_rss_bytes"], most, least)
		}
	}
	// Within the container Spark's peaks are no bound (they miss polls
	// between stages): the figure stands, and the usage says only the
	// stream saw it.
	u := usage(rss)
	final, _, _ := peaks(rss)
	if want := fmt.Sprintf("peak resident memory %s from the metrics stream alone: Spark's own for executor 1 is %s", sizing.Bytes(int64(num(u["peak_rss_bytes"]))), sizing.Bytes(final["1"])); num(u["set_aside_count"]) != 0 || num(u["peak_rss_bytes"]) < float64(mid["1"]*16/10) || !strings.Contains(fmt.Sprint(u["notes"]), want) {
		t.Errorf("resident memory 1.6 times Spark's: %v; want nothing set aside and the note %q", u, want)
	}
	u = usage(control)
	if num(u["set_aside_count"]) != 0 || u["cpu_from"] == "stages" {
		t.Errorf("the untouched application: %v", u)
	}
}
