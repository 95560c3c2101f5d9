// Package selfmetrics writes the metrics of a Prometheus registry as
// InfluxDB points, so that a service's own health can be graphed from the
// same database as the data it handles.
//
// Each sample becomes a point in the measurement named after its metric
// family (sparkpulse_lines_received_total), tagged with its labels and the
// Reporter's host. Gauges and untyped metrics have the field value;
// counters have value and delta, the increase since the previous report
// (the value itself at the first report, as the registry's counters start
// at zero with the process, and after a decrease); histograms and
// summaries have count, sum, count_delta and sum_delta, so that an
// interval's mean is sum_delta / count_delta. A dashboard sums deltas over
// any interval without non_negative_derivative.
package selfmetrics

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/influxdata/line-protocol/v2/lineprotocol"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Sink receives encoded points: complete lines of line protocol.
type Sink interface {
	Append(lines []byte, wait bool) bool
}

// Reporter turns registry snapshots into points. It is not safe for
// concurrent use; one goroutine calls Report.
type Reporter struct {
	g       prometheus.Gatherer
	sink    Sink
	host    string
	include func(family string) bool
	prev    map[string]float64 // series and field → value at the last report
	enc     lineprotocol.Encoder
}

// New returns a Reporter for the families of g that include accepts (all
// when nil), tagging every point with host unless it is empty.
func New(g prometheus.Gatherer, sink Sink, host string, include func(family string) bool) *Reporter {
	if include == nil {
		include = func(string) bool { return true }
	}
	r := &Reporter{g: g, sink: sink, host: host, include: include, prev: map[string]float64{}}
	r.enc.SetPrecision(lineprotocol.Nanosecond)
	return r
}

// Report writes one point per sample, stamped now, and returns how many.
// Samples that cannot be encoded (a NaN or infinite value, which InfluxDB
// cannot store) are skipped; the error names the first of them.
func (r *Reporter) Report(now time.Time) (int, error) {
	families, err := r.g.Gather()
	if err != nil && len(families) == 0 {
		return 0, fmt.Errorf("selfmetrics: gathering: %w", err)
	}
	r.enc.Reset()
	n := 0
	var firstErr error
	for _, f := range families {
		if !r.include(f.GetName()) {
			continue
		}
		for _, m := range f.GetMetric() {
			if err := r.point(f, m, now); err != nil {
				r.enc.ClearErr()
				if firstErr == nil {
					firstErr = fmt.Errorf("selfmetrics: %s: %w", f.GetName(), err)
				}
				continue
			}
			n++
		}
	}
	if n > 0 {
		r.sink.Append(r.enc.Bytes(), true)
	}
	return n, firstErr
}

type tag struct{ k, v string }

func (r *Reporter) point(f *dto.MetricFamily, m *dto.Metric, now time.Time) error {
	tags := make([]tag, 0, len(m.GetLabel())+1)
	for _, l := range m.GetLabel() {
		if l.GetValue() != "" {
			tags = append(tags, tag{l.GetName(), l.GetValue()})
		}
	}
	if r.host != "" {
		tags = append(tags, tag{"host", r.host})
	}
	sort.Slice(tags, func(i, j int) bool { return tags[i].k < tags[j].k })
	var key strings.Builder
	key.WriteString(f.GetName())
	for _, t := range tags {
		key.WriteString("\x00" + t.k + "\x01" + t.v)
	}

	type field struct {
		k string
		v float64
	}
	var fields []field
	// delta adds name and name's increase since the last report.
	delta := func(name, deltaName string, v float64) {
		k := key.String() + "\x02" + name
		d := v
		if p, ok := r.prev[k]; ok && v >= p {
			d = v - p
		}
		r.prev[k] = v
		fields = append(fields, field{name, v}, field{deltaName, d})
	}
	switch f.GetType() {
	case dto.MetricType_COUNTER:
		delta("value", "delta", m.GetCounter().GetValue())
	case dto.MetricType_GAUGE:
		fields = append(fields, field{"value", m.GetGauge().GetValue()})
	case dto.MetricType_HISTOGRAM:
		h := m.GetHistogram()
		delta("count", "count_delta", float64(h.GetSampleCount()))
		delta("sum", "sum_delta", h.GetSampleSum())
	case dto.MetricType_SUMMARY:
		s := m.GetSummary()
		delta("count", "count_delta", float64(s.GetSampleCount()))
		delta("sum", "sum_delta", s.GetSampleSum())
	default:
		fields = append(fields, field{"value", m.GetUntyped().GetValue()})
	}
	sort.Slice(fields, func(i, j int) bool { return fields[i].k < fields[j].k })
	for _, fl := range fields {
		if math.IsNaN(fl.v) || math.IsInf(fl.v, 0) {
			return fmt.Errorf("field %s is %v, which InfluxDB cannot store", fl.k, fl.v)
		}
	}

	r.enc.StartLine(f.GetName())
	for _, t := range tags {
		r.enc.AddTag(t.k, t.v)
	}
	for _, fl := range fields {
		v, _ := lineprotocol.FloatValue(fl.v)
		r.enc.AddField(fl.k, v)
	}
	r.enc.EndLine(now)
	return r.enc.Err()
}
