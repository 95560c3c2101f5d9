package annotate

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sparkpulse/sparkpulse/accounting"
	"github.com/sparkpulse/sparkpulse/attempt"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/sparkui"
)

// Stage details from Spark's own event logs, served as Spark computes them
// (sparkui matches HistoryServerSuite's taskSummary and taskList
// expectations), land in a real InfluxDB: the values below are Spark's.
func TestStageDetailsRealInfluxDB(t *testing.T) {
	shs := sparkui.NewServer(sparkui.HistoryServer, replayFixtures(t))
	srv := influxtest.Start(t)
	w := writerTo(t, srv, "ann")
	p := newPoller(t, Config{Sources: []string{serve(t, shs)}, Sink: w, Lookback: 20 * 365 * 24 * 3600e9,
		StageDetailsMinDuration: -1, StageDetailsRequests: 10_000})
	p.PollOnce(context.Background())
	closeWriter(t, w)

	one := func(q string) map[string]any {
		t.Helper()
		res := srv.Query(t, "ann", q)
		if len(res) != 1 || len(res[0].Values) != 1 {
			t.Fatalf("%s: %+v", q, res)
		}
		out := map[string]any{}
		for i, c := range res[0].Columns {
			out[c] = res[0].Values[0][i]
		}
		return out
	}
	// stage 0.0 of local-1430917381534: run time p50 28 and p95 349 ms
	// (stage_task_summary_w_shuffle_write), largest 351 ms
	// (…_w__custom_quantiles, p99 of 20 tasks), task 6 the slowest
	// (stage_task_list_w__sortBy_short_names___runtime).
	got := one(`SELECT "task_run_time_ms_p50", "task_run_time_ms_p95", "task_run_time_ms_max", "task_skew", "task_input_bytes_p50", "task_input_bytes_max",
		"straggler_task_index", "straggler_executor", "straggler_host", "straggler_run_time_ms", "straggler_speculative", "task_details"
		FROM "spark_stage" WHERE "applicationid" = 'local-1430917381534' AND "stage_id" = 0 AND "fact" = 'end'`)
	want := map[string]string{"task_run_time_ms_p50": "28", "task_run_time_ms_p95": "349", "task_run_time_ms_max": "351",
		"task_skew": fmt.Sprint(351.0 / 28), "task_input_bytes_p50": "70564", "task_input_bytes_max": "70565",
		"straggler_task_index": "6", "straggler_executor": "driver", "straggler_host": "localhost", "straggler_run_time_ms": "351",
		"straggler_speculative": "false", "task_details": "read"}
	for k, v := range want {
		if fmt.Sprint(got[k]) != v {
			t.Errorf("stage 0.0 %s = %v, want %s", k, got[k], v)
		}
	}
	// stage 1.0 read the shuffle: 17100 bytes per task
	// (stage_task_summary_w_shuffle_read).
	if got := one(`SELECT "task_shuffle_read_bytes_p50" FROM "spark_stage" WHERE "applicationid" = 'local-1430917381534' AND "stage_id" = 1 AND "fact" = 'end'`); fmt.Sprint(got["task_shuffle_read_bytes_p50"]) != "17100" {
		t.Errorf("stage 1.0 shuffle read p50: %v", got)
	}

	// The failed task of local-1422981780767 (Spark's failed stage list:
	// stage 2, "got a 3, failing").
	res := srv.Query(t, "ann", `SELECT "stage_id", "task_index", "executor_id", "error_class", "kind", "error", "title" FROM "spark_task_failure" WHERE "applicationid" = 'local-1422981780767'`)
	if len(res) != 1 || len(res[0].Values) == 0 {
		t.Fatalf("no failed task of local-1422981780767: %+v", res)
	}
	for _, v := range res[0].Values {
		if fmt.Sprint(v[1]) != "2" || v[4] != "java.lang.RuntimeException" || v[5] != attempt.TaskException || v[6] != "java.lang.RuntimeException: got a 3, failing" {
			t.Errorf("failed task %v", v)
		}
	}
	if st := p.Stats(); st.StageDetails[attempt.DetailsRead] < 40 {
		t.Errorf("stage details %v", st.StageDetails)
	}
}

// With the defaults, what stage details cost on Spark's fixtures: the
// requests per ended stage, measured.
func TestStageDetailsCost(t *testing.T) {
	shs := sparkui.NewServer(sparkui.HistoryServer, replayFixtures(t))
	p := newPoller(t, Config{Sources: []string{serve(t, shs)}, Sink: newMemSink(), Lookback: 20 * 365 * 24 * 3600e9})
	p.PollOnce(context.Background())
	detail := 0
	for _, r := range shs.Requests() {
		if strings.Contains(r, "/taskSummary?") || strings.Contains(r, "/taskList?") {
			detail++
		}
	}
	st := p.Stats().StageDetails
	ended := st[attempt.DetailsRead] + st[attempt.DetailsShort] + st[attempt.DetailsBudget]
	if ended == 0 || st[attempt.DetailsBudget] != 0 {
		t.Fatalf("stage details %v", st)
	}
	perStage := float64(detail) / float64(ended)
	t.Logf("defaults: %d detail requests for %d ended stage attempts (%.2f each): %d read, %d short", detail, ended, perStage, st[attempt.DetailsRead], st[attempt.DetailsShort])
	if perStage > 3 {
		t.Errorf("%.2f requests per ended stage", perStage)
	}
}

