package annotate

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/influxdata/line-protocol/v2/lineprotocol"
	"go.uber.org/zap"

	"github.com/sparkpulse/sparkpulse/sizing"
)

// Measurements.
const (
	MeasurementApp   = "spark_app"
	MeasurementJob   = "spark_job"
	MeasurementStage = "spark_stage"
	MeasurementSQL   = "spark_sql"
	// MeasurementExecutor has a point per driver and executor at the time
	// it was added: its host, cores, end and removal reason, and its peak
	// memory metrics.
	MeasurementExecutor = "spark_executor"
	// MeasurementExecutorRemoval has a point per executor removal at the
	// time of the removal, with the reason as text.
	MeasurementExecutorRemoval = "spark_executor_removal"
	// MeasurementSizing has, for a completed application, at its end: the
	// executors' memory limits (kind "limits"), then a point per finding
	// and per recommended setting of package sizing.
	MeasurementSizing = "spark_sizing"
)

// statusUnknown marks the running items of an attempt closed out after
// its source lost it.
const statusUnknown = "UNKNOWN"

// points encodes the points of one attempt, keeping only those whose
// content changed since they were last written.
type points struct {
	p     *Poller
	st    *appState
	enc   lineprotocol.Encoder
	batch []byte
	n     int
	ts    int64 // of the point being encoded, unix ns
}

// emit writes the attempt's points that changed; running items end at
// now. With closeOut, running items are written with status UNKNOWN. It
// returns the number of points written.
func (p *Poller) emit(st *appState, now time.Time, closeOut bool) int {
	w := &points{p: p, st: st}
	w.enc.SetPrecision(lineprotocol.Nanosecond)
	nowMs := now.UnixMilli()
	l := st.links()
	w.app(nowMs, closeOut)
	for _, id := range sortedKeys(st.jobs, func(a, b int) int { return a - b }) {
		w.job(st.jobs[id], l, nowMs, closeOut)
	}
	for _, k := range sortedKeys(st.stages, func(a, b stageKey) int {
		if a.id != b.id {
			return a.id - b.id
		}
		return a.attempt - b.attempt
	}) {
		w.stage(k, st.stages[k], l, nowMs, closeOut)
	}
	for _, id := range sortedKeys(st.sql, func(a, b int64) int { return int(a - b) }) {
		w.sql(st.sql[id], nowMs, closeOut)
	}
	for _, id := range sortedKeys(st.executors, compareExecutorIDs) {
		w.executor(st.executors[id], nowMs, closeOut)
	}
	if st.completed && st.properties != nil && st.end > 0 && len(st.executors) > 0 {
		w.sizing()
	}
	if w.n > 0 {
		p.cfg.Sink.Append(w.batch, w.n, true)
		p.stats.points.Add(uint64(w.n))
	}
	return w.n
}

// links are the relations between an attempt's items, and the stage times
// that stand in for jobs' own when those are missing (Spark 1.x logs have
// no job times).
type links struct {
	stageJobs map[int][]int // stage id → the jobs that include it
	jobSQL    map[int]int64 // job id → its SQL execution
	stageSpan map[int]span  // stage id → first submission, last completion of its attempts
}

type span struct{ first, last int64 }

func (st *appState) links() links {
	l := links{stageJobs: map[int][]int{}, jobSQL: map[int]int64{}, stageSpan: map[int]span{}}
	for id, j := range st.jobs {
		for _, s := range j.StageIDs {
			l.stageJobs[s] = append(l.stageJobs[s], id)
		}
	}
	for id, x := range st.sql {
		for _, jobs := range [][]int{x.RunningJobIDs, x.SuccessJobIDs, x.FailedJobIDs} {
			for _, j := range jobs {
				l.jobSQL[j] = id
			}
		}
	}
	for k, s := range st.stages {
		sub, end := optMS(s.SubmissionTime), optMS(s.CompletionTime)
		sp, ok := l.stageSpan[k.id]
		if sub > 0 && (!ok || sp.first == 0 || sub < sp.first) {
			sp.first = sub
		}
		sp.last = max(sp.last, end)
		l.stageSpan[k.id] = sp
	}
	return l
}

