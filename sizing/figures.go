package sizing

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
)

// Figures of where an application's time and task slots went, as
// Sparklens reports them, written with its accounting. Each is absent
// (nil) when it cannot be known, and the notes say why.
//
//   - Slot occupancy: Σ task run time × spark.task.cpus ÷ executor
//     core-seconds held, 0..1: the share of the task slots held in which a
//     task ran (a task holds spark.task.cpus cores: TaskSchedulerImpl
//     offers it only that many free). Run time, not
//     CPU: a task's CPU time leaves out its Python workers, its garbage
//     collection and its waits on I/O and shuffle fetches, which hold the
//     slot as much as computing does. The run time is the executors'
//     (their ExecutorSource counters, which Spark adds to when a task
//     succeeds: Executor.TaskRunner.run) or, where those were set aside,
//     Spark's stage list (every task that reported metrics). The idle
//     rule of RightSize reads the same ratio. Unknown when the task times
//     are.
//   - Driver-only time: the wall clock of the application, from its start
//     to its end (or the read, while it runs), in which no stage attempt
//     ran: the union of the attempts' [submissionTime, completionTime]
//     clipped to the application, subtracted from its duration; a stage
//     still running counts up to the read. Executors held then can run
//     nothing: the driver plans, collects results, broadcasts, lists
//     files, or the program does work of its own. Known only when Spark
//     still lists every stage the application made: a stage it dropped
//     (spark.ui.retainedStages) would read as driver-only time.
//   - Lost task time: the run time of task attempts that failed or were
//     killed (speculative copies that lost included), see Usage.
//   - Failed stage attempts: the attempts Spark marked FAILED (a fetch
//     failure makes Spark run the stage again; a task failing
//     spark.task.maxFailures times fails the job), from a whole stage list.
//   - Outcome: see the Outcome constants.

// Outcomes of an application. Spark's REST API records no exit status:
// the evidence is whether the attempt completed and how its jobs ended.
const (
	// OutcomeSucceeded: the attempt completed and its last job to end
	// succeeded. A driver that failed after its last job (an exception in
	// the program's own code, a non-zero exit) is not seen by Spark's
	// listener, and reads as succeeded.
	OutcomeSucceeded = "succeeded"
	// OutcomeFailed: the attempt completed and its last job to end failed
	// (aborted after spark.task.maxFailures, or cancelled): a program that
	// does not catch a job's failure ends with it.
	OutcomeFailed = "failed"
	// OutcomeRunning: the attempt has not completed.
	OutcomeRunning = "running"
	// OutcomeUnknown: the attempt completed with no job, or with its last
	// job still running in Spark's answers.
	OutcomeUnknown = "unknown"
	// OutcomeDriverLost: no source showed the attempt's end; what was
	// last seen of it is closed out (the driver crashed or was killed, or
	// ended where no History Server shows it).
	OutcomeDriverLost = "driver_lost"
)

// RunTimeCPUs is how many of a task's spark.task.cpus Spark's run time of
// it already counts: from Spark 4.0 the executor multiplies a task's
// elapsed time by its cpus before it becomes the task's executorRunTime,
// hence a stage's and the executors' runTime counter (SPARK-51666,
// Executor.TaskRunner; the deserialisation time is then taken off once),
// so that run time is slot time; before 4.0 it is wall time. Neither
// the CPU time, the GC time nor the executors' totalDuration is
// multiplied. An unknown version reads as before 4.0.
func RunTimeCPUs(sparkVersion string, taskCPUs int) int {
	major, _, _ := strings.Cut(strings.TrimSpace(sparkVersion), ".")
	if n, err := strconv.Atoi(major); err == nil && n >= 4 {
		return max(taskCPUs, 1)
	}
	return 1
}

// occupancy sets BusySlotSeconds and SlotOccupancy from the task run
// time, when it is known.
func (u *Usage) occupancy() {
	u.SlotOccupancy, u.BusySlotSeconds = nil, 0
	if u.CPUFrom == "" || u.SlotCoreSeconds <= 0 {
		return
	}
	v := u.BusyCoreSeconds(u.TaskRunSeconds) / u.SlotCoreSeconds
	u.SlotOccupancy = &v
	// In the cores held: a pod that requested fewer cores than it runs
	// tasks on holds that many while its tasks run.
	u.BusySlotSeconds = v * u.ExecutorCoreSeconds
}

// BusyCoreSeconds is the executor cores that task run time runSeconds
// (as Spark reports it) held: each task its slot's cores (SlotCores);
// run time that counts each task's cpus already (RunTimeCPUs) is slot
// time.
func (u *Usage) BusyCoreSeconds(runSeconds float64) float64 {
	slot := u.SlotCores
	if slot <= 0 {
		slot = float64(max(u.TaskCPUs, 1))
	}
	return runSeconds / float64(max(u.RunTimeCPUs, 1)) * slot
}

// Span is the run of a stage attempt, in epoch ms: [Start, End].
type Span struct{ Start, End int64 }

// Covered is how much of [from, to] the spans cover, each clipped to it:
// where spans overlap (stages running side by side) the time counts once.
func Covered(spans []Span, from, to int64) int64 {
	covered, reach := int64(0), from
	for _, s := range clip(spans, from, to) {
		if s.End <= reach {
			continue // within what is counted
		}
		covered += s.End - max(s.Start, reach)
		reach = s.End
	}
	return covered
}

// Gaps are the stretches of [from, to] in which none of the spans ran,
// in order, in ms: the driver-only time, stretch by stretch.
func Gaps(spans []Span, from, to int64) []int64 {
	var gaps []int64
	reach := from
	for _, s := range clip(spans, from, to) {
		if s.Start > reach {
			gaps = append(gaps, s.Start-reach)
		}
		reach = max(reach, s.End)
	}
	if to > reach {
		gaps = append(gaps, to-reach)
	}
	return gaps
}

// clip is the spans that run within [from, to], cut to it, by start.
func clip(spans []Span, from, to int64) []Span {
	clipped := make([]Span, 0, len(spans))
	for _, s := range spans {
		s.Start, s.End = max(s.Start, from), min(s.End, to)
		if s.End > s.Start {
			clipped = append(clipped, s)
		}
	}
	slices.SortFunc(clipped, func(a, b Span) int { return cmp.Compare(a.Start, b.Start) })
	return clipped
}

// DriverOnly is the time of [from, to] in which none of the spans ran.
func DriverOnly(spans []Span, from, to int64) int64 {
	if to <= from {
		return 0
	}
	return to - from - Covered(spans, from, to)
}
