package sparkui

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/sparkpulse/sparkpulse/sparkapi"
)

// restFixtures are Spark's own REST expectations (see testdata/README.md).
const restFixtures = "../testdata/spark-rest/"

func readFixture(t *testing.T, name string, out any) {
	t.Helper()
	b, err := os.ReadFile(restFixtures + name)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// taskSummary computed from the event log equals what Spark's History
// Server answers for the same log (HistoryServerSuite's expectations),
// metric by metric, for the metrics sparkpulse reads.
func TestTaskSummaryMatchesSpark(t *testing.T) {
	srv := NewServer(HistoryServer, replayAll(t))
	const app = "/api/v1/applications/local-1430917381534/stages/"
	for _, tc := range []struct{ path, fixture string }{
		{app + "0/0/taskSummary", "stage_task_summary_w_shuffle_write_expectation.json"},
		{app + "1/0/taskSummary", "stage_task_summary_w_shuffle_read_expectation.json"},
		{app + "0/0/taskSummary?quantiles=0.01,0.5,0.99", "stage_task_summary_w__custom_quantiles_expectation.json"},
	} {
		var want, got sparkapi.TaskSummary
		readFixture(t, tc.fixture, &want)
		if code := get(t, srv, tc.path, &got); code != 200 {
			t.Fatalf("%s: %d", tc.path, code)
		}
		for _, m := range []struct {
			name      string
			got, want []float64
		}{
			{"quantiles", got.Quantiles, want.Quantiles},
			{"duration", got.Duration, want.Duration},
			{"executorRunTime", got.ExecutorRunTime, want.ExecutorRunTime},
			{"jvmGcTime", got.JVMGCTime, want.JVMGCTime},
			{"peakExecutionMemory", got.PeakExecutionMemory, want.PeakExecutionMemory},
			{"memoryBytesSpilled", got.MemoryBytesSpilled, want.MemoryBytesSpilled},
			{"diskBytesSpilled", got.DiskBytesSpilled, want.DiskBytesSpilled},
			{"inputMetrics.bytesRead", got.InputMetrics.BytesRead, want.InputMetrics.BytesRead},
			{"shuffleReadMetrics.readBytes", got.ShuffleReadMetrics.ReadBytes, want.ShuffleReadMetrics.ReadBytes},
			{"shuffleReadMetrics.fetchWaitTime", got.ShuffleReadMetrics.FetchWaitTime, want.ShuffleReadMetrics.FetchWaitTime},
		} {
			if m.want == nil {
				continue // not in this expectation (an older Spark's)
			}
			if !slices.Equal(m.got, m.want) {
				t.Errorf("%s %s = %v, Spark says %v", tc.path, m.name, m.got, m.want)
			}
		}
	}
	if code := get(t, srv, app+"0/0/taskSummary?quantiles=foo,0.1", nil); code != 400 {
		t.Errorf("bad quantiles: %d, want 400 as Spark", code)
	}
}

// The slowest task, as taskList?sortBy=-runtime&length=1 gives it.
func TestTaskListSlowestMatchesSpark(t *testing.T) {
	srv := NewServer(HistoryServer, replayAll(t))
	var want sparkapi.TaskData
	readFixture(t, "stage_task_list_w__sortBy_short_names___runtime_expectation.first.json", &want)
	var got []sparkapi.TaskData
	get(t, srv, "/api/v1/applications/local-1430917381534/stages/0/0/taskList?sortBy=-runtime&length=1", &got)
	if len(got) != 1 {
		t.Fatalf("%d tasks, want 1", len(got))
	}
	g := got[0]
	if g.TaskID != want.TaskID || g.Index != want.Index || g.ExecutorID != want.ExecutorID || g.Host != want.Host ||
		g.Status != want.Status || g.Speculative != want.Speculative || !g.LaunchTime.Equal(want.LaunchTime.Time) ||
		g.Duration != want.Duration || g.TaskMetrics.ExecutorRunTime != want.TaskMetrics.ExecutorRunTime ||
		g.TaskMetrics.JVMGCTime != want.TaskMetrics.JVMGCTime || g.TaskMetrics.InputMetrics != want.TaskMetrics.InputMetrics {
		t.Errorf("slowest task\n%+v\nSpark says\n%+v", g, want)
	}
}

// Failed and killed tasks carry Spark's wording of their end: the failed
// stage of local-1422981780767 (HistoryServerSuite's "failed stage list")
// and a speculative copy killed when the other attempt won
// (application_1628109047826_1317105).
func TestTaskListFailedAndKilled(t *testing.T) {
	srv := NewServer(HistoryServer, replayAll(t))
	var failed []sparkapi.TaskData
	get(t, srv, "/api/v1/applications/local-1422981780767/stages/2/0/taskList?status=failed", &failed)
	if len(failed) == 0 {
		t.Fatal("no failed task")
	}
	for _, f := range failed {
		if f.Status != "FAILED" || !strings.HasPrefix(f.ErrorMessage, "java.lang.RuntimeException: got a 3, failing") {
			t.Errorf("failed task %d: %s %q", f.TaskID, f.Status, f.ErrorMessage)
		}
	}
	var killed []sparkapi.TaskData
	get(t, srv, "/api/v1/applications/application_1628109047826_1317105/stages/0/0/taskList?status=KILLED", &killed)
	if len(killed) == 0 || !killed[0].Speculative || killed[0].ErrorMessage != "TaskKilled (another attempt succeeded)" {
		t.Errorf("killed tasks: %+v", killed)
	}
}

// The executor list's task totals are Spark's: AppStatusListener's
// counting of every task end, checked against HistoryServerSuite's
// executor list of local-1422981780767.
func TestExecutorTotalsMatchSpark(t *testing.T) {
	srv := NewServer(HistoryServer, replayAll(t))
	var want, got []sparkapi.Executor
	readFixture(t, "executor_list_json_expectation.json", &want)
	if code := get(t, srv, "/api/v1/applications/local-1422981780767/executors", &got); code != 200 {
		t.Fatalf("executors: %d", code)
	}
	if len(got) != 1 || len(want) != 1 {
		t.Fatalf("%d executors, Spark lists %d", len(got), len(want))
	}
	g, w := got[0], want[0]
	for _, m := range []struct {
		name      string
		got, want int64
	}{
		{"completedTasks", int64(g.CompletedTasks), int64(w.CompletedTasks)},
		{"failedTasks", int64(g.FailedTasks), int64(w.FailedTasks)},
		{"totalTasks", int64(g.TotalTasks), int64(w.TotalTasks)},
		{"totalDuration", g.TotalDuration, w.TotalDuration},
		{"totalGCTime", g.TotalGCTime, w.TotalGCTime},
		{"totalInputBytes", g.TotalInputBytes, w.TotalInputBytes},
		{"totalShuffleRead", g.TotalShuffleRead, w.TotalShuffleRead},
		{"totalShuffleWrite", g.TotalShuffleWrite, w.TotalShuffleWrite},
	} {
		if m.got != m.want {
			t.Errorf("%s = %d, Spark says %d", m.name, m.got, m.want)
		}
	}
}
