package relay

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/influxdata/line-protocol/v2/lineprotocol"
)

// The tests read what the relay encodes back through the line protocol
// parser, as InfluxDB would, with this one decoder.

// point is one point of line protocol.
type point struct {
	measurement string
	tags        [][2]string // key and value, in order
	fields      []pointField
	time        int64 // ns
}

type pointField struct {
	key   string
	value lineprotocol.Value
}

// series is the point's measurement and tags as line protocol writes
// them: "measurement,key=value,…".
func (p point) series() string {
	var b strings.Builder
	b.WriteString(p.measurement)
	for _, kv := range p.tags {
		fmt.Fprintf(&b, ",%s=%s", kv[0], kv[1])
	}
	return b.String()
}

// parsePoints decodes lp, up to what the parser refuses, if anything.
func parsePoints(lp []byte) ([]point, error) {
	var out []point
	dec := lineprotocol.NewDecoderWithBytes(lp)
	for dec.Next() {
		m, err := dec.Measurement()
		if err != nil {
			return out, err
		}
		p := point{measurement: string(m)}
		for {
			k, v, err := dec.NextTag()
			if err != nil {
				return out, err
			}
			if k == nil {
				break
			}
			p.tags = append(p.tags, [2]string{string(k), string(v)})
		}
		for {
			k, v, err := dec.NextField()
			if err != nil {
				return out, err
			}
			if k == nil {
				break
			}
			p.fields = append(p.fields, pointField{string(k), v})
		}
		ts, err := dec.Time(lineprotocol.Nanosecond, time.Time{})
		if err != nil {
			return out, err
		}
		p.time = ts.UnixNano()
		out = append(out, p)
	}
	return out, dec.Err()
}

// decodePoints decodes lp, failing the test on what the parser refuses.
func decodePoints(t testing.TB, lp []byte) []point {
	t.Helper()
	points, err := parsePoints(lp)
	if err != nil {
		t.Fatalf("%v in %q", err, lp)
	}
	return points
}
