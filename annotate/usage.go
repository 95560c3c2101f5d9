package annotate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/sparkpulse/sparkpulse/sizing"
	"github.com/sparkpulse/sparkpulse/spark"
	"github.com/sparkpulse/sparkpulse/sparkapi"
	"github.com/sparkpulse/sparkpulse/timespent"
)

// Accounting and reconciliation. Once an attempt has completed and
// UsageDelay has passed (its processes' last reports are in), the poller
// asks the Stream for the sums of its executors' task counters and their
// memory, and writes, with the sizing advice:
//
//   - spark_app_usage (fact end): what the application was given and
//     used (package sizing's Account), and what the recommendations would
//     save;
//   - spark_reconcile: the stream's totals against Spark's own — tasks,
//     CPU and run time, GC time, input, shuffle read and write — and the
//     executors whose reports fell short.
//
// While it runs, at its first sync and every usageEstimateEvery syncs, a
// spark_app_usage point (fact estimate) at the time of the read says what
// it has used so far, and the cores it holds then.
// Without a Stream, the usage has no CPU or mean memory and there is no
// reconciliation.

// Stream reads the metrics stream of an application's processes.
type Stream interface {
	// Totals returns, by process ("driver", "1", …), the sums of the
	// deltas of the counters in StreamCounters and the peak, mean and
	// number of samples of the gauges in StreamGauges, over [from, to):
	// windows that meet count each point once.
	Totals(ctx context.Context, app string, from, to time.Time) (map[string]ProcessTotals, error)
}

// ProcessTotals is what the stream says of one process.
type ProcessTotals struct {
	Sums       map[string]float64 // StreamKey of a StreamCounters metric → Σ delta
	NoDelta    map[string]int     // StreamKey of a StreamCounters metric → samples stored without a delta
	Peak, Mean map[string]float64 // StreamKey of a StreamGauges metric → max, mean of its value
	Samples    map[string]float64 // StreamKey of a StreamGauges metric → samples the mean is of; absent: weighed alike
}

// streamChunk bounds the time range of each read of the stream: an
// application that runs for days (a streaming query) is read a day at a
// time, as InfluxDB 3 Core answers a query over at most 72 hours of data
// and each answer stays small.
const streamChunk = 24 * time.Hour

// readStream reads the stream of app over [from, to) in chunks of at most
// streamChunk, and adds them up.
func (p *Poller) readStream(ctx context.Context, app string, from, to time.Time) (map[string]ProcessTotals, error) {
	out := map[string]ProcessTotals{}
	for lo := from; lo.Before(to); {
		hi := lo.Add(streamChunk)
		if !hi.Before(to) {
			hi = to
		}
		t, err := p.cfg.Stream.Totals(ctx, app, lo, hi)
		if err != nil {
			return nil, err
		}
		mergeTotals(out, t)
		lo = hi
	}
	return out, nil
}

// mergeTotals adds src, read over a window that does not overlap dst's,
// to dst: sums and samples without a delta add up, peaks are the larger,
// means are weighed by their samples.
func mergeTotals(dst, src map[string]ProcessTotals) {
	for proc, s := range src {
		d, ok := dst[proc]
		if !ok {
			d = ProcessTotals{Sums: map[string]float64{}, NoDelta: map[string]int{}, Peak: map[string]float64{}, Mean: map[string]float64{}, Samples: map[string]float64{}}
		}
		for k, v := range s.Sums {
			d.Sums[k] += v
		}
		for k, v := range s.NoDelta {
			d.NoDelta[k] += v
		}
		for k, v := range s.Peak {
			if old, ok := d.Peak[k]; !ok || v > old {
				d.Peak[k] = v
			}
		}
		for k, v := range s.Mean {
			n, m := s.Samples[k], d.Samples[k]
			if n <= 0 {
				n = 1
			}
			if _, ok := d.Mean[k]; !ok {
				m = 0
			}
			d.Mean[k] = (d.Mean[k]*m + v*n) / (m + n)
			d.Samples[k] = m + n
		}
		dst[proc] = d
	}
}

func cloneTotals(src map[string]ProcessTotals) map[string]ProcessTotals {
	out := map[string]ProcessTotals{}
	mergeTotals(out, src)
	return out
}

// StreamCounters are the counters whose deltas the accounting and
// reconciliation sum.
var StreamCounters = []spark.Metric{spark.SucceededTasks, spark.CPUTime, spark.RunTime, spark.JVMGCTime,
	spark.BytesRead, spark.ShuffleRead, spark.ShuffleWritten, spark.CgroupCPU}

// StreamGauges are the gauges whose peak and mean the accounting reads.
var StreamGauges = []spark.Metric{spark.JVMRSSMemory, spark.PythonRSSMemory, spark.OtherRSSMemory, spark.JVMHeapMemory}

// StreamKey is m's key in ProcessTotals' maps, whatever shape the stream
// is stored in: its measurement in the CERN shape ("cpuTime.count",
// "ch.cern.CgroupMetrics.CPUTimeNanosec"), for a gauge of ExecutorMetrics
// also its name in Spark's peakMemoryMetrics.
func StreamKey(m spark.Metric) string { return spark.SchemaCERN.Measurement(m) }

const (
	// MeasurementUsage has an application's accounting.
	MeasurementUsage = "spark_app_usage"
	// MeasurementReconcile compares the stream's totals with Spark's.
	MeasurementReconcile = "spark_reconcile"

	usageEstimateEvery = 30 // syncs: five minutes at the 10 s interval
)

