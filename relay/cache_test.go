package relay

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/delta"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/spark"
)

const sec = int64(1e9)

func id(path string) delta.ID { return delta.SeedOf(1, 0).Hash([]byte(path)) }

// A table finds every series it holds and no other, when their probe
// sequences run through full buckets, wrap around the table's end, and
// share a tag; it grows past 7/8 full.
func TestTableProbes(t *testing.T) {
	tb := newTable(4)
	last := uint64(len(tb.buckets) - 1)
	var held []delta.ID
	for i := range 20 { // all in the last bucket: 7 in it, 13 beyond the end
		h := delta.ID{last | uint64(i)<<8, uint64(i%3+1) << 56} // three tags
		if tb.full() {
			t.Fatalf("full at %d series of %d slots", tb.n, len(tb.buckets)*slotsPerBucket)
		}
		tb.store(&series{key: h})
		held = append(held, h)
	}
	for _, h := range held {
		if s := tb.find(h); s == nil || s.key != h {
			t.Errorf("%x: found %v", h, s)
		}
		absent := delta.ID{h[0], h[1] + 1} // same bucket, same tag
		if s := tb.find(absent); s != nil {
			t.Errorf("%x: found %x", absent, s.key)
		}
	}
	n := 0
	for range tb.all {
		n++
	}
	if n != len(held) || tb.n != n {
		t.Errorf("all yields %d series, n = %d, want %d", n, tb.n, len(held))
	}
	for i := len(held); !tb.full(); i++ {
		tb.store(&series{key: delta.ID{uint64(i), 0}}) // tag 0 is stored as 1
	}
	if want := len(tb.buckets) * slotsPerBucket * 7 / 8; tb.n != want {
		t.Errorf("full at %d series, want %d", tb.n, want)
	}
	if s := tb.find(delta.ID{uint64(len(held)), 0}); s == nil {
		t.Error("a series whose hash has a zero tag byte is not found")
	}
}

// Lookups find what was put, also paths whose hashes share a first half
// and tables that grew; an entry found only in the old generation moves to
// the current one; the old one is dropped when the current one fills up or
// at an insert after cacheTTL.
func TestSeriesCache(t *testing.T) {
	got := func(c *seriesCache, h delta.ID, now int64) string {
		s := c.get(h, now)
		if s == nil {
			return "(none)"
		}
		return s.text
	}
	c := newSeriesCache(2*cacheShards*4, nil, 0) // 4 entries per shard generation
	ha, hb := id("a"), id("b")
	c.put(ha, &series{text: "a"}, 0)
	if got(c, ha, 0) != "a" || got(c, hb, 0) != "(none)" {
		t.Fatal("lookup")
	}
	other := delta.ID{ha[0], ha[1] + 1}
	c.put(other, &series{text: "other"}, 0)
	if got(c, other, 0) != "other" || got(c, ha, 0) != "a" {
		t.Fatal("paths sharing the first hash half are confused")
	}

	// another returns the hash of a new path in a's shard.
	n := 0
	another := func() delta.ID {
		for {
			n++
			if h := id(fmt.Sprint("other", n)); c.shard(h) == c.shard(ha) {
				return h
			}
		}
	}
	// Fill a's shard: a moves to the old generation and is copied back
	// when used.
	sh := c.shard(ha)
	for sh.old.Load() == nil {
		c.put(another(), &series{}, 1)
	}
	if sh.old.Load().find(ha) == nil || got(c, ha, 2) != "a" {
		t.Fatal("a is not in the old generation")
	}
	if sh.cur.Load().find(ha) == nil {
		t.Fatal("a was not copied to the current generation")
	}

	// An insert a TTL later retires the generation; one more drops a if
	// it was not used in between.
	c2 := newSeriesCache(1<<20, nil, 0)
	c2.put(ha, &series{text: "a"}, 10*sec)
	c2.put(another(), &series{}, 10*sec+cacheTTL)
	if got(c2, ha, 10*sec+cacheTTL) != "a" {
		t.Fatal("a was dropped after one TTL")
	}
	c3 := newSeriesCache(1<<20, nil, 0)
	c3.put(ha, &series{text: "a"}, 10*sec)
	c3.put(another(), &series{}, 10*sec+cacheTTL)
	c3.put(another(), &series{}, 10*sec+2*cacheTTL)
	if got(c3, ha, 10*sec+2*cacheTTL) != "(none)" {
		t.Fatal("a, unused for two TTLs, is still there")
	}

	// Tables grow: 100 000 series, all found, none twice.
	c4 := newSeriesCache(1<<20, nil, 0)
	for i := range 100_000 {
		c4.put(id(fmt.Sprint(i)), &series{text: fmt.Sprint(i)}, 0)
	}
	for i := range 100_000 {
		if g := got(c4, id(fmt.Sprint(i)), 0); g != fmt.Sprint(i) {
			t.Fatalf("series %d: %q", i, g)
		}
	}
	if c4.len() != 100_000 {
		t.Errorf("len %d", c4.len())
	}
}

