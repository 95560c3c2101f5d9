package annotate

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/sparkui"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// script drives one live application through three polls: running work,
// work that started and ended between polls, and the end of the
// application.
type script struct {
	srv *sparkui.Server
	clk *clock
}

const scriptApp = "app-20261122100000-0001"

func newScript(mode sparkui.Mode) *script {
	m := liveApp(scriptApp, "Nightly ETL", t0)
	s := &script{srv: sparkui.NewServer(mode, m), clk: &clock{now: at(30)}}
	s.srv.SetNow(s.clk.Now)
	s.srv.Update(func(m *sparkui.Model) {
		a := m.Apps[0].Attempts[0]
		a.Executions = append(a.Executions, &sparkui.Execution{ID: 0, Description: "INSERT INTO sales SELECT *\n  FROM staging", Submitted: at(4), RunningJobs: []int{0}})
		a.AddJob(&sparkui.Job{ID: 0, Name: "save at etl.py:40", Submitted: at(5), StageIDs: []int{0, 1}, Status: sparkui.JobRunning,
			Tasks: 12, ActiveTasks: 4, SQLExecutionID: 0})
		a.AddStage(&sparkui.Stage{ID: 0, Name: "map at etl.py:38", Status: sparkui.StageActive, Submitted: at(5), Tasks: 8, ActiveTasks: 4})
		a.AddStage(&sparkui.Stage{ID: 1, Name: "save at etl.py:40", Status: sparkui.StagePending, Tasks: 4})
	})
	return s
}

// poller is a poller of the script's server, on its clock, writing to a
// new memSink.
func (s *script) poller(t *testing.T) (*memSink, *Poller) {
	t.Helper()
	sink := newMemSink()
	return sink, newPoller(t, Config{Sources: []string{serve(t, s.srv)}, Sink: sink, Now: s.clk.Now})
}

// step2: job 0 ends; job 1 starts and fails between the polls; job 2 runs.
func (s *script) step2() {
	s.clk.Set(at(40))
	s.srv.Update(func(m *sparkui.Model) {
		a := m.Apps[0].Attempts[0]
		st0, st1 := a.Stage(0, 0), a.Stage(1, 0)
		st0.Status, st0.Completed, st0.CompleteTasks, st0.ActiveTasks = sparkui.StageComplete, at(20), 8, 0
		st1.Status, st1.Submitted, st1.Completed, st1.CompleteTasks = sparkui.StageComplete, at(21), at(35), 4
		j0 := a.Job(0)
		j0.Status, j0.Completed, j0.CompletedTasks, j0.ActiveTasks, j0.CompletedStages = sparkui.JobSucceeded, at(36), 12, 0, 2
		a.AddJob(&sparkui.Job{ID: 1, Name: "collect at etl.py:52", Submitted: at(37), Completed: at(38), StageIDs: []int{2},
			Status: sparkui.JobFailed, Tasks: 2, CompletedTasks: 1, FailedTasks: 1, FailedStages: 1, SQLExecutionID: 0})
		a.AddStage(&sparkui.Stage{ID: 2, Name: "collect at etl.py:52", Status: sparkui.StageFailed, Submitted: at(37), Completed: at(38),
			Tasks: 2, CompleteTasks: 1, FailedTasks: 1,
			FailureReason: "Job aborted due to stage failure: Task 1 in stage 2.0 failed 4 times\n\tat org.example.Etl.run(Etl.java:12)"})
		a.AddJob(&sparkui.Job{ID: 2, Name: "count at etl.py:60", Submitted: at(39), StageIDs: []int{3}, Status: sparkui.JobRunning, Tasks: 3, SQLExecutionID: 1})
		a.AddStage(&sparkui.Stage{ID: 3, Name: "count at etl.py:60", Status: sparkui.StageActive, Submitted: at(39), Tasks: 3, ActiveTasks: 3})
		x0 := a.Execution(0)
		x0.Completed, x0.RunningJobs, x0.SucceededJobs, x0.FailedJobs = at(38), nil, []int{0}, []int{1}
		a.Executions = append(a.Executions, &sparkui.Execution{ID: 1, Description: "SELECT count(*) FROM sales", Submitted: at(39), RunningJobs: []int{2}})
	})
}

// step3: everything ends, and so does the application.
func (s *script) step3() {
	s.clk.Set(at(60))
	s.srv.Update(func(m *sparkui.Model) {
		a := m.Apps[0].Attempts[0]
		j2, st3, x1 := a.Job(2), a.Stage(3, 0), a.Execution(1)
		j2.Status, j2.Completed, j2.CompletedTasks, j2.CompletedStages = sparkui.JobSucceeded, at(50), 3, 1
		st3.Status, st3.Completed, st3.CompleteTasks, st3.ActiveTasks = sparkui.StageComplete, at(49), 3, 0
		x1.Completed, x1.RunningJobs, x1.SucceededJobs = at(51), nil, []int{2}
		a.End = at(55)
	})
}

func jobRow(p point) string {
	f := p.fields
	return fmt.Sprintf("%d job %v %v end=%v dur=%v tasks=%v/%v failed=%v stages=%v sql=%v reason=%q",
		p.ns, f["job_id"], f["status"], f["end_ms"], f["duration_ms"], f["num_completed_tasks"], f["num_tasks"],
		f["num_failed_tasks"], f["stage_ids"], f["sql_id"], str(f["failure_reason"]))
}

func stageRow(p point) string {
	f := p.fields
	return fmt.Sprintf("%d stage %v.%v %v end=%v tasks=%v/%v jobs=%v reason=%q",
		p.ns, f["stage_id"], f["stage_attempt"], f["status"], f["end_ms"], f["num_complete_tasks"], f["num_tasks"], f["job_ids"], str(f["failure_reason"]))
}

func sqlRow(p point) string {
	f := p.fields
	return fmt.Sprintf("%d sql %v %v end=%v jobs=%v failed=%v desc=%q", p.ns, f["execution_id"], f["status"], f["end_ms"], f["job_ids"], f["failed_job_ids"], f["description"])
}

func appRow(p point) string {
	f := p.fields
	return fmt.Sprintf("%d app %s %s %v end=%v dur=%v", p.ns, p.tags["applicationid"], p.tags["appname"], f["status"], f["end_ms"], f["duration_ms"])
}

// str shows an absent string field as "".
func str(v any) string {
	if v == nil {
		return ""
	}
	return v.(string)
}

func nsAt(s float64, sub int64) int64 { return ms(at(s))*1_000_000 + sub }

// factNs is the time of an item's fact: its start at s seconds, its id and
// phase in the sub-millisecond digits.
func factNs(s float64, id int64, phase int) int64 { return factTime(ms(at(s)), id, phase) }