// account reads the stream for a completed attempt once its delay has
// passed, and for a running one every usageEstimateEvery syncs.
func (p *Poller) account(ctx context.Context, st *appState, now time.Time) {
	switch {
	case st.completed && !st.accounted:
		if p.cfg.Stream == nil || st.properties == nil || st.end <= 0 {
			st.accounted = true // nothing to wait for
			return
		}
		if now.Before(time.UnixMilli(st.end).Add(p.cfg.UsageDelay)) || now.Before(st.streamNext) {
			return
		}
		if why := st.ambiguous(); why != "" {
			st.streamErr, st.accounted = why, true
			return
		}
		var totals map[string]ProcessTotals
		var err error
		if d, ok := p.cfg.Stream.(deliverer); ok && !d.Delivered(time.UnixMilli(st.end).Add(p.cfg.UsageDelay)) {
			err = errNotDelivered
		} else {
			totals, err = p.readStream(ctx, cmp.Or(st.metricsKey, st.key.app), time.UnixMilli(st.key.start).Add(-time.Minute), time.UnixMilli(st.end).Add(p.cfg.UsageDelay))
		}
		if err != nil {
			// Retried with backoff, from the poll interval up to 5 min,
			// for StreamRetry: InfluxDB may be restarting.
			if st.streamTries == 0 {
				st.streamFailed = now
			}
			st.streamTries++
			wait := min(p.cfg.Interval<<min(st.streamTries-1, 16), maxBackoff)
			st.streamNext = now.Add(wait)
			giveUp := now.Sub(st.streamFailed) >= p.cfg.StreamRetry
			p.log.Warn("metrics stream not read for an application's accounting", zap.String("application", st.key.String()),
				zap.Int("tries", st.streamTries), zap.Duration("failing_for", now.Sub(st.streamFailed)), zap.Bool("giving_up", giveUp), zap.Error(err))
			if !giveUp {
				return
			}
			st.streamErr = fmt.Sprintf("%v (failing for %s)", err, now.Sub(st.streamFailed).Round(time.Second))
		}
		st.stream, st.accounted = totals, true
	case !st.completed && p.cfg.Stream != nil && (st.syncs == 1 || st.syncs%usageEstimateEvery == usageEstimateEvery-1) && st.properties != nil && st.ambiguous() == "":
		if totals, err := p.estimateStream(ctx, st, now); err == nil {
			st.estimate = &usageRead{at: now, stream: totals}
		}
	}
}

// estimateStream reads a running application's stream up to now a window
// at a time, so that no read of an application that runs for weeks spans
// its life: what is older than UsageDelay (the reports' lateness) is read
// once and kept (st.acc, up to st.accTo); the last UsageDelay is read
// again at each estimate, as reports for it may still arrive.
func (p *Poller) estimateStream(ctx context.Context, st *appState, now time.Time) (map[string]ProcessTotals, error) {
	app := cmp.Or(st.metricsKey, st.key.app)
	from := st.accTo
	if from.IsZero() {
		from = time.UnixMilli(st.key.start).Add(-time.Minute)
	}
	settled := now.Add(-p.cfg.UsageDelay)
	if settled.After(from) {
		if d, ok := p.cfg.Stream.(deliverer); !ok || d.Delivered(settled) {
			t, err := p.readStream(ctx, app, from, settled)
			if err != nil {
				return nil, err
			}
			if st.acc == nil {
				st.acc = map[string]ProcessTotals{}
			}
			mergeTotals(st.acc, t)
			st.accTo, from = settled, settled
		}
	}
	out := cloneTotals(st.acc)
	if now.After(from) {
		tail, err := p.readStream(ctx, app, from, now)
		if err != nil {
			return nil, err
		}
		mergeTotals(out, tail)
	}
	return out, nil
}

// deliverer is a Stream that can tell whether the metrics received up to
// a time are all in InfluxDB: the accounting waits for them, as it waits
// for a failing read.
type deliverer interface {
	Delivered(until time.Time) bool
}

var errNotDelivered = errors.New("the application's last reports are not in InfluxDB yet (the metrics writers have a backlog)")

// usageRead is a read of the stream for a running application's estimate.
type usageRead struct {
	at     time.Time
	stream map[string]ProcessTotals
}

