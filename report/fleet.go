package report

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sparkpulse/sparkpulse/human"
	"github.com/sparkpulse/sparkpulse/influx"
	"github.com/sparkpulse/sparkpulse/influxql"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/sizing"
	"github.com/sparkpulse/sparkpulse/timespent"
)

// FleetApp is one application's accounting, as the fleet report reads it.
type FleetApp struct {
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
	IdleCoreHours     float64  `json:"idle_core_hours"`    // core-hours held with no task running in them: (core-seconds − busy slot-seconds, Σ task run time × spark.task.cpus) ÷ 3600; 0 when unknown
	UnusedGiBHours    float64  `json:"unused_gib_hours"`   // GiB-hours × (1 − mean memory used); 0 when unknown
	CPUUtilisation    *float64 `json:"cpu_utilisation"`    // nil: unknown
	MemoryUtilisation *float64 `json:"memory_utilisation"` // peak RSS / container; nil: unknown
	GCShare           float64  `json:"gc_share"`
	FailedTasks       int64    `json:"failed_tasks"`
	SavingCoreHours   float64  `json:"saving_core_hours"`
	SavingGiBHours    float64  `json:"saving_gib_hours"`
	// GPUs held by the executors and the driver, and what the
	// recommendations save of them; 0 without GPUs.
	GPUHours       float64 `json:"gpu_hours,omitempty"`
	SavingGPUHours float64 `json:"saving_gpu_hours,omitempty"`
	Recommended    string  `json:"recommended"`
	// The driver side: what the cluster held for it (driver_held).
	DriverCoreHours float64 `json:"driver_core_hours"`
	DriverGiBHours  float64 `json:"driver_gib_hours"`
	DriverHeld      string  `json:"driver_held"`
	Outcome         string  `json:"outcome"` // succeeded, failed, unknown, driver_lost (closed out while running)
	// Nil when unknown.
	SlotOccupancy *float64 `json:"slot_occupancy"`    // busy slot-seconds ÷ core-seconds held
	DriverOnly    *float64 `json:"driver_only_share"` // share of the run time with no stage running
	LostTaskHours *float64 `json:"lost_task_hours"`   // run time of failed and killed tasks
}

// RunningApp is a running application's accounting over the range.
type RunningApp struct {
	Application   string   `json:"application"`
	Name          string   `json:"name"`
	User          string   `json:"user"`
	CoreHours     float64  `json:"core_hours"`
	GiBHours      float64  `json:"gib_hours"`
	SlotOccupancy *float64 `json:"slot_occupancy"` // over the range; nil: unknown
	CPU           *float64 `json:"cpu_utilisation"`
	// LastEstimate is when its latest estimate was written.
	LastEstimate time.Time `json:"last_estimate"`
}

// StreamApp is an application no Spark REST source showed, as its
// metrics tell it (spark_app_usage fact stream): no cores are known, so
// it is outside the totals.
type StreamApp struct {
	Application  string  `json:"application"` // its id, or its metrics key when that is not an id
	MetricsKey   string  `json:"metrics_key"`
	LastReport   string  `json:"last_report"`
	DurationMs   int64   `json:"duration_ms"` // first to last report
	Executors    int64   `json:"executors"`
	TaskCPUHours float64 `json:"task_cpu_hours"`
	PeakRSSBytes int64   `json:"peak_rss_bytes"` // 0: unknown
}

// staleAfter is how long a running application may go without a new
// estimate (one every 5 minutes at the default interval) before it is
// no longer taken to run: sparkpulse stopped, or no source shows it.
const staleAfter = 30 * time.Minute