// A live application polled three times: an item seen running gets a
// start fact, an item that ended an end fact, each written once; work that
// started and ended between two polls is found. The requests stay
// incremental between the first and the final full read.
func TestScriptedLiveApp(t *testing.T) {
	s := newScript(sparkui.LiveUI)
	sink, p := s.poller(t)
	ctx := context.Background()

	p.PollOnce(ctx)
	jobStart0 := fmt.Sprintf(`%d job 0 RUNNING end=<nil> dur=<nil> tasks=<nil>/12 failed=<nil> stages=0,1 sql=<nil> reason=""`, factNs(5, 0, phaseStart))
	equalLines(t, "poll 1 jobs", sink.stored(schema.MeasurementJob, jobRow), []string{jobStart0})
	stageStart0 := fmt.Sprintf(`%d stage 0.0 ACTIVE end=<nil> tasks=<nil>/8 jobs=<nil> reason=""`, factNs(5, 0, phaseStart))
	equalLines(t, "poll 1 stages", sink.stored(schema.MeasurementStage, stageRow), []string{stageStart0})
	appStart := fmt.Sprintf("%d app %s Nightly ETL RUNNING end=<nil> dur=<nil>", factNs(0, 0, phaseStart), scriptApp)
	equalLines(t, "poll 1 app", sink.stored(schema.MeasurementApp, appRow), []string{appStart})
	first := s.srv.Requests()
	for _, r := range []string{"/jobs", "/stages?details=false", "/sql?details=false&planDescription=false&offset=0&length=100"} {
		if !slices.ContainsFunc(first, func(q string) bool { return strings.HasSuffix(q, scriptApp+r) }) {
			t.Errorf("first contact reads everything: no %s in %q", r, first)
		}
	}

	s.step2()
	p.PollOnce(ctx)
	var paths []string
	for _, r := range s.srv.Requests() {
		_, rest, _ := strings.Cut(r, scriptApp)
		paths = append(paths, rest)
	}
	equalLines(t, "poll 2 requests", paths, []string{
		"", // the listing (applications?minEndDate=…) does not name the application
		"/jobs?status=running", "/jobs/0", "/jobs/1", "/jobs/3",
		"/stages?status=active&status=pending&details=false", "/stages/0?details=false", "/stages/1?details=false", "/stages/2?details=false",
		"/sql/0?details=false&planDescription=false", "/sql?details=false&planDescription=false&offset=0&length=100",
		"/allexecutors", // none listed yet: read at every sync until one is
		// Stage details: stage 2 had a failed task (its failed tasks,
		// first), stages 0 and 1 ran 15 s and 14 s (≥ 5 s: the task
		// distribution and the slowest task, the longest first).
		"/stages/2/0/taskList?status=failed&status=killed&length=40",
		"/stages/0/0/taskSummary?quantiles=0.5,0.95,1.0", "/stages/0/0/taskList?sortBy=-runtime&length=1",
		"/stages/1/0/taskSummary?quantiles=0.5,0.95,1.0", "/stages/1/0/taskList?sortBy=-runtime&length=1",
	})
	reason := "Job aborted due to stage failure: Task 1 in stage 2.0 failed 4 times"
	jobStart2 := fmt.Sprintf(`%d job 2 RUNNING end=<nil> dur=<nil> tasks=<nil>/3 failed=<nil> stages=3 sql=<nil> reason=""`, factNs(39, 2, phaseStart))
	equalLines(t, "poll 2 jobs", sink.stored(schema.MeasurementJob, jobRow), []string{
		jobStart0,
		fmt.Sprintf(`%d job 0 SUCCEEDED end=%d dur=31000 tasks=12/12 failed=0 stages=0,1 sql=0 reason=""`, factNs(5, 0, phaseEnd), ms(at(36))),
		fmt.Sprintf(`%d job 1 FAILED end=%d dur=1000 tasks=1/2 failed=1 stages=2 sql=0 reason=%q`, factNs(37, 1, phaseEnd), ms(at(38)), reason),
		jobStart2,
	})
	equalLines(t, "poll 2 stages", sink.stored(schema.MeasurementStage, stageRow), []string{
		stageStart0,
		fmt.Sprintf(`%d stage 0.0 COMPLETE end=%d tasks=8/8 jobs=0 reason=""`, factNs(5, 0, phaseEnd), ms(at(20))),
		fmt.Sprintf(`%d stage 1.0 COMPLETE end=%d tasks=4/4 jobs=0 reason=""`, factNs(21, 10, phaseEnd), ms(at(35))),
		fmt.Sprintf(`%d stage 2.0 FAILED end=%d tasks=1/2 jobs=1 reason=%q`, factNs(37, 20, phaseEnd), ms(at(38)), reason),
		fmt.Sprintf(`%d stage 3.0 ACTIVE end=<nil> tasks=<nil>/3 jobs=<nil> reason=""`, factNs(39, 30, phaseStart)),
	})
	equalLines(t, "poll 2 sql", sink.stored(schema.MeasurementSQL, sqlRow), []string{
		fmt.Sprintf(`%d sql 0 RUNNING end=<nil> jobs=<nil> failed=<nil> desc="INSERT INTO sales SELECT * FROM staging"`, factNs(4, 0, phaseStart)),
		fmt.Sprintf(`%d sql 0 FAILED end=%d jobs=0,1 failed=1 desc="INSERT INTO sales SELECT * FROM staging"`, factNs(4, 0, phaseEnd), ms(at(38))),
		fmt.Sprintf(`%d sql 1 RUNNING end=<nil> jobs=<nil> failed=<nil> desc="SELECT count(*) FROM sales"`, factNs(39, 1, phaseStart)),
	})

	s.step3()
	p.PollOnce(ctx)
	equalLines(t, "final jobs", sink.stored(schema.MeasurementJob, jobRow)[3:], []string{
		jobStart2,
		fmt.Sprintf(`%d job 2 SUCCEEDED end=%d dur=11000 tasks=3/3 failed=0 stages=3 sql=1 reason=""`, factNs(39, 2, phaseEnd), ms(at(50))),
	})
	equalLines(t, "final app", sink.stored(schema.MeasurementApp, appRow), []string{
		appStart,
		fmt.Sprintf("%d app %s Nightly ETL COMPLETED end=%d dur=55000", factNs(0, 0, phaseEnd), scriptApp, ms(at(55))),
	})
	if n := len(sink.stored(schema.MeasurementStage, stageRow)); n != 6 {
		t.Errorf("%d stage facts, want 6: an end for each of the 4 stage attempts that ran, a start for the 2 seen running", n)
	}
	if n := len(sink.stored(schema.MeasurementSQL, sqlRow)); n != 4 {
		t.Errorf("%d SQL facts, want 4", n)
	}
	s.srv.Requests()

	// The application is written in its final state: later polls only list.
	written := sink.count()
	s.clk.Set(at(70))
	p.PollOnce(ctx)
	if reqs := s.srv.Requests(); len(reqs) != 1 || !strings.Contains(reqs[0], "/applications?minEndDate=") {
		t.Errorf("after the end, requests %q; want only the listing", reqs)
	}
	if sink.count() != written {
		t.Errorf("%d points written after the end", sink.count()-written)
	}
	for _, r := range first {
		if strings.Contains(r, "details=true") {
			t.Errorf("asked for task details: %s", r)
		}
	}
}

