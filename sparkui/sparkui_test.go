package sparkui

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// eventLogs are Spark's own test event logs (see testdata/README.md).
const eventLogs = "../testdata/spark-events"

// replayAll replays every event log of the fixture folder into one model.
func replayAll(t *testing.T) *Model {
	t.Helper()
	m := &Model{}
	n, err := m.ReplayDir(eventLogs)
	if err != nil {
		t.Fatal(err)
	}
	if n < 20 {
		t.Fatalf("only %d event logs in %s", n, eventLogs)
	}
	return m
}

func get(t *testing.T, h http.Handler, path string, out any) int {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	if rec.Code == http.StatusOK && out != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			t.Fatalf("%s: %v\n%s", path, err, rec.Body.String())
		}
	}
	return rec.Code
}

// The replayed fixtures give what Spark's own History Server test
// expectations say for the same logs (HistoryServerSuite): the facts below
// are theirs.
func TestReplayMatchesSpark(t *testing.T) {
	srv := NewServer(HistoryServer, replayAll(t))

	var jobs []map[string]any
	get(t, srv, "/api/v1/applications/local-1422981780767/jobs", &jobs)
	var got []string
	for _, j := range jobs {
		got = append(got, strings.Join([]string{j["status"].(string), j["name"].(string)}, " "))
		if j["jobId"].(float64) == 1 {
			for k, want := range map[string]float64{"numTasks": 16, "numCompletedTasks": 15, "numFailedTasks": 1,
				"numCompletedStages": 1, "numFailedStages": 1, "numSkippedStages": 0} {
				if j[k].(float64) != want {
					t.Errorf("job 1 %s = %v, want %v", k, j[k], want)
				}
			}
			if _, ok := j["submissionTime"]; ok {
				t.Error("Spark 1.2's log has no job submission time; the field must be omitted")
			}
		}
	}
	want := []string{"SUCCEEDED count at <console>:17", "FAILED count at <console>:20", "SUCCEEDED count at <console>:15"}
	if !slices.Equal(got, want) {
		t.Errorf("jobs newest first:\n%q\nwant\n%q", got, want)
	}

	var failed []map[string]any
	get(t, srv, "/api/v1/applications/local-1422981780767/stages?status=failed", &failed)
	if len(failed) != 1 || failed[0]["stageId"].(float64) != 2 || failed[0]["numFailedTasks"].(float64) != 1 ||
		failed[0]["submissionTime"] != "2015-02-03T16:43:06.296GMT" || failed[0]["completionTime"] != "2015-02-03T16:43:06.347GMT" ||
		!strings.HasPrefix(failed[0]["failureReason"].(string), "Job aborted due to stage failure: Task 3 in stage 2.0 failed 1 times") {
		t.Errorf("failed stages: %v", failed)
	}

	// Multi-attempt application: attempts newest first; sub-resources need
	// the attempt.
	var app map[string]any
	get(t, srv, "/api/v1/applications/local-1426533911241", &app)
	atts := app["attempts"].([]any)
	if len(atts) != 2 || atts[0].(map[string]any)["attemptId"] != "2" || atts[1].(map[string]any)["attemptId"] != "1" ||
		atts[1].(map[string]any)["startTime"] != "2015-03-16T19:25:10.242GMT" || atts[1].(map[string]any)["duration"].(float64) != 34935 {
		t.Errorf("multi-attempt app: %v", app)
	}
	if code := get(t, srv, "/api/v1/applications/local-1426533911241/jobs", nil); code != http.StatusNotFound {
		t.Errorf("jobs without attempt: %d, want 404", code)
	}
	var s1, s2 []map[string]any
	get(t, srv, "/api/v1/applications/local-1426533911241/1/stages", &s1)
	get(t, srv, "/api/v1/applications/local-1426533911241/2/stages", &s2)
	if len(s1) != 1 || len(s2) != 1 || s1[0]["submissionTime"] == s2[0]["submissionTime"] {
		t.Errorf("each attempt has its own stages: %v / %v", s1, s2)
	}

	// SQL: executions with their jobs, oldest first, plan optional.
	var sql []map[string]any
	get(t, srv, "/api/v1/applications/spark-110be3a8424d4a2789cb88134418217b/sql?details=false&planDescription=false", &sql)
	if len(sql) != 3 || sql[0]["id"].(float64) != 0 || sql[2]["description"] != "parquet at NativeMethodAccessorImpl.java:0" ||
		sql[0]["planDescription"] != "" || sql[0]["status"] != "COMPLETED" || len(sql[2]["successJobIds"].([]any)) == 0 {
		t.Errorf("sql: %v", sql)
	}

	// Executors with their removal reasons.
	var execs []map[string]any
	get(t, srv, "/api/v1/applications/application_1628109047826_1317105/allexecutors", &execs)
	removed := 0
	for _, x := range execs {
		if x["removeReason"] != nil {
			removed++
		}
	}
	if removed != 6 {
		t.Errorf("%d removed executors, want 6: %v", removed, execs)
	}
}

