package annotate

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sparkpulse/sparkpulse/facts"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/sizing"
	"github.com/sparkpulse/sparkpulse/sparkapi"
	"github.com/sparkpulse/sparkpulse/timespent"
)

// Stage details: why a stage took as long as it did and why its tasks
// failed. When a stage attempt ends, and it ran StageDetailsMinDuration or
// had failed tasks, the poller reads, within StageDetailsRequests per sync
// (stages with failed tasks first, then the longest):
//
//   - taskSummary?quantiles=0.5,0.95,1.0: the median, p95 and largest task
//     of each metric over the successful tasks (multiples of 0.05, which
//     Spark caches); skew is the largest run time over the median;
//   - taskList?sortBy=-runtime&length=1: the slowest task, the straggler;
//   - taskList?status=failed&status=killed&length=FailedTasksPerStage,
//     when tasks failed or were killed (Spark before 3.0 ignores status:
//     its tasks are filtered here): the failed ones are written as task
//     failures, and both give the accounting their run time.
//
// A stage without details says why in task_details (short, budget,
// unavailable); an endpoint that fails costs the stage its details, never
// a retry loop.

const summaryQuantiles = "0.5,0.95,1.0"

// Why a stage has no details.
const (
	detailsRead        = "read"
	detailsShort       = "short"       // ran less than StageDetailsMinDuration, no failed task
	detailsBudget      = "budget"      // StageDetailsRequests were spent this sync
	detailsUnavailable = "unavailable" // the source answered 404 or failed (Spark before 1.4, no task with metrics)
)

type stageDetails struct {
	why     string
	summary *sparkapi.TaskSummary
	slowest *sparkapi.TaskData
	failed  []sparkapi.TaskData
	killed  []sparkapi.TaskData // a speculative copy that lost, a cancelled job's
	// listedFailed and listedKilled are the stage's counts when its failed
	// and killed tasks were last asked for: a task killed as its stage
	// finished may end after the stage's details were read, and the
	// counts growing has them read again.
	listedFailed, listedKilled int
}

// syncStageDetails reads the details of stage attempts that ended since
// the last sync.
func (p *Poller) syncStageDetails(ctx context.Context, st *appState) error {
	budget := p.cfg.StageDetailsRequests
	// Stages with failed tasks first, then the longest: when the budget
	// runs out, what is left without details matters least.
	keys := slices.SortedFunc(maps.Keys(st.stages), compareStageKeys)
	slices.SortStableFunc(keys, func(a, b stageKey) int {
		x, y := st.stages[a], st.stages[b]
		failed := func(s *stageItem) int {
			if s.NumFailedTasks+s.NumKilledTasks > 0 {
				return 0
			}
			return 1
		}
		return cmp.Or(failed(x)-failed(y), cmp.Compare(stageMs(y.Stage), stageMs(x.Stage)))
	})
	for _, k := range keys {
		s := st.stages[k]
		if s.Status != "COMPLETE" && s.Status != "FAILED" {
			continue
		}
		if d := s.details; d != nil {
			if (d.why == detailsRead || d.why == detailsShort) && budget > 0 &&
				(s.NumFailedTasks > d.listedFailed || s.NumKilledTasks > d.listedKilled) {
				budget--
				base := st.url + "/stages/" + strconv.Itoa(k.id) + "/" + strconv.Itoa(k.attempt)
				d.failed, d.killed = nil, nil
				if err := readFailed(ctx, p.get, base, d, p.cfg.FailedTasksPerStage); err != nil {
					return err
				}
				d.listedFailed, d.listedKilled = s.NumFailedTasks, s.NumKilledTasks
			}
			continue
		}
		start, end := optMS(s.SubmissionTime), optMS(s.CompletionTime)
		if start == 0 {
			continue // it never ran
		}
		if p.facts.Has(st.key.app, facts.NewKey(schema.MeasurementStage, stageFactTime(k, start, phaseEnd)), p.cfg.Now()) {
			s.details = &stageDetails{why: detailsRead} // written before a restart
			continue
		}
		d := &stageDetails{why: detailsRead}
		s.details = d
		long := time.Duration(end-start)*time.Millisecond >= p.cfg.StageDetailsMinDuration || p.cfg.StageDetailsMinDuration < 0
		need := 0
		if long {
			need += 2
		}
		if s.NumFailedTasks+s.NumKilledTasks > 0 {
			need++
		}
		switch {
		case need == 0:
			d.why = detailsShort
		case need > budget:
			d.why = detailsBudget
		}
		p.stats.stageDetails(d.why)
		if d.why != detailsRead {
			continue
		}
		budget -= need
		base := st.url + "/stages/" + strconv.Itoa(k.id) + "/" + strconv.Itoa(k.attempt)
		if err := readDetails(ctx, p.get, base, d, long, s.NumFailedTasks+s.NumKilledTasks > 0, p.cfg.FailedTasksPerStage); err != nil {
			return err
		}
		d.listedFailed, d.listedKilled = s.NumFailedTasks, s.NumKilledTasks
		if d.why == detailsUnavailable {
			p.stats.stageDetails(d.why)
		}
	}
	// Stages running long: every progressEvery syncs, their finished
	// tasks' distribution and the task running longest.
	if st.syncs%progressEvery != 0 {
		return nil
	}
	now := p.cfg.Now()
	for _, k := range keys {
		s := st.stages[k]
		start := optMS(s.SubmissionTime)
		if s.Status != "ACTIVE" || start == 0 || now.UnixMilli()-start < max(p.cfg.StageDetailsMinDuration, progressMin).Milliseconds() {
			continue
		}
		if budget < 2 {
			p.stats.stageDetails(detailsBudget)
			continue
		}
		budget -= 2
		base := st.url + "/stages/" + strconv.Itoa(k.id) + "/" + strconv.Itoa(k.attempt)
		pr := &stageProgress{at: now}
		var sum sparkapi.TaskSummary
		if err := p.get(ctx, base+"/taskSummary?quantiles="+summaryQuantiles, &sum); err == nil && len(sum.ExecutorRunTime) == 3 {
			pr.summary = &sum
		} else if ctx.Err() != nil {
			return ctx.Err()
		}
		var running []sparkapi.TaskData
		err := p.get(ctx, base+"/taskList?status=running&length="+strconv.Itoa(progressRunningTasks), &running)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		for i := range running {
			t := &running[i]
			if err == nil && t.Status == "RUNNING" && t.LaunchTime != nil && (pr.longest == nil || t.LaunchTime.Before(pr.longest.LaunchTime.Time)) {
				pr.longest = t
			}
		}
		s.progress = pr
	}
	return nil
}

