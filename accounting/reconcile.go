package accounting

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/sparkpulse/sparkpulse/sparkapi"
)

// Reconciliation is the stream's totals against Spark's, per metric.
type Reconciliation struct {
	Metrics []ReconciledMetric
	// Short names the executors whose tasks in the stream fall short of
	// Spark's count of their successful tasks: their last reports did not
	// arrive (killed, lost, or sent while sparkpulse could not take them).
	Short []string
	// Above names the processes whose counters exceed Spark's own totals
	// for them (see Screen): their figures were set aside.
	Above []string
	// Unlisted counts processes in the stream that Spark no longer lists
	// (beyond spark.ui.retainedDeadExecutors): compared in the totals
	// only.
	Unlisted int
	// StagesDropped counts the stages Spark no longer lists
	// (spark.ui.retainedStages): its CPU and run time totals, from the
	// stage list, then lack theirs, and are not compared.
	StagesDropped int
	FailedTasks   int // failed and killed tasks: their metrics are in Spark's totals, not in the executors' counters
	NoDelta       int // reports of the short executors stored without a delta
	Verdict       string
	Text          string
}

// ReconciledMetric is one metric's totals.
type ReconciledMetric struct {
	Name          string // tasks, cpu_time_ns, run_time_ms, gc_time_ms, input_bytes, shuffle_read_bytes, shuffle_write_bytes
	Stream, Spark float64
}

// Diff is (stream − Spark) / Spark; 0 when both are 0, ±1 when only one is.
func (m ReconciledMetric) Diff() float64 {
	switch {
	case m.Spark == m.Stream:
		return 0
	case m.Spark == 0:
		return math.Copysign(1, m.Stream)
	}
	return (m.Stream - m.Spark) / m.Spark
}

// Verdicts of a reconciliation.
const (
	ReconcileAboveSpark  = "above_spark"    // some processes' counters exceed Spark's (named): set aside
	ReconcileExact       = "exact"          // every total matches
	ReconcileShort       = "short"          // executors' last reports are missing (named)
	ReconcileFailedTasks = "failed_tasks"   // tasks match; the rest differ by failed tasks' metrics
	ReconcileDiffers     = "differs"        // something else: the text says what
	ReconcileNoStream    = "no_stream"      // the stream could not be read
	ReconcileNoDelta     = "no_delta"       // reports stored without a delta: work before them is not in the sums
	reconcileTolerance   = 0.0005           // rounding in the stream's float sums
	reconcileStreamKey   = "succeededTasks" // the stream's per-executor task counter
)

