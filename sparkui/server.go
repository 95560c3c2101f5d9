package sparkui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sparkpulse/sparkpulse/sparkapi"
)

// Mode is the kind of Spark server a Server imitates.
type Mode int

const (
	HistoryServer Mode = iota // many applications; attempt ids required where attempts have them
	LiveUI                    // a driver's UI: the model's first application only
)

// Server is an http.Handler answering Spark's REST API under /api/v1 from a
// Model. It is safe for concurrent use.
type Server struct {
	mode    Mode
	version string

	mu        sync.Mutex
	model     *Model
	now       func() time.Time
	requests  []string
	bytes     int64
	intercept func(w http.ResponseWriter, r *http.Request) bool
}

// NewServer returns a Server for m, which it owns from now on.
func NewServer(mode Mode, m *Model) *Server {
	return &Server{mode: mode, model: m, now: time.Now, version: "3.5.3"}
}

// SetNow replaces the clock used for the duration of running items.
func (s *Server) SetNow(now func() time.Time) {
	s.mu.Lock()
	s.now = now
	s.mu.Unlock()
}

// Update runs f with the model locked, so a test can change it between
// two polls of a client.
func (s *Server) Update(f func(m *Model)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s.model)
}

// Intercept installs f, which sees every request first and answers it
// itself when it returns true: to fail, stall or garble responses. nil
// removes it.
func (s *Server) Intercept(f func(w http.ResponseWriter, r *http.Request) bool) {
	s.mu.Lock()
	s.intercept = f
	s.mu.Unlock()
}

// Requests returns the request URIs (path and query) received since the
// last call, and forgets them.
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.requests
	s.requests = nil
	return r
}

// BytesServed returns the size of all response bodies written so far.
func (s *Server) BytesServed() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r.URL.RequestURI())
	icpt := s.intercept
	s.mu.Unlock()
	if icpt != nil && icpt(w, r) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	body, status, err := s.route(r)
	if err != nil {
		http.Error(w, err.Error(), status)
		return
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // Spark's Jackson writes "<console>" as is
	enc.SetIndent("", "  ")
	if err := enc.Encode(body); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	out := buf.Bytes()
	s.bytes += int64(len(out))
	w.Header().Set("Content-Type", "application/json")
	w.Write(out)
}

type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func notFound(format string, a ...any) error {
	return &httpError{http.StatusNotFound, fmt.Sprintf(format, a...)}
}

func badRequest(format string, a ...any) error {
	return &httpError{http.StatusBadRequest, fmt.Sprintf(format, a...)}
}

// route answers one request with the model locked.
func (s *Server) route(r *http.Request) (any, int, error) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/api/v1/")
	if !ok {
		return nil, http.StatusNotFound, notFound("not found: %s", r.URL.Path)
	}
	parts := strings.Split(strings.TrimSuffix(rest, "/"), "/")
	q := r.URL.Query()
	var body any
	var err error
	switch {
	case len(parts) == 1 && parts[0] == "version":
		body = map[string]string{"spark": s.version}
	case parts[0] != "applications":
		err = notFound("not found: %s", r.URL.Path)
	case len(parts) == 1:
		body, err = s.appList(q)
	default:
		body, err = s.app(parts[1:], q)
	}
	if err != nil {
		if he, ok := err.(*httpError); ok {
			return nil, he.status, err
		}
		return nil, http.StatusInternalServerError, err
	}
	return body, http.StatusOK, nil
}

// apps returns the applications the server shows.
func (s *Server) apps() []*App {
	if s.mode == LiveUI {
		if len(s.model.Apps) == 0 {
			return nil
		}
		return s.model.Apps[:1]
	}
	return s.model.Apps
}

var resources = []string{"jobs", "stages", "sql", "executors", "allexecutors", "environment", "storage"}

