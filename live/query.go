package live

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sparkpulse/sparkpulse/influx"
	"github.com/sparkpulse/sparkpulse/influxql"
	"github.com/sparkpulse/sparkpulse/schema"
)

// Config says where a Querier reads.
type Config struct {
	Influx influx.Config
	// MetricsDB holds the metrics stream (the [[graphite]] blocks'
	// database), AnnotationsDB the annotations ([annotate]'s); either
	// defaults to the other.
	MetricsDB, AnnotationsDB string
	// Schemas are the shapes MetricsDB may hold; nil: both.
	Schemas []schema.Shape
	// AdminURL is sparkpulse's admin endpoint (http://host:port); "" leaves
	// its figures out.
	AdminURL string
	Interval time.Duration // between frames; default 2 s
	Since    time.Time     // data dated from then on; zero: when Run starts (watch: DefaultSince before)
	Width    int           // columns; 0: the terminal's, else DefaultWidth
	// Notes are the frame's last lines, in place of the Dashboards line:
	// what to do next, from whoever started the view (make run).
	Notes []string
}

// DefaultInterval is the time between frames.
const DefaultInterval = 2 * time.Second

// DefaultSince is how far before its start `sparkpulse watch` shows data:
// the applications that ran in the last quarter of an hour, and the
// accounting of those that ended, are there when the view opens.
const DefaultSince = 15 * time.Minute

// busyWindow is the span over which busy cores are averaged.
const busyWindow = time.Minute

// Querier reads Snapshots.
type Querier struct {
	cfg  Config
	http *http.Client
	db   *influx.Querier // one client for the statements of every frame

	reads []selfRead // the last minute's reads of the admin endpoint's counters
}

// selfRead is one read of the counters the view shows as rates: the lines
// received and each source's failed polls.
type selfRead struct {
	at    time.Time
	lines float64
	errs  map[string]float64
}

// rateWindow is the span lines/s is measured over: several Spark report
// periods, so that a frame between two reports does not read zero.
const (
	rateWindow    = time.Minute
	minRateWindow = 10 * time.Second
)

// NewQuerier returns a Querier reading what cfg names.
func NewQuerier(cfg Config) (*Querier, error) {
	cfg.MetricsDB = cmp.Or(cfg.MetricsDB, cfg.AnnotationsDB)
	cfg.AnnotationsDB = cmp.Or(cfg.AnnotationsDB, cfg.MetricsDB)
	if cfg.MetricsDB == "" {
		return nil, errors.New("live: no database to read")
	}
	if err := cfg.Influx.Validate(); err != nil {
		return nil, fmt.Errorf("live: %w", err)
	}
	cfg.Interval = cmp.Or(cfg.Interval, DefaultInterval)
	if len(cfg.Schemas) == 0 {
		cfg.Schemas = []schema.Shape{schema.Wide, schema.CERN}
	}
	cfg.AdminURL = strings.TrimSuffix(cfg.AdminURL, "/")
	db, err := influx.NewQuerier(cfg.Influx)
	if err != nil {
		return nil, fmt.Errorf("live: %w", err)
	}
	return &Querier{cfg: cfg, http: &http.Client{Timeout: 5 * time.Second}, db: db}, nil
}

// Snapshot reads one frame's data at now.
func (q *Querier) Snapshot(ctx context.Context, now time.Time) Snapshot {
	s := Snapshot{At: now, Since: q.cfg.Since, Database: q.cfg.AnnotationsDB, Interval: q.cfg.Interval, Notes: q.cfg.Notes}
	if err := q.readInflux(ctx, &s); err != nil {
		// The statement is the view's own, not the reader's: the cause.
		if inner := errors.Unwrap(err); inner != nil {
			err = inner
		}
		s.Apps, s.Verdicts, s.QueryErr = nil, nil, err.Error()
	}
	if q.cfg.AdminURL != "" {
		self, err := q.readSelf(ctx, now)
		if err != nil {
			s.SelfErr = err.Error()
		} else {
			s.Self = self
		}
	}
	return s
}

