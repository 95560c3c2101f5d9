package report

import (
	"fmt"
	"strings"
	"testing"
)

func f64(v float64) *float64 { return &v }
func i64(v int64) *int64     { return &v }

// usual is a run like its job's others: 20 min, 4 core-hours held of
// which 3 busy, 2 min of driver-only time, no spill, nothing lost.
func usual(i int) JobRun {
	jitter := int64(i%3) * 20_000 // noise: up to 40 s
	return JobRun{Application: fmt.Sprintf("app-%d", i), Ended: fmt.Sprintf("2026-11-%02dT02:00:00Z", i+1), Outcome: "succeeded",
		DurationMs: 1_200_000 + jitter, Executors: 4, CoreHours: 4, TaskHours: f64(3), SlotOccupancy: f64(0.75),
		DriverOnlyMs: i64(120_000), GCShare: f64(0.05), LostTaskHours: f64(0)}
}

// Each rule of cause fires where its figure explains the run, and stays
// quiet where the run differs from its baseline by noise or by another
// figure; a run is judged only against at least MinBaseline successful
// runs before it.
func TestJudge(t *testing.T) {
	for _, c := range []struct {
		name       string
		all        func(r *JobRun) // every run, the baseline's and the last, if set
		last       func(r *JobRun)
		regression bool
		cause      string
	}{
		{"noise", nil, func(r *JobRun) { r.DurationMs = 1_400_000; r.CoreHours = 4.5 }, false, ""},
		{"a short job slower by less than a minute", func(r *JobRun) { r.DurationMs = 60_000 }, func(r *JobRun) { r.DurationMs = 110_000 }, false, ""},
		{"lost tasks", nil, func(r *JobRun) {
			r.DurationMs, r.CoreHours, r.TaskHours, r.LostTaskHours = 2_400_000, 8, f64(5), f64(1.5)
		}, true, CauseLostTasks},
		{"driver-only time", nil, func(r *JobRun) {
			r.DurationMs, r.CoreHours, r.DriverOnlyMs, r.SlotOccupancy = 2_400_000, 8, i64(1_200_000), f64(0.4)
		}, true, CauseDriverOnly},
		{"spill appeared", nil, func(r *JobRun) {
			r.DurationMs, r.CoreHours, r.TaskHours, r.DiskSpilled = 2_400_000, 8, f64(3.5), 12<<30
		}, true, CauseSpill},
		{"more work", nil, func(r *JobRun) {
			r.DurationMs, r.CoreHours, r.TaskHours = 2_400_000, 8, f64(6)
		}, true, CauseMoreWork},
		{"idle slots", nil, func(r *JobRun) {
			r.DurationMs, r.CoreHours, r.SlotOccupancy = 2_400_000, 8, f64(0.37)
		}, true, CauseIdleSlots},
		{"gc", nil, func(r *JobRun) {
			r.DurationMs, r.CoreHours, r.GCShare = 2_400_000, 8, f64(0.3)
		}, true, CauseGC},
		{"unexplained", nil, func(r *JobRun) { r.DurationMs = 2_400_000 }, true, ""},
		{"costlier, not slower: more executors idle", nil, func(r *JobRun) {
			r.CoreHours, r.Executors, r.SlotOccupancy = 8, 8, f64(0.37)
		}, true, CauseIdleSlots},
		{"failed", nil, func(r *JobRun) { r.DurationMs, r.Outcome = 2_400_000, "failed" }, false, ""},
		// Must not fire: the figure is as in the baseline.
		{"lost tasks as usual", nil, func(r *JobRun) { r.DurationMs, r.LostTaskHours = 2_400_000, f64(0) }, true, ""},
		{"spill as usual", func(r *JobRun) { r.DiskSpilled = 10 << 30 }, func(r *JobRun) { r.DurationMs = 2_400_000 }, true, ""},
		{"driver-only grew, but explains little", nil, func(r *JobRun) {
			r.DurationMs, r.DriverOnlyMs, r.TaskHours = 2_400_000, i64(300_000), f64(6)
		}, true, CauseMoreWork},
	} {
		t.Run(c.name, func(t *testing.T) {
			var runs []JobRun
			for i := range 7 {
				runs = append(runs, usual(i))
				if c.all != nil {
					c.all(&runs[i])
				}
			}
			c.last(&runs[6])
			Judge(runs, DefaultBaseline)
			v := runs[len(runs)-1].Verdict
			if v == nil {
				t.Fatal("no verdict")
			}
			if v.Regression != c.regression || v.Cause != c.cause {
				t.Errorf("regression %v, cause %q, want %v, %q: %s", v.Regression, v.Cause, c.regression, c.cause, v.Text)
			}
			if v.Runs != DefaultBaseline {
				t.Errorf("baseline of %d runs, want %d", v.Runs, DefaultBaseline)
			}
			t.Log(v.Text)
			for _, r := range runs[:len(runs)-1] {
				if r.Verdict != nil && r.Verdict.Regression {
					t.Errorf("a usual run %s judged a regression: %s", r.Application, r.Verdict.Text)
				}
			}
		})
	}
}

// A run is judged against the successful runs before it only, at least
// MinBaseline of them: failed runs are not a baseline.
func TestJudgeBaseline(t *testing.T) {
	runs := []JobRun{usual(0), usual(1)}
	failed := usual(2)
	failed.Outcome, failed.DurationMs = "failed", 100_000_000
	runs = append(runs, failed, usual(3), usual(4))
	slow := usual(5)
	slow.DurationMs = 3_000_000
	runs = append(runs, slow)
	Judge(runs, DefaultBaseline)
	for i, r := range runs[:4] {
		if r.Verdict != nil {
			t.Errorf("run %d judged with %d successful runs before it: %+v", i, i, r.Verdict)
		}
	}
	if v := runs[4].Verdict; v == nil || v.Runs != 3 || v.Regression {
		t.Errorf("run 4: %+v, want a verdict against 3 runs, not a regression", v)
	}
	if v := runs[5].Verdict; v == nil || !v.Regression || v.Runs != 4 || v.Baseline.DurationMs != 1_210_000 || !strings.Contains(v.Text, "×2.5") {
		t.Errorf("run 5: %+v", v)
	}
}
