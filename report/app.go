package report

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sparkpulse/sparkpulse/attempt"
	"github.com/sparkpulse/sparkpulse/human"
	"github.com/sparkpulse/sparkpulse/sizing"
	"github.com/sparkpulse/sparkpulse/timespent"
)

// WriteApp assesses one application as the annotator does when it ends
// (attempt.Assess: the same reads, accounting and rules as
// spark_app_usage and spark_sizing, the metrics stream read back from
// InfluxDB through cfg.Stream), and prints it to w with where its time
// went: as text, or as JSON.
func WriteApp(ctx context.Context, cfg attempt.Config, appID string, stages int, asJSON bool, w io.Writer) error {
	as, err := attempt.Assess(ctx, cfg, appID)
	if err != nil {
		return err
	}
	read, err := attempt.ReadStages(ctx, cfg, as.Application, cmp.Or(stages, DefaultStages))
	if err != nil {
		return fmt.Errorf("application %s: stages: %w", appID, err)
	}
	spent := whereTimeWent(read, as, cmp.Or(stages, DefaultStages))
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(reportJSON(as, spent))
	}
	printReport(w, as)
	fmt.Fprintln(w)
	io.WriteString(w, spent.Text())
	return nil
}

// DefaultStages is how many of its slowest stages the report of an
// application judges, unless told another number (report --stages).
const DefaultStages = 5

// whereTimeWent turns the stages read into timespent's terms and judges
// them.
func whereTimeWent(read []attempt.StageRead, as attempt.Assessment, judged int) timespent.Report {
	removed := map[string]string{} // executor → how its removal reads
	for _, x := range as.Application.Executors {
		if x.RemoveReason != "" {
			removed[x.ID] = as.Advice.Settings.RemoveKind(x.RemoveReason)
		}
	}
	// Spark 4 counts each task's cpus in its run time (sizing.RunTimeCPUs):
	// the shares of it that GC and fetch waits took are of wall time.
	cpus := int64(max(as.Usage.RunTimeCPUs, 1))
	var stages []timespent.Stage
	var failures []timespent.Failure
	for _, r := range read {
		s := timespent.Stage{ID: r.StageID, Attempt: r.AttemptID, Name: r.Name, Status: r.Status, Tasks: r.NumTasks,
			FailedTasks: r.NumFailedTasks, RunTimeMs: r.ExecutorRunTime / cpus, GCTimeMs: r.JVMGCTime, FetchWaitMs: r.ShuffleFetchWaitTime,
			InputBytes: r.InputBytes, ShuffleReadBytes: r.ShuffleReadBytes, MemorySpilledBytes: r.MemoryBytesSpilled,
			DiskSpilledBytes: r.DiskBytesSpilled, ConcurrentGC: as.Advice.Settings.ConcurrentGC}
		if r.SubmissionTime != nil && r.CompletionTime != nil {
			s.DurationMs = r.CompletionTime.Sub(r.SubmissionTime.Time).Milliseconds()
		}
		if r.Summary != nil {
			s.Detailed, s.TaskMedianMs, s.TaskMaxMs = true, int64(r.Summary.ExecutorRunTime[0])/cpus, int64(r.Summary.ExecutorRunTime[2])/cpus
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
			class, kind := attempt.TaskErrorClass(t.ErrorMessage, t.Status)
			if why := removed[t.ExecutorID]; kind == attempt.TaskExecutorLost && why != "" {
				class += " (" + why + ")" // an executor lost over memory reads as such
			}
			failures = append(failures, timespent.Failure{Stage: r.StageID, Class: class, Kind: kind, Executor: t.ExecutorID})
		}
	}
	return timespent.Judge(stages, failures, judged)
}