// Reconcile compares the stream's totals with Spark's: the executor list
// (tasks, GC, input, shuffle: every task with metrics that ended on a live
// executor) and the stage list (CPU and run time: every task). The
// executors' counters only count successful tasks, so with failed or
// killed tasks Spark's totals are larger by those tasks' metrics.
func Reconcile(execs []sparkapi.Executor, stages StageTotals, stream map[string]ProcessTotals, aside []SetAside) Reconciliation {
	var r Reconciliation
	var aboveWhy []string
	for _, a := range aside {
		if a.AboveSpark {
			r.Above = append(r.Above, a.Process)
			aboveWhy = append(aboveWhy, a.String())
		}
	}
	sum := func(counter string) float64 {
		t := 0.0
		for _, p := range stream {
			t += p.Sums[counter]
		}
		return t
	}
	var tasks, gc, input, shRead, shWrite, cpu, run float64
	listed := map[string]bool{}
	for _, x := range execs {
		listed[x.ID] = true
		tasks += float64(x.CompletedTasks)
		gc += float64(x.TotalGCTime)
		input += float64(x.TotalInputBytes)
		shRead += float64(x.TotalShuffleRead)
		shWrite += float64(x.TotalShuffleWrite)
		if streamed := stream[x.ID].Sums["succeededTasks.count"]; float64(x.CompletedTasks)-streamed > 0.5 {
			r.Short = append(r.Short, x.ID)
		}
	}
	cpu, run = float64(stages.CPUNs), float64(stages.RunMs)
	r.FailedTasks = stages.Failed + stages.Killed
	r.StagesDropped = stages.Dropped()
	for id := range stream {
		if !listed[id] {
			r.Unlisted++
		}
	}
	slices.SortFunc(r.Short, CompareExecutorIDs)
	// A report stored without a delta (a counter's first sample within
	// the delta stage's grace period after sparkpulse started, or a new
	// series refused by a full delta table) leaves the work before it
	// out of the sums: that, not a lost report, can explain a shortfall.
	for _, id := range r.Short {
		r.NoDelta += stream[id].NoDelta["succeededTasks.count"]
	}
	r.Metrics = []ReconciledMetric{
		{"tasks", sum("succeededTasks.count"), tasks},
		{"cpu_time_ns", sum("cpuTime.count"), cpu},
		{"run_time_ms", sum("runTime.count"), run},
		{"gc_time_ms", sum("jvmGCTime.count"), gc},
		{"input_bytes", sum("bytesRead.count"), input},
		{"shuffle_read_bytes", sum("shuffleTotalBytesRead.count"), shRead},
		{"shuffle_write_bytes", sum("shuffleBytesWritten.count"), shWrite},
	}
	exact, tasksMatch := true, true
	var off []string
	for _, m := range r.Metrics {
		if r.StagesDropped > 0 && (m.Name == "cpu_time_ns" || m.Name == "run_time_ms") {
			continue // Spark's side lacks the dropped stages
		}
		if math.Abs(m.Diff()) > reconcileTolerance {
			exact = false
			off = append(off, fmt.Sprintf("%s %+.2f %%", m.Name, 100*m.Diff()))
			if m.Name == "tasks" {
				tasksMatch = false
			}
		}
	}
	switch {
	case len(r.Above) > 0:
		r.Verdict = ReconcileAboveSpark
		r.Text = fmt.Sprintf("the stream's counters of %s exceed Spark's own totals, which a genuine stream never does: reports that did not come from Spark's executors (forged, or another application's under the same spark.metrics.namespace), or Spark's listener dropped events (LiveListenerBus numDroppedEvents); set aside from the accounting and the advice: %s",
			strings.Join(r.Above, ", "), strings.Join(aboveWhy, "; "))
	case exact:
		r.Verdict, r.Text = ReconcileExact, "the stream's totals match Spark's"
	case len(r.Short) > 0 && r.NoDelta > 0:
		r.Verdict = ReconcileNoDelta
		r.Text = fmt.Sprintf("%d reports of executor %s were stored without a delta (sparkpulse started or restarted while they ran, without a state-dir, or the delta table was full): their work before those reports is not in the sums: %s",
			r.NoDelta, strings.Join(r.Short, ", "), strings.Join(off, ", "))
	case len(r.Short) > 0:
		r.Verdict = ReconcileShort
		r.Text = fmt.Sprintf("the last reports of executor %s are missing: %s", strings.Join(r.Short, ", "), strings.Join(off, ", "))
	case tasksMatch && r.FailedTasks > 0:
		r.Verdict = ReconcileFailedTasks
		r.Text = fmt.Sprintf("%d failed or killed tasks: their metrics are in Spark's totals, not in the executors' counters: %s", r.FailedTasks, strings.Join(off, ", "))
	default:
		r.Verdict, r.Text = ReconcileDiffers, strings.Join(off, ", ")
	}
	if r.Unlisted > 0 {
		r.Text += fmt.Sprintf("; %d processes in the stream that Spark no longer lists (spark.ui.retainedDeadExecutors)", r.Unlisted)
	}
	if r.StagesDropped > 0 {
		r.Text += fmt.Sprintf("; CPU and run time not compared: Spark lists %d of the %d stages the application made (spark.ui.retainedStages)",
			len(stages.ids), stages.maxID+1)
	}
	return r
}
