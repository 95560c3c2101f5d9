package grafana

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"

	"github.com/sparkpulse/sparkpulse/schema"
)

// variant is what a dashboard is generated for: the schema of the stream
// it reads, as the [[graphite]] block that wrote it says, and how it sums
// cumulative series: from sparkpulse's ingest-time deltas, exact for any
// interval and any number of processes, restarts included; or, for
// receivers whose deltas are off, from each process's raw values
// differenced at query time, which misses each process's first interval
// and the work before a counter restart.
type variant struct {
	sc        schema.Shape
	queryTime bool
	note      string // for panel descriptions
}

func ingestDeltas(sc schema.Shape) variant   { return variant{sc: sc, note: deltaNoteText} }
func queryTimeRates(sc schema.Shape) variant { return variant{sc: sc, queryTime: true} }

// col is where a metric is stored: its measurement (quoted, or a regular
// expression) and field, and for a cumulative metric the field of its
// ingest-time delta.
type col struct{ from, field, delta string }

// of is where v's stream stores a metric of the catalogue.
func (v variant) of(mt schema.Metric) col {
	return col{m(v.sc.Measurement(mt)), v.sc.Field(mt), v.sc.DeltaField(mt)}
}

// own is where sparkpulse stores a metric that is not Spark's (its own):
// the measurement is the name, in every schema.
func own(measurement string) col { return col{m(measurement), "value", "delta"} }

// rate is the per-interval rate of a cumulative series. The query-time
// form differences each process's series, and each group's if groupBy
// names other tags.
func (v variant) rate(c col, s scale, conds []string, groupBy string) string {
	var q string
	if v.queryTime {
		inner := `"process"`
		if groupBy != "" && groupBy != inner {
			inner += ", " + groupBy
		}
		q = fmt.Sprintf(`SELECT sum("d")%s FROM (SELECT non_negative_difference(last(%s)) AS "d" FROM %s WHERE %s GROUP BY time($__interval), %s) WHERE $timeFilter GROUP BY time($__interval)`,
			s, m(c.field), c.from, where(conds...), inner)
	} else {
		q = fmt.Sprintf(`SELECT sum(%s)%s FROM %s WHERE %s GROUP BY time($__interval)`, m(c.delta), s, c.from, where(conds...))
	}
	if groupBy != "" {
		q += ", " + groupBy
	}
	return q + " fill(0)"
}

// total is a cumulative series' increase over the selected time range,
// executors that have gone included.
func (v variant) total(c col, conds ...string) string {
	if v.queryTime {
		return fmt.Sprintf(`SELECT sum("d") FROM (SELECT non_negative_difference(%s) AS "d" FROM %s WHERE %s GROUP BY "process")`, m(c.field), c.from, where(conds...))
	}
	return fmt.Sprintf(`SELECT sum(%s) FROM %s WHERE %s`, m(c.delta), c.from, where(conds...))
}

// title, uid and description tell the variants apart: the query-time
// rates and the CERN schema's stream.
func (v variant) title(s string) string {
	base, ok := strings.CutSuffix(s, ")")
	if !ok {
		return s
	}
	if v.queryTime {
		base += ", query-time rates"
	}
	if v.sc != schema.Default {
		base += ", " + v.sc.String() + " schema"
	}
	return base + ")"
}

func (v variant) uid(s string) string {
	if v.queryTime {
		s += "-query-time"
	}
	if v.sc != schema.Default {
		s += "-" + v.sc.String()
	}
	return s
}

func (v variant) description(s string) string {
	if v.queryTime {
		s = "The Spark performance dashboard for receivers with [deltas] off: counters are differenced at query time, per process; each process's first interval and the work before a counter restart are not counted."
	}
	if v.sc != schema.Default {
		s += fmt.Sprintf(" For the metrics of [[graphite]] blocks with schema = %q.", v.sc.String())
	}
	return s
}

// gauge is an aggregate of a gauge per interval.
func gauge(agg string, c col, conds []string, groupBy string) string {
	q := fmt.Sprintf(`SELECT %s(%s) FROM %s WHERE %s GROUP BY time($__interval)`, agg, m(c.field), c.from, where(conds...))
	if groupBy != "" {
		q += ", " + groupBy
	}
	return q + " fill(null)"
}