// Progress of a running stage.
const (
	progressEvery        = 6           // syncs: a minute at the 10 s interval
	progressMin          = time.Minute // a stage running this long is followed
	progressRunningTasks = 200         // running tasks read to find the longest
)

// stageProgress is a running stage's finished tasks and its longest
// running task, written as a spark_stage_progress point.
type stageProgress struct {
	at      time.Time
	summary *sparkapi.TaskSummary
	longest *sparkapi.TaskData
}

// stageProgressPoint writes a running stage's progress, at the time it
// was read (its id in the sub-millisecond digits: one point per stage
// and read).
func (w *points) stageProgressPoint(k stageKey, s *stageItem) {
	pr := s.progress
	s.progress = nil
	start := optMS(s.SubmissionTime)
	if pr == nil || !w.begin(schema.MeasurementStageProgress, stageFactTime(k, pr.at.UnixMilli(), phaseStart)) {
		return
	}
	w.int(schema.FieldStageID, int64(k.id))
	w.int(schema.FieldStageAttempt, int64(k.attempt))
	w.str(schema.FieldName, w.text(s.Name))
	w.int(schema.FieldRunningMs, pr.at.UnixMilli()-start)
	w.int(schema.FieldNumTasks, int64(s.NumTasks))
	w.int(schema.FieldNumCompleteTasks, int64(s.NumCompleteTasks))
	w.int(schema.FieldNumActiveTasks, int64(s.NumActiveTasks))
	var median float64
	if sum := pr.summary; sum != nil {
		median = sum.ExecutorRunTime[0]
		w.int(schema.FieldTaskRunTimeMsP50, int64(sum.ExecutorRunTime[0]))
		w.int(schema.FieldTaskRunTimeMsP95, int64(sum.ExecutorRunTime[1]))
		w.int(schema.FieldTaskRunTimeMsMax, int64(sum.ExecutorRunTime[2]))
		if median > 0 {
			w.float(schema.FieldTaskSkew, sum.ExecutorRunTime[2]/median)
		}
	}
	text := fmt.Sprintf("%d of %d tasks done", s.NumCompleteTasks, s.NumTasks)
	if t := pr.longest; t != nil {
		ran := pr.at.Sub(t.LaunchTime.Time).Milliseconds()
		w.str(schema.FieldStragglerExecutor, w.text(t.ExecutorID))
		w.str(schema.FieldStragglerHost, w.text(t.Host))
		w.int(schema.FieldStragglerTaskIndex, int64(t.Index))
		w.int(schema.FieldStragglerRunningMs, ran)
		if median > 0 {
			w.float(schema.FieldStragglerVsMedian, float64(ran)/median)
		}
		text = joinText(text, fmt.Sprintf("task %d running %s on %s", t.Index, timespent.Duration(ran), w.text(t.Host)))
	}
	w.str(schema.FieldTitle, w.text(fmt.Sprintf("Stage %d.%d running for %s", k.id, k.attempt, timespent.Duration(pr.at.UnixMilli()-start))))
	w.str(schema.FieldText, text)
	w.str(schema.FieldAttemptID, w.text(w.st.attemptID))
	w.end()
}

