package sparkapi

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var now = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// TestCheck: each range, with values Spark writes (kept) and values no
// Spark writes (zeroed and named).
func TestCheck(t *testing.T) {
	at := func(s string) *Date {
		d, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return &Date{d}
	}
	for _, tc := range []struct {
		name string
		in   any
		want any
		bad  []string
	}{
		{"an executor Spark writes",
			&Executor{ID: "1", TotalCores: 64, MaxTasks: 64, MaxMemory: 40 << 30, AddTime: at("2026-11-25T11:00:00Z"), TotalDuration: 7_200_000,
				PeakMemoryMetrics: map[string]int64{"JVMHeapMemory": 3 << 30, "MinorGCCount": 0}},
			&Executor{ID: "1", TotalCores: 64, MaxTasks: 64, MaxMemory: 40 << 30, AddTime: at("2026-11-25T11:00:00Z"), TotalDuration: 7_200_000,
				PeakMemoryMetrics: map[string]int64{"JVMHeapMemory": 3 << 30, "MinorGCCount": 0}},
			nil},
		// The probe's answer: cores 1e9 and −8, maxMemory −5, added in 3000.
		{"an executor no Spark writes",
			&[]Executor{{ID: "1", TotalCores: 1_000_000_000, MaxMemory: -5, AddTime: at("3000-01-01T00:00:00Z"),
				PeakMemoryMetrics: map[string]int64{"ProcessTreeJVMRSSMemory": 1 << 62}}, {ID: "2", TotalCores: -8, CompletedTasks: 3}},
			&[]Executor{{ID: "1", PeakMemoryMetrics: map[string]int64{"ProcessTreeJVMRSSMemory": 0}}, {ID: "2", CompletedTasks: 3}},
			[]string{"totalCores 1000000000", "maxMemory -5", "addTime 3000-01-01T00:00:00.000GMT", "peakMemoryMetrics.ProcessTreeJVMRSSMemory 4611686018427387904", "totalCores -8"}},
		{"a running attempt",
			&Application{ID: "app-1", Attempts: []Attempt{{StartTime: Date{now.Add(-time.Hour)}, EndTime: Date{time.UnixMilli(-1)}, StartTimeEpoch: now.Add(-time.Hour).UnixMilli(), EndTimeEpoch: -1, Duration: 3_600_000}}},
			&Application{ID: "app-1", Attempts: []Attempt{{StartTime: Date{now.Add(-time.Hour)}, EndTime: Date{time.UnixMilli(-1)}, StartTimeEpoch: now.Add(-time.Hour).UnixMilli(), EndTimeEpoch: -1, Duration: 3_600_000}}},
			nil},
		{"an attempt of 125 years",
			&Application{ID: "app-1", Attempts: []Attempt{{StartTimeEpoch: 1, EndTimeEpoch: now.AddDate(100, 0, 0).UnixMilli(), Duration: -4}}},
			&Application{ID: "app-1", Attempts: []Attempt{{}}},
			[]string{"attempts.duration -4", "attempts.startTimeEpoch 1", "attempts.endTimeEpoch 4951281600000"}},
		{"a clock a little ahead is kept",
			&Job{SubmissionTime: at("2026-11-26T11:00:00Z")}, &Job{SubmissionTime: at("2026-11-26T11:00:00Z")}, nil},
		{"quantiles",
			&TaskSummary{Quantiles: []float64{0.5, 0.95, 1.5}, ExecutorRunTime: []float64{10, 1e308, math.NaN()}},
			&TaskSummary{Quantiles: []float64{0.5, 0.95, 0}, ExecutorRunTime: []float64{10, 0, 0}},
			[]string{"quantiles 1.5", "executorRunTime 1e+308", "executorRunTime NaN"}},
		{"stage sums",
			&Stage{StageID: 3, NumTasks: -1, ExecutorCPUTime: 1 << 57, InputBytes: 1 << 58},
			&Stage{StageID: 3, ExecutorCPUTime: 1 << 57},
			[]string{"numTasks -1", "inputBytes 288230376151711744"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := Check(tc.in, now)
			got, _ := json.Marshal(tc.in)
			want, _ := json.Marshal(tc.want)
			if string(got) != string(want) {
				t.Errorf("checked\n%s\nwant\n%s", got, want)
			}
			if !slices.Equal(bad, tc.bad) {
				t.Errorf("named %q, want %q", bad, tc.bad)
			}
		})
	}
}

// TestCheckRealSpark: nothing that real Spark answered (testdata/spark-real,
// see package realspark; Spark's own REST expectation files,
// testdata/spark-rest) is out of range.
func TestCheckRealSpark(t *testing.T) {
	decoders := map[string]func() any{
		"allexecutors.json":     func() any { return &[]Executor{} },
		"executor_list":         func() any { return &[]Executor{} },
		"application.json":      func() any { return &Application{} },
		"jobs.json":             func() any { return &[]Job{} },
		"stages.json":           func() any { return &[]Stage{} },
		"sql.json":              func() any { return &[]SQLExecution{} },
		"failed-tasks.json":     func() any { return &map[string][]TaskData{} },
		"stage_task_list":       func() any { return &TaskData{} },
		"stage_task_summary_w_": func() any { return &TaskSummary{} },
	}
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "spark-real", "*", "*", "*.json"))
	more, _ := filepath.Glob(filepath.Join("..", "testdata", "spark-rest", "*.json"))
	checked := 0
	for _, f := range append(files, more...) {
		var v any
		for name, dec := range decoders {
			if strings.HasPrefix(filepath.Base(f), name) {
				v = dec()
			}
		}
		if v == nil {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if bad := Check(v, time.Now()); len(bad) > 0 {
			t.Errorf("%s: %q", f, bad)
		}
		checked++
	}
	if checked < 25 {
		t.Errorf("%d answers checked", checked)
	}
}
