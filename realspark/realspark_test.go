package realspark

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/accounting"
	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/grafana"
	"github.com/sparkpulse/sparkpulse/grafana/grafanatest"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/sizing"
	"github.com/sparkpulse/sparkpulse/spark"
	"github.com/sparkpulse/sparkpulse/sparkapi"
	"github.com/sparkpulse/sparkpulse/templates"
)

var update = flag.Bool("update", false, "record each version's run under testdata/spark-real/<version>")

const (
	db       = "spark"
	udpDB    = "spark_udp"
	hsDB     = "spark_history"
	yearDB   = "spark_year"          // spark_app_history of the main sparkpulse, which the history dashboard reads
	liveDB   = "spark_live"          // annotations from the driver's UI alone
	blindDB  = "spark_blind"         // the same stream, no source that shows its applications
	prefix   = "team-a"              // the GraphiteSink prefix of the failures run
	failName = "sparkpulse failures" // sent under its name: spark.metrics.namespace=${spark.app.name}
	failKey  = "sparkpulse-failures" // the name as Dropwizard's reporter writes it
)

// TestRealSpark runs each pinned Spark through sparkpulse into InfluxDB:
// the main workload (shuffle, cache, skew, spill, Python UDF) over TCP and
// UDP at once, then the failures workload (a failing Python UDF, an
// executor killed, executors out of heap) with a prefix and the
// application's name as metrics namespace; then it compares what landed
// with what Spark answered.
func TestRealSpark(t *testing.T) {
	for _, v := range versions(t) {
		t.Run(v, func(t *testing.T) { runVersion(t, v) })
	}
}

// run is one version's run, for the checks.
type run struct {
	version   string
	srv       *influxtest.Server
	main, bad *application
	lines     []string // what went over TCP, both applications
	hs        string   // History Server URL
	// liveRefused counts the failed reads of the live-UI-only annotator,
	// which starts before Spark.
	liveRefused float64
	from, to    time.Time
}

