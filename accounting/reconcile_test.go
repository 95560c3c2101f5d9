package accounting

import (
	"math"
	"testing"

	"github.com/sparkpulse/sparkpulse/realspark/recorded"
	"github.com/sparkpulse/sparkpulse/sparkapi"
)

func TestReconcileVerdicts(t *testing.T) {
	x := func(id string, tasks int) sparkapi.Executor {
		return sparkapi.Executor{ID: id, CompletedTasks: tasks, TotalGCTime: 10}
	}
	sums := func(tasks float64) ProcessTotals {
		return ProcessTotals{Sums: map[string]float64{"succeededTasks.count": tasks, "jvmGCTime.count": 10}}
	}
	for _, tc := range []struct {
		name    string
		execs   []sparkapi.Executor
		stages  StageTotals
		stream  map[string]ProcessTotals
		verdict string
	}{
		{"exact", []sparkapi.Executor{x("1", 5)}, StageTotals{}, map[string]ProcessTotals{"1": sums(5)}, ReconcileExact},
		{"short", []sparkapi.Executor{x("1", 5), x("2", 5)}, StageTotals{}, map[string]ProcessTotals{"1": sums(5), "2": sums(4)}, ReconcileShort},
		// Tasks match; Spark's CPU counts a failed task's too.
		{"failed tasks", []sparkapi.Executor{x("1", 5)}, StageTotals{CPUNs: 10, Failed: 1}, map[string]ProcessTotals{"1": sums(5)}, ReconcileFailedTasks},
		// Short, but the stream stored reports without a delta.
		{"no delta", []sparkapi.Executor{x("1", 5)}, StageTotals{}, map[string]ProcessTotals{"1": {Sums: map[string]float64{"succeededTasks.count": 3, "jvmGCTime.count": 10},
			NoDelta: map[string]int{"succeededTasks.count": 1}}}, ReconcileNoDelta},
		// More in the stream than Spark lists: an executor Spark dropped.
		{"unlisted", []sparkapi.Executor{x("1", 5)}, StageTotals{}, map[string]ProcessTotals{"1": sums(5), "7": sums(3)}, ReconcileDiffers},
		// Stages 0-2 of 0-4 dropped (spark.ui.retainedStages): Spark's CPU
		// and run time lack theirs and are not compared; the rest is exact.
		{"stages dropped", []sparkapi.Executor{x("1", 5)}, stagesFrom(t, 3, 4), map[string]ProcessTotals{"1": sums(5)}, ReconcileExact},
		// All stages listed: the CPU difference counts.
		{"stages kept", []sparkapi.Executor{x("1", 5)}, stagesFrom(t, 0, 4), map[string]ProcessTotals{"1": sums(5)}, ReconcileDiffers},
	} {
		r := Reconcile(tc.execs, tc.stages, tc.stream, nil)
		if r.Verdict != tc.verdict {
			t.Errorf("%s: %s (%s), want %s", tc.name, r.Verdict, r.Text, tc.verdict)
		}
	}
	if d := (ReconciledMetric{Stream: 0, Spark: 0}).Diff(); d != 0 {
		t.Errorf("0/0: %v", d)
	}
	if d := (ReconciledMetric{Stream: 5, Spark: 0}).Diff(); d != 1 {
		t.Errorf("5/0: %v", d)
	}
	if d := (ReconciledMetric{Stream: 9, Spark: 10}).Diff(); math.Abs(d+0.1) > 1e-12 {
		t.Errorf("9/10: %v", d)
	}
}

// stagesFrom lists stages from..to, each with 7 ms of CPU.
func stagesFrom(t *testing.T, from, to int) StageTotals {
	t.Helper()
	var st StageTotals
	for id := from; id <= to; id++ {
		st.Add(&sparkapi.Stage{StageID: id, ExecutorCPUTime: 7_000_000})
	}
	return st
}

// Spark lists every stage id from 0 to the largest, skipped ones too, so
// that a gap means stages it dropped: true of the real runs' stage lists
// (testdata/spark-real, see package realspark).
func TestStageIDsOfRealSpark(t *testing.T) {
	for f, list := range recorded.Answers[[]sparkapi.Stage](t, "*/stages.json", 4) {
		var st StageTotals
		for i := range list {
			st.Add(&list[i])
		}
		if st.Dropped() != 0 || len(st.ids) < 5 {
			t.Errorf("%s: %d stage ids up to %d: %d dropped", f, len(st.ids), st.maxID, st.Dropped())
		}
	}
}