// Fleet is `report --fleet`: the applications, most idle core-hours
// first, and their totals.
type Fleet struct {
	Since        string     `json:"since"`
	SinceText    string     `json:"-"` // as a person writes it: 7d, 36h
	Database     string     `json:"database"`
	Applications []FleetApp `json:"applications"`
	// Running are the applications still running (a streaming query, a
	// long job) with an estimate in the range: what they held and ran in
	// it, the difference of their cumulative estimates.
	Running []RunningApp `json:"running"`
	// Unknown are the applications with an estimate in the range, no end,
	// and no estimate for staleAfter: how they ended is not known.
	Unknown []RunningApp `json:"unknown"`
	// StreamOnly are the applications that ended in the range that no
	// source showed: what their metrics say, outside the totals.
	StreamOnly []StreamApp `json:"stream_only"`
	Totals     struct {
		Applications    int     `json:"applications"`
		CoreHours       float64 `json:"core_hours"`
		GiBHours        float64 `json:"gib_hours"`
		IdleCoreHours   float64 `json:"idle_core_hours"`
		UnusedGiBHours  float64 `json:"unused_gib_hours"`
		SavingCoreHours float64 `json:"saving_core_hours"`
		SavingGiBHours  float64 `json:"saving_gib_hours"`
		DriverCoreHours float64 `json:"driver_core_hours"`
		DriverGiBHours  float64 `json:"driver_gib_hours"`
		GPUHours        float64 `json:"gpu_hours,omitempty"`
		SavingGPUHours  float64 `json:"saving_gpu_hours,omitempty"`
		LostTaskHours   float64 `json:"lost_task_hours"` // of the applications where it is known
		Lost            int     `json:"lost_applications"`
	} `json:"totals"`
}

const gibHour = 3600 * (1 << 30)

// appendFleetApps appends the applications of one series of
// spark_app_usage rows.
func appendFleetApps(apps []FleetApp, s influx.Series) []FleetApp {
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
		a := FleetApp{Application: cmp.Or(str(schema.FieldAppID), str(schema.TagApplicationID)), MetricsKey: str(schema.TagApplicationID), Name: str(schema.TagAppName), User: str(schema.TagUser), Queue: str(schema.TagQueue),
			Ended: str("time"), DurationMs: int64(f(schema.UsageDurationMs)), Executors: int64(f(schema.UsageExecutors)),
			CoreHours: f(schema.UsageExecutorCoreSeconds) / 3600, GiBHours: f(schema.UsageExecutorMemoryByteSeconds) / gibHour,
			GCShare: f(schema.UsageGCShare), FailedTasks: int64(f(schema.UsageFailedTasks)),
			SavingCoreHours: f(schema.UsageSavingCoreSeconds) / 3600, SavingGiBHours: f(schema.UsageSavingByteSeconds) / gibHour,
			Recommended: str(schema.UsageRecommended), Outcome: str(schema.UsageOutcome), DriverHeld: str(schema.UsageDriverHeld),
			DriverCoreHours: f(schema.UsageDriverCoreSeconds) / 3600, DriverGiBHours: f(schema.UsageDriverMemoryByteSeconds) / gibHour,
			GPUHours: (f(schema.UsageExecutorGPUSeconds) + f(schema.UsageDriverGPUSeconds)) / 3600, SavingGPUHours: f(schema.UsageSavingGPUSeconds) / 3600}
		if v, ok := num(schema.UsageSlotOccupancy); ok {
			a.SlotOccupancy = &v
		}
		if v, ok := num(schema.UsageDriverOnlyMs); ok && a.DurationMs > 0 {
			share := v / float64(a.DurationMs)
			a.DriverOnly = &share
		}
		if v, ok := num(schema.UsageLostTaskSeconds); ok {
			h := v / 3600
			a.LostTaskHours = &h
		}
		if v, ok := num(schema.UsageCPUUtilisation); ok {
			a.CPUUtilisation = &v
		}
		// Idle is task slots no task ran in, as Sparklens counts them, not
		// CPU left unused: task CPU leaves out Python workers, GC and I/O
		// waits, so a busy PySpark or I/O-bound job would read as idle.
		if run, ok := num(schema.UsageBusySlotSeconds); ok {
			a.IdleCoreHours = max(0, f(schema.UsageExecutorCoreSeconds)-run) / 3600
		}
		if v, ok := num(schema.UsageMemoryUtilisation); ok {
			a.MemoryUtilisation = &v
		}
		if v, ok := num(schema.UsageMeanMemoryUtilisation); ok {
			a.UnusedGiBHours = a.GiBHours * (1 - v)
		}
		apps = append(apps, a)
	}
	return apps
}

