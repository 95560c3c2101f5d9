package accounting

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sparkpulse/sparkpulse/realspark/recorded"
	"github.com/sparkpulse/sparkpulse/sizing"
	"github.com/sparkpulse/sparkpulse/sparkapi"
)

// Driver-only time and failed stage attempts from a stage list, worked by
// hand on an application from t0 to t0 + 100 s.
func TestStageFigures(t *testing.T) {
	start := ms(t0)
	skipped := sparkapi.Stage{StageID: 2, Status: "SKIPPED"} // never submitted: no run
	list := []sparkapi.Stage{
		stageAt(0, 0, "COMPLETE", 10, 30),
		stageAt(1, 0, "FAILED", 20, 50), // side by side with stage 0: 10–50 counts once
		stageAt(1, 1, "COMPLETE", 70, 80),
		skipped,
	}
	// Stages ran 10–50 and 70–80: 50 s; none ran 0–10, 50–70 and 80–100.
	var u sizing.Usage
	StageFigures(&u, list, start, start+100_000)
	if u.DriverOnlyMs == nil || *u.DriverOnlyMs != 50_000 || u.FailedStageAttempts == nil || *u.FailedStageAttempts != 1 {
		t.Fatalf("driver-only %v, failed attempts %v; want 50 000 and 1", u.DriverOnlyMs, u.FailedStageAttempts)
	}
	if want := []int64{10_000, 20_000, 20_000}; !slices.Equal(u.DriverOnlyGapsMs, want) {
		t.Errorf("stretches %v, want %v", u.DriverOnlyGapsMs, want)
	}

	// A stage running at a read 95 s in counts up to the read: 90–95.
	running := append(list, stageAt(3, 0, "ACTIVE", 90, -1))
	u = sizing.Usage{}
	StageFigures(&u, running, start, start+95_000)
	if u.DriverOnlyMs == nil || *u.DriverOnlyMs != 40_000 {
		t.Errorf("with a running stage: %v, want 40 000 (95 s less 40 + 10 + 5 s)", u.DriverOnlyMs)
	}

	// Must not: a figure when Spark dropped stages. Stage 0 gone
	// (spark.ui.retainedStages) would read as 20 s more driver-only time.
	u = sizing.Usage{}
	StageFigures(&u, list[1:], start, start+100_000)
	if u.DriverOnlyMs != nil || u.FailedStageAttempts != nil {
		t.Errorf("stages dropped: driver-only %v, failed attempts %v", *u.DriverOnlyMs, *u.FailedStageAttempts)
	}
	if notes := strings.Join(u.Notes, "; "); !strings.Contains(notes, "driver-only time and failed stage attempts unknown: 2 of the 3 stages") {
		t.Errorf("notes %q", notes)
	}
	// Nor when the stage list was not read.
	u = sizing.Usage{}
	(*StageTotals)(nil).Figures(&u, start, start+100_000)
	if u.DriverOnlyMs != nil || len(u.Notes) != 1 {
		t.Errorf("no stage list: %v, %q", u.DriverOnlyMs, u.Notes)
	}
}

