package annotate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/sparkpulse/sparkpulse/accounting"
	"github.com/sparkpulse/sparkpulse/attempt"
	"github.com/sparkpulse/sparkpulse/human"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/sizing"
	"github.com/sparkpulse/sparkpulse/timespent"
)

// Accounting and reconciliation. Once an attempt has completed and
// UsageDelay has passed (its processes' last reports are in), the poller
// asks the Stream for the sums of its executors' task counters and their
// memory, has package accounting work out the figures and package sizing
// the advice (accounts), and writes, with the advice:
//
//   - spark_app_usage (fact end): what the application was given and
//     used (package accounting, with package sizing's Account), and what
//     the recommendations would save;
//   - spark_reconcile: the stream's totals against Spark's own — tasks,
//     CPU and run time, GC time, input, shuffle read and write — and the
//     executors whose reports fell short.
//
// While it runs, at its first sync and then every usageEstimateEvery
// intervals (5 minutes at the default 10 s), a spark_app_usage point (fact
// estimate) at the time of the read says what it has used so far, and the
// cores it holds then. By time, not by syncs: an idle application on a
// History Server (its event log unchanged) is not read again, yet runs,
// and report --fleet takes one with no estimate for 30 minutes as ended.
// Without a Stream, the usage has no CPU or mean memory and there is no
// reconciliation.

// Stream reads the metrics stream of an application's processes.
type Stream = attempt.Stream

// ProcessTotals is what the stream says of one process (package
// accounting's, which reads it).
type ProcessTotals = accounting.ProcessTotals

// readStream reads the stream of app over [from, to), a chunk at a time
// (attempt.ReadStream).
func (p *Poller) readStream(ctx context.Context, app string, from, to time.Time) (map[string]ProcessTotals, error) {
	return attempt.ReadStream(ctx, p.cfg.Stream, app, from, to)
}

const usageEstimateEvery = 30 // intervals: five minutes at the 10 s interval