// sizingExecutors is what package sizing needs of the attempt's processes,
// with the stream's figures; alive up to endMs for those still running.
func sizingExecutors(st *appState, stream map[string]ProcessTotals, endMs int64) []sizing.Executor {
	var execs []sizing.Executor
	for _, id := range sortedKeys(st.executors, compareExecutorIDs) {
		x := &st.executors[id].Executor
		e := executorSizing(x)
		added, removed := optMS(x.AddTime), optMS(x.RemoveTime)
		e.Released = removed > 0 && removed < endMs && sizing.RemoveKind(x.RemoveReason) == sizing.RemovedReleased
		if removed == 0 || removed > endMs {
			removed = endMs
		}
		if added > 0 && removed > added {
			e.AliveMs = removed - added
		}
		if t, ok := stream[id]; ok {
			e.CPUNs, e.RunMs = int64(t.Sums["cpuTime.count"]), int64(t.Sums["runTime.count"])
			e.CgroupCPUNs = int64(t.Sums["ch.cern.CgroupMetrics.CPUTimeNanosec"])
			e.MeanRSS = int64(t.Mean["ProcessTreeJVMRSSMemory"] + t.Mean["ProcessTreePythonRSSMemory"] + t.Mean["ProcessTreeOtherRSSMemory"])
			// The larger of Spark's peak (heartbeats) and the stream's
			// (reports); a copy, as the REST answer's map is kept.
			peaks := maps.Clone(e.Peaks)
			if peaks == nil {
				peaks = map[string]int64{}
			}
			for _, m := range StreamGauges {
				g := StreamKey(m)
				if v, ok := t.Peak[g]; ok {
					peaks[g] = max(peaks[g], int64(v))
				}
			}
			e.Peaks = peaks
		}
		execs = append(execs, e)
	}
	// Processes only the stream knows: executors Spark no longer lists
	// (past spark.ui.retainedDeadExecutors). Their memory peaks count for
	// the advice; what they held and ran is not known, and not guessed.
	for _, id := range sortedKeys(stream, compareExecutorIDs) {
		if _, ok := st.executors[id]; ok || id == "driver" {
			continue
		}
		peaks := map[string]int64{}
		for _, m := range StreamGauges {
			g := StreamKey(m)
			if v, ok := stream[id].Peak[g]; ok {
				peaks[g] = int64(v)
			}
		}
		if len(peaks) > 0 {
			execs = append(execs, sizing.Executor{ID: id, Peaks: peaks})
		}
	}
	return execs
}

// failureReasons are the attempt's job and stage failure reasons.
func failureReasons(st *appState) []string {
	var out []string
	for _, s := range st.stages {
		if s.FailureReason != "" {
			out = append(out, s.FailureReason)
		}
	}
	return out
}

// queueOf is where the application ran: its YARN queue or Kubernetes
// namespace, "" when neither is set.
func queueOf(props map[string]string) string {
	return cmp.Or(props["spark.yarn.queue"], props["spark.kubernetes.namespace"])
}

// Reconciliation is the stream's totals against Spark's, per metric.
type Reconciliation struct {
	Metrics []ReconciledMetric
	// Short names the executors whose tasks in the stream fall short of
	// Spark's count of their successful tasks: their last reports did not
	// arrive (killed, lost, or sent while sparkpulse could not take them).
	Short []string
	// Above names the processes whose counters exceed Spark's own totals
	// for them (see screen): their figures were set aside.
	Above []string
	// Unlisted counts processes in the stream that Spark no longer lists
	// (beyond spark.ui.retainedDeadExecutors): compared in the totals
	// only.
	Unlisted int
	// StagesDropped counts the stages Spark no longer lists
	// (spark.ui.retainedStages): its CPU and run time totals, from the
	// stage list, then lack theirs, and are not compared.
	StagesDropped int
	FailedTasks   int // failed and killed tasks: their metrics are in Spark's totals, not in the executors' counters
	NoDelta       int // reports of the short executors stored without a delta
	Verdict       string
	Text          string
}

// ReconciledMetric is one metric's totals.
type ReconciledMetric struct {
	Name          string // tasks, cpu_time_ns, run_time_ms, gc_time_ms, input_bytes, shuffle_read_bytes, shuffle_write_bytes
	Stream, Spark float64
}

// Diff is (stream − Spark) / Spark; 0 when both are 0, ±1 when only one is.
func (m ReconciledMetric) Diff() float64 {
	switch {
	case m.Spark == m.Stream:
		return 0
	case m.Spark == 0:
		return math.Copysign(1, m.Stream)
	}
	return (m.Stream - m.Spark) / m.Spark
}

// Verdicts of a reconciliation.
const (
	ReconcileAboveSpark  = "above_spark"    // some processes' counters exceed Spark's (named): set aside
	ReconcileExact       = "exact"          // every total matches
	ReconcileShort       = "short"          // executors' last reports are missing (named)
	ReconcileFailedTasks = "failed_tasks"   // tasks match; the rest differ by failed tasks' metrics
	ReconcileDiffers     = "differs"        // something else: the text says what
	ReconcileNoStream    = "no_stream"      // the stream could not be read
	ReconcileNoDelta     = "no_delta"       // reports stored without a delta: work before them is not in the sums
	reconcileTolerance   = 0.0005           // rounding in the stream's float sums
	reconcileStreamKey   = "succeededTasks" // the stream's per-executor task counter
)

// stageTotals sums the stage list: Spark's totals over every task of
// every stage attempt it kept (spark.ui.retainedStages).
type stageTotals struct {
	stages              int
	cpuNs, runMs        int64
	failed, killed      int
	memSpill, diskSpill int64
	shuffleFetchWaitMs  int64
	// Stage ids run from 0, one per stage the application made, skipped
	// ones listed too: fewer ids listed than the largest + 1 means Spark
	// dropped the oldest (spark.ui.retainedStages, 1 000 by default).
	ids   map[int]bool
	maxID int
	// runs are the attempts that were submitted, [submissionTime,
	// completionTime]; End 0 while one runs.
	runs           []sizing.Span
	failedAttempts int // status FAILED
}

// dropped is how many of the application's stages Spark no longer lists.
func (t *stageTotals) dropped() int {
	if len(t.ids) == 0 {
		return 0
	}
	return t.maxID + 1 - len(t.ids)
}

