package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/simulate"
	"github.com/sparkpulse/sparkpulse/sizing"
	"github.com/sparkpulse/sparkpulse/sparkui"
)

// The report of a simulated PySpark application: its settings come from
// the environment page, its executors' peaks from allexecutors, and what
// it prints is what the sizing rules make of them; a source that does
// not answer is passed over.
func TestReportSimulated(t *testing.T) {
	start := time.Unix(1795300000, 0)
	c := simulate.NewCluster(simulate.Config{Apps: 2, Executors: 3, Period: 10 * time.Second, Seed: 7}, start)
	for r := range 30 {
		now := start.Add(time.Duration(r) * 10 * time.Second)
		c.Step(now)
		for p := range c.Processes() {
			c.Report(p, &strings.Builder{}, now) // advances the processes' memory
		}
	}
	srv := httptest.NewServer(c.UI)
	defer srv.Close()
	app := simulate.AppID(start, 2) // the PySpark one

	out, _, err := runCLI(t, "", "report", "--influxdb-url", refusedURL(t), "--url", "http://127.0.0.1:1", "--url", srv.URL, "--json", app)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Application string
		Limits      map[string]int64 `json:"limits_bytes"`
		Executors   []struct {
			ID        string `json:"id"`
			PeakRSS   int64  `json:"peak_rss_bytes"`
			PeakPy    int64  `json:"peak_python_rss_bytes"`
			Processes bool   `json:"process_tree_metrics"`
		}
		Settings []struct{ Property, Value string } `json:"recommended_settings"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// What the rules make of the model's own numbers.
	var want sizing.Advice
	c.UI.Update(func(m *sparkui.Model) {
		a := m.App(app).Attempts[0]
		s, err := sizing.FromProperties(a.Properties)
		if err != nil {
			t.Fatal(err)
		}
		var execs []sizing.Executor
		for _, x := range a.Executors {
			execs = append(execs, sizing.Executor{ID: x.ID, Peaks: x.Peak, TaskTimeMs: x.TaskTimeMs, GCTimeMs: x.GCTimeMs, RemoveReason: x.RemoveReason})
		}
		want = sizing.Advise(s, execs)
	})
	if got.Limits["heap"] != 4<<30 || got.Limits["container"] != want.Settings.Container() {
		t.Errorf("limits %v, want heap 4g and container %d", got.Limits, want.Settings.Container())
	}
	if len(got.Executors) != 3 || len(got.Executors) != len(want.Executors) {
		t.Fatalf("%d executors reported, want 3 (the driver has settings of its own)", len(got.Executors))
	}
	for i, x := range got.Executors {
		w := want.Executors[i]
		if x.ID != w.ID || x.PeakRSS != w.RSS || x.PeakPy != w.Python || !x.Processes || x.PeakPy == 0 {
			t.Errorf("executor %d: %+v, want %+v with Python memory", i, x, w)
		}
	}
	if len(got.Settings) != len(want.Recommendations) || len(want.Recommendations) == 0 {
		t.Fatalf("recommended %v, want %v", got.Settings, want.Recommendations)
	}
	for i, r := range want.Recommendations {
		if got.Settings[i].Property != r.Property || got.Settings[i].Value != sizing.SparkSize(r.Value) {
			t.Errorf("setting %d: %v, want %s=%s", i, got.Settings[i], r.Property, sizing.SparkSize(r.Value))
		}
	}

	// The table.
	text, _, err := runCLI(t, "", "report", "--influxdb-url", refusedURL(t), "--url", srv.URL, app)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", text)
	for _, s := range []string{app + " (orders-features)", "limits per executor: heap 4.0 GiB", "recommended settings:",
		"--conf " + want.Recommendations[0].Property + "=" + sizing.SparkSize(want.Recommendations[0].Value)} {
		if !strings.Contains(text, s) {
			t.Errorf("report lacks %q:\n%s", s, text)
		}
	}
}

// Spark's own event log of a YARN application with peak memory metrics:
// the environment page's properties and allexecutors of a real Spark 3
// application give a report.
func TestReportEventLog(t *testing.T) {
	m := &sparkui.Model{}
	if err := m.ReplayFile(filepath.Join("../../testdata/spark-events", "application_1553914137147_0018")); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sparkui.NewServer(sparkui.HistoryServer, m))
	defer srv.Close()
	out, _, err := runCLI(t, "", "report", "--influxdb-url", refusedURL(t), "--url", srv.URL, "application_1553914137147_0018")
	if err != nil {
		t.Fatal(err)
	}
	// The log's own settings, through the environment page.
	att := m.Apps[0].Attempts[0]
	if att.Properties["spark.executor.memory"] == "" {
		t.Fatalf("no spark.executor.memory in the replayed environment: %v", att.Properties)
	}
	s, err := sizing.FromProperties(att.Properties)
	if err != nil {
		t.Fatal(err)
	}
	if want := "limits per executor: heap " + sizing.Bytes(s.Heap); !strings.Contains(out, want) {
		t.Errorf("report lacks %q:\n%s", want, out)
	}
	// A row per executor, with its peak heap.
	rows := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 3 {
			rows[f[0]] = l
		}
	}
	n := 0
	for _, x := range att.Executors {
		if x.ID == "driver" {
			continue
		}
		n++
		if row, want := rows[x.ID], sizing.Bytes(x.Peak["JVMHeapMemory"]); !strings.Contains(row, want) {
			t.Errorf("executor %s: row %q, want its peak heap %s", x.ID, row, want)
		}
	}
	if n == 0 {
		t.Fatal("no executors in the replayed log")
	}
	t.Logf("\n%s", out)
}

// The peaks of the metrics stream in InfluxDB join the REST API's: an
// executor Spark no longer lists (beyond spark.ui.retainedDeadExecutors)
// is sized from what it sent through sparkpulse.
func TestReportStreamPeaks(t *testing.T) {
	srv := influxtest.Start(t)
	svc := startSparkpulse(t, config.Config{InfluxDB: config.InfluxDBConfig{URL: srv.URL}, Graphite: []config.GraphiteConfig{{Database: "spark"}}})
	start := time.Now().Add(-10 * time.Minute).Truncate(time.Second)
	c := simulate.NewCluster(simulate.Config{Addr: svc.addr(0), Apps: 2, Executors: 3, Period: 10 * time.Second, Seed: 7}, start)
	if _, err := c.Replay(context.Background(), start, 30); err != nil {
		t.Fatal(err)
	}
	svc.stop()
	app := simulate.AppID(start, 2)
	c.UI.Update(func(m *sparkui.Model) {
		a := m.App(app).Attempts[0]
		a.Executors = slices.DeleteFunc(a.Executors, func(x *sparkui.Executor) bool { return x.ID == "3" })
	})
	ui := httptest.NewServer(c.UI)
	defer ui.Close()
	conf := filepath.Join(t.TempDir(), "sparkpulse.toml")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("[influxdb]\n  url = %q\n[[graphite]]\n  bind-address = \"127.0.0.1:0\"\n  database = \"spark\"\n", srv.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCLI(t, "", "report", "--config", conf, "--url", ui.URL, "--json", app)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Executors []struct {
			ID      string `json:"id"`
			PeakRSS int64  `json:"peak_rss_bytes"`
		}
		Notes []string
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// Executor 3's resident memory, as InfluxDB holds it.
	var want int64
	sc := schema.Default
	for _, m := range []schema.Metric{schema.JVMRSSMemory, schema.PythonRSSMemory, schema.OtherRSSMemory} {
		res := srv.Query(t, "spark", fmt.Sprintf(`SELECT max(%q) FROM %q WHERE "applicationid" = '%s' AND "process" = '3'`, sc.Field(m), sc.Measurement(m), app))
		if len(res) == 1 {
			want += int64(toFloat(t, res[0].Values[0][1]))
		}
	}
	found := false
	for _, x := range got.Executors {
		if x.ID == "3" {
			found = true
			if x.PeakRSS != want || want == 0 {
				t.Errorf("executor 3: peak RSS %d, InfluxDB says %d", x.PeakRSS, want)
			}
		}
	}
	if !found || len(got.Executors) != 3 {
		t.Errorf("executors %+v: want 1, 2 from the REST API and 3 from the stream", got.Executors)
	}
	for _, n := range got.Notes {
		if strings.Contains(n, "not read") {
			t.Errorf("note: %s", n)
		}
	}
}

// Where the time went, on Spark's own log of local-1422981780767 (a job
// whose stage 2.0 failed on "got a 3, failing"): the slowest stages from
// the stage list, each judged, and the failed tasks by error class, as
// the replayed log has them.
func TestReportWhereTimeWent(t *testing.T) {
	m := &sparkui.Model{}
	if err := m.ReplayFile(filepath.Join("../../testdata/spark-events", "local-1422981780767")); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sparkui.NewServer(sparkui.HistoryServer, m))
	defer srv.Close()
	out, _, err := runCLI(t, "", "report", "--influxdb-url", refusedURL(t), "--url", srv.URL, "--json", "local-1422981780767")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Time struct {
			Stages  int
			Slowest []struct {
				Stage    string
				Duration string
				Verdicts []struct{ Rule, Text string }
			}
			Failures []struct {
				Class, Kind string
				Tasks       int
				Stages      []int
			} `json:"failed_tasks"`
		} `json:"where_the_time_went"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// The model's own stages: the slowest first.
	att := m.Apps[0].Attempts[0]
	var durations []time.Duration
	failed := 0
	for _, s := range att.Stages {
		if !s.Completed.IsZero() {
			durations = append(durations, s.Completed.Sub(s.Submitted))
		}
		for _, tk := range s.TaskList {
			if tk.Status == sparkui.TaskFailed {
				failed++
			}
		}
	}
	slices.Sort(durations)
	slices.Reverse(durations)
	tw := got.Time
	if tw.Stages != len(att.Stages) || len(tw.Slowest) != min(5, len(att.Stages)) {
		t.Fatalf("%d stages, %d judged: %+v", tw.Stages, len(tw.Slowest), tw)
	}
	for i, s := range tw.Slowest {
		if want := durations[i].Round(100 * time.Millisecond).String(); s.Duration != want && durations[i] >= time.Second {
			t.Errorf("stage %d: %s %s, want the %d-slowest's %s", i, s.Stage, s.Duration, i+1, want)
		}
	}
	if len(tw.Failures) != 1 || tw.Failures[0].Class != "java.lang.RuntimeException" || tw.Failures[0].Kind != "exception" ||
		tw.Failures[0].Tasks != failed || !slices.Equal(tw.Failures[0].Stages, []int{2}) {
		t.Errorf("failed tasks %+v, want %d java.lang.RuntimeException in stage 2", tw.Failures, failed)
	}
	text, _, err := runCLI(t, "", "report", "--influxdb-url", refusedURL(t), "--url", srv.URL, "local-1422981780767")
	if err != nil || !strings.Contains(text, "where the time went: the ") || !strings.Contains(text, "× java.lang.RuntimeException (exception) in stages 2") {
		t.Errorf("text report: %v\n%s", err, text)
	}
}