func TestApplicationList(t *testing.T) {
	m := replayAll(t)
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	m.Apps = append(m.Apps, &App{ID: "app-running", Name: "live", Attempts: []*Attempt{{Start: now.Add(-time.Hour)}}})
	srv := NewServer(HistoryServer, m)
	srv.SetNow(func() time.Time { return now })
	ids := func(q string) []string {
		var apps []map[string]any
		if code := get(t, srv, "/api/v1/applications"+q, &apps); code != http.StatusOK {
			t.Fatalf("%s: %d", q, code)
		}
		var out []string
		for _, a := range apps {
			out = append(out, a["id"].(string))
		}
		return out
	}
	all := ids("")
	if len(all) != len(m.Apps) || all[len(all)-1] != "app-running" || all[0] != "spark-cc4d115f011443d787f03a71a476a745" {
		t.Errorf("all apps, newest end first, running last: %q", all)
	}
	if got := ids("?status=running"); !slices.Equal(got, []string{"app-running"}) {
		t.Errorf("running: %q", got)
	}
	// End-date filters let running applications through, as Spark does.
	if got := ids("?minEndDate=2025-06-27T03:00:00.000GMT"); !slices.Equal(got, []string{"spark-cc4d115f011443d787f03a71a476a745", "app-running"}) {
		t.Errorf("minEndDate: %q", got)
	}
	if got := ids("?maxEndDate=2015-02-10&minEndDate=2015-02-03"); !slices.Equal(got, []string{"local-1422981780767", "local-1422981759269"}) {
		t.Errorf("end window: %q", got)
	}
	if got := ids("?limit=2"); len(got) != 2 {
		t.Errorf("limit: %q", got)
	}
}

func TestLiveUI(t *testing.T) {
	start := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	att := &Attempt{ID: "1", Start: start, User: "u", SparkVersion: "4.0.0"}
	m := &Model{Apps: []*App{{ID: "application_1_0001", Name: "etl", Attempts: []*Attempt{att}}}}
	att.AddJob(&Job{ID: 0, Name: "count at x.py:1", Submitted: start.Add(time.Second), Status: JobRunning, StageIDs: []int{0}})
	srv := NewServer(LiveUI, m)
	srv.SetNow(func() time.Time { return start.Add(time.Minute) })
	var apps []map[string]any
	get(t, srv, "/api/v1/applications", &apps)
	a := apps[0]["attempts"].([]any)[0].(map[string]any)
	if _, ok := a["attemptId"]; ok || a["completed"] != false || a["endTimeEpoch"].(float64) != -1 || a["duration"].(float64) != 60000 {
		t.Errorf("live attempt: %v", a)
	}
	var jobs []map[string]any
	if get(t, srv, "/api/v1/applications/application_1_0001/jobs?status=running", &jobs); len(jobs) != 1 {
		t.Errorf("running jobs: %v", jobs)
	}
	if get(t, srv, "/api/v1/applications/application_1_0001/1/jobs/0", nil) != http.StatusOK {
		t.Error("the live UI ignores the attempt segment")
	}
	if get(t, srv, "/api/v1/applications/application_1_0001/jobs/7", nil) != http.StatusNotFound {
		t.Error("unknown job must be 404")
	}
	if reqs := srv.Requests(); len(reqs) != 4 || reqs[1] != "/api/v1/applications/application_1_0001/jobs?status=running" {
		t.Errorf("requests %q", reqs)
	}
}
