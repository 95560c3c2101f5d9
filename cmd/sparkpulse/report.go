package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sparkpulse/sparkpulse/annotate"
	"github.com/sparkpulse/sparkpulse/influx"
	"github.com/sparkpulse/sparkpulse/sizing"
	"github.com/sparkpulse/sparkpulse/timespent"
)

// cmdReport prints an application's executors, their memory peaks against
// its settings, and the sizing advice, read from Spark's REST API and the
// metrics stream in InfluxDB.
func cmdReport(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var o flagOverrides
	fs := newFlagSet("report", stderr, &o, false)
	fs.Var(&o.annotateURLs, "url", "Spark UI, History Server or {app_id} URL template to ask (repeatable; default [annotate] urls)")
	asJSON := fs.Bool("json", false, "print JSON instead of tables")
	fleet := fs.Bool("fleet", false, "every application that ended in --since, from the accounting in InfluxDB, instead of one")
	since := fs.Duration("since", 7*24*time.Hour, "with --fleet: how far back")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sparkpulse report [--config F] [--url U]... [--json] APP_ID\n       sparkpulse report [--config F] [--json] --fleet [--since 7d]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(normalizeDays(args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *fleet {
		if fs.NArg() != 0 {
			return fmt.Errorf("%w: report --fleet takes no application id", errUsage)
		}
		if *since <= 0 {
			return fmt.Errorf("%w: --since %s: must be positive", errUsage, *since)
		}
		plan, err := loadPlan(&o, getenv)
		if err != nil {
			return err
		}
		return reportFleet(ctx, plan, *since, *asJSON, stdout)
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("%w: report takes one application id", errUsage)
	}
	plan, err := loadPlan(&o, getenv)
	if err != nil {
		return err
	}
	return reportApp(ctx, plan, fs.Arg(0), *asJSON, stdout)
}

// reportApp reads one application from the Spark REST API and the peaks
// of its metrics stream, and prints its sizing advice and where its time
// went.
func reportApp(ctx context.Context, plan *Plan, appID string, asJSON bool, stdout io.Writer) error {
	if plan.Annotate == nil {
		return fmt.Errorf("%w: no Spark REST source: give --url or [annotate] urls", errUsage)
	}
	app, err := annotate.ReadApplication(ctx, plan.Annotate.Poller, appID)
	if err != nil {
		return err
	}
	settings, err := sizing.FromProperties(app.Properties)
	if err != nil {
		return fmt.Errorf("application %s: %w", appID, err)
	}
	stream, err := streamPeaks(ctx, plan, app)
	var notes []string
	if err != nil {
		notes = append(notes, fmt.Sprintf("peaks of the metrics stream not read (%v): Spark's REST API only", err))
	}
	stream, aside := annotate.PlausiblePeaks(app.Properties, app.Executors, stream)
	for _, a := range aside {
		notes = append(notes, "set aside from the metrics stream: "+a)
	}
	advice := sizing.Advise(settings, mergePeaks(app.Executors, stream))
	advice.Notes = append(notes, advice.Notes...)
	stages, err := annotate.ReadStages(ctx, plan.Annotate.Poller, app, slowestStages)
	if err != nil {
		return fmt.Errorf("application %s: stages: %w", appID, err)
	}
	spent := whereTimeWent(stages)
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(reportJSON(app, advice, spent))
	}
	printReport(stdout, app, advice)
	fmt.Fprintln(stdout)
	io.WriteString(stdout, spent.Text())
	return nil
}

// slowestStages is how many stages the report judges.
const slowestStages = 5

// whereTimeWent turns the stages read into timespent's terms and judges
// them.
func whereTimeWent(read []annotate.StageRead) timespent.Report {
	var stages []timespent.Stage
	var failures []timespent.Failure
	for _, r := range read {
		s := timespent.Stage{ID: r.StageID, Attempt: r.AttemptID, Name: r.Name, Status: r.Status, Tasks: r.NumTasks,
			FailedTasks: r.NumFailedTasks, RunTimeMs: r.ExecutorRunTime, GCTimeMs: r.JVMGCTime, FetchWaitMs: r.ShuffleFetchWaitTime,
			InputBytes: r.InputBytes, ShuffleReadBytes: r.ShuffleReadBytes, MemorySpilledBytes: r.MemoryBytesSpilled,
			DiskSpilledBytes: r.DiskBytesSpilled}
		if r.SubmissionTime != nil && r.CompletionTime != nil {
			s.DurationMs = r.CompletionTime.Sub(r.SubmissionTime.Time).Milliseconds()
		}
		if r.Summary != nil {
			s.Detailed, s.TaskMedianMs, s.TaskMaxMs = true, int64(r.Summary.ExecutorRunTime[0]), int64(r.Summary.ExecutorRunTime[2])
			// What a task read: input or shuffle, whichever the largest
			// task read more of.
			for _, q := range [][]float64{r.Summary.InputMetrics.BytesRead, r.Summary.ShuffleReadMetrics.ReadBytes} {
				if len(q) == 3 && int64(q[2]) > s.TaskMaxBytes {
					s.TaskMedianBytes, s.TaskMaxBytes = int64(q[0]), int64(q[2])
				}
			}
		}
		if r.Slowest != nil {
			s.StragglerExecutor, s.StragglerHost = r.Slowest.ExecutorID, r.Slowest.Host
			if r.Slowest.TaskMetrics != nil {
				s.StragglerGCMs = r.Slowest.TaskMetrics.JVMGCTime
			}
		}
		stages = append(stages, s)
		for _, t := range r.Failed {
			class, kind := annotate.TaskErrorClass(t.ErrorMessage, t.Status)
			failures = append(failures, timespent.Failure{Stage: r.StageID, Class: class, Kind: kind, Executor: t.ExecutorID})
		}
	}
	return timespent.Judge(stages, failures, slowestStages)
}

// executorMetrics are the ExecutorMetrics gauges that size memory, by the
// measurement names of the built-in Spark mapping.
var executorMetrics = []string{"JVMHeapMemory", "JVMOffHeapMemory", "OnHeapExecutionMemory", "OnHeapStorageMemory",
	"OffHeapExecutionMemory", "OffHeapStorageMemory", "DirectPoolMemory", "MappedPoolMemory",
	"ProcessTreeJVMRSSMemory", "ProcessTreePythonRSSMemory", "ProcessTreeOtherRSSMemory"}

// streamPeaks reads from InfluxDB the largest value of each ExecutorMetrics
// gauge that every process of the application sent, from the first
// [[graphite]] block's database: process → gauge → bytes.
func streamPeaks(ctx context.Context, plan *Plan, app annotate.Application) (map[string]map[string]int64, error) {
	if len(plan.Listeners) == 0 {
		return nil, nil
	}
	db, _, _ := strings.Cut(plan.Listeners[0].Target.Bucket, "/")
	// Over the attempt's run (a minute either side, for the clocks):
	// metrics under a name carry other runs of it too.
	end := app.End
	if end.IsZero() {
		end = time.Now()
	}
	q := fmt.Sprintf(`SELECT max("value") FROM %s WHERE "applicationid" = %s AND time >= %dms AND time <= %dms GROUP BY "process"`,
		identList(executorMetrics), influx.QuoteString(app.MetricsKey),
		app.Start.Add(-time.Minute).UnixMilli(), end.Add(time.Minute).UnixMilli())
	series, err := influx.Query(ctx, plan.Influx, db, q)
	if err != nil {
		return nil, err
	}
	peaks := map[string]map[string]int64{}
	for _, s := range series {
		p := s.Tags["process"]
		f, ok := influx.Number(firstValue(s, 1))
		if p == "" || !ok {
			continue
		}
		if peaks[p] == nil {
			peaks[p] = map[string]int64{}
		}
		// Beyond an int64: kept at its end, which the screen refuses,
		// never cast past it.
		v := int64(math.MaxInt64)
		switch {
		case f < 0:
			v = -1
		case f < 0x1p63:
			v = int64(f)
		}
		peaks[p][s.Name] = v
	}
	return peaks, nil
}

// mergePeaks takes, for every gauge, the larger of the REST API's peak and
// the stream's, and adds the processes only the stream knows (executors
// Spark no longer lists beyond spark.ui.retainedDeadExecutors).
func mergePeaks(execs []sizing.Executor, stream map[string]map[string]int64) []sizing.Executor {
	seen := map[string]bool{}
	for i := range execs {
		x := &execs[i]
		seen[x.ID] = true
		for k, v := range stream[x.ID] {
			if x.Peaks == nil {
				x.Peaks = map[string]int64{}
			}
			x.Peaks[k] = max(x.Peaks[k], v)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(stream)) {
		if !seen[id] {
			execs = append(execs, sizing.Executor{ID: id, Peaks: stream[id]})
		}
	}
	return execs
}

func printReport(w io.Writer, app annotate.Application, a sizing.Advice) {
	s := a.Settings
	name := app.ID
	if app.AttemptID != "" {
		name += " attempt " + app.AttemptID
	}
	fmt.Fprintf(w, "%s (%s), from %s\n\n", name, app.Name, app.Source)
	fmt.Fprintf(w, "limits per executor: heap %s, unified region %s, overhead %s", sizing.Bytes(s.Heap), sizing.Bytes(s.Unified()), sizing.Bytes(s.Overhead))
	if s.PySpark > 0 {
		fmt.Fprintf(w, ", PySpark %s", sizing.Bytes(s.PySpark))
	}
	if s.OffHeap > 0 {
		fmt.Fprintf(w, ", off-heap %s", sizing.Bytes(s.OffHeap))
	}
	fmt.Fprintf(w, "; container %s\n\n", sizing.Bytes(s.Container()))
	printExecutors(w, a.Executors)
	printAdvice(w, a)
}

// printExecutors prints a table of each executor's peaks.
func printExecutors(w io.Writer, executors []sizing.Headroom) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "executor\tpeak RSS\tof container\tpeak heap\tof heap\texecution+storage\tof unified\tPython RSS\tGC share\tremoved as\t")
	for _, h := range executors {
		rss, use := "-", "-"
		if h.ProcessTreeMetric {
			rss, use = sizing.Bytes(h.RSS), pct(h.ContainerUse)
		}
		if h.KilledForMemory {
			use = "killed"
		}
		gc := "-"
		if h.GCShare > 0 {
			gc = pct(h.GCShare)
		}
		removed := "-"
		if h.RemoveKind != "" {
			removed = h.RemoveKind
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", h.ID, rss, use, sizing.Bytes(h.Heap), pct(h.HeapUse),
			sizing.Bytes(h.Unified), pct(h.UnifiedUse), sizing.Bytes(h.Python), gc, removed)
	}
	tw.Flush()
	fmt.Fprintln(w)
}