func runVersion(t *testing.T, version string) {
	w := newSparkWork(t, version)
	home, work, events := w.home, w.dir, w.events
	r := &run{version: version, srv: influxtest.Start(t), from: time.Now().Add(-time.Minute)}
	r.hs = historyServer(t, home, work, events)

	// The driver's UI port is in sparkpulse's config, written before Spark
	// starts: it is one free a moment ago. With spark.port.maxRetries=0
	// (below) a port taken in between fails the application with Spark's
	// "Failed to bind SparkUI" instead of moving the UI to the next port,
	// where sparkpulse would not look.
	uiPort := fixedPort(t)
	ui := fmt.Sprintf("http://127.0.0.1:%d", uiPort)
	sp := startSparkpulse(t, r.srv.URL, config.Config{
		Internal: config.InternalConfig{Interval: config.Duration(2 * time.Second)},
		// sparkpulse starts before Spark: every first sample is a new series
		Deltas: config.DeltaSettings{FirstSampleGrace: new(config.Duration(0))},
		Annotate: config.AnnotateConfig{
			URLs:                    []string{ui, r.hs},
			Interval:                config.Duration(time.Second),
			UsageDelay:              config.Duration(3 * time.Second),
			StageDetailsMinDuration: config.SignedDuration(-time.Second),
			HistoryDatabase:         yearDB,
		},
		Graphite: []config.GraphiteConfig{{Protocol: "tcp", Database: db, SparkPrefixes: []string{prefix}}},
	})
	// The main application's second sink, over UDP, goes to a sparkpulse
	// of its own: the accounting sums an application's metrics over every
	// block's database, and one application sends to one sink. Its
	// annotator has the driver's UI alone, as a user who gives sparkpulse
	// only the Spark UI: refused until Spark starts, and no History Server
	// to show how the applications ended (checkLiveOnly).
	udp := startSparkpulse(t, r.srv.URL, config.Config{
		Deltas: config.DeltaSettings{FirstSampleGrace: new(config.Duration(0))},
		Annotate: config.AnnotateConfig{
			URLs:          []string{ui},
			Interval:      config.Duration(time.Second),
			CloseOutAfter: config.Duration(5 * time.Second), // no other source will show them
			Database:      liveDB,
		},
		Graphite: []config.GraphiteConfig{{
			Protocol:      "udp",
			Database:      udpDB,
			UDPReadBuffer: 8388608,
			Schema:        "cern", // the TCP block writes the default, wide: checkUDP compares the shapes
		}},
	})
	_, udpPort, err := net.SplitHostPort(udp.graphite(t, 0))
	if err != nil {
		t.Fatal(err)
	}
	tee := startTee(t, sp.graphite(t, 0), []string{prefix})
	// The same stream goes to a sparkpulse whose only source is a port
	// nothing listens on, as for an application whose UI is where no
	// source looks: what its metrics say is written all the same
	// (checkStreamOnly).
	blind := startSparkpulse(t, r.srv.URL, config.Config{
		Deltas: config.DeltaSettings{FirstSampleGrace: new(config.Duration(0))},
		Annotate: config.AnnotateConfig{
			URLs:     []string{fmt.Sprintf("http://127.0.0.1:%d", fixedPort(t))},
			Interval: config.Duration(time.Second),
			// Longer than any stall of a loaded host: a key quiet for it
			// mid-run would be written early.
			CloseOutAfter: config.Duration(20 * time.Second),
		},
		Graphite: []config.GraphiteConfig{{Protocol: "tcp", Database: blindDB, SparkPrefixes: []string{prefix}}},
	})
	tee.alsoTo(blind.graphite(t, 0))

	conf := func(extra map[string]string) map[string]string {
		c := map[string]string{
			"spark.driver.host":            "127.0.0.1",
			"spark.driver.bindAddress":     "127.0.0.1",
			"spark.ui.port":                strconv.Itoa(uiPort),
			"spark.port.maxRetries":        "0", // the UI on uiPort or nowhere; the other ports are 0
			"spark.ui.showConsoleProgress": "false",
			"spark.executor.memory":        "512m",
			"spark.eventLog.enabled":       "true",
			"spark.eventLog.dir":           "file:" + events,
			"spark.sql.shuffle.partitions": "8",
		}
		maps.Copy(c, sinkConf(t, tee.port()))
		maps.Copy(c, extra)
		return c
	}
	const master = "local-cluster[2,1,1024]"

	r.main = startApplication(t, home, work, workloadConfig{
		Master: master, AppName: "sparkpulse main", Scenario: "main", Executors: 2,
		Out: filepath.Join(work, "main"),
		Conf: conf(map[string]string{
			// A second sink, over UDP, to the UDP listener.
			"spark.metrics.conf.*.sink.udp.class":    "org.apache.spark.metrics.sink.GraphiteSink",
			"spark.metrics.conf.*.sink.udp.host":     "127.0.0.1",
			"spark.metrics.conf.*.sink.udp.port":     udpPort,
			"spark.metrics.conf.*.sink.udp.protocol": "udp",
			"spark.metrics.conf.*.sink.udp.period":   "1",
			"spark.metrics.conf.*.sink.udp.unit":     "seconds",
			// Small execution memory: the sort spills.
			"spark.memory.fraction":              "0.3",
			"spark.sql.streaming.metricsEnabled": "true",
			// Dynamic allocation, held at two executors: its source reports.
			"spark.dynamicAllocation.enabled":                 "true",
			"spark.dynamicAllocation.shuffleTracking.enabled": "true",
			"spark.dynamicAllocation.minExecutors":            "2",
			"spark.dynamicAllocation.initialExecutors":        "2",
			"spark.dynamicAllocation.maxExecutors":            "2",
		}),
	})
	tee.waitReports(t, r.main.id, func() []string { return activeProcesses(r.main) }, r.main.done)
	r.main.stop()

	r.bad = startApplication(t, home, work, workloadConfig{
		Master: master, AppName: failName, Scenario: "failures", Executors: 2,
		Out: filepath.Join(work, "failures"),
		Conf: conf(map[string]string{
			"spark.metrics.conf.*.sink.graphite.prefix": prefix,
			"spark.metrics.namespace":                   "${spark.app.name}",
			"spark.task.maxFailures":                    "2",
		}),
	})
	tee.waitReports(t, failKey, func() []string { return activeProcesses(r.bad) }, r.bad.done)
	r.bad.stop()

	// The accounting is written once the History Server shows each
	// application ended and usage-delay has passed.
	for _, a := range []*application{r.main, r.bad} {
		waitReconciled(t, r.srv, a.id)
	}
	// The driver's UI is gone with each application: the live-UI-only
	// annotator closes them out close-out-after later.
	for _, a := range []*application{r.main, r.bad} {
		eventually(t, time.Minute, "close-out of "+a.id+" from its live UI alone", func() error {
			res, err := r.srv.TryQuery(liveDB, fmt.Sprintf(`SELECT "outcome" FROM "spark_app_usage" WHERE "app_id" = '%s' AND "fact" = 'lost'`, a.id))
			if err != nil {
				return err
			}
			if len(res) == 0 {
				return errNotYet
			}
			return nil
		})
	}
	// The stream-only sparkpulse writes each close-out-after after its
	// last report.
	for _, key := range []string{r.main.id, failKey} {
		eventually(t, time.Minute, "the stream facts of "+key, func() error {
			res, err := r.srv.TryQuery(blindDB, fmt.Sprintf(`SELECT "executors" FROM "spark_app_usage" WHERE "applicationid" = '%s' AND "fact" = 'stream'`, key))
			if err != nil {
				return err
			}
			if len(res) == 0 {
				return errNotYet
			}
			return nil
		})
	}
	blind.stop(t)
	r.liveRefused = metric(t, udp.bound.Admin, "sparkpulse_annotate_errors_total", `kind="network"`)
	// Executors that died in the middle of a report cut its last line:
	// sparkpulse drops each such line, counted.
	var cut int
	r.lines, cut = tee.taken()
	if got := metric(t, sp.bound.Admin, "sparkpulse_lines_dropped_total", `reason="cut"`); got != float64(cut) {
		t.Errorf("sparkpulse counted %v cut lines, the proxy saw %d", got, cut)
	}
	t.Logf("%d reports ended in a cut line", cut)
	sp.stop(t)
	udp.stop(t)
	r.to = time.Now()
	checkLoopbackDir(t, work)

	if *update {
		record(t, r)
	}
	t.Run("inventory", func(t *testing.T) { checkInventory(t, r) })
	t.Run("udp", func(t *testing.T) { checkUDP(t, r) })
	t.Run("reconcile", func(t *testing.T) { checkReconcile(t, r) })
	t.Run("annotations", func(t *testing.T) { checkAnnotations(t, r) })
	t.Run("stages", func(t *testing.T) { checkStageDetails(t, r) })
	t.Run("report", func(t *testing.T) { checkReport(t, r) })
	t.Run("causes", func(t *testing.T) { checkCauses(t, r) })
	t.Run("python", func(t *testing.T) { checkPython(t, r) })
	t.Run("dashboards", func(t *testing.T) { checkDashboards(t, r) })
	t.Run("history", func(t *testing.T) { checkHistory(t, r) })
	t.Run("live_only", func(t *testing.T) { checkLiveOnly(t, r) })
	t.Run("stream_only", func(t *testing.T) { checkStreamOnly(t, r) })
}