// gaugeOf, rateOf and totalOf read a metric of the catalogue.
func (v variant) gaugeOf(agg string, mt schema.Metric, conds []string, groupBy string) string {
	return gauge(agg, v.of(mt), conds, groupBy)
}

func (v variant) rateOf(mt schema.Metric, s scale, conds []string, groupBy string) string {
	return v.rate(v.of(mt), s, conds, groupBy)
}

func (v variant) totalOf(mt schema.Metric, conds ...string) string {
	return v.total(v.of(mt), conds...)
}

// latestPerProcess aggregates each process's latest value of c in the
// range.
func latestPerProcess(agg string, c col, conds ...string) string {
	return fmt.Sprintf(`SELECT %s("last") FROM (SELECT last(%s) FROM %s WHERE %s GROUP BY "process")`, agg, m(c.field), c.from, where(conds...))
}

// appMeasurements have every application: each executor's task counters
// (ExecutorSource) and the driver's block manager.
func (v variant) appMeasurements() string {
	return fmt.Sprintf("/^(%s|%s)$/", regexp.QuoteMeta(v.sc.Measurement(schema.CPUTime)), regexp.QuoteMeta(v.sc.Measurement(schema.BlockMemoryMax)))
}

// family is a set of cumulative metrics of one source whose names differ
// by a part that is not a tag in either shape (a file system scheme, a
// garbage collector), shown one series each: pattern is their name as a
// regular expression, which matches measurements in the CERN shape and
// the source's fields in the wide one. namespaced adds the CERN shape's
// condition on the source, for a pattern other sources' metrics may
// match.
type family struct {
	of, pattern string // the source, and the names
	namespaced  bool
}

// familyRate is the per-interval rate of each metric of f, legend the
// metric's name and suffix. The wide shape's regular expression of fields
// takes no arithmetic (InfluxQL: "unsupported expression with regex
// field"), so it reads the ingest-time rate field, or the query-time
// derivative, both per second: s must be perSecond there.
func (v variant) familyRate(f family, s scale, conds []string, groupBy, suffix string) *influxQLBuilder {
	mt := schema.Metric{Source: f.of, Name: f.pattern}
	if v.sc != schema.Wide {
		if ns := v.sc.Namespace(mt); f.namespaced && ns != "" {
			conds = append(conds[:len(conds):len(conds)], fmt.Sprintf(`"namespace" = '%s'`, ns))
		}
		c := col{"/^" + v.sc.Measurement(mt) + "$/", v.sc.Field(mt), v.sc.DeltaField(mt)}
		return query("", v.rate(c, s, conds, groupBy), "$m"+suffix)
	}
	if s != perSecond {
		panic("grafana: a family of the wide shape is read per second")
	}
	sel := fmt.Sprintf(`mean(/^%s$/)`, v.sc.RateField(mt))
	if v.queryTime {
		sel = fmt.Sprintf(`non_negative_derivative(last(/^%s$/), 1s)`, v.sc.Field(mt))
	}
	inner := func(by string) string {
		q := fmt.Sprintf(`SELECT %s FROM %s WHERE %s GROUP BY time($__interval), %s`, sel, m(v.sc.Measurement(mt)), where(conds...), by)
		if !v.queryTime {
			q += " fill(0)"
		}
		return q
	}
	if groupBy != "" {
		return query("", inner(groupBy), "$col"+suffix)
	}
	// Summed over processes: each process's rate per interval, then their sum.
	return query("", fmt.Sprintf(`SELECT sum(*) FROM (%s) WHERE $timeFilter GROUP BY time($__interval) fill(0)`, inner(`"process"`)), "$col"+suffix)
}

// fieldLegends names the series of a wide family's panel by the metric,
// without the function and rate field the column's name carries
// (mean_filesystem.hdfs.read_bytes_rate 3: filesystem.hdfs.read_bytes 3).
func (v variant) fieldLegends(b *timeseries.PanelBuilder) *timeseries.PanelBuilder {
	if v.sc != schema.Wide {
		return b
	}
	return b.WithTransformation(dashboard.DataTransformerConfig{Id: "renameByRegex", Options: map[string]any{
		"regex":         `^(?:sum_)?(?:mean|non_negative_derivative)_(.+?)(?:_rate)?((?: .*)?)$`,
		"renamePattern": "$1$2",
	}})
}

