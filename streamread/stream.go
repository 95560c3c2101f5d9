package streamread

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sparkpulse/sparkpulse/accounting"
	"github.com/sparkpulse/sparkpulse/influx"
	"github.com/sparkpulse/sparkpulse/influxql"
	"github.com/sparkpulse/sparkpulse/schema"
)

// Stream reads the metrics stream back from InfluxDB for the annotator's
// accounting: the databases of the [[graphite]] blocks, where the metrics
// went, each in the shapes its blocks write. It is an annotate.Stream,
// and tells the annotator whether the blocks' writers have delivered
// (Delivered).
type Stream struct {
	cfg     influx.Config
	querier *influx.Querier // one client: the accounting asks every poll
	dbs     []Database
	writers func() []*influx.Writer // the blocks' writers, for Delivered
}

// Database is a database of the stream and the shapes it is read in.
type Database struct {
	Name    string
	Schemas []schema.Shape
}

// Block is a [[graphite]] block as the stream is read: where it writes
// and which shapes it may write there.
type Block struct {
	Bucket    string       // database, or database/retention policy
	Templates bool         // it maps with templates
	Schema    schema.Shape // the shape it names, when SchemaSet
	SchemaSet bool         // it names its schema
}

// New is the stream of the databases dbs at the InfluxDB cfg names, read
// with one client. writers are the blocks' writers, whose backlog
// Delivered looks at; nil when nothing is written (a report).
func New(cfg influx.Config, dbs []Database, writers func() []*influx.Writer) (*Stream, error) {
	q, err := influx.NewQuerier(cfg)
	if err != nil {
		return nil, err
	}
	return &Stream{cfg: cfg, querier: q, dbs: dbs, writers: writers}, nil
}

// Databases are the databases blocks write, in the blocks' order, each
// with the shapes it may hold: a block with templates writes the CERN
// shape (a measurement per metric, field value); a block that names its
// schema, that one; a block that names none, both. The default became
// wide after sparkpulse wrote CERN-shaped points under the same
// configuration, so such a database may hold either, or both for an
// application that ran across the upgrade; reading a shape a database
// does not hold costs one empty answer, cheaper than a detection that
// would have to be made per application and time range.
func Databases(blocks []Block) []Database {
	var dbs []Database
	for _, l := range blocks {
		name, _, _ := strings.Cut(l.Bucket, "/")
		i := slices.IndexFunc(dbs, func(d Database) bool { return d.Name == name })
		if i < 0 {
			dbs = append(dbs, Database{Name: name})
			i = len(dbs) - 1
		}
		var schemas []schema.Shape
		switch {
		case l.Templates:
			schemas = []schema.Shape{schema.CERN}
		case l.SchemaSet:
			schemas = []schema.Shape{l.Schema}
		default:
			schemas = []schema.Shape{schema.Wide, schema.CERN}
		}
		for _, sc := range schemas {
			if !slices.Contains(dbs[i].Schemas, sc) {
				dbs[i].Schemas = append(dbs[i].Schemas, sc)
			}
		}
	}
	return dbs
}

// Delivered reports whether every point the blocks received before until
// is in InfluxDB: after an outage, the backlog goes first.
func (s *Stream) Delivered(until time.Time) bool {
	if s.writers == nil {
		return true
	}
	for _, w := range s.writers() {
		if st := w.Stats(); st.QueuedBatches > 0 && time.Now().Add(-st.OldestQueuedAge).Before(until) {
			return false
		}
	}
	return true
}

// Totals runs one InfluxQL statement per database and shape: the sums of
// the counters' deltas and the peak and mean of the gauges, by process.
// The shapes of a database hold different points (one block's, or before
// and after a change of schema), so their sums add up and their means are
// weighed by their samples. Where several databases hold the application,
// their sums add up and their peaks are the larger.
func (s *Stream) Totals(ctx context.Context, app string, from, to time.Time) (map[string]accounting.ProcessTotals, error) {
	where := fmt.Sprintf(`WHERE %s = %s AND time >= %dms AND time < %dms GROUP BY %s`,
		influxql.QuoteIdent(schema.TagApplicationID), influxql.QuoteString(app), from.UnixMilli(), to.UnixMilli(), influxql.QuoteIdent(schema.TagProcess))
	out := map[string]accounting.ProcessTotals{}
	for _, db := range s.dbs {
		inDB := map[string]accounting.ProcessTotals{}
		for _, sc := range db.Schemas {
			q := newTotalsQuery(sc)
			series, err := s.querier.Query(ctx, db.Name, q.statement(where))
			if err != nil {
				return nil, s.readError(db.Name, err)
			}
			q.add(inDB, series)
			// A target whose InfluxQL lacks subqueries leaves the peak
			// of the sum unknown: each part's peak summed, an upper
			// bound, as before.
			if st, ok := treePeakStatement(sc, where); ok {
				if series, err := s.querier.Query(ctx, db.Name, st); err == nil {
					addTreePeaks(inDB, series)
				}
			}
		}
		for p, t := range inDB {
			o, ok := out[p]
			if !ok {
				out[p] = t
				continue
			}
			for k, v := range t.Sums {
				o.Sums[k] += v
			}
			for k, v := range t.NoDelta {
				o.NoDelta[k] += v
			}
			for k, v := range t.Peak {
				o.Peak[k] = max(o.Peak[k], v)
			}
			o.TreePeak = max(o.TreePeak, t.TreePeak)
			for k, v := range t.Mean {
				// One database per process is the usual case; where two
				// hold it, the mean of the one with more samples.
				if n := t.Samples[k]; n > o.Samples[k] {
					o.Mean[k], o.Samples[k] = v, n
				}
			}
		}
	}
	return out, nil
}

