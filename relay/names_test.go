package relay

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/spark"
	"github.com/sparkpulse/sparkpulse/templates"
)

// Names are bounded (names.go): a flood of names no Spark sends stops at
// its application's quota, Spark's own names and another application's
// pass during it, names with control or format characters are refused,
// and the block's table stops at its size (both made small here).
func TestNamesBounded(t *testing.T) {
	s := &sink{}
	r := New(Config{Mapper: spark.NewMapper(spark.Options{Schema: schema.Wide}), Sink: s, Now: func() time.Time { return fixedNow }})
	const maxNames, maxNamesPerApp = 256, 32
	r.names = newNameGuard(maxNames, maxNamesPerApp)
	c := r.NewConn(nil)
	const flood, genuine = "app-20261122101500-0001", "app-20261122101500-0002"
	line := func(app, metric string) { c.Line(fmt.Appendf(nil, "%s.1.executor.%s 1 1795300000", app, metric)) }
	for i := range 3 * maxNamesPerApp {
		line(flood, fmt.Sprintf("f%d.count", i))
	}
	line(flood, "cpuTime.count") // Spark's own: never refused
	line(genuine, "cpuTime.count")
	line(genuine, "myPluginCounter.count") // a name of its own
	for _, bad := range []string{"cpu\u202eTime.count", "zero\u200bwidth.count", "\ufeffbom.count", strings.Repeat("n", maxNameLen+1)} {
		line(genuine, bad)
	}
	c.Flush()
	st := r.Stats()
	if got, want := st.Dropped[ReasonNames].Load(), uint64(2*maxNamesPerApp+4); got != want {
		t.Errorf("dropped for names: %d, want %d", got, want)
	}
	out := s.buf.String()
	for want, n := range map[string]int{"cpuTime.count=1": 2, "myPluginCounter.count=1": 1} {
		if got := strings.Count(out, want); got != n {
			t.Errorf("%s written %d times, want %d", want, got, n)
		}
	}
	if strings.Contains(out, "\u202e") || strings.Contains(out, "\ufeff") {
		t.Error("a name with a format character was written")
	}

	// The block's table: past maxNames, no application adds a name.
	for a := range maxNames/maxNamesPerApp + 1 {
		for i := range maxNamesPerApp {
			line(fmt.Sprintf("app-20261122101500-%04d", 100+a), fmt.Sprintf("g%d-%d.count", a, i))
		}
	}
	line(genuine, "anotherName.count")
	line(genuine, "runTime.count")
	c.Flush()
	if strings.Contains(s.buf.String(), "anotherName.count") || !strings.Contains(s.buf.String(), "runTime.count") || len(r.names.names) != maxNames {
		t.Errorf("past maxNames: a new name was written, or Spark's own was refused; %d names held", len(r.names.names))
	}
}

// With the user's templates, paths of no application are bounded by the
// block's table alone; those of an application by its quota too.
func TestNamesTemplates(t *testing.T) {
	s := &sink{}
	r := New(Config{Mapper: mustCompile(t, "app.* .applicationid.measurement*", "measurement*"), Sink: s, Now: func() time.Time { return fixedNow }})
	r.names = newNameGuard(64, 8)
	c := r.NewConn(nil)
	for i := range 40 {
		c.Line(fmt.Appendf(nil, "service.metric%d 1 1795300000", i))
		c.Line(fmt.Appendf(nil, "app.a1.metric%d 1 1795300000", i))
	}
	c.Flush()
	if got := r.Stats().Dropped[ReasonNames].Load(); got != 32 {
		t.Errorf("%d dropped for names, want 32 (the application's past its quota of 8)", got)
	}
}

// A full table is swept for old names at most once a minute, not at each
// new name: a flood past it costs a map lookup per path.
func TestNamesFullTableCost(t *testing.T) {
	now := fixedNow
	g := newNameGuard(1024, 1024)
	var r templates.Result
	for i := range 1024 {
		r.Measurement, r.Field = []byte("m"), fmt.Appendf(nil, "f%d", i)
		if why := g.check(&r, []byte(fmt.Sprint(i)), nil, now); why != "" {
			t.Fatal(why)
		}
	}
	swept := 0
	for i := range 10_000 {
		r.Field = fmt.Appendf(nil, "g%d", i)
		g.check(&r, []byte("x"), nil, now.Add(time.Duration(i)*time.Millisecond))
		if g.forgot.Equal(now.Add(time.Duration(i) * time.Millisecond)) {
			swept++
		}
	}
	if swept != 1 {
		t.Errorf("the full table was swept %d times in 10 s of new names, want once", swept)
	}
}