func printReport(w io.Writer, as attempt.Assessment) {
	app, a, u := as.Application, as.Advice, as.Usage
	s := a.Settings
	name := app.ID
	if app.AttemptID != "" {
		name += " attempt " + app.AttemptID
	}
	fmt.Fprintf(w, "%s (%s), from %s\n", name, app.Name, app.Source)
	if !as.Final {
		fmt.Fprintln(w, "still running: figures up to now; spark_sizing and spark_app_usage are written when it ends")
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "limits per executor: heap %s, unified region %s, overhead %s", sizing.Bytes(s.Heap), sizing.Bytes(s.Unified()), sizing.Bytes(s.Overhead))
	if s.PySpark > 0 {
		fmt.Fprintf(w, ", PySpark %s", sizing.Bytes(s.PySpark))
	}
	if s.OffHeap > 0 {
		fmt.Fprintf(w, ", off-heap %s", sizing.Bytes(s.OffHeap))
	}
	fmt.Fprintf(w, "; container %s\n\n", sizing.Bytes(s.Container()))
	printUsage(w, u)
	printExecutors(w, a.Executors)
	printAdvice(w, a)
	for _, n := range u.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	for _, x := range u.SetAside {
		fmt.Fprintf(w, "set aside, as no genuine stream could say it (Spark's figure used): %s\n", x)
	}
}

