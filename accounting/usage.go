package accounting

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/sparkpulse/sparkpulse/human"
	"github.com/sparkpulse/sparkpulse/sizing"
	"github.com/sparkpulse/sparkpulse/sparkapi"
)

// SizingExecutors is what package sizing needs of the attempt's
// processes (xs: as Spark lists them, the driver first), with the
// stream's figures; alive up to endMs for those still running.
func SizingExecutors(xs []sparkapi.Executor, stream map[string]ProcessTotals, endMs int64) []sizing.Executor {
	var execs []sizing.Executor
	listed := byID(xs)
	for _, id := range slices.SortedFunc(maps.Keys(listed), CompareExecutorIDs) {
		x := listed[id]
		e := ExecutorSizing(x)
		added, removed := optMS(x.AddTime), optMS(x.RemoveTime)
		e.Released = removed > 0 && removed < endMs && sizing.RemoveKind(x.RemoveReason) == sizing.RemovedReleased
		if removed == 0 || removed > endMs {
			removed = endMs
		}
		if added > 0 && removed > added {
			e.AliveMs = removed - added
		}
		if t, ok := stream[id]; ok {
			e.CPUNs, e.RunMs = int64(t.Sums["cpuTime.count"]), int64(t.Sums["runTime.count"])
			e.CgroupCPUNs = int64(t.Sums["ch.cern.CgroupMetrics.CPUTimeNanosec"])
			e.MeanRSS = int64(t.Mean["ProcessTreeJVMRSSMemory"] + t.Mean["ProcessTreePythonRSSMemory"] + t.Mean["ProcessTreeOtherRSSMemory"])
			e.TreeRSS = int64(t.TreePeak)
			// The larger of Spark's peak (heartbeats) and the stream's
			// (reports); a copy, as the REST answer's map is kept.
			peaks := maps.Clone(e.Peaks)
			if peaks == nil {
				peaks = map[string]int64{}
			}
			for _, m := range StreamGauges {
				g := StreamKey(m)
				if v, ok := t.Peak[g]; ok {
					peaks[g] = max(peaks[g], int64(v))
				}
			}
			e.Peaks = peaks
		}
		execs = append(execs, e)
	}
	// Processes only the stream knows: executors Spark no longer lists
	// (past spark.ui.retainedDeadExecutors). Their memory peaks count for
	// the advice; what they held and ran is not known, and not guessed.
	for _, id := range slices.SortedFunc(maps.Keys(stream), CompareExecutorIDs) {
		if _, ok := listed[id]; ok || id == "driver" {
			continue
		}
		peaks := map[string]int64{}
		for _, m := range StreamGauges {
			g := StreamKey(m)
			if v, ok := stream[id].Peak[g]; ok {
				peaks[g] = int64(v)
			}
		}
		if len(peaks) > 0 {
			execs = append(execs, sizing.Executor{ID: id, Peaks: peaks})
		}
	}
	return execs
}

// ExecutorSizing is what package sizing needs of an executor.
func ExecutorSizing(x *sparkapi.Executor) sizing.Executor {
	return sizing.Executor{ID: x.ID, Peaks: x.PeakMemoryMetrics, TaskTimeMs: x.TotalDuration, GCTimeMs: x.TotalGCTime, RemoveReason: x.RemoveReason,
		ShuffleWrite: x.TotalShuffleWrite,
		Cores:        x.TotalCores, // the executor's own: spark.executor.cores may be unset (standalone takes all a worker has)
		Slots:        x.MaxTasks, GPUs: GPUs(x), ResourceProfile: x.ResourceProfileID}
}