// jobTimes are a job's start and end, from its stages where Spark gives
// none.
func (l links) jobTimes(j *jobItem) (start, end int64) {
	start, end = optMS(j.SubmissionTime), optMS(j.CompletionTime)
	if start != 0 && end != 0 {
		return start, end
	}
	// From the job's stages: the first submitted, the last completed.
	var first, last int64
	for _, s := range j.StageIDs {
		sp := l.stageSpan[s]
		if sp.first > 0 && (first == 0 || sp.first < first) {
			first = sp.first
		}
		last = max(last, sp.last)
	}
	if start == 0 {
		start = first
	}
	if end == 0 {
		end = last
	}
	return start, end
}

// running gives a running item its end (now) and, when its attempt is
// closed out, status UNKNOWN.
func running(status, runningStatus string, end, start, nowMs int64, closeOut bool) (string, int64) {
	if status == runningStatus {
		end = nowMs
		if closeOut {
			status = statusUnknown
		}
	}
	return status, max(end, start)
}

// job writes a job's point if it changed.
func (w *points) job(j *jobItem, l links, nowMs int64, closeOut bool) {
	start, end := l.jobTimes(j)
	if start == 0 {
		return // never ran, or Spark knows no time for it
	}
	status, end := running(j.Status, "RUNNING", end, start, nowMs, closeOut)
	reason := ""
	if j.Status == "FAILED" {
		reason = w.jobFailure(j.StageIDs)
	}
	var stages []string
	for _, s := range j.StageIDs {
		stages = append(stages, strconv.Itoa(s))
	}
	title := fmt.Sprintf("Job %d %s", j.JobID, status)
	text := joinText(w.text(firstNonEmpty(j.Description, j.Name)), duration(end-start),
		tasks(j.NumTasks, j.NumFailedTasks, j.NumKilledTasks), w.reason(reason))
	w.start(MeasurementJob, start, int64(j.JobID%1_000_000))
	w.int("job_id", int64(j.JobID))
	w.str("status", status)
	w.int("end_ms", end)
	w.int("duration_ms", end-start)
	w.str("name", w.text(j.Name))
	w.str("description", w.text(j.Description))
	w.str("job_group", w.text(j.JobGroup))
	w.int("num_tasks", int64(j.NumTasks))
	w.int("num_completed_tasks", int64(j.NumCompletedTasks))
	w.int("num_failed_tasks", int64(j.NumFailedTasks))
	w.int("num_killed_tasks", int64(j.NumKilledTasks))
	w.int("num_skipped_tasks", int64(j.NumSkippedTasks))
	w.int("num_stages", int64(len(j.StageIDs)))
	w.int("num_failed_stages", int64(j.NumFailedStages))
	w.int("num_skipped_stages", int64(j.NumSkippedStages))
	w.str("stage_ids", strings.Join(stages, ","))
	if x, ok := l.jobSQL[j.JobID]; ok {
		w.int("sql_id", x)
	}
	w.str("failure_reason", w.reason(reason))
	w.common(title, text)
	w.end(&j.written)
}

// stage writes a stage attempt's point if it changed.
func (w *points) stage(k stageKey, s *stageItem, l links, nowMs int64, closeOut bool) {
	start, end := optMS(s.SubmissionTime), optMS(s.CompletionTime)
	if start == 0 {
		return // pending or skipped: it never ran
	}
	status, end := running(s.Status, "ACTIVE", end, start, nowMs, closeOut)
	var jobs []string
	ids := l.stageJobs[k.id]
	slices.Sort(ids)
	for _, j := range ids {
		jobs = append(jobs, strconv.Itoa(j))
	}
	reason := firstLine(s.FailureReason)
	title := fmt.Sprintf("Stage %d.%d %s", k.id, k.attempt, status)
	text := joinText(w.text(firstNonEmpty(s.Description, s.Name)), duration(end-start),
		tasks(s.NumTasks, s.NumFailedTasks, s.NumKilledTasks), w.reason(reason))
	w.start(MeasurementStage, start, int64(k.id%100_000)*10+int64(min(k.attempt, 9)))
	w.int("stage_id", int64(k.id))
	w.int("stage_attempt", int64(k.attempt))
	w.str("status", status)
	w.int("end_ms", end)
	w.int("duration_ms", end-start)
	w.str("name", w.text(s.Name))
	w.str("description", w.text(s.Description))
	w.int("num_tasks", int64(s.NumTasks))
	w.int("num_complete_tasks", int64(s.NumCompleteTasks))
	w.int("num_failed_tasks", int64(s.NumFailedTasks))
	w.int("num_killed_tasks", int64(s.NumKilledTasks))
	w.str("job_ids", strings.Join(jobs, ","))
	w.str("failure_reason", w.reason(reason))
	w.int("executor_run_time_ms", s.ExecutorRunTime)
	w.int("executor_cpu_time_ns", s.ExecutorCPUTime)
	w.int("input_bytes", s.InputBytes)
	w.int("output_bytes", s.OutputBytes)
	w.int("shuffle_read_bytes", s.ShuffleReadBytes)
	w.int("shuffle_write_bytes", s.ShuffleWriteBytes)
	w.int("memory_bytes_spilled", s.MemoryBytesSpilled)
	w.int("disk_bytes_spilled", s.DiskBytesSpilled)
	w.common(title, text)
	w.end(&s.written)
}