func (t *stageTotals) add(s *sparkapi.Stage) {
	if t.ids == nil {
		t.ids = map[int]bool{}
	}
	t.ids[s.StageID] = true
	t.maxID = max(t.maxID, s.StageID)
	t.stages++
	t.cpuNs = addSat(t.cpuNs, s.ExecutorCPUTime)
	t.runMs = addSat(t.runMs, s.ExecutorRunTime)
	t.failed += s.NumFailedTasks
	t.killed += s.NumKilledTasks
	t.memSpill = addSat(t.memSpill, s.MemoryBytesSpilled)
	t.diskSpill = addSat(t.diskSpill, s.DiskBytesSpilled)
	t.shuffleFetchWaitMs = addSat(t.shuffleFetchWaitMs, s.ShuffleFetchWaitTime)
	if sub := optMS(s.SubmissionTime); sub > 0 {
		t.runs = append(t.runs, sizing.Span{Start: sub, End: optMS(s.CompletionTime)})
	}
	if s.Status == "FAILED" {
		t.failedAttempts++
	}
}

// addSat adds two values of at least zero (sparkapi.Check holds each
// below 2^58), stopping at the largest int64 rather than wrapping round.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// reconcile compares the stream's totals with Spark's: the executor list
// (tasks, GC, input, shuffle: every task with metrics that ended on a live
// executor) and the stage list (CPU and run time: every task). The
// executors' counters only count successful tasks, so with failed or
// killed tasks Spark's totals are larger by those tasks' metrics.
func reconcile(execs []sparkapi.Executor, stages stageTotals, stream map[string]ProcessTotals, aside []setAside) Reconciliation {
	var r Reconciliation
	var aboveWhy []string
	for _, a := range aside {
		if a.aboveSpk {
			r.Above = append(r.Above, a.process)
			aboveWhy = append(aboveWhy, a.String())
		}
	}
	sum := func(counter string) float64 {
		t := 0.0
		for _, p := range stream {
			t += p.Sums[counter]
		}
		return t
	}
	var tasks, gc, input, shRead, shWrite, cpu, run float64
	listed := map[string]bool{}
	for _, x := range execs {
		listed[x.ID] = true
		tasks += float64(x.CompletedTasks)
		gc += float64(x.TotalGCTime)
		input += float64(x.TotalInputBytes)
		shRead += float64(x.TotalShuffleRead)
		shWrite += float64(x.TotalShuffleWrite)
		if streamed := stream[x.ID].Sums["succeededTasks.count"]; float64(x.CompletedTasks)-streamed > 0.5 {
			r.Short = append(r.Short, x.ID)
		}
	}
	cpu, run = float64(stages.cpuNs), float64(stages.runMs)
	r.FailedTasks = stages.failed + stages.killed
	r.StagesDropped = stages.dropped()
	for id := range stream {
		if !listed[id] {
			r.Unlisted++
		}
	}
	slices.SortFunc(r.Short, compareExecutorIDs)
	// A report stored without a delta (a counter's first sample within
	// the delta stage's grace period after sparkpulse started, or a new
	// series refused by a full delta table) leaves the work before it
	// out of the sums: that, not a lost report, can explain a shortfall.
	for _, id := range r.Short {
		r.NoDelta += stream[id].NoDelta["succeededTasks.count"]
	}
	r.Metrics = []ReconciledMetric{
		{"tasks", sum("succeededTasks.count"), tasks},
		{"cpu_time_ns", sum("cpuTime.count"), cpu},
		{"run_time_ms", sum("runTime.count"), run},
		{"gc_time_ms", sum("jvmGCTime.count"), gc},
		{"input_bytes", sum("bytesRead.count"), input},
		{"shuffle_read_bytes", sum("shuffleTotalBytesRead.count"), shRead},
		{"shuffle_write_bytes", sum("shuffleBytesWritten.count"), shWrite},
	}
	exact, tasksMatch := true, true
	var off []string
	for _, m := range r.Metrics {
		if r.StagesDropped > 0 && (m.Name == "cpu_time_ns" || m.Name == "run_time_ms") {
			continue // Spark's side lacks the dropped stages
		}
		if math.Abs(m.Diff()) > reconcileTolerance {
			exact = false
			off = append(off, fmt.Sprintf("%s %+.2f %%", m.Name, 100*m.Diff()))
			if m.Name == "tasks" {
				tasksMatch = false
			}
		}
	}
	switch {
	case len(r.Above) > 0:
		r.Verdict = ReconcileAboveSpark
		r.Text = fmt.Sprintf("the stream's counters of %s exceed Spark's own totals, which a genuine stream never does: reports that did not come from Spark's executors (forged, or another application's under the same spark.metrics.namespace), or Spark's listener dropped events (LiveListenerBus numDroppedEvents); set aside from the accounting and the advice: %s",
			strings.Join(r.Above, ", "), strings.Join(aboveWhy, "; "))
	case exact:
		r.Verdict, r.Text = ReconcileExact, "the stream's totals match Spark's"
	case len(r.Short) > 0 && r.NoDelta > 0:
		r.Verdict = ReconcileNoDelta
		r.Text = fmt.Sprintf("%d reports of executor %s were stored without a delta (sparkpulse started or restarted while they ran, without a state-dir, or the delta table was full): their work before those reports is not in the sums: %s",
			r.NoDelta, strings.Join(r.Short, ", "), strings.Join(off, ", "))
	case len(r.Short) > 0:
		r.Verdict = ReconcileShort
		r.Text = fmt.Sprintf("the last reports of executor %s are missing: %s", strings.Join(r.Short, ", "), strings.Join(off, ", "))
	case tasksMatch && r.FailedTasks > 0:
		r.Verdict = ReconcileFailedTasks
		r.Text = fmt.Sprintf("%d failed or killed tasks: their metrics are in Spark's totals, not in the executors' counters: %s", r.FailedTasks, strings.Join(off, ", "))
	default:
		r.Verdict, r.Text = ReconcileDiffers, strings.Join(off, ", ")
	}
	if r.Unlisted > 0 {
		r.Text += fmt.Sprintf("; %d processes in the stream that Spark no longer lists (spark.ui.retainedDeadExecutors)", r.Unlisted)
	}
	if r.StagesDropped > 0 {
		r.Text += fmt.Sprintf("; CPU and run time not compared: Spark lists %d of the %d stages the application made (spark.ui.retainedStages)",
			len(stages.ids), stages.maxID+1)
	}
	return r
}