// printUsage prints what the application held and how busy it kept it,
// as spark_app_usage has it.
func printUsage(w io.Writer, u sizing.Usage) {
	fmt.Fprintf(w, "held: %s over %s: %s core-hours, %s GiB-hours",
		human.Count(u.Executors, "executor"), (time.Duration(u.DurationMs) * time.Millisecond).Round(time.Second),
		hours(u.ExecutorCoreSeconds), hours(u.ExecutorMemoryByteSeconds/(1<<30)))
	if u.ExecutorGPUSeconds > 0 {
		fmt.Fprintf(w, ", %s GPU-hours", hours(u.ExecutorGPUSeconds))
	}
	if u.DriverCoreSeconds > 0 {
		fmt.Fprintf(w, "; the driver %s core-hours", hours(u.DriverCoreSeconds))
	}
	fmt.Fprintln(w)
	var busy []string
	if u.SlotOccupancy != nil {
		busy = append(busy, fmt.Sprintf("task slots busy %s of the time held", pct(*u.SlotOccupancy)))
	}
	if u.CPUFrom != "" {
		busy = append(busy, fmt.Sprintf("CPU %s (from the %s)", pct(u.CPUUtilisation), u.CPUFrom))
	}
	if u.DriverOnlyMs != nil && u.DurationMs > 0 {
		busy = append(busy, fmt.Sprintf("no stage running for %s (%s)", (time.Duration(*u.DriverOnlyMs)*time.Millisecond).Round(time.Second),
			pct(float64(*u.DriverOnlyMs)/float64(u.DurationMs))))
	}
	if u.FailedStageAttempts != nil && *u.FailedStageAttempts > 0 {
		busy = append(busy, human.Count(*u.FailedStageAttempts, "failed stage attempt"))
	}
	if u.LostTaskSeconds != nil && *u.LostTaskSeconds > 0 {
		lost := fmt.Sprintf("%s of task time lost to failed and killed tasks", time.Duration(*u.LostTaskSeconds*float64(time.Second)).Round(time.Second))
		if r := u.RecomputeTaskSeconds; r != nil && *r > 0 {
			lost += fmt.Sprintf(" (%s of it tasks run again for shuffle output lost with an executor)", time.Duration(*r*float64(time.Second)).Round(time.Second))
		}
		busy = append(busy, lost)
	}
	if len(busy) > 0 {
		fmt.Fprintln(w, strings.Join(busy, "; "))
	}
	if u.Outcome != "" {
		fmt.Fprintf(w, "outcome: %s", u.Outcome)
		if u.OutcomeReason != "" {
			fmt.Fprintf(w, " (%s)", u.OutcomeReason)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
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
			switch {
			case r.CurrentText != "":
				now = "now " + r.CurrentText
			case r.Current > 0:
				// As a person reads it; the --conf value is as Spark takes it.
				now = "now " + human.Bytes(r.Current)
			}
			fmt.Fprintf(w, "  --conf %s=%s  (%s; %s%s)\n", r.Property, r.ValueString(), now, r.Reason, saving(r))
		}
	}
	for _, n := range a.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

func pct(f float64) string { return fmt.Sprintf("%.0f %%", 100*f) }

// saving is a recommendation's saving as the fleet counts it ("" when
// none), or its cost.
func saving(r sizing.Setting) string {
	var saves, costs []string
	for _, x := range []struct {
		v    float64
		unit string
	}{{r.SavingCoreSeconds, "core-hours"}, {r.SavingByteSeconds / (1 << 30), "GiB-hours"}, {r.SavingGPUSeconds, "GPU-hours"}} {
		switch {
		case x.v > 0:
			saves = append(saves, hours(x.v)+" "+x.unit)
		case x.v < 0:
			costs = append(costs, hours(-x.v)+" "+x.unit)
		}
	}
	out := ""
	if len(saves) > 0 {
		out += "; saves " + strings.Join(saves, ", ")
	}
	if len(costs) > 0 {
		out += "; costs " + strings.Join(costs, ", ")
	}
	return out
}

// hours writes seconds (of a core, or of a GiB) as hours (human.Hours).
func hours(seconds float64) string { return human.Hours(seconds / 3600) }

// reportJSON is the --json output: stable field names for scripts.
func reportJSON(as attempt.Assessment, spent timespent.Report) any {
	app, a := as.Application, as.Advice
	type setting struct {
		Property          string  `json:"property"`
		Value             string  `json:"value"`
		Current           string  `json:"current,omitempty"`
		Rule              string  `json:"rule"`
		Reason            string  `json:"reason"`
		Risk              string  `json:"risk,omitempty"`
		SavingCoreSeconds float64 `json:"saving_core_seconds"`
		SavingByteSeconds float64 `json:"saving_byte_seconds"`
		SavingGPUSeconds  float64 `json:"saving_gpu_seconds,omitempty"`
	}
	out := struct {
		Application string            `json:"application"`
		Attempt     string            `json:"attempt,omitempty"`
		Name        string            `json:"name"`
		Source      string            `json:"source"`
		Final       bool              `json:"ended"`
		Limits      map[string]int64  `json:"limits_bytes"`
		Usage       sizing.Usage      `json:"usage"`
		Executors   []sizing.Headroom `json:"executors"`
		Findings    []sizing.Finding  `json:"findings"`
		Settings    []setting         `json:"recommended_settings"`
		Notes       []string          `json:"notes"`
		Properties  map[string]string `json:"memory_properties"`
		Time        timespent.Report  `json:"where_the_time_went"`
	}{Application: app.ID, Attempt: app.AttemptID, Name: app.Name, Source: app.Source, Final: as.Final, Time: spent, Usage: as.Usage,
		Limits: map[string]int64{"heap": a.Settings.Heap, "unified": a.Settings.Unified(), "overhead": a.Settings.Overhead,
			"pyspark": a.Settings.PySpark, "off_heap": a.Settings.OffHeap, "container": a.Settings.Container()},
		Executors: a.Executors, Findings: a.Findings, Settings: []setting{}, Notes: append(slices.Clone(a.Notes), as.Usage.Notes...), Properties: map[string]string{}}
	// Lists, never null, for scripts.
	if out.Executors == nil {
		out.Executors = []sizing.Headroom{}
	}
	if out.Findings == nil {
		out.Findings = []sizing.Finding{}
	}
	for _, r := range a.Recommendations {
		out.Settings = append(out.Settings, setting{r.Property, r.ValueString(), r.CurrentString(), r.Rule, r.Reason, r.Risk, r.SavingCoreSeconds, r.SavingByteSeconds, r.SavingGPUSeconds})
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