// sql writes a SQL execution's point if it changed.
func (w *points) sql(x *sqlItem, nowMs int64, closeOut bool) {
	start := optMS(x.SubmissionTime)
	if start == 0 {
		return
	}
	status, end := running(x.Status, "RUNNING", start+x.Duration, start, nowMs, closeOut)
	jobs := slices.Concat(x.SuccessJobIDs, x.FailedJobIDs, x.RunningJobIDs)
	slices.Sort(jobs)
	title := fmt.Sprintf("SQL %d %s", x.ID, status)
	text := joinText(w.text(x.Description), duration(end-start), jobList("jobs ", jobs), jobList("failed jobs ", x.FailedJobIDs))
	w.start(MeasurementSQL, start, x.ID%1_000_000)
	w.int("execution_id", x.ID)
	w.str("status", status)
	w.int("end_ms", end)
	w.int("duration_ms", end-start)
	w.str("description", w.text(x.Description))
	w.str("job_ids", intList(jobs))
	w.str("failed_job_ids", intList(x.FailedJobIDs))
	w.common(title, text)
	w.end(&x.written)
}

// app writes the attempt's own point.
func (w *points) app(nowMs int64, closeOut bool) {
	st := w.st
	status, end := "COMPLETED", st.end
	if !st.completed {
		status, end = "RUNNING", nowMs
		if closeOut {
			status = statusUnknown
		}
	}
	end = max(end, st.key.start)
	title := firstNonEmpty(st.name, st.key.app) + " " + status
	text := joinText(st.key.app, duration(end-st.key.start), prefixed("user ", st.user), prefixed("Spark ", st.version))
	// All attempts of an application share sub-millisecond 0: a live UI
	// and a History Server show the same attempt with different ids.
	w.start(MeasurementApp, st.key.start, 0)
	w.str("status", status)
	w.int("end_ms", end)
	w.int("duration_ms", end-st.key.start)
	w.str("spark_user", w.text(st.user))
	w.str("spark_version", w.text(st.version))
	w.str("title", w.text(title))
	w.str("text", text)
	w.str("attempt_id", w.text(st.attemptID))
	w.end(&st.written)
}

// jobFailure is the failure reason of a job: that of its first failed
// stage (Spark's job data has none of its own).
func (w *points) jobFailure(stageIDs []int) string {
	best := stageKey{-1, -1}
	for k, s := range w.st.stages {
		if s.Status == "FAILED" && slices.Contains(stageIDs, k.id) && (best.id < 0 || k.id < best.id || k.id == best.id && k.attempt < best.attempt) {
			best = k
		}
	}
	if best.id < 0 {
		return ""
	}
	return firstLine(w.st.stages[best].FailureReason)
}

