package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sparkpulse/sparkpulse/annotate"
	"github.com/sparkpulse/sparkpulse/influx"
	"github.com/sparkpulse/sparkpulse/spark"
)

// influxStream reads the metrics stream back from InfluxDB for the
// annotator's accounting: the databases of the [[graphite]] blocks, where
// the metrics went, each in the shapes its blocks write.
type influxStream struct {
	cfg     influx.Config
	querier *influx.Querier // one client: the accounting asks every poll
	dbs     []streamDB
	writers func() []*influx.Writer // the blocks' writers, for Delivered
}

// streamDB is a database of the stream and the shapes it is read in.
type streamDB struct {
	name    string
	schemas []spark.Schema
}

// newStream is the stream of plan's [[graphite]] blocks, or nil (no
// accounting from the stream) without one.
func newStream(plan *Plan, writers func() []*influx.Writer) annotate.Stream {
	dbs := streamDBs(plan)
	if len(dbs) == 0 {
		return nil
	}
	q, err := influx.NewQuerier(plan.Influx)
	if err != nil {
		return nil // the plan's InfluxDB settings were validated: not reached
	}
	return &influxStream{cfg: plan.Influx, querier: q, dbs: dbs, writers: writers}
}

// streamDBs are the databases plan's [[graphite]] blocks write, in the
// blocks' order, each with the shapes it may hold: a block with templates
// writes the CERN shape (a measurement per metric, field value); a block
// that names its schema, that one; a block that names none, both. The
// default became wide after sparkpulse wrote CERN-shaped points under the
// same configuration, so such a database may hold either, or both for an
// application that ran across the upgrade; reading a shape a database
// does not hold costs one empty answer, cheaper than a detection that
// would have to be made per application and time range.
func streamDBs(plan *Plan) []streamDB {
	var dbs []streamDB
	for _, l := range plan.Listeners {
		name, _, _ := strings.Cut(l.Target.Bucket, "/")
		i := slices.IndexFunc(dbs, func(d streamDB) bool { return d.name == name })
		if i < 0 {
			dbs = append(dbs, streamDB{name: name})
			i = len(dbs) - 1
		}
		var schemas []spark.Schema
		switch {
		case l.Templates != nil:
			schemas = []spark.Schema{spark.SchemaCERN}
		case l.Config.Schema != "":
			schemas = []spark.Schema{l.Schema}
		default:
			schemas = []spark.Schema{spark.SchemaWide, spark.SchemaCERN}
		}
		for _, sc := range schemas {
			if !slices.Contains(dbs[i].schemas, sc) {
				dbs[i].schemas = append(dbs[i].schemas, sc)
			}
		}
	}
	return dbs
}

// Delivered reports whether every point the blocks received before until
// is in InfluxDB: after an outage, the backlog goes first.
func (s *influxStream) Delivered(until time.Time) bool {
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
func (s *influxStream) Totals(ctx context.Context, app string, from, to time.Time) (map[string]annotate.ProcessTotals, error) {
	where := fmt.Sprintf(`WHERE "applicationid" = %s AND time >= %dms AND time < %dms GROUP BY "process"`,
		influx.QuoteString(app), from.UnixMilli(), to.UnixMilli())
	out := map[string]annotate.ProcessTotals{}
	for _, db := range s.dbs {
		inDB := map[string]annotate.ProcessTotals{}
		for _, sc := range db.schemas {
			q := newTotalsQuery(sc)
			series, err := s.querier.Query(ctx, db.name, q.statement(where))
			if err != nil {
				return nil, s.readError(db.name, err)
			}
			q.add(inDB, series)
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

// totalsQuery is the statement that reads the stream's totals in one
// shape: an aggregate per column, each column once, and where each
// metric's aggregates are.
type totalsQuery struct {
	schema  spark.Schema
	from    []string       // measurements
	columns []string       // aggregates, from column 1 on (0 is time)
	index   map[string]int // aggregate → column
	at      map[spark.Metric][3]int
}

// newTotalsQuery lays out the statement of schema: for a counter the sum
// and count of its delta and the count of its value, for a gauge the max,
// mean and count of its value.
func newTotalsQuery(schema spark.Schema) *totalsQuery {
	q := &totalsQuery{schema: schema, index: map[string]int{}, at: map[spark.Metric][3]int{}}
	col := func(fn, field string) int {
		expr := fn + "(" + influx.QuoteIdent(field) + ")"
		if i, ok := q.index[expr]; ok {
			return i
		}
		q.columns = append(q.columns, expr)
		q.index[expr] = len(q.columns)
		return len(q.columns)
	}
	measurement := func(m spark.Metric) {
		if name := schema.Measurement(m); !slices.Contains(q.from, name) {
			q.from = append(q.from, name)
		}
	}
	for _, m := range annotate.StreamCounters {
		measurement(m)
		q.at[m] = [3]int{col("sum", schema.DeltaField(m)), col("count", schema.DeltaField(m)), col("count", schema.Field(m))}
	}
	for _, m := range annotate.StreamGauges {
		measurement(m)
		q.at[m] = [3]int{col("max", schema.Field(m)), col("mean", schema.Field(m)), col("count", schema.Field(m))}
	}
	return q
}

func (q *totalsQuery) statement(where string) string {
	return "SELECT " + strings.Join(q.columns, ", ") + " FROM " + identList(q.from) + " " + where
}

// add adds the answer's series to out: sums and samples without a delta
// add up, peaks are the larger, means are weighed by their samples.
func (q *totalsQuery) add(out map[string]annotate.ProcessTotals, series []influx.Series) {
	for _, sr := range series {
		p := sr.Tags["process"]
		if p == "" {
			continue
		}
		t, ok := out[p]
		if !ok {
			t = annotate.ProcessTotals{Sums: map[string]float64{}, NoDelta: map[string]int{}, Peak: map[string]float64{}, Mean: map[string]float64{}, Samples: map[string]float64{}}
			out[p] = t
		}
		for _, m := range annotate.StreamCounters {
			if q.schema.Measurement(m) != sr.Name {
				continue
			}
			at, key := q.at[m], annotate.StreamKey(m)
			if v, ok := influx.Number(firstValue(sr, at[0])); ok {
				t.Sums[key] += v
			}
			withDelta, _ := influx.Number(firstValue(sr, at[1]))
			if samples, ok := influx.Number(firstValue(sr, at[2])); ok && samples > withDelta {
				t.NoDelta[key] += int(samples - withDelta)
			}
		}
		for _, m := range annotate.StreamGauges {
			if q.schema.Measurement(m) != sr.Name {
				continue
			}
			at, key := q.at[m], annotate.StreamKey(m)
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

// identList quotes measurement names for a FROM clause.
func identList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = influx.QuoteIdent(n)
	}
	return strings.Join(q, ", ")
}

// readError says which database at which server could not be read; the
// statement is sparkpulse's own, and left out.
func (s *influxStream) readError(db string, err error) error {
	if inner := errors.Unwrap(err); inner != nil {
		err = inner
	}
	return fmt.Errorf("reading the metrics stream from database %q at %s: %w", db, influx.RedactURL(s.cfg.WithDefaults().URL), err)
}
