package report

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sparkpulse/sparkpulse/human"
	"github.com/sparkpulse/sparkpulse/influx"
	"github.com/sparkpulse/sparkpulse/influxql"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/timespent"
)

// A recurring job is the applications of one name (spark.app.name, the
// tag appname): a nightly run is one run of its job. `report --job NAME`
// lists its runs of the last Since, oldest first, and compares each
// with its baseline: the median of the Baseline runs that succeeded
// before it. A run is slower when its wall time passes the baseline's by
// both SlowerRatio and SlowerMinMs, costlier when its core-hours pass by
// CostlierRatio and CostlierMinCoreHours; the margins keep runs that
// differ by noise quiet. A run with fewer than MinBaseline succeeded runs
// before it is not judged.
const (
	DefaultJobSince      = 90 * 24 * time.Hour
	DefaultBaseline      = 5
	MinBaseline          = 3
	SlowerRatio          = 1.5
	SlowerMinMs          = 60_000
	CostlierRatio        = 1.5
	CostlierMinCoreHours = 0.5
)

// JobQuery says what `report --job` reads: the runs of Name that ended in
// the last Since, from History ("db" or "db/rp", spark_app_history) when
// set, else from Database's spark_app_usage.
type JobQuery struct {
	Influx    influx.Config
	Database  string
	History   string
	Name      string
	Since     time.Duration
	SinceText string
	Baseline  int // runs in a baseline; 0: DefaultBaseline
}

// Job is a recurring job's runs, as `report --job --json` prints them.
type Job struct {
	Name     string   `json:"name"`
	Since    string   `json:"since"`
	Database string   `json:"database"`
	Baseline int      `json:"baseline_runs"`
	Runs     []JobRun `json:"runs"`
}

// JobRun is one run: its figures and, once it has a baseline, the verdict.
type JobRun struct {
	Application     string   `json:"application"`
	Ended           string   `json:"ended"`
	Outcome         string   `json:"outcome"`
	DurationMs      int64    `json:"duration_ms"`
	Executors       int64    `json:"executors"`
	CoreHours       float64  `json:"core_hours"`
	TaskHours       *float64 `json:"task_hours"`     // busy slot-seconds ÷ 3600; nil: unknown
	SlotOccupancy   *float64 `json:"slot_occupancy"` // nil: unknown
	DriverOnlyMs    *int64   `json:"driver_only_ms"` // nil: unknown
	GCShare         *float64 `json:"gc_share"`       // nil: unknown
	DiskSpilled     int64    `json:"disk_spilled_bytes"`
	LostTaskHours   *float64 `json:"lost_task_hours"`   // nil: unknown
	PeakMemoryShare *float64 `json:"peak_memory_share"` // peak RSS ÷ container; nil: unknown
	Verdict         *Verdict `json:"verdict,omitempty"`
}

// Verdict compares a run with its baseline.
type Verdict struct {
	Baseline   JobRun `json:"baseline"` // the medians
	Runs       int    `json:"baseline_of"`
	Slower     bool   `json:"slower"`
	Costlier   bool   `json:"costlier"`
	Cause      string `json:"cause"` // a Cause*, "" when no figure explains it
	Text       string `json:"text"`
	Regression bool   `json:"regression"`
}

// The causes a verdict names, each from the figures that changed.
const (
	CauseLostTasks  = "lost_tasks"  // task time re-run after executors were lost or tasks failed
	CauseDriverOnly = "driver_only" // the driver worked alone longer
	CauseSpill      = "spill"       // spill to disk appeared
	CauseMoreWork   = "more_work"   // the tasks' time grew: more input, more work per row, or slower tasks
	CauseIdleSlots  = "idle_slots"  // the same work with task slots idle: waiting for executors, skew, a straggler
	CauseGC         = "gc"          // garbage collection took a larger share
)

// jobFields are the columns `report --job` reads.
var jobFields = []string{schema.FieldAppID, schema.TagApplicationID, schema.UsageOutcome, schema.UsageDurationMs, schema.UsageExecutors,
	schema.UsageExecutorCoreSeconds, schema.UsageBusySlotSeconds, schema.UsageSlotOccupancy, schema.UsageDriverOnlyMs, schema.UsageGCShare,
	schema.UsageDiskSpilledBytes, schema.UsageLostTaskSeconds, schema.UsageMemoryUtilisation}