// executor writes an executor's point and, once it was removed, the
// point of its removal.
func (w *points) executor(x *executorItem, nowMs int64, closeOut bool) {
	added := optMS(x.AddTime)
	if added == 0 {
		return
	}
	removed := optMS(x.RemoveTime)
	status, end := "REMOVED", removed
	switch {
	case removed > 0:
	case w.st.completed:
		status, end = "ENDED", w.st.end // it lived until the application ended
	default:
		status, end = "ACTIVE", nowMs
		if closeOut {
			status = statusUnknown
		}
	}
	end = max(end, added)
	host, _, err := net.SplitHostPort(x.HostPort)
	if err != nil {
		host = x.HostPort
	}
	name := "Executor " + x.ID
	if x.ID == "driver" {
		name = "Driver"
	}
	reason := firstLine(x.RemoveReason)
	peaks := ""
	if v, ok := x.PeakMemoryMetrics["JVMHeapMemory"]; ok {
		peaks = "peak heap " + sizing.Bytes(v)
	}
	if v, ok := x.PeakMemoryMetrics["ProcessTreeJVMRSSMemory"]; ok && v > 0 {
		peaks = joinText(peaks, "peak JVM RSS "+sizing.Bytes(v))
	}
	if v, ok := x.PeakMemoryMetrics["ProcessTreePythonRSSMemory"]; ok && v > 0 {
		peaks = joinText(peaks, "peak Python RSS "+sizing.Bytes(v))
	}
	sub := executorSub(x.ID)

	w.start(MeasurementExecutor, added, sub)
	w.str("executor_id", w.text(x.ID))
	w.str("host", w.text(host))
	w.str("host_port", w.text(x.HostPort))
	w.str("status", status)
	w.int("end_ms", end)
	w.int("duration_ms", end-added)
	w.int("cores", int64(x.TotalCores))
	w.int("max_memory", x.MaxMemory)
	w.int("completed_tasks", int64(x.CompletedTasks))
	w.int("failed_tasks", int64(x.FailedTasks))
	w.int("task_time_ms", x.TotalDuration)
	w.int("gc_time_ms", x.TotalGCTime)
	if x.TotalDuration > 0 {
		w.float("gc_share", float64(x.TotalGCTime)/float64(x.TotalDuration))
	}
	w.str("remove_reason", w.reason(reason))
	for _, k := range sortedKeys(x.PeakMemoryMetrics, strings.Compare) {
		w.int("peak_"+k, x.PeakMemoryMetrics[k])
	}
	w.common(fmt.Sprintf("%s %s", name, status), joinText("on "+host, fmt.Sprintf("%d cores", x.TotalCores),
		duration(end-added), peaks, w.reason(reason)))
	w.end(&x.written)

	if removed == 0 {
		return
	}
	w.start(MeasurementExecutorRemoval, removed, sub)
	w.str("executor_id", w.text(x.ID))
	w.str("host", w.text(host))
	w.str("status", "REMOVED")
	w.int("end_ms", removed) // a moment, not a region
	w.int("added_ms", added)
	w.int("duration_ms", removed-added)
	w.str("remove_reason", w.reason(reason))
	w.common(name+" removed", joinText("on "+host, "after "+duration(removed-added), peaks, w.reason(reason)))
	w.end(&x.removal)
}

// sizing writes the advice for a completed attempt's executors, at its
// end: the limits, then the findings and the recommended settings, the
// n-th point n ns after the end's millisecond.
func (w *points) sizing() {
	st := w.st
	s, err := sizing.FromProperties(st.properties)
	if err != nil {
		w.p.log.Warn("no sizing advice", zap.String("application", st.key.String()), zap.Error(err))
		return
	}
	var execs []sizing.Executor
	for _, id := range sortedKeys(st.executors, compareExecutorIDs) {
		execs = append(execs, executorSizing(&st.executors[id].Executor))
	}
	a := sizing.Advise(s, execs)
	n := 1 + len(a.Findings) + len(a.Recommendations)
	for len(st.advice) < n {
		st.advice = append(st.advice, 0)
	}
	i := 0
	next := func(kind string) {
		w.start(MeasurementSizing, st.end, int64(i))
		w.str("kind", kind)
	}
	done := func() {
		w.str("attempt_id", w.text(st.attemptID))
		w.end(&st.advice[i])
		i++
	}
	next("limits")
	w.int("heap_bytes", s.Heap)
	w.int("unified_bytes", s.Unified())
	w.int("overhead_bytes", s.Overhead)
	w.int("pyspark_bytes", s.PySpark)
	w.int("off_heap_bytes", s.OffHeap)
	w.int("container_bytes", s.Container())
	w.int("executors", int64(len(a.Executors)))
	summary := fmt.Sprintf("heap %s, overhead %s, container %s: %d findings, %d settings to change",
		sizing.Bytes(s.Heap), sizing.Bytes(s.Overhead), sizing.Bytes(s.Container()), len(a.Findings), len(a.Recommendations))
	w.str("text", joinText(append([]string{summary}, a.Notes...)...))
	done()
	for _, f := range a.Findings {
		next("finding")
		w.str("rule", f.Rule)
		w.str("executor", w.text(f.Executor))
		w.str("text", w.reason(f.Text))
		done()
	}
	for _, r := range a.Recommendations {
		next("setting")
		w.str("property", r.Property)
		w.str("value", sizing.SparkSize(r.Value))
		if r.Current > 0 {
			w.str("current", sizing.SparkSize(r.Current))
		}
		w.str("reason", w.reason(r.Reason))
		w.str("text", fmt.Sprintf("--conf %s=%s", r.Property, sizing.SparkSize(r.Value)))
		done()
	}
}