// A stage running a minute or more is followed once every progressEvery
// syncs: its finished tasks' distribution and its longest running task,
// as a spark_stage_progress point at the time of the read.
func TestRunningStageProgress(t *testing.T) {
	m := liveApp(scriptApp, "Nightly ETL", t0)
	clk := &clock{now: at(20)}
	srv := sparkui.NewServer(sparkui.LiveUI, m)
	srv.SetNow(clk.Now)
	srv.Update(func(m *sparkui.Model) {
		a := m.Apps[0].Attempts[0]
		a.AddJob(&sparkui.Job{ID: 0, Name: "save at etl.py:40", Submitted: at(5), StageIDs: []int{0}, Status: sparkui.JobRunning, Tasks: 10, ActiveTasks: 2})
		st := &sparkui.Stage{ID: 0, Name: "save at etl.py:40", Status: sparkui.StageActive, Submitted: at(5), Tasks: 10, CompleteTasks: 4, ActiveTasks: 2}
		for i, run := range []float64{40, 10, 30, 20} {
			st.TaskList = append(st.TaskList, &sparkui.Task{ID: int64(i), Index: i, Launched: at(5), Finished: at(5 + run),
				Executor: "1", Host: "node-1", Status: sparkui.TaskSuccess, HasMetrics: true, RunTimeMs: int64(run * 1000)})
		}
		// Task 4, launched at 10 s, has run longest; task 5 at 50 s.
		st.TaskList = append(st.TaskList,
			&sparkui.Task{ID: 4, Index: 4, Launched: at(10), Executor: "2", Host: "node-2", Status: sparkui.TaskRunning},
			&sparkui.Task{ID: 5, Index: 5, Launched: at(50), Executor: "3", Host: "node-3", Status: sparkui.TaskRunning})
		a.AddStage(st)
	})
	sink := newMemSink()
	p := newPoller(t, Config{Sources: []string{serve(t, srv)}, Sink: sink, Now: clk.Now})
	ctx := context.Background()
	progressReads := func() (n int) {
		for _, r := range srv.Requests() {
			if strings.Contains(r, "/stages/0/0/task") {
				n++
			}
		}
		return n
	}
	row := func(p point) string {
		f := p.fields
		return fmt.Sprintf("%d %v.%v running=%v tasks=%v/%v p50=%v p95=%v max=%v skew=%.3f straggler=%v@%v/%v running=%v vs=%.3f %q: %q",
			p.ns, f["stage_id"], f["stage_attempt"], f["running_ms"], f["num_complete_tasks"], f["num_tasks"],
			f["task_run_time_ms_p50"], f["task_run_time_ms_p95"], f["task_run_time_ms_max"], f["task_skew"],
			f["straggler_task_index"], f["straggler_executor"], f["straggler_host"], f["straggler_running_ms"], f["straggler_vs_median"],
			f["title"], f["text"])
	}

	// Syncs 0 to 5, at 20 s to 70 s: the first is too early (15 s), the
	// others are not the sixth.
	for s := 20.0; s <= 70; s += 10 {
		clk.Set(at(s))
		p.PollOnce(ctx)
		if n := progressReads(); n != 0 {
			t.Fatalf("at %v s: %d task requests, want 0", s, n)
		}
	}
	// Sync 6, at 80 s: the stage has run 75 s. Run times 10, 20, 30, 40 s:
	// p50 is the sorted value at ⌊0.5 × 4⌋ = 2 (30 s), p95 at ⌊3.8⌋ = 3
	// (40 s); task 4 has run 70 s, 70/30 of the median.
	clk.Set(at(80))
	p.PollOnce(ctx)
	if n := progressReads(); n != 2 {
		t.Errorf("sync 6: %d task requests, want 2 (taskSummary, taskList of running tasks)", n)
	}
	want := []string{fmt.Sprintf(`%d 0.0 running=75000 tasks=4/10 p50=30000 p95=40000 max=40000 skew=1.333 straggler=4@2/node-2 running=70000 vs=2.333 "Stage 0.0 running for 1m15s": "4 of 10 tasks done · task 4 running 1m10s on node-2"`,
		factTime(ms(at(80)), 0, phaseStart))}
	equalLines(t, "progress", sink.stored(schema.MeasurementStageProgress, row), want)

	// Five more syncs read nothing; the twelfth reads again.
	for s := 90.0; s <= 140; s += 10 {
		clk.Set(at(s))
		p.PollOnce(ctx)
	}
	if n := progressReads(); n != 2 {
		t.Errorf("syncs 7 to 12: %d task requests, want 2", n)
	}
	if got := sink.stored(schema.MeasurementStageProgress, row); len(got) != 2 || !strings.Contains(got[1], "running=135000") {
		t.Errorf("after sync 12: %q, want a second point at 135 s", got)
	}
}