// checkStreamOnly: with no source that shows them, each application gets
// its stream facts, and their figures are the stream's own: the task CPU
// and run time that the reconciliation (from the same stream, through
// the other sparkpulse) found, and an executor for each one Spark lists
// that reported (an executor killed before its first report, as the
// failures scenario's may be on a loaded machine, is not in the stream).
func checkStreamOnly(t *testing.T, r *run) {
	for _, a := range []*application{r.main, r.bad} {
		key := r.keyOf(a)
		app := one(t, r.srv, blindDB, fmt.Sprintf(`SELECT "status", "app_id", "end_ms" FROM "spark_app" WHERE "applicationid" = '%s' AND "fact" = 'stream'`, key))
		wantID := any(nil)
		if key == a.id {
			wantID = a.id
		}
		if app["status"] != "UNKNOWN" || app["app_id"] != wantID {
			t.Errorf("%s: spark_app stream fact %v", key, app)
		}
		u := one(t, r.srv, blindDB, fmt.Sprintf(`SELECT "executors", "task_cpu_seconds", "task_run_seconds", "executor_core_seconds", "outcome" FROM "spark_app_usage" WHERE "applicationid" = '%s' AND "fact" = 'stream'`, key))
		rec := one(t, r.srv, db, fmt.Sprintf(`SELECT "stream_cpu_time_ns", "stream_run_time_ms" FROM "spark_reconcile" WHERE "app_id" = '%s'`, a.id))
		var execs []sparkapi.Executor
		getJSON(t, r.hs+"/api/v1/applications/"+a.id+"/allexecutors", &execs)
		// <prefix>.<key>.<process>.<metric>: the failures application's
		// lines carry a prefix (spark.metrics.conf's).
		reported := map[string]bool{}
		for _, l := range r.lines {
			parts := strings.Split(strings.Fields(l + " ")[0], ".")
			if i := slices.Index(parts, key); i >= 0 && i+1 < len(parts) {
				reported[parts[i+1]] = true
			}
		}
		want := 0
		for _, x := range execs {
			if x.ID != "driver" && reported[x.ID] {
				want++
			}
		}
		if got := num(u["executors"]); got != float64(want) || want == 0 {
			t.Errorf("%s: %v executors in the stream facts; of the %d Spark lists, %d reported", key, got, len(execs)-1, want)
			explainStreamExecutors(t, r, key, app, reported)
		}
		if got, want := num(u["task_cpu_seconds"]), num(rec["stream_cpu_time_ns"])/1e9; math.Abs(got-want) > 1e-6*want {
			t.Errorf("%s: task_cpu_seconds %v, the reconciliation's stream %v", key, got, want)
		}
		if got, want := num(u["task_run_seconds"]), num(rec["stream_run_time_ms"])/1e3; math.Abs(got-want) > 1e-6*want {
			t.Errorf("%s: task_run_seconds %v, the reconciliation's stream %v", key, got, want)
		}
		if u["executor_core_seconds"] != nil || u["outcome"] != "unknown" {
			t.Errorf("%s: %v", key, u)
		}
		t.Logf("%s from its metrics alone: %v executors, %.3f s task CPU, %.3f s run", key, u["executors"], num(u["task_cpu_seconds"]), num(u["task_run_seconds"]))
	}
}

// explainStreamExecutors logs, for each executor in the lines of key,
// when it reported, what, and what of it the stream-only database holds,
// beside the stream fact's window: what a mismatch needs to be read.
func explainStreamExecutors(t *testing.T, r *run, key string, app map[string]any, reported map[string]bool) {
	t.Logf("%s: stream fact from %v to end_ms %v", key, app["time"], app["end_ms"])
	for id := range reported {
		var n int
		var first, last string
		names := map[string]int{}
		for _, l := range r.lines {
			f := strings.Fields(l)
			if len(f) != 3 {
				continue
			}
			parts := strings.Split(f[0], ".")
			if i := slices.Index(parts, key); i >= 0 && i+2 < len(parts) && parts[i+1] == id {
				n++
				if first == "" {
					first = f[2]
				}
				last = f[2]
				names[parts[i+2]]++
			}
		}
		var held []string
		if res, err := r.srv.TryQuery(blindDB, fmt.Sprintf(`SELECT count(*) FROM /.*/ WHERE "applicationid" = '%s' AND "process" = '%s'`, key, id)); err == nil {
			for _, s := range res {
				held = append(held, s.Name)
			}
		} else {
			held = append(held, err.Error())
		}
		t.Logf("%s process %s: %d lines, %s to %s, sources %v; stored in %v", key, id, n, first, last, names, held)
	}
}

