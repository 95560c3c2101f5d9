package report

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/sparkpulse/sparkpulse/influx"
	"github.com/sparkpulse/sparkpulse/influxql"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/timespent"
)

// RecordQuery says where the annotator wrote its facts.
type RecordQuery struct {
	Influx   influx.Config
	Database string
}

// recordLookback bounds the reads of an application's record: its facts
// are at its start, and a report is asked of recent applications.
const recordLookback = 30 * 24 * time.Hour

// Recorded is what the annotator wrote of an application: its latest
// application fact, its accounting, advice and reconciliation as written
// at its end, and its longest stages. It is what `report APP_ID` prints
// when no Spark REST source shows the application any more (a live UI
// gone with its driver, no History Server), or none ever did (fact
// stream).
type Recorded struct {
	Application string `json:"application"`
	MetricsKey  string `json:"metrics_key"`
	Name        string `json:"name"`
	Database    string `json:"database"`
	// Fact is the latest application fact: start (running when last
	// seen), end, lost (closed out) or stream (seen only in its metrics).
	Fact   string `json:"fact"`
	Status string `json:"status"`
	Title  string `json:"title"`
	Text   string `json:"text"`
	// Usage is the spark_app_usage fact (end, lost or stream; else the
	// latest estimate) as written: field → value; nil when none.
	Usage map[string]any `json:"usage"`
	// Advice is the spark_sizing points: limits, findings and settings.
	Advice []map[string]any `json:"advice"`
	// Reconciliation is the spark_reconcile point; nil when none.
	Reconciliation map[string]any  `json:"reconciliation"`
	Stages         []RecordedStage `json:"slowest_stages"`
}

// RecordedStage is an ended stage attempt's fact.
type RecordedStage struct {
	Title      string `json:"title"`
	Text       string `json:"text"`
	DurationMs int64  `json:"duration_ms"`
}

// ErrNotRecorded: the database holds no fact of the application.
var ErrNotRecorded = errors.New("no fact of it recorded")

