package annotate

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sparkpulse/sparkpulse/accounting"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
	"github.com/sparkpulse/sparkpulse/realspark/recorded"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/sparkapi"
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
		if fmt.Sprint(v[1]) != "2" || v[4] != "java.lang.RuntimeException" || v[5] != TaskException || v[6] != "java.lang.RuntimeException: got a 3, failing" {
			t.Errorf("failed task %v", v)
		}
	}
	if st := p.Stats(); st.StageDetails[detailsRead] < 40 {
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
	ended := st[detailsRead] + st[detailsShort] + st[detailsBudget]
	if ended == 0 || st[detailsBudget] != 0 {
		t.Fatalf("stage details %v", st)
	}
	perStage := float64(detail) / float64(ended)
	t.Logf("defaults: %d detail requests for %d ended stage attempts (%.2f each): %d read, %d short", detail, ended, perStage, st[detailsRead], st[detailsShort])
	if perStage > 3 {
		t.Errorf("%.2f requests per ended stage", perStage)
	}
}

// The error message of a failed task names its class and kind.
func TestTaskErrorClass(t *testing.T) {
	for _, tc := range []struct{ msg, status, class, kind string }{
		{"java.lang.OutOfMemoryError: Java heap space\n\tat java.util.Arrays.copyOf(Arrays.java:3236)", "FAILED", "java.lang.OutOfMemoryError", TaskOOM},
		{"java.lang.RuntimeException: got a 3, failing\n\tat $line11.$read", "FAILED", "java.lang.RuntimeException", TaskException},
		{"ExecutorLostFailure (executor 7 exited caused by one of the running tasks) Reason: Container killed by YARN for exceeding physical memory limits.", "FAILED", "ExecutorLostFailure", TaskExecutorLost},
		{"FetchFailed(BlockManagerId(3, node-3, 7337, None), shuffleId=0, mapIndex=4, mapId=12, reduceId=9, message=\norg.apache.spark.shuffle.FetchFailedException: Failed to connect", "FAILED", "FetchFailed", TaskFetchFailed},
		{"org.apache.spark.shuffle.FetchFailedException: Too large frame", "FAILED", "org.apache.spark.shuffle.FetchFailedException", TaskFetchFailed},
		{"TaskKilled (another attempt succeeded)", "KILLED", "TaskKilled", TaskKilled},
		{"org.apache.spark.SparkException: Task failed while writing rows.\nCaused by: java.lang.OutOfMemoryError: GC overhead limit exceeded", "FAILED", "org.apache.spark.SparkException caused by java.lang.OutOfMemoryError", TaskOOM},
		// A wrapper's root cause tells a full disk from a throttled store.
		{"org.apache.spark.SparkException: [TASK_WRITE_FAILED] Task failed while writing rows to s3a://bucket/out. SQLSTATE: 58030\n\tat org.apache.spark.sql.errors.QueryExecutionErrors$.taskFailedWhileWritingRowsError(QueryExecutionErrors.scala:775)\nCaused by: org.apache.hadoop.fs.s3a.AWSServiceThrottledException: put on out/part-0: Slow Down\n\tat org.apache.hadoop.fs.s3a.S3AUtils.translateException(S3AUtils.java:241)\nCaused by: software.amazon.awssdk.services.s3.model.S3Exception: Slow Down (Status Code: 503)\n\tat software.amazon.awssdk", "FAILED",
			"org.apache.spark.SparkException [TASK_WRITE_FAILED] caused by software.amazon.awssdk.services.s3.model.S3Exception", TaskException},
		{"org.apache.spark.SparkException: [TASK_WRITE_FAILED] Task failed while writing rows to file:/data/out. SQLSTATE: 58030\nCaused by: java.io.IOException: No space left on device\n\tat java.base/java.io.FileOutputStream.writeBytes(Native Method)", "FAILED",
			"org.apache.spark.SparkException [TASK_WRITE_FAILED] caused by java.io.IOException", TaskException},
		// Not a wrapper: its own class stays the class.
		{"java.lang.IllegalStateException: bad state\nCaused by: java.io.IOException: closed", "FAILED", "java.lang.IllegalStateException", TaskException},
		// Spark 3.4+ error conditions name the error; execution memory
		// that cannot be acquired is not the heap.
		{"org.apache.spark.SparkException: [FAILED_EXECUTE_UDF] User defined function (`f (UDFRegistration$$Lambda$1)`: (int) => int) failed due to: java.lang.ArithmeticException: / by zero. SQLSTATE: 39000", "FAILED", "org.apache.spark.SparkException [FAILED_EXECUTE_UDF]", TaskException},
		{"org.apache.spark.memory.SparkOutOfMemoryError: [UNABLE_TO_ACQUIRE_MEMORY] Unable to acquire 65536 bytes of memory, got 0. SQLSTATE: 53200\n\tat org.apache.spark.memory.MemoryConsumer.throwOom(MemoryConsumer.java:157)", "FAILED", "org.apache.spark.memory.SparkOutOfMemoryError [UNABLE_TO_ACQUIRE_MEMORY]", TaskExecutionMemory},
		// A Python worker's error: Python's type completes the class.
		{"org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n  File \"/opt/job.py\", line 12, in f\n    return 1 / x\nZeroDivisionError: division by zero\n\n\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:572)", "FAILED", "PythonException: ZeroDivisionError", TaskException},
		{"org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n  File \"/opt/job.py\", line 3, in g\n    d[k]\nKeyError: 'a'\n\nDuring handling of the above exception, another exception occurred:\n\nTraceback (most recent call last):\n  File \"/opt/job.py\", line 5, in g\n    raise mylib.errors.BadInput(k)\nmylib.errors.BadInput: a\n\n\tat org.apache.spark.api.python.BasePythonRunner", "FAILED", "PythonException: mylib.errors.BadInput", TaskException},
		// A Python worker gone without a Python error (3.5's and 4.x's
		// wordings): the kernel's OOM killer under a container's limit,
		// most often; one whose fault handler reported a crash of its own
		// is not that.
		{"org.apache.spark.SparkException: Python worker exited unexpectedly (crashed)\n\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator$$anonfun$1.applyOrElse(PythonRunner.scala:612)\nCaused by: java.io.EOFException\n\tat java.base/java.io.DataInputStream.readInt(DataInputStream.java:398)", "FAILED",
			"org.apache.spark.SparkException caused by java.io.EOFException", TaskPythonCrashed},
		{"org.apache.spark.SparkException: Python worker exited unexpectedly (crashed). Consider setting 'spark.sql.execution.pyspark.udf.faulthandler.enabled' or'spark.python.worker.faulthandler.enabled' configuration to 'true' for the better Python traceback.\nCaused by: java.io.EOFException", "FAILED",
			"org.apache.spark.SparkException caused by java.io.EOFException", TaskPythonCrashed},
		{"org.apache.spark.SparkException: Python worker exited unexpectedly (crashed): Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f (most recent call first):\n  File \"/opt/job.py\", line 9 in f\nCaused by: java.io.EOFException", "FAILED",
			"org.apache.spark.SparkException caused by java.io.EOFException", TaskException},
	} {
		class, kind := TaskErrorClass(tc.msg, tc.status)
		if class != tc.class || kind != tc.kind {
			t.Errorf("%.50q: %s %s, want %s %s", tc.msg, class, kind, tc.class, tc.kind)
		}
	}
}