// checkLiveOnly: with the driver's UI as its only source, refused before
// Spark started and gone with each application, sparkpulse still writes
// each application's facts and, once close-out-after has passed, its
// accounting: what it held up to its UI's last answer, outcome
// driver_lost, as no source showed how it ended.
func checkLiveOnly(t *testing.T, r *run) {
	if r.liveRefused == 0 {
		t.Errorf("the driver's UI was never refused: the annotator did not start before Spark")
	}
	for _, a := range []*application{r.main, r.bad} {
		var facts []string
		for _, s := range r.srv.Query(t, liveDB, fmt.Sprintf(`SELECT "fact", "status" FROM "spark_app" WHERE "app_id" = '%s'`, a.id)) {
			for _, v := range s.Values {
				facts = append(facts, fmt.Sprintf("%v %v", v[1], v[2]))
			}
		}
		if !slices.Equal(facts, []string{"start RUNNING", "lost UNKNOWN"}) {
			t.Errorf("%s: application facts %q, want start RUNNING, lost UNKNOWN", a.id, facts)
		}
		usage := one(t, r.srv, liveDB, fmt.Sprintf(`SELECT "outcome", "executor_core_seconds", "duration_ms" FROM "spark_app_usage" WHERE "app_id" = '%s' AND "fact" = 'lost'`, a.id))
		if usage["outcome"] != "driver_lost" {
			t.Errorf("%s: outcome %v, want driver_lost", a.id, usage["outcome"])
		}
		// Spark's own lifetimes, from the History Server: the live UI's
		// last answer is a few polls from the end, and its executor list
		// (read every third poll) a few more, so the closed-out figure is
		// Spark's within that long per core.
		var app sparkapi.Application
		getJSON(t, r.hs+"/api/v1/applications/"+a.id, &app)
		end := app.Attempts[0].EndTime.UnixMilli()
		var execs []sparkapi.Executor
		getJSON(t, r.hs+"/api/v1/applications/"+a.id+"/allexecutors", &execs)
		want, cores := coreSeconds(execs, end)
		const lastAnswer = 5.0 // seconds between the UI's last executor list and the end, at most
		if got := num(usage["executor_core_seconds"]); math.Abs(got-want) > lastAnswer*float64(cores) {
			t.Errorf("%s: executor_core_seconds %v closed out; Spark's Σ cores × lifetime %v (%d cores)", a.id, got, want, cores)
		}
		t.Logf("%s: closed out from its live UI alone: %.3f core-s against Spark's %.3f, %v ms", a.id, num(usage["executor_core_seconds"]), want, usage["duration_ms"])
	}
}

// activeProcesses are the driver and the executors alive when the jobs
// were done.
func activeProcesses(a *application) []string {
	var execs []sparkapi.Executor
	a.rest("allexecutors", &execs)
	var out []string
	for _, x := range execs {
		if x.IsActive {
			out = append(out, x.ID)
		}
	}
	return out
}

// keyOf is the applicationid tag of an application's metrics.
func (r *run) keyOf(a *application) string {
	if a == r.bad {
		return failKey
	}
	return a.id
}

// mapped is a line of the recorded stream under the built-in mapping.
type mapped struct {
	app, process, namespace, measurement string
	name                                 string // spark.InventoryName
	value                                float64
	ts                                   int64
}

func (r *run) mapped(t *testing.T) []mapped {
	t.Helper()
	m := spark.NewMapper(spark.Options{Prefixes: []string{prefix}})
	var res templates.Result
	var out []mapped
	for _, l := range r.lines {
		f := strings.Fields(l)
		if len(f) != 3 {
			t.Fatalf("not a Graphite line: %q", l)
		}
		if err := m.Apply([]byte(f[0]), &res); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		ts, _ := strconv.ParseInt(f[2], 10, 64)
		out = append(out, mapped{app: tagOf(&res, "applicationid"), process: tagOf(&res, "process"),
			namespace: tagOf(&res, "namespace"), measurement: string(res.Measurement), name: spark.InventoryName(&res),
			value: v, ts: ts})
	}
	return out
}

// checkInventory: every path Spark sent maps to a documented measurement
// (none is "anything else": a measurement without a namespace), and the
// set of metric names is the committed one for this version.
func checkInventory(t *testing.T, r *run) {
	names := map[string]bool{}
	unmapped := map[string]bool{}
	for i, m := range r.mapped(t) {
		if m.name == "" {
			unmapped[strings.Fields(r.lines[i])[0]] = true
			continue
		}
		names[m.name] = true
	}
	if len(unmapped) > 0 {
		t.Errorf("%d paths fell into \"anything else\": %v", len(unmapped), sortedKeys(unmapped)[:min(len(unmapped), 20)])
	}
	got := sortedKeys(names)
	golden := filepath.Join(repoRoot, "testdata", "spark-real", r.version, "metric-names.txt")
	if *update {
		writeFile(t, golden, []byte(strings.Join(got, "\n")+"\n"))
	}
	b, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (record it with -update)", err)
	}
	want := strings.Split(strings.TrimSpace(string(b)), "\n")
	var added, gone []string
	for _, n := range got {
		if !slices.Contains(want, n) {
			added = append(added, n)
		}
	}
	for _, n := range want {
		if !names[n] {
			gone = append(gone, n)
		}
	}
	// A name Spark sends that the golden file lacks is a change of Spark's
	// to look at; one it did not send this time may depend on timing
	// (e.g. a pool's usage after GC before any GC), so it is only logged.
	if len(added) > 0 {
		t.Errorf("Spark %s sent %d metric names not in %s (run with -update and review the diff): %v", r.version, len(added), golden, added)
	}
	if len(gone) > 0 {
		t.Logf("Spark %s did not send %d names of %s this time: %v", r.version, len(gone), golden, gone)
	}
	t.Logf("%d lines, %d metric names", len(r.lines), len(got))
}

// checkUDP: the UDP sink of the main application reached the UDP block,
// which writes the CERN shape where the TCP block writes the wide one:
// every executor's last task counters, and the sums of their deltas, are
// the same in both.
func checkUDP(t *testing.T, r *run) {
	for _, m := range []schema.Metric{schema.SucceededTasks, schema.CPUTime, schema.RunTime} {
		query := func(s schema.Shape, agg, field string) string {
			return fmt.Sprintf(`SELECT %s(%q) FROM %q WHERE "applicationid" = '%s' GROUP BY "process"`,
				agg, field, s.Measurement(m), r.main.id)
		}
		wide, cern := schema.Wide, schema.CERN
		for _, c := range []struct{ agg, tcp, udp string }{
			{"last", wide.Field(m), cern.Field(m)},
			{"sum", wide.DeltaField(m), cern.DeltaField(m)},
		} {
			tcp := lastByProcess(t, r.srv, db, query(wide, c.agg, c.tcp))
			udp := lastByProcess(t, r.srv, udpDB, query(cern, c.agg, c.udp))
			if len(tcp) < 2 {
				t.Fatalf("%s %s: %d processes over TCP", c.agg, m.Name, len(tcp))
			}
			for p, v := range tcp {
				if udp[p] != v {
					t.Errorf("%s %s of %s: %v over UDP (cern), %v over TCP (wide)", c.agg, m.Name, p, udp[p], v)
				}
			}
		}
	}
}