// Lost task time: Spark's stage totals (every task with metrics) less the
// stream's (successful tasks only), when the stream holds every
// successful task; 0 without failed or killed tasks; else unknown.
func TestLostTasks(t *testing.T) {
	whole := StageTotals{ids: map[int]bool{0: true}, RunMs: 612_000}
	run := func(spark, stream float64) []ReconciledMetric {
		return []ReconciledMetric{{"tasks", 150, 150}, {"run_time_ms", stream, spark}}
	}
	listed := int64(7_500)
	for _, tc := range []struct {
		name           string
		failed, killed int
		dropped        bool
		fromTasks      *int64
		recompute      int64
		rec            *Reconciliation
		want           float64 // < 0: absent
		note           string
	}{
		// Every failed task read from taskList: their 7.5 s, whatever the
		// stream (here short: a killed executor's last report is missing).
		{"failed tasks read", 3, 0, false, &listed, 0, &Reconciliation{Verdict: ReconcileShort, Metrics: run(612_000, 500_000)}, 7.5, ""},
		// 612 s in Spark's stages, 600 s in the executors' counters: the 3
		// failed and 1 killed tasks ran 12 s.
		{"failed tasks", 3, 1, false, nil, 0, &Reconciliation{Verdict: ReconcileFailedTasks, Metrics: run(612_000, 600_000)}, 12, ""},
		// Every task succeeded: nothing lost, stream or not.
		{"no failed task, no stream", 0, 0, false, nil, 0, nil, 0, ""},
		{"no failed task, a short stream", 0, 0, false, nil, 0, &Reconciliation{Verdict: ReconcileShort}, 0, ""},
		// Failed tasks without metrics (fetch failures, lost executors):
		// the totals agree, and nothing measurable was lost.
		{"failed tasks without metrics", 2, 0, false, nil, 0, &Reconciliation{Verdict: ReconcileExact, Metrics: run(600_000, 600_000)}, 0, ""},
		// Must not: a difference that a missing report would make.
		{"short stream", 3, 0, false, nil, 0, &Reconciliation{Verdict: ReconcileShort, Metrics: run(612_000, 500_000)}, -1, "do not match Spark's (short)"},
		{"no stream", 3, 0, false, nil, 0, nil, -1, "no metrics stream"},
		{"stages dropped", 0, 0, true, &listed, 0, nil, -1, "spark.ui.retainedStages"},
		// Tasks run again for lost shuffle output add to whichever figure.
		{"recompute, failed tasks read", 3, 0, false, &listed, 4_250, nil, 11.75, ""},
		{"recompute, no failed task", 0, 0, false, nil, 4_250, nil, 4.25, ""},
		{"recompute, failed tasks unknown", 3, 0, false, nil, 4_250, nil, -1, "no metrics stream"},
	} {
		st := whole
		st.Failed, st.Killed = tc.failed, tc.killed
		if tc.dropped {
			st.ids, st.maxID = map[int]bool{1: true}, 1
		}
		var u sizing.Usage
		LostTasks(&u, &st, tc.fromTasks, tc.recompute, tc.rec)
		switch {
		case tc.want < 0 && u.LostTaskSeconds != nil:
			t.Errorf("%s: %v s lost, want absent", tc.name, *u.LostTaskSeconds)
		case tc.want >= 0 && (u.LostTaskSeconds == nil || *u.LostTaskSeconds != tc.want):
			t.Errorf("%s: %v, want %v s", tc.name, u.LostTaskSeconds, tc.want)
		case tc.note != "" && !strings.Contains(strings.Join(u.Notes, ";"), tc.note):
			t.Errorf("%s: notes %q, want %q", tc.name, u.Notes, tc.note)
		case (tc.recompute > 0 && !tc.dropped) != (u.RecomputeTaskSeconds != nil):
			t.Errorf("%s: recompute %v, from %d ms", tc.name, u.RecomputeTaskSeconds, tc.recompute)
		case u.RecomputeTaskSeconds != nil && *u.RecomputeTaskSeconds != float64(tc.recompute)/1000:
			t.Errorf("%s: recompute %v s, want %d ms", tc.name, *u.RecomputeTaskSeconds, tc.recompute)
		}
	}
}