// A stage attempt's killed tasks (here a speculative copy that lost) are
// read with its failed ones, in one request: the failed one is written as
// a task failure, the killed one is not, and both give the accounting
// their run time. A task killed as its stage finished may end after the
// stage's details were read: Spark's counts growing has the list read
// again, once.
func TestKilledTasksRead(t *testing.T) {
	m := liveApp(scriptApp, "Nightly ETL", t0)
	clk := &clock{now: at(40)}
	srv := sparkui.NewServer(sparkui.LiveUI, m)
	srv.SetNow(clk.Now)
	killed := &sparkui.Task{ID: 4, Index: 1, Attempt: 1, Launched: at(9), Finished: at(31), Executor: "3", Host: "node-3", Status: sparkui.TaskKilled,
		Speculative: true, Error: "TaskKilled (Stage finished)", HasMetrics: true, RunTimeMs: 300}
	srv.Update(func(m *sparkui.Model) {
		a := m.Apps[0].Attempts[0]
		a.AddJob(&sparkui.Job{ID: 0, Name: "save at etl.py:40", Submitted: at(5), Completed: at(30), StageIDs: []int{0}, Status: sparkui.JobSucceeded, Tasks: 3, CompletedTasks: 3})
		st := &sparkui.Stage{ID: 0, Name: "save at etl.py:40", Status: sparkui.StageComplete, Submitted: at(5), Completed: at(30),
			Tasks: 3, CompleteTasks: 3, FailedTasks: 1}
		for i := range 3 {
			st.TaskList = append(st.TaskList, &sparkui.Task{ID: int64(i), Index: i, Launched: at(5), Finished: at(10),
				Executor: "1", Host: "node-1", Status: sparkui.TaskSuccess, HasMetrics: true, RunTimeMs: 5000})
		}
		st.TaskList = append(st.TaskList,
			&sparkui.Task{ID: 3, Index: 0, Attempt: 1, Launched: at(10), Finished: at(12), Executor: "2", Host: "node-2", Status: sparkui.TaskFailed,
				Error: "java.lang.RuntimeException: boom", HasMetrics: true, RunTimeMs: 1700})
		a.AddStage(st)
	})
	sink := newMemSink()
	p := newPoller(t, Config{Sources: []string{serve(t, srv)}, Sink: sink, Now: clk.Now})
	lists := func() (n int) {
		for _, r := range srv.Requests() {
			if strings.Contains(r, "taskList?status=failed&status=killed") {
				n++
			}
		}
		return n
	}
	var st *appState
	lost := func() *int64 {
		if st == nil { // kept: the source forgets it once it ends
			st = p.owners[attempt.Key{App: scriptApp, Start: ms(t0)}].apps[attempt.Key{App: scriptApp, Start: ms(t0)}]
		}
		stages := st.Accounting(false).Stages
		totals := accounting.StageTotals{Failed: stages[0].NumFailedTasks, Killed: stages[0].NumKilledTasks}
		return accounting.FailedTaskRunMs(stages, &totals)
	}
	p.PollOnce(context.Background())
	if n, got := lists(), lost(); n != 1 || got == nil || *got != 1700 {
		t.Fatalf("first poll: %d lists of failed tasks, lost %v; want 1 and 1700 ms", n, got)
	}
	// The killed task ends after the stage, and the application ends: the
	// read in full after its end finds Spark counting it, and the list is
	// read again.
	srv.Update(func(m *sparkui.Model) {
		a := m.Apps[0].Attempts[0]
		st := a.Stage(0, 0)
		st.KilledTasks++
		st.TaskList = append(st.TaskList, killed)
		a.End = at(45)
	})
	for _, sec := range []float64{50, 60} {
		clk.Set(at(sec))
		p.PollOnce(context.Background())
	}
	if n, got := lists(), lost(); n != 1 || got == nil || *got != 2000 {
		t.Errorf("after the kill: %d lists read again, lost %v; want 1 and 2000 ms", n, got)
	}
	row := func(p point) string { return fmt.Sprintf("%v %v", p.fields["task_index"], p.fields["kind"]) }
	equalLines(t, "task failures", sink.stored(schema.MeasurementTaskFailure, row), []string{"0 exception"})
}