// printAdvice prints the findings, recommended settings and notes.
func printAdvice(w io.Writer, a sizing.Advice) {
	if len(a.Findings) == 0 {
		fmt.Fprintln(w, "findings: none")
	} else {
		fmt.Fprintln(w, "findings:")
		for _, f := range a.Findings {
			who := "executor " + f.Executor
			if f.Executor == "" {
				who = "executors"
			}
			fmt.Fprintf(w, "  [%s] %s: %s\n", f.Rule, who, f.Text)
		}
	}
	if len(a.Recommendations) == 0 {
		fmt.Fprintln(w, "recommended settings: none")
	} else {
		fmt.Fprintln(w, "recommended settings:")
		for _, r := range a.Recommendations {
			now := "not set"
			if c := r.CurrentString(); c != "" {
				now = "now " + c
			}
			fmt.Fprintf(w, "  --conf %s=%s  (%s; %s)\n", r.Property, r.ValueString(), now, r.Reason)
		}
	}
	for _, n := range a.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

func pct(f float64) string { return fmt.Sprintf("%.0f %%", 100*f) }

// reportJSON is the --json output: stable field names for scripts.
func reportJSON(app annotate.Application, a sizing.Advice, spent timespent.Report) any {
	type setting struct {
		Property string `json:"property"`
		Value    string `json:"value"`
		Current  string `json:"current,omitempty"`
		Reason   string `json:"reason"`
	}
	out := struct {
		Application string            `json:"application"`
		Attempt     string            `json:"attempt,omitempty"`
		Name        string            `json:"name"`
		Source      string            `json:"source"`
		Limits      map[string]int64  `json:"limits_bytes"`
		Executors   []sizing.Headroom `json:"executors"`
		Findings    []sizing.Finding  `json:"findings"`
		Settings    []setting         `json:"recommended_settings"`
		Notes       []string          `json:"notes"`
		Properties  map[string]string `json:"memory_properties"`
		Time        timespent.Report  `json:"where_the_time_went"`
	}{Application: app.ID, Attempt: app.AttemptID, Name: app.Name, Source: app.Source, Time: spent,
		Limits: map[string]int64{"heap": a.Settings.Heap, "unified": a.Settings.Unified(), "overhead": a.Settings.Overhead,
			"pyspark": a.Settings.PySpark, "off_heap": a.Settings.OffHeap, "container": a.Settings.Container()},
		Executors: a.Executors, Findings: a.Findings, Settings: []setting{}, Notes: a.Notes, Properties: map[string]string{}}
	// Lists, never null, for scripts.
	if out.Executors == nil {
		out.Executors = []sizing.Headroom{}
	}
	if out.Findings == nil {
		out.Findings = []sizing.Finding{}
	}
	for _, r := range a.Recommendations {
		out.Settings = append(out.Settings, setting{r.Property, r.ValueString(), r.CurrentString(), r.Reason})
	}
	for k, v := range app.Properties {
		if strings.Contains(k, "memory") || strings.Contains(k, "Memory") || k == "spark.executor.cores" {
			out.Properties[k] = v
		}
	}
	if out.Notes == nil {
		out.Notes = []string{}
	}
	return out
}