// ReadJob reads a job's runs and judges each.
func ReadJob(ctx context.Context, q JobQuery) (Job, error) {
	fq := FleetQuery{Database: q.Database, History: q.History}
	db, from := fq.ended()
	reader, err := influx.NewQuerier(q.Influx)
	if err != nil {
		return Job{}, err
	}
	defer reader.Close()
	to := time.Now()
	series, err := readWindows(ctx, reader, db, to.Add(-q.Since), to, func(lo, hi time.Time) string {
		return fmt.Sprintf(`SELECT %s FROM %s WHERE %s = %s AND time >= %dms AND time < %dms AND (%[7]s = 'end' OR %[7]s = 'lost')`,
			influxql.QuoteIdents(jobFields...), from, influxql.QuoteIdent(schema.TagAppName), influxql.QuoteString(q.Name),
			lo.UnixMilli(), hi.UnixMilli(), influxql.QuoteIdent(schema.FieldFact))
	})
	if err != nil {
		if inner := errors.Unwrap(err); inner != nil {
			err = inner
		}
		return Job{}, fmt.Errorf("reading the runs of %q (%s) from database %q at %s: %w", q.Name, from, db, influx.RedactURL(q.Influx.WithDefaults().URL), err)
	}
	j := Job{Name: q.Name, Since: q.SinceText, Database: db, Baseline: cmp.Or(q.Baseline, DefaultBaseline), Runs: []JobRun{}}
	for _, s := range series {
		j.Runs = append(j.Runs, jobRuns(s)...)
	}
	slices.SortStableFunc(j.Runs, func(a, b JobRun) int { return strings.Compare(a.Ended, b.Ended) })
	Judge(j.Runs, j.Baseline)
	return j, nil
}

// jobRuns reads the rows of a series of jobFields.
func jobRuns(s influx.Series) []JobRun {
	col := map[string]int{}
	for i, c := range s.Columns {
		col[c] = i
	}
	var out []JobRun
	for _, row := range s.Values {
		get := func(k string) any {
			if i, ok := col[k]; ok && i < len(row) {
				return row[i]
			}
			return nil
		}
		num := func(k string) (float64, bool) { return influx.Number(get(k)) }
		f := func(k string) float64 { v, _ := num(k); return v }
		str := func(k string) string { v, _ := get(k).(string); return v }
		opt := func(k string, scale float64) *float64 {
			if v, ok := num(k); ok {
				v /= scale
				return &v
			}
			return nil
		}
		r := JobRun{Application: cmp.Or(str(schema.FieldAppID), str(schema.TagApplicationID)), Ended: str("time"), Outcome: str(schema.UsageOutcome),
			DurationMs: int64(f(schema.UsageDurationMs)), Executors: int64(f(schema.UsageExecutors)), CoreHours: f(schema.UsageExecutorCoreSeconds) / 3600,
			TaskHours: opt(schema.UsageBusySlotSeconds, 3600), SlotOccupancy: opt(schema.UsageSlotOccupancy, 1), GCShare: opt(schema.UsageGCShare, 1),
			DiskSpilled: int64(f(schema.UsageDiskSpilledBytes)), LostTaskHours: opt(schema.UsageLostTaskSeconds, 3600),
			PeakMemoryShare: opt(schema.UsageMemoryUtilisation, 1)}
		if v, ok := num(schema.UsageDriverOnlyMs); ok {
			ms := int64(v)
			r.DriverOnlyMs = &ms
		}
		out = append(out, r)
	}
	return out
}

// Judge gives each run of runs (oldest first) its verdict against the
// median of the up to n runs that succeeded before it.
func Judge(runs []JobRun, n int) {
	var ok []JobRun
	for i := range runs {
		if len(ok) >= MinBaseline {
			base := ok[max(0, len(ok)-n):]
			runs[i].Verdict = judge(runs[i], base)
		}
		if runs[i].Outcome == "succeeded" {
			ok = append(ok, runs[i])
		}
	}
}