// Readers on other goroutines find every series while tables grow and
// generations turn over (run with -race).
func TestSeriesCacheConcurrent(t *testing.T) {
	c := newSeriesCache(cacheShards*2*500, nil, 0)
	const n = 20_000
	ids := make([]delta.ID, n)
	for i := range ids {
		ids[i] = id(fmt.Sprint("p", i))
	}
	done := make(chan struct{})
	var readers sync.WaitGroup
	for r := range 2 {
		readers.Go(func() {
			for i := r; ; i = (i + 7) % n {
				select {
				case <-done:
					return
				default:
				}
				if s := c.get(ids[i], 0); s != nil && s.key != ids[i] {
					t.Errorf("lookup of %d found %v", i, s.key)
					return
				}
			}
		})
	}
	for i, h := range ids {
		c.put(h, &series{}, int64(i)*cacheTTL/n*3)
	}
	close(done)
	readers.Wait()
}

// A cached series gives the same points, refusals, deltas and application
// callbacks as its first line did.
func TestCachedSeriesSameAsFirst(t *testing.T) {
	var apps []string
	s := &sink{}
	c := New(Config{Mapper: spark.NewMapper(spark.Options{}), Sink: s, Deltas: newDeltas(t, "db"),
		OnApp: func(a string) { apps = append(apps, a) }, AppTag: "applicationid"}).NewConn(nil)
	lines := []string{
		"app-20261122101500-0001.3.executor.cpuTime.count 100 1795300000",
		"app-20261122101500-0001.3.jvm.heap.used 5e8 1795300000",
		"app-20261122101500-0002.driver.BlockManager.memory.memUsed_MB 7 1795300000",
		"app-20261122101500-0001.3.executor.cpuTime.count 250 1795300010",
		"bad\xff.utf8 1 1795300000", // refused by the encoder
	}
	round := func() (string, uint64) {
		s.buf.Reset()
		for _, l := range lines {
			c.Line([]byte(l))
		}
		c.Flush()
		return s.buf.String(), c.(*Conn).relay.Stats().Dropped[ReasonEncode].Load()
	}
	first, dropped1 := round()
	second, dropped2 := round()
	// The second round repeats the first at the same times: its cpuTime
	// samples are not newer than the baseline, so they get no delta.
	want := strings.NewReplacer(",delta=100", "", ",delta=150,rate=15", "").Replace(first)
	if second != want || !strings.Contains(first, ",delta=150,rate=15 ") {
		t.Errorf("first round:\n%s\nsecond round:\n%s", first, second)
	}
	if dropped1 != 1 || dropped2 != 2 {
		t.Errorf("encode drops after each round: %d, %d", dropped1, dropped2)
	}
	// One call per change of application on the connection: 0001, 0002,
	// 0001 in the first round; 0002, 0001 in the second.
	if len(apps) != 5 {
		t.Errorf("OnApp calls %q", apps)
	}
}