// ProfileLimits sets, on the executors of a resource profile other than
// the default, the container and task cpus their profile asks for
// (stage-level scheduling: Spark sizes those executors by the profile,
// not by spark.executor.*). Memory in MiB, the overhead Spark's default
// for the heap where the profile sets none; off-heap only where the
// profile asks for it. sparkVersion says what their tasks' run time
// counts of the profile's cpus (sizing.RunTimeCPUs).
func ProfileLimits(execs []sizing.Executor, profiles []sparkapi.ResourceProfile, s sizing.Settings, sparkVersion string) {
	byID := map[int]*sparkapi.ResourceProfile{}
	for i := range profiles {
		byID[profiles[i].ID] = &profiles[i]
	}
	for i := range execs {
		x := &execs[i]
		p := byID[x.ResourceProfile]
		if x.ResourceProfile == 0 || p == nil {
			continue
		}
		mib := func(name string) int64 { return max(p.ExecutorResources[name].Amount, 0) << 20 }
		if heap := mib("memory"); heap > 0 {
			x.Container = s.ProfileContainer(heap, mib("memoryOverhead"), mib("pyspark.memory"), mib("offHeap"))
		}
		if c := p.TaskResources["cpus"].Amount; c >= 1 {
			x.TaskCPUs = int(c)
			x.RunTimeCPUs = sizing.RunTimeCPUs(sparkVersion, x.TaskCPUs)
		}
	}
}

// GPUs is the GPU addresses Spark gave an executor (its resources'
// "gpu"), 0 when it lists none.
func GPUs(x *sparkapi.Executor) int {
	r, _ := x.Resources["gpu"].(map[string]any)
	addrs, _ := r["addresses"].([]any)
	return len(addrs)
}

// FailureReasons are the attempt's job and stage failure reasons.
func FailureReasons(stages []Stage) []string {
	var out []string
	for _, s := range stages {
		if s.FailureReason != "" {
			out = append(out, s.FailureReason)
		}
	}
	return out
}

// CoresHeld is the cores of the attempt's executors alive at ms: the task
// slots the Spark dashboard sets the busy ones against.
func CoresHeld(execs []sparkapi.Executor, ms int64) int {
	n := 0
	for _, x := range execs {
		added, removed := optMS(x.AddTime), optMS(x.RemoveTime)
		if x.ID != "driver" && added > 0 && added <= ms && (removed == 0 || removed > ms) {
			n += x.TotalCores
		}
	}
	return n
}

// SetAsideIn records in u what the screen set aside. Where executors'
// counters were, the task times come from Spark's stage list when it is
// whole, else they are unknown: a sum without those executors would
// understate them.
func SetAsideIn(u *sizing.Usage, aside []SetAside, stages *StageTotals) {
	counters := 0
	for _, a := range aside {
		u.SetAside = append(u.SetAside, a.String())
		if a.Counters {
			counters++
		}
	}
	switch {
	case counters == 0:
	case stages != nil && stages.Dropped() == 0:
		u.TaskTimesFromStages(stages.CPUNs, stages.RunMs)
	default:
		u.TaskTimesUnknown(fmt.Sprintf("the stream's counters of %d processes were set aside", counters))
	}
}

// WithinSparkTotals replaces the executors' task CPU and run time in u
// with Spark's stage totals t where the executors' are above them, and
// names them as set aside. The executors' counters count successful
// tasks, the stage list every task, so a genuine stream's sums are never
// above it; a forged stream can make them so with every process's own
// figures plausible (a counter sent as 0 between two reports makes the
// next report count whole; lines dated after the last report add to
// every executor). For an ended attempt whose stage list is whole; the
// figures a source showed otherwise stay as they are.
func WithinSparkTotals(u *sizing.Usage, t *StageTotals) {
	if t == nil || t.Dropped() > 0 || u.CPUFrom == "" || u.CPUFrom == "stages" {
		return
	}
	var why []string
	if cpu := u.TaskCPUSeconds * 1e9; cpu > float64(t.CPUNs)*(1+reconcileTolerance)+1e6 {
		why = append(why, fmt.Sprintf("task CPU %.3f s > %.3f s", u.TaskCPUSeconds, float64(t.CPUNs)/1e9))
	}
	if run := u.TaskRunSeconds * 1000; run > float64(t.RunMs)*(1+reconcileTolerance)+1 {
		why = append(why, fmt.Sprintf("task run time %.3f s > %.3f s", u.TaskRunSeconds, float64(t.RunMs)/1000))
	}
	if len(why) == 0 {
		return
	}
	u.SetAside = append(u.SetAside, "the executors' "+strings.Join(why, ", ")+", Spark's stage totals over every task")
	u.TaskTimesFromStages(t.CPUNs, t.RunMs)
}

