package accounting

import (
	"errors"
	"fmt"
	"time"

	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/sizing"
	"github.com/sparkpulse/sparkpulse/sparkapi"
)

// Attempt is what Spark's REST API said of one application attempt, and
// the stream's totals of its processes, as the accounting reads them.
type Attempt struct {
	StartMs    int64             // the attempt's start, epoch ms
	Completed  bool              // Spark lists it as completed
	Properties map[string]string // the environment's Spark properties
	Executors  []sparkapi.Executor
	Jobs       []sparkapi.Job // by id
	Stages     []Stage        // the stage attempts held, by id and attempt
	// StageTotals sums Spark's whole stage list as read after the end; nil
	// while the attempt runs, or when the list was not read.
	StageTotals *StageTotals
	// Stream is the stream's totals of its processes, by process, as read
	// (not screened); nil without one.
	Stream map[string]ProcessTotals
	// StreamRead: a metrics stream is configured and was read for the
	// attempt, so a completed attempt is reconciled.
	StreamRead bool
	// SparkVersion is the application's (appSparkVersion): what Spark's
	// task run time counts depends on it (sizing.RunTimeCPUs).
	SparkVersion string
	// Hadoop holds the environment's Hadoop properties of
	// sizing.YARNAllocationKeys: how YARN rounded its containers.
	Hadoop map[string]string
	// Profiles are the environment's resource profiles (Spark 3.1+).
	Profiles []sparkapi.ResourceProfile
}

// Stage is a stage attempt as Spark lists it, with the failed tasks read
// of it once it ended.
type Stage struct {
	sparkapi.Stage
	DetailsRead bool                // its details were read (or tried)
	FailedTasks []sparkapi.TaskData // its failed tasks, as read with the details
	KilledTasks []sparkapi.TaskData // and its killed ones
}

// Result is the accounting of an attempt up to a time, and what package
// sizing's advisor takes to advise on it.
type Result struct {
	Settings  sizing.Settings  // the executors' settings, from the properties
	Resources sizing.Resources // the application's, from the properties
	// Executors are the attempt's processes as the advisor reads them:
	// Spark's figures with the screened stream's.
	Executors []sizing.Executor
	Usage     sizing.Usage // the figures of spark_app_usage
	SetAside  []SetAside   // what the screen refused of the stream
	// Reconciliation is the stream's totals against Spark's: for a
	// completed attempt whose stream and whole stage list were read; nil
	// otherwise.
	Reconciliation *Reconciliation
	FailureReasons []string // the attempt's stage failure reasons, for the advisor
}

// Account works out the accounting of attempt a up to endMs (its end, or
// the time of the read while it runs), with the stream's totals screened
// first (Screen): the usage, what was set aside, and, once it has
// completed, the reconciliation and the lost task time. It fails only
// when the properties cannot be read as settings.
func Account(a *Attempt, endMs int64) (Result, error) {
	s, r, err := a.settings()
	if err != nil {
		return Result{}, err
	}
	stream, aside := Screen(a.Properties, RunCPUsOf(a.SparkVersion, r.TaskCPUs, a.Profiles), a.Executors, a.Stream, endMs, a.Completed)
	execs := SizingExecutors(a.Executors, stream, endMs)
	ProfileLimits(execs, a.Profiles, s, a.SparkVersion)
	u := sizing.Account(s, r, execs, endMs-a.StartMs)
	if err := anyCluster(u); err != nil {
		return Result{}, err
	}
	SetAsideIn(&u, aside, a.StageTotals)
	if n := TaskOnlyNote(a.SparkVersion, r.TaskCPUs, a.Profiles); n != "" && u.SlotOccupancy != nil {
		u.Notes = append(u.Notes, n)
	}
	if a.StageTotals != nil {
		u.SpilledBytes = a.StageTotals.MemSpill
	}
	var rec *Reconciliation
	if a.Completed {
		WithinSparkTotals(&u, a.StageTotals)
		a.StageTotals.Figures(&u, a.StartMs, endMs)
		if a.StreamRead && a.StageTotals != nil {
			r := Reconcile(a.Executors, *a.StageTotals, a.Stream, aside)
			rec = &r
		}
		LostTasks(&u, a.StageTotals, FailedTaskRunMs(a.Stages, a.StageTotals), RecomputeRunMs(a.Stages), rec)
	} else {
		// Running: the stages held so far, as the estimate reads them.
		currentStages(a.Stages).Figures(&u, a.StartMs, endMs)
	}
	u.Outcome, u.OutcomeReason = outcome(a)
	u.Notes = append(u.Notes, peakWitness(u, a.Executors, execs)...)
	return Result{Settings: s, Resources: r, Executors: execs, Usage: u, SetAside: aside,
		Reconciliation: rec, FailureReasons: FailureReasons(a.Stages)}, nil
}