// app answers /applications/{app}[/{attempt}]/{resource}/...
func (s *Server) app(parts []string, q url.Values) (any, error) {
	var app *App
	for _, a := range s.apps() {
		if a.ID == parts[0] {
			app = a
		}
	}
	if app == nil {
		return nil, notFound("unknown app: %s", parts[0])
	}
	if len(parts) == 1 {
		return s.appJSON(app), nil
	}
	parts = parts[1:]
	var att *Attempt
	if !slices.Contains(resources, parts[0]) {
		// An attempt segment.
		id := parts[0]
		parts = parts[1:]
		if s.mode == LiveUI {
			att = app.Attempts[0]
		} else {
			for _, a := range app.Attempts {
				if a.ID == id {
					att = a
				}
			}
		}
		if att == nil || len(parts) == 0 {
			return nil, notFound("unknown app attempt: %s/%s", app.ID, id)
		}
	} else {
		att = app.Attempts[0]
		if s.mode == HistoryServer && att.ID != "" {
			// FsHistoryProvider matches the attempt id exactly.
			return nil, notFound("no such app: %s", app.ID)
		}
	}
	switch parts[0] {
	case "jobs":
		return s.jobs(att, parts[1:], q)
	case "stages":
		return s.stages(att, parts[1:], q)
	case "sql":
		return s.sql(att, parts[1:], q)
	case "executors", "allexecutors":
		if len(parts) != 1 {
			return nil, notFound("not found")
		}
		return s.executors(att, parts[0] == "allexecutors"), nil
	case "environment":
		return s.environment(att), nil
	}
	return nil, notFound("%s is not modelled", parts[0])
}

// environment answers /environment; only the Spark properties are
// modelled.
func (s *Server) environment(att *Attempt) sparkapi.Environment {
	env := sparkapi.Environment{Runtime: map[string]string{}, SparkProperties: [][2]string{}, HadoopProperties: [][2]string{},
		SystemProperties: [][2]string{}, ClasspathEntries: [][2]string{}}
	for _, k := range slices.Sorted(maps.Keys(att.Properties)) {
		env.SparkProperties = append(env.SparkProperties, [2]string{k, att.Properties[k]})
	}
	return env
}

func (s *Server) appJSON(a *App) sparkapi.Application {
	out := sparkapi.Application{ID: a.ID, Name: a.Name, Attempts: []sparkapi.Attempt{}}
	now := s.now()
	for _, at := range a.Attempts {
		j := sparkapi.Attempt{
			AttemptID: at.ID, StartTime: sparkapi.DateOf(at.Start), SparkUser: at.User,
			AppSparkVersion: at.SparkVersion, StartTimeEpoch: at.Start.UnixMilli(),
			Completed: !at.Running(),
		}
		if s.mode == LiveUI {
			j.AttemptID = ""
		}
		if at.Running() {
			// A running attempt ends at epoch -1 ms.
			j.EndTime, j.EndTimeEpoch = sparkapi.DateOf(time.UnixMilli(-1)), -1
			if s.mode == LiveUI {
				j.Duration = now.Sub(at.Start).Milliseconds()
				j.LastUpdated, j.LastUpdatedEpoch = j.StartTime, j.StartTimeEpoch
			} else {
				u := at.Updated
				if u.IsZero() {
					u = now
				}
				j.LastUpdated, j.LastUpdatedEpoch = sparkapi.DateOf(u), u.UnixMilli()
			}
		} else {
			j.EndTime, j.EndTimeEpoch = sparkapi.DateOf(at.End), at.End.UnixMilli()
			j.Duration = at.End.Sub(at.Start).Milliseconds()
			j.LastUpdated, j.LastUpdatedEpoch = j.EndTime, j.EndTimeEpoch
		}
		out.Attempts = append(out.Attempts, j)
	}
	return out
}

