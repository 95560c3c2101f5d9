package annotate

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"hash/maphash"
	"maps"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/influxdata/line-protocol/v2/lineprotocol"
	"go.uber.org/zap"

	"github.com/sparkpulse/sparkpulse/accounting"
	"github.com/sparkpulse/sparkpulse/attempt"
	"github.com/sparkpulse/sparkpulse/facts"
	"github.com/sparkpulse/sparkpulse/human"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/sizing"
	"github.com/sparkpulse/sparkpulse/timespent"
)

// statusUnknown marks the running items of an attempt closed out after
// its source lost it.
const statusUnknown = "UNKNOWN"

// points encodes the facts of one attempt that were not written yet.
type points struct {
	p     *Poller
	st    *appState
	now   time.Time // for the ledger
	enc   lineprotocol.Encoder
	batch []byte
	n     int
	ts    int64 // of the point being encoded, unix ns
	key   facts.Key

	facts []facts.Key // written by this emit, for the ledger
	hist  []byte      // spark_app_history points (History)
	hn    int
	snaps map[string]facts.Snapshot // executor snapshots written, by process
}

// emit writes the attempt's facts not written yet; running items' ends
// are now. With closeOut, running items are written as lost, status
// UNKNOWN. It returns the number of points written.
func (p *Poller) emit(st *appState, now time.Time, closeOut bool) int {
	// One emit of an application at a time: when a configured source
	// takes it over from a template instance, both may emit at once, and
	// the ledger's check and record must not interleave.
	lock := &p.emitLocks[maphash.String(p.emitSeed, st.Key.App)%emitStripes]
	lock.Lock()
	defer lock.Unlock()
	p.markShown(st)
	nowMs := now.UnixMilli()
	acc := p.accounts(st, nowMs, closeOut) // worked out first: the encoder only encodes
	w := &points{p: p, st: st, now: p.cfg.Now(), snaps: map[string]facts.Snapshot{}}
	w.enc.SetPrecision(lineprotocol.Nanosecond)
	l := st.links()
	w.app(nowMs, closeOut)
	for _, id := range slices.SortedFunc(maps.Keys(st.Jobs), func(a, b int) int { return a - b }) {
		w.job(st.Jobs[id], l, nowMs, closeOut)
	}
	for _, k := range slices.SortedFunc(maps.Keys(st.Stages), attempt.CompareStageKeys) {
		w.stage(k, st.Stages[k], l, nowMs, closeOut)
		w.stageProgressPoint(k, st.Stages[k])
	}
	for _, id := range slices.SortedFunc(maps.Keys(st.SQL), func(a, b int64) int { return int(a - b) }) {
		w.sql(st.SQL[id], nowMs, closeOut)
	}
	for _, id := range slices.SortedFunc(maps.Keys(st.Executors), accounting.CompareExecutorIDs) {
		w.executor(st.Executors[id], now, closeOut)
	}
	if acc.final != nil {
		w.sizing(acc.final)
	}
	if acc.estimate != nil {
		w.usageEstimate(*acc.estimate, acc.estimateMs)
	}
	if acc.lost != nil {
		w.usageLost(*acc.lost, nowMs)
	}
	n, _ := p.deliver(st, w) // refused as the sink closes: the ledger does not record them, so they are made again
	return n
}

// deliver writes the points w encoded through the ledger (facts.Store.Write:
// journalled, handed to the sink, recorded); it returns the number of
// points written, and false when the sink, closing, took none. Called
// with the application's emit lock held.
func (p *Poller) deliver(st *appState, w *points) (int, bool) {
	b := facts.Batch{App: st.Key.App, Attempt: st.Key, Facts: w.facts, Snaps: w.snaps, N: w.n, Lines: w.batch,
		HistoryN: w.hn, History: w.hist}
	if !p.facts.Write(b, w.now) {
		return 0, false // the sink is closing: nothing was written
	}
	p.stats.points.Add(uint64(w.n))
	return w.n, true
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
	for id, j := range st.Jobs {
		for _, s := range j.StageIDs {
			l.stageJobs[s] = append(l.stageJobs[s], id)
		}
	}
	for id, x := range st.SQL {
		for _, jobs := range [][]int{x.RunningJobIDs, x.SuccessJobIDs, x.FailedJobIDs} {
			for _, j := range jobs {
				l.jobSQL[j] = id
			}
		}
	}
	for k, s := range st.Stages {
		sub, end := optMS(s.SubmissionTime), optMS(s.CompletionTime)
		sp, ok := l.stageSpan[k.ID]
		if sub > 0 && (!ok || sp.first == 0 || sub < sp.first) {
			sp.first = sub
		}
		sp.last = max(sp.last, end)
		l.stageSpan[k.ID] = sp
	}
	return l
}