// readDetails reads into d the task distribution and slowest task (with
// long) and the failed and killed tasks (with failed) of the stage
// attempt at base. A source that does not answer costs the stage its
// details; only the end of ctx is an error. At most maxFailed failed
// tasks, and as many killed ones, are kept.
func readDetails(ctx context.Context, get getFunc, base string, d *stageDetails, long, failed bool, maxFailed int) error {
	if long {
		var sum sparkapi.TaskSummary
		if err := get(ctx, base+"/taskSummary?quantiles="+summaryQuantiles, &sum); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			d.why = detailsUnavailable
		} else if len(sum.ExecutorRunTime) == 3 {
			d.summary = &sum
		}
		var slowest []sparkapi.TaskData
		if err := get(ctx, base+"/taskList?sortBy=-runtime&length=1", &slowest); err == nil && len(slowest) == 1 {
			d.slowest = &slowest[0]
		} else if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	if failed {
		return readFailed(ctx, get, base, d, maxFailed)
	}
	return nil
}

// readFailed reads into d the failed and killed tasks of the stage
// attempt at base, at most maxFailed of each.
func readFailed(ctx context.Context, get getFunc, base string, d *stageDetails, maxFailed int) error {
	var tasks []sparkapi.TaskData
	err := get(ctx, base+"/taskList?status=failed&status=killed&length="+strconv.Itoa(2*maxFailed), &tasks)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err == nil {
		for _, t := range tasks {
			switch {
			case t.Status == "KILLED" && len(d.killed) < maxFailed:
				d.killed = append(d.killed, t)
			case t.Status != "SUCCESS" && t.Status != "RUNNING" && t.Status != "KILLED" && len(d.failed) < maxFailed:
				d.failed = append(d.failed, t)
			}
		}
	}
	return nil
}

func compareStageKeys(a, b stageKey) int {
	if a.id != b.id {
		return a.id - b.id
	}
	return a.attempt - b.attempt
}

// stageFactTime is the time of a stage attempt's fact.
func stageFactTime(k stageKey, startMs int64, phase int) int64 {
	return factTime(startMs, int64(k.id%25_000)*10+int64(min(k.attempt, 9)), phase)
}