// The failed and killed tasks of the real Spark runs (testdata/spark-real,
// see package realspark) read as what they were: the Python UDF's
// ValueError with its line, the executors lost under their tasks, the
// task that ran out of heap.
func TestTaskErrorOfRealSpark(t *testing.T) {
	for f, stages := range realSparkJSON[map[string][]sparkapi.TaskData](t, "failures/failed-tasks.json", 2) {
		seen := map[string]bool{}
		for _, tasks := range stages {
			for _, task := range tasks {
				class, kind, line := TaskError(task.ErrorMessage, task.Status)
				seen[class+" "+kind] = true
				if class == "PythonException: ValueError" && line != "ValueError: bad row 4242" {
					t.Errorf("%s: line %q", f, line)
				}
			}
		}
		for _, want := range []string{"PythonException: ValueError exception", "ExecutorLostFailure executor_lost", "java.lang.OutOfMemoryError oom"} {
			if !seen[want] {
				t.Errorf("%s: no failed task of %s among %v", f, want, seen)
			}
		}
	}
}

// realSparkJSON decodes, by file, each recorded real Spark answer under
// testdata/spark-real/<version>/ whose path matches glob (package
// recorded), failing with fewer than least of them.
func realSparkJSON[T any](t *testing.T, glob string, least int) map[string]T {
	t.Helper()
	out, err := recorded.JSON[T](filepath.Join("..", "testdata", "spark-real"), glob, least)
	if err != nil {
		t.Fatal(err)
	}
	return out
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
			st = p.owners[appKey{scriptApp, ms(t0)}].apps[appKey{scriptApp, ms(t0)}]
		}
		stages := st.attempt(false).Stages
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