// parseDate reads Spark's SimpleDateParam: "yyyy-MM-dd'T'HH:mm:ss.SSSz"
// (a zone name or GMT±hh:mm) or "yyyy-MM-dd" (a GMT day).
func parseDate(v string) (time.Time, error) {
	for _, layout := range []string{"2006-01-02T15:04:05.000MST", "2006-01-02T15:04:05.000GMT-07:00", "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, badRequest("couldn't parse date: %s", v)
}

// appList answers /applications with Spark's filters and its order: by end
// time, newest first, running applications last.
func (s *Server) appList(q url.Values) (any, error) {
	// Spark's defaults: 2010-01-01 … 3000-01-01.
	lo, hi := time.Date(2010, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
	bounds := map[string]time.Time{"minDate": lo, "maxDate": hi, "minEndDate": lo, "maxEndDate": hi}
	for k := range bounds {
		if v := q.Get(k); v != "" {
			t, err := parseDate(v)
			if err != nil {
				return nil, err
			}
			bounds[k] = t
		}
	}
	var running, completed bool
	for _, st := range q["status"] {
		switch strings.ToLower(st) {
		case "running":
			running = true
		case "completed":
			completed = true
		default:
			return nil, badRequest("unknown status: %s", st)
		}
	}
	if !running && !completed {
		running, completed = true, true
	}
	limit := -1
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, badRequest("bad limit %q", v)
		}
		limit = n
	}
	now := s.now()
	type keyed struct {
		app *App
		end time.Time
	}
	var list []keyed
	for _, a := range s.apps() {
		// As Spark's ApplicationListResource: an application with a running
		// attempt counts as running, and then only maxEndDate applies to it.
		anyRunning := slices.ContainsFunc(a.Attempts, (*Attempt).Running)
		if anyRunning && !running || !anyRunning && !completed {
			continue
		}
		match := slices.ContainsFunc(a.Attempts, func(at *Attempt) bool {
			startOK := !at.Start.Before(bounds["minDate"]) && !at.Start.After(bounds["maxDate"])
			endOK := anyRunning && bounds["maxEndDate"].After(now) ||
				!anyRunning && !at.End.Before(bounds["minEndDate"]) && !at.End.After(bounds["maxEndDate"])
			return startOK && endOK
		})
		if match {
			list = append(list, keyed{a, a.Attempts[0].End})
		}
	}
	slices.SortStableFunc(list, func(x, y keyed) int {
		switch {
		case x.end.IsZero() != y.end.IsZero():
			if x.end.IsZero() {
				return 1
			}
			return -1
		}
		return y.end.Compare(x.end)
	})
	out := []sparkapi.Application{}
	for i, k := range list {
		if limit >= 0 && i >= limit {
			break
		}
		out = append(out, s.appJSON(k.app))
	}
	return out, nil
}

func toJobJSON(j *Job) sparkapi.Job {
	tags := j.Tags
	if tags == nil {
		tags = []string{}
	}
	stages := j.StageIDs
	if stages == nil {
		stages = []int{}
	}
	return sparkapi.Job{
		JobID: j.ID, Name: j.Name, Description: j.Description,
		SubmissionTime: sparkapi.OptDate(j.Submitted), CompletionTime: sparkapi.OptDate(j.Completed),
		StageIDs: stages, JobGroup: j.Group, JobTags: tags, Status: j.Status,
		NumTasks: j.Tasks, NumActiveTasks: j.ActiveTasks, NumCompletedTasks: j.CompletedTasks,
		NumSkippedTasks: j.SkippedTasks, NumFailedTasks: j.FailedTasks, NumKilledTasks: j.KilledTasks,
		NumCompletedIndices: j.CompletedTasks, NumActiveStages: j.ActiveStages,
		NumCompletedStages: j.CompletedStages, NumSkippedStages: j.SkippedStages,
		NumFailedStages: j.FailedStages, KilledTasksSummary: map[string]int{},
	}
}

// statusFilter reads repeatable status parameters, case-insensitively.
func statusFilter(q url.Values, allowed ...string) (map[string]bool, error) {
	set := map[string]bool{}
	for _, v := range q["status"] {
		u := strings.ToUpper(v)
		if !slices.Contains(allowed, u) {
			return nil, badRequest("unknown status: %s", v)
		}
		set[u] = true
	}
	return set, nil
}