func lastByProcess(t *testing.T, srv *influxtest.Server, database, q string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, s := range srv.Query(t, database, q) {
		out[s.Tags["process"]] = num(s.Values[0][1])
	}
	return out
}

// checkReconcile: the main application, whose reports all arrived, is
// exact against Spark's totals; the failures application names exactly
// the executors whose last reports, as the stream shows, fell short of
// Spark's count of their tasks.
func checkReconcile(t *testing.T, r *run) {
	lines := r.mapped(t)
	for _, a := range []*application{r.main, r.bad} {
		var execs []sparkapi.Executor
		a.rest("allexecutors", &execs)
		streamed := map[string]float64{}
		for _, m := range lines {
			if m.app == r.keyOf(a) && m.namespace == "executor" && m.measurement == "succeededTasks.count" {
				streamed[m.process] = max(streamed[m.process], m.value)
			}
		}
		var short []string
		total := 0
		for _, x := range execs {
			total += x.CompletedTasks
			if x.ID != "driver" && float64(x.CompletedTasks) > streamed[x.ID] {
				short = append(short, x.ID)
			}
		}
		sort.Strings(short)
		row := one(t, r.srv, db, fmt.Sprintf(`SELECT * FROM "spark_reconcile" WHERE "app_id" = '%s'`, a.id))
		t.Logf("%s: verdict %v: %v", a.name, row["verdict"], row["text"])
		// Nothing real Spark sends is set aside as implausible.
		if u := one(t, r.srv, db, fmt.Sprintf(`SELECT "set_aside_count", "set_aside" FROM "spark_app_usage" WHERE "app_id" = '%s' AND "fact" = 'end'`, a.id)); num(u["set_aside_count"]) != 0 {
			t.Errorf("%s: real Spark's stream set aside: %v", a.name, u["set_aside"])
		}
		if got := num(row["spark_tasks"]); got != float64(total) {
			t.Errorf("%s: spark_tasks %v, Spark's executors list %d", a.name, got, total)
		}
		gotShort := strings.Join(strings.Fields(strings.ReplaceAll(fmt.Sprint(row["short_executors"]), ",", " ")), " ")
		if row["short_executors"] == nil {
			gotShort = ""
		}
		if want := strings.Join(short, " "); gotShort != want {
			t.Errorf("%s: short_executors %q, the stream shows %q short", a.name, gotShort, want)
		}
		switch {
		case a == r.main:
			if row["verdict"] != accounting.ReconcileExact {
				t.Errorf("%s: verdict %v, want exact: %v", a.name, row["verdict"], row["text"])
			}
		case len(short) > 0:
			if row["verdict"] != accounting.ReconcileShort {
				t.Errorf("%s: verdict %v, want short: %v", a.name, row["verdict"], row["text"])
			}
		default:
			t.Logf("%s: no executor was short this time (killed right after a report)", a.name)
		}
	}
}

// checkAnnotations: every job, stage attempt and SQL execution the live
// UI listed has its end fact with Spark's status and times.
func checkAnnotations(t *testing.T, r *run) {
	for _, a := range []*application{r.main, r.bad} {
		key := r.keyOf(a)
		want, got := expectedFacts(t, a), writtenFacts(t, r.srv, db, key)
		compareFacts(t, a.name+" (live UI, then History Server)", want, got)
	}
}

// expectedFacts are "measurement id: status start end" lines from the
// REST answers the driver saved.
func expectedFacts(t *testing.T, a *application) []string {
	var jobs []sparkapi.Job
	var stages []sparkapi.Stage
	var sqls []sparkapi.SQLExecution
	a.rest("jobs", &jobs)
	a.rest("stages", &stages)
	a.rest("sql", &sqls)
	var out []string
	for _, j := range jobs {
		out = append(out, fmt.Sprintf("spark_job %d: %s %d %d", j.JobID, j.Status, j.SubmissionTime.Ms(), j.CompletionTime.Ms()))
	}
	for _, s := range stages {
		if s.SubmissionTime == nil {
			continue // skipped: it never ran, and has no fact
		}
		out = append(out, fmt.Sprintf("spark_stage %d.%d: %s %d %d", s.StageID, s.AttemptID, s.Status, s.SubmissionTime.Ms(), s.CompletionTime.Ms()))
	}
	for _, x := range sqls {
		out = append(out, fmt.Sprintf("spark_sql %d: %s %d %d", x.ID, x.Status, x.SubmissionTime.Ms(), x.SubmissionTime.Ms()+x.Duration))
	}
	sort.Strings(out)
	return out
}

// writtenFacts are the same lines from the end facts in database.
func writtenFacts(t *testing.T, srv *influxtest.Server, database, key string) []string {
	var out []string
	for _, m := range []struct{ name, id string }{
		{"spark_job", `"job_id"`}, {"spark_stage", `"stage_id", "stage_attempt"`}, {"spark_sql", `"execution_id"`},
	} {
		q := fmt.Sprintf(`SELECT %s, "status", "end_ms" FROM %q WHERE "applicationid" = '%s' AND "fact" = 'end'`, m.id, m.name, key)
		for _, s := range srv.Query(t, database, q) {
			for _, row := range s.Values {
				id := fmt.Sprint(row[1])
				if m.name == "spark_stage" {
					id += "." + fmt.Sprint(row[2])
				}
				n := len(row)
				startMs := integer(row[0]) / 1_000_000
				out = append(out, fmt.Sprintf("%s %s: %v %d %d", m.name, id, row[n-2], startMs, integer(row[n-1])))
			}
		}
	}
	sort.Strings(out)
	return out
}

