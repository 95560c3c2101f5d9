package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sparkpulse/sparkpulse/annotate"
	"github.com/sparkpulse/sparkpulse/influx"
)

// fleetApp is one application's accounting, as the fleet report reads it.
type fleetApp struct {
	Application       string   `json:"application"`
	MetricsKey        string   `json:"metrics_key"` // the applicationid its metrics carry: its id, or its spark.metrics.namespace
	Name              string   `json:"name"`
	User              string   `json:"user"`
	Queue             string   `json:"queue"`
	Ended             string   `json:"ended"`
	DurationMs        int64    `json:"duration_ms"`
	Executors         int64    `json:"executors"`
	CoreHours         float64  `json:"core_hours"`
	GiBHours          float64  `json:"gib_hours"`
	IdleCoreHours     float64  `json:"idle_core_hours"`    // core-hours held with no task running in them: (core-seconds − Σ task run time) ÷ 3600; 0 when unknown
	UnusedGiBHours    float64  `json:"unused_gib_hours"`   // GiB-hours × (1 − mean memory used); 0 when unknown
	CPUUtilisation    *float64 `json:"cpu_utilisation"`    // nil: unknown
	MemoryUtilisation *float64 `json:"memory_utilisation"` // peak RSS / container; nil: unknown
	GCShare           float64  `json:"gc_share"`
	FailedTasks       int64    `json:"failed_tasks"`
	SavingCoreHours   float64  `json:"saving_core_hours"`
	SavingGiBHours    float64  `json:"saving_gib_hours"`
	Recommended       string   `json:"recommended"`
}

// fleetReport is `report --fleet`: the applications, most idle core-hours
// first, and their totals.
type fleetReport struct {
	Since        string     `json:"since"`
	Database     string     `json:"database"`
	Applications []fleetApp `json:"applications"`
	Totals       struct {
		Applications    int     `json:"applications"`
		CoreHours       float64 `json:"core_hours"`
		GiBHours        float64 `json:"gib_hours"`
		IdleCoreHours   float64 `json:"idle_core_hours"`
		UnusedGiBHours  float64 `json:"unused_gib_hours"`
		SavingCoreHours float64 `json:"saving_core_hours"`
		SavingGiBHours  float64 `json:"saving_gib_hours"`
	} `json:"totals"`
}

const gibHour = 3600 * (1 << 30)

// appendFleetApps appends the applications of one series of
// spark_app_usage rows.
func appendFleetApps(apps []fleetApp, s influx.Series) []fleetApp {
	col := map[string]int{}
	for i, c := range s.Columns {
		col[c] = i
	}
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
		a := fleetApp{Application: cmp.Or(str("app_id"), str("applicationid")), MetricsKey: str("applicationid"), Name: str("appname"), User: str("user"), Queue: str("queue"),
			Ended: str("time"), DurationMs: int64(f("duration_ms")), Executors: int64(f("executors")),
			CoreHours: f("executor_core_seconds") / 3600, GiBHours: f("executor_memory_byte_seconds") / gibHour,
			GCShare: f("gc_share"), FailedTasks: int64(f("failed_tasks")),
			SavingCoreHours: f("saving_core_seconds") / 3600, SavingGiBHours: f("saving_byte_seconds") / gibHour,
			Recommended: str("recommended")}
		if v, ok := num("cpu_utilisation"); ok {
			a.CPUUtilisation = &v
		}
		// Idle is task slots no task ran in, as Sparklens counts them, not
		// CPU left unused: task CPU leaves out Python workers, GC and I/O
		// waits, so a busy PySpark or I/O-bound job would read as idle.
		if run, ok := num("task_run_seconds"); ok {
			a.IdleCoreHours = max(0, f("executor_core_seconds")-run) / 3600
		}
		if v, ok := num("memory_utilisation"); ok {
			a.MemoryUtilisation = &v
		}
		if v, ok := num("mean_memory_utilisation"); ok {
			a.UnusedGiBHours = a.GiBHours * (1 - v)
		}
		apps = append(apps, a)
	}
	return apps
}

// rank orders the applications, most idle core-hours first, and sums them.
func (r *fleetReport) rank() {
	slices.SortStableFunc(r.Applications, func(a, b fleetApp) int {
		return cmp.Or(cmp.Compare(b.IdleCoreHours, a.IdleCoreHours), cmp.Compare(b.GiBHours, a.GiBHours), strings.Compare(a.Application, b.Application))
	})
	t := &r.Totals
	for _, a := range r.Applications {
		t.Applications++
		t.CoreHours += a.CoreHours
		t.GiBHours += a.GiBHours
		t.IdleCoreHours += a.IdleCoreHours
		t.UnusedGiBHours += a.UnusedGiBHours
		t.SavingCoreHours += a.SavingCoreHours
		t.SavingGiBHours += a.SavingGiBHours
	}
}