// A poll with nothing new writes nothing: a running item's start fact is
// not written again.
func TestNothingNewNothingWritten(t *testing.T) {
	s := newScript(sparkui.LiveUI)
	sink, p := s.poller(t)
	p.PollOnce(context.Background())
	s.step2()
	p.PollOnce(context.Background())
	n := sink.count()
	s.clk.Set(at(45))
	p.PollOnce(context.Background())
	if again := sink.count() - n; again != 0 {
		t.Errorf("%d points written by a poll with nothing new", again)
	}
}

// A History Server attempt whose event log has not changed is not read
// again.
func TestHistoryServerUnchangedLog(t *testing.T) {
	s := newScript(sparkui.HistoryServer)
	s.srv.Update(func(m *sparkui.Model) { m.Apps[0].Attempts[0].Updated = at(29) })
	sink, p := s.poller(t)
	p.PollOnce(context.Background())
	s.srv.Requests()
	s.clk.Set(at(40))
	p.PollOnce(context.Background())
	if reqs := s.srv.Requests(); len(reqs) != 1 {
		t.Errorf("unchanged log: requests %q, want the listing only", reqs)
	}
	if got := sink.stored(schema.MeasurementJob, jobRow); len(got) != 1 || !strings.Contains(got[0], "RUNNING end=<nil>") {
		t.Errorf("running job: %q, want its start fact only", got)
	}
	s.srv.Update(func(m *sparkui.Model) { m.Apps[0].Attempts[0].Updated = at(39) })
	p.PollOnce(context.Background())
	if reqs := s.srv.Requests(); len(reqs) < 4 {
		t.Errorf("changed log: requests %q, want a sync", reqs)
	}
}

// A burst of jobs between two polls is read with one list, not one request
// per job.
func TestBurstReadsTheList(t *testing.T) {
	s := newScript(sparkui.LiveUI)
	sink, p := s.poller(t)
	p.PollOnce(context.Background())
	s.srv.Requests()
	s.clk.Set(at(40))
	s.srv.Update(func(m *sparkui.Model) {
		a := m.Apps[0].Attempts[0]
		for id := 1; id <= 100; id++ {
			a.AddJob(&sparkui.Job{ID: id, Name: "tiny", Submitted: at(31), Completed: at(32), Status: sparkui.JobSucceeded, SQLExecutionID: -1})
		}
		a.AddJob(&sparkui.Job{ID: 101, Name: "last", Submitted: at(33), Status: sparkui.JobRunning, SQLExecutionID: -1})
	})
	p.PollOnce(context.Background())
	reqs := s.srv.Requests()
	if len(reqs) > 12 || !slices.ContainsFunc(reqs, func(r string) bool { return strings.HasSuffix(r, scriptApp+"/jobs") }) {
		t.Errorf("%d requests for a burst of 100 jobs: %q", len(reqs), reqs)
	}
	if n := len(sink.stored(schema.MeasurementJob, jobRow)); n != 102 {
		t.Errorf("%d job points, want 102", n)
	}
}

// SQL executions are paged from the last one seen; when Spark evicts old
// executions the offsets move down, and the overlap notices it.
func TestSQLPagingAcrossEviction(t *testing.T) {
	s := newScript(sparkui.LiveUI)
	add := func(a *sparkui.Attempt, from, to int64) {
		for id := from; id <= to; id++ {
			a.Executions = append(a.Executions, &sparkui.Execution{ID: id, Description: fmt.Sprint("q", id), Submitted: at(10), Completed: at(11)})
		}
	}
	s.srv.Update(func(m *sparkui.Model) {
		a := m.Apps[0].Attempts[0]
		a.Executions = nil
		add(a, 0, 149)
	})
	sink, p := s.poller(t)
	p.PollOnce(context.Background())
	if n := len(sink.stored(schema.MeasurementSQL, sqlRow)); n != 150 {
		t.Fatalf("%d SQL points after the first read, want 150", n)
	}
	// Spark drops the 40 oldest and records 10 more.
	s.srv.Update(func(m *sparkui.Model) {
		a := m.Apps[0].Attempts[0]
		a.Executions = a.Executions[40:]
		add(a, 150, 159)
	})
	s.clk.Set(at(40))
	p.PollOnce(context.Background())
	if n := len(sink.stored(schema.MeasurementSQL, sqlRow)); n != 160 {
		t.Errorf("%d SQL points, want 160: executions recorded while old ones were evicted are found", n)
	}
}

// Failures are counted by kind and retried with backoff; one failing
// source does not stop another.
func TestSourceFailures(t *testing.T) {
	s := newScript(sparkui.LiveUI)
	good := serve(t, s.srv)
	bad := sparkui.NewServer(sparkui.LiveUI, liveApp("app-2", "x", t0))
	mode := "html"
	bad.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		switch mode {
		case "html":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "<html><body>Application application_1_0001 has finished; see the History Server</body></html>")
		case "500":
			http.Error(w, "java.lang.NullPointerException", http.StatusInternalServerError)
		default:
			return false
		}
		return true
	})
	badURL := serve(t, bad)
	core, logs := observer.New(zapcore.InfoLevel)
	sink := newMemSink()
	p := newPoller(t, Config{Sources: []string{badURL, good, "http://127.0.0.1:1"}, Sink: sink, Now: s.clk.Now, Log: zap.New(core)})
	p.PollOnce(context.Background())
	st := p.Stats()
	if st.Errors[badURL]["decode"] != 1 || st.Errors["http://127.0.0.1:1"]["network"] != 1 {
		t.Errorf("errors %v", st.Errors)
	}
	if len(sink.stored(schema.MeasurementApp, appRow)) != 1 {
		t.Error("the good source was not written")
	}
	var logged bool
	for _, e := range logs.FilterMessage("Spark REST source failed").All() {
		if strings.Contains(e.ContextMap()["error"].(string), "Application application_1_0001 has finished") {
			logged = true
		}
	}
	if !logged {
		t.Errorf("the HTML answer is not quoted in the log: %v", logs.All())
	}
	// Backoff: not asked again before 2 intervals.
	bad.Requests()
	s.clk.Set(at(40))
	p.PollOnce(context.Background())
	if reqs := bad.Requests(); len(reqs) != 0 {
		t.Errorf("failed source asked again within its backoff: %q", reqs)
	}
	mode = "500"
	s.clk.Set(at(51))
	p.PollOnce(context.Background())
	if st := p.Stats(); st.Errors[badURL]["http_status"] != 1 {
		t.Errorf("errors %v", st.Errors)
	}
	mode = "ok"
	s.clk.Set(at(51 + 40))
	p.PollOnce(context.Background())
	if got := sink.stored(schema.MeasurementApp, appRow); len(got) != 2 {
		t.Errorf("recovered source not written: %q", got)
	}
}