// ReadRecorded reads an application's record, by its id or its metrics
// key: its newest run's (latestRun) facts, within that run's times.
func ReadRecorded(ctx context.Context, rq RecordQuery, app string) (Recorded, error) {
	reader, err := influx.NewQuerier(rq.Influx)
	if err != nil {
		return Recorded{}, err
	}
	defer reader.Close()
	r := Recorded{Database: rq.Database, Advice: []map[string]any{}, Stages: []RecordedStage{}}
	within := fmt.Sprintf("time >= now() - %dh", int64(recordLookback/time.Hour))
	read := func(what, q string) ([]map[string]any, error) {
		series, err := reader.Query(ctx, rq.Database, q)
		if err != nil {
			if inner := errors.Unwrap(err); inner != nil {
				err = inner // the statement is ours: say what was read where
			}
			return nil, fmt.Errorf("reading %s from database %q at %s: %w", what, rq.Database, influx.RedactURL(rq.Influx.WithDefaults().URL), err)
		}
		var rows []map[string]any
		for _, s := range series {
			for _, v := range s.Values {
				row := map[string]any{}
				for k, t := range s.Tags {
					row[k] = t
				}
				for i, c := range s.Columns {
					if i < len(v) && v[i] != nil {
						row[c] = v[i]
					}
				}
				rows = append(rows, row)
			}
		}
		return rows, nil
	}
	facts, err := read(schema.MeasurementApp, fmt.Sprintf(`SELECT * FROM %s WHERE (%s = %s OR %s = %s) AND %s GROUP BY %s, %s`,
		influxql.QuoteIdent(schema.MeasurementApp), influxql.QuoteIdent(schema.FieldAppID), influxql.QuoteString(app),
		influxql.QuoteIdent(schema.TagApplicationID), influxql.QuoteString(app), within,
		influxql.QuoteIdent(schema.TagApplicationID), influxql.QuoteIdent(schema.TagAppName)))
	if err != nil {
		return Recorded{}, err
	}
	if len(facts) == 0 {
		return Recorded{}, fmt.Errorf("%w in database %q (the last %s)", ErrNotRecorded, rq.Database, timespent.Duration(recordLookback.Milliseconds()))
	}
	best := latestRun(facts)
	key := str(best, schema.TagApplicationID)
	r.MetricsKey, r.Name = key, str(best, schema.TagAppName)
	r.Application = cmp.Or(str(best, schema.FieldAppID), key)
	r.Fact, r.Status = str(best, schema.FieldFact), str(best, schema.FieldStatus)
	r.Title, r.Text = str(best, schema.FieldTitle), str(best, schema.FieldText)
	// The run's facts are within its start and the end its fact states
	// (at its millisecond: a fact's sub-millisecond digits tell facts
	// apart), so another run sharing the metrics key (its name as
	// spark.metrics.namespace) is not read with it.
	byKey := fmt.Sprintf("%s = %s AND time >= %d", influxql.QuoteIdent(schema.TagApplicationID), influxql.QuoteString(key),
		when(best).Truncate(time.Millisecond).UnixNano())
	if end, ok := influx.Number(best[schema.FieldEndMs]); ok && r.Fact != "start" {
		byKey += fmt.Sprintf(" AND time < %d", (int64(end)+1)*int64(time.Millisecond))
	}

	usage, err := read(schema.MeasurementUsage, fmt.Sprintf(`SELECT * FROM %s WHERE %s`, influxql.QuoteIdent(schema.MeasurementUsage), byKey))
	if err != nil {
		return Recorded{}, err
	}
	usageRank := map[string]int{"estimate": 0, "stream": 1, "lost": 2, "end": 3}
	for _, u := range usage {
		if r.Usage == nil || cmp.Or(cmp.Compare(usageRank[str(u, schema.FieldFact)], usageRank[str(r.Usage, schema.FieldFact)]),
			when(u).Compare(when(r.Usage))) > 0 {
			r.Usage = u
		}
	}
	advice, err := read(schema.MeasurementSizing, fmt.Sprintf(`SELECT * FROM %s WHERE %s`, influxql.QuoteIdent(schema.MeasurementSizing), byKey))
	if err != nil {
		return Recorded{}, err
	}
	r.Advice = append(r.Advice, advice...)
	rec, err := read(schema.MeasurementReconcile, fmt.Sprintf(`SELECT * FROM %s WHERE %s`, influxql.QuoteIdent(schema.MeasurementReconcile), byKey))
	if err != nil {
		return Recorded{}, err
	}
	if len(rec) > 0 {
		r.Reconciliation = rec[len(rec)-1]
	}
	stages, err := read(schema.MeasurementStage, fmt.Sprintf(`SELECT %s FROM %s WHERE %s AND %s = 'end'`,
		influxql.QuoteIdents(schema.FieldTitle, schema.FieldText, schema.FieldDurationMs), influxql.QuoteIdent(schema.MeasurementStage), byKey,
		influxql.QuoteIdent(schema.FieldFact)))
	if err != nil {
		return Recorded{}, err
	}
	for _, s := range stages {
		d, _ := influx.Number(s[schema.FieldDurationMs])
		r.Stages = append(r.Stages, RecordedStage{Title: str(s, schema.FieldTitle), Text: str(s, schema.FieldText), DurationMs: int64(d)})
	}
	slices.SortStableFunc(r.Stages, func(a, b RecordedStage) int { return cmp.Compare(b.DurationMs, a.DurationMs) })
	r.Stages = r.Stages[:min(len(r.Stages), DefaultStages)]
	return r, nil
}