// How an application ended, from the evidence Spark's REST API gives.
func TestOutcome(t *testing.T) {
	job := func(id int, status string, sub, done float64, stages ...int) sparkapi.Job {
		return sparkapi.Job{JobID: id, Status: status, SubmissionTime: sparkapi.OptDate(at(sub)), CompletionTime: sparkapi.OptDate(at(done)), StageIDs: stages}
	}
	failedStage := stageAt(4, 0, "FAILED", 30, 40)
	failedStage.FailureReason = "Job aborted due to stage failure: Task 0 in stage 4.0 failed 4 times\n\tat Etl.run"
	stages := []sparkapi.Stage{stageAt(3, 0, "COMPLETE", 20, 30), failedStage}
	const runID = "5f8c2a3e-1b7d-4c1e-9a51-0d8e6f2b7c44"
	for id, why := range map[int]string{
		8:  "Job 1 cancelled part of cancelled job group " + runID,
		9:  "[SPARK_JOB_CANCELLED] Job 1 cancelled Query orders_agg [id = bbf6a1d2-0c4e-4a8e-8f11-2b9d7c6e5a30, runId = " + runID + "] was stopped SQLSTATE: XXKDA",
		10: "[USER_RAISED_EXCEPTION] boom 0 SQLSTATE: P0001",
		11: "Stage cancelled because SparkContext was shut down",
		12: "Job 1 cancelled part of cancelled job group nightly",
	} {
		s := stageAt(id, 0, "FAILED", 60, 70)
		s.FailureReason = why
		stages = append(stages, s)
	}
	// A micro-batch job, as StreamExecution names it.
	streaming := func(id, stage int) sparkapi.Job {
		j := job(id, "FAILED", 60, 70, stage)
		j.JobGroup, j.Description = runID, "orders_agg\nid = bbf6a1d2-0c4e-4a8e-8f11-2b9d7c6e5a30\nrunId = "+runID+"\nbatch = 3"
		return j
	}
	for _, tc := range []struct {
		name      string
		completed bool
		jobs      []sparkapi.Job
		want      string
		reason    string
	}{
		{"running", false, []sparkapi.Job{job(0, "FAILED", 1, 2)}, sizing.OutcomeRunning, "not completed"},
		// The program caught job 1's failure and went on: its last job
		// decides, the failure is named.
		{"an earlier job failed", true, []sparkapi.Job{job(0, "SUCCEEDED", 1, 2), job(1, "FAILED", 3, 4, 4), job(2, "SUCCEEDED", 5, 6)},
			sizing.OutcomeSucceeded, "its last job, 2, succeeded; job 1 failed before it"},
		{"the last job failed", true, []sparkapi.Job{job(0, "SUCCEEDED", 1, 2), job(1, "FAILED", 30, 40, 3, 4)},
			sizing.OutcomeFailed, "its last job, 1, failed: Job aborted due to stage failure: Task 0 in stage 4.0 failed 4 times"},
		// Jobs side by side: the last to end decides, not the highest id.
		{"the last to end", true, []sparkapi.Job{job(1, "FAILED", 1, 50, 4), job(2, "SUCCEEDED", 2, 10)},
			sizing.OutcomeFailed, "its last job, 1, failed"},
		// A structured streaming query the program stopped: the stop
		// cancels the running micro-batch's job group, its runId, as
		// real Spark 3.5.9 and 4.3.0 word it (stages 8 and 9 below).
		{"a streaming query stopped (3.5)", true, []sparkapi.Job{job(0, "SUCCEEDED", 1, 2), streaming(1, 8)},
			sizing.OutcomeSucceeded, "its last job, 1, a micro-batch of streaming query " + runID + ", was cancelled as the program stopped the query"},
		{"a streaming query stopped (4.x)", true, []sparkapi.Job{job(0, "SUCCEEDED", 1, 2), streaming(1, 9)},
			sizing.OutcomeSucceeded, "was cancelled as the program stopped the query"},
		// Must not: the query's batch failed (its own error), or the
		// context stopped under it, or another group was cancelled.
		{"a streaming query failed", true, []sparkapi.Job{job(0, "SUCCEEDED", 1, 2), streaming(1, 10)},
			sizing.OutcomeFailed, "its last job, 1, failed: [USER_RAISED_EXCEPTION] boom"},
		{"the context stopped under a query", true, []sparkapi.Job{job(0, "SUCCEEDED", 1, 2), streaming(1, 11)},
			sizing.OutcomeFailed, "cancelled because SparkContext was shut down"},
		{"another group's cancellation", true, []sparkapi.Job{job(0, "SUCCEEDED", 1, 2), streaming(1, 12)},
			sizing.OutcomeFailed, "cancelled part of cancelled job group nightly"},
		// Must not: an outcome without evidence.
		{"no job", true, nil, sizing.OutcomeUnknown, "no job listed"},
		{"the last job still running", true, []sparkapi.Job{job(0, "SUCCEEDED", 1, 2), {JobID: 1, Status: "RUNNING", SubmissionTime: sparkapi.OptDate(at(3))}},
			sizing.OutcomeUnknown, "its last job, 1, was still RUNNING"},
	} {
		got, reason := Outcome(tc.completed, tc.jobs, stages)
		if got != tc.want || !strings.Contains(reason, tc.reason) {
			t.Errorf("%s: %s (%s), want %s (%s)", tc.name, got, reason, tc.want, tc.reason)
		}
	}
}