// A driver UI port where nothing listens (between two applications) is
// asked every interval, not with backoff, and logged less and less often;
// so is the page the driver's UI serves while it starts (as real Spark
// 3.5 and 4.x do). Neither makes a later failure back off longer: an
// application that starts while its UI is refused is read as soon as its
// UI answers, however many polls were refused before.
func TestRefusedSourceAskedEveryInterval(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // refused until the application's UI binds it below
	url := "http://" + addr
	core, logs := observer.New(zapcore.InfoLevel)
	sink := newMemSink()
	clk := &clock{now: at(0)}
	p := newPoller(t, Config{Sources: []string{url}, Sink: sink, Now: clk.Now, Log: zap.New(core)})
	for i := 1; i <= 9; i++ {
		clk.Set(at(float64(10 * i))) // DefaultInterval apart
		p.PollOnce(context.Background())
		if got := p.Stats().Errors[url]["network"]; got != uint64(i) {
			t.Fatalf("poll %d: %d refused polls counted, want every poll asked", i, got)
		}
	}
	var logged []int64
	for _, e := range logs.FilterMessage("Spark REST source failed").All() {
		logged = append(logged, e.ContextMap()["failures"].(int64))
		if d := e.ContextMap()["retry_in"].(time.Duration); d != DefaultInterval {
			t.Errorf("retry_in %s, want the interval", d)
		}
	}
	// 1, 2, 4 and 8 (the poller's own sampler may drop the 4th entry
	// within a second).
	if len(logged) < 3 || !slices.Equal(logged[:3], []int64{1, 2, 4}) || len(logged) == 4 && logged[3] != 8 || len(logged) > 4 {
		t.Errorf("failures logged %v, want 1, 2, 4, 8", logged)
	}

	// The application starts: its UI says so twice, then fails once (a
	// first slow answer), then answers.
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	ui := sparkui.NewServer(sparkui.LiveUI, liveApp("app-20261122100130-0002", "short", at(90)))
	ui.SetNow(clk.Now)
	var answers atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch answers.Add(1) {
		case 1, 2:
			w.Header().Set("Content-Type", "text/plain;charset=utf-8")
			io.WriteString(w, "Spark is starting up. Please wait a while until it's ready.")
		case 3:
			http.Error(w, "busy", http.StatusServiceUnavailable)
		default:
			ui.ServeHTTP(w, r)
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	// Asked at 100 and 110 (starting), 120 (the failure), then not before
	// 140: twice the interval, as after a first failure.
	for _, step := range []struct {
		sec     float64
		answers int32
	}{{100, 1}, {110, 2}, {120, 3}, {130, 3}} {
		clk.Set(at(step.sec))
		p.PollOnce(context.Background())
		if got := answers.Load(); got != step.answers {
			t.Fatalf("at %v s: the UI asked %d times, want %d", step.sec, got, step.answers)
		}
	}
	clk.Set(at(140))
	p.PollOnce(context.Background())
	if got := sink.stored(schema.MeasurementApp, appRow); len(got) != 1 || !strings.Contains(got[0], "app-20261122100130-0002") {
		t.Errorf("the application's facts after its UI came up: %q", got)
	}
}

// A configured source backing off from failures is asked at the next
// round when the metrics name an application for the first time, once
// per application; without a new name it keeps its backoff.
func TestNewApplicationWakesFailingSource(t *testing.T) {
	ui := sparkui.NewServer(sparkui.LiveUI, liveApp("app-20261122100000-0001", "nightly", t0))
	failing := true
	ui.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if failing {
			http.Error(w, "busy", http.StatusServiceUnavailable)
		}
		return failing
	})
	url := serve(t, ui)
	clk := &clock{now: at(0)}
	p := newPoller(t, Config{Sources: []string{url}, Sink: newMemSink(), Now: clk.Now})
	p.PollOnce(context.Background()) // failure 1: next ask at 20 s
	clk.Set(at(20))
	p.PollOnce(context.Background()) // failure 2: next ask at 60 s
	asked := func() int { return len(ui.Requests()) }
	asked()
	clk.Set(at(30))
	p.PollOnce(context.Background())
	if n := asked(); n != 0 {
		t.Fatalf("asked %d times within its backoff", n)
	}
	p.SeeApp("app-20261122100025-0007")
	clk.Set(at(31))
	p.PollOnce(context.Background())
	if n := asked(); n != 1 {
		t.Errorf("a new application asked the failing source %d times, want 1", n)
	}
	p.SeeApp("app-20261122100025-0007")
	clk.Set(at(32))
	p.PollOnce(context.Background())
	if n := asked(); n != 0 {
		t.Errorf("the same application woke the source again: asked %d times", n)
	}
	// The application's name, as the stream carries it under
	// spark.metrics.namespace=${spark.app.name}, wakes it too.
	failing = false
	p.SeeApp("nightly")
	clk.Set(at(33))
	p.PollOnce(context.Background())
	if n := asked(); n == 0 {
		t.Error("a new application name did not wake the failing source")
	}
	if st := p.Stats(); st.Errors[url]["http_status"] != 3 {
		t.Errorf("failures counted %v, want 3", st.Errors)
	}
}

// A source that hangs does not hold up the others.
func TestSlowSourceDoesNotBlockOthers(t *testing.T) {
	s := newScript(sparkui.LiveUI)
	release := make(chan struct{})
	stuck := sparkui.NewServer(sparkui.LiveUI, liveApp("app-stuck", "x", t0))
	stuck.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		<-release
		return false
	})
	sink := newMemSink()
	sink.notify = make(chan struct{}, 16)
	p := newPoller(t, Config{Sources: []string{serve(t, stuck), serve(t, s.srv)}, Sink: sink, Now: s.clk.Now, Timeout: time.Minute})
	p.round(context.Background(), false)
	<-sink.notify // the good source is written while the other still waits
	if got := sink.stored(schema.MeasurementApp, appRow); len(got) != 1 || !strings.Contains(got[0], scriptApp) {
		t.Errorf("written: %q", got)
	}
	close(release)
	p.inFlight.Wait()
}