// rank orders the applications, most idle core-hours first, and sums them.
func (r *Fleet) rank() {
	slices.SortStableFunc(r.Applications, func(a, b FleetApp) int {
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
		t.DriverCoreHours += a.DriverCoreHours
		t.DriverGiBHours += a.DriverGiBHours
		t.GPUHours += a.GPUHours
		t.SavingGPUHours += a.SavingGPUHours
		if a.LostTaskHours != nil {
			t.LostTaskHours += *a.LostTaskHours
		}
		if a.Outcome == "driver_lost" {
			t.Lost++
		}
	}
}

// FleetQuery says what `report --fleet` reads: the accounting of the
// applications that ended in the last Since, in Database at the InfluxDB
// Influx names.
type FleetQuery struct {
	Influx   influx.Config
	Database string // where the annotator writes spark_app_usage
	// History, when set, is where it writes spark_app_history ("db" or
	// "db/rp"): the applications that ended are read there, kept longer
	// than the facts; the running ones' estimates in Database.
	History   string
	Since     time.Duration // how far back
	SinceText string        // Since as a person writes it: 7d, 36h
}

// ended is where the accounting of the applications that ended is read:
// a database and the FROM of its measurement.
func (fq FleetQuery) ended() (db, from string) {
	if fq.History == "" {
		return fq.Database, influxql.QuoteIdent(schema.MeasurementUsage)
	}
	db, rp, _ := strings.Cut(fq.History, "/")
	from = influxql.QuoteIdent(schema.MeasurementAppHistory)
	if rp != "" {
		from = influxql.QuoteIdent(rp) + "." + from
	}
	return db, from
}

// WriteFleet reads the spark_app_usage facts of the applications that
// ended in the last q.Since, where the annotator writes them, and the
// estimates of those still running, and prints them to w, most idle
// core-hours first: as text, or as JSON (a Fleet).
func WriteFleet(ctx context.Context, q FleetQuery, asJSON, wide bool, w io.Writer) error {
	r, err := ReadFleet(ctx, q)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	printFleet(w, r, wide)
	return nil
}

// fleetFields are the columns of spark_app_usage the fleet report reads.
var fleetFields = []string{schema.TagApplicationID, schema.FieldAppID, schema.TagAppName, schema.TagUser, schema.TagQueue,
	schema.UsageDurationMs, schema.UsageExecutors, schema.UsageExecutorCoreSeconds, schema.UsageExecutorMemoryByteSeconds,
	schema.UsageCPUUtilisation, schema.UsageBusySlotSeconds, schema.UsageMemoryUtilisation, schema.UsageMeanMemoryUtilisation,
	schema.UsageGCShare, schema.UsageFailedTasks, schema.UsageSavingCoreSeconds, schema.UsageSavingByteSeconds,
	schema.UsageRecommended, schema.UsageDriverCoreSeconds, schema.UsageDriverMemoryByteSeconds, schema.UsageDriverHeld,
	schema.UsageOutcome, schema.UsageSlotOccupancy, schema.UsageDriverOnlyMs, schema.UsageLostTaskSeconds,
	schema.UsageExecutorGPUSeconds, schema.UsageDriverGPUSeconds, schema.UsageSavingGPUSeconds}

// maxWindow is the longest range readWindows reads in one statement, and
// minWindow the shortest it splits one down to. InfluxDB 1.x builds an
// answer whole before it sends it: a year of a large fleet's accounting
// in one statement outlasts the request's timeout, where a day of it
// answers in milliseconds.
const (
	maxWindow = 24 * time.Hour
	minWindow = time.Minute
)

// readWindows runs the statements of the range [lo, hi) that stmt makes,
// one per maxWindow, and where an answer passes what a reader holds
// (influx.ErrAnswerTooLarge), those of each half in turn, down to
// minWindow: a large fleet's year of accounting is read in as many
// answers as it takes, oldest first.
func readWindows(ctx context.Context, r *influx.Querier, db string, lo, hi time.Time, stmt func(lo, hi time.Time) string) ([]influx.Series, error) {
	if hi.Sub(lo) > maxWindow {
		var out []influx.Series
		for from := lo; from.Before(hi); from = from.Add(maxWindow) {
			to := from.Add(maxWindow)
			if to.After(hi) {
				to = hi
			}
			series, err := readWindows(ctx, r, db, from, to, stmt)
			if err != nil {
				return nil, err
			}
			out = append(out, series...)
		}
		return out, nil
	}
	series, err := r.Query(ctx, db, stmt(lo, hi))
	if !errors.Is(err, influx.ErrAnswerTooLarge) || hi.Sub(lo) <= minWindow {
		return series, err
	}
	mid := lo.Add(hi.Sub(lo) / 2)
	first, err := readWindows(ctx, r, db, lo, mid, stmt)
	if err != nil {
		return nil, err
	}
	second, err := readWindows(ctx, r, db, mid, hi, stmt)
	return append(first, second...), err
}

// ReadFleet reads and ranks what WriteFleet prints.
func ReadFleet(ctx context.Context, fq FleetQuery) (Fleet, error) {
	since := fq.Since
	db, from := fq.ended()
	reader, err := influx.NewQuerier(fq.Influx)
	if err != nil {
		return Fleet{}, err
	}
	defer reader.Close()
	to := time.Now()
	series, err := readWindows(ctx, reader, db, to.Add(-since), to, func(lo, hi time.Time) string {
		return fmt.Sprintf(`SELECT %s FROM %s WHERE time >= %dms AND time < %dms AND (%[5]s = 'end' OR %[5]s = 'lost')`,
			influxql.QuoteIdents(fleetFields...), from, lo.UnixMilli(), hi.UnixMilli(), influxql.QuoteIdent(schema.FieldFact))
	})
	if err != nil {
		// The statement is ours, not the reader's: say what was read where.
		if inner := errors.Unwrap(err); inner != nil {
			err = inner
		}
		hint := ""
		if strings.Contains(err.Error(), "database not found") {
			hint = "; give the database run writes to with --database (or --bucket), or in the config file"
		}
		return Fleet{}, fmt.Errorf("reading the accounting (%s) from database %q at %s: %w%s",
			from, db, influx.RedactURL(fq.Influx.WithDefaults().URL), err, hint)
	}
	r := Fleet{Since: since.String(), SinceText: fq.SinceText, Database: db, Applications: []FleetApp{}, Running: []RunningApp{}, Unknown: []RunningApp{},
		StreamOnly: []StreamApp{}}
	for _, s := range series {
		r.Applications = appendFleetApps(r.Applications, s)
	}
	running, err := readRunning(ctx, reader, fq.Database, since, r.Applications)
	if err != nil {
		return Fleet{}, err
	}
	for _, a := range running {
		if time.Since(a.LastEstimate) > staleAfter {
			r.Unknown = append(r.Unknown, a)
		} else {
			r.Running = append(r.Running, a)
		}
	}
	if r.StreamOnly, err = readStreamOnly(ctx, reader, fq, r); err != nil {
		return Fleet{}, err
	}
	r.rank()
	return r, nil
}

// streamFields are the columns of a stream fact the fleet report reads.
var streamFields = []string{schema.TagApplicationID, schema.FieldAppID, schema.UsageDurationMs, schema.UsageExecutors,
	schema.UsageTaskCPUSeconds, schema.UsagePeakRSSBytes}

// readStreamOnly reads the stream facts of the range, where the ended
// applications are read, less the applications a source showed after all
// (their own facts are above).
func readStreamOnly(ctx context.Context, reader *influx.Querier, fq FleetQuery, r Fleet) ([]StreamApp, error) {
	db, from := fq.ended()
	q := fmt.Sprintf(`SELECT %s FROM %s WHERE time >= now() - %dm AND %s = 'stream'`,
		influxql.QuoteIdents(streamFields...), from, int64(fq.Since/time.Minute), influxql.QuoteIdent(schema.FieldFact))
	series, err := reader.Query(ctx, db, q)
	if err != nil {
		if inner := errors.Unwrap(err); inner != nil {
			err = inner
		}
		return nil, fmt.Errorf("reading the applications seen only in their metrics from database %q: %w", db, err)
	}
	shown := map[string]bool{}
	for _, a := range r.Applications {
		shown[a.MetricsKey], shown[a.Application] = true, true
	}
	for _, a := range slices.Concat(r.Running, r.Unknown) {
		shown[a.Application] = true
	}
	out := []StreamApp{}
	for _, s := range series {
		for _, v := range s.Values {
			row := map[string]any{}
			for i, c := range s.Columns {
				if i < len(v) {
					row[c] = v[i]
				}
			}
			str := func(k string) string { x, _ := row[k].(string); return x }
			num := func(k string) float64 { x, _ := influx.Number(row[k]); return x }
			a := StreamApp{MetricsKey: str(schema.TagApplicationID), LastReport: str("time"), DurationMs: int64(num(schema.UsageDurationMs)),
				Executors: int64(num(schema.UsageExecutors)), TaskCPUHours: num(schema.UsageTaskCPUSeconds) / 3600,
				PeakRSSBytes: int64(num(schema.UsagePeakRSSBytes))}
			a.Application = cmp.Or(str(schema.FieldAppID), a.MetricsKey)
			if !shown[a.MetricsKey] && !shown[a.Application] {
				out = append(out, a)
			}
		}
	}
	slices.SortFunc(out, func(a, b StreamApp) int {
		return cmp.Or(strings.Compare(b.LastReport, a.LastReport), strings.Compare(a.Application, b.Application))
	})
	return out, nil
}

// runningFields are the cumulative figures of a running application's
// estimates whose difference over the range is what it held and ran in it.
var runningFields = []string{schema.UsageExecutorCoreSeconds, schema.UsageExecutorMemoryByteSeconds, schema.UsageBusySlotSeconds, schema.UsageCPUUsedSeconds}

// readRunning reads the applications with an estimate in the range that
// did not end in it: their latest estimate, less their last estimate of
// the hour before the range (none: it started in the range). Both reads
// are bounded in time.
func readRunning(ctx context.Context, reader *influx.Querier, db string, since time.Duration, ended []FleetApp) ([]RunningApp, error) {
	var sel []string
	for _, f := range slices.Concat(runningFields, []string{schema.FieldAppID, schema.TagAppName, schema.TagUser}) {
		sel = append(sel, fmt.Sprintf("last(%s) AS %s", influxql.QuoteIdent(f), influxql.QuoteIdent(f)))
	}
	read := func(where string) (map[string]map[string]any, error) {
		q := fmt.Sprintf(`SELECT %s FROM %s WHERE %s = 'estimate' AND %s GROUP BY %s`,
			strings.Join(sel, ", "), influxql.QuoteIdent(schema.MeasurementUsage), influxql.QuoteIdent(schema.FieldFact), where, influxql.QuoteIdent(schema.TagApplicationID))
		series, err := reader.Query(ctx, db, q)
		if err != nil {
			if inner := errors.Unwrap(err); inner != nil {
				err = inner
			}
			return nil, fmt.Errorf("reading the running applications' estimates from database %q: %w", db, err)
		}
		out := map[string]map[string]any{}
		for _, s := range series {
			if len(s.Values) == 0 {
				continue
			}
			row := map[string]any{}
			for i, c := range s.Columns {
				if i < len(s.Values[0]) {
					row[c] = s.Values[0][i]
				}
			}
			out[s.Tags[schema.TagApplicationID]] = row
		}
		return out, nil
	}
	mins := int64(since / time.Minute)
	now, err := read(fmt.Sprintf("time >= now() - %dm", mins))
	if err != nil {
		return nil, err
	}
	// When each latest estimate was written: a lone selector returns its
	// point's time (several return the range's start).
	q := fmt.Sprintf(`SELECT last(%s) FROM %s WHERE %s = 'estimate' AND time >= now() - %dm GROUP BY %s`,
		influxql.QuoteIdent(schema.UsageExecutorCoreSeconds), influxql.QuoteIdent(schema.MeasurementUsage), influxql.QuoteIdent(schema.FieldFact),
		mins, influxql.QuoteIdent(schema.TagApplicationID))
	series, err := reader.Query(ctx, db, q)
	if err != nil {
		return nil, fmt.Errorf("reading when the running applications' estimates were written, from database %q: %w", db, err)
	}
	written := map[string]time.Time{}
	for _, s := range series {
		if len(s.Values) > 0 && len(s.Values[0]) > 0 {
			if ts, ok := s.Values[0][0].(string); ok {
				written[s.Tags[schema.TagApplicationID]], _ = time.Parse(time.RFC3339Nano, ts)
			}
		}
	}
	before, err := read(fmt.Sprintf("time >= now() - %dm AND time < now() - %dm", mins+60, mins))
	if err != nil {
		return nil, err
	}
	done := map[string]bool{}
	for _, a := range ended {
		done[a.MetricsKey] = true
	}
	out := []RunningApp{}
	for _, key := range slices.Sorted(maps.Keys(now)) {
		if done[key] {
			continue
		}
		row := now[key]
		diff := func(f string) float64 {
			v, _ := influx.Number(row[f])
			b, _ := influx.Number(before[key][f])
			return max(v-b, 0)
		}
		str := func(k string) string { v, _ := row[k].(string); return v }
		a := RunningApp{Application: cmp.Or(str(schema.FieldAppID), key), Name: str(schema.TagAppName), User: str(schema.TagUser),
			CoreHours: diff(schema.UsageExecutorCoreSeconds) / 3600, GiBHours: diff(schema.UsageExecutorMemoryByteSeconds) / gibHour,
			LastEstimate: written[key]}
		if held := diff(schema.UsageExecutorCoreSeconds); held > 0 {
			if _, ok := influx.Number(row[schema.UsageBusySlotSeconds]); ok {
				v := diff(schema.UsageBusySlotSeconds) / held
				a.SlotOccupancy = &v
			}
			if _, ok := influx.Number(row[schema.UsageCPUUsedSeconds]); ok {
				v := diff(schema.UsageCPUUsedSeconds) / held
				a.CPU = &v
			}
		}
		out = append(out, a)
	}
	return out, nil
}

func printFleet(w io.Writer, r Fleet, wide bool) {
	t := r.Totals
	fmt.Fprintf(w, "%s ended in the last %s (database %s)", human.Count(t.Applications, "application"), r.SinceText, r.Database)
	if t.Lost > 0 {
		fmt.Fprintf(w, ", %d of them lost while running (closed out with what they held until last seen)", t.Lost)
	}
	fmt.Fprint(w, "\n\n")
	if t.Applications == 0 {
		fmt.Fprintln(w, "no accounting found: it is written by the annotator ([annotate]) when an application ends")
	} else {
		printAccounted(w, r, wide)
	}
	printRunning(w, r)
	printUnknown(w, r)
	printStreamOnly(w, r)
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

// printAccounted prints the accounted applications and their totals.
func printAccounted(w io.Writer, r Fleet, wide bool) {
	t := r.Totals
	if wide {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "application\tname\tuser\toutcome\tduration\texecutors\tcore-h\tGiB-h\tdriver core-h\tslots busy\tCPU used\tdriver-only\tlost task-h\tpeak memory\tidle core-h\tunused GiB-h\tGC\tsaving core-h\tsaving GiB-h\t")
		for _, a := range r.Applications {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", a.Application, a.Name, a.User,
				cmp.Or(a.Outcome, "?"), duration(a), a.Executors, hoursOf(a.CoreHours), hoursOf(a.GiBHours),
				driverHours(a), optPct(a.SlotOccupancy), optPct(a.CPUUtilisation), optPct(a.DriverOnly), optHours(a.LostTaskHours),
				optPct(a.MemoryUtilisation), hoursOf(a.IdleCoreHours), hoursOf(a.UnusedGiBHours), pct(a.GCShare), hoursOf(a.SavingCoreHours), hoursOf(a.SavingGiBHours))
		}
		tw.Flush()
	} else {
		printFleetNarrow(w, r)
	}
	// What was held includes the drivers (cluster mode, or YARN's
	// application master): the shares below are of all of it.
	cores, gib := t.CoreHours+t.DriverCoreHours, t.GiBHours+t.DriverGiBHours
	fmt.Fprintf(w, "\nheld: %s core-hours, %s GiB-hours (drivers %s and %s of them)\nidle executor slots: %s core-hours (%s), unused: %s GiB-hours (%s)\n",
		hoursOf(cores), hoursOf(gib), hoursOf(t.DriverCoreHours), hoursOf(t.DriverGiBHours), hoursOf(t.IdleCoreHours), share(t.IdleCoreHours, cores),
		hoursOf(t.UnusedGiBHours), share(t.UnusedGiBHours, gib))
	if t.GPUHours > 0 {
		fmt.Fprintf(w, "GPUs: %s GPU-hours held\n", hoursOf(t.GPUHours))
	}
	if t.LostTaskHours > 0 {
		fmt.Fprintf(w, "lost to failed and killed tasks: %s task-hours\n", hours(t.LostTaskHours*3600))
	}
	fmt.Fprintf(w, "with every recommendation applied: %s, %s", change(t.SavingCoreHours, cores, "core-hours"), change(t.SavingGiBHours, gib, "GiB-hours"))
	if t.GPUHours > 0 {
		fmt.Fprintf(w, ", %s", change(t.SavingGPUHours, t.GPUHours, "GPU-hours"))
	}
	fmt.Fprintln(w)
}