// account reads the stream for a completed attempt once its delay has
// passed, and for a running one every usageEstimateEvery intervals.
func (p *Poller) account(ctx context.Context, st *appState, now time.Time) {
	switch {
	case st.Completed && !st.accounted:
		if p.cfg.Stream == nil || st.Properties == nil || st.End <= 0 {
			st.accounted = true // nothing to wait for
			return
		}
		if now.Before(time.UnixMilli(st.End).Add(p.cfg.UsageDelay)) || now.Before(st.streamNext) {
			return
		}
		if why := st.ambiguous(); why != "" {
			st.StreamErr, st.accounted = why, true
			return
		}
		var totals map[string]ProcessTotals
		var err error
		if d, ok := p.cfg.Stream.(deliverer); ok && !d.Delivered(time.UnixMilli(st.End).Add(p.cfg.UsageDelay)) {
			err = errNotDelivered
		} else {
			totals, err = p.readStream(ctx, cmp.Or(st.MetricsKey, st.Key.App), time.UnixMilli(st.Key.Start).Add(-time.Minute), time.UnixMilli(st.End).Add(p.cfg.UsageDelay))
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
			p.log.Warn("metrics stream not read for an application's accounting", zap.String("application", st.Key.String()),
				zap.Int("tries", st.streamTries), zap.Duration("failing_for", now.Sub(st.streamFailed)), zap.Bool("giving_up", giveUp), zap.Error(err))
			if !giveUp {
				return
			}
			st.StreamErr = fmt.Sprintf("%v (failing for %s)", err, now.Sub(st.streamFailed).Round(time.Second))
		}
		st.Stream, st.accounted = totals, true
		// YARN's own figures, final once it has ended the application:
		// what the cluster held, container starts and rounding included.
		if st.rm != "" {
			if a := p.yarnApp(ctx, st); a != nil && a.Ended() {
				st.yarnHeld = a
			}
		}
	case !st.Completed && p.cfg.Stream != nil && (st.estimatedAt.IsZero() || now.Sub(st.estimatedAt) >= usageEstimateEvery*p.cfg.Interval) &&
		st.Properties != nil && st.ambiguous() == "":
		st.estimatedAt = now
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
	app := cmp.Or(st.MetricsKey, st.Key.App)
	from := st.accTo
	if from.IsZero() {
		from = time.UnixMilli(st.Key.Start).Add(-time.Minute)
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
			accounting.MergeTotals(st.acc, t)
			st.accTo, from = settled, settled
		}
	}
	out := accounting.CloneTotals(st.acc)
	if now.After(from) {
		tail, err := p.readStream(ctx, app, from, now)
		if err != nil {
			return nil, err
		}
		accounting.MergeTotals(out, tail)
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

// accounts is what an emit writes of an attempt's accounting, worked out
// before anything is encoded: once it has completed and its stream was
// read (or given up on), the accounting, the reconciliation and the
// advice (package accounting, then package sizing); while it runs, the
// estimate its last read of the stream calls for; when it is closed out
// while it ran, what it held until it was lost.
type accounts struct {
	final      *assessed     // at the end: spark_app_usage, spark_reconcile, spark_sizing
	estimate   *sizing.Usage // a running estimate, read at estimateMs
	estimateMs int64
	lost       *sizing.Usage // closed out while it ran, up to nowMs
}

// assessed is an attempt's accounting and the advice on it.
type assessed struct {
	advice sizing.Advice
	result accounting.Result
}

// accounts works out what emit writes of st's accounting at nowMs (see
// accounts); it takes the estimate's read of the stream, which is
// written once.
func (p *Poller) accounts(st *appState, nowMs int64, closeOut bool) accounts {
	var out accounts
	if st.Completed && st.accounted && st.Properties != nil && st.End > 0 && len(st.Executors) > 0 {
		a, res, err := attempt.Account(&st.State, st.End, p.cfg.Stream != nil)
		switch {
		case errors.Is(err, accounting.ErrNoCluster):
			// A UI's answers no cluster could hold: no figure of them
			// reaches the fleet's totals.
			p.stats.invalid.Add(1)
			p.log.Warn("no accounting and no advice: Spark's answers are impossible together", zap.String("application", st.Key.String()), zap.Error(err))
		case err != nil:
			p.log.Warn("no sizing advice", zap.String("application", st.Key.String()), zap.Error(err))
		default:
			out.final = &assessed{advice: a, result: res}
		}
	}
	if e := st.estimate; e != nil {
		st.estimate = nil
		atMs := e.at.UnixMilli()
		if u, err := accounting.Estimate(st.Accounting(false), e.stream, atMs); err == nil {
			out.estimate, out.estimateMs = &u, atMs
		}
	}
	if closeOut && !st.Completed && st.Properties != nil && len(st.Executors) > 0 {
		if u, err := accounting.Lost(st.Accounting(false), nowMs, st.lostAt); err == nil {
			if st.goneWhy != "" {
				u.OutcomeReason = st.goneWhy
			}
			out.lost = &u
		}
	}
	return out
}

// queueOf is where the application ran: its YARN queue or Kubernetes
// namespace, "" when neither is set.
func queueOf(props map[string]string) string {
	return cmp.Or(props["spark.yarn.queue"], props["spark.kubernetes.namespace"])
}

// usage writes an application's accounting: fact end at its end, or
// estimate (ph < 0) at the time of the read.
func (w *points) usage(u sizing.Usage, a sizing.Advice, ph int, ts int64) {
	st := w.st
	if !w.begin(schema.MeasurementUsage, ts) {
		return
	}
	if q := tagValue(cmp.Or(st.yarnQueue, queueOf(st.Properties))); q != "" {
		w.enc.AddTag(schema.TagQueue, q)
	}
	if user := tagValue(cmp.Or(st.yarnUser, st.User)); user != "" {
		w.enc.AddTag(schema.TagUser, user)
	}
	fact := "estimate"
	if ph >= 0 {
		fact = phaseNames[ph]
	}
	w.str(schema.FieldFact, fact)
	w.str(schema.FieldAppID, w.text(st.Key.App))
	w.int(schema.UsageDurationMs, u.DurationMs)
	w.int(schema.UsageExecutors, int64(u.Executors))
	w.int(schema.UsageExecutorCores, int64(u.Cores))
	w.int(schema.UsageContainerBytes, u.Container)
	w.float(schema.UsageExecutorCoreSeconds, u.ExecutorCoreSeconds)
	w.float(schema.UsageExecutorMemoryByteSeconds, u.ExecutorMemoryByteSeconds)
	w.float(schema.UsageDriverCoreSeconds, u.DriverCoreSeconds)
	w.float(schema.UsageDriverMemoryByteSeconds, u.DriverMemoryByteSeconds)
	w.str(schema.UsageDriverHeld, u.DriverHeld)
	if u.ExecutorGPUSeconds > 0 || u.DriverGPUSeconds > 0 {
		w.float(schema.UsageExecutorGPUSeconds, u.ExecutorGPUSeconds)
		w.float(schema.UsageDriverGPUSeconds, u.DriverGPUSeconds)
	}
	if y := st.yarnHeld; y != nil && ph >= 0 && y.App.VcoreSeconds >= 0 && y.App.MemorySeconds >= 0 {
		w.int(schema.UsageYARNVcoreSeconds, y.App.VcoreSeconds)
		w.float(schema.UsageYARNMemoryByteSeconds, float64(y.App.MemorySeconds)*(1<<20)) // as the other byte-seconds: no overflow
	}
	if ph < 0 {
		// An estimate's, zero included: an application read before its
		// executors registered holds none yet.
		w.int(schema.UsageCoresHeld, int64(u.CoresHeld))
	}
	if u.CPUFrom != "" {
		w.float(schema.UsageTaskCPUSeconds, u.TaskCPUSeconds)
		w.float(schema.UsageTaskRunSeconds, u.TaskRunSeconds)
		w.float(schema.UsageBusySlotSeconds, u.BusySlotSeconds)
		w.float(schema.UsageCPUUsedSeconds, u.CPUUsedSeconds)
		w.float(schema.UsageCPUUtilisation, u.CPUUtilisation)
		w.str(schema.UsageCPUFrom, u.CPUFrom)
	}
	if u.ContainerCPUSeconds > 0 {
		w.float(schema.UsageContainerCPUSeconds, u.ContainerCPUSeconds)
	}
	var taskMs, gcMs int64
	for _, x := range st.Executors {
		taskMs += x.TotalDuration
		gcMs += x.TotalGCTime
	}
	w.float(schema.UsageGCSeconds, float64(gcMs)/1000)
	if taskMs > 0 {
		w.float(schema.UsageGCShare, float64(gcMs)/float64(taskMs))
	}
	if u.PeakRSS > 0 {
		w.int(schema.UsagePeakRSSBytes, u.PeakRSS)
		w.float(schema.UsageMemoryUtilisation, u.MemoryUtilisation)
	}
	if u.MeanRSS > 0 {
		w.int(schema.UsageMeanRSSBytes, u.MeanRSS)
		w.float(schema.UsageMeanMemoryUtilisation, u.MeanMemoryUtilisation)
		w.float(schema.UsageMeanRSSByteSeconds, u.MeanRSSByteSeconds)
	}
	if u.PeakPythonRSS > 0 {
		w.int(schema.UsagePeakPythonRSSBytes, u.PeakPythonRSS)
	}
	if t := st.StageTotals; t != nil && ph >= 0 {
		w.int(schema.UsageMemorySpilledBytes, t.MemSpill)
		w.int(schema.UsageDiskSpilledBytes, t.DiskSpill)
		w.int(schema.UsageFailedTasks, int64(t.Failed))
		w.int(schema.UsageKilledTasks, int64(t.Killed))
		w.int(schema.UsageShuffleFetchWaitMs, t.ShuffleFetchWaitMs)
	}
	if u.SlotOccupancy != nil {
		w.float(schema.UsageSlotOccupancy, *u.SlotOccupancy)
	}
	if u.DriverOnlyMs != nil {
		w.int(schema.UsageDriverOnlyMs, *u.DriverOnlyMs)
	}
	if u.FailedStageAttempts != nil {
		w.int(schema.UsageFailedStageAttempts, int64(*u.FailedStageAttempts))
	}
	if u.LostTaskSeconds != nil {
		w.float(schema.UsageLostTaskSeconds, *u.LostTaskSeconds)
	}
	if u.RecomputeTaskSeconds != nil {
		w.float(schema.UsageRecomputeTaskSeconds, *u.RecomputeTaskSeconds)
	}
	w.str(schema.UsageOutcome, u.Outcome)
	w.str(schema.UsageOutcomeReason, w.reason(u.OutcomeReason))
	cores, bytes, gpus := a.Savings()
	w.int(schema.UsageFindings, int64(len(a.Findings)))
	w.int(schema.UsageRecommendations, int64(len(a.Recommendations)))
	w.float(schema.UsageSavingCoreSeconds, cores)
	w.float(schema.UsageSavingByteSeconds, bytes)
	if u.ExecutorGPUSeconds > 0 {
		w.float(schema.UsageSavingGPUSeconds, gpus)
	}
	var confs []string
	for _, r := range a.Recommendations {
		confs = append(confs, "--conf "+r.Property+"="+r.ValueString())
	}
	w.str(schema.UsageRecommended, w.reason(strings.Join(confs, " ")))
	w.int(schema.UsageSetAsideCount, int64(len(u.SetAside)))
	if len(u.SetAside) > 0 {
		w.str(schema.UsageSetAside, w.reason(strings.Join(u.SetAside, "; ")))
	}
	notes := u.Notes
	if st.invalid > 0 {
		notes = append(notes, fmt.Sprintf("%d values in Spark's answers that no Spark writes were read as absent: %s", st.invalid, strings.Join(st.invalidSeen, ", ")))
	}
	if st.StreamErr != "" {
		notes = append(notes, "metrics stream not read: "+st.StreamErr)
	}
	w.str(schema.UsageNotes, w.reason(strings.Join(notes, "; ")))
	text := fmt.Sprintf("%s core-hours and %s GiB-hours held by %d executors", human.Hours(u.ExecutorCoreSeconds/3600),
		human.Hours(u.ExecutorMemoryByteSeconds/3600/(1<<30)), u.Executors)
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
		text += fmt.Sprintf("; the recommendations would save %s core-hours and %s GiB-hours", human.Hours(cores/3600), human.Hours(bytes/3600/(1<<30)))
	}
	if u.Outcome != "" {
		text += "; " + u.Outcome
	}
	w.str(schema.FieldTitle, w.text(fmt.Sprintf("Usage of %s", cmp.Or(st.Name, st.Key.App))))
	w.str(schema.FieldText, text)
	w.str(schema.FieldAttemptID, w.text(st.AttemptID))
	if w.end() && ph >= 0 { // end or lost: final
		w.history()
	}
}

// usageEstimate writes a running application's usage so far, read at
// atMs.
func (w *points) usageEstimate(u sizing.Usage, atMs int64) {
	w.usage(u, sizing.Advice{}, -1, atMs*1_000_000+1)
}

// reconcile writes the stream's totals against Spark's, at the end: rec,
// the accounting's reconciliation, nil when the stream or the stage list
// was not read.
func (w *points) reconcile(rec *accounting.Reconciliation) {
	st := w.st
	if !w.begin(schema.MeasurementReconcile, st.End*1_000_000) {
		return
	}
	if st.StreamErr != "" || st.StageTotals == nil || rec == nil {
		why := "the metrics stream could not be read: " + st.StreamErr
		if st.StreamErr == "" {
			why = "Spark's stage list was not read after the end"
		}
		w.str(schema.ReconcileVerdict, accounting.ReconcileNoStream)
		w.str(schema.FieldAppID, w.text(st.Key.App))
		w.str(schema.FieldText, w.reason(why))
		w.str(schema.FieldAttemptID, w.text(st.AttemptID))
		w.end()
		return
	}
	r := *rec
	w.str(schema.ReconcileVerdict, r.Verdict)
	w.str(schema.FieldAppID, w.text(st.Key.App))
	for _, m := range r.Metrics {
		w.float(schema.ReconcileStreamPrefix+m.Name, m.Stream)
		w.float(schema.ReconcileSparkPrefix+m.Name, m.Spark)
		w.float(schema.ReconcileDiffPrefix+m.Name, m.Diff())
	}
	w.int(schema.ReconcileAboveCount, int64(len(r.Above)))
	w.str(schema.ReconcileAboveExecutors, w.text(strings.Join(r.Above, ",")))
	w.int(schema.ReconcileShortCount, int64(len(r.Short)))
	w.str(schema.ReconcileShortExecutors, w.text(strings.Join(r.Short, ",")))
	w.int(schema.ReconcileUnlistedProcesses, int64(r.Unlisted))
	w.int(schema.ReconcileStagesDropped, int64(r.StagesDropped))
	w.int(schema.ReconcileFailedTasks, int64(r.FailedTasks))
	w.str(schema.FieldTitle, w.text("Reconciliation of "+cmp.Or(st.Name, st.Key.App)+": "+r.Verdict))
	w.str(schema.FieldText, w.reason(r.Text))
	w.str(schema.FieldAttemptID, w.text(st.AttemptID))
	w.end()
}

// usageLost writes, when an attempt is closed out after its source lost
// it while it ran, what it held up to when it was last seen (the metrics
// stream is not read then), with outcome driver_lost.
func (w *points) usageLost(u sizing.Usage, lastSeenMs int64) {
	w.usage(u, sizing.Advice{}, phaseLost, lastSeenMs*1_000_000+2)
}