// One slow application in a History Server does not hold the source's
// others to its pace: its sync is left running while the others are read
// every interval, no application is read twice at once, and at most
// syncsPerSource of one source are read at once.
func TestSlowApplicationDoesNotHoldItsSource(t *testing.T) {
	for _, slowApps := range []int{1, syncsPerSource + 2} {
		t.Run(fmt.Sprintf("%d slow", slowApps), func(t *testing.T) {
			start := time.Now().Add(-time.Minute)
			fast := "app-20261122100000-0000"
			m := &sparkui.Model{}
			slow := map[string]bool{}
			for i := slowApps; i >= 0; i-- { // newest first, as Spark lists them: the slow ones before
				id := fmt.Sprintf("app-20261122100000-%04d", i)
				m.Apps = append(m.Apps, liveApp(id, "etl", start).Apps[0])
				slow[id] = id != fast
			}
			shs := sparkui.NewServer(sparkui.HistoryServer, m)
			release := make(chan struct{})
			var mu sync.Mutex
			reading := map[string]int{} // slow application → requests in progress
			most, mostOne := 0, 0
			waiting := make(chan struct{}, 1) // a request to a slow application waits
			shs.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
				rest, ok := strings.CutPrefix(r.URL.Path, "/api/v1/applications/")
				id, _, sub := strings.Cut(rest, "/")
				if !ok || !sub || !slow[id] {
					return false
				}
				mu.Lock()
				reading[id]++
				n := 0
				for _, k := range reading {
					n += k
				}
				most, mostOne = max(most, n), max(mostOne, reading[id])
				mu.Unlock()
				select { // a signal already waiting covers this one too
				case waiting <- struct{}{}:
				default:
				}
				select {
				case <-release:
				case <-r.Context().Done():
				}
				mu.Lock()
				reading[id]--
				mu.Unlock()
				return false
			})
			sink := newMemSink()
			sink.notify = make(chan struct{}, 1)
			p := newPoller(t, Config{Sources: []string{serve(t, shs)}, Sink: sink, Interval: time.Second, Timeout: time.Minute})
			stop := running(p)
			released := false
			defer func() {
				if !released {
					close(release)
				}
				stop()
			}()
			// want is an application id, and a job id for jobs.
			has := func(measurement, want string) bool {
				return slices.Contains(sink.stored(measurement, func(p point) string {
					if id, ok := p.fields["job_id"]; ok {
						return fmt.Sprintf("%s %v", p.tags["applicationid"], id)
					}
					return p.tags["applicationid"]
				}), want)
			}
			await := func(measurement, want string) {
				t.Helper()
				deadline := time.After(10 * time.Second)
				for !has(measurement, want) {
					select {
					case <-sink.notify:
					case <-deadline:
						t.Fatalf("%s %q not written in 10 s", measurement, want)
					}
				}
			}
			if slowApps >= syncsPerSource {
				// Every slot taken by a slow application: the source goes at
				// their pace, with no more requests to it than its slots.
				deadline := time.After(10 * time.Second)
			wait:
				for {
					mu.Lock()
					n := most
					mu.Unlock()
					if n >= syncsPerSource {
						break
					}
					select {
					case <-waiting:
					case <-deadline:
						break wait // the count below says how many waited
					}
				}
			} else {
				// The fast application's jobs are written one interval or
				// two after Spark lists them, while the slow one is read.
				var took []time.Duration
				for job := range 3 {
					listed := time.Now()
					shs.Update(func(m *sparkui.Model) {
						m.App(fast).Attempts[0].AddJob(&sparkui.Job{ID: job, Name: "count at etl.py:1", Submitted: listed,
							StageIDs: []int{job}, Status: sparkui.JobRunning, Tasks: 1, SQLExecutionID: -1})
					})
					await(schema.MeasurementJob, fmt.Sprintf("%s %d", fast, job))
					took = append(took, time.Since(listed).Round(time.Millisecond))
				}
				t.Logf("the fast application's jobs written %v after Spark listed them (interval 1s)", took)
			}
			close(release)
			released = true
			for id := range slow {
				if slow[id] {
					await(schema.MeasurementApp, id) // read in full once its source answers
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if mostOne != 1 {
				t.Errorf("one application was read by %d requests at once, want 1", mostOne)
			}
			if want := min(slowApps, syncsPerSource); most != want {
				t.Errorf("%d requests at once to slow applications, want %d", most, want)
			}
		})
	}
}

// An application that its live UI stops showing is closed out by a History
// Server that shows it finished.
func TestLiveUIHandsOverToHistoryServer(t *testing.T) {
	s := newScript(sparkui.LiveUI)
	shs := sparkui.NewServer(sparkui.HistoryServer, &sparkui.Model{})
	shs.SetNow(s.clk.Now)
	sink := newMemSink()
	p := newPoller(t, Config{Sources: []string{serve(t, s.srv), serve(t, shs)}, Sink: sink, Now: s.clk.Now})
	p.PollOnce(context.Background())

	// The driver ends and its UI goes away; the History Server has the log.
	s.step2()
	s.step3()
	s.srv.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, "gone", http.StatusServiceUnavailable)
		return true
	})
	shs.Update(func(m *sparkui.Model) {
		s.srv.Update(func(live *sparkui.Model) { m.Apps = live.Apps })
		m.Apps[0].Attempts[0].ID = "1" // YARN cluster mode: the History Server knows the attempt id
	})
	for i, sec := range []float64{70, 100, 200, 400} { // failing polls, with backoff
		s.clk.Set(at(sec))
		p.PollOnce(context.Background())
		if i == 0 && p.Stats().Lost != 0 {
			t.Error("lost after one failure")
		}
	}
	if st := p.Stats(); st.Tracked != 0 || st.Lost != 0 || st.ClosedOut != 0 {
		t.Errorf("stats %+v: the History Server should have taken the application over", st)
	}
	equalLines(t, "app", sink.stored(schema.MeasurementApp, appRow), []string{
		fmt.Sprintf("%d app %s Nightly ETL RUNNING end=<nil> dur=<nil>", factNs(0, 0, phaseStart), scriptApp),
		fmt.Sprintf("%d app %s Nightly ETL COMPLETED end=%d dur=55000", factNs(0, 0, phaseEnd), scriptApp, ms(at(55))),
	})
	// Job 0 was seen running by the live UI; its end and the others' come
	// from the History Server.
	if got := sink.stored(schema.MeasurementJob, jobRow); len(got) != 4 || !strings.Contains(got[0], "RUNNING") || !strings.Contains(got[3], "job 2 SUCCEEDED") {
		t.Errorf("jobs: %q", got)
	}
}