// readInflux reads the applications and verdicts.
func (q *Querier) readInflux(ctx context.Context, s *Snapshot) error {
	since := fmt.Sprintf("time >= %dms", q.cfg.Since.UnixMilli())
	ann := q.cfg.AnnotationsDB

	// The latest fact of each application: start (running), end or lost;
	// then, of those no source showed, the stream fact (a source that
	// shows one later has the last word, though its facts are older).
	apps := map[string]*App{}
	for _, sel := range []string{"!=", "="} {
		appFacts, err := q.query(ctx, ann, fmt.Sprintf(`SELECT %s, %s FROM %s WHERE %s AND %s %s 'stream' GROUP BY %s, %s ORDER BY time DESC LIMIT 1`,
			influxql.QuoteIdent(schema.FieldStatus), influxql.QuoteIdent(schema.FieldAppID), influxql.QuoteIdent(schema.MeasurementApp), since, influxql.QuoteIdent(schema.FieldFact), sel,
			influxql.QuoteIdent(schema.TagApplicationID), influxql.QuoteIdent(schema.TagAppName)))
		if err != nil {
			return err
		}
		for _, sr := range appFacts {
			key := sr.Tags[schema.TagApplicationID]
			if _, shown := apps[key]; shown {
				continue
			}
			for _, row := range rows(sr) {
				a := &App{ID: cmp.Or(row.str(schema.FieldAppID), key), Name: sr.Tags[schema.TagAppName], Started: row.time().Truncate(time.Millisecond),
					Executors: -1, Cores: -1, Busy: -1}
				switch {
				case sel == "=":
					a.Status = StatusStream
				case row.str(schema.FieldStatus) == "RUNNING":
					a.Status = StatusRunning
				case row.str(schema.FieldStatus) == "UNKNOWN":
					a.Status = StatusLost
				default:
					a.Status = StatusEnded
				}
				apps[key] = a
			}
		}
	}
	if len(apps) == 0 {
		return q.readVerdicts(ctx, s, since)
	}

	jobs, err := q.query(ctx, ann, fmt.Sprintf(`SELECT %s FROM %s WHERE %s GROUP BY %s ORDER BY time DESC LIMIT 1`,
		influxql.QuoteIdents(schema.FieldJobID, schema.FieldStatus), influxql.QuoteIdent(schema.MeasurementJob), since, influxql.QuoteIdent(schema.TagApplicationID)))
	if err != nil {
		return err
	}
	for _, sr := range jobs {
		if a := apps[sr.Tags[schema.TagApplicationID]]; a != nil {
			for _, row := range rows(sr) {
				id, _ := row.num(schema.FieldJobID)
				a.Job = &Job{ID: int(id), Status: row.str(schema.FieldStatus)}
			}
		}
	}
	failed, err := q.query(ctx, ann, fmt.Sprintf(`SELECT count(%s) FROM %s WHERE %s AND %s = 'FAILED' AND %s = 'end' GROUP BY %s`,
		influxql.QuoteIdent(schema.FieldJobID), influxql.QuoteIdent(schema.MeasurementJob), since,
		influxql.QuoteIdent(schema.FieldStatus), influxql.QuoteIdent(schema.FieldFact), influxql.QuoteIdent(schema.TagApplicationID)))
	if err != nil {
		return err
	}
	for _, sr := range failed {
		if a := apps[sr.Tags[schema.TagApplicationID]]; a != nil {
			for _, row := range rows(sr) {
				n, _ := row.num("count")
				a.FailedJobs = int(n)
			}
		}
	}

	// Executors: each one's latest snapshot.
	status, cores := influxql.QuoteIdent(schema.FieldStatus), influxql.QuoteIdent(schema.FieldCores)
	execs, err := q.query(ctx, ann, fmt.Sprintf(`SELECT last(%s) AS %s, last(%s) AS %s FROM %s WHERE %s GROUP BY %s`,
		status, status, cores, cores, influxql.QuoteIdent(schema.MeasurementExecutor), since, influxql.QuoteIdents(schema.TagApplicationID, schema.TagProcess)))
	if err != nil {
		return err
	}
	for _, sr := range execs {
		a := apps[sr.Tags[schema.TagApplicationID]]
		if a == nil || sr.Tags[schema.TagProcess] == "driver" {
			continue
		}
		if a.Executors < 0 {
			a.Executors, a.Cores = 0, 0
		}
		for _, row := range rows(sr) {
			if row.str(schema.FieldStatus) == "ACTIVE" {
				n, _ := row.num(schema.FieldCores)
				a.Executors++
				a.Cores += int(n)
			}
		}
	}

	// Busy cores: task run time (ms) over the last minute, or since the
	// view started.
	from := s.At.Add(-busyWindow)
	if q.cfg.Since.After(from) {
		from = q.cfg.Since
	}
	window := s.At.Sub(from)
	if window >= time.Second {
		busy, err := q.stream(ctx, "sum", schema.RunTime, true, fmt.Sprintf(`time >= %dms AND time <= %dms GROUP BY %s`,
			from.UnixMilli(), s.At.UnixMilli(), influxql.QuoteIdent(schema.TagApplicationID)))
		if err != nil {
			return err
		}
		for _, a := range apps {
			if a.Status == StatusRunning {
				a.Busy, a.BusyWindow = 0, window
			}
		}
		for _, sr := range busy {
			if a := apps[sr.Tags[schema.TagApplicationID]]; a != nil {
				for _, row := range rows(sr) {
					if ms, ok := row.num("sum"); ok {
						a.Busy, a.BusyWindow = max(a.Busy, 0)+ms/1000/window.Seconds(), window
					}
				}
			}
		}
	}

	// Heap: each executor's peak against its limit; the application
	// shows the executor nearest its limit.
	executors := since + fmt.Sprintf(` AND %s != 'driver' GROUP BY %s`,
		influxql.QuoteIdent(schema.TagProcess), influxql.QuoteIdents(schema.TagApplicationID, schema.TagProcess))
	peaks, err := q.stream(ctx, "max", schema.JVMHeapMemory, false, executors)
	if err != nil {
		return err
	}
	limits, err := q.stream(ctx, "last", schema.HeapMax, false, executors)
	if err != nil {
		return err
	}
	limit := map[[2]string]float64{}
	for _, sr := range limits {
		for _, row := range rows(sr) {
			if v, ok := row.num("last"); ok {
				k := [2]string{sr.Tags[schema.TagApplicationID], sr.Tags[schema.TagProcess]}
				limit[k] = max(limit[k], v)
			}
		}
	}
	for _, sr := range peaks {
		a := apps[sr.Tags[schema.TagApplicationID]]
		if a == nil {
			continue
		}
		for _, row := range rows(sr) {
			peak, ok := row.num("max")
			if !ok {
				continue
			}
			lim := limit[[2]string{sr.Tags[schema.TagApplicationID], sr.Tags[schema.TagProcess]}]
			if nearer(peak, lim, a.HeapPeak, a.HeapMax) {
				a.HeapPeak, a.HeapMax = peak, lim
			}
		}
	}

	for _, a := range apps {
		s.Apps = append(s.Apps, *a)
	}
	slices.SortFunc(s.Apps, func(a, b App) int {
		return cmp.Or(b.Started.Compare(a.Started), strings.Compare(b.ID, a.ID))
	})
	return q.readVerdicts(ctx, s, since)
}