// The real Spark runs (testdata/spark-real, see package realspark): their
// live REST answers, read when each driver had run its jobs. Worked with
// jq from the recorded JSON (stages: the union of every submitted
// attempt's [submissionTime, completionTime]; none overlap, every id from
// 0 is listed; the read is startTimeEpoch + duration):
//
//	3.5.9 main:     88 080 ms, stages 54 359 ms: 33 721 ms driver-only
//	3.5.9 failures: 61 427 ms, stages 47 600 ms: 13 827 ms, 2 FAILED attempts
//	4.3.0 main:     76 212 ms, stages 44 662 ms: 31 550 ms
//	4.3.0 failures: 51 953 ms, stages 36 094 ms: 15 859 ms, 2 FAILED attempts
func TestStageFiguresOfRealSpark(t *testing.T) {
	want := map[string][2]int64{
		"3.5.9/main": {33_721, 0}, "3.5.9/failures": {13_827, 2},
		"4.3.0/main": {31_550, 0}, "4.3.0/failures": {15_859, 2},
	}
	apps := recorded.Answers[sparkapi.Application](t, "*/application.json", 4)
	for f, stages := range recorded.Answers[[]sparkapi.Stage](t, "*/stages.json", 4) {
		dir := filepath.Dir(f)
		key := filepath.Base(filepath.Dir(dir)) + "/" + filepath.Base(dir)
		app := apps[filepath.Join(dir, "application.json")]
		att := app.Attempts[0]
		start := att.StartMs()
		var u sizing.Usage
		StageFigures(&u, stages, start, start+att.Duration)
		w, ok := want[key]
		if !ok || u.DriverOnlyMs == nil || *u.DriverOnlyMs != w[0] || *u.FailedStageAttempts != int(w[1]) {
			t.Errorf("%s: driver-only %v, failed attempts %v; want %v", key, u.DriverOnlyMs, u.FailedStageAttempts, w)
		}
		// Read while running; as if it had ended there, its last job
		// decides: job 20 of main, job 6 of failures, whose jobs 2 and 4
		// failed (a Python UDF's error, an executor out of heap) and were
		// caught by the program.
		var jobs []sparkapi.Job
		recorded.ReadFile(t, filepath.Join(dir, "jobs.json"), &jobs)
		if got, _ := Outcome(att.Completed, jobs, stages); got != sizing.OutcomeRunning {
			t.Errorf("%s: live answer %s, want running", key, got)
		}
		got, reason := Outcome(true, jobs, stages)
		wantReason := "its last job, 20, succeeded"
		if strings.HasSuffix(key, "failures") {
			wantReason = "its last job, 6, succeeded; job 2,4 failed before it"
		}
		if got != sizing.OutcomeSucceeded || reason != wantReason {
			t.Errorf("%s: %s (%s), want succeeded (%s)", key, got, reason, wantReason)
		}
	}
}