// pools is agg of a JVM memory pools' attribute (schema.PoolUsed) per
// interval, a series per pool: grouped by the CERN shape's pool tag; in
// the wide shape every pool is a field of the process's jvm point,
// read by a regular expression and named by poolLegends.
func (v variant) pools(agg string, mt schema.Metric, conds []string) *influxQLBuilder {
	if v.sc != schema.Wide {
		return query("", v.gaugeOf(agg, mt, conds, `"pool"`), "$tag_pool")
	}
	return query("", fmt.Sprintf(`SELECT %s(/^%s$/) FROM %s WHERE %s GROUP BY time($__interval) fill(null)`,
		agg, poolField(mt, ".+"), m(v.sc.Measurement(mt)), where(conds...)), "$col")
}

// poolField is the wide shape's field of a pools.<attr> metric as a
// regular expression, pool that of the pool's name (which may have dots).
func poolField(mt schema.Metric, pool string) string {
	prefix, attr, _ := strings.Cut(mt.Name, ".")
	return regexp.QuoteMeta(prefix) + `\.` + pool + `\.` + regexp.QuoteMeta(attr)
}

// poolLegends names the wide shape's series of pools by the pool, as the
// CERN shape's pool tag does (max_pools.G1-Eden-Space.used: G1-Eden-Space).
func (v variant) poolLegends(agg string, mt schema.Metric, b *timeseries.PanelBuilder) *timeseries.PanelBuilder {
	if v.sc != schema.Wide {
		return b
	}
	return b.WithTransformation(dashboard.DataTransformerConfig{Id: "renameByRegex", Options: map[string]any{
		"regex":         "^" + agg + "_" + poolField(mt, "(.+)") + "$",
		"renamePattern": "$1",
	}})
}

// busMetric is a LiveListenerBus metric of a listener or a queue: the
// wide shape's field, with the listener or queue in a tag; the CERN shape
// keeps them in the measurement's name, which cern matches.
type busMetric struct {
	wide       schema.Metric
	tag, alias string // the wide shape's tag and legend
	cern       string // a regular expression of the CERN shape's names
}

var (
	queueDropped = busMetric{schema.Metric{Source: schema.EventsPosted.Source, Name: "queue.numDroppedEvents.count"}, `"queue"`, "$tag_queue",
		`queue\..+\.numDroppedEvents\.count`}
	queueSize = busMetric{schema.Metric{Source: schema.EventsPosted.Source, Name: "queue.size"}, `"queue"`, "$tag_queue",
		`queue\..+\.size`}
	listenerTimeP99 = busMetric{schema.Metric{Source: schema.EventsPosted.Source, Name: "listenerProcessingTime.p99"}, `"listener"`, "$tag_listener",
		`listenerProcessingTime\..+\.p99`}
	queueListenerTimeP99 = busMetric{schema.Metric{Source: schema.EventsPosted.Source, Name: "queue.listenerProcessingTime.p99"}, `"queue"`, "queue $tag_queue",
		`queue\..+\.listenerProcessingTime\.p99`}
)

// listenerBus makes with build the queries of bus metrics, one series per
// listener or queue: one query in the CERN shape, whose measurements name
// them, one per metric grouped by its tag in the wide one.
func (v variant) listenerBus(build func(c col, groupBy, alias string) *influxQLBuilder, ms ...busMetric) []*influxQLBuilder {
	if v.sc != schema.Wide {
		var names []string
		for _, b := range ms {
			names = append(names, b.cern)
		}
		re := "/^" + names[0] + "$/"
		if len(names) > 1 {
			re = "/^(" + strings.Join(names, "|") + ")$/"
		}
		return []*influxQLBuilder{build(col{re, v.sc.Field(ms[0].wide), v.sc.DeltaField(ms[0].wide)}, "", "$m")}
	}
	var out []*influxQLBuilder
	for _, b := range ms {
		out = append(out, build(v.of(b.wide), b.tag, b.alias))
	}
	return out
}