// bytesPerCachedSeries is the heap held per series by a cache of n Spark
// executor series (a counter) with their descriptions and, with deltas,
// their baselines.
func bytesPerCachedSeries(tb testing.TB, n int, deltas bool, shape schema.Shape) float64 {
	cfg := Config{Mapper: spark.NewMapper(spark.Options{Schema: shape}), Sink: &nullSink{}, CacheSize: 4 * n}
	if deltas {
		cfg.Deltas = newDeltas(tb, "spark")
		cfg.Deltas.MatchField = shape == schema.Wide
	}
	r := New(cfg)
	c := r.NewConn(nil).(*Conn)
	var line []byte
	measure := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := measure()
	for i := range n {
		line = fmt.Appendf(line[:0], "app-20261122101500-%04d.%d.executor.shuffleRemoteBytesRead.count 1 1795300000", i/20000, i%20000)
		c.Line(line)
		if i%1000 == 999 {
			c.Flush()
		}
	}
	c.Flush()
	after := measure()
	if got := r.cache.len(); got != n {
		tb.Fatalf("%d series cached, want %d", got, n)
	}
	runtime.KeepAlive(r)
	return float64(after-before) / float64(n)
}

func BenchmarkMemoryPerCachedSeries(b *testing.B) {
	for _, shape := range []schema.Shape{schema.CERN, schema.Wide} {
		for _, deltas := range []bool{false, true} {
			b.Run(fmt.Sprint(shape, "/deltas=", deltas), func(b *testing.B) {
				for b.Loop() {
					b.ReportMetric(bytesPerCachedSeries(b, 500_000, deltas, shape), "B/series")
				}
			})
		}
	}
}

// A cumulative series, its baseline included, costs at most 200 bytes
// (BenchmarkMemoryPerCachedSeries measures it at 500 000).
func TestMemoryPerCumulativeSeries(t *testing.T) {
	if testing.Short() {
		t.Skip("200 000 series")
	}
	for _, shape := range []schema.Shape{schema.CERN, schema.Wide} {
		b := bytesPerCachedSeries(t, 200_000, true, shape)
		t.Logf("%s: %.1f bytes per cumulative series", shape, b)
		if b > 200 {
			t.Errorf("%s: %.1f bytes per cumulative series, want ≤ 200", shape, b)
		}
	}
}

// BenchmarkCacheGet looks series up in a cache as large as a busy
// receiver's (650 000 series, far beyond the CPU caches), in an order that
// defeats prefetching: what a lookup costs when it has to go to memory.
// "miss" looks up paths the cache does not hold.
func BenchmarkCacheGet(b *testing.B) {
	const n = 650_000
	c := newSeriesCache(4*n, nil, 0)
	ids := make([]delta.ID, n)
	for i := range ids {
		ids[i] = id(fmt.Sprint("app-20261122101500-0001.", i, ".executor.cpuTime.count"))
		c.put(ids[i], &series{text: "x"}, 0)
	}
	order := rand.New(rand.NewPCG(1, 2)).Perm(n)
	for _, tc := range []struct {
		name string
		hit  bool
	}{{"hit", true}, {"miss", false}} {
		b.Run(tc.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				h := ids[order[i%n]]
				if !tc.hit {
					h[1] = ^h[1] // another path in the same bucket
				}
				if s := c.get(h, 0); (s != nil) != tc.hit {
					b.Fatalf("lookup %d: found %v", i, s)
				}
				i++
			}
		})
	}
}

// clockedRelay is a relay with cumulative "**.count" series and a clock
// the test moves.
func clockedRelay(t *testing.T, idleTTL time.Duration, cacheSize int) (*Relay, *sink, *time.Time) {
	t.Helper()
	now := time.Unix(1795300000, 0)
	rules, err := delta.CompileRules([]delta.Rule{{Source: "test", Cumulative: true, Path: []string{"**.count"}}})
	if err != nil {
		t.Fatal(err)
	}
	tr := delta.New(delta.Settings{FirstSampleGrace: delta.NoGrace, IdleTTL: idleTTL}, now)
	s := &sink{}
	r := New(Config{Mapper: mustCompile(t, "measurement*"), Sink: s, CacheSize: cacheSize,
		Deltas: &Deltas{Rules: rules, Tracker: tr, Bucket: "db"}, Now: func() time.Time { return now }})
	return r, s, &now
}