// peakWitness says where the peaks of resident memory came from when
// Spark does not vouch for them: Spark lists no such peak for the
// executor with the peak (an older Spark, process-tree metrics off, or
// one it no longer lists), or its own is well below (witnessSlack) the
// stream's, which is then the stream's alone. Spark's peaks are no bound
// (see Screen), so the figure stands; the note says who saw it.
func peakWitness(u sizing.Usage, listed []sparkapi.Executor, execs []sizing.Executor) []string {
	spark := byID(listed)
	var out []string
	for _, w := range []struct {
		what   string
		peak   int64
		gauges []string
	}{
		{"peak resident memory", u.PeakRSS, rssGauges},
		{"Python workers' peak", u.PeakPythonRSS, []string{"ProcessTreePythonRSSMemory"}},
	} {
		if w.peak <= 0 {
			continue
		}
		for _, x := range execs {
			var stream, own int64
			listedAll := true
			for _, g := range w.gauges {
				stream += x.Peaks[g]
				if l := spark[x.ID]; l != nil && hasKey(l.PeakMemoryMetrics, g) {
					own += l.PeakMemoryMetrics[g]
				} else {
					listedAll = false
				}
			}
			if w.what == "peak resident memory" {
				stream = x.RSS() // a moment's, where the stream says it
			}
			if x.ID == "driver" || stream != w.peak {
				continue
			}
			switch {
			case !listedAll:
				out = append(out, fmt.Sprintf("%s %s from the metrics stream alone: Spark lists none for executor %s", w.what, sizing.Bytes(w.peak), x.ID))
			case float64(w.peak) > witnessSlack*float64(own):
				out = append(out, fmt.Sprintf("%s %s from the metrics stream alone: Spark's own for executor %s is %s", w.what, sizing.Bytes(w.peak), x.ID, sizing.Bytes(own)))
			}
			break
		}
	}
	return out
}

// witnessSlack is how far above Spark's own peak the stream's may be
// before the usage says Spark did not see it: real Spark's genuine
// stream was seen up to 1.24 times above (the heap, recordings).
const witnessSlack = 1.5

func hasKey(m map[string]int64, k string) bool {
	_, ok := m[k]
	return ok
}

// Spark's answers together. Each number of an answer is checked alone
// (sparkapi.Check: cores at most 65 536, dates from 2000, sizes under
// 2^58), but numbers each within bounds can be absurd together: 200
// executors of 65 536 cores each since 2000, or of 1 PiB each. Such an
// application would hold more than every figure of the fleet together,
// so its usage is refused (ErrNoCluster) where it goes beyond what any
// cluster holds: on average more than maxClusterCores cores or
// maxClusterMemory bytes of executors at once, or a run longer than
// maxRunDuration.
const (
	maxClusterCores  = 1 << 20 // ten times the largest Spark applications' hundred thousand
	maxClusterMemory = 1 << 50 // 1 PiB
	maxRunDuration   = 400 * 24 * time.Hour
)

// ErrNoCluster: Spark's answers describe an application no cluster could
// hold (see above); its usage is refused.
var ErrNoCluster = errors.New("Spark's answers together describe what no cluster holds")

// anyCluster checks u against what any cluster holds (see above).
func anyCluster(u sizing.Usage) error {
	secs := float64(u.DurationMs) / 1000
	switch {
	case time.Duration(u.DurationMs)*time.Millisecond > maxRunDuration:
		return fmt.Errorf("%w: a run of %s", ErrNoCluster, fmt.Sprintf("%d days", u.DurationMs/86_400_000))
	case secs > 0 && u.ExecutorCoreSeconds/secs > maxClusterCores:
		return fmt.Errorf("%w: %.0f executor cores on average", ErrNoCluster, u.ExecutorCoreSeconds/secs)
	case secs > 0 && u.ExecutorMemoryByteSeconds/secs > maxClusterMemory:
		return fmt.Errorf("%w: %s of executors on average", ErrNoCluster, sizing.Bytes(int64(min(u.ExecutorMemoryByteSeconds/secs, 1<<62))))
	}
	return nil
}

// settings reads the attempt's settings and resources (Settings), with
// what its Spark version makes of the task run time.
func (a *Attempt) settings() (sizing.Settings, sizing.Resources, error) {
	s, r, err := Settings(a.Properties)
	r.RunTimeCPUs = sizing.RunTimeCPUs(a.SparkVersion, r.TaskCPUs)
	if r.YARN && a.Hadoop != nil {
		r.YARNMinMemory, r.YARNMemoryStep = sizing.YARNAllocation(a.Hadoop)
	}
	return s, r, err
}