// nearer reports whether peak against lim is nearer its limit than
// peak0 against lim0 (a known limit beats an unknown one).
func nearer(peak, lim, peak0, lim0 float64) bool {
	switch {
	case peak0 == 0:
		return true
	case lim > 0 && lim0 > 0:
		return peak/lim > peak0/lim0
	case lim > 0 || lim0 > 0:
		return lim > 0
	}
	return peak > peak0
}

// readVerdicts reads the latest accounting and reconciliations.
func (q *Querier) readVerdicts(ctx context.Context, s *Snapshot, since string) error {
	ann := q.cfg.AnnotationsDB
	usage, err := q.query(ctx, ann, fmt.Sprintf(`SELECT %s FROM %s WHERE %s AND %s = 'end' ORDER BY time DESC LIMIT %d`,
		influxql.QuoteIdents(schema.TagApplicationID, schema.TagAppName, schema.FieldAppID, schema.UsageExecutors, schema.UsageExecutorCoreSeconds,
			schema.UsageExecutorMemoryByteSeconds, schema.UsageCPUUtilisation, schema.UsageMemoryUtilisation),
		influxql.QuoteIdent(schema.MeasurementUsage), since, influxql.QuoteIdent(schema.FieldFact), maxVerdicts))
	if err != nil {
		return err
	}
	rec, err := q.query(ctx, ann, fmt.Sprintf(`SELECT %s FROM %s WHERE %s ORDER BY time DESC LIMIT %d`,
		influxql.QuoteIdents(schema.TagApplicationID, schema.ReconcileVerdict, schema.FieldText),
		influxql.QuoteIdent(schema.MeasurementReconcile), since, 4*maxVerdicts))
	if err != nil {
		return err
	}
	type recon struct{ verdict, text string }
	byApp := map[string]recon{}
	for _, sr := range rec {
		for _, row := range rows(sr) {
			if _, seen := byApp[row.str(schema.TagApplicationID)]; !seen {
				byApp[row.str(schema.TagApplicationID)] = recon{row.str(schema.ReconcileVerdict), row.str(schema.FieldText)}
			}
		}
	}
	for _, sr := range usage {
		for _, row := range rows(sr) {
			key := row.str(schema.TagApplicationID)
			r := byApp[key]
			v := Verdict{Ended: row.time(), App: cmp.Or(row.str(schema.FieldAppID), key), Name: row.str(schema.TagAppName), Verdict: r.verdict, Detail: r.text,
				CPUUsed: -1, MemoryPeak: -1}
			n, _ := row.num(schema.UsageExecutors)
			v.Executors = int(n)
			cs, _ := row.num(schema.UsageExecutorCoreSeconds)
			bs, _ := row.num(schema.UsageExecutorMemoryByteSeconds)
			v.CoreHours, v.GiBHours = cs/3600, bs/3600/(1<<30)
			if u, ok := row.num(schema.UsageCPUUtilisation); ok {
				v.CPUUsed = u
			}
			if u, ok := row.num(schema.UsageMemoryUtilisation); ok {
				v.MemoryPeak = u
			}
			s.Verdicts = append(s.Verdicts, v)
		}
	}
	return nil
}

