package live

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

var update = flag.Bool("update", false, "rewrite the golden files of Render")

var t0 = time.Date(2026, 3, 2, 14, 5, 30, 0, time.UTC)

// renderCases are snapshots of the states a frame shows.
func renderCases() map[string]Snapshot {
	since := t0.Add(-3*time.Minute - 12*time.Second)
	base := Snapshot{At: t0, Since: since, Database: "spark", Interval: 2 * time.Second}

	starting := base
	starting.Self = &Self{Up: 4 * time.Second, Lines: 0, LinesPerSec: -1, Sources: 2, SourceFailing: map[string]float64{}}

	busy := base
	busy.Self = &Self{Up: 3*time.Minute + 30*time.Second, Lines: 1234567, LinesPerSec: 742.4, Written: 1234001,
		Dropped: map[string]float64{"nan": 5, "unmapped": 12}, Rejected: map[string]float64{"field type conflict": 1},
		WriteErrors: 2, QueueBytes: 12345, DiskBytes: 3 << 30, NoDelta: 1,
		Sources: 3, SourceErrors: map[string]float64{"http://localhost:4040": 40}, SourceFailing: map[string]float64{"http://localhost:4040": 6}, LostApps: 1}
	for i := 11; i >= 1; i-- {
		a := App{ID: fmt.Sprintf("app-20260302140000-%04d", i), Name: []string{"nightly-sales", "orders-features", "clickstream", "ml-training"}[i%4],
			Started: since.Add(time.Duration(i) * 10 * time.Second), Status: StatusRunning, Executors: 4, Cores: 16, Busy: 5.25,
			BusyWindow: time.Minute, HeapPeak: 3.9 * (1 << 30), HeapMax: 4 << 30, Job: &Job{ID: i, Status: "RUNNING"}}
		switch i {
		case 11:
			a.Executors, a.Cores, a.Busy, a.HeapPeak, a.HeapMax, a.Job = -1, -1, -1, 0, 0, nil // just seen
		case 10:
			a.Name = a.ID // spark.metrics.namespace=${spark.app.name}: no separate name
			a.Busy = 0.35556000000000004
		case 9:
			a.Status, a.Executors, a.Cores, a.Busy = StatusEnded, 0, 0, -1
			a.Job = &Job{ID: 7, Status: "SUCCEEDED"}
		case 8:
			a.Status, a.Executors, a.Cores, a.Busy = StatusEnded, 0, 0, -1
			a.Job, a.FailedJobs = &Job{ID: 3, Status: "FAILED"}, 2
		case 7:
			a.Status = StatusLost
			a.HeapMax = 0
		}
		busy.Apps = append(busy.Apps, a)
	}
	for i, v := range []struct{ verdict, detail string }{
		{"exact", "the stream's totals match Spark's"},
		{"no_delta", "3 reports of executor 2 were stored without a delta (sparkpulse started or restarted while they ran, without a state-dir, or the delta table was full): their work before those reports is not in the sums: tasks -1.20 %"},
		{"short", "the last reports of executor 4 are missing: tasks -2.00 %, cpu_time_ns -1.50 %"},
		{"failed_tasks", "2 failed or killed tasks: their metrics are in Spark's totals, not in the executors' counters: cpu_time_ns +0.40 %"},
		{"", ""},
	} {
		busy.Verdicts = append(busy.Verdicts, Verdict{Ended: t0.Add(-time.Duration(i+1) * 20 * time.Second), App: fmt.Sprintf("app-20260302135500-%04d", i+1),
			Name: "nightly-sales", Executors: 4, CoreHours: 0.41666, GiBHours: 2.1, CPUUsed: 0.38, MemoryPeak: map[bool]float64{true: -1, false: 0.71}[i == 1],
			Verdict: v.verdict, Detail: v.detail})
	}

	ended := base
	ended.Self = &Self{Up: time.Minute, Lines: 1, LinesPerSec: 0.25, Written: 1}
	ended.Apps = []App{{ID: "app-20260302140000-0001", Name: "etl", Started: since, Status: StatusEnded, Executors: 0, Cores: 0, Busy: -1}}

	failing := base
	failing.QueryErr = `influx: SELECT "status" FROM "spark_app" at http://127.0.0.1:8086/: influx: InfluxDB is unreachable: connection refused`
	failing.SelfErr = "http://127.0.0.1:2033/metrics: connection refused"

	// make run's view: its next commands in place of the dashboards line.
	noted := busy
	noted.Notes = []string{
		"next: bin/sparkpulse report --config .run/sparkpulse.toml --fleet",
		"      bin/sparkpulse report --config .run/sparkpulse.toml APP_ID",
		"      InfluxDB http://127.0.0.1:8086, database spark · logs in .run/",
	}

	return map[string]Snapshot{"starting": starting, "busy": busy, "ended": ended, "failing": failing, "noted": noted}
}

// Each frame matches its golden file (go test ./live -update rewrites
// them), fits 100 × 30, and writes no number with a float's noise.
func TestRender(t *testing.T) {
	noise := regexp.MustCompile(`\d\.\d{4,}`)
	for name, s := range renderCases() {
		t.Run(name, func(t *testing.T) {
			lines := Render(s, 100)
			got := strings.Join(lines, "\n") + "\n"
			golden := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("frame differs from %s (-update rewrites it):\n%s", golden, got)
			}
			if len(lines) > MaxLines {
				t.Errorf("%d lines", len(lines))
			}
			for _, l := range lines {
				if n := utf8.RuneCountInString(l); n > 100 {
					t.Errorf("%d columns: %q", n, l)
				}
				if noise.MatchString(l) {
					t.Errorf("float noise: %q", l)
				}
			}
		})
	}
}

// A narrow terminal cuts lines rather than wrapping them.
func TestRenderNarrow(t *testing.T) {
	for _, l := range Render(renderCases()["busy"], 60) {
		if n := utf8.RuneCountInString(l); n > 60 {
			t.Errorf("%d columns: %q", n, l)
		}
	}
}

func TestHumanNumbers(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{number(0), "0"}, {number(999), "999"}, {number(1000), "1,000"}, {number(1234567.4), "1,234,567"}, {number(-12345), "-12,345"},
		{count(1, "line"), "1 line"}, {count(0, "line"), "0 lines"}, {count(2, "first sample"), "2 first samples"},
		{perSecond(0.35556000000000004), "0.4"}, {perSecond(742.6), "743"}, {perSecond(12345), "12,345"},
		{size(12345), "12 KiB"}, {size(3 << 30), "3.0 GiB"}, {size(512), "512 B"},
		{ago(61500 * time.Millisecond), "1m2s"}, {ago(2*time.Hour + 40*time.Second), "2h1m0s"},
		{byReason(map[string]float64{"a": 1, "b": 3}, "line"), "4 lines (3 b, 1 a)"}, {byReason(nil, "line"), "none"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