// stageDetailFields adds a stage's details to its end fact.
func (w *points) stageDetailFields(s *stageItem) {
	w.int(schema.FieldJVMGCTimeMs, s.JVMGCTime)
	w.int(schema.FieldShuffleFetchWaitMs, s.ShuffleFetchWaitTime)
	w.int(schema.FieldPeakExecutionMemoryBytes, s.PeakExecutionMemory)
	w.peaks(s.PeakExecutorMetrics)
	d := s.details
	if d == nil {
		return
	}
	w.str(schema.FieldTaskDetails, d.why)
	if sum := d.summary; sum != nil {
		pair := func(name string, vs []float64, p95 bool) {
			if len(vs) != 3 {
				return // Spark did not report this metric
			}
			w.int(name+"_p50", int64(vs[0]))
			if p95 {
				w.int(name+"_p95", int64(vs[1]))
			}
			w.int(name+"_max", int64(vs[2]))
		}
		pair("task_run_time_ms", sum.ExecutorRunTime, true)
		if median := sum.ExecutorRunTime[0]; median > 0 {
			w.float(schema.FieldTaskSkew, sum.ExecutorRunTime[2]/median)
		}
		pair("task_gc_time_ms", sum.JVMGCTime, false)
		pair("task_shuffle_read_bytes", sum.ShuffleReadMetrics.ReadBytes, false)
		pair("task_input_bytes", sum.InputMetrics.BytesRead, false)
		pair("task_spill_memory_bytes", sum.MemoryBytesSpilled, false)
		pair("task_spill_disk_bytes", sum.DiskBytesSpilled, false)
		pair("task_peak_execution_memory_bytes", sum.PeakExecutionMemory, false)
	}
	if t := d.slowest; t != nil {
		w.str(schema.FieldStragglerExecutor, w.text(t.ExecutorID))
		w.str(schema.FieldStragglerHost, w.text(t.Host))
		w.int(schema.FieldStragglerTaskIndex, int64(t.Index))
		if t.TaskMetrics != nil {
			w.int(schema.FieldStragglerRunTimeMs, t.TaskMetrics.ExecutorRunTime)
		}
		w.bool(schema.FieldStragglerSpeculative, t.Speculative)
	}
	if len(d.failed) > 0 {
		w.int(schema.FieldFailedTasksRead, int64(len(d.failed)))
	}
}

// taskFailures writes a fact per failed task read of a stage attempt, at
// the task's launch (its id and the phase in the sub-millisecond digits).
func (w *points) taskFailures(k stageKey, s *stageItem) {
	if s.details == nil {
		return
	}
	for _, t := range s.details.failed {
		launch := optMS(t.LaunchTime)
		if launch == 0 || !w.begin(schema.MeasurementTaskFailure, factTime(launch, t.TaskID, phaseEnd)) {
			continue
		}
		class, kind, line := TaskError(t.ErrorMessage, t.Status)
		class, status, first := w.text(class), w.text(t.Status), w.reason(line)
		w.int(schema.FieldStageID, int64(k.id))
		w.int(schema.FieldStageAttempt, int64(k.attempt))
		w.int(schema.FieldTaskID, t.TaskID)
		w.int(schema.FieldTaskIndex, int64(t.Index))
		w.int(schema.FieldTaskAttempt, int64(t.Attempt))
		w.str(schema.FieldExecutorID, w.text(t.ExecutorID))
		w.str(schema.FieldHost, w.text(t.Host))
		w.str(schema.FieldStatus, status)
		w.str(schema.FieldErrorClass, class)
		w.str(schema.FieldKind, kind)
		w.str(schema.FieldError, first)
		// An executor lost under its tasks: why it went, as its removal
		// says (container_oom, heap_oom, killed …), when Spark said by now.
		if x, ok := w.st.executors[t.ExecutorID]; ok && kind == TaskExecutorLost && x.RemoveReason != "" {
			w.str(schema.FieldExecutorRemoveKind, w.st.removeKind(x.RemoveReason))
		}
		w.bool(schema.FieldSpeculative, t.Speculative)
		w.int(schema.FieldEndMs, launch+t.Duration)
		w.common(phaseEnd, fmt.Sprintf("Task %d.%d of stage %d.%d %s: %s", t.Index, t.Attempt, k.id, k.attempt, status, class),
			joinText("on "+w.text(t.Host), "executor "+w.text(t.ExecutorID), first))
		w.end()
	}
}

// Kinds of task failure.
const (
	TaskOOM             = "oom"              // java.lang.OutOfMemoryError in the task: the heap
	TaskExecutionMemory = "execution_memory" // SparkOutOfMemoryError: execution memory could not be acquired, not the heap
	TaskFetchFailed     = "fetch_failed"     // shuffle data could not be fetched (a lost executor's output)
	TaskExecutorLost    = "executor_lost"    // the executor died under it
	TaskKilled          = "killed"           // killed: a speculative copy lost, a job cancelled
	// TaskPythonCrashed: the task's Python worker ended without a Python
	// error (PythonRunner: "Python worker exited unexpectedly (crashed)",
	// with no fault handler's report of its own): a signal, which under a
	// container's memory limit (YARN with cgroups, Kubernetes) is usually
	// the kernel's OOM killer taking the largest process.
	TaskPythonCrashed = "python_crashed"
	TaskException     = "exception" // any other exception
)