// sameShard returns n paths whose series go to path's cache shard.
func sameShard(c *seriesCache, path string, n int) []string {
	var same []string
	for i := 0; len(same) < n; i++ {
		if p := fmt.Sprintf("x%d.count", i); c.shard(c.id([]byte(p))) == c.shard(c.id([]byte(path))) {
			same = append(same, p)
		}
	}
	return same
}

// send passes lines through a new connection at the relay's clock.
func send(r *Relay, lines ...string) {
	c := r.NewConn(nil)
	for _, l := range lines {
		c.Line([]byte(l))
	}
	c.Close()
}

// A cumulative series keeps its baseline while it is idle for less than
// IdleTTL, however many cache generations go by; idle for longer, it is
// forgotten (rule 7) and new when it returns.
func TestIdleBaselines(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ttl     time.Duration
		want    string
		evicted uint64
	}{
		{"kept within IdleTTL", 15 * time.Minute, "a.count value=15,delta=5", 0},
		// a, and the first two new series, each idle 122 s when their
		// generation goes.
		{"forgotten after IdleTTL", 2 * time.Minute, "a.count value=15,delta=15", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, s, now := clockedRelay(t, tc.ttl, 0)
			tr := r.cfg.Deltas.Tracker
			send(r, "a.count 10 1795300000")
			// New series of a's shard every 61 s retire a generation each
			// time: a is in none of them after the second.
			for _, p := range sameShard(r.cache, "a.count", 4) {
				*now = now.Add(61 * time.Second)
				send(r, fmt.Sprintf("%s 1 %d", p, now.Unix()))
			}
			s.buf.Reset()
			send(r, fmt.Sprintf("a.count 15 %d", now.Unix()))
			if got, _, _ := strings.Cut(s.buf.String(), ",rate="); !strings.HasPrefix(got, tc.want) {
				t.Errorf("a after %s idle: %q, want %q", 4*61*time.Second, s.buf.String(), tc.want)
			}
			if got := tr.Stats().Evicted.Load(); got != tc.evicted {
				t.Errorf("evicted %d, want %d", got, tc.evicted)
			}
		})
	}
}

// A generation retired for being full, while one of its cumulative series
// is idle but within IdleTTL, cannot keep every baseline: the tracker is
// told, and a series first seen then gets no delta, since it may be one
// that lost its baseline.
func TestFullGenerationLosesBaselines(t *testing.T) {
	r, s, now := clockedRelay(t, 15*time.Minute, 2*cacheShards*2) // 2 series per shard generation
	send(r, "a.count 10 1795300000")
	for _, p := range sameShard(r.cache, "a.count", 8) {
		*now = now.Add(time.Second)
		send(r, fmt.Sprintf("%s 1 %d", p, now.Unix()))
	}
	s.buf.Reset()
	send(r, fmt.Sprintf("fresh.count 7 %d", now.Unix()))
	if got := s.buf.String(); strings.Contains(got, "delta") {
		t.Errorf("a series first seen after baselines were lost: %q, want no delta", got)
	}
}

// A flood of new cumulative series under one application fills its quota,
// not the table: another application's new executor gets its deltas.
func TestDeltaQuotaPerApplication(t *testing.T) {
	tr := delta.New(delta.Settings{FirstSampleGrace: delta.NoGrace, MaxSeries: 1000, MaxSeriesPerApp: 600}, fixedNow)
	s := &sink{}
	r := New(Config{Mapper: spark.NewMapper(spark.Options{}), Sink: s, Now: func() time.Time { return fixedNow },
		Deltas: newDeltasWith(t, tr)})
	var flood []string
	for i := range 2000 {
		flood = append(flood, fmt.Sprintf("application_1700000000000_0001.%d.executor.cpuTime.count 1 1795300000", i))
	}
	send(r, flood...)
	send(r, "application_1700000000000_0002.7.executor.cpuTime.count 100 1795300000",
		"application_1700000000000_0002.7.executor.cpuTime.count 160 1795300010")
	if got := s.buf.String(); !strings.Contains(got, "process=7 value=160,delta=60,rate=6 ") {
		t.Errorf("the genuine executor's counter got no delta:\n%s", got[strings.LastIndex(got[:len(got)-1], "\n")+1:])
	}
	if st := tr.Stats(); st.RefusedQuota.Load() != 1400 || tr.Len() != 601 {
		t.Errorf("%d refused by the quota, %d tracked; want 1400 and 601", st.RefusedQuota.Load(), tr.Len())
	}
}