// printStreamOnly lists the applications no source showed.
func printStreamOnly(w io.Writer, r Fleet) {
	if len(r.StreamOnly) == 0 {
		return
	}
	fmt.Fprintf(w, "\nseen only in their metrics: %s no Spark REST source showed (no cores known, not in the totals;\nsee the [annotate] urls):\n",
		human.Count(len(r.StreamOnly), "application"))
	for _, a := range r.StreamOnly {
		line := fmt.Sprintf("  %s: %s reported for %s, task CPU %s hours", a.Application, human.Count(int(a.Executors), "executor"),
			timespent.Duration(a.DurationMs), hoursOf(a.TaskCPUHours))
		if a.PeakRSSBytes > 0 {
			line += ", peak resident " + sizing.Bytes(a.PeakRSSBytes)
		}
		if ts, err := time.Parse(time.RFC3339Nano, a.LastReport); err == nil {
			line += ", last report " + ts.UTC().Format("2006-01-02 15:04 UTC")
		}
		fmt.Fprintln(w, line)
	}
}

// printRunning prints the running applications' share of the range.
func printRunning(w io.Writer, r Fleet) {
	if len(r.Running) == 0 {
		return
	}
	fmt.Fprintf(w, "\nstill running, what each held and ran in the last %s (from its estimates, every 5 minutes):\n\n", r.SinceText)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "application\tname\tuser\tcore-h\tGiB-h\tslots busy\tCPU used\t")
	var cores, gib float64
	for _, a := range r.Running {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", a.Application, cut(a.Name, fleetNameWidth), a.User, hoursOf(a.CoreHours), hoursOf(a.GiBHours), optPct(a.SlotOccupancy), optPct(a.CPU))
		cores += a.CoreHours
		gib += a.GiBHours
	}
	tw.Flush()
	fmt.Fprintf(w, "\nrunning: %s held %s core-hours, %s GiB-hours in the range (not in the totals above)\n", human.Count(len(r.Running), "application"), hoursOf(cores), hoursOf(gib))
}