var (
	exceptionClassRE = regexp.MustCompile(`^([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*)(?::|$)`)
	// Spark 3.4+ names its errors: "org.apache.spark.SparkException:
	// [FAILED_EXECUTE_UDF] …" (common/utils error-conditions.json).
	errorConditionRE = regexp.MustCompile(`^[^:\s]+: \[([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)\]`)
	pythonTypeRE     = regexp.MustCompile(`^([A-Za-z_][\w.]*)(?::|$)`)
)

// pythonException is how PySpark reports an error of a Python worker: its
// first line is "…PythonException: Traceback (most recent call last):",
// and Python's own exception is the last unindented line of the
// traceback, before the JVM's stack.
const pythonException = "org.apache.spark.api.python.PythonException"

// TaskErrorClass reads a failed task's error message (Spark's errorMessage)
// as the exception class, or Spark's name for the end reason, and a kind.
func TaskErrorClass(msg, status string) (class, kind string) {
	class, kind, _ = TaskError(msg, status)
	return class, kind
}

// TaskError is TaskErrorClass with the line that says what went wrong:
// the message's first line, or for a Python worker's error Python's
// exception ("ValueError: bad row 42"), whose type then completes the
// class ("PythonException: ValueError"), so that Python errors of
// different types are not one row.
func TaskError(msg, status string) (class, kind, line string) {
	first := strings.TrimSpace(firstLine(msg))
	line = first
	switch {
	case strings.HasPrefix(first, "ExecutorLostFailure"):
		class, kind = "ExecutorLostFailure", TaskExecutorLost
	case strings.HasPrefix(first, "FetchFailed"):
		class, kind = "FetchFailed", TaskFetchFailed
	case strings.HasPrefix(first, "TaskKilled"), strings.HasPrefix(first, "TaskCommitDenied"), status == "KILLED":
		class, kind = strings.Fields(first + " TaskKilled")[0], TaskKilled
	case strings.HasPrefix(first, pythonException):
		class, kind = "PythonException", TaskException
		if py := pythonError(msg); py != "" {
			line = py
			class += ": " + pythonTypeRE.FindStringSubmatch(py)[1]
		}
		return class, kind, line
	default:
		if m := exceptionClassRE.FindStringSubmatch(first); m != nil {
			class = m[1]
		}
		wrapper := class == "org.apache.spark.SparkException"
		if m := errorConditionRE.FindStringSubmatch(first); m != nil {
			class += " [" + m[1] + "]"
			wrapper = true
		}
		// Spark wraps what failed a write or a stage ("[TASK_WRITE_FAILED]
		// Task failed while writing rows"): the root cause, the last
		// "Caused by:", says what it was (a full disk, a throttled object
		// store) and tells such failures apart.
		if root := rootCause(msg); wrapper && root != "" {
			if m := exceptionClassRE.FindStringSubmatch(root); m != nil {
				class += " caused by " + m[1]
			}
			line += "; caused by: " + root
		}
		kind = TaskException
	}
	switch {
	case strings.Contains(msg, "SparkOutOfMemoryError"):
		kind = TaskExecutionMemory
	case strings.Contains(msg, "OutOfMemoryError"):
		kind = TaskOOM
	case strings.Contains(class, "FetchFailedException"):
		kind = TaskFetchFailed
	case sizing.PythonWorkerCrashed(msg):
		kind = TaskPythonCrashed
	}
	return class, kind, line
}

// rootCause is the last "Caused by:" line of a JVM stack trace, without
// its prefix; "" when there is none.
func rootCause(msg string) string {
	const causedBy = "\nCaused by: "
	i := strings.LastIndex(msg, causedBy)
	if i < 0 {
		return ""
	}
	return strings.TrimSpace(firstLine(msg[i+len(causedBy):]))
}

// pythonError is the last exception line of the Python traceback in a
// PythonException's message: unindented, "Type: text" or "Type", before
// the JVM's stack ("\tat …") begins.
func pythonError(msg string) string {
	var last string
	for i, l := range strings.Split(msg, "\n") {
		if i == 0 {
			continue
		}
		if strings.HasPrefix(l, "\tat ") {
			break
		}
		l = strings.TrimRight(l, "\r ")
		if l == "" || l[0] == ' ' || l[0] == '\t' || strings.HasPrefix(l, "Traceback ") ||
			strings.HasPrefix(l, "During handling") || strings.HasPrefix(l, "The above exception") {
			continue
		}
		if pythonTypeRE.MatchString(l) {
			last = l
		}
	}
	return last
}