// executorSub is the executor's id in the sub-millisecond digits of its
// points: the driver 0, executor n n%999999+1, any other id a hash.
func executorSub(id string) int64 {
	if id == "driver" {
		return 0
	}
	if n, err := strconv.ParseInt(id, 10, 64); err == nil && n >= 0 {
		return n%999_999 + 1
	}
	h := fnv.New32a()
	h.Write([]byte(id))
	return int64(h.Sum32()%999_999) + 1
}

// compareExecutorIDs orders the driver first, then executors by number.
func compareExecutorIDs(a, b string) int {
	rank := func(id string) int {
		if id == "driver" {
			return 0
		}
		return 1
	}
	return cmp.Or(rank(a)-rank(b), len(a)-len(b), strings.Compare(a, b))
}

func (w *points) start(measurement string, startMs, sub int64) {
	w.enc.Reset()
	w.enc.StartLine(measurement)
	w.enc.AddTag("applicationid", tagValue(w.st.key.app))
	if name := tagValue(w.st.name); name != "" {
		w.enc.AddTag("appname", name)
	}
	w.ts = startMs*1_000_000 + sub
}

func (w *points) int(key string, v int64) { w.enc.AddField(key, lineprotocol.IntValue(v)) }

func (w *points) float(key string, v float64) {
	if val, ok := lineprotocol.FloatValue(v); ok {
		w.enc.AddField(key, val)
	}
}

// str adds a string field unless it is empty; empty means "not known",
// and an earlier value of the point, if any, is kept.
func (w *points) str(key, v string) {
	if v == "" {
		return
	}
	if val, ok := lineprotocol.StringValue(strings.ToValidUTF8(v, "\uFFFD")); ok {
		w.enc.AddField(key, val)
	}
}

func (w *points) common(title, text string) {
	w.str("title", w.text(title))
	w.str("text", text)
	w.str("attempt_id", w.text(w.st.attemptID))
}

// end finishes the point and adds it to the batch if it differs from what
// was last written for the item.
func (w *points) end(written *uint64) {
	w.enc.EndLine(time.Unix(0, w.ts))
	if err := w.enc.Err(); err != nil {
		w.p.log.Warn("annotation point not encodable", zap.String("application", w.st.key.String()), zap.Error(err))
		return
	}
	line := w.enc.Bytes()
	h := fnv.New64a()
	h.Write(line)
	sum := h.Sum64() | 1 // never 0, the value of "not written"
	if sum == *written {
		return
	}
	*written = sum
	w.batch = append(w.batch, line...)
	w.n++
}

// text prepares user text for a field: white space collapsed, trimmed to
// MaxText characters.
func (w *points) text(s string) string { return trim(collapse(s), w.p.cfg.MaxText) }

// reason is text for failure reasons, which are allowed to be longer.
func (w *points) reason(s string) string { return trim(collapse(s), 2*w.p.cfg.MaxText) }

func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }

func trim(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimSpace(string(r[:n-1])) + "…"
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

// tagValue makes a string fit for a tag value: no control characters,
// valid UTF-8, no trailing backslash.
func tagValue(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	return strings.TrimRight(strings.TrimSpace(s), `\`)
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func prefixed(prefix, v string) string {
	if v == "" {
		return ""
	}
	return prefix + v
}

func joinText(parts ...string) string {
	parts = slices.DeleteFunc(parts, func(s string) bool { return s == "" })
	return strings.Join(parts, " · ")
}

func duration(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d < time.Second:
		return d.String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

func tasks(n, failed, killed int) string {
	s := strconv.Itoa(n) + " tasks"
	if n == 1 {
		s = "1 task"
	}
	if failed > 0 {
		s += fmt.Sprintf(", %d failed", failed)
	}
	if killed > 0 {
		s += fmt.Sprintf(", %d killed", killed)
	}
	return s
}

func intList(ids []int) string {
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(id))
	}
	return b.String()
}

func jobList(prefix string, ids []int) string {
	if len(ids) == 0 {
		return ""
	}
	return prefix + intList(ids)
}

func sortedKeys[K comparable, V any](m map[K]V, cmp func(a, b K) int) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, cmp)
	return keys
}