// LostTasks sets the run time of the task attempts that failed or were
// killed, at the end. What Spark's numbers hold (core, AppStatusListener
// and Executor):
//
//   - a stage attempt's executorRunTime is the sum of the metrics of every
//     task end event of the attempt that carried metrics (onTaskEnd adds
//     LiveTask.updateMetrics' delta to LiveStage.metrics whatever the end
//     reason): successful tasks, tasks that failed with an exception and
//     killed tasks (a speculative copy that lost, a task of a cancelled
//     job), whose run time the executor reports on failure
//     (collectAccumulatorsAndResetStatusOnFailure);
//   - tasks that failed on a fetch failure or a commit denial, and tasks
//     whose executor was lost, carry no metrics (no accumulator updates:
//     the task end's metrics are null) and are in no total;
//   - the executors' runTime counter (ExecutorSource, in the stream) is
//     added to only when a task succeeds;
//   - taskList gives each failed or killed task with its own metrics.
//
// So the figure is, by the first source that holds every such task: the
// failed and killed tasks' run time as taskList gave them (fromTasks,
// when every stage attempt with such tasks had all of them read); else
// Spark's stage total less the
// stream's, when the stream holds every successful task (the
// reconciliation's verdict is exact or failed_tasks). Without failed or
// killed tasks it is 0. To it is added recomputeMs, the successful
// tasks run again for shuffle output lost with an executor
// (RecomputeRunMs; also in RecomputeTaskSeconds, as the stream counts
// them among the successful tasks). Never counted, as no number tells
// them apart: the successful tasks of a job that failed (whether their
// work was lost depends on what the program did next: a later job reuses
// their shuffle output), and the failed tasks without metrics above. The
// figure is a lower bound of the compute failures cost.
func LostTasks(u *sizing.Usage, t *StageTotals, fromTasks *int64, recomputeMs int64, rec *Reconciliation) {
	const unknown = "lost task time unknown: "
	var lostMs float64
	switch {
	case t == nil:
		u.Notes = append(u.Notes, unknown+"Spark's stage list was not read")
		return
	case t.Dropped() > 0:
		u.Notes = append(u.Notes, unknown+"Spark no longer lists every stage (spark.ui.retainedStages)")
		return
	}
	if recomputeMs > 0 { // known whether or not the failed tasks' time is
		r := float64(recomputeMs) / 1000
		u.RecomputeTaskSeconds = &r
	}
	switch {
	case t.Failed+t.Killed == 0:
	case fromTasks != nil:
		lostMs = float64(*fromTasks)
	case rec == nil:
		u.Notes = append(u.Notes, fmt.Sprintf(unknown+"%d failed or killed tasks, not all read, and no metrics stream to tell their run time from the successful tasks'", t.Failed+t.Killed))
		return
	case rec.Verdict != ReconcileExact && rec.Verdict != ReconcileFailedTasks:
		u.Notes = append(u.Notes, fmt.Sprintf(unknown+"%d failed or killed tasks, not all read, and the stream's successful tasks do not match Spark's (%s)", t.Failed+t.Killed, rec.Verdict))
		return
	default:
		for _, m := range rec.Metrics {
			if m.Name == "run_time_ms" {
				lostMs = max(0, math.Round(m.Spark-m.Stream))
			}
		}
	}
	v := (lostMs + float64(recomputeMs)) / 1000
	u.LostTaskSeconds = &v
}