// printUnknown lists the applications whose estimates stopped with no
// end: sparkpulse was stopped while they ran, or lost them with no
// source to close them out.
func printUnknown(w io.Writer, r Fleet) {
	if len(r.Unknown) == 0 {
		return
	}
	fmt.Fprintf(w, "\nended, how unknown: %s with no end and no estimate for over %.0f minutes\n(sparkpulse was stopped while they ran, or no source showed their end):\n",
		human.Count(len(r.Unknown), "application"), staleAfter.Minutes())
	for _, a := range r.Unknown {
		fmt.Fprintf(w, "  %s %s, last estimate %s\n", a.Application, cut(a.Name, fleetNameWidth), a.LastEstimate.UTC().Format("2006-01-02 15:04 UTC"))
	}
}

// printFleetNarrow is the table without --wide: what a person ranks by,
// in FleetWidth columns; ids and names left-aligned, figures right.
func printFleetNarrow(w io.Writer, r Fleet) {
	idW, nameW := len("application"), len("name")
	for _, a := range r.Applications {
		idW = max(idW, len([]rune(a.Application)))
	}
	// Ids longer than YARN's 30 characters (Kubernetes' are 38) take
	// their room from the names.
	nameMax := max(8, fleetNameWidth-max(0, idW-30))
	for _, a := range r.Applications {
		nameW = max(nameW, len([]rune(cut(a.Name, nameMax))))
	}
	const row = "%-*s  %-*s  %-11s  %9s  %6s  %5s  %5s  %5s  %6s  %7s\n"
	fmt.Fprintf(w, row, idW, "application", nameW, "name", "outcome", "duration", "core-h", "busy", "CPU", "peak", "idle", "saves")
	for _, a := range r.Applications {
		fmt.Fprintf(w, row, idW, a.Application, nameW, cut(a.Name, nameMax), cmp.Or(a.Outcome, "?"), duration(a),
			hoursOf(a.CoreHours), optPct(a.SlotOccupancy), optPct(a.CPUUtilisation), optPct(a.MemoryUtilisation),
			hoursOf(a.IdleCoreHours), hoursOf(a.SavingCoreHours))
	}
	fmt.Fprintln(w, "busy: slots running tasks · CPU: of the task time · peak: of the container's memory · idle: core-hours no task ran in")
	fmt.Fprintln(w, "saves: core-hours the recommendations save (negative: cost) · --wide: every column · --json: for scripts")
}