// Tasks run again for shuffle output lost with an executor: every attempt
// of a stage whose previous attempt had completed, less its own failed
// tasks' run time; never a re-attempt of a stage that failed, nor one
// whose previous attempt is not held.
func TestRecomputeRunMs(t *testing.T) {
	stage := func(id, attempt int, status string, runMs int64, failed ...int64) Stage {
		s := Stage{Stage: stageAt(id, attempt, status, 10, 20)}
		s.ExecutorRunTime = runMs
		for _, ms := range failed {
			s.NumFailedTasks++
			if ms >= 0 {
				s.FailedTasks = append(s.FailedTasks, sparkapi.TaskData{Status: "FAILED", TaskMetrics: &sparkapi.TaskMetrics{ExecutorRunTime: ms}})
			}
		}
		s.DetailsRead = true
		return s
	}
	for _, tc := range []struct {
		name   string
		stages []Stage
		want   int64
	}{
		// Must fire.
		{"resubmitted after it completed", []Stage{stage(3, 0, "COMPLETE", 10_000), stage(3, 1, "COMPLETE", 4_000)}, 4_000},
		{"a later job's stage, skipped, then run again", []Stage{stage(0, 0, "COMPLETE", 7_000), stage(2, 0, "SKIPPED", 0), stage(2, 1, "COMPLETE", 3_500)}, 3_500},
		{"twice", []Stage{stage(8, 0, "COMPLETE", 9_000), stage(8, 1, "COMPLETE", 3_000), stage(8, 2, "COMPLETE", 2_000)}, 5_000},
		{"its own failed task read", []Stage{stage(6, 0, "COMPLETE", 10_000), stage(6, 1, "COMPLETE", 3_000, 500)}, 2_500},
		// Must not fire.
		{"one attempt", []Stage{stage(3, 0, "COMPLETE", 10_000)}, 0},
		{"re-attempt of a failed stage", []Stage{stage(4, 0, "FAILED", 2_000, -1), stage(4, 1, "COMPLETE", 6_000)}, 0},
		{"previous attempt not held", []Stage{stage(5, 1, "COMPLETE", 6_000)}, 0},
		{"its failed tasks not all read", []Stage{stage(7, 0, "COMPLETE", 10_000), stage(7, 1, "COMPLETE", 3_000, 500, -1)}, 0},
	} {
		if got := RecomputeRunMs(tc.stages); got != tc.want {
			t.Errorf("%s: %d ms, want %d", tc.name, got, tc.want)
		}
	}
}

// The failed and killed tasks read give the lost time when every one of
// them was read, and only then.
func TestFailedTaskRunMs(t *testing.T) {
	task := func(status string, ms int64) sparkapi.TaskData {
		d := sparkapi.TaskData{Status: status}
		if ms >= 0 {
			d.TaskMetrics = &sparkapi.TaskMetrics{ExecutorRunTime: ms}
		}
		return d
	}
	stage := func(failed, killed []sparkapi.TaskData, numFailed, numKilled int) Stage {
		s := Stage{Stage: stageAt(1, 0, "COMPLETE", 10, 20), DetailsRead: true, FailedTasks: failed, KilledTasks: killed}
		s.NumFailedTasks, s.NumKilledTasks = numFailed, numKilled
		return s
	}
	both := []sparkapi.TaskData{task("FAILED", 100), task("FAILED", -1)} // the second lost with its executor: no metrics
	killed := []sparkapi.TaskData{task("KILLED", 300)}
	for _, tc := range []struct {
		name  string
		stage Stage
		want  int64 // < 0: nil
	}{
		{"failed and killed, all read", stage(both, killed, 2, 1), 400},
		{"killed alone", stage(nil, killed, 0, 1), 300},
		{"a killed task not read", stage(both, nil, 2, 1), -1},
		{"a failed task not read", stage(both[:1], killed, 2, 1), -1},
	} {
		totals := StageTotals{Failed: tc.stage.NumFailedTasks, Killed: tc.stage.NumKilledTasks}
		got := FailedTaskRunMs([]Stage{tc.stage}, &totals)
		switch {
		case tc.want < 0 && got != nil:
			t.Errorf("%s: %d ms, want none", tc.name, *got)
		case tc.want >= 0 && (got == nil || *got != tc.want):
			t.Errorf("%s: %v, want %d ms", tc.name, got, tc.want)
		}
	}
}