func compareFacts(t *testing.T, what string, want, got []string) {
	t.Helper()
	if len(want) == 0 {
		t.Fatalf("%s: Spark listed nothing", what)
	}
	if slices.Equal(want, got) {
		return
	}
	var missing, extra []string
	for _, w := range want {
		if !slices.Contains(got, w) {
			missing = append(missing, w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			extra = append(extra, g)
		}
	}
	t.Errorf("%s: %d facts, Spark listed %d\nmissing or different: %q\nnot listed by Spark: %q", what, len(got), len(want), missing, extra)
}

// checkStageDetails: every completed stage of the main application has
// its task distribution and slowest task as Spark's History Server
// computes them; the skewed stage's largest shuffle read is many times
// its median, and the sort spilled.
func checkStageDetails(t *testing.T, r *run) {
	var stages []sparkapi.Stage
	r.main.rest("stages", &stages)
	q := fmt.Sprintf(`SELECT * FROM "spark_stage" WHERE "applicationid" = '%s' AND "fact" = 'end'`, r.main.id)
	written := map[string]map[string]any{}
	for _, s := range r.srv.Query(t, db, q) {
		for _, row := range s.Values {
			f := map[string]any{}
			for i, c := range s.Columns {
				f[c] = row[i]
			}
			written[fmt.Sprintf("%v.%v", f["stage_id"], f["stage_attempt"])] = f
		}
	}
	skewed, spilled := false, false
	for _, st := range stages {
		if st.Status != "COMPLETE" {
			continue
		}
		key := fmt.Sprintf("%d.%d", st.StageID, st.AttemptID)
		f := written[key]
		if f == nil {
			t.Errorf("stage %s: no end fact", key)
			continue
		}
		base := fmt.Sprintf("%s/api/v1/applications/%s/stages/%d/%d", r.hs, r.main.id, st.StageID, st.AttemptID)
		var sum sparkapi.TaskSummary
		getJSON(t, base+"/taskSummary?quantiles=0.5,0.95,1.0", &sum)
		var slowest []sparkapi.TaskData
		getJSON(t, base+"/taskList?sortBy=-runtime&length=1", &slowest)
		want := map[string]int64{
			"task_run_time_ms_p50":        int64(sum.ExecutorRunTime[0]),
			"task_run_time_ms_p95":        int64(sum.ExecutorRunTime[1]),
			"task_run_time_ms_max":        int64(sum.ExecutorRunTime[2]),
			"task_shuffle_read_bytes_max": int64(sum.ShuffleReadMetrics.ReadBytes[2]),
			"task_spill_disk_bytes_max":   int64(sum.DiskBytesSpilled[2]),
			"task_input_bytes_max":        int64(sum.InputMetrics.BytesRead[2]),
		}
		if len(slowest) == 1 && slowest[0].TaskMetrics != nil {
			want["straggler_run_time_ms"] = slowest[0].TaskMetrics.ExecutorRunTime
		}
		for k, v := range want {
			if got := integer(f[k]); got != v {
				t.Errorf("stage %s (%s): %s = %v, the History Server's %d", key, st.Description, k, f[k], v)
			}
		}
		if med := sum.ShuffleReadMetrics.ReadBytes[0]; strings.HasPrefix(st.Description, "skew") && med > 0 &&
			sum.ShuffleReadMetrics.ReadBytes[2] >= 4*med {
			skewed = true
			if num(f["task_skew"]) <= 1 || f["straggler_executor"] == nil {
				t.Errorf("skewed stage %s: task_skew %v, straggler %v", key, f["task_skew"], f["straggler_executor"])
			}
		}
		if st.DiskBytesSpilled > 0 && integer(f["disk_bytes_spilled"]) == st.DiskBytesSpilled {
			spilled = true
		}
	}
	if !skewed || !spilled {
		t.Errorf("the workload's skewed stage seen: %v; a stage that spilled, written as Spark counts it: %v", skewed, spilled)
	}
}

// checkReport runs `sparkpulse report` on each application, from the
// History Server: the skewed stage is judged skewed (its bytes were), and
// the failed tasks read as the failures run made them.
func checkReport(t *testing.T, r *run) {
	run := func(a *application) timeReport { return reportOf(t, r.hs, a.id) }

	var stages []sparkapi.Stage
	r.main.rest("stages", &stages)
	skewStage := ""
	for _, st := range stages {
		if strings.HasPrefix(st.Description, "skew") && st.NumTasks == 8 {
			skewStage = fmt.Sprintf("%d.%d", st.StageID, st.AttemptID)
		}
	}
	found := false
	for _, s := range run(r.main).Time.Slowest {
		var rules []string
		for _, v := range s.Verdicts {
			rules = append(rules, v.Rule)
		}
		t.Logf("main: stage %s: %v %s", s.Stage, s.Verdicts, s.Note)
		if s.Stage == skewStage {
			found = true
			if !slices.Contains(rules, "skewed") || slices.Contains(rules, "straggler") {
				t.Errorf("the skewed stage %s: %v", s.Stage, s.Verdicts)
			}
		}
	}
	if !found {
		t.Errorf("the skewed stage %s is not among the slowest the report judged", skewStage)
	}

	classes := map[string]string{}
	for _, f := range run(r.bad).Time.FailedTasks {
		classes[f.Class] = f.Kind
	}
	t.Logf("failures: failed tasks %v", classes)
	// Tasks lost with their executor are classed with why it went: the
	// one killed under its tasks (code 137) always; those on an executor
	// out of heap (code 52) when it had other tasks running, which varies.
	for class, kind := range map[string]string{"PythonException: ValueError": "exception", "ExecutorLostFailure (killed)": "executor_lost"} {
		if classes[class] != kind {
			t.Errorf("report's failed tasks %v lack %s (%s)", classes, class, kind)
		}
	}
	for class := range classes {
		if lost, ok := strings.CutPrefix(class, "ExecutorLostFailure"); ok && lost != " (killed)" && lost != " (heap_oom)" {
			t.Errorf("report's failed tasks: %q, want each lost task with its executor's removal, killed or heap_oom", class)
		}
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
}

// checkCauses: the executors the failures run lost are classified as
// Spark reports them in local-cluster mode: SIGKILL exits 137, a heap
// OutOfMemoryError exits 52 (SparkExitCode.OOM); and the failed tasks
// carry their real error classes.
func checkCauses(t *testing.T, r *run) {
	var execs []sparkapi.Executor
	r.bad.rest("allexecutors", &execs)
	want := map[string]string{}
	killed, oom := 0, 0
	for _, x := range execs {
		if x.RemoveReason == "" {
			continue
		}
		kind := sizing.RemoveKind(x.RemoveReason)
		want[x.ID] = kind + " " + x.RemoveReason
		switch x.RemoveReason {
		case "Command exited with code 137":
			killed++
			if kind != sizing.RemovedKilled {
				t.Errorf("executor %s: %q read as %s", x.ID, x.RemoveReason, kind)
			}
		case "Command exited with code 52":
			oom++
			if kind != sizing.RemovedHeapOOM {
				t.Errorf("executor %s: %q read as %s", x.ID, x.RemoveReason, kind)
			}
		default:
			// When the worker's word is slower than
			// spark.standalone.executorRemoveDelayOnDisconnection (5 s),
			// Spark records the lost connection instead
			// (StandaloneSchedulerBackend): possible on a loaded machine.
			if !strings.HasPrefix(x.RemoveReason, "Remote RPC client disassociated") {
				t.Errorf("executor %s: removal reason %q, not one this workload causes", x.ID, x.RemoveReason)
			} else if kind != sizing.RemovedLost {
				t.Errorf("executor %s: %q read as %s", x.ID, x.RemoveReason, kind)
			}
			t.Logf("executor %s: %q", x.ID, x.RemoveReason)
		}
	}
	if killed > 1 || oom < 1 || killed+oom+1 < len(want) {
		t.Fatalf("Spark lists %d executors killed and %d out of heap: %v", killed, oom, want)
	}
	if killed == 0 {
		t.Logf("the killed executor's exit code did not reach the driver in time: %v", want)
	}
	got := map[string]string{}
	for _, s := range r.srv.Query(t, db, fmt.Sprintf(`SELECT "executor_id", "remove_kind", "remove_reason" FROM "spark_executor_removal" WHERE "applicationid" = '%s'`, failKey)) {
		for _, row := range s.Values {
			got[fmt.Sprint(row[1])] = fmt.Sprint(row[2]) + " " + fmt.Sprint(row[3])
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("executor removals written %v, Spark lists %v", got, want)
	}

	// Failed tasks: the Python UDF's exception, the tasks on executors
	// that died, and the tasks the aborted job killed.
	classes := map[string]int{}
	for _, s := range r.srv.Query(t, db, fmt.Sprintf(`SELECT "error_class", "kind", "error" FROM "spark_task_failure" WHERE "applicationid" = '%s'`, failKey)) {
		for _, row := range s.Values {
			classes[fmt.Sprint(row[1])+" "+fmt.Sprint(row[2])]++
			if row[1] == "PythonException: ValueError" && row[3] != "ValueError: bad row 4242" {
				t.Errorf("the Python UDF's failure reads %q", row[3])
			}
		}
	}
	t.Logf("failed tasks by class and kind: %v", classes)
	for _, c := range []string{"PythonException: ValueError exception", "ExecutorLostFailure executor_lost"} {
		if classes[c] == 0 {
			t.Errorf("no failed task of %q: %v", c, classes)
		}
	}
}

// checkPython: the Python workers' resident memory reaches InfluxDB and
// the accounting.
func checkPython(t *testing.T, r *run) {
	var peak float64
	for _, m := range r.mapped(t) {
		if m.app == r.main.id && m.process != "driver" && m.measurement == "ProcessTreePythonRSSMemory" {
			peak = max(peak, m.value)
		}
	}
	var execs []sparkapi.Executor
	r.main.rest("allexecutors", &execs)
	for _, x := range execs {
		if x.ID != "driver" {
			peak = max(peak, float64(x.PeakMemoryMetrics["ProcessTreePythonRSSMemory"]))
		}
	}
	if peak <= 0 {
		t.Fatalf("no executor sent or listed a ProcessTreePythonRSSMemory above 0")
	}
	row := one(t, r.srv, db, fmt.Sprintf(`SELECT "peak_python_rss_bytes" FROM "spark_app_usage" WHERE "app_id" = '%s' AND "fact" = 'end'`, r.main.id))
	if got := num(row["peak_python_rss_bytes"]); got < peak {
		t.Errorf("peak_python_rss_bytes %v, the largest of the stream's and Spark's executor peaks %v", got, peak)
	}
}

// checkHistory: a sparkpulse reading only the History Server, over the
// same event logs, writes the same facts.
func checkHistory(t *testing.T, r *run) {
	sp := startSparkpulse(t, r.srv.URL, config.Config{
		Annotate: config.AnnotateConfig{
			URLs:                    []string{r.hs},
			Interval:                config.Duration(time.Second),
			UsageDelay:              config.Duration(time.Second),
			StageDetailsMinDuration: config.SignedDuration(-time.Second),
		},
		Graphite: []config.GraphiteConfig{{Database: hsDB}},
	})
	for _, a := range []*application{r.main, r.bad} {
		want := writtenFacts(t, r.srv, db, r.keyOf(a))
		eventually(t, 2*time.Minute, "History Server facts of "+a.id, func() error {
			if got := writtenFacts(t, r.srv, hsDB, r.keyOf(a)); !slices.Equal(got, want) {
				return fmt.Errorf("%d facts of %d", len(got), len(want))
			}
			return nil
		})
	}
	sp.stop(t)
}

// one returns the single row of q as column → value.
func one(t *testing.T, srv *influxtest.Server, database, q string) map[string]any {
	t.Helper()
	res := srv.Query(t, database, q)
	if len(res) != 1 || len(res[0].Values) != 1 {
		t.Fatalf("%s: %d series, want one row", q, len(res))
	}
	row := map[string]any{}
	for i, c := range res[0].Columns {
		row[c] = res[0].Values[0][i]
	}
	return row
}

func num(v any) float64 {
	switch x := v.(type) {
	case json.Number:
		f, _ := x.Float64()
		return f
	case float64:
		return x
	}
	return math.NaN()
}

// integer reads an integer column exactly (a time in ns does not fit a
// float64's mantissa).
func integer(v any) int64 {
	if x, ok := v.(json.Number); ok {
		if i, err := x.Int64(); err == nil {
			return i
		}
	}
	return int64(num(v))
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// record writes the run under testdata/spark-real/<version>: the Graphite
// lines (gzip), the REST answers each driver saved, and how they were
// recorded.
func record(t *testing.T, r *run) {
	dir := filepath.Join(repoRoot, "testdata", "spark-real", r.version)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write([]byte(strings.Join(r.lines, "\n") + "\n"))
	zw.Close()
	writeFile(t, filepath.Join(dir, "graphite.txt.gz"), buf.Bytes())
	meta, _ := json.MarshalIndent(map[string]string{
		"spark_version": r.version,
		"java":          javaVersion(t),
		"prefix":        prefix,
		"command":       "make deps && go test ./realspark -run 'TestRealSpark/" + r.version + "' -update",
	}, "", " ")
	writeFile(t, filepath.Join(dir, "recording.json"), append(meta, '\n'))
	for _, a := range []*application{r.main, r.bad} {
		a.record(t, filepath.Join(dir, a.name), map[string]any{"application": a.id, "metrics_key": r.keyOf(a)})
	}
}

// emptyPanels are the dashboard queries that stay empty over the real run,
// each with the reason: what this run's Spark did not produce.
var emptyPanels = map[string]string{}

func init() {
	// The health dashboard's error panels have data, at zero: sparkpulse
	// serves every error counter from its start (see docs/operations.md).
	const cgroup = "the CERN SparkPlugins' CgroupMetrics is not loaded (spark.plugins=ch.cern.CgroupMetrics)"
	for _, d := range []string{"spark.json", "spark-query-time.json"} {
		for _, p := range []string{`"Container CPU (cores)" A`, `"Container memory" A`, `"Container memory" B`,
			`"Container network" A`, `"Container network" B`, `"Container, JVM and task CPU (cores)" A`} {
			emptyPanels[d+": panel "+p] = cgroup
		}
	}
	emptyPanels[`fleet.json: panel "Container CPU across the cluster (cgroup plugin)" A`] = cgroup
}

// checkDashboards runs every query of every committed dashboard over the
// real run: each returns data, or is listed in emptyPanels with its reason.
func checkDashboards(t *testing.T, r *run) {
	files, _ := filepath.Glob(filepath.Join(repoRoot, "grafana", "dashboards", "*.json"))
	if len(files) < 2 {
		t.Fatalf("dashboards: %v", files)
	}
	var empty []string
	for _, f := range files {
		database := db
		if filepath.Base(f) == grafana.HistoryDashboardFile {
			database = yearDB
		}
		for _, res := range grafanatest.Run(t, r.srv, database, f, r.from, r.to) {
			key := filepath.Base(f) + ": " + res.Where
			_, listed := emptyPanels[key]
			switch {
			case res.WithData == 0 && !listed:
				empty = append(empty, key)
				t.Errorf("%s: no data from real Spark %s, and no reason listed: %s", key, r.version, res.Text)
			case res.WithData > 0 && listed:
				t.Errorf("%s: has data from real Spark %s, but is listed as empty (%s)", key, r.version, emptyPanels[key])
			}
		}
	}
	if len(empty) > 0 {
		t.Logf("empty:\n%s", strings.Join(empty, "\n"))
	}
}

// javaVersion is the first line of `java -version`.
func javaVersion(t *testing.T) string {
	out, err := exec.Command("java", "-version").CombinedOutput()
	if err != nil {
		t.Fatalf("java -version: %v", err)
	}
	first, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(first)
}

// timeReport is what `sparkpulse report --json` says of where an
// application's time went.
type timeReport struct {
	Time struct {
		Slowest []struct {
			Stage    string
			Verdicts []struct{ Rule, Text string }
			Note     string
		}
		FailedTasks []struct {
			Class, Kind string
			Tasks       int
		} `json:"failed_tasks"`
	} `json:"where_the_time_went"`
}

// reportOf runs `sparkpulse report --json` on application id, from the
// History Server at hs.
func reportOf(t *testing.T, hs, id string, flags ...string) timeReport {
	t.Helper()
	out, err := exec.Command(binary(t), slices.Concat([]string{"report", "--url", hs, "--json"}, flags, []string{id})...).Output()
	if err != nil {
		t.Fatalf("sparkpulse report %s: %v\n%s", id, err, out)
	}
	var rep timeReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("report %s: %v\n%s", id, err, out)
	}
	return rep
}