// FleetWidth is the columns `report --fleet` fits its table in without
// --wide, for any Spark application id (YARN's, Kubernetes', standalone's)
// and figures up to 9999 hours.
const FleetWidth = 120

// fleetNameWidth is the longest application name the narrow table shows
// whole; longer ones are cut with "…".
const fleetNameWidth = 18

// cut shortens s to n runes, its last one "…".
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// hoursOf is hours(), from hours: two significant digits under one hour
// (0.031), one decimal from there.
func hoursOf(h float64) string { return hours(h * 3600) }

// duration is an application's run time, to the second.
func duration(a FleetApp) string {
	return (time.Duration(a.DurationMs) * time.Millisecond).Round(time.Second).String()
}

// driverHours is the driver side's core-hours, "-" for a client-mode
// driver the cluster did not hold.
func driverHours(a FleetApp) string {
	if a.DriverHeld == "outside" {
		return "-"
	}
	return hoursOf(a.DriverCoreHours)
}

func optHours(h *float64) string {
	if h == nil {
		return "?"
	}
	return hoursOf(*h)
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
	return fmt.Sprintf("%s %s (%s) %s", hoursOf(saving), unit, share(saving, held), word)
}

func share(part, whole float64) string {
	if whole <= 0 {
		return "-"
	}
	return pct(part / whole)
}