// stream reads one metric of the metrics stream with one aggregate (the
// column is named after it) of its value, or of its delta, in each shape
// the database may hold: the series of every shape, for the caller to add
// up.
func (q *Querier) stream(ctx context.Context, fn string, m schema.Metric, delta bool, where string) ([]influx.Series, error) {
	var out []influx.Series
	for _, sc := range q.cfg.Schemas {
		field := sc.Field(m)
		if delta {
			field = sc.DeltaField(m)
		}
		series, err := q.query(ctx, q.cfg.MetricsDB, fmt.Sprintf(`SELECT %s(%s) AS %s FROM %s WHERE %s`,
			fn, influxql.QuoteIdent(field), influxql.QuoteIdent(fn), influxql.QuoteIdent(sc.Measurement(m)), where))
		if err != nil {
			return nil, err
		}
		out = append(out, series...)
	}
	return out, nil
}

// query runs one InfluxQL statement; a database that does not exist yet
// reads as empty.
func (q *Querier) query(ctx context.Context, db, stmt string) ([]influx.Series, error) {
	series, err := q.db.Query(ctx, db, stmt)
	if err != nil && strings.Contains(err.Error(), "database not found") {
		return nil, nil
	}
	return series, err
}

// row is one row of a series, by column name.
type row struct {
	cols   map[string]int
	values []any
}

func rows(s influx.Series) []row {
	cols := make(map[string]int, len(s.Columns))
	for i, c := range s.Columns {
		cols[c] = i
	}
	out := make([]row, len(s.Values))
	for i, v := range s.Values {
		out[i] = row{cols, v}
	}
	return out
}