// Estimate is a running attempt's usage so far, at atMs, from stream, the
// stream's totals read up to then: the stages held so far, and the cores
// held at atMs.
func Estimate(a *Attempt, stream map[string]ProcessTotals, atMs int64) (sizing.Usage, error) {
	s, r, err := a.settings()
	if err != nil {
		return sizing.Usage{}, err
	}
	stream, aside := Screen(a.Properties, RunCPUsOf(a.SparkVersion, r.TaskCPUs, a.Profiles), a.Executors, stream, atMs, false)
	execs := SizingExecutors(a.Executors, stream, atMs)
	ProfileLimits(execs, a.Profiles, s, a.SparkVersion)
	u := sizing.Account(s, r, execs, atMs-a.StartMs)
	if err := anyCluster(u); err != nil {
		return sizing.Usage{}, err
	}
	SetAsideIn(&u, aside, nil)
	currentStages(a.Stages).Figures(&u, a.StartMs, atMs)
	u.Outcome, u.OutcomeReason = outcome(a)
	u.CoresHeld = CoresHeld(a.Executors, atMs)
	return u, nil
}

// Lost is the usage of an attempt closed out after its source lost it
// while it ran (at lostAt): what it held up to when it was last seen
// (lastSeenMs), without the stream, with outcome driver_lost.
func Lost(a *Attempt, lastSeenMs int64, lostAt time.Time) (sizing.Usage, error) {
	s, r, err := a.settings()
	if err != nil {
		return sizing.Usage{}, err
	}
	u := sizing.Account(s, r, SizingExecutors(a.Executors, nil, lastSeenMs), lastSeenMs-a.StartMs)
	if err := anyCluster(u); err != nil {
		return sizing.Usage{}, err
	}
	u.TaskTimesUnknown("the metrics stream is not read for an application closed out while it ran")
	currentStages(a.Stages).Figures(&u, a.StartMs, lastSeenMs)
	u.Outcome = sizing.OutcomeDriverLost
	u.OutcomeReason = fmt.Sprintf("no source has shown it since %s, while it ran: its end was never seen (the driver crashed or was killed, or ended where no History Server shows it)",
		lostAt.UTC().Format(time.RFC3339))
	return u, nil
}

// StreamOnly is the usage of an application that no Spark REST source
// showed, from its processes' metrics alone (stream, read over their
// reports, firstMs to lastMs): how long they reported, how many executors
// did, their tasks' CPU, run and GC time, and their memory. Nothing Spark
// said vouches for it, and the stream carries neither cores nor settings:
// nothing held, no utilisation, no advice, outcome unknown. A value no
// process could report (negative, not finite, a sum past 2^53, memory
// past 1 PiB) is left out.
func StreamOnly(stream map[string]ProcessTotals, firstMs, lastMs int64) sizing.Usage {
	u := sizing.Usage{DurationMs: max(lastMs-firstMs, 0), TaskCPUs: 1, Outcome: sizing.OutcomeUnknown,
		OutcomeReason: "no Spark REST source showed it: its end, and how it ended, are not known"}
	var cpuNs, runMs, gcMs, meanRSS float64
	var withCPU, withRSS int
	for id, t := range stream {
		if id == "driver" {
			continue
		}
		u.Executors++
		if v, ok := plausible(t.Sums[StreamKey(schema.CPUTime)]); ok {
			cpuNs += v
			withCPU++
		}
		if v, ok := plausible(t.Sums[StreamKey(schema.RunTime)]); ok {
			runMs += v
		}
		if v, ok := plausible(t.Sums[StreamKey(schema.JVMGCTime)]); ok {
			gcMs += v
		}
		var peak, mean float64
		for _, m := range TreeGauges {
			if v, ok := plausibleMemory(t.Peak[StreamKey(m)]); ok {
				peak += v
			}
			if v, ok := plausibleMemory(t.Mean[StreamKey(m)]); ok {
				mean += v
			}
		}
		u.PeakRSS = max(u.PeakRSS, int64(peak))
		if v, ok := plausibleMemory(t.Peak[StreamKey(schema.PythonRSSMemory)]); ok {
			u.PeakPythonRSS = max(u.PeakPythonRSS, int64(v))
		}
		if mean > 0 {
			meanRSS += mean
			withRSS++
		}
	}
	u.TaskCPUSeconds, u.TaskRunSeconds, u.GCSeconds = cpuNs/1e9, runMs/1000, gcMs/1000
	if withCPU > 0 {
		u.CPUFrom, u.CPUUsedSeconds = "tasks", u.TaskCPUSeconds
	}
	if withRSS > 0 {
		u.MeanRSS = int64(meanRSS / float64(withRSS))
	}
	u.Notes = append(u.Notes, "seen only in its metrics: no cores or settings are known, so nothing held, no utilisation and no advice")
	return u
}

// plausible is v when a process could have reported it as a counter's
// sum; plausibleMemory as an amount of memory (at most maxMemory).
func plausible(v float64) (float64, bool) {
	return v, v > 0 && v <= 1<<53
}

func plausibleMemory(v float64) (float64, bool) {
	return v, v > 0 && v <= maxMemory
}

// byID indexes executors by id.
func byID(execs []sparkapi.Executor) map[string]*sparkapi.Executor {
	m := make(map[string]*sparkapi.Executor, len(execs))
	for i := range execs {
		m[execs[i].ID] = &execs[i]
	}
	return m
}
