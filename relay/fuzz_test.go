package relay

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/influxdata/line-protocol/v2/lineprotocol"

	"github.com/sparkpulse/sparkpulse/graphite"
	"github.com/sparkpulse/sparkpulse/templates"
)

// FuzzEncode: whatever a Graphite line holds, a point sparkpulse encodes
// reads back through the line protocol parser as the point it meant: the
// mapped measurement, tags and field, the parsed value and time. A line it
// cannot represent is refused, never garbled.
func FuzzEncode(f *testing.F) {
	for _, l := range corpus(f) {
		f.Add(string(l))
	}
	for _, s := range []string{
		`co,mma 1 1795300000`, `eq=ual.x 2 1795300000`, `quo"te 3 1795300000`, `back\slash 4 1795300000`,
		`esc\,aped\ x 5 1795300000`, "ünï.cøde 6 1795300000", "t.x 7 1795300000", "f.time 8 1795300000",
		`h.a\ 9 1795300000`, `h.a\\.b 10 1795300000`, "h.a=b,c d 1795300000", `h."x" 1e-300 -1`,
	} {
		f.Add(s)
	}
	eng, err := templates.Compile([]string{"t.* measurement.time", "f.* measurement.field", "h.* measurement.host.field", "measurement*"}, ".", []string{"dc=eu"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, line string) {
		c := New(Config{Mapper: eng, Now: func() time.Time { return fixedNow }}).NewConn(nil).(*Conn)
		lp, err := c.Process([]byte(line))
		// The second line of a path takes the cached description: the
		// same point, or the same refusal.
		first := string(lp)
		lp, err2 := c.Process([]byte(line))
		if string(lp) != first || (err == nil) != (err2 == nil) || err != nil && err.Error() != err2.Error() {
			t.Fatalf("%q: first %q (%v), then %q (%v)", line, first, err, lp, err2)
		}
		if err != nil {
			return
		}
		// What the mapping meant, computed again.
		var gl graphite.Line
		if graphite.Parse([]byte(strings.TrimSpace(line)), &gl) != graphite.OK {
			t.Fatalf("encoded a line the parser refuses: %q", line)
		}
		var r templates.Result
		if err := eng.Apply(gl.Path, &r); err != nil {
			t.Fatalf("encoded a line the templates refuse: %q", line)
		}
		c.backslashes(&r)

		points, err := parsePoints(lp)
		if err != nil || len(points) != 1 {
			t.Fatalf("%q → %q: %d points (%v), want one", line, lp, len(points), err)
		}
		p := points[0]
		if p.measurement != string(r.Measurement) {
			t.Fatalf("%q → %q: measurement %q, want %q", line, lp, p.measurement, r.Measurement)
		}
		if len(p.tags) != len(r.Tags) {
			t.Fatalf("%q → %q: tags %q, want %q", line, lp, p.tags, r.Tags)
		}
		for i, kv := range p.tags {
			if kv[0] != string(r.Tags[i].Key) || kv[1] != string(r.Tags[i].Value) {
				t.Fatalf("%q → %q: tag %d %q=%q, want %q=%q", line, lp, i, kv[0], kv[1], r.Tags[i].Key, r.Tags[i].Value)
			}
		}
		if len(p.fields) != 1 {
			t.Fatalf("%q → %q: fields %v, want %q", line, lp, p.fields, r.Field)
		}
		k, v := p.fields[0].key, p.fields[0].value
		if k != string(r.Field) || v.Kind() != lineprotocol.Float || v.FloatV() != gl.Value && !(math.IsNaN(v.FloatV()) && math.IsNaN(gl.Value)) {
			t.Fatalf("%q → %q: field %q=%v, want %q=%v", line, lp, k, v, r.Field, gl.Value)
		}
		want := gl.Time
		if gl.Now {
			want = fixedNow.UnixNano()
		}
		if p.time != want {
			t.Fatalf("%q → %q: time %d, want %d", line, lp, p.time, gl.Time)
		}
	})
}
