package annotate

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sparkpulse/sparkpulse/sizing"
	"github.com/sparkpulse/sparkpulse/sparkapi"
	"github.com/sparkpulse/sparkpulse/sparkui"
)

// stageAt is a stage attempt run from sub to done seconds after t0 (done
// < 0: still running).
func stageAt(id, attempt int, status string, sub, done float64) sparkapi.Stage {
	s := sparkapi.Stage{StageID: id, AttemptID: attempt, Status: status, SubmissionTime: sparkapi.OptDate(at(sub))}
	if done >= 0 {
		s.CompletionTime = sparkapi.OptDate(at(done))
	}
	return s
}

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
	(*stageTotals)(nil).figures(&u, start, start+100_000)
	if u.DriverOnlyMs != nil || len(u.Notes) != 1 {
		t.Errorf("no stage list: %v, %q", u.DriverOnlyMs, u.Notes)
	}
}

// Lost task time: Spark's stage totals (every task with metrics) less the
// stream's (successful tasks only), when the stream holds every
// successful task; 0 without failed or killed tasks; else unknown.
func TestLostTasks(t *testing.T) {
	whole := stageTotals{ids: map[int]bool{0: true}, runMs: 612_000}
	run := func(spark, stream float64) []ReconciledMetric {
		return []ReconciledMetric{{"tasks", 150, 150}, {"run_time_ms", stream, spark}}
	}
	listed := int64(7_500)
	for _, tc := range []struct {
		name           string
		failed, killed int
		dropped        bool
		fromTasks      *int64
		rec            *Reconciliation
		want           float64 // < 0: absent
		note           string
	}{
		// Every failed task read from taskList: their 7.5 s, whatever the
		// stream (here short: a killed executor's last report is missing).
		{"failed tasks read", 3, 0, false, &listed, &Reconciliation{Verdict: ReconcileShort, Metrics: run(612_000, 500_000)}, 7.5, ""},
		// 612 s in Spark's stages, 600 s in the executors' counters: the 3
		// failed and 1 killed tasks ran 12 s.
		{"failed tasks", 3, 1, false, nil, &Reconciliation{Verdict: ReconcileFailedTasks, Metrics: run(612_000, 600_000)}, 12, ""},
		// Every task succeeded: nothing lost, stream or not.
		{"no failed task, no stream", 0, 0, false, nil, nil, 0, ""},
		{"no failed task, a short stream", 0, 0, false, nil, &Reconciliation{Verdict: ReconcileShort}, 0, ""},
		// Failed tasks without metrics (fetch failures, lost executors):
		// the totals agree, and nothing measurable was lost.
		{"failed tasks without metrics", 2, 0, false, nil, &Reconciliation{Verdict: ReconcileExact, Metrics: run(600_000, 600_000)}, 0, ""},
		// Must not: a difference that a missing report would make.
		{"short stream", 3, 0, false, nil, &Reconciliation{Verdict: ReconcileShort, Metrics: run(612_000, 500_000)}, -1, "do not match Spark's (short)"},
		{"no stream", 3, 0, false, nil, nil, -1, "no metrics stream"},
		{"stages dropped", 0, 0, true, &listed, nil, -1, "spark.ui.retainedStages"},
	} {
		st := whole
		st.failed, st.killed = tc.failed, tc.killed
		if tc.dropped {
			st.ids, st.maxID = map[int]bool{1: true}, 1
		}
		var u sizing.Usage
		lostTasks(&u, &st, tc.fromTasks, tc.rec)
		switch {
		case tc.want < 0 && u.LostTaskSeconds != nil:
			t.Errorf("%s: %v s lost, want absent", tc.name, *u.LostTaskSeconds)
		case tc.want >= 0 && (u.LostTaskSeconds == nil || *u.LostTaskSeconds != tc.want):
			t.Errorf("%s: %v, want %v s", tc.name, u.LostTaskSeconds, tc.want)
		case tc.note != "" && !strings.Contains(strings.Join(u.Notes, ";"), tc.note):
			t.Errorf("%s: notes %q, want %q", tc.name, u.Notes, tc.note)
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

// figuresRow formats the figures of a spark_app_usage point.
func figuresRow(p point) string {
	f := p.fields
	occ := fmt.Sprint(f["slot_occupancy"])
	if v, ok := f["slot_occupancy"].(float64); ok {
		occ = fmt.Sprintf("%.4f", v)
	}
	return fmt.Sprintf("%d %v occupancy=%s driver_only=%v failed_attempts=%v lost=%v outcome=%v reason=%q",
		p.ns, f["fact"], occ, f["driver_only_ms"], f["failed_stage_attempts"], f["lost_task_seconds"], f["outcome"], f["outcome_reason"])
}

// The figures in spark_app_usage at the end, worked by hand on
// accountedApp: executors held 3600 core-seconds and ran tasks 560 s
// (the stream's run time): 15.56 % occupancy; stage 0 ran 1–590 s of the
// 600 s: 11 s with no stage; no task failed: nothing lost, though the
// stream is short; job 0, the last, succeeded.
func TestUsageFiguresAtTheEnd(t *testing.T) {
	sink := accountWith(t, accountedApp(), accountedStream())
	equalLines(t, "usage", sink.stored(MeasurementUsage, figuresRow), []string{
		fmt.Sprintf(`%d end occupancy=0.1556 driver_only=11000 failed_attempts=0 lost=0 outcome=succeeded reason="its last job, 0, succeeded"`, ms(at(600))*1_000_000),
	})

	// With 3 failed tasks: Spark's stage list counts 612 s of run time,
	// the executors' counters (now whole) the successful tasks' 600 s:
	// 12 s lost (the failed tasks are not in the History Server's task
	// lists: the stream tells). Stage 0's first attempt failed 1–100 s
	// and its second ran 110–590 s: 0–1, 100–110 and 590–600, 21 s with
	// no stage.
	m := accountedApp()
	a := m.Apps[0].Attempts[0]
	s0 := a.Stage(0, 0)
	s0.Status, s0.Completed, s0.FailedTasks, s0.RunTimeMs, s0.CPUTimeNs, s0.Tasks, s0.CompleteTasks = sparkui.StageFailed, at(100), 3, 12_000, 5e9, 150, 0
	s0.FailureReason = "FetchFailed(BlockManagerId(2, node-2, 7337, None), shuffleId=0, mapIndex=3)"
	a.AddStage(&sparkui.Stage{ID: 0, Attempt: 1, Name: "save", Status: sparkui.StageComplete, Submitted: at(110), Completed: at(590), Tasks: 150, CompleteTasks: 150,
		CPUTimeNs: 450e9, RunTimeMs: 600_000})
	stream := accountedStream()
	stream["2"] = ProcessTotals{Sums: map[string]float64{"succeededTasks.count": 50, "cpuTime.count": 150e9, "runTime.count": 200_000, "jvmGCTime.count": 10_000,
		"bytesRead.count": 512 << 20, "shuffleBytesWritten.count": 50 << 20}}
	sink = accountWith(t, m, stream)
	equalLines(t, "usage with failures", sink.stored(MeasurementUsage, figuresRow), []string{
		fmt.Sprintf(`%d end occupancy=0.1667 driver_only=21000 failed_attempts=1 lost=12 outcome=succeeded reason="its last job, 0, succeeded"`, ms(at(600))*1_000_000),
	})
	if rec := sink.stored(MeasurementReconcile, func(p point) string { return fmt.Sprint(p.fields["verdict"]) }); len(rec) != 1 || rec[0] != ReconcileFailedTasks {
		t.Errorf("reconciliation %v, want failed_tasks", rec)
	}

	// Must not: driver-only time or lost time from a stage list Spark
	// dropped stages from (stage 0 gone, stage 1 listed).
	m = accountedApp()
	a = m.Apps[0].Attempts[0]
	a.Stage(0, 0).ID = 1
	sink = accountWith(t, m, accountedStream())
	u := sink.latestOf(MeasurementUsage)
	if u == nil {
		t.Fatal("no usage")
	}
	for _, f := range []string{"driver_only_ms", "failed_stage_attempts", "lost_task_seconds"} {
		if v, ok := u.fields[f]; ok {
			t.Errorf("stages dropped: %s = %v", f, v)
		}
	}
	if notes := fmt.Sprint(u.fields["notes"]); !strings.Contains(notes, "driver-only time and failed stage attempts unknown: 1 of the 2 stages") {
		t.Errorf("notes %q", notes)
	}
}

// accountWith polls a History Server showing m until its accounting is
// written, the stream answering stream.
func accountWith(t *testing.T, m *sparkui.Model, stream map[string]ProcessTotals) *memSink {
	t.Helper()
	srv := sparkui.NewServer(sparkui.HistoryServer, m)
	clk := &clock{now: at(661)}
	srv.SetNow(clk.Now)
	sink := newMemSink()
	p := newPoller(t, Config{Sources: []string{serve(t, srv)}, Sink: sink, Now: clk.Now, Stream: &fakeStream{totals: stream}})
	p.PollOnce(context.Background())
	return sink
}

// While an application runs, every usageEstimateEvery-th sync writes the
// figures so far: the running stage counts up to the read.
func TestUsageFiguresEstimate(t *testing.T) {
	m := liveApp(scriptApp, "Nightly ETL", t0)
	a := m.Apps[0].Attempts[0]
	a.Properties = map[string]string{"spark.executor.memory": "4g", "spark.executor.cores": "4"}
	a.Executors = []*sparkui.Executor{{ID: "driver", HostPort: "10.0.0.1:40000", Added: at(0)}, {ID: "1", HostPort: "node-1:40001", Cores: 4, Added: at(0)}}
	a.AddJob(&sparkui.Job{ID: 0, Name: "save", Submitted: at(5), StageIDs: []int{0}, Status: sparkui.JobRunning, Tasks: 8})
	a.AddStage(&sparkui.Stage{ID: 0, Name: "save", Status: sparkui.StageActive, Submitted: at(100), Tasks: 8, ActiveTasks: 4})
	srv := sparkui.NewServer(sparkui.LiveUI, m)
	clk := &clock{now: at(10)}
	srv.SetNow(clk.Now)
	stream := &fakeStream{dated: []datedTotals{{at(100), map[string]ProcessTotals{"1": {Sums: map[string]float64{"cpuTime.count": 100e9, "runTime.count": 290_000}}}}}}
	sink := newMemSink()
	p := newPoller(t, Config{Sources: []string{serve(t, srv)}, Sink: sink, Now: clk.Now, Stream: stream})
	for i := range usageEstimateEvery - 1 {
		clk.Set(at(10 * float64(i+1)))
		p.PollOnce(context.Background())
	}
	// Read at the first sync and the 29th, 290 s (syncs%usageEstimateEvery ==
	// usageEstimateEvery-1): executor 1 held 4 cores × 290 s = 1160
	// core-seconds, its tasks ran 290 s: 25 %. Stage 0 has run since
	// 100 s: 100 s with no stage.
	// The first sync's estimate, at 10 s: no report yet, no stage yet;
	// 4 cores held at both.
	equalLines(t, "estimate", sink.stored(MeasurementUsage, func(p point) string { return figuresRow(p) + fmt.Sprintf(" held=%v", p.fields["cores_held"]) }), []string{
		fmt.Sprintf(`%d estimate occupancy=<nil> driver_only=10000 failed_attempts=0 lost=<nil> outcome=running reason="the attempt has not completed" held=4`, ms(at(10))*1_000_000+1),
		fmt.Sprintf(`%d estimate occupancy=0.2500 driver_only=100000 failed_attempts=0 lost=<nil> outcome=running reason="the attempt has not completed" held=4`, ms(at(290))*1_000_000+1),
	})
}

// An application lost while it ran, with no History Server to show its
// end, is closed out with what it held until it was last seen, and the
// outcome driver_lost.
func TestUsageDriverLost(t *testing.T) {
	s := newScript(sparkui.LiveUI)
	s.srv.Update(func(m *sparkui.Model) {
		a := m.Apps[0].Attempts[0]
		a.Properties = map[string]string{"spark.executor.memory": "4g", "spark.executor.cores": "4"}
		a.Executors = []*sparkui.Executor{{ID: "driver", HostPort: "10.0.0.1:40000", Added: at(0)}, {ID: "1", HostPort: "node-1:40001", Cores: 4, Added: at(0)}}
	})
	sink := newMemSink()
	p := newPoller(t, Config{Sources: []string{serve(t, s.srv)}, Sink: sink, Now: s.clk.Now})
	p.PollOnce(context.Background())
	loseSource(p, s)
	// Last seen at 30 s: stage 0 had run since 5 s (up to the read), so
	// 5 s with no stage; no task counters without the stream.
	u := sink.latestOf(MeasurementUsage)
	if u == nil {
		t.Fatal("no usage for the lost application")
	}
	if got := figuresRow(*u); !strings.HasPrefix(got, fmt.Sprintf("%d lost occupancy=<nil> driver_only=5000 failed_attempts=0 lost=<nil> outcome=driver_lost reason=\"no source has shown it since ", ms(at(30))*1_000_000+2)) {
		t.Errorf("usage %s", got)
	}
	if got := u.fields["executor_core_seconds"]; got != 120.0 {
		t.Errorf("core-seconds %v, want 4 × 30 s", got)
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
	apps := realSparkJSON[sparkapi.Application](t, "*/application.json", 4)
	for f, stages := range realSparkJSON[[]sparkapi.Stage](t, "*/stages.json", 4) {
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
		readJSONFile(t, filepath.Join(dir, "jobs.json"), &jobs)
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

// What a stage's executorRunTime holds, on real Spark: the failed stage
// attempts whose every task failed (stage 5.0 of the failures runs, out
// of heap) count exactly the run time of their failed tasks as taskList
// gives it — failed tasks' run time is in Spark's totals — and a task
// whose executor was lost carries no metrics. The lost task time of the
// failures runs is the run time of the failed tasks Spark lists with
// metrics (none was killed):
//
//	3.5.9: 1 721 + 143 (the UDF's ValueError) + 886 + 5 711 (heap) = 8 461 ms
//	4.3.0: 2 930 + 244 + 184 + 1 656 = 5 014 ms
//
// The recorded stream could not tell it: the executor killed with
// SIGKILL never sent its last report, and the reconciliation is short.
func TestLostTasksOfRealSpark(t *testing.T) {
	wantLost := map[string]float64{"3.5.9": 8.461, "4.3.0": 5.014}
	for f, failed := range realSparkJSON[map[string][]sparkapi.TaskData](t, "failures/failed-tasks.json", 2) {
		dir := filepath.Dir(f)
		version := filepath.Base(filepath.Dir(dir))
		var stages []sparkapi.Stage
		readJSONFile(t, filepath.Join(dir, "stages.json"), &stages)
		st := &appState{stages: map[stageKey]*stageItem{}}
		var totals stageTotals
		for i, s := range stages {
			totals.add(&stages[i])
			it := &stageItem{Stage: s}
			if tasks, ok := failed[fmt.Sprintf("%d.%d", s.StageID, s.AttemptID)]; ok {
				it.details = &stageDetails{why: detailsRead, failed: tasks}
			}
			st.stages[stageKey{s.StageID, s.AttemptID}] = it
			var withMetrics int64
			for _, task := range it.failedTasks() {
				if task.TaskMetrics == nil {
					if !strings.HasPrefix(task.ErrorMessage, "ExecutorLostFailure") {
						t.Errorf("%s: stage %d: a failed task without metrics: %.60q", version, s.StageID, task.ErrorMessage)
					}
					continue
				}
				withMetrics += task.TaskMetrics.ExecutorRunTime
			}
			if s.Status == "FAILED" && s.NumCompleteTasks == 0 && s.ExecutorRunTime != withMetrics {
				t.Errorf("%s: stage %d.%d: run time %d, its failed tasks' %d", version, s.StageID, s.AttemptID, s.ExecutorRunTime, withMetrics)
			}
		}

		streams, _ := realStream(t, filepath.Dir(dir), filepath.Join(filepath.Dir(dir), "graphite.txt.gz"))
		var app struct {
			MetricsKey string `json:"metrics_key"`
		}
		readJSONFile(t, filepath.Join(dir, "app.json"), &app)
		var execs []sparkapi.Executor
		readJSONFile(t, filepath.Join(dir, "allexecutors.json"), &execs)
		rec := reconcile(execs, totals, streams[app.MetricsKey], nil)
		if rec.Verdict != ReconcileShort {
			t.Errorf("%s: the stream's verdict %s (%s), want short", version, rec.Verdict, rec.Text)
		}
		var u sizing.Usage
		lostTasks(&u, &totals, failedTaskRunMs(st, &totals), &rec)
		if u.LostTaskSeconds == nil || *u.LostTaskSeconds != wantLost[version] {
			t.Errorf("%s: lost %v s, want %v s (notes %q)", version, u.LostTaskSeconds, wantLost[version], u.Notes)
		}
		// Must not: a figure from the task lists when one is incomplete.
		for _, it := range st.stages {
			if it.details != nil {
				it.details.failed = it.details.failed[1:]
				break
			}
		}
		if got := failedTaskRunMs(st, &totals); got != nil {
			t.Errorf("%s: a failed task not read, and %d ms from the lists", version, *got)
		}
	}
}

// failedTasks is what was read of a stage attempt's failed tasks.
func (s *stageItem) failedTasks() []sparkapi.TaskData {
	if s.details == nil {
		return nil
	}
	return s.details.failed
}