// usage writes an application's accounting: fact end at its end, or
// estimate (ph < 0) at the time of the read.
func (w *points) usage(u sizing.Usage, a sizing.Advice, ph int, ts int64) {
	st := w.st
	if !w.begin(MeasurementUsage, ts) {
		return
	}
	if q := tagValue(queueOf(st.properties)); q != "" {
		w.enc.AddTag("queue", q)
	}
	if user := tagValue(st.user); user != "" {
		w.enc.AddTag("user", user)
	}
	fact := "estimate"
	if ph >= 0 {
		fact = phaseNames[ph]
	}
	w.str("fact", fact)
	w.str("app_id", w.text(st.key.app))
	w.int("duration_ms", u.DurationMs)
	w.int("executors", int64(u.Executors))
	w.int("executor_cores", int64(u.Cores))
	w.int("container_bytes", u.Container)
	w.float("executor_core_seconds", u.ExecutorCoreSeconds)
	w.float("executor_memory_byte_seconds", u.ExecutorMemoryByteSeconds)
	w.float("driver_core_seconds", u.DriverCoreSeconds)
	w.float("driver_memory_byte_seconds", u.DriverMemoryByteSeconds)
	w.str("driver_held", u.DriverHeld)
	if ph < 0 {
		// An estimate's, zero included: an application read before its
		// executors registered holds none yet.
		w.int("cores_held", int64(u.CoresHeld))
	}
	if u.CPUFrom != "" {
		w.float("task_cpu_seconds", u.TaskCPUSeconds)
		w.float("task_run_seconds", u.TaskRunSeconds)
		w.float("busy_slot_seconds", u.BusySlotSeconds)
		w.float("cpu_used_seconds", u.CPUUsedSeconds)
		w.float("cpu_utilisation", u.CPUUtilisation)
		w.str("cpu_from", u.CPUFrom)
	}
	if u.ContainerCPUSeconds > 0 {
		w.float("container_cpu_seconds", u.ContainerCPUSeconds)
	}
	var taskMs, gcMs int64
	for _, x := range st.executors {
		taskMs += x.TotalDuration
		gcMs += x.TotalGCTime
	}
	w.float("gc_seconds", float64(gcMs)/1000)
	if taskMs > 0 {
		w.float("gc_share", float64(gcMs)/float64(taskMs))
	}
	if u.PeakRSS > 0 {
		w.int("peak_rss_bytes", u.PeakRSS)
		w.float("memory_utilisation", u.MemoryUtilisation)
	}
	if u.MeanRSS > 0 {
		w.int("mean_rss_bytes", u.MeanRSS)
		w.float("mean_memory_utilisation", u.MeanMemoryUtilisation)
		w.float("mean_rss_byte_seconds", u.MeanRSSByteSeconds)
	}
	if u.PeakPythonRSS > 0 {
		w.int("peak_python_rss_bytes", u.PeakPythonRSS)
	}
	if t := st.stageTotals; t != nil && ph >= 0 {
		w.int("memory_spilled_bytes", t.memSpill)
		w.int("disk_spilled_bytes", t.diskSpill)
		w.int("failed_tasks", int64(t.failed))
		w.int("killed_tasks", int64(t.killed))
		w.int("shuffle_fetch_wait_ms", t.shuffleFetchWaitMs)
	}
	if u.SlotOccupancy != nil {
		w.float("slot_occupancy", *u.SlotOccupancy)
	}
	if u.DriverOnlyMs != nil {
		w.int("driver_only_ms", *u.DriverOnlyMs)
	}
	if u.FailedStageAttempts != nil {
		w.int("failed_stage_attempts", int64(*u.FailedStageAttempts))
	}
	if u.LostTaskSeconds != nil {
		w.float("lost_task_seconds", *u.LostTaskSeconds)
	}
	w.str("outcome", u.Outcome)
	w.str("outcome_reason", w.reason(u.OutcomeReason))
	cores, bytes := a.Savings()
	w.int("findings", int64(len(a.Findings)))
	w.int("recommendations", int64(len(a.Recommendations)))
	w.float("saving_core_seconds", cores)
	w.float("saving_byte_seconds", bytes)
	var confs []string
	for _, r := range a.Recommendations {
		confs = append(confs, "--conf "+r.Property+"="+r.ValueString())
	}
	w.str("recommended", w.reason(strings.Join(confs, " ")))
	w.int("set_aside_count", int64(len(u.SetAside)))
	if len(u.SetAside) > 0 {
		w.str("set_aside", w.reason(strings.Join(u.SetAside, "; ")))
	}
	notes := u.Notes
	if st.invalid > 0 {
		notes = append(notes, fmt.Sprintf("%d values in Spark's answers that no Spark writes were read as absent: %s", st.invalid, strings.Join(st.invalidSeen, ", ")))
	}
	if st.streamErr != "" {
		notes = append(notes, "metrics stream not read: "+st.streamErr)
	}
	w.str("notes", w.reason(strings.Join(notes, "; ")))
	text := fmt.Sprintf("%.1f core-hours and %.1f GiB-hours held by %d executors", u.ExecutorCoreSeconds/3600,
		u.ExecutorMemoryByteSeconds/3600/(1<<30), u.Executors)
	if u.CPUFrom != "" {
		text += fmt.Sprintf(", %.0f %% of the cores used", 100*u.CPUUtilisation)
	}
	if u.SlotOccupancy != nil {
		text += fmt.Sprintf(", task slots busy %.0f %% of the time", 100*(*u.SlotOccupancy))
	}
	if u.DriverOnlyMs != nil && u.DurationMs > 0 {
		text += fmt.Sprintf(", no stage running for %s (%.0f %%)", timespent.Duration(*u.DriverOnlyMs), 100*float64(*u.DriverOnlyMs)/float64(u.DurationMs))
	}
	if u.PeakRSS > 0 {
		text += fmt.Sprintf(", memory peaked at %.0f %% of the container", 100*u.MemoryUtilisation)
	}
	if cores > 0 || bytes > 0 {
		text += fmt.Sprintf("; the recommendations would save %.1f core-hours and %.1f GiB-hours", cores/3600, bytes/3600/(1<<30))
	}
	if u.Outcome != "" {
		text += "; " + u.Outcome
	}
	w.str("title", w.text(fmt.Sprintf("Usage of %s", cmp.Or(st.name, st.key.app))))
	w.str("text", text)
	w.str("attempt_id", w.text(st.attemptID))
	w.end()
}

