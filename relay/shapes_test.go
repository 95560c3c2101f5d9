package relay

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sparkpulse/sparkpulse/realspark/recorded"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/spark"
)

// The recorded stream of each real Spark run, encoded in both schemas the
// way the service does (blocks of lines, each a Flush), carries the same
// values: every value, delta and rate of the CERN shape is in the wide
// one under its metric's name, and nothing else is. The wide shape holds
// them in a twentieth of the points and less than half the bytes.
func TestRealSparkShapes(t *testing.T) {
	for _, meta := range recorded.AllRuns(t) {
		t.Run(filepath.Base(meta.Dir), func(t *testing.T) {
			lines := meta.MustLines(t)
			var values [2]map[string]float64
			var points, size [2]int
			for i, shape := range []schema.Shape{schema.CERN, schema.Wide} {
				s := &sink{}
				deltas := newDeltas(t, "spark")
				deltas.MatchField = shape == schema.Wide
				conn := New(Config{
					Mapper:      spark.NewMapper(spark.Options{Prefixes: []string{meta.Prefix}, Schema: shape}),
					Sink:        s,
					JoinReports: shape == schema.Wide,
					Deltas:      deltas,
				}).NewConn(nil)
				for k, l := range lines {
					conn.Line(l)
					if k%1000 == 999 { // a 64 KiB read holds about 1000 lines
						conn.Flush()
					}
				}
				conn.Flush()
				values[i], points[i] = decodeValues(t, s.buf.Bytes(), shape)
				size[i] = s.buf.Len()
			}
			if len(values[0]) != len(values[1]) {
				t.Errorf("%d values in the CERN shape, %d in the wide one", len(values[0]), len(values[1]))
			}
			var diff []string
			for k, v := range values[0] {
				if w, ok := values[1][k]; !ok || w != v {
					diff = append(diff, fmt.Sprintf("%s: cern %v, wide %v (%v)", k, v, w, ok))
				}
			}
			slices.Sort(diff)
			if len(diff) > 0 {
				t.Errorf("%d values differ, e.g. %s", len(diff), diff[:min(5, len(diff))])
			}
			t.Logf("%d lines, %d values: %d points, %d bytes (cern); %d points, %d bytes (wide)",
				len(lines), len(values[0]), points[0], size[0], points[1], size[1])
			if points[1]*15 > points[0] || size[1]*2 > size[0] {
				t.Errorf("wide: %d points of %d bytes, cern: %d of %d: want ≥ 15× fewer points and ≤ half the bytes", points[1], size[1], points[0], size[0])
			}
		})
	}
}

// decodeValues reads line protocol into "metric|tags|field time" → value,
// in terms both shapes share: the CERN shape's namespace tag and field
// names (value, delta, rate) become the wide shape's measurement and
// field names, and the CERN shape's pool tag part of the field's name.
// LiveListenerBus's identity tags are put back into the metric's name.
func decodeValues(t *testing.T, lp []byte, shape schema.Shape) (map[string]float64, int) {
	t.Helper()
	out := map[string]float64{}
	points := decodePoints(t, lp)
	for _, p := range points {
		meas := p.measurement
		var tags []string
		ns, listener, queue, pool := "", "", "", ""
		for _, kv := range p.tags {
			switch kv[0] {
			case "namespace":
				ns = kv[1]
			case "listener":
				listener = kv[1]
			case "queue":
				queue = kv[1]
			case "pool": // the CERN shape's; a part of the field's name in the wide one
				pool = kv[1]
			default:
				tags = append(tags, kv[0]+"="+kv[1])
			}
		}
		for _, f := range p.fields {
			metric, suffix := meas, ""
			if shape == schema.CERN {
				if ns != "" {
					metric = ns + "." + meas
				}
				if f.key != "value" {
					suffix = "_" + f.key
				}
				if pool != "" {
					metric = strings.Replace(metric, "pools.", "pools."+pool+".", 1)
				}
			} else {
				name := f.key
				for _, s := range []string{"_delta", "_rate"} {
					if n, ok := strings.CutSuffix(name, s); ok {
						name, suffix = n, s
					}
				}
				if name != "value" {
					metric = meas + "." + name
				}
				if listener != "" {
					metric = strings.Replace(metric, "listenerProcessingTime.", "listenerProcessingTime."+listener+".", 1)
				}
				if queue != "" {
					metric = strings.Replace(metric, "queue.", "queue."+queue+".", 1)
				}
			}
			// A series repeated at one time (daemons' jvm metrics carry no
			// process) keeps its last value, as InfluxDB does.
			out[fmt.Sprintf("%s%s|%s|%d", metric, suffix, strings.Join(tags, ","), p.time)] = f.value.FloatV()
		}
	}
	return out, len(points)
}