// judge compares r with the runs of base.
func judge(r JobRun, base []JobRun) *Verdict {
	b := medianRun(base)
	v := &Verdict{Baseline: b, Runs: len(base)}
	v.Slower = float64(r.DurationMs) > SlowerRatio*float64(b.DurationMs) && r.DurationMs-b.DurationMs >= SlowerMinMs
	v.Costlier = r.CoreHours > CostlierRatio*b.CoreHours && r.CoreHours-b.CoreHours >= CostlierMinCoreHours
	if r.Outcome != "succeeded" {
		v.Text = "did not succeed (" + cmp.Or(r.Outcome, "unknown") + "): not compared"
		v.Slower, v.Costlier = false, false
		return v
	}
	if !v.Slower && !v.Costlier {
		v.Text = fmt.Sprintf("as usual: %s against %s, %.2f core-hours against %.2f", timespent.Duration(r.DurationMs), timespent.Duration(b.DurationMs), r.CoreHours, b.CoreHours)
		return v
	}
	v.Regression = true
	what := []string{}
	if v.Slower {
		what = append(what, fmt.Sprintf("%s against %s (×%.1f)", timespent.Duration(r.DurationMs), timespent.Duration(b.DurationMs), float64(r.DurationMs)/float64(b.DurationMs)))
	}
	if v.Costlier {
		what = append(what, fmt.Sprintf("%.2f core-hours against %.2f (×%.1f)", r.CoreHours, b.CoreHours, r.CoreHours/b.CoreHours))
	}
	v.Cause, v.Text = cause(r, b)
	head := "slower"
	if !v.Slower {
		head = "costlier"
	} else if v.Costlier {
		head = "slower and costlier"
	}
	v.Text = head + " than the median of its last " + fmt.Sprint(len(base)) + " successful runs: " + strings.Join(what, ", ") + "; " +
		cmp.Or(v.Text, "no single figure explains it (its task time, slot occupancy, driver-only time, spill, lost tasks and GC are as usual)")
	return v
}

// cause names the figure that explains r's growth over the baseline b,
// the first of the rules below that holds, each stating what the figures
// show, not a guess beyond them; "" when none does.
func cause(r, b JobRun) (string, string) {
	growth := float64(r.DurationMs - b.DurationMs)
	switch {
	case r.LostTaskHours != nil && r.TaskHours != nil && *r.LostTaskHours >= 0.1**r.TaskHours && *r.LostTaskHours > 2*val(b.LostTaskHours):
		return CauseLostTasks, fmt.Sprintf("%.2f task-hours were lost and run again (failed or killed tasks, or executors lost), %.0f%% of its task time", *r.LostTaskHours, 100**r.LostTaskHours / *r.TaskHours)
	case r.DriverOnlyMs != nil && b.DriverOnlyMs != nil && growth > 0 && float64(*r.DriverOnlyMs-*b.DriverOnlyMs) >= growth/2:
		return CauseDriverOnly, fmt.Sprintf("the driver worked alone (no stage running) for %s, against %s: that explains %.0f%% of the extra time", timespent.Duration(*r.DriverOnlyMs), timespent.Duration(*b.DriverOnlyMs), 100*float64(*r.DriverOnlyMs-*b.DriverOnlyMs)/growth)
	case r.DiskSpilled > 0 && b.DiskSpilled == 0:
		return CauseSpill, fmt.Sprintf("it spilled %s to disk, where its usual runs spill nothing: its execution memory no longer holds the data", human.Bytes(r.DiskSpilled))
	case r.GCShare != nil && b.GCShare != nil && *r.GCShare >= *b.GCShare+0.1:
		return CauseGC, fmt.Sprintf("garbage collection took %.0f%% of its task time, against %.0f%%", 100**r.GCShare, 100**b.GCShare)
	case r.TaskHours != nil && b.TaskHours != nil && *b.TaskHours > 0 && *r.TaskHours >= 1.4**b.TaskHours:
		return CauseMoreWork, fmt.Sprintf("its tasks ran %.2f task-hours, against %.2f (×%.1f): more input, more work per row, or slower tasks (its GC and spill are as usual)", *r.TaskHours, *b.TaskHours, *r.TaskHours / *b.TaskHours)
	case r.SlotOccupancy != nil && b.SlotOccupancy != nil && *r.SlotOccupancy < 0.7**b.SlotOccupancy:
		return CauseIdleSlots, fmt.Sprintf("its task slots were busy %.0f%% of the time held, against %.0f%%, for the same work: it waited for executors, or a few tasks (skew, a straggler) held the rest up", 100**r.SlotOccupancy, 100**b.SlotOccupancy)
	}
	return "", ""
}

