package annotate

import (
	"fmt"

	"github.com/sparkpulse/sparkpulse/attempt"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/timespent"
)

// Stage details (package attempt reads them): why a stage took as long
// as it did and why its tasks failed, on its end fact and as task
// failures; a stage without details says why in task_details (short,
// budget, unavailable). A running stage's progress is its own point.

// stageProgressPoint writes a running stage's progress, at the time it
// was read (its id in the sub-millisecond digits: one point per stage
// and read).
func (w *points) stageProgressPoint(k attempt.StageKey, s *attempt.Stage) {
	pr := s.Progress
	s.Progress = nil
	start := optMS(s.SubmissionTime)
	if pr == nil || !w.begin(schema.MeasurementStageProgress, stageFactTime(k, pr.At.UnixMilli(), phaseStart)) {
		return
	}
	w.int(schema.FieldStageID, int64(k.ID))
	w.int(schema.FieldStageAttempt, int64(k.Attempt))
	w.str(schema.FieldName, w.text(s.Name))
	w.int(schema.FieldRunningMs, pr.At.UnixMilli()-start)
	w.int(schema.FieldNumTasks, int64(s.NumTasks))
	w.int(schema.FieldNumCompleteTasks, int64(s.NumCompleteTasks))
	w.int(schema.FieldNumActiveTasks, int64(s.NumActiveTasks))
	var median float64
	if sum := pr.Summary; sum != nil {
		median = sum.ExecutorRunTime[0]
		w.int(schema.FieldTaskRunTimeMsP50, int64(sum.ExecutorRunTime[0]))
		w.int(schema.FieldTaskRunTimeMsP95, int64(sum.ExecutorRunTime[1]))
		w.int(schema.FieldTaskRunTimeMsMax, int64(sum.ExecutorRunTime[2]))
		if median > 0 {
			w.float(schema.FieldTaskSkew, sum.ExecutorRunTime[2]/median)
		}
	}
	text := fmt.Sprintf("%d of %d tasks done", s.NumCompleteTasks, s.NumTasks)
	if t := pr.Longest; t != nil {
		ran := pr.At.Sub(t.LaunchTime.Time).Milliseconds()
		w.str(schema.FieldStragglerExecutor, w.text(t.ExecutorID))
		w.str(schema.FieldStragglerHost, w.text(t.Host))
		w.int(schema.FieldStragglerTaskIndex, int64(t.Index))
		w.int(schema.FieldStragglerRunningMs, ran)
		if median > 0 {
			w.float(schema.FieldStragglerVsMedian, float64(ran)/median)
		}
		text = joinText(text, fmt.Sprintf("task %d running %s on %s", t.Index, timespent.Duration(ran), w.text(t.Host)))
	}
	w.str(schema.FieldTitle, w.text(fmt.Sprintf("Stage %d.%d running for %s", k.ID, k.Attempt, timespent.Duration(pr.At.UnixMilli()-start))))
	w.str(schema.FieldText, text)
	w.str(schema.FieldAttemptID, w.text(w.st.AttemptID))
	w.end()
}

// stageFactTime is the time of a stage attempt's fact.
func stageFactTime(k attempt.StageKey, startMs int64, phase int) int64 {
	return factTime(startMs, int64(k.ID%25_000)*10+int64(min(k.Attempt, 9)), phase)
}

// stageDetailFields adds a stage's details to its end fact.
func (w *points) stageDetailFields(s *attempt.Stage) {
	w.int(schema.FieldJVMGCTimeMs, s.JVMGCTime)
	w.int(schema.FieldShuffleFetchWaitMs, s.ShuffleFetchWaitTime)
	w.int(schema.FieldPeakExecutionMemoryBytes, s.PeakExecutionMemory)
	w.peaks(s.PeakExecutorMetrics)
	d := s.Details
	if d == nil {
		return
	}
	w.str(schema.FieldTaskDetails, d.Why)
	if sum := d.Summary; sum != nil {
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
	if t := d.Slowest; t != nil {
		w.str(schema.FieldStragglerExecutor, w.text(t.ExecutorID))
		w.str(schema.FieldStragglerHost, w.text(t.Host))
		w.int(schema.FieldStragglerTaskIndex, int64(t.Index))
		if t.TaskMetrics != nil {
			w.int(schema.FieldStragglerRunTimeMs, t.TaskMetrics.ExecutorRunTime)
		}
		w.bool(schema.FieldStragglerSpeculative, t.Speculative)
	}
	if len(d.Failed) > 0 {
		w.int(schema.FieldFailedTasksRead, int64(len(d.Failed)))
	}
}

// taskFailures writes a fact per failed task read of a stage attempt, at
// the task's launch (its id and the phase in the sub-millisecond digits).
func (w *points) taskFailures(k attempt.StageKey, s *attempt.Stage) {
	if s.Details == nil {
		return
	}
	for _, t := range s.Details.Failed {
		launch := optMS(t.LaunchTime)
		if launch == 0 || !w.begin(schema.MeasurementTaskFailure, factTime(launch, t.TaskID, phaseEnd)) {
			continue
		}
		class, kind, line := attempt.TaskError(t.ErrorMessage, t.Status)
		class, status, first := w.text(class), w.text(t.Status), w.reason(line)
		w.int(schema.FieldStageID, int64(k.ID))
		w.int(schema.FieldStageAttempt, int64(k.Attempt))
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
		if x, ok := w.st.Executors[t.ExecutorID]; ok && kind == attempt.TaskExecutorLost && x.RemoveReason != "" {
			w.str(schema.FieldExecutorRemoveKind, w.st.removeKind(x.RemoveReason))
		}
		w.bool(schema.FieldSpeculative, t.Speculative)
		w.int(schema.FieldEndMs, launch+t.Duration)
		w.common(phaseEnd, fmt.Sprintf("Task %d.%d of stage %d.%d %s: %s", t.Index, t.Attempt, k.ID, k.Attempt, status, class),
			joinText("on "+w.text(t.Host), "executor "+w.text(t.ExecutorID), first))
		w.end()
	}
}
