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
)

// influxStream reads the metrics stream back from InfluxDB for the
// annotator's accounting: the databases of the [[graphite]] blocks, where
// the metrics went.
type influxStream struct {
	cfg     influx.Config
	dbs     []string
	writers func() []*influx.Writer // the blocks' writers, for Delivered
}

// newStream is the stream of plan's [[graphite]] blocks, or nil (no
// accounting from the stream) without one.
func newStream(plan *Plan, writers func() []*influx.Writer) annotate.Stream {
	s := &influxStream{cfg: plan.Influx, writers: writers}
	for _, l := range plan.Listeners {
		db, _, _ := strings.Cut(l.Target.Bucket, "/")
		if !slices.Contains(s.dbs, db) {
			s.dbs = append(s.dbs, db)
		}
	}
	if len(s.dbs) == 0 {
		return nil
	}
	return s
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

// Totals runs two InfluxQL statements per database: the sums of the
// counters' deltas and the peak and mean of the gauges, by process. Where
// several databases hold the application, their sums add up and their
// peaks are the larger.
func (s *influxStream) Totals(ctx context.Context, app string, from, to time.Time) (map[string]annotate.ProcessTotals, error) {
	where := fmt.Sprintf(`WHERE "applicationid" = %s AND time >= %dms AND time < %dms GROUP BY "process"`,
		influx.QuoteString(app), from.UnixMilli(), to.UnixMilli())
	out := map[string]annotate.ProcessTotals{}
	get := func(p string) annotate.ProcessTotals {
		t, ok := out[p]
		if !ok {
			t = annotate.ProcessTotals{Sums: map[string]float64{}, NoDelta: map[string]int{}, Peak: map[string]float64{}, Mean: map[string]float64{}, Samples: map[string]float64{}}
			out[p] = t
		}
		return t
	}
	for _, db := range s.dbs {
		sums, err := influx.Query(ctx, s.cfg, db, `SELECT sum("delta"), count("delta"), count("value") FROM `+identList(annotate.StreamCounters)+" "+where)
		if err != nil {
			return nil, s.readError(db, err)
		}
		for _, sr := range sums {
			p := sr.Tags["process"]
			if p == "" {
				continue
			}
			t := get(p)
			if v, ok := influx.Number(firstValue(sr, 1)); ok {
				t.Sums[sr.Name] += v
			}
			withDelta, _ := influx.Number(firstValue(sr, 2))
			if samples, ok := influx.Number(firstValue(sr, 3)); ok && samples > withDelta {
				t.NoDelta[sr.Name] += int(samples - withDelta)
			}
		}
		gauges, err := influx.Query(ctx, s.cfg, db, `SELECT max("value"), mean("value"), count("value") FROM `+identList(annotate.StreamGauges)+" "+where)
		if err != nil {
			return nil, s.readError(db, err)
		}
		for _, sr := range gauges {
			p := sr.Tags["process"]
			if p == "" {
				continue
			}
			t := get(p)
			if v, ok := influx.Number(firstValue(sr, 1)); ok {
				t.Peak[sr.Name] = max(t.Peak[sr.Name], v)
			}
			if v, ok := influx.Number(firstValue(sr, 2)); ok {
				// One database per process is the usual case; where two
				// hold it, the mean of the one with more samples.
				if n, _ := influx.Number(firstValue(sr, 3)); n > t.Samples[sr.Name] {
					t.Mean[sr.Name], t.Samples[sr.Name] = v, n
				}
			}
		}
	}
	return out, nil
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