func (s *Server) jobs(att *Attempt, parts []string, q url.Values) (any, error) {
	if len(parts) == 1 {
		id, err := strconv.Atoi(parts[0])
		if err != nil {
			return nil, notFound("unknown job: %s", parts[0])
		}
		j := att.Job(id)
		if j == nil {
			return nil, notFound("unknown job: %d", id)
		}
		return toJobJSON(j), nil
	}
	if len(parts) > 1 {
		return nil, notFound("not found")
	}
	want, err := statusFilter(q, JobRunning, JobSucceeded, JobFailed, JobUnknown)
	if err != nil {
		return nil, err
	}
	out := []sparkapi.Job{}
	for i := len(att.Jobs) - 1; i >= 0; i-- { // newest first
		if j := att.Jobs[i]; len(want) == 0 || want[j.Status] {
			out = append(out, toJobJSON(j))
		}
	}
	return out, nil
}

func toStageJSON(st *Stage) sparkapi.Stage {
	return sparkapi.Stage{
		Status: st.Status, StageID: st.ID, AttemptID: st.Attempt, NumTasks: st.Tasks,
		NumActiveTasks: st.ActiveTasks, NumCompleteTasks: st.CompleteTasks, NumFailedTasks: st.FailedTasks,
		NumKilledTasks: st.KilledTasks, NumCompletedIndices: st.CompleteTasks,
		SubmissionTime: sparkapi.OptDate(st.Submitted), FirstTaskLaunchedTime: sparkapi.OptDate(st.FirstLaunched),
		CompletionTime: sparkapi.OptDate(st.Completed), FailureReason: st.FailureReason,
		ExecutorRunTime: st.RunTimeMs, ExecutorCPUTime: st.CPUTimeNs, JVMGCTime: st.GCTimeMs,
		MemoryBytesSpilled: st.MemorySpilled, DiskBytesSpilled: st.DiskSpilled,
		InputBytes: st.InputBytes, InputRecords: st.InputRecords,
		OutputBytes: st.OutputBytes, OutputRecords: st.OutputRecords,
		ShuffleReadBytes: st.ShuffleReadBytes, ShuffleReadRecords: st.ShuffleReadRecords,
		ShuffleWriteBytes: st.ShuffleWriteBytes, ShuffleWriteRecords: st.ShuffleWriteRecs,
		Name: st.Name, Description: st.Description, Details: st.Details, SchedulingPool: "default",
		RDDIDs: []int{}, AccumulatorUpdates: []any{}, KilledTasksSummary: map[string]int{},
		ShuffleFetchWaitTime: st.FetchWaitMs, PeakExecutionMemory: st.PeakExecMemory,
	}
}

func (s *Server) stages(att *Attempt, parts []string, q url.Values) (any, error) {
	switch len(parts) {
	case 0:
		want, err := statusFilter(q, StageActive, StageComplete, StageFailed, StagePending, StageSkipped)
		if err != nil {
			return nil, err
		}
		out := []sparkapi.Stage{}
		for i := len(att.Stages) - 1; i >= 0; i-- { // descending (id, attempt)
			if st := att.Stages[i]; len(want) == 0 || want[st.Status] {
				out = append(out, toStageJSON(st))
			}
		}
		return out, nil
	case 1, 2:
		id, err := strconv.Atoi(parts[0])
		if err != nil {
			return nil, notFound("unknown stage: %s", parts[0])
		}
		var out []sparkapi.Stage
		for _, st := range att.Stages {
			if st.ID == id {
				out = append(out, toStageJSON(st))
			}
		}
		if len(out) == 0 {
			return nil, notFound("unknown stage: %d", id)
		}
		if len(parts) == 1 {
			return out, nil
		}
		a, err := strconv.Atoi(parts[1])
		if err != nil {
			return nil, notFound("unknown attempt: %s", parts[1])
		}
		for _, st := range out {
			if st.AttemptID == a {
				return st, nil
			}
		}
		return nil, notFound("unknown attempt for stage %d.  Found attempts: [%d]", id, out[0].AttemptID)
	case 3:
		id, err1 := strconv.Atoi(parts[0])
		a, err2 := strconv.Atoi(parts[1])
		st := att.Stage(id, a)
		if err1 != nil || err2 != nil || st == nil {
			return nil, notFound("unknown stage: %s/%s", parts[0], parts[1])
		}
		switch parts[2] {
		case "taskSummary":
			return s.taskSummary(st, q["quantiles"])
		case "taskList":
			return s.taskList(st, q)
		}
	}
	return nil, notFound("not found")
}