// reportFleet reads the spark_app_usage facts of the applications that
// ended in the last since, where the annotator writes them.
func reportFleet(ctx context.Context, plan *Plan, since time.Duration, asJSON bool, stdout io.Writer) error {
	target := plan.defaultTarget()
	if plan.Annotate != nil {
		target = plan.Annotate.Target
	}
	db, _, _ := strings.Cut(target.Bucket, "/")
	if db == "" {
		return fmt.Errorf("%w: no database to read: give a [[graphite]] block or [annotate] database", errUsage)
	}
	q := fmt.Sprintf(`SELECT "applicationid", "app_id", "appname", "user", "queue", "duration_ms", "executors", "executor_core_seconds", `+
		`"executor_memory_byte_seconds", "cpu_utilisation", "task_run_seconds", "memory_utilisation", "mean_memory_utilisation", "gc_share", "failed_tasks", `+
		`"saving_core_seconds", "saving_byte_seconds", "recommended" FROM %q WHERE "fact" = 'end' AND time >= now() - %dm`,
		annotate.MeasurementUsage, int64(since/time.Minute))
	series, err := influx.Query(ctx, plan.Influx, db, q)
	if err != nil {
		return err
	}
	r := fleetReport{Since: since.String(), Database: db, Applications: []fleetApp{}}
	for _, s := range series {
		r.Applications = appendFleetApps(r.Applications, s)
	}
	r.rank()
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	printFleet(stdout, r)
	return nil
}

func printFleet(w io.Writer, r fleetReport) {
	t := r.Totals
	fmt.Fprintf(w, "%d applications ended in the last %s (database %s)\n\n", t.Applications, r.Since, r.Database)
	if t.Applications == 0 {
		fmt.Fprintln(w, "no accounting found: it is written by the annotator ([annotate]) when an application ends")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "application\tname\tuser\tduration\texecutors\tcore-h\tGiB-h\tCPU used\tpeak memory\tidle core-h\tunused GiB-h\tGC\tsaving core-h\tsaving GiB-h\t")
	for _, a := range r.Applications {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%.1f\t%.1f\t%s\t%s\t%.1f\t%.1f\t%s\t%.1f\t%.1f\t\n", a.Application, a.Name, a.User,
			(time.Duration(a.DurationMs) * time.Millisecond).Round(time.Second), a.Executors, a.CoreHours, a.GiBHours,
			optPct(a.CPUUtilisation), optPct(a.MemoryUtilisation), a.IdleCoreHours, a.UnusedGiBHours, pct(a.GCShare),
			a.SavingCoreHours, a.SavingGiBHours)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nheld: %.1f core-hours, %.1f GiB-hours; idle: %.1f core-hours (%s), unused: %.1f GiB-hours (%s)\n",
		t.CoreHours, t.GiBHours, t.IdleCoreHours, share(t.IdleCoreHours, t.CoreHours), t.UnusedGiBHours, share(t.UnusedGiBHours, t.GiBHours))
	fmt.Fprintf(w, "with every recommendation applied: %s, %s\n", change(t.SavingCoreHours, t.CoreHours, "core-hours"), change(t.SavingGiBHours, t.GiBHours, "GiB-hours"))
	printed := false
	for _, a := range r.Applications {
		if a.Recommended == "" {
			continue
		}
		if !printed {
			fmt.Fprintln(w, "\nrecommended:")
			printed = true
		}
		fmt.Fprintf(w, "  %s: %s\n", a.Application, a.Recommended)
	}
}

func optPct(f *float64) string {
	if f == nil {
		return "?"
	}
	return pct(*f)
}

// change says a saving (negative: a cost) against what was held.
func change(saving, held float64, unit string) string {
	word := "less"
	if saving < 0 {
		saving, word = -saving, "more"
	}
	return fmt.Sprintf("%.1f %s (%s) %s", saving, unit, share(saving, held), word)
}

func share(part, whole float64) string {
	if whole <= 0 {
		return "-"
	}
	return pct(part / whole)
}

var daysRE = regexp.MustCompile(`^(-{1,2}since=?)?([0-9]+)d$`)

// normalizeDays lets --since take days (7d), which time.ParseDuration
// does not.
func normalizeDays(args []string) []string {
	out := slices.Clone(args)
	for i, a := range out {
		if m := daysRE.FindStringSubmatch(a); m != nil && (m[1] != "" || i > 0 && strings.TrimLeft(out[i-1], "-") == "since") {
			n, _ := strconv.Atoi(m[2])
			out[i] = m[1] + strconv.Itoa(24*n) + "h"
		}
	}
	return out
}