func newDeltasWith(t *testing.T, tr *delta.Tracker) *Deltas {
	d := newDeltas(t, "spark")
	d.Tracker = tr
	return d
}

// A series keeps its application, the value of Config.AppTag, with or
// without OnApp: read from the key when escaping left it as it was, kept
// beside it otherwise; the tracker's quota and OnApp get the raw value.
func TestSeriesApp(t *testing.T) {
	for _, tc := range []struct {
		tag, path, app string
		copied         bool
	}{
		{"", "app-1.ns.cpu.count", "app-1", false},
		{"", "app-2.ns.cpu", "app-2", false},
		{"ns", "app-3.executor.cpu.count", "executor", false}, // the last tag: runs to the key's end
		{"", `a\,b=c.ns.cpu.count`, `a\,b=c`, true},
		{"", "a=b.ns.cpu.count", "a=b", true},
		{"other", "app-4.ns.cpu.count", "", false},
	} {
		for _, onApp := range []bool{false, true} {
			var nominated []string
			cfg := Config{Mapper: mustCompile(t, "applicationid.ns.measurement*"), Sink: &sink{}, AppTag: tc.tag,
				Deltas: newDeltas(t, "db", delta.Rule{Source: "test", Cumulative: true, Path: []string{"**.count"}})}
			if onApp {
				cfg.OnApp = func(a string) { nominated = append(nominated, a) }
			}
			r := New(cfg)
			send(r, tc.path+" 1 1795300000")
			s := r.cache.get(r.cache.id([]byte(tc.path)), 0)
			if s == nil || s.reason != 0 {
				t.Fatalf("%s: not cached: %+v", tc.path, s)
			}
			if got := s.app(); got != tc.app || (s.appAt == 0) != (tc.copied || tc.app == "") {
				t.Errorf("%s, tag %q: app %q (at %d), want %q (copied %v)", tc.path, tc.tag, got, s.appAt, tc.app, tc.copied)
			}
			if onApp && tc.app != "" && (len(nominated) != 1 || nominated[0] != tc.app) {
				t.Errorf("%s: OnApp got %q, want %q", tc.path, nominated, tc.app)
			}
		}
	}
}

// An application's series forgotten when idle free its quota: the
// tracker is told which application each belonged to.
func TestIdleSeriesFreeQuota(t *testing.T) {
	now := fixedNow
	tr := delta.New(delta.Settings{FirstSampleGrace: delta.NoGrace, IdleTTL: time.Minute, MaxSeriesPerApp: 1}, now)
	s := &sink{}
	r := New(Config{Mapper: mustCompile(t, "applicationid.measurement*"), Sink: s, Now: func() time.Time { return now },
		Deltas: newDeltasWith(t, tr)})
	r.cfg.Deltas.Rules = mustRules(t, "**.count")
	send(r, "app-1.a.count 1 1795300000")
	same := sameShard(r.cache, "app-1.a.count", 3)
	for _, p := range same { // each retires a generation of the shard
		now = now.Add(61 * time.Second)
		send(r, fmt.Sprintf("%s 1 %d", p, now.Unix()))
	}
	if tr.Stats().Evicted.Load() == 0 {
		t.Fatal("nothing forgotten")
	}
	s.buf.Reset()
	send(r, fmt.Sprintf("app-1.b.count 7 %d", now.Unix()))
	if got := s.buf.String(); !strings.Contains(got, "delta=7") {
		t.Errorf("a new series of the application after its old one was forgotten: %q (refused by quota %d)", got, tr.Stats().RefusedQuota.Load())
	}
}

func mustRules(t *testing.T, path string) *delta.Rules {
	t.Helper()
	r, err := delta.CompileRules([]delta.Rule{{Source: "test", Cumulative: true, Path: []string{path}}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}