func (r row) get(col string) any {
	if i, ok := r.cols[col]; ok && i < len(r.values) {
		return r.values[i]
	}
	return nil
}

func (r row) str(col string) string { s, _ := r.get(col).(string); return s }

func (r row) num(col string) (float64, bool) { return influx.Number(r.get(col)) }

// time reads the time column, which InfluxDB writes in RFC 3339.
func (r row) time() time.Time {
	t, _ := time.Parse(time.RFC3339Nano, r.str("time"))
	return t
}

// readSelf reads sparkpulse's /metrics.
func (q *Querier) readSelf(ctx context.Context, now time.Time) (*Self, error) {
	url := q.cfg.AdminURL + "/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := q.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	self, err := ParseMetrics(io.LimitReader(resp.Body, 8<<20), now)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	self.LinesPerSec, self.SourceFailing = -1, nil
	if first, ok := q.remember(selfRead{now, self.Lines, self.SourceErrors}); ok {
		self.LinesPerSec = (self.Lines - first.lines) / now.Sub(first.at).Seconds()
		self.SourceFailing = map[string]float64{}
		for src, v := range self.SourceErrors {
			if d := v - first.errs[src]; d > 0 {
				self.SourceFailing[src] = d
			}
		}
	}
	return self, nil
}

// remember keeps r and the reads of the last rateWindow before it, and
// returns the oldest: the rates are over the span from it to r, once that
// is minRateWindow long (ok). A counter lower than at the last read means
// sparkpulse restarted: the reads before are dropped.
func (q *Querier) remember(r selfRead) (first selfRead, ok bool) {
	if n := len(q.reads); n > 0 {
		last := q.reads[n-1]
		restarted := r.lines < last.lines
		for src, v := range r.errs {
			restarted = restarted || v < last.errs[src]
		}
		if restarted {
			q.reads = q.reads[:0]
		}
	}
	q.reads = append(q.reads, r)
	for len(q.reads) > 2 && r.at.Sub(q.reads[1].at) >= rateWindow {
		q.reads = q.reads[1:]
	}
	first = q.reads[0]
	return first, r.at.Sub(first.at) >= minRateWindow
}

// ParseMetrics reads sparkpulse's figures from its /metrics, in the
// Prometheus text format. Lines and drops are the [[graphite]] blocks';
// points written, refusals, failed writes and queues are every writer's
// (annotations and own metrics included). LinesPerSec is left at 0.
func ParseMetrics(r io.Reader, now time.Time) (*Self, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	sum := func(name string) float64 {
		t := 0.0
		if f := fams[name]; f != nil {
			for _, m := range f.GetMetric() {
				t += value(m)
			}
		}
		return t
	}
	byLabel := func(name, label string) map[string]float64 {
		out := map[string]float64{}
		if f := fams[name]; f != nil {
			for _, m := range f.GetMetric() {
				if v := value(m); v != 0 {
					out[labelOf(m, label)] += v
				}
			}
		}
		return out
	}
	s := &Self{
		Lines:       sum("sparkpulse_lines_received_total"),
		Written:     sum("sparkpulse_influxdb_points_written_total"),
		Dropped:     byLabel("sparkpulse_lines_dropped_total", "reason"),
		Rejected:    byLabel("sparkpulse_influxdb_points_rejected_total", "reason"),
		WriteErrors: sum("sparkpulse_influxdb_write_errors_total"),
		QueueBytes:  sum("sparkpulse_influxdb_queue_bytes"),
		DiskBytes:   sum("sparkpulse_influxdb_disk_queue_bytes"),
		NoDelta:     byLabel("sparkpulse_delta_samples_total", "outcome")["first_unknown"],

		Sources:      sum("sparkpulse_annotate_sources"),
		SourceErrors: byLabel("sparkpulse_annotate_errors_total", "source"),
		LostApps:     sum("sparkpulse_annotate_attempts_lost"),
	}
	if start := sum("process_start_time_seconds"); start > 0 {
		s.Up = now.Sub(time.Unix(0, int64(start*1e9))).Round(time.Second)
	}
	return s, nil
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