func (s *Server) toSQLJSON(x *Execution, plan bool) sparkapi.SQLExecution {
	ids := func(l []int) []int {
		if l == nil {
			return []int{}
		}
		return l
	}
	end := x.Completed
	if end.IsZero() {
		end = s.now()
	}
	out := sparkapi.SQLExecution{
		ID: x.ID, Status: x.Status(), Description: x.Description, SubmissionTime: sparkapi.OptDate(x.Submitted),
		Duration: end.Sub(x.Submitted).Milliseconds(), RunningJobIDs: ids(x.RunningJobs),
		SuccessJobIDs: ids(x.SucceededJobs), FailedJobIDs: ids(x.FailedJobs), Nodes: []any{}, Edges: []any{},
	}
	if plan {
		out.PlanDescription = x.Plan
	}
	return out
}

func boolParam(q url.Values, k string, def bool) bool {
	if v := q.Get(k); v != "" {
		b, err := strconv.ParseBool(v)
		if err == nil {
			return b
		}
	}
	return def
}

func (s *Server) sql(att *Attempt, parts []string, q url.Values) (any, error) {
	plan := boolParam(q, "planDescription", true)
	switch len(parts) {
	case 0:
		offset, length := 0, 20
		if v := q.Get("offset"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return nil, badRequest("bad offset %q", v)
			}
			offset = n
		}
		if v := q.Get("length"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return nil, badRequest("bad length %q", v)
			}
			length = n
		}
		out := []sparkapi.SQLExecution{}
		for i := offset; i < len(att.Executions) && i < offset+length; i++ {
			out = append(out, s.toSQLJSON(att.Executions[i], plan))
		}
		return out, nil
	case 1:
		id, err := strconv.ParseInt(parts[0], 10, 64)
		if err != nil {
			return nil, notFound("unknown query execution id: %s", parts[0])
		}
		x := att.Execution(id)
		if x == nil {
			return nil, notFound("unknown query execution id: %d", id)
		}
		return s.toSQLJSON(x, plan), nil
	}
	return nil, notFound("not found")
}

func (s *Server) executors(att *Attempt, all bool) []sparkapi.Executor {
	out := []sparkapi.Executor{}
	for _, x := range att.Executors {
		if !all && !x.Active() {
			continue
		}
		out = append(out, sparkapi.Executor{
			ID: x.ID, HostPort: x.HostPort, IsActive: x.Active(), TotalCores: x.Cores, MaxTasks: x.Cores,
			MaxMemory: x.MaxMemory, AddTime: sparkapi.OptDate(x.Added), RemoveTime: sparkapi.OptDate(x.Removed),
			TotalDuration: x.TaskTimeMs, TotalGCTime: x.GCTimeMs, CompletedTasks: x.CompletedTasks, FailedTasks: x.FailedTasks,
			TotalTasks:      x.CompletedTasks + x.FailedTasks + x.KilledTasks,
			TotalInputBytes: x.InputBytes, TotalShuffleRead: x.ShuffleRead, TotalShuffleWrite: x.ShuffleWrite,
			RemoveReason: x.RemoveReason, ExecutorLogs: map[string]string{}, PeakMemoryMetrics: x.Peak,
			Attributes: map[string]string{}, Resources: map[string]any{}, ExcludedInStages: []int{},
		})
	}
	return out
}