// RecomputeRunMs sums the run time of the successful tasks that ran
// again for shuffle output lost with an executor: the tasks of every
// attempt of a shuffle map stage whose previous attempt had completed, or
// was skipped (a later job's stage for a shuffle an earlier job made:
// Spark lists its first attempt SKIPPED when the output was all there as
// the job began). Spark resubmits such a stage only when map output is
// gone (an executor lost without a shuffle service, a fetch failure), and
// runs its missing partitions alone (all of them where the stage is
// indeterminate and had to roll back): each had succeeded before, and
// its first run's work was lost. Where the attempt had failed or killed
// tasks of its own, only its successful tasks count: its run time less
// its failed and killed tasks' as read (the attempt is left out when
// they were not all read). A resubmission within a stage attempt (an executor lost
// while its stage still ran: end reason Resubmitted) and a re-attempt
// whose previous attempt is not held are not counted, nor a later job's
// first attempt that runs only what an executor lost took (a job
// cancelled part way leaves the same): a lower bound.
func RecomputeRunMs(stages []Stage) int64 {
	type key struct{ id, attempt int }
	byKey := make(map[key]*Stage, len(stages))
	for i := range stages {
		byKey[key{stages[i].StageID, stages[i].AttemptID}] = &stages[i]
	}
	var sum int64
	for i := range stages {
		s := &stages[i]
		prev := byKey[key{s.StageID, s.AttemptID - 1}]
		if s.AttemptID == 0 || prev == nil || prev.Status != "COMPLETE" && prev.Status != "SKIPPED" {
			continue
		}
		run := max(s.ExecutorRunTime, 0)
		if s.NumFailedTasks+s.NumKilledTasks > 0 {
			if !s.DetailsRead || len(s.FailedTasks) < s.NumFailedTasks || len(s.KilledTasks) < s.NumKilledTasks {
				continue
			}
			run -= runMsOf(s.FailedTasks, s.KilledTasks)
		}
		sum = addSat(sum, max(run, 0))
	}
	return sum
}

// FailedTaskRunMs sums the run time of the failed and killed tasks read
// of the attempt's stage attempts (their details: Stage.FailedTasks and
// KilledTasks), when they are every failed or killed task of its stage
// list t: every stage attempt with such tasks had all of them read; nil
// otherwise.
func FailedTaskRunMs(stages []Stage, t *StageTotals) *int64 {
	if t == nil {
		return nil
	}
	var sum int64
	failed := 0
	for _, s := range stages {
		if s.NumFailedTasks+s.NumKilledTasks == 0 {
			continue
		}
		if !s.DetailsRead || len(s.FailedTasks) < s.NumFailedTasks || len(s.KilledTasks) < s.NumKilledTasks {
			return nil
		}
		failed += s.NumFailedTasks + s.NumKilledTasks
		sum = addSat(sum, runMsOf(s.FailedTasks, s.KilledTasks))
	}
	if failed != t.Failed+t.Killed {
		return nil // stages with failures that sparkpulse no longer holds
	}
	return &sum
}

// Outcome decides how an application attempt ended from what Spark's
// REST API says of it (see sizing's Outcome constants): whether it
// completed, and its jobs, the last to end deciding; a failed job's reason
// is the first line of its first failed stage attempt's.
func Outcome(completed bool, jobs []sparkapi.Job, stages []sparkapi.Stage) (outcome, reason string) {
	ss := make([]*sparkapi.Stage, len(stages))
	for i := range stages {
		ss[i] = &stages[i]
	}
	js := make([]*sparkapi.Job, len(jobs))
	for i := range jobs {
		js[i] = &jobs[i]
	}
	return decideOutcome(completed, js, ss)
}

// outcome is Outcome of the attempt.
func outcome(a *Attempt) (string, string) {
	js := make([]*sparkapi.Job, 0, len(a.Jobs))
	for i := range a.Jobs {
		js = append(js, &a.Jobs[i])
	}
	ss := make([]*sparkapi.Stage, 0, len(a.Stages))
	for i := range a.Stages {
		ss = append(ss, &a.Stages[i].Stage)
	}
	return decideOutcome(a.Completed, js, ss)
}