// usageEstimate writes a running application's usage so far.
func (w *points) usageEstimate() {
	st := w.st
	e := st.estimate
	st.estimate = nil
	s, r, err := settingsOf(st.properties)
	if err != nil {
		return
	}
	atMs := e.at.UnixMilli()
	stream, aside := screen(st, e.stream, atMs, false)
	execs := sizingExecutors(st, stream, atMs)
	u := sizing.Account(s, r, execs, atMs-st.key.start)
	setAsideIn(&u, aside, nil)
	currentStages(st).figures(&u, st.key.start, atMs)
	u.Outcome, u.OutcomeReason = outcome(st)
	u.CoresHeld = coresHeld(st, atMs)
	w.usage(u, sizing.Advice{}, -1, atMs*1_000_000+1)
}

// coresHeld is the cores of the attempt's executors alive at ms: the task
// slots the Spark dashboard sets the busy ones against.
func coresHeld(st *appState, ms int64) int {
	n := 0
	for id, x := range st.executors {
		added, removed := optMS(x.AddTime), optMS(x.RemoveTime)
		if id != "driver" && added > 0 && added <= ms && (removed == 0 || removed > ms) {
			n += x.TotalCores
		}
	}
	return n
}

// setAsideIn records in u what the screen set aside. Where executors'
// counters were, the task times come from Spark's stage list when it is
// whole, else they are unknown: a sum without those executors would
// understate them.
func setAsideIn(u *sizing.Usage, aside []setAside, stages *stageTotals) {
	counters := 0
	for _, a := range aside {
		u.SetAside = append(u.SetAside, a.String())
		if a.counters {
			counters++
		}
	}
	switch {
	case counters == 0:
	case stages != nil && stages.dropped() == 0:
		u.TaskTimesFromStages(stages.cpuNs, stages.runMs)
	default:
		u.TaskTimesUnknown(fmt.Sprintf("the stream's counters of %d processes were set aside", counters))
	}
}

// reconcile writes the stream's totals against Spark's, at the end.
func (w *points) reconcile(aside []setAside) {
	st := w.st
	if !w.begin(MeasurementReconcile, st.end*1_000_000) {
		return
	}
	if st.streamErr != "" || st.stageTotals == nil {
		why := "the metrics stream could not be read: " + st.streamErr
		if st.streamErr == "" {
			why = "Spark's stage list was not read after the end"
		}
		w.str("verdict", ReconcileNoStream)
		w.str("app_id", w.text(st.key.app))
		w.str("text", w.reason(why))
		w.str("attempt_id", w.text(st.attemptID))
		w.end()
		return
	}
	r := reconcile(executorList(st), *st.stageTotals, st.stream, aside)
	w.str("verdict", r.Verdict)
	w.str("app_id", w.text(st.key.app))
	for _, m := range r.Metrics {
		w.float("stream_"+m.Name, m.Stream)
		w.float("spark_"+m.Name, m.Spark)
		w.float("diff_"+m.Name, m.Diff())
	}
	w.int("above_count", int64(len(r.Above)))
	w.str("above_executors", w.text(strings.Join(r.Above, ",")))
	w.int("short_count", int64(len(r.Short)))
	w.str("short_executors", w.text(strings.Join(r.Short, ",")))
	w.int("unlisted_processes", int64(r.Unlisted))
	w.int("stages_dropped", int64(r.StagesDropped))
	w.int("failed_tasks", int64(r.FailedTasks))
	w.str("title", w.text("Reconciliation of "+cmp.Or(st.name, st.key.app)+": "+r.Verdict))
	w.str("text", w.reason(r.Text))
	w.str("attempt_id", w.text(st.attemptID))
	w.end()
}