// WriteRecorded prints an application's record (ReadRecorded), as text
// or JSON; why says why it is read from the record (the sources' errors),
// "" when there are no sources.
func WriteRecorded(ctx context.Context, rq RecordQuery, app, why string, asJSON bool, w io.Writer) error {
	r, err := ReadRecorded(ctx, rq, app)
	if err != nil {
		return fmt.Errorf("application %s: %w", app, err)
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	name := r.Application
	if r.Name != "" {
		name += " (" + r.Name + ")"
	}
	fmt.Fprintf(w, "%s, from what sparkpulse recorded in database %s", name, r.Database)
	if why != "" {
		fmt.Fprintf(w, ": no Spark REST source shows it now (%s)", why)
	}
	fmt.Fprint(w, "\n\n")
	fmt.Fprintf(w, "%s\n  %s\n", r.Title, r.Text)
	switch r.Fact {
	case "start":
		fmt.Fprintln(w, "  running when last seen; its end was not recorded yet")
	case "stream":
		fmt.Fprintln(w, "  seen only in its metrics: no Spark REST source showed it (see the [annotate] urls)")
	}
	if u := r.Usage; u != nil {
		fmt.Fprintf(w, "\nusage (%s): %s\n", str(u, schema.FieldFact), str(u, schema.FieldText))
		for _, k := range []struct{ label, field string }{{"outcome", schema.UsageOutcome}, {"why", schema.UsageOutcomeReason},
			{"recommended", schema.UsageRecommended}, {"set aside", schema.UsageSetAside}, {"notes", schema.UsageNotes}} {
			if v := str(u, k.field); v != "" {
				fmt.Fprintf(w, "  %s: %s\n", k.label, v)
			}
		}
	} else {
		fmt.Fprintln(w, "\nno accounting recorded: it is written a minute after the application ends")
	}
	if len(r.Advice) > 0 {
		fmt.Fprintln(w, "\nadvice, as written at its end:")
		for _, a := range r.Advice {
			line := str(a, schema.FieldText)
			if reason := str(a, schema.SizingReason); reason != "" {
				line += ": " + reason
			}
			fmt.Fprintf(w, "  %s %s\n", str(a, schema.SizingKind), line)
		}
	}
	if rc := r.Reconciliation; rc != nil {
		fmt.Fprintf(w, "\nreconciled with Spark's totals: %s · %s\n", str(rc, schema.ReconcileVerdict), str(rc, schema.FieldText))
	}
	if len(r.Stages) > 0 {
		fmt.Fprintln(w, "\nlongest stages:")
		for _, s := range r.Stages {
			fmt.Fprintf(w, "  %s · %s\n", s.Title, s.Text)
		}
	}
	return nil
}

// latestRun is the last word of the newest run among an application's
// spark_app facts. Facts are at their attempt's start (the stream's at
// its first report), so the attempt started last is the newest; its end
// fact, else lost, else start, is its last word. A stream fact is
// another run's only where it began after that attempt ended, or, if it
// was running when last seen, started (a later run under the same
// metrics key); else a source's word on the run wins over the stream's.
func latestRun(facts []map[string]any) map[string]any {
	rank := map[string]int{"start": 0, "lost": 1, "end": 2}
	var src, stream map[string]any
	for _, f := range facts {
		if str(f, schema.FieldFact) == "stream" {
			if stream == nil || when(f).After(when(stream)) {
				stream = f
			}
			continue
		}
		if src == nil || cmp.Or(when(f).Truncate(time.Millisecond).Compare(when(src).Truncate(time.Millisecond)),
			cmp.Compare(rank[str(f, schema.FieldFact)], rank[str(src, schema.FieldFact)])) > 0 {
			src = f
		}
	}
	if src == nil {
		return stream
	}
	if stream == nil {
		return src
	}
	// A running attempt's end is unknown: its start fact is older news
	// than a stream fact that began after it.
	end := when(src)
	if ms, ok := influx.Number(src[schema.FieldEndMs]); ok {
		end = time.UnixMilli(int64(ms))
	}
	if end.Before(when(stream)) {
		return stream
	}
	return src
}

// when is a row's time; zero when it has none.
func when(row map[string]any) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, str(row, "time"))
	return t
}

// str is a row's value as text, "" when absent or not text.
func str(row map[string]any, k string) string {
	v, _ := row[k].(string)
	return v
}