func decideOutcome(completed bool, jobs []*sparkapi.Job, stages []*sparkapi.Stage) (string, string) {
	if !completed {
		return sizing.OutcomeRunning, "the attempt has not completed"
	}
	// The last job to end: a program that does not catch a job's failure
	// ends with it; one that caught it went on to run more.
	var last *sparkapi.Job
	endOf := func(j *sparkapi.Job) int64 { return max(optMS(j.CompletionTime), optMS(j.SubmissionTime)) }
	for _, j := range jobs {
		if last == nil || cmp.Or(cmp.Compare(endOf(j), endOf(last)), cmp.Compare(j.JobID, last.JobID)) > 0 {
			last = j
		}
	}
	if last == nil {
		return sizing.OutcomeUnknown, "no job listed: Spark records no exit status, and an application without jobs gives no evidence"
	}
	var failedBefore []int
	for _, j := range jobs {
		if j != last && j.Status == "FAILED" {
			failedBefore = append(failedBefore, j.JobID)
		}
	}
	switch last.Status {
	case "SUCCEEDED":
		r := fmt.Sprintf("its last job, %d, succeeded", last.JobID)
		if len(failedBefore) > 0 {
			slices.Sort(failedBefore)
			r += "; job " + human.IDs(failedBefore) + " failed before it"
		}
		return sizing.OutcomeSucceeded, r
	case "FAILED":
		why := stageFailure(stages, last.StageIDs)
		if queryStopped(last, why) {
			r := fmt.Sprintf("its last job, %d, a micro-batch of streaming query %s, was cancelled as the program stopped the query", last.JobID, last.JobGroup)
			if len(failedBefore) > 0 {
				slices.Sort(failedBefore)
				r += "; job " + human.IDs(failedBefore) + " failed before it"
			}
			return sizing.OutcomeSucceeded, r
		}
		r := fmt.Sprintf("its last job, %d, failed", last.JobID)
		if why != "" {
			r += ": " + why
		}
		return sizing.OutcomeFailed, r
	}
	return sizing.OutcomeUnknown, fmt.Sprintf("its last job, %d, was still %s when the application ended", last.JobID, last.Status)
}

// stageFailure is the first line of the failure reason of the first
// failed attempt among the stages ids, "" if none failed.
// queryStopped reports whether a failed job was a micro-batch of a
// structured streaming query that its stop() cancelled: Spark runs a
// query's jobs in a job group named by its runId, which the job's
// description names too (StreamExecution), and the stop cancels that
// group. Its stage then says so: "Job 7 cancelled part of cancelled job
// group <runId>" (3.5), "[SPARK_JOB_CANCELLED] Job 7 cancelled Query
// name [id = …, runId = <runId>] was stopped SQLSTATE: XXKDA" (4.x). A
// query that failed fails its job otherwise ("Job aborted due to stage
// failure: …", or on 4.x the error's own condition), and SparkContext's
// stop under a running query says "cancelled because SparkContext was
// shut down": both stay failures. why is the job's stage failure.
func queryStopped(j *sparkapi.Job, why string) bool {
	g := j.JobGroup
	if g == "" || !strings.Contains(j.Description, "runId = "+g) {
		return false
	}
	return strings.HasSuffix(why, "cancelled part of cancelled job group "+g) ||
		strings.HasPrefix(why, "[SPARK_JOB_CANCELLED] ") && strings.Contains(why, "runId = "+g+"] was stopped")
}

func stageFailure(stages []*sparkapi.Stage, ids []int) string {
	var best *sparkapi.Stage
	for _, s := range stages {
		if s.Status == "FAILED" && slices.Contains(ids, s.StageID) &&
			(best == nil || cmp.Or(cmp.Compare(s.StageID, best.StageID), cmp.Compare(s.AttemptID, best.AttemptID)) < 0) {
			best = s
		}
	}
	if best == nil {
		return ""
	}
	return firstLine(best.FailureReason)
}

// CompareExecutorIDs orders the driver first, then executors by number.
func CompareExecutorIDs(a, b string) int {
	rank := func(id string) int {
		if id == "driver" {
			return 0
		}
		return 1
	}
	return cmp.Or(rank(a)-rank(b), len(a)-len(b), strings.Compare(a, b))
}

// optMS is an optional date in epoch ms, 0 when absent.
func optMS(d *sparkapi.Date) int64 { return d.Ms() }

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

// runMsOf sums the run time the tasks reported (a task without metrics:
// 0).
func runMsOf(lists ...[]sparkapi.TaskData) int64 {
	var sum int64
	for _, tasks := range lists {
		for _, task := range tasks {
			if task.TaskMetrics != nil {
				sum = addSat(sum, max(task.TaskMetrics.ExecutorRunTime, 0))
			}
		}
	}
	return sum
}