// figures sets in u what the stage list tells over [startMs, readMs]:
// the driver-only time and the failed stage attempts (sizing's
// figures.go). A stage list that lacks stages the application made (Spark
// keeps spark.ui.retainedStages; sparkpulse, while an application runs,
// its last retain) would read their run as driver-only time: the figures
// are then left out, with a note.
func (t *stageTotals) figures(u *sizing.Usage, startMs, readMs int64) {
	switch {
	case t == nil:
		u.Notes = append(u.Notes, "driver-only time unknown: Spark's stage list was not read")
		return
	case t.dropped() > 0:
		u.Notes = append(u.Notes, fmt.Sprintf("driver-only time and failed stage attempts unknown: %d of the %d stages the application made are listed (spark.ui.retainedStages)",
			len(t.ids), t.maxID+1))
		return
	}
	spans := make([]sizing.Span, len(t.runs))
	for i, r := range t.runs {
		if r.End <= 0 {
			r.End = readMs // still running: up to the read
		}
		spans[i] = r
	}
	d, n := sizing.DriverOnly(spans, startMs, readMs), t.failedAttempts
	u.DriverOnlyMs, u.FailedStageAttempts = &d, &n
}

// currentStages sums the stages the attempt's state holds, for a running
// application's estimate.
func currentStages(st *appState) *stageTotals {
	var t stageTotals
	for _, k := range sortedKeys(st.stages, compareStageKeys) {
		t.add(&st.stages[k].Stage)
	}
	return &t
}

// lostTasks sets the run time of the task attempts that failed or were
// killed, at the end. What Spark's numbers hold (core, AppStatusListener
// and Executor):
//
//   - a stage attempt's executorRunTime is the sum of the metrics of every
//     task end event of the attempt that carried metrics (onTaskEnd adds
//     LiveTask.updateMetrics' delta to LiveStage.metrics whatever the end
//     reason): successful tasks, tasks that failed with an exception and
//     killed tasks (a speculative copy that lost, a task of a cancelled
//     job), whose run time the executor reports on failure
//     (collectAccumulatorsAndResetStatusOnFailure);
//   - tasks that failed on a fetch failure or a commit denial, and tasks
//     whose executor was lost, carry no metrics (no accumulator updates:
//     the task end's metrics are null) and are in no total;
//   - the executors' runTime counter (ExecutorSource, in the stream) is
//     added to only when a task succeeds;
//   - taskList gives each failed task with its own metrics.
//
// So the figure is, by the first source that holds every such task: the
// failed tasks' run time as taskList gave them (fromTasks, when every
// stage attempt with failed tasks had all of them read, and none was
// killed: killed tasks are not read); else Spark's stage total less the
// stream's, when the stream holds every successful task (the
// reconciliation's verdict is exact or failed_tasks). Without failed or
// killed tasks it is 0. Never counted, as no number tells them apart: the
// successful tasks of a job that failed (whether their work was lost
// depends on what the program did next: a later job reuses their shuffle
// output), the tasks run again for shuffle output lost with an executor
// (successful tasks of a later attempt), and the failed tasks without
// metrics above. The figure is a lower bound of the compute failures cost.
func lostTasks(u *sizing.Usage, t *stageTotals, fromTasks *int64, rec *Reconciliation) {
	const unknown = "lost task time unknown: "
	var lostMs float64
	switch {
	case t == nil:
		u.Notes = append(u.Notes, unknown+"Spark's stage list was not read")
		return
	case t.dropped() > 0:
		u.Notes = append(u.Notes, unknown+"Spark no longer lists every stage (spark.ui.retainedStages)")
		return
	case t.failed+t.killed == 0:
	case fromTasks != nil:
		lostMs = float64(*fromTasks)
	case rec == nil:
		u.Notes = append(u.Notes, fmt.Sprintf(unknown+"%d failed or killed tasks, not all read, and no metrics stream to tell their run time from the successful tasks'", t.failed+t.killed))
		return
	case rec.Verdict != ReconcileExact && rec.Verdict != ReconcileFailedTasks:
		u.Notes = append(u.Notes, fmt.Sprintf(unknown+"%d failed or killed tasks, not all read, and the stream's successful tasks do not match Spark's (%s)", t.failed+t.killed, rec.Verdict))
		return
	default:
		for _, m := range rec.Metrics {
			if m.Name == "run_time_ms" {
				lostMs = max(0, math.Round(m.Spark-m.Stream))
			}
		}
	}
	v := lostMs / 1000
	u.LostTaskSeconds = &v
}

// failedTaskRunMs sums the run time of the failed tasks read of the
// attempt's stages (stages.go), when they are every failed or killed task
// of its stage list t: every stage attempt with failed tasks had all of
// them read, and none had killed tasks; nil otherwise.
func failedTaskRunMs(st *appState, t *stageTotals) *int64 {
	if t == nil {
		return nil
	}
	var sum int64
	failed := 0
	for _, s := range st.stages {
		if s.NumFailedTasks+s.NumKilledTasks == 0 {
			continue
		}
		if s.NumKilledTasks > 0 || s.details == nil || len(s.details.failed) < s.NumFailedTasks {
			return nil
		}
		failed += s.NumFailedTasks
		for _, task := range s.details.failed {
			if task.TaskMetrics != nil {
				sum = addSat(sum, max(task.TaskMetrics.ExecutorRunTime, 0))
			}
		}
	}
	if failed != t.failed+t.killed {
		return nil // stages with failures that sparkpulse no longer holds
	}
	return &sum
}