// treePeakStatement reads, by process, the peak of the process tree's
// resident memory report by report, in a shape that stores a report's
// gauges as one point's fields (wide): a row without one of them sums
// to nothing and is left out. where selects the application's window by
// process, as Totals' statement does. ok is false for other shapes.
func treePeakStatement(sc schema.Shape, where string) (string, bool) {
	m := sc.Measurement(accounting.TreeGauges[0])
	var terms []string
	for _, g := range accounting.TreeGauges {
		if sc.Measurement(g) != m || sc.Field(g) == "value" {
			return "", false
		}
		terms = append(terms, influxql.QuoteIdent(sc.Field(g)))
	}
	return fmt.Sprintf(`SELECT max("tree") FROM (SELECT %s AS "tree" FROM %s %s) GROUP BY %s`,
		strings.Join(terms, " + "), influxql.QuoteIdent(m), where, influxql.QuoteIdent(schema.TagProcess)), true
}

// addTreePeaks sets each process's TreePeak from the answer of
// treePeakStatement: the larger, where a database holds it in two shapes.
func addTreePeaks(out map[string]accounting.ProcessTotals, series []influx.Series) {
	for _, sr := range series {
		p := sr.Tags[schema.TagProcess]
		v, ok := influx.Number(firstValue(sr, 1))
		if p == "" || !ok {
			continue
		}
		t, seen := out[p]
		if !seen {
			continue // a process with no other figure in the window
		}
		t.TreePeak = max(t.TreePeak, v)
		out[p] = t
	}
}

// totalsQuery is the statement that reads the stream's totals in one
// shape: an aggregate per column, each column once, and where each
// metric's aggregates are.
type totalsQuery struct {
	shape   schema.Shape
	from    []string       // measurements
	columns []string       // aggregates, from column 1 on (0 is time)
	index   map[string]int // aggregate → column
	at      map[schema.Metric][3]int
}

// newTotalsQuery lays out the statement of shape: for a counter the sum
// and count of its delta and the count of its value, for a gauge the max,
// mean and count of its value.
func newTotalsQuery(shape schema.Shape) *totalsQuery {
	q := &totalsQuery{shape: shape, index: map[string]int{}, at: map[schema.Metric][3]int{}}
	col := func(fn, field string) int {
		expr := fn + "(" + influxql.QuoteIdent(field) + ")"
		if i, ok := q.index[expr]; ok {
			return i
		}
		q.columns = append(q.columns, expr)
		q.index[expr] = len(q.columns)
		return len(q.columns)
	}
	measurement := func(m schema.Metric) {
		if name := shape.Measurement(m); !slices.Contains(q.from, name) {
			q.from = append(q.from, name)
		}
	}
	for _, m := range accounting.StreamCounters {
		measurement(m)
		q.at[m] = [3]int{col("sum", shape.DeltaField(m)), col("count", shape.DeltaField(m)), col("count", shape.Field(m))}
	}
	for _, m := range accounting.StreamGauges {
		measurement(m)
		q.at[m] = [3]int{col("max", shape.Field(m)), col("mean", shape.Field(m)), col("count", shape.Field(m))}
	}
	return q
}

func (q *totalsQuery) statement(where string) string {
	return "SELECT " + strings.Join(q.columns, ", ") + " FROM " + influxql.QuoteIdents(q.from...) + " " + where
}

// add adds the answer's series to out: sums and samples without a delta
// add up, peaks are the larger, means are weighed by their samples.
func (q *totalsQuery) add(out map[string]accounting.ProcessTotals, series []influx.Series) {
	for _, sr := range series {
		p := sr.Tags[schema.TagProcess]
		if p == "" {
			continue
		}
		t, ok := out[p]
		if !ok {
			t = accounting.ProcessTotals{Sums: map[string]float64{}, NoDelta: map[string]int{}, Peak: map[string]float64{}, Mean: map[string]float64{}, Samples: map[string]float64{}}
			out[p] = t
		}
		for _, m := range accounting.StreamCounters {
			if q.shape.Measurement(m) != sr.Name {
				continue
			}
			at, key := q.at[m], accounting.StreamKey(m)
			if v, ok := influx.Number(firstValue(sr, at[0])); ok {
				t.Sums[key] += v
			}
			withDelta, _ := influx.Number(firstValue(sr, at[1]))
			if samples, ok := influx.Number(firstValue(sr, at[2])); ok && samples > withDelta {
				t.NoDelta[key] += int(samples - withDelta)
			}
		}
		for _, m := range accounting.StreamGauges {
			if q.shape.Measurement(m) != sr.Name {
				continue
			}
			at, key := q.at[m], accounting.StreamKey(m)
			n, _ := influx.Number(firstValue(sr, at[2]))
			if n <= 0 {
				continue
			}
			if v, ok := influx.Number(firstValue(sr, at[0])); ok {
				if old, seen := t.Peak[key]; !seen || v > old {
					t.Peak[key] = v
				}
			}
			if v, ok := influx.Number(firstValue(sr, at[1])); ok {
				had := t.Samples[key]
				t.Mean[key] = (t.Mean[key]*had + v*n) / (had + n)
				t.Samples[key] = had + n
			}
		}
	}
}

// firstValue is column col of a series' first row, nil if it has none.
func firstValue(s influx.Series, col int) any {
	if len(s.Values) == 0 || len(s.Values[0]) <= col {
		return nil
	}
	return s.Values[0][col]
}

// readError says which database at which server could not be read; the
// statement is sparkpulse's own, and left out.
func (s *Stream) readError(db string, err error) error {
	if inner := errors.Unwrap(err); inner != nil {
		err = inner
	}
	return fmt.Errorf("reading the metrics stream from database %q at %s: %w", db, influx.RedactURL(s.cfg.WithDefaults().URL), err)
}