// Without a History Server, a lost application's running items are closed
// out as UNKNOWN at the time they were last seen.
func TestLostApplicationClosedOut(t *testing.T) {
	s := newScript(sparkui.LiveUI)
	sink, p := s.poller(t)
	p.PollOnce(context.Background())
	loseSource(p, s)
	if st := p.Stats(); st.ClosedOut != 1 || st.Lost != 0 {
		t.Errorf("stats %+v", st)
	}
	equalLines(t, "jobs", sink.stored(schema.MeasurementJob, jobRow), []string{
		fmt.Sprintf(`%d job 0 RUNNING end=<nil> dur=<nil> tasks=<nil>/12 failed=<nil> stages=0,1 sql=<nil> reason=""`, factNs(5, 0, phaseStart)),
		fmt.Sprintf(`%d job 0 UNKNOWN end=%d dur=25000 tasks=0/12 failed=0 stages=0,1 sql=0 reason=""`, factNs(5, 0, phaseLost), ms(at(30))),
	})
	equalLines(t, "app", sink.stored(schema.MeasurementApp, appRow), []string{
		fmt.Sprintf("%d app %s Nightly ETL RUNNING end=<nil> dur=<nil>", factNs(0, 0, phaseStart), scriptApp),
		fmt.Sprintf("%d app %s Nightly ETL UNKNOWN end=%d dur=30000", factNs(0, 0, phaseLost), scriptApp, ms(at(30))),
	})
}

// PeerVersion moves when a read changes where Spark lists a process, and
// only then: check-peer connections ask again after it moved.
func TestPeerVersion(t *testing.T) {
	s := newScript(sparkui.LiveUI)
	s.srv.Update(func(m *sparkui.Model) {
		m.Apps[0].Attempts[0].Executors = []*sparkui.Executor{{ID: "driver", HostPort: "10.0.0.1:40000", Added: at(0)}}
	})
	p := newPoller(t, Config{Sources: []string{serve(t, s.srv)}, Sink: newMemSink(), Now: s.clk.Now})
	peer := netip.MustParseAddr("10.0.0.9")
	p.PollOnce(context.Background())
	v1 := p.PeerVersion()
	if v1 == 0 || p.PeerAllowed(scriptApp, "driver", peer) || !p.PeerAllowed(scriptApp, "1", peer) {
		t.Fatalf("after the driver was listed: version %d, driver from %s allowed %v, executor 1 (not listed) %v",
			v1, peer, p.PeerAllowed(scriptApp, "driver", peer), p.PeerAllowed(scriptApp, "1", peer))
	}
	s.clk.Set(at(40))
	p.PollOnce(context.Background())
	if v := p.PeerVersion(); v != v1 {
		t.Errorf("nothing moved, version %d → %d", v1, v)
	}
	s.srv.Update(func(m *sparkui.Model) {
		a := m.Apps[0].Attempts[0]
		a.Executors = append(a.Executors, &sparkui.Executor{ID: "1", HostPort: "10.0.0.2:40001", Cores: 4, Added: at(45)})
	})
	s.clk.Set(at(50))
	p.PollOnce(context.Background())
	if v := p.PeerVersion(); v == v1 || p.PeerAllowed(scriptApp, "1", peer) {
		t.Errorf("executor 1 listed at 10.0.0.2: version %d → %d, allowed from %s %v", v1, v, peer, p.PeerAllowed(scriptApp, "1", peer))
	}
}

// CloseOutAfter is how long a lost application waits for another source:
// with only a live UI, an operator shortens it, and the application is
// closed out that long after it was lost, not before.
func TestCloseOutAfter(t *testing.T) {
	s := newScript(sparkui.LiveUI)
	p := newPoller(t, Config{Sources: []string{serve(t, s.srv)}, Sink: newMemSink(), Now: s.clk.Now, CloseOutAfter: time.Minute})
	p.PollOnce(context.Background())
	s.srv.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, "gone", http.StatusBadGateway)
		return true
	})
	for _, step := range []struct {
		sec             float64
		lost, closedOut int
	}{{40, 0, 0}, {60, 0, 0}, {100, 1, 0}, {159, 1, 0}, {160, 0, 1}} {
		s.clk.Set(at(step.sec))
		p.PollOnce(context.Background())
		if st := p.Stats(); st.Lost != step.lost || int(st.ClosedOut) != step.closedOut {
			t.Errorf("at %v s: %d lost, %d closed out; want %d, %d", step.sec, st.Lost, st.ClosedOut, step.lost, step.closedOut)
		}
	}
}

// {app_id} templates are polled for the application ids the metrics
// carry, for instance through YARN's ResourceManager proxy; credentials are
// sent and never logged.
func TestTemplateSourceAndAuth(t *testing.T) {
	s := newScript(sparkui.LiveUI)
	mux := http.NewServeMux()
	var auth []string
	mux.Handle("/proxy/"+scriptApp+"/", http.StripPrefix("/proxy/"+scriptApp, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = append(auth, r.Header.Get("Authorization"))
		s.srv.ServeHTTP(w, r)
	})))
	base := serve(t, mux)
	core, logs := observer.New(zapcore.DebugLevel)
	sink := newMemSink()
	p := newPoller(t, Config{Sources: []string{base + "/proxy/{app_id}"}, Sink: sink, Now: s.clk.Now, Log: zap.New(core),
		Auth: Auth{Username: "spark", Password: "s3cret-pw"}})
	p.PollOnce(context.Background())
	if sink.count() != 0 {
		t.Fatal("written before any application id was seen")
	}
	p.SeeApp(scriptApp)
	p.SeeApp("app-20261122100000-9999") // Spark-shaped, unknown to the proxy
	p.PollOnce(context.Background())
	if got := sink.stored(schema.MeasurementApp, appRow); len(got) != 1 {
		t.Errorf("apps %q", got)
	}
	if len(auth) == 0 || auth[0] != "Basic c3Bhcms6czNjcmV0LXB3" {
		t.Errorf("authorization %q", auth)
	}
	if st := p.Stats(); st.Errors[base+"/proxy/{app_id}"]["http_status"] != 1 {
		t.Errorf("the unknown application's 404 is counted under the template: %v", st.Errors)
	}
	for _, e := range logs.All() {
		if strings.Contains(fmt.Sprint(e.Message, e.ContextMap()), "s3cret") {
			t.Errorf("secret logged: %v", e)
		}
	}
}