func val(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

// medianRun is the median of each figure of runs; a figure unknown in
// any run is unknown.
func medianRun(runs []JobRun) JobRun {
	med := func(get func(JobRun) (float64, bool)) (float64, bool) {
		var xs []float64
		for _, r := range runs {
			v, ok := get(r)
			if !ok {
				return 0, false
			}
			xs = append(xs, v)
		}
		slices.Sort(xs)
		n := len(xs)
		if n == 0 {
			return 0, false
		}
		if n%2 == 1 {
			return xs[n/2], true
		}
		return (xs[n/2-1] + xs[n/2]) / 2, true
	}
	ptr := func(get func(JobRun) *float64) *float64 {
		v, ok := med(func(r JobRun) (float64, bool) {
			if p := get(r); p != nil {
				return *p, true
			}
			return 0, false
		})
		if !ok {
			return nil
		}
		return &v
	}
	var m JobRun
	d, _ := med(func(r JobRun) (float64, bool) { return float64(r.DurationMs), true })
	m.DurationMs = int64(math.Round(d))
	m.CoreHours, _ = med(func(r JobRun) (float64, bool) { return r.CoreHours, true })
	e, _ := med(func(r JobRun) (float64, bool) { return float64(r.Executors), true })
	m.Executors = int64(math.Round(e))
	s, _ := med(func(r JobRun) (float64, bool) { return float64(r.DiskSpilled), true })
	m.DiskSpilled = int64(s)
	m.TaskHours = ptr(func(r JobRun) *float64 { return r.TaskHours })
	m.SlotOccupancy = ptr(func(r JobRun) *float64 { return r.SlotOccupancy })
	m.GCShare = ptr(func(r JobRun) *float64 { return r.GCShare })
	m.LostTaskHours = ptr(func(r JobRun) *float64 { return r.LostTaskHours })
	m.PeakMemoryShare = ptr(func(r JobRun) *float64 { return r.PeakMemoryShare })
	if do := ptr(func(r JobRun) *float64 {
		if r.DriverOnlyMs == nil {
			return nil
		}
		v := float64(*r.DriverOnlyMs)
		return &v
	}); do != nil {
		ms := int64(math.Round(*do))
		m.DriverOnlyMs = &ms
	}
	m.Outcome = "succeeded"
	return m
}

// WriteJob reads a job's runs and prints them: as text, oldest first,
// each regression's verdict under it, or as JSON (a Job).
func WriteJob(ctx context.Context, q JobQuery, asJSON bool, w io.Writer) error {
	j, err := ReadJob(ctx, q)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(j)
	}
	printJob(w, j)
	return nil
}

func printJob(w io.Writer, j Job) {
	if len(j.Runs) == 0 {
		fmt.Fprintf(w, "No run of %q ended in the last %s (database %q).\n", j.Name, j.Since, j.Database)
		return
	}
	regressions := 0
	for _, r := range j.Runs {
		if r.Verdict != nil && r.Verdict.Regression {
			regressions++
		}
	}
	plural := "s"
	if regressions == 1 {
		plural = ""
	}
	fmt.Fprintf(w, "%s: %d runs ended in the last %s (database %q); each compared with the median of its last %d successful runs (at least %d): %d regression%s\n\n",
		j.Name, len(j.Runs), j.Since, j.Database, j.Baseline, MinBaseline, regressions, plural)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ENDED\tAPPLICATION\tOUTCOME\tDURATION\tCORE-H\tTASK-H\tSLOTS BUSY\tDRIVER-ONLY\tSPILL\tVERDICT")
	for _, r := range j.Runs {
		verdict := "-"
		if r.Verdict != nil {
			verdict = "ok"
			switch {
			case r.Verdict.Regression:
				verdict = "REGRESSION " + cmp.Or(r.Verdict.Cause, "unexplained")
			case r.Outcome != "succeeded":
				verdict = "not compared"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.2f\t%s\t%s\t%s\t%s\t%s\n", r.Ended, r.Application, r.Outcome, timespent.Duration(r.DurationMs), r.CoreHours,
			optf(r.TaskHours, "%.2f"), optPct(r.SlotOccupancy), optMs(r.DriverOnlyMs), human.Bytes(r.DiskSpilled), verdict)
	}
	tw.Flush()
	for _, r := range j.Runs {
		if r.Verdict != nil && r.Verdict.Regression {
			fmt.Fprintf(w, "\n%s (%s): %s\n", r.Application, r.Ended, r.Verdict.Text)
		}
	}
}

func optf(p *float64, format string) string {
	if p == nil {
		return "?"
	}
	return fmt.Sprintf(format, *p)
}

func optMs(p *int64) string {
	if p == nil {
		return "?"
	}
	return timespent.Duration(*p)
}