// Outcome decides how an application attempt ended from what Spark's
// REST API says of it (see sizing's Outcome constants): whether it
// completed, and its jobs, the last to end deciding; a failed job's reason
// is the first line of its first failed stage attempt's.
func Outcome(completed bool, jobs []sparkapi.Job, stages []sparkapi.Stage) (outcome, reason string) {
	ss := make([]*sparkapi.Stage, len(stages))
	for i := range stages {
		ss[i] = &stages[i]
	}
	js := make([]*sparkapi.Job, len(jobs))
	for i := range jobs {
		js[i] = &jobs[i]
	}
	return decideOutcome(completed, js, ss)
}

// StageFigures sets in u the driver-only time and failed stage attempts
// of an application's stage list over [startMs, readMs] (readMs: its end,
// or the time of the read while it runs), as the accounting does.
func StageFigures(u *sizing.Usage, stages []sparkapi.Stage, startMs, readMs int64) {
	var t stageTotals
	for i := range stages {
		t.add(&stages[i])
	}
	t.figures(u, startMs, readMs)
}

// outcome is Outcome of the attempt's state.
func outcome(st *appState) (string, string) {
	js := make([]*sparkapi.Job, 0, len(st.jobs))
	for _, id := range sortedKeys(st.jobs, cmp.Compare[int]) {
		js = append(js, &st.jobs[id].Job)
	}
	ss := make([]*sparkapi.Stage, 0, len(st.stages))
	for _, k := range sortedKeys(st.stages, compareStageKeys) {
		ss = append(ss, &st.stages[k].Stage)
	}
	return decideOutcome(st.completed, js, ss)
}

func decideOutcome(completed bool, jobs []*sparkapi.Job, stages []*sparkapi.Stage) (string, string) {
	if !completed {
		return sizing.OutcomeRunning, "the attempt has not completed"
	}
	// The last job to end: a program that does not catch a job's failure
	// ends with it; one that caught it went on to run more.
	var last *sparkapi.Job
	endOf := func(j *sparkapi.Job) int64 { return max(optMS(j.CompletionTime), optMS(j.SubmissionTime)) }
	for _, j := range jobs {
		if last == nil || cmp.Or(cmp.Compare(endOf(j), endOf(last)), cmp.Compare(j.JobID, last.JobID)) > 0 {
			last = j
		}
	}
	if last == nil {
		return sizing.OutcomeUnknown, "no job listed: Spark records no exit status, and an application without jobs gives no evidence"
	}
	var failedBefore []int
	for _, j := range jobs {
		if j != last && j.Status == "FAILED" {
			failedBefore = append(failedBefore, j.JobID)
		}
	}
	switch last.Status {
	case "SUCCEEDED":
		r := fmt.Sprintf("its last job, %d, succeeded", last.JobID)
		if len(failedBefore) > 0 {
			slices.Sort(failedBefore)
			r += "; job " + intList(failedBefore) + " failed before it"
		}
		return sizing.OutcomeSucceeded, r
	case "FAILED":
		r := fmt.Sprintf("its last job, %d, failed", last.JobID)
		if why := stageFailure(stages, last.StageIDs); why != "" {
			r += ": " + why
		}
		return sizing.OutcomeFailed, r
	}
	return sizing.OutcomeUnknown, fmt.Sprintf("its last job, %d, was still %s when the application ended", last.JobID, last.Status)
}

// stageFailure is the first line of the failure reason of the first
// failed attempt among the stages ids, "" if none failed.
func stageFailure(stages []*sparkapi.Stage, ids []int) string {
	var best *sparkapi.Stage
	for _, s := range stages {
		if s.Status == "FAILED" && slices.Contains(ids, s.StageID) &&
			(best == nil || cmp.Or(cmp.Compare(s.StageID, best.StageID), cmp.Compare(s.AttemptID, best.AttemptID)) < 0) {
			best = s
		}
	}
	if best == nil {
		return ""
	}
	return firstLine(best.FailureReason)
}

// usageLost writes, when an attempt is closed out after its source lost
// it while it ran, what it held up to when it was last seen (the metrics
// stream is not read then), with outcome driver_lost.
func (w *points) usageLost(lastSeenMs int64) {
	st := w.st
	s, r, err := settingsOf(st.properties)
	if err != nil {
		return
	}
	u := sizing.Account(s, r, sizingExecutors(st, nil, lastSeenMs), lastSeenMs-st.key.start)
	u.TaskTimesUnknown("the metrics stream is not read for an application closed out while it ran")
	currentStages(st).figures(&u, st.key.start, lastSeenMs)
	u.Outcome = sizing.OutcomeDriverLost
	u.OutcomeReason = fmt.Sprintf("no source has shown it since %s, while it ran: its end was never seen (the driver crashed or was killed, or ended where no History Server shows it)",
		st.lostAt.UTC().Format(time.RFC3339))
	w.usage(u, sizing.Advice{}, phaseLost, lastSeenMs*1_000_000+2)
}