// jobTimes are a job's start and end, from its stages where Spark gives
// none.
func (l links) jobTimes(j *attempt.Job) (start, end int64) {
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

// phase is the fact an item's status calls for: start while it runs
// (lost, status UNKNOWN, when its attempt is closed out), else end.
func phase(status, runningStatus string, closeOut bool) (int, string) {
	switch {
	case status != runningStatus:
		return phaseEnd, status
	case closeOut:
		return phaseLost, statusUnknown
	}
	return phaseStart, status
}

// job writes a job's fact, if not written yet.
func (w *points) job(j *attempt.Job, l links, nowMs int64, closeOut bool) {
	start, end := l.jobTimes(j)
	if start == 0 {
		return // never ran, or Spark knows no time for it
	}
	ph, status := phase(j.Status, "RUNNING", closeOut)
	if !w.begin(schema.MeasurementJob, factTime(start, int64(j.JobID), ph)) {
		return
	}
	var stages []string
	for _, s := range j.StageIDs {
		stages = append(stages, strconv.Itoa(s))
	}
	title := fmt.Sprintf("Job %d %s", j.JobID, status)
	w.int(schema.FieldJobID, int64(j.JobID))
	w.str(schema.FieldStatus, status)
	w.str(schema.FieldName, w.text(j.Name))
	w.str(schema.FieldDescription, w.text(j.Description))
	w.str(schema.FieldJobGroup, w.text(j.JobGroup))
	w.int(schema.FieldNumTasks, int64(j.NumTasks))
	w.int(schema.FieldNumStages, int64(len(j.StageIDs)))
	w.str(schema.FieldStageIDs, strings.Join(stages, ","))
	if ph == phaseStart {
		w.common(ph, title, joinText(w.text(firstNonEmpty(j.Description, j.Name)), tasks(j.NumTasks, 0, 0)))
		w.end()
		return
	}
	end = w.span(ph, start, end, nowMs)
	reason := ""
	if j.Status == "FAILED" {
		reason = w.jobFailure(j.StageIDs)
	}
	w.int(schema.FieldNumCompletedTasks, int64(j.NumCompletedTasks))
	w.int(schema.FieldNumFailedTasks, int64(j.NumFailedTasks))
	w.int(schema.FieldNumKilledTasks, int64(j.NumKilledTasks))
	w.int(schema.FieldNumSkippedTasks, int64(j.NumSkippedTasks))
	w.int(schema.FieldNumFailedStages, int64(j.NumFailedStages))
	w.int(schema.FieldNumSkippedStages, int64(j.NumSkippedStages))
	if x, ok := l.jobSQL[j.JobID]; ok {
		w.int(schema.FieldSQLID, x)
	}
	w.str(schema.FieldFailureReason, w.reason(reason))
	w.common(ph, title, joinText(w.text(firstNonEmpty(j.Description, j.Name)), timespent.Duration(end-start),
		tasks(j.NumTasks, j.NumFailedTasks, j.NumKilledTasks), w.reason(reason)))
	w.end()
}

// stage writes a stage attempt's fact, if not written yet.
func (w *points) stage(k attempt.StageKey, s *attempt.Stage, l links, nowMs int64, closeOut bool) {
	start, end := optMS(s.SubmissionTime), optMS(s.CompletionTime)
	if start == 0 {
		return // pending or skipped: it never ran
	}
	ph, status := phase(s.Status, "ACTIVE", closeOut)
	if ph == phaseEnd {
		w.taskFailures(k, s) // each written once, like the stage's end
	}
	if !w.begin(schema.MeasurementStage, stageFactTime(k, start, ph)) {
		return
	}
	title := fmt.Sprintf("Stage %d.%d %s", k.ID, k.Attempt, status)
	w.int(schema.FieldStageID, int64(k.ID))
	w.int(schema.FieldStageAttempt, int64(k.Attempt))
	w.str(schema.FieldStatus, status)
	w.str(schema.FieldName, w.text(s.Name))
	w.str(schema.FieldDescription, w.text(s.Description))
	w.int(schema.FieldNumTasks, int64(s.NumTasks))
	if ph == phaseStart {
		w.common(ph, title, joinText(w.text(firstNonEmpty(s.Description, s.Name)), tasks(s.NumTasks, 0, 0)))
		w.end()
		return
	}
	end = w.span(ph, start, end, nowMs)
	var jobs []string
	ids := l.stageJobs[k.ID]
	slices.Sort(ids)
	for _, j := range ids {
		jobs = append(jobs, strconv.Itoa(j))
	}
	reason := firstLine(s.FailureReason)
	w.int(schema.FieldNumCompleteTasks, int64(s.NumCompleteTasks))
	w.int(schema.FieldNumFailedTasks, int64(s.NumFailedTasks))
	w.int(schema.FieldNumKilledTasks, int64(s.NumKilledTasks))
	w.str(schema.FieldJobIDs, strings.Join(jobs, ","))
	w.str(schema.FieldFailureReason, w.reason(reason))
	w.int(schema.FieldExecutorRunTimeMs, s.ExecutorRunTime)
	w.int(schema.FieldExecutorCpuTimeNs, s.ExecutorCPUTime)
	w.int(schema.FieldInputBytes, s.InputBytes)
	w.int(schema.FieldOutputBytes, s.OutputBytes)
	w.int(schema.FieldShuffleReadBytes, s.ShuffleReadBytes)
	w.int(schema.FieldShuffleWriteBytes, s.ShuffleWriteBytes)
	w.int(schema.FieldMemoryBytesSpilled, s.MemoryBytesSpilled)
	w.int(schema.FieldDiskBytesSpilled, s.DiskBytesSpilled)
	w.stageDetailFields(s)
	w.common(ph, title, joinText(w.text(firstNonEmpty(s.Description, s.Name)), timespent.Duration(end-start), w.skewText(s),
		tasks(s.NumTasks, s.NumFailedTasks, s.NumKilledTasks), w.reason(reason)))
	w.end()
}

// sql writes a SQL execution's fact, if not written yet.
func (w *points) sql(x *attempt.SQL, nowMs int64, closeOut bool) {
	start := optMS(x.SubmissionTime)
	if start == 0 {
		return
	}
	ph, status := phase(x.Status, "RUNNING", closeOut)
	if !w.begin(schema.MeasurementSQL, factTime(start, x.ID, ph)) {
		return
	}
	title := fmt.Sprintf("SQL %d %s", x.ID, status)
	w.int(schema.FieldExecutionID, x.ID)
	w.str(schema.FieldStatus, status)
	w.str(schema.FieldDescription, w.text(x.Description))
	if ph == phaseStart {
		w.common(ph, title, w.text(x.Description))
		w.end()
		return
	}
	end := w.span(ph, start, start+x.Duration, nowMs)
	jobs := slices.Concat(x.SuccessJobIDs, x.FailedJobIDs, x.RunningJobIDs)
	slices.Sort(jobs)
	w.str(schema.FieldJobIDs, human.IDs(jobs))
	w.str(schema.FieldFailedJobIDs, human.IDs(x.FailedJobIDs))
	w.common(ph, title, joinText(w.text(x.Description), timespent.Duration(end-start), jobList("jobs ", jobs), jobList("failed jobs ", x.FailedJobIDs)))
	w.end()
}

// app writes the attempt's own fact, if not written yet.
func (w *points) app(nowMs int64, closeOut bool) {
	st := w.st
	status := "COMPLETED"
	if !st.Completed {
		status = "RUNNING"
	}
	ph, status := phase(status, "RUNNING", closeOut)
	// All attempts of an application share id 0: a live UI and a History
	// Server show the same attempt with different ids.
	if !w.begin(schema.MeasurementApp, factTime(st.Key.Start, 0, ph)) {
		return
	}
	w.str(schema.FieldStatus, status)
	w.str(schema.FieldAppID, w.text(st.Key.App)) // the applicationid tag is the metrics' key (namespace.go)
	w.str(schema.FieldSparkUser, w.text(st.User))
	w.str(schema.FieldSparkVersion, w.text(st.Version))
	title := firstNonEmpty(st.Name, st.Key.App) + " " + status
	if ph == phaseStart {
		w.common(ph, title, joinText(st.Key.App, prefixed("user ", st.User), prefixed("Spark ", st.Version)))
		w.end()
		return
	}
	end := w.span(ph, st.Key.Start, st.End, nowMs)
	w.common(ph, title, joinText(st.Key.App, timespent.Duration(end-st.Key.Start), prefixed("user ", st.User), prefixed("Spark ", st.Version)))
	w.end()
}

// span writes the end and the duration of what started at start and
// ended at end, or, lost, is closed out at nowMs, and returns the end,
// never before the start.
func (w *points) span(ph int, start, end, nowMs int64) int64 {
	if ph == phaseLost {
		end = nowMs
	}
	end = max(end, start)
	w.int(schema.FieldEndMs, end)
	w.int(schema.FieldDurationMs, end-start)
	return end
}

// jobFailure is the failure reason of a job: that of its first failed
// stage (Spark's job data has none of its own).
func (w *points) jobFailure(stageIDs []int) string {
	best := attempt.StageKey{ID: -1, Attempt: -1}
	for k, s := range w.st.Stages {
		if s.Status == "FAILED" && slices.Contains(stageIDs, k.ID) && (best.ID < 0 || k.ID < best.ID || k.ID == best.ID && k.Attempt < best.Attempt) {
			best = k
		}
	}
	if best.ID < 0 {
		return ""
	}
	return firstLine(w.st.Stages[best].FailureReason)
}

// executor writes a snapshot of an executor, in its own series (tag
// process), when something changed since the last one; and, once it was
// removed, the fact of its removal.
func (w *points) executor(x *attempt.Executor, now time.Time, closeOut bool) {
	added := optMS(x.AddTime)
	if added == 0 || w.full() {
		return
	}
	nowMs := now.UnixMilli()
	removed := optMS(x.RemoveTime)
	status, end := "REMOVED", removed
	switch {
	case removed > 0:
	case w.st.Completed:
		status, end = "ENDED", w.st.End // it lived until the application ended
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
	process := tagValue(x.ID)

	w.startLine(schema.MeasurementExecutor)
	w.enc.AddTag(schema.TagProcess, process)
	w.str(schema.FieldExecutorID, w.text(x.ID))
	w.str(schema.FieldHost, w.text(host))
	w.str(schema.FieldHostPort, w.text(x.HostPort))
	w.str(schema.FieldStatus, status)
	w.int(schema.FieldAddedMs, added)
	if status != "ACTIVE" { // an active executor's end and duration change with every look
		w.int(schema.FieldEndMs, end)
		w.int(schema.FieldDurationMs, end-added)
	}
	w.int(schema.FieldCores, int64(x.TotalCores))
	w.int(schema.FieldMaxMemory, x.MaxMemory)
	w.int(schema.FieldCompletedTasks, int64(x.CompletedTasks))
	w.int(schema.FieldFailedTasks, int64(x.FailedTasks))
	w.int(schema.FieldTaskTimeMs, x.TotalDuration)
	w.int(schema.FieldGCTimeMs, x.TotalGCTime)
	if x.TotalDuration > 0 {
		w.float(schema.FieldGCShare, float64(x.TotalGCTime)/float64(x.TotalDuration))
	}
	w.str(schema.FieldRemoveReason, w.reason(reason))
	if x.RemoveReason != "" {
		w.str(schema.FieldRemoveKind, w.st.removeKind(x.RemoveReason))
	}
	w.peaks(x.PeakMemoryMetrics)
	w.str(schema.FieldTitle, w.text(fmt.Sprintf("%s %s", name, status)))
	w.str(schema.FieldText, joinText("on "+host, fmt.Sprintf("%d cores", x.TotalCores), peaks, w.reason(reason)))
	w.str(schema.FieldAttemptID, w.text(w.st.AttemptID))
	w.snapshot(process, now.UnixNano())

	if removed == 0 || !w.begin(schema.MeasurementExecutorRemoval, removed*1_000_000+executorSub(x.ID)) {
		return
	}
	w.str(schema.FieldExecutorID, w.text(x.ID))
	w.str(schema.FieldHost, w.text(host))
	w.str(schema.FieldStatus, "REMOVED")
	w.int(schema.FieldEndMs, removed) // a moment, not a region
	w.int(schema.FieldAddedMs, added)
	w.int(schema.FieldDurationMs, removed-added)
	w.str(schema.FieldRemoveReason, w.reason(reason))
	w.str(schema.FieldRemoveKind, w.st.removeKind(x.RemoveReason))
	w.common(phaseEnd, name+" removed", joinText("on "+host, "after "+timespent.Duration(removed-added), peaks, w.reason(reason)))
	w.end()
}

// sizing writes a completed attempt's accounting and reconciliation and
// the advice for its executors (f, worked out by accounts), at its end:
// the limits, then the findings and the recommended settings, the n-th
// point n ns after the end's millisecond.
func (w *points) sizing(f *assessed) {
	st := w.st
	a := f.advice
	w.usage(f.result.Usage, a, phaseEnd, st.End*1_000_000)
	if w.p.cfg.Stream != nil {
		w.reconcile(f.result.Reconciliation)
	}
	i := 0
	next := func(kind string) bool {
		i++
		if !w.begin(schema.MeasurementSizing, st.End*1_000_000+int64(i-1)) {
			return false
		}
		w.str(schema.SizingKind, kind)
		return true
	}
	done := func() {
		w.str(schema.FieldAttemptID, w.text(st.AttemptID))
		w.end()
	}
	if !next("limits") {
		return // written before: advice is written whole, once
	}
	s := a.Settings
	w.int(schema.SizingHeapBytes, s.Heap)
	w.int(schema.SizingUnifiedBytes, s.Unified())
	w.int(schema.SizingOverheadBytes, s.Overhead)
	w.int(schema.SizingPySparkBytes, s.PySpark)
	w.int(schema.SizingOffHeapBytes, s.OffHeap)
	w.int(schema.SizingContainerBytes, s.Container())
	w.int(schema.SizingExecutors, int64(len(a.Executors)))
	summary := fmt.Sprintf("heap %s, overhead %s, container %s: %d findings, %d settings to change",
		sizing.Bytes(s.Heap), sizing.Bytes(s.Overhead), sizing.Bytes(s.Container()), len(a.Findings), len(a.Recommendations))
	w.str(schema.FieldText, joinText(append([]string{summary}, a.Notes...)...))
	done()
	for _, f := range a.Findings {
		if !next("finding") {
			continue
		}
		w.str(schema.SizingRule, f.Rule)
		w.str(schema.SizingExecutor, w.text(f.Executor))
		w.str(schema.FieldText, w.reason(f.Text))
		done()
	}
	for _, r := range a.Recommendations {
		if !next("setting") {
			continue
		}
		w.str(schema.SizingProperty, r.Property)
		w.str(schema.SizingValue, r.ValueString())
		w.str(schema.SizingCurrent, r.CurrentString())
		w.str(schema.SizingRule, r.Rule)
		w.str(schema.SizingReason, w.reason(r.Reason))
		w.str(schema.SizingRisk, r.Risk)
		w.float(schema.SizingSavingCoreSeconds, r.SavingCoreSeconds)
		w.float(schema.SizingSavingByteSeconds, r.SavingByteSeconds)
		if r.SavingGPUSeconds != 0 {
			w.float(schema.SizingSavingGPUSeconds, r.SavingGPUSeconds)
		}
		w.str(schema.FieldText, fmt.Sprintf("--conf %s=%s", r.Property, r.ValueString()))
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

// begin starts the fact of measurement at ts, the application's tags
// set; false when it was written before, and nothing is to be added.
func (w *points) begin(measurement string, ts int64) bool {
	w.key = facts.NewKey(measurement, ts)
	if w.p.facts.Has(w.st.Key.App, w.key, w.now) || slices.Contains(w.facts, w.key) {
		return false
	}
	// The application's share of the writer per poll: the rest waits for
	// the next poll (it is not recorded as written). The advice and the
	// accounting, a few points written whole, are not held back.
	if measurement != schema.MeasurementSizing && measurement != schema.MeasurementUsage && measurement != schema.MeasurementReconcile && w.full() {
		return false
	}
	w.startLine(measurement)
	w.ts = ts
	return true
}

// full reports, and counts, that the application has written its share
// of the writer this poll (maxPointsPerEmit): what is left waits for the
// next poll, not recorded as written.
func (w *points) full() bool {
	if w.n < maxPointsPerEmit {
		return false
	}
	w.p.stats.deferred.Add(1)
	return true
}

func (w *points) startLine(measurement string) {
	w.enc.Reset()
	w.enc.StartLine(measurement)
	w.enc.AddTag(schema.TagApplicationID, tagValue(w.st.tagKey()))
	if name := tagValue(w.st.Name); name != "" {
		w.enc.AddTag(schema.TagAppName, name)
	}
}

func (w *points) int(key string, v int64) { w.enc.AddField(key, lineprotocol.IntValue(v)) }

func (w *points) bool(key string, v bool) { w.enc.AddField(key, lineprotocol.BoolValue(v)) }

// skewText says in a stage's text how uneven its tasks were.
func (w *points) skewText(s *attempt.Stage) string {
	if s.Details == nil || s.Details.Summary == nil {
		return ""
	}
	rt := s.Details.Summary.ExecutorRunTime
	if rt[0] <= 0 {
		return ""
	}
	t := fmt.Sprintf("tasks %s median, %s longest (×%.1f)", timespent.Duration(int64(rt[0])), timespent.Duration(int64(rt[2])), rt[2]/rt[0])
	if sl := s.Details.Slowest; sl != nil {
		t += " on " + w.text(sl.Host)
	}
	return t
}

// Peak metric names become field keys, and a source answers what it
// likes: only names of Spark's form are written, at most maxPeaks per
// point (Spark 3.5 has 21), so that a hostile source cannot add columns
// without bound (InfluxDB 3 refuses writes to a table past 500). The
// rest are counted in Stats.Invalid.
const maxPeaks = 40

var peakNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]{0,63}$`)

// peaks writes a process's or stage's peak executor metrics as peak_<name>.
func (w *points) peaks(m map[string]int64) {
	n := 0
	for _, k := range slices.SortedFunc(maps.Keys(m), strings.Compare) {
		if n == maxPeaks || !peakNameRE.MatchString(k) {
			w.p.stats.invalid.Add(1)
			continue
		}
		w.int(schema.FieldPeakPrefix+k, m[k])
		n++
	}
}

func (w *points) float(key string, v float64) {
	if val, ok := lineprotocol.FloatValue(v); ok {
		w.enc.AddField(key, val)
	}
}

// str adds a string field unless it is empty, which means "not known".
func (w *points) str(key, v string) {
	if v == "" {
		return
	}
	if val, ok := lineprotocol.StringValue(strings.ToValidUTF8(v, "\uFFFD")); ok {
		w.enc.AddField(key, val)
	}
}

// common adds the fields every item's fact has.
func (w *points) common(ph int, title, text string) {
	w.str(schema.FieldFact, phaseNames[ph])
	w.str(schema.FieldTitle, w.text(title))
	w.str(schema.FieldText, text)
	w.str(schema.FieldAttemptID, w.text(w.st.AttemptID))
}

// end finishes the fact begun and adds it to the batch; false when it
// could not be encoded.
func (w *points) end() bool {
	w.enc.EndLine(time.Unix(0, w.ts))
	if err := w.enc.Err(); err != nil {
		w.p.log.Warn("annotation point not encodable", zap.String("application", w.st.Key.String()), zap.Error(err))
		return false
	}
	w.batch = append(w.batch, w.enc.Bytes()...)
	w.n++
	w.facts = append(w.facts, w.key)
	return true
}

// snapshot finishes an executor's snapshot, at nowNs, and adds it to the
// batch if its fields changed since the last one; its time is after the
// last one's, so no two share a time.
func (w *points) snapshot(process string, nowNs int64) {
	w.enc.EndLine(time.Unix(0, 0))
	if err := w.enc.Err(); err != nil {
		w.p.log.Warn("executor point not encodable", zap.String("application", w.st.Key.String()), zap.Error(err))
		return
	}
	line := w.enc.Bytes()
	body := line[:bytes.LastIndexByte(line, ' ')+1] // without the time
	h := fnv.New64a()
	h.Write(body)
	sum := h.Sum64()
	last, ok := w.snaps[process]
	if !ok {
		last = w.p.facts.LastSnapshot(w.st.Key.App, process, w.now)
	}
	if last.Sum == sum {
		return
	}
	ts := max(nowNs, last.TS+1)
	w.batch = strconv.AppendInt(append(w.batch, body...), ts, 10)
	w.batch = append(w.batch, '\n')
	w.n++
	w.snaps[process] = facts.Snapshot{Sum: sum, TS: ts}
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

func jobList(prefix string, ids []int) string {
	if len(ids) == 0 {
		return ""
	}
	return prefix + human.IDs(ids)
}