func TestCheckSource(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"http://hs:18080", ""},
		{"https://rm:8088/proxy/{app_id}", ""},
		{"hs:18080", "must start with http:// or https://"},
		{"http://user:pw@hs:18080", "must not hold credentials"},
		{"http://hs:18080/?x=1", "must not have a query"},
		{"http://rm/proxy/{appid}", "the only placeholder is {app_id}"},
		{"http:///x", "has no host"},
	} {
		err := CheckSource(tc.url)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("CheckSource(%q) = %v, want %q", tc.url, err, tc.want)
		}
	}
	if _, err := New(Config{Sources: []string{"ftp://x", "http://ok"}, Sink: newMemSink()}); err == nil ||
		!strings.Contains(err.Error(), `source 1 "ftp://x"`) {
		t.Errorf("New: %v", err)
	}
}

func TestText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"SELECT *\n  FROM t", "SELECT * FROM t"},
		{strings.Repeat("é", 22), strings.Repeat("é", 19) + "…"},
		{"short", "short"},
	} {
		if got := trim(collapse(tc.in), 20); got != tc.want {
			t.Errorf("text(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := tagValue("bad\x01name\\"); got != "bad name" {
		t.Errorf("tagValue: %q", got)
	}
}

func executorRow(p point) string {
	f := p.fields
	return fmt.Sprintf("%d %s %v process=%v on %v %v end=%v dur=%v cores=%v reason=%q heap=%v python=%v", p.ns, p.measurement, f["executor_id"], p.tags["process"], f["host"],
		f["status"], f["end_ms"], f["duration_ms"], f["cores"], str(f["remove_reason"]), f["peak_JVMHeapMemory"], f["peak_ProcessTreePythonRSSMemory"])
}

// The first read of an application comes as its driver starts, before
// an executor registers: executors are read at every sync until Spark
// lists one, then every third, so that the view has them from the first
// poll that can.
func TestExecutorsReadUntilListed(t *testing.T) {
	s := newScript(sparkui.LiveUI)
	s.srv.Update(func(m *sparkui.Model) {
		m.Apps[0].Attempts[0].Executors = []*sparkui.Executor{{ID: "driver", HostPort: "10.0.0.1:40000", MaxMemory: 2 << 30, Added: at(0)}}
	})
	sink, p := s.poller(t)
	ctx := context.Background()
	for i, step := range []struct {
		sec      float64
		register bool // an executor registers before the poll
		read     bool
	}{{30, false, true}, {40, false, true}, {50, true, true}, {60, false, true}, {70, false, false}, {80, false, false}} { // at 60 s, the third sync's read
		if step.register {
			s.srv.Update(func(m *sparkui.Model) {
				a := m.Apps[0].Attempts[0]
				a.Executors = append(a.Executors, &sparkui.Executor{ID: "1", HostPort: "node-1:40001", Cores: 4, MaxMemory: 3 << 30, Added: at(45)})
			})
		}
		s.clk.Set(at(step.sec))
		p.PollOnce(ctx)
		read := slices.ContainsFunc(s.srv.Requests(), func(r string) bool { return strings.HasSuffix(r, "/allexecutors") })
		if read != step.read {
			t.Errorf("poll %d at %v s: executors read %v, want %v", i+1, step.sec, read, step.read)
		}
	}
	if got := sink.stored(schema.MeasurementExecutor, executorRow); len(got) != 2 || !strings.Contains(got[1], fmt.Sprintf("%d spark_executor 1 process=1", nsAt(50, 0))) {
		t.Errorf("executor snapshots %q", got)
	}
}

// Executors of a live application: a snapshot each, in its own series
// (tag process), from the first poll; a removal between polls is found at
// the next executor read (every third sync), which writes a new snapshot
// of the executor and the fact of its removal; executors that did not
// change get no new snapshot; at the application's end, a last snapshot
// each; and the sizing advice, once.
func TestExecutorLifecycle(t *testing.T) {
	s := newScript(sparkui.LiveUI)
	const oom = "Container killed by YARN for exceeding physical memory limits. 1.4 GB of 1.4 GB physical memory used.\nConsider boosting spark.executor.memoryOverhead."
	s.srv.Update(func(m *sparkui.Model) {
		a := m.Apps[0].Attempts[0]
		a.Executors = []*sparkui.Executor{
			{ID: "driver", HostPort: "10.0.0.1:40000", Cores: 0, MaxMemory: 2 << 30, Added: at(0)},
			{ID: "1", HostPort: "node-1:40001", Cores: 4, MaxMemory: 3 << 30, Added: at(2)},
			{ID: "2", HostPort: "node-2:40002", Cores: 4, MaxMemory: 3 << 30, Added: at(3)},
		}
	})
	sink, p := s.poller(t)
	ctx := context.Background()
	readsExecutors := func() bool {
		return slices.ContainsFunc(s.srv.Requests(), func(r string) bool { return strings.HasSuffix(r, "/allexecutors") })
	}

	p.PollOnce(ctx)
	if !readsExecutors() {
		t.Error("first poll: executors not read")
	}
	equalLines(t, "poll 1", slices.Concat(sink.stored(schema.MeasurementExecutor, executorRow), sink.stored(schema.MeasurementExecutorRemoval, executorRow)), []string{
		fmt.Sprintf(`%d spark_executor 1 process=1 on node-1 ACTIVE end=<nil> dur=<nil> cores=4 reason="" heap=<nil> python=<nil>`, nsAt(30, 0)),
		fmt.Sprintf(`%d spark_executor 2 process=2 on node-2 ACTIVE end=<nil> dur=<nil> cores=4 reason="" heap=<nil> python=<nil>`, nsAt(30, 0)),
		fmt.Sprintf(`%d spark_executor driver process=driver on 10.0.0.1 ACTIVE end=<nil> dur=<nil> cores=0 reason="" heap=<nil> python=<nil>`, nsAt(30, 0)),
	})

	s.srv.Update(func(m *sparkui.Model) {
		x := m.Apps[0].Attempts[0].Executors[2]
		x.Removed, x.RemoveReason = at(35), oom
		x.Peak = map[string]int64{"JVMHeapMemory": 2_900_000_000, "ProcessTreePythonRSSMemory": 2_400_000_000}
	})
	for i, sec := range []float64{40, 50} {
		s.clk.Set(at(sec))
		p.PollOnce(ctx)
		if readsExecutors() {
			t.Errorf("poll %d: executors read between full reads", i+2)
		}
	}
	s.clk.Set(at(60))
	p.PollOnce(ctx)
	if !readsExecutors() {
		t.Error("poll 4: executors not read")
	}
	reason := "Container killed by YARN for exceeding physical memory limits. 1.4 GB of 1.4 GB physical memory used."
	equalLines(t, "poll 4", slices.Concat(sink.stored(schema.MeasurementExecutor, executorRow), sink.stored(schema.MeasurementExecutorRemoval, executorRow))[3:], []string{
		fmt.Sprintf(`%d spark_executor 2 process=2 on node-2 REMOVED end=%d dur=32000 cores=4 reason=%q heap=2900000000 python=2400000000`, nsAt(60, 0), ms(at(35)), reason),
		fmt.Sprintf(`%d spark_executor_removal 2 process= on node-2 REMOVED end=%d dur=32000 cores=<nil> reason=%q heap=<nil> python=<nil>`, nsAt(35, 3), ms(at(35)), reason),
	})
	removal := sink.latest[func() string {
		for k, pt := range sink.latest {
			if pt.measurement == schema.MeasurementExecutorRemoval {
				return k
			}
		}
		return ""
	}()]
	if got, want := removal.fields["text"], "on node-2 · after 32s · peak heap 2.7 GiB · peak Python RSS 2.2 GiB · "+reason; got != want {
		t.Errorf("removal text %q, want %q", got, want)
	}

	// The application ends: a full read; the executors left end with it.
	written := len(sink.written)
	s.clk.Set(at(70))
	s.srv.Update(func(m *sparkui.Model) { m.Apps[0].Attempts[0].End = at(55) })
	p.PollOnce(ctx)
	equalLines(t, "final", sink.stored(schema.MeasurementExecutor, executorRow)[4:], []string{
		fmt.Sprintf(`%d spark_executor 1 process=1 on node-1 ENDED end=%d dur=53000 cores=4 reason="" heap=<nil> python=<nil>`, nsAt(70, 0), ms(at(55))),
		fmt.Sprintf(`%d spark_executor driver process=driver on 10.0.0.1 ENDED end=%d dur=55000 cores=0 reason="" heap=<nil> python=<nil>`, nsAt(70, 0), ms(at(55))),
	})
	for _, pt := range sink.written[written:] {
		if pt.fields["executor_id"] == "2" {
			t.Errorf("the removed executor written again: %v", pt)
		}
	}

	// The completed application's sizing advice, at its end, from the
	// environment (no memory settings: Spark's defaults, a 1g heap and
	// 384 MiB of overhead) and the executors' peaks: executor 2 was killed,
	// and its 2.4 GB of Python is 596 % of the overhead (2288.6 MiB). The
	// container must hold the whole heap, the JVM's native memory (not
	// reported: Spark's default overhead, 384 MiB, stands for it) and
	// Python, a tenth to spare on the last two: 1024 + (384 + 2288.6) ×
	// 10/9 = 3993.6 MiB, an overhead of 2969.6, up to 3008 MiB (more than
	// the killed container plus a quarter, 1.75 GiB). No PySpark memory: Spark would
	// enforce it as an address-space limit per worker.
	sizingRow := func(p point) string {
		f := p.fields
		return fmt.Sprintf("%d %v rule=%v executor=%v %v=%v text=%q", p.ns, f["kind"], f["rule"], f["executor"], f["property"], f["value"], f["text"])
	}
	equalLines(t, "sizing", sink.stored(schema.MeasurementSizing, sizingRow), []string{
		fmt.Sprintf(`%d limits rule=<nil> executor=<nil> <nil>=<nil> text="heap 1.0 GiB, overhead 384 MiB, container 1.4 GiB: 2 findings, 1 settings to change · no process-tree metrics: the container and Python rules need spark.executor.processTreeMetrics.enabled=true (Linux)"`, nsAt(55, 0)),
		fmt.Sprintf(`%d finding rule=container executor=2 <nil>=<nil> text=%q`, nsAt(55, 1), "removed for exceeding its memory limit: "+strings.ReplaceAll(oom, "\n", " ")),
		fmt.Sprintf(`%d finding rule=python executor=<nil> <nil>=<nil> text="Python workers peaked at 2.2 GiB, 596 %% of the memory overhead, which Python workers share with the JVM's off-heap memory without spark.executor.pyspark.memory (384 MiB)"`, nsAt(55, 2)),
		fmt.Sprintf(`%d setting rule=container executor=<nil> spark.executor.memoryOverhead=3008m text="--conf spark.executor.memoryOverhead=3008m"`, nsAt(55, 3)),
	})
}

// Peak metric names become field keys: a source answering hundreds of
// them, or names not of Spark's form, adds at most maxPeaks columns, and
// what is not written is counted.
func TestHostilePeakNames(t *testing.T) {
	s := newScript(sparkui.LiveUI)
	peaks := map[string]int64{"JVMHeapMemory": 1 << 30, "bad name": 1, "peak,x=1": 2, `q"`: 3, "": 4,
		strings.Repeat("A", 65): 5}
	for i := range 100 {
		peaks[fmt.Sprintf("Metric%03d", i)] = int64(i)
	}
	s.srv.Update(func(m *sparkui.Model) {
		m.Apps[0].Attempts[0].Executors = []*sparkui.Executor{{ID: "1", HostPort: "node-1:40001", Cores: 4, Added: at(2), Peak: peaks}}
	})
	sink, p := s.poller(t)
	p.PollOnce(context.Background())
	var got []string
	for _, pt := range sink.written {
		if pt.measurement != schema.MeasurementExecutor {
			continue
		}
		for k := range pt.fields {
			if strings.HasPrefix(k, "peak_") {
				got = append(got, k)
			}
		}
	}
	slices.Sort(got)
	// Sorted, the first 40 names of Spark's form: JVMHeapMemory, then
	// Metric000 … Metric038.
	want := []string{"peak_JVMHeapMemory"}
	for i := range maxPeaks - 1 {
		want = append(want, fmt.Sprintf("peak_Metric%03d", i))
	}
	equalLines(t, "peak fields", got, want)
	if n, want := p.Stats().Invalid, uint64(len(peaks)-maxPeaks); n != want {
		t.Errorf("Invalid = %d, want %d (5 malformed names, %d past the cap)", n, want, 101-maxPeaks)
	}
}

// loseSource makes the script's UI fail from now on and polls on until the
// poller has lost the application and closed it out (800 s).
func loseSource(p *Poller, s *script) {
	s.srv.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, "gone", http.StatusBadGateway)
		return true
	})
	for _, sec := range []float64{40, 60, 100, 200, 800} {
		s.clk.Set(at(sec))
		p.PollOnce(context.Background())
	}
}
