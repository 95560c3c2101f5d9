package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/config/configtest"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
	"github.com/sparkpulse/sparkpulse/report"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/simulate"
	"github.com/sparkpulse/sparkpulse/sizing"
	"github.com/sparkpulse/sparkpulse/sparkui"
)

// Four simulated applications — an ordinary one, a PySpark one with the
// CERN cgroup plugin, one that uses few of its cores and one whose
// executors come near their memory limit — run ten minutes through
// sparkpulse into a real InfluxDB, with executors replaced as they go
// (one in three killed over its memory limit, its last report lost).
// When they end, the annotator's accounting must hold what the simulated
// cluster gave them to the second, reconcile the stream with Spark's
// totals exactly where every report arrived and name the executors whose
// last report did not, and right-size them; `report --fleet` must rank
// and total them. The same in either shape of the built-in mapping.
func TestFleetRealInfluxDB(t *testing.T) {
	srv := influxtest.Start(t)
	forEachSchema(t, func(t *testing.T, sc schema.Shape, setting string) {
		fleetRealInfluxDB(t, srv, "spark_"+sc.String(), setting)
	})
}

// fleetRealInfluxDB is TestFleetRealInfluxDB in database db, whose
// [[graphite]] block, and the config of the reports, have the schema
// setting.
func fleetRealInfluxDB(t *testing.T, srv *influxtest.Server, db, setting string) {
	end := time.Now().Truncate(time.Second)
	const rounds = 60
	start := end.Add(-rounds * 10 * time.Second)
	ui, cluster := lateHistoryServer(t)
	cfg := config.Config{
		InfluxDB: config.InfluxDBConfig{URL: srv.URL},
		// Polled below, once the stream is flushed.
		Annotate: config.AnnotateConfig{URLs: []string{ui.URL}, Interval: seconds(3600), UsageDelay: config.Duration(time.Millisecond),
			HistoryDatabase: db + "_history"},
		// sparkpulse is up before the applications: every first sample is new work.
		Deltas:   config.DeltaSettings{FirstSampleGrace: new(config.Duration(0))},
		Graphite: []config.GraphiteConfig{{Database: db, Schema: setting}},
	}
	svc := startSparkpulse(t, cfg)
	// The fourth sends its metrics under its name
	// (spark.metrics.namespace=${spark.app.name}): joined all the same.
	c := simulate.NewCluster(simulate.Config{Addr: svc.addr(0), Apps: 4, Executors: 3, Period: 10 * time.Second, Seed: 11,
		ExecutorLifetime: 3 * time.Minute, Confirm: true, ByName: []int{3}}, start)
	cluster.Store(c)
	if _, err := c.Replay(context.Background(), start, rounds); err != nil {
		t.Fatal(err)
	}
	c.End(end)
	svc.flush()
	svc.annotator.PollOnce(context.Background())
	svc.flush()

	// What the simulated cluster gave each application, from its model.
	type given struct {
		coreSeconds, memSeconds float64
		killed                  []string
	}
	want := map[string]*given{}
	names := map[string]string{}
	c.UI.Update(func(m *sparkui.Model) {
		for _, app := range m.Apps {
			names[app.ID] = app.Name
			a := app.Attempts[0]
			s, err := sizing.FromProperties(a.Properties)
			if err != nil {
				t.Error(err)
				return
			}
			g := &given{}
			for _, x := range a.Executors {
				if x.ID == "driver" {
					continue
				}
				gone := a.End
				if !x.Removed.IsZero() {
					gone = x.Removed
				}
				alive := float64(gone.Sub(x.Added).Milliseconds()) / 1000
				g.coreSeconds += float64(x.Cores) * alive
				g.memSeconds += float64(s.Container()) * alive
				if sizing.RemoveKind(x.RemoveReason) == sizing.RemovedContainerOOM {
					g.killed = append(g.killed, x.ID)
				}
			}
			want[app.ID] = g
		}
	})
	if len(want) != 4 {
		t.Fatalf("%d applications in the model", len(want))
	}

	rows := func(q string) map[string]map[string]any {
		out := map[string]map[string]any{}
		for _, s := range srv.Query(t, db, q) {
			for _, v := range s.Values {
				r := map[string]any{}
				for i, c := range s.Columns {
					r[c] = v[i]
				}
				out[fmt.Sprint(r["app_id"])] = r
			}
		}
		return out
	}
	num := func(v any) float64 {
		n, ok := v.(json.Number)
		if !ok {
			return math.NaN()
		}
		f, _ := n.Float64()
		return f
	}
	usage := rows(`SELECT "app_id", "applicationid", "executor_core_seconds", "executor_memory_byte_seconds", "cpu_from", "cpu_utilisation", "container_cpu_seconds", "task_cpu_seconds", "saving_core_seconds", "recommended" FROM "spark_app_usage" WHERE "fact" = 'end'`)
	reconciled := rows(`SELECT "app_id", "applicationid", "verdict", "short_executors", "diff_tasks", "diff_cpu_time_ns", "text" FROM "spark_reconcile"`)
	apps := slices.Sorted(func(yield func(string) bool) {
		for id := range want {
			if !yield(id) {
				return
			}
		}
	})
	killedSomewhere := false
	for i, id := range apps {
		g, u, r := want[id], usage[id], reconciled[id]
		if u == nil || r == nil {
			t.Errorf("%s: usage %v, reconciliation %v", id, u, r)
			continue
		}
		if got := num(u["executor_core_seconds"]); got != g.coreSeconds {
			t.Errorf("%s: %v core-seconds held, the cluster gave %v", id, got, g.coreSeconds)
		}
		if got := num(u["executor_memory_byte_seconds"]); math.Abs(got-g.memSeconds) > 1e-6*g.memSeconds {
			t.Errorf("%s: %v byte-seconds held, the cluster gave %v", id, got, g.memSeconds)
		}
		// Exact where every report arrived; short, naming them, where an
		// executor was killed before its last report.
		switch {
		case len(g.killed) == 0 && r["verdict"] != "exact":
			t.Errorf("%s: reconciled %v (%v), want exact", id, r["verdict"], r["text"])
		case len(g.killed) > 0 && (r["verdict"] != "short" || r["short_executors"] != strings.Join(g.killed, ",")):
			t.Errorf("%s: reconciled %v, short %v (%v); want short, executors %v", id, r["verdict"], r["short_executors"], r["text"], g.killed)
		}
		killedSomewhere = killedSomewhere || len(g.killed) > 0
		switch i % 4 { // the simulator's kinds of application, in the order started
		case 1: // PySpark with the cgroup plugin: the containers' CPU, Python's included
			if u["cpu_from"] != "container" || num(u["container_cpu_seconds"]) <= num(u["task_cpu_seconds"]) {
				t.Errorf("%s (PySpark): CPU from %v, container %v s, tasks %v s", id, u["cpu_from"], u["container_cpu_seconds"], u["task_cpu_seconds"])
			}
		case 2: // few of its cores used: fewer executors; idle executors' peaks are no evidence to shrink them
			if num(u["cpu_utilisation"]) >= 0.1 || num(u["saving_core_seconds"]) <= 0 ||
				!strings.Contains(fmt.Sprint(u["recommended"]), "spark.executor.instances=1") ||
				strings.Contains(fmt.Sprint(u["recommended"]), "spark.executor.memory=") {
				t.Errorf("%s (idle): CPU used %v, saving %v, recommended %v", id, u["cpu_utilisation"], u["saving_core_seconds"], u["recommended"])
			}
		case 3: // near the memory limit: more overhead; its points under its name, as its metrics
			if !strings.Contains(fmt.Sprint(u["recommended"]), "spark.executor.memoryOverhead=") {
				t.Errorf("%s (near its limit): recommended %v", id, u["recommended"])
			}
			if u["applicationid"] != names[id] || r["applicationid"] != names[id] || u["cpu_from"] != "tasks" {
				t.Errorf("%s (metrics under its name %q): usage under %v, CPU from %v; reconciliation under %v", id, names[id], u["applicationid"], u["cpu_from"], r["applicationid"])
			}
		}
	}
	for _, id := range apps {
		t.Logf("%s: %v %v; recommended %v", id, reconciled[id]["verdict"], reconciled[id]["short_executors"], usage[id]["recommended"])
	}
	if !killedSomewhere {
		t.Error("no executor was killed over its memory limit: the lost-report case went untested")
	}

	// The history: each application's end fact again, in the history's
	// own database, the same figures, by name and not by application.
	for _, sr := range srv.Query(t, db+"_history", `SHOW SERIES`) {
		for _, v := range sr.Values {
			if key := fmt.Sprint(v[0]); !strings.HasPrefix(key, "spark_app_history,") || strings.Contains(key, "applicationid=") {
				t.Errorf("history series %s", key)
			}
		}
	}
	history := map[string]map[string]any{}
	for _, sr := range srv.Query(t, db+"_history", `SELECT "app_id", "fact", "executor_core_seconds", "recommended" FROM "spark_app_history" GROUP BY "appname"`) {
		for _, v := range sr.Values {
			history[fmt.Sprint(v[1])] = map[string]any{"appname": sr.Tags["appname"], "fact": v[2], "executor_core_seconds": v[3], "recommended": v[4]}
		}
	}
	for _, id := range apps {
		h, u := history[id], usage[id]
		if h == nil || h["appname"] != names[id] || h["fact"] != "end" || num(h["executor_core_seconds"]) != num(u["executor_core_seconds"]) || h["recommended"] != u["recommended"] {
			t.Errorf("%s: history %v, usage %v", id, h, u)
		}
	}

	// report --fleet: every application, the idle one first, and totals
	// that are the sum of the rows.
	conf := configtest.Write(t, config.Config{InfluxDB: cfg.InfluxDB, Graphite: cfg.Graphite})
	fr := fleetJSON(t, conf, "1d")
	if len(fr.Applications) != 4 || fr.Applications[0].Application != apps[2] {
		t.Fatalf("report --fleet: %+v; want 4 applications, the idle %s first", fr.Applications, apps[2])
	}
	var core, saving float64
	for _, a := range fr.Applications {
		core += a.CoreHours
		saving += a.SavingCoreHours
		if held := want[a.Application].coreSeconds / 3600; math.Abs(a.CoreHours-held) > 1e-9 {
			t.Errorf("report --fleet %s: %v core-hours, want %v", a.Application, a.CoreHours, held)
		}
	}
	if math.Abs(fr.Totals.CoreHours-core) > 1e-9 || math.Abs(fr.Totals.SavingCoreHours-saving) > 1e-9 || fr.Totals.Applications != 4 {
		t.Errorf("totals %+v, rows sum to %v core-hours, %v saved", fr.Totals, core, saving)
	}
	// One advisor: report APP_ID recommends what spark_sizing holds and
	// the fleet lists, setting for setting, from the same code.
	stored := map[string][]string{}
	for _, sr := range srv.Query(t, db, `SELECT "property", "value", "rule" FROM "spark_sizing" WHERE "kind" = 'setting' GROUP BY "applicationid"`) {
		for _, v := range sr.Values {
			stored[sr.Tags["applicationid"]] = append(stored[sr.Tags["applicationid"]], fmt.Sprintf("%v=%v (%v)", v[1], v[2], v[3]))
		}
	}
	var out, errOut strings.Builder
	for _, id := range apps {
		out.Reset()
		if err := cmdReport(context.Background(), []string{"--config", conf, "--url", ui.URL, "--json", id}, noEnv, &out, &errOut); err != nil {
			t.Fatalf("report %s: %v\n%s", id, err, errOut.String())
		}
		var rep struct {
			Ended    bool                                     `json:"ended"`
			Settings []struct{ Property, Value, Rule string } `json:"recommended_settings"`
			Usage    struct {
				Outcome       string   `json:"outcome"`
				SlotOccupancy *float64 `json:"slot_occupancy"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(out.String()), &rep); err != nil {
			t.Fatalf("report %s: %v\n%s", id, err, out.String())
		}
		var got []string
		for _, r := range rep.Settings {
			got = append(got, fmt.Sprintf("%s=%s (%s)", r.Property, r.Value, r.Rule))
		}
		key := id
		if names[id] != "" && usage[id]["applicationid"] == names[id] {
			key = names[id]
		}
		if !rep.Ended || !slices.Equal(got, stored[key]) || len(got) == 0 || rep.Usage.SlotOccupancy == nil {
			t.Errorf("report %s: ended %v, settings %q, occupancy %v; spark_sizing holds %q", id, rep.Ended, got, rep.Usage.SlotOccupancy, stored[key])
		}
	}
	out.Reset()
	if err := cmdReport(context.Background(), []string{"--config", conf, "--url", ui.URL, apps[1]}, noEnv, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	if db == "spark_wide" {
		text, _, _ := strings.Cut(out.String(), "where the time went:")
		printedExample(t, "report", text)
	}

	// With no source that shows them any more (the UI gone with its
	// driver), the report is what was recorded at the end: the same
	// settings as spark_sizing, from the same facts.
	gone := refusedURL(t)
	for _, id := range apps {
		out.Reset()
		if err := cmdReport(context.Background(), []string{"--config", conf, "--url", gone, "--json", id}, noEnv, &out, &errOut); err != nil {
			t.Fatalf("report %s from the record: %v", id, err)
		}
		var rec report.Recorded
		if err := json.Unmarshal([]byte(out.String()), &rec); err != nil {
			t.Fatalf("report %s: %v\n%s", id, err, out.String())
		}
		var got []string
		for _, a := range rec.Advice {
			if a["kind"] == "setting" {
				got = append(got, fmt.Sprintf("%s=%s (%s)", a["property"], a["value"], a["rule"]))
			}
		}
		if rec.Application != id || rec.Fact != "end" || rec.Usage["fact"] != "end" || !slices.Equal(got, stored[rec.MetricsKey]) ||
			rec.Reconciliation == nil || len(rec.Stages) == 0 {
			t.Errorf("report %s from the record: %s, %s, usage %v, settings %q (spark_sizing holds %q), reconciliation %v, %d stages",
				id, rec.Application, rec.Fact, rec.Usage["fact"], got, stored[rec.MetricsKey], rec.Reconciliation != nil, len(rec.Stages))
		}
	}
	out.Reset()
	if err := cmdReport(context.Background(), []string{"--config", conf, "--url", gone, apps[1]}, noEnv, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	if text := out.String(); !strings.Contains(text, "from what sparkpulse recorded in database "+db+": no Spark REST source shows it now (") ||
		!strings.Contains(text, "\nusage (end): ") || !strings.Contains(text, "\nreconciled with Spark's totals: ") {
		t.Errorf("report from the record:\n%s", text)
	}
	err := cmdReport(context.Background(), []string{"--config", conf, "--url", gone, "app-20200101000000-0001"}, noEnv, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "no Spark REST source shows it (") || !strings.Contains(err.Error(), "no fact of it recorded in database") {
		t.Errorf("an application neither shown nor recorded: %v", err)
	}
	// A source that shows it but fails (a 500) is said, not covered by
	// the record.
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "history server overloaded", http.StatusInternalServerError)
	}))
	defer broken.Close()
	out.Reset()
	err = cmdReport(context.Background(), []string{"--config", conf, "--url", broken.URL, apps[1]}, noEnv, &out, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "500 Internal Server Error") || out.Len() > 0 {
		t.Errorf("a failing source: %v, printed %q; want its error and nothing printed", err, out.String())
	}
	out.Reset()
	if err := cmdReport(context.Background(), []string{"--config", conf, "--fleet", "--since=1d"}, noEnv, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	if text := out.String(); !strings.Contains(text, "4 applications ended in the last 1d") || !strings.Contains(text, "with every recommendation applied") {
		t.Errorf("report --fleet:\n%s", text)
	}
	if db == "spark_wide" {
		printedExample(t, "report --fleet", "$ sparkpulse report --fleet --since 1d\n"+out.String())
	}

	// With a history, the fleet of ended applications is read there: the
	// same ranking and totals once the facts' spark_app_usage is gone, as
	// when its retention has passed.
	srv.Query(t, db, fmt.Sprintf("DROP MEASUREMENT %q", schema.MeasurementUsage))
	fromHistory := fleetJSON(t, configtest.Write(t, config.Config{InfluxDB: cfg.InfluxDB, Graphite: cfg.Graphite,
		Annotate: config.AnnotateConfig{URLs: []string{ui.URL}, HistoryDatabase: db + "_history"}}), "1d")
	if len(fromHistory.Applications) != 4 || fromHistory.Totals != fr.Totals {
		t.Errorf("report --fleet from the history: %d applications, totals %+v; from the facts %+v", len(fromHistory.Applications), fromHistory.Totals, fr.Totals)
	}
	for i, a := range fromHistory.Applications {
		if f := fr.Applications[i]; a.Application != f.Application || a.CoreHours != f.CoreHours || a.SavingCoreHours != f.SavingCoreHours || a.Name != f.Name {
			t.Errorf("from the history, row %d: %+v; from the facts %+v", i, a, f)
		}
	}
}

// printedExample holds docs/sizing.md's example of name to text, what the
// simulated fleet's report printed: the block that follows the line
// "<!-- TestFleetRealInfluxDB: name -->". The run's application ids,
// addresses and database read as the example's; -update rewrites it.
func printedExample(t *testing.T, name, text string) {
	t.Helper()
	text = regexp.MustCompile(`app-\d{14}-`).ReplaceAllString(text, "app-20261125210947-")
	text = regexp.MustCompile(`http://127\.0\.0\.1:\d+`).ReplaceAllString(text, "http://history:18080")
	text = strings.ReplaceAll(text, "(database spark_wide)", "(database spark)")
	block := "```\n" + strings.TrimRight(text, "\n ") + "\n```\n"
	const path = "../../docs/sizing.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	marker := "<!-- TestFleetRealInfluxDB: " + name + " -->\n"
	before, rest, ok := strings.Cut(string(doc), marker)
	if !ok || !strings.HasPrefix(rest, "```\n") {
		t.Fatalf("%s: no %q followed by a code block", path, marker)
	}
	end := strings.Index(rest[4:], "\n```\n")
	if end < 0 {
		t.Fatalf("%s: the block after %q does not end", path, marker)
	}
	old := rest[:4+end+5]
	if old == block {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(before+marker+block+rest[len(old):]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's example of %s is not what it prints (go test -run TestFleetRealInfluxDB -update rewrites it):\n%s", path, name, block)
}

// Spark's own event logs, replayed: each executor's task counters are
// reported as Spark's executors count them (successful tasks only), go
// through sparkpulse into a real InfluxDB, and are reconciled with the
// History Server's totals (every task). Where no task failed the totals
// match exactly; where some did, the tasks match and every other total of
// the stream is at most Spark's, short by the failed tasks' metrics. The
// same in either shape of the built-in mapping.
func TestReconcileSparkEventLogs(t *testing.T) {
	model := &sparkui.Model{}
	if n, err := model.ReplayDir("../../testdata/spark-events"); err != nil || n < 20 {
		t.Fatalf("%d event logs: %v", n, err)
	}
	shs := httptest.NewServer(sparkui.NewServer(sparkui.HistoryServer, model))
	defer shs.Close()
	srv := influxtest.Start(t)
	var lines strings.Builder
	reported := map[string]bool{}
	for _, app := range model.Apps {
		for _, a := range app.Attempts {
			before := lines.Len()
			a.ExecutorReports(app.ID, 10*time.Second, func(l string) { lines.WriteString(l + "\n") })
			if lines.Len() > before && len(app.Attempts) == 1 {
				reported[app.ID] = true
			}
		}
	}
	forEachSchema(t, func(t *testing.T, sc schema.Shape, setting string) {
		reconcileSparkEventLogs(t, srv, shs.URL, "spark_"+sc.String(), setting, lines.String(), reported)
	})
}

// reconcileSparkEventLogs sends lines, the executors' reports of the
// applications reported, to a sparkpulse writing to db with setting, then
// reconciles them with the History Server at shs.
func reconcileSparkEventLogs(t *testing.T, srv *influxtest.Server, shs, db, setting, lines string, reported map[string]bool) {
	// The reports go in first, as they would while the applications ran;
	// then a sparkpulse that annotates finds them ended.
	block := []config.GraphiteConfig{{Database: db, Schema: setting}}
	ingest := startSparkpulse(t, config.Config{
		InfluxDB: config.InfluxDBConfig{URL: srv.URL},
		Deltas:   config.DeltaSettings{FirstSampleGrace: new(config.Duration(0))},
		Graphite: block,
	})
	sendTCP(t, ingest.addr(0), lines)
	ingest.stop()
	svc := startSparkpulse(t, config.Config{
		InfluxDB: config.InfluxDBConfig{URL: srv.URL},
		// The logs are from 2015 on.
		Annotate: config.AnnotateConfig{URLs: []string{shs}, Interval: seconds(3600), Lookback: config.Duration(175200 * time.Hour), UsageDelay: config.Duration(time.Millisecond)},
		Graphite: block,
	})
	svc.annotator.PollOnce(context.Background()) // with the first poll, or after it
	svc.flush()

	verdicts := map[string]int{}
	for _, s := range srv.Query(t, db, `SELECT "applicationid", "verdict", "failed_tasks", "diff_tasks", "diff_cpu_time_ns", "diff_run_time_ms", "diff_gc_time_ms", "diff_input_bytes", "diff_shuffle_read_bytes", "diff_shuffle_write_bytes", "text" FROM "spark_reconcile" WHERE time > 0`) {
		for _, v := range s.Values {
			r := map[string]any{}
			for i, c := range s.Columns {
				r[c] = v[i]
			}
			id := fmt.Sprint(r["applicationid"])
			if !reported[id] {
				continue
			}
			verdict := fmt.Sprint(r["verdict"])
			verdicts[verdict]++
			t.Logf("%s: %s (%v failed or killed tasks) %v", id, verdict, r["failed_tasks"], r["text"])
			switch verdict {
			case "exact":
			case "failed_tasks":
				for k, d := range r {
					if f, ok := d.(json.Number); ok && strings.HasPrefix(k, "diff_") {
						if x, _ := f.Float64(); x > 0 || k == "diff_tasks" && x != 0 {
							t.Errorf("%s: %s %v: the stream has more than Spark, or other tasks", id, k, x)
						}
					}
				}
			default:
				t.Errorf("%s: %s: %v", id, verdict, r["text"])
			}
		}
	}
	t.Logf("verdicts over %d applications: %v", len(reported), verdicts)
	if verdicts["exact"] == 0 || verdicts["exact"]+verdicts["failed_tasks"] != len(reported) {
		t.Errorf("verdicts %v for %d applications reported", verdicts, len(reported))
	}
}

// Applications still running are in the fleet for what they held and ran
// in the range: the difference of their cumulative estimates, the last
// before the range taken from the hour before it. One that ended in the
// range is in the ended table only; one that started in the range counts
// from nothing. One with no estimate for 30 minutes and no end is not
// taken to run: how it ended is unknown (sparkpulse was stopped).
func TestFleetRunning(t *testing.T) {
	srv := influxtest.Start(t)
	srv.Exec(t, `CREATE DATABASE "spark"`)
	now := time.Now()
	est := func(app string, ago time.Duration, fact string, core, run float64) string {
		return fmt.Sprintf("spark_app_usage,applicationid=%s fact=%q,app_id=%q,appname=\"stream\",executor_core_seconds=%v,executor_memory_byte_seconds=%v,busy_slot_seconds=%v,cpu_used_seconds=%v,duration_ms=1 %d",
			app, fact, app, core, core*(1<<30), run, run/2, now.Add(-ago).UnixNano())
	}
	for _, l := range []string{
		est("app-streaming", 90*time.Minute, "estimate", 1000, 500), // before the range
		est("app-streaming", 30*time.Minute, "estimate", 4600, 2300),
		est("app-streaming", 5*time.Minute, "estimate", 6100, 3800),
		est("app-new", 20*time.Minute, "estimate", 720, 72),
		est("app-ended", 40*time.Minute, "estimate", 100, 50),
		est("app-ended", 10*time.Minute, "end", 300, 150),
		est("app-ghost", 50*time.Minute, "estimate", 200, 20),
		est("app-ghost", 31*time.Minute, "estimate", 400, 40),
	} {
		srv.Write(t, "/write?db=spark", l)
	}
	cfg := reportConfig(t, srv)
	r := fleetJSON(t, cfg, "1h")
	if len(r.Applications) != 1 || r.Applications[0].Application != "app-ended" || len(r.Running) != 2 || len(r.Unknown) != 1 {
		t.Fatalf("ended %+v, running %+v, unknown %+v", r.Applications, r.Running, r.Unknown)
	}
	if g := r.Unknown[0]; g.Application != "app-ghost" || g.LastEstimate.Sub(now.Add(-31*time.Minute)).Abs() > time.Millisecond {
		t.Errorf("unknown: %+v, want app-ghost last estimated 31 minutes ago", g)
	}
	// app-new: 720 core-seconds from nothing, its tasks 10 % busy.
	// app-streaming: 6100 − 1000 core-seconds, (3800 − 500) / 5100 busy.
	n, s := r.Running[0], r.Running[1]
	if n.Application != "app-new" || n.CoreHours != 0.2 || *n.SlotOccupancy != 0.1 ||
		s.Application != "app-streaming" || math.Abs(s.CoreHours-5100.0/3600) > 1e-12 || math.Abs(*s.SlotOccupancy-3300.0/5100) > 1e-12 ||
		math.Abs(s.GiBHours-5100.0/3600) > 1e-12 || math.Abs(*s.CPU-1650.0/5100) > 1e-12 {
		t.Errorf("running: %+v %v %v; %+v %v %v", n, *n.SlotOccupancy, *n.CPU, s, *s.SlotOccupancy, *s.CPU)
	}
	var out, errOut strings.Builder
	if err := cmdReport(context.Background(), []string{"--config", cfg, "--fleet", "--since", "1h"}, noEnv, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "running: 2 applications held 1.6 core-hours") ||
		!strings.Contains(out.String(), "ended, how unknown: 1 application with no end") || !strings.Contains(out.String(), "  app-ghost stream, last estimate ") {
		t.Errorf("report --fleet:\n%s", out.String())
	}
}

// An application whose metrics arrive while its only source refuses (its
// UI on a port no source names) gets, once its metrics are quiet for
// close-out-after, a spark_app and a spark_app_usage fact marked stream,
// with the exact sums of its counters' deltas; report --fleet lists it
// apart, outside the totals, and an application that has an end of its
// own there is not listed again.
func TestStreamOnlyApplication(t *testing.T) {
	srv := influxtest.Start(t)
	svc := startSparkpulse(t, config.Config{
		InfluxDB: config.InfluxDBConfig{URL: srv.URL},
		// Polled below; quiet at once: every report is sent before the poll.
		Annotate: config.AnnotateConfig{URLs: []string{refusedURL(t)}, Interval: seconds(3600), CloseOutAfter: config.Duration(time.Millisecond)},
		Deltas:   config.DeltaSettings{FirstSampleGrace: new(config.Duration(0))},
		Graphite: []config.GraphiteConfig{{Database: "spark"}},
	})
	const app = "app-20261122101500-0042"
	now := time.Now().Truncate(time.Second)
	var lines strings.Builder
	reportAt := func(process string, ago time.Duration, cpuNs, runMs int64) {
		ts := now.Add(-ago).Unix()
		fmt.Fprintf(&lines, "%s.%s.executor.cpuTime.count %d %d\n%s.%s.executor.runTime.count %d %d\n", app, process, cpuNs, ts, app, process, runMs, ts)
	}
	reportAt("1", 30*time.Second, 10e9, 12_000)
	reportAt("2", 30*time.Second, 5e9, 6_000)
	reportAt("1", 20*time.Second, 25e9, 30_000)
	reportAt("2", 20*time.Second, 8e9, 9_000)
	sendTCP(t, svc.addr(0), lines.String())
	svc.flush()
	svc.annotator.PollOnce(context.Background())
	svc.flush()

	rows := func(q string) [][]any {
		var out [][]any
		for _, s := range srv.Query(t, "spark", q) {
			out = append(out, s.Values...)
		}
		return out
	}
	got := rows(`SELECT "status", "app_id", "duration_ms" FROM "spark_app" WHERE "fact" = 'stream' AND "applicationid" = '` + app + `'`)
	if len(got) != 1 || got[0][1] != "UNKNOWN" || got[0][2] != app {
		t.Fatalf("spark_app stream facts: %v", got)
	}
	usage := rows(`SELECT "executors", "task_cpu_seconds", "task_run_seconds", "outcome", "executor_core_seconds" FROM "spark_app_usage" WHERE "fact" = 'stream'`)
	// 25 s + 8 s of task CPU, 30 s + 9 s run: each counter's deltas, its
	// first sample new work.
	if len(usage) != 1 || fmt.Sprint(usage[0][1:]) != "[2 33 39 unknown <nil>]" {
		t.Fatalf("spark_app_usage stream facts: %v", usage)
	}

	// An application with an end fact of its own and a stream fact (a
	// History Server showed it after all) is listed once, with its end.
	srv.Write(t, "/write?db=spark", fmt.Sprintf(`spark_app_usage,applicationid=app-shown fact="end",app_id="app-shown",executor_core_seconds=60,duration_ms=60000i %d`, now.UnixNano()))
	srv.Write(t, "/write?db=spark", fmt.Sprintf(`spark_app_usage,applicationid=app-shown fact="stream",app_id="app-shown",executors=1i,duration_ms=50000i %d`, now.UnixNano()+3))
	cfg := reportConfig(t, srv)
	r := fleetJSON(t, cfg, "1h")
	if len(r.StreamOnly) != 1 || r.StreamOnly[0].Application != app || r.StreamOnly[0].Executors != 2 ||
		math.Abs(r.StreamOnly[0].TaskCPUHours-33.0/3600) > 1e-12 ||
		len(r.Applications) != 1 || r.Totals.Applications != 1 {
		t.Errorf("stream only %+v; applications %+v", r.StreamOnly, r.Applications)
	}
	var out, errOut strings.Builder
	if err := cmdReport(context.Background(), []string{"--config", cfg, "--fleet", "--since", "1h"}, noEnv, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "seen only in their metrics: 1 application no Spark REST source showed") ||
		!strings.Contains(out.String(), "  "+app+": 2 executors reported for ") {
		t.Errorf("report --fleet:\n%s", out.String())
	}
	// report APP_ID with no source at all: what was recorded.
	out.Reset()
	if err := cmdReport(context.Background(), []string{"--config", cfg, app}, noEnv, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if text := out.String(); !strings.HasPrefix(text, app+", from what sparkpulse recorded in database spark\n") ||
		!strings.Contains(text, "seen only in its metrics: no Spark REST source showed it") || !strings.Contains(text, "\nusage (stream): 2 executors reported for ") {
		t.Errorf("report %s:\n%s", app, text)
	}
}

// reportConfig is the config file of a report on database spark of srv.
func reportConfig(t *testing.T, srv *influxtest.Server) string {
	return configtest.Write(t, config.Config{InfluxDB: config.InfluxDBConfig{URL: srv.URL}, Graphite: []config.GraphiteConfig{{Database: "spark"}}})
}

// fleetJSON is `report --fleet --json --since since` with the config
// file conf.
func fleetJSON(t *testing.T, conf, since string) report.Fleet {
	t.Helper()
	var out, errOut strings.Builder
	if err := cmdReport(context.Background(), []string{"--config", conf, "--fleet", "--since", since, "--json"}, noEnv, &out, &errOut); err != nil {
		t.Fatalf("report --fleet: %v\n%s", err, errOut.String())
	}
	var r report.Fleet
	if err := json.Unmarshal([]byte(out.String()), &r); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	return r
}

// refusedURL is a loopback URL whose connections are refused for the
// whole test: an InfluxDB or a Spark source that is not there.
func refusedURL(t *testing.T) string { return "http://" + influxtest.RefusingAddr(t) }

// report APP_ID from the record reads one run: runs that share a metrics
// key (the name as spark.metrics.namespace) are told apart by their
// times; by the key, the newest run, even one only the stream saw.
func TestRecordedRuns(t *testing.T) {
	srv := influxtest.Start(t)
	srv.Query(t, "", "CREATE DATABASE spark")
	const key, run1, run2 = "nightly-etl", "app-20261128010000-0001", "app-20261128010000-0002"
	s1 := time.Now().Add(-5 * time.Hour).Truncate(time.Second)
	e1, s2 := s1.Add(10*time.Minute), s1.Add(time.Hour)
	e2, s3 := s2.Add(10*time.Minute), s2.Add(2*time.Hour)
	e3 := s3.Add(5 * time.Minute)
	ns := func(t time.Time, sub int64) int64 { return t.UnixMilli()*1_000_000 + sub }
	for _, l := range []string{
		fmt.Sprintf(`spark_app,applicationid=%s fact="end",app_id=%q,status="COMPLETED",end_ms=%di,title="one",text="one" %d`, key, run1, e1.UnixMilli(), ns(s1, 1)),
		fmt.Sprintf(`spark_app_usage,applicationid=%s fact="end",app_id=%q,text="usage one" %d`, key, run1, ns(e1, 0)),
		fmt.Sprintf(`spark_sizing,applicationid=%s kind="finding",text="advice one" %d`, key, ns(e1, 0)),
		fmt.Sprintf(`spark_app,applicationid=%s fact="end",app_id=%q,status="COMPLETED",end_ms=%di,title="two",text="two" %d`, key, run2, e2.UnixMilli(), ns(s2, 1)),
		fmt.Sprintf(`spark_app_usage,applicationid=%s fact="end",app_id=%q,text="usage two" %d`, key, run2, ns(e2, 0)),
		fmt.Sprintf(`spark_app,applicationid=%s fact="stream",app_id="",status="UNKNOWN",end_ms=%di,title="three",text="three" %d`, key, e3.UnixMilli(), ns(s3, 3)),
		fmt.Sprintf(`spark_app_usage,applicationid=%s fact="stream",app_id="",text="usage three" %d`, key, ns(e3, 3)),
	} {
		srv.Write(t, "/write?db=spark", l)
	}
	cfg := reportConfig(t, srv)
	for _, c := range []struct{ ask, app, fact, usage, advice string }{
		{run1, run1, "end", "usage one", "[advice one]"},
		{run2, run2, "end", "usage two", "[]"},
		{key, key, "stream", "usage three", "[]"},
	} {
		var out, errOut strings.Builder
		if err := cmdReport(context.Background(), []string{"--config", cfg, "--json", c.ask}, noEnv, &out, &errOut); err != nil {
			t.Fatalf("report %s: %v\n%s", c.ask, err, errOut.String())
		}
		var r report.Recorded
		if err := json.Unmarshal([]byte(out.String()), &r); err != nil {
			t.Fatal(err)
		}
		var advice []any
		for _, a := range r.Advice {
			advice = append(advice, a[schema.FieldText])
		}
		if r.Application != c.app || r.Fact != c.fact || r.Usage[schema.FieldText] != c.usage || fmt.Sprint(advice) != c.advice {
			t.Errorf("report %s: application %s, fact %s, usage %v, advice %v; want %s, %s, %s, %s",
				c.ask, r.Application, r.Fact, r.Usage[schema.FieldText], advice, c.app, c.fact, c.usage, c.advice)
		}
	}
}

// report --job reads a recurring job's runs from the history in a real
// InfluxDB 1.8, by name alone, in order, and names the regression and its
// cause: here the fifth of six nightly runs ran twice the task time.
// Another name's runs and the runs before --since are not read.
func TestReportJob(t *testing.T) {
	srv := influxtest.Start(t)
	const hist = "spark_history"
	srv.Exec(t, `CREATE DATABASE "spark"`)
	srv.Exec(t, `CREATE DATABASE "`+hist+`"`)
	night := time.Now().Truncate(24 * time.Hour).Add(-6*24*time.Hour + 2*time.Hour)
	var lines []string
	point := func(name, id string, at time.Time, durMs int64, coreSec, busySec float64) {
		lines = append(lines, fmt.Sprintf(`%s,appname=%s,fact=end,user=etl app_id="%s",outcome="succeeded",duration_ms=%di,executors=4i,executor_core_seconds=%g,busy_slot_seconds=%g,slot_occupancy=%g,driver_only_ms=60000i,gc_share=0.05,lost_task_seconds=0,disk_spilled_bytes=0i %d`,
			schema.MeasurementAppHistory, name, id, durMs, coreSec, busySec, busySec/coreSec, at.UnixNano()))
	}
	for i := range 6 {
		dur, busy := int64(1_200_000), 10_800.0
		if i == 4 {
			dur, busy = 2_400_000, 21_600
		}
		// 4 executors of 4 cores.
		point("nightly-sales", fmt.Sprintf("app-%d", i), night.Add(time.Duration(i)*24*time.Hour), dur, 16*float64(dur)/1000, busy)
		point("other", fmt.Sprintf("other-%d", i), night.Add(time.Duration(i)*24*time.Hour+time.Minute), 10*dur, 160*float64(dur)/1000, busy)
	}
	point("nightly-sales", "too-old", night.Add(-30*24*time.Hour), 100_000_000, 1e6, 1e5)
	srv.Write(t, "/write?db="+hist, strings.Join(lines, "\n"))

	conf := configtest.Write(t, config.Config{
		InfluxDB: config.InfluxDBConfig{URL: srv.URL},
		Annotate: config.AnnotateConfig{URLs: []string{"http://127.0.0.1:1"}, HistoryDatabase: hist},
		Graphite: []config.GraphiteConfig{{Database: "spark"}},
	})
	var out, errOut bytes.Buffer
	if err := cmdReport(t.Context(), []string{"--config", conf, "--job", "nightly-sales", "--since", "20d", "--baseline", "3", "--json"}, noEnv, &out, &errOut); err != nil {
		t.Fatalf("report --job: %v\n%s", err, errOut.String())
	}
	var j report.Job
	if err := json.Unmarshal(out.Bytes(), &j); err != nil {
		t.Fatal(err)
	}
	var ids, verdicts []string
	for _, r := range j.Runs {
		ids = append(ids, r.Application)
		v := "-"
		if r.Verdict != nil {
			v = fmt.Sprint(r.Verdict.Regression, " ", r.Verdict.Cause)
		}
		verdicts = append(verdicts, v)
	}
	if !slices.Equal(ids, []string{"app-0", "app-1", "app-2", "app-3", "app-4", "app-5"}) || j.Database != hist ||
		!slices.Equal(verdicts, []string{"-", "-", "-", "false ", "true more_work", "false "}) {
		t.Errorf("runs %q, verdicts %q, database %q", ids, verdicts, j.Database)
	}

	out.Reset()
	if err := cmdReport(t.Context(), []string{"--config", conf, "--job", "nightly-sales", "--since", "20d", "--baseline", "3"}, noEnv, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"nightly-sales: 6 runs ended in the last 20d", "1 regression\n", "REGRESSION more_work",
		"app-4 (", "its tasks ran 6.00 task-hours, against 3.00 (×2.0): more input, more work per row, or slower tasks"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report --job text lacks %q:\n%s", want, out.String())
		}
	}
	t.Logf("report --job:\n%s", out.String())

	for _, args := range [][]string{{"--job", "x", "--fleet"}, {"--job", "x", "app-1"}, {"--baseline", "4", "--fleet"}, {"--job", "x", "--baseline", "2"}} {
		if err := cmdReport(t.Context(), append([]string{"--config", conf}, args...), noEnv, io.Discard, io.Discard); !errors.Is(err, errUsage) {
			t.Errorf("report %q: %v, want a usage error", args, err)
		}
	}
}
