package delta

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

// at returns t0 + s seconds in unix ns.
func at(s float64) int64 { return t0.UnixNano() + int64(s*1e9) }

// id is a test key's ID. Saved state takes IDs as they come: the tests
// make them all with one seed.
func id(key string) ID { return SeedOf(1, 0).Hash([]byte(key)) }

// book keeps the series' states, as the caller of a Tracker does.
type book map[string]*State

func (b book) update(tr *Tracker, key string, v float64, ts, now int64) Sample {
	st := b[key]
	if st == nil {
		st = new(State)
		*st = Unknown()
		b[key] = st
	}
	return tr.Update(st, appOf(key), v, ts, now)
}

// appOf is a test key's application: what comes before its '/', if any.
func appOf(key string) string {
	app, _, ok := strings.Cut(key, "/")
	if !ok {
		return ""
	}
	return app
}

// forget drops the given series, as a caller drops idle ones.
func (b book) forget(tr *Tracker, keys ...string) {
	for _, k := range keys {
		if st := b[k]; st != nil && st.Known() {
			tr.Forget(appOf(k))
		}
		delete(b, k)
	}
}

// states yields the book's states by the IDs tr gives their keys.
func (b book) states(tr *Tracker) func(yield func(ID, State) bool) {
	return func(yield func(ID, State) bool) {
		for k, st := range b {
			if !yield(tr.ID([]byte(k)), *st) {
				return
			}
		}
	}
}

type step struct {
	key     string
	v       float64
	ts, now float64 // seconds after t0
	want    Sample
}

type counts struct {
	resets, firstNew, firstUnknown, outOfOrder, evicted, refused, refusedQuota uint64
	future, notCounter, rebased                                                uint64
}

func statsOf(t *Tracker) counts {
	s := t.Stats()
	return counts{s.Resets.Load(), s.FirstNew.Load(), s.FirstUnknown.Load(), s.OutOfOrder.Load(), s.Evicted.Load(), s.Refused.Load(), s.RefusedQuota.Load(),
		s.Future.Load(), s.NotCounter.Load(), s.Rebased.Load()}
}

func delta(d, rate float64) Sample {
	return Sample{Outcome: Delta, Delta: d, Rate: rate, HasRate: true}
}

func reset(d, rate float64) Sample {
	s := delta(d, rate)
	s.Reset = true
	return s
}

var (
	firstNew = func(v float64) Sample { return Sample{Outcome: FirstNew, Delta: v} }
	unknown  = Sample{Outcome: FirstUnknown}
	ooo      = Sample{Outcome: OutOfOrder}
	refused  = Sample{Outcome: Refused}
	future   = Sample{Outcome: Future}
	notCount = Sample{Outcome: NotCounter}
)

// TestRules walks through the counter rules one by one.
func TestRules(t *testing.T) {
	noGrace := Settings{FirstSampleGrace: NoGrace}
	for _, tc := range []struct {
		name  string
		set   Settings
		steps []step
		stats counts
	}{
		{"1 series are told apart by ID", noGrace, []step{
			{"a", 10, 0, 0, firstNew(10)},
			{"b", 5, 0, 0, firstNew(5)},
			{"a", 12, 10, 10, delta(2, 0.2)},
			{"b", 9, 10, 10, delta(4, 0.4)},
		}, counts{firstNew: 2}},
		{"2 normal: delta and rate per second", noGrace, []step{
			{"a", 10, 0, 0, firstNew(10)},
			{"a", 25, 10, 10.5, delta(15, 1.5)},
			{"a", 25, 20, 20, delta(0, 0)}, // unchanged: zero, not nothing
			{"a", 26, 20.5, 21, delta(1, 2)},
		}, counts{firstNew: 1}},
		{"3 reset: value below previous counts from zero", noGrace, []step{
			{"a", 100, 0, 0, firstNew(100)},
			{"a", 30, 10, 10, reset(30, 3)},
			{"a", 35, 20, 20, delta(5, 0.5)},
			{"a", 0, 30, 30, reset(0, 0)},
		}, counts{resets: 2, firstNew: 1}},
		{"4 first sample after the grace is new", Settings{FirstSampleGrace: 20 * time.Second}, []step{
			{"a", 7, 20.5, 20.000000001, firstNew(7)},
			{"a", 9, 30.5, 30.5, delta(2, 0.2)},
		}, counts{firstNew: 1}},
		{"4 default grace is 20s", Settings{}, []step{
			{"a", 7, 20, 20, unknown},
			{"b", 7, 20, 20.001, firstNew(7)},
		}, counts{firstNew: 1, firstUnknown: 1}},
		{"4 NoGrace: new from the start", noGrace, []step{
			{"a", 7, 0, 0, firstNew(7)},
		}, counts{firstNew: 1}},
		{"5 first sample within the grace is a baseline", Settings{FirstSampleGrace: 20 * time.Second}, []step{
			{"a", 1000, 0, 0, unknown},
			{"b", 50, 19, 20, unknown}, // the grace's last instant
			{"a", 1010, 10, 10, delta(10, 1)},
			{"b", 40, 29, 30, reset(40, 4)},
		}, counts{resets: 1, firstUnknown: 2}},
		{"5 sample time does not matter, receive time does", Settings{}, []step{
			{"a", 5, -3600, 5, unknown},
			{"b", 5, 100, 25, firstNew(5)},
		}, counts{firstNew: 1, firstUnknown: 1}},
		{"6 duplicate: no delta, baseline kept", noGrace, []step{
			{"a", 10, 0, 0, firstNew(10)},
			{"a", 20, 10, 10, delta(10, 1)},
			{"a", 21, 10, 10.1, ooo}, // shutdown's second report in the same second
			{"a", 30, 20, 20, delta(10, 1)},
		}, counts{firstNew: 1, outOfOrder: 1}},
		{"6 out of order: no delta, no reset", noGrace, []step{
			{"a", 10, 0, 0, firstNew(10)},
			{"a", 30, 20, 20, delta(20, 1)},
			{"a", 20, 10, 21, ooo}, // lower value, but older: not a reset
			{"a", 0, -10, 22, ooo},
			{"a", 40, 30, 30, delta(10, 1)},
		}, counts{firstNew: 1, outOfOrder: 2}},
		{"6 out of order after a baseline-only first sample", Settings{}, []step{
			{"a", 10, 0, 0, unknown},
			{"a", 5, 0, 1, ooo},
			{"a", 15, 10, 10, delta(5, 0.5)},
		}, counts{firstUnknown: 1, outOfOrder: 1}},
		{"8 MaxSeries: new series refused, existing kept", Settings{FirstSampleGrace: NoGrace, MaxSeries: 2}, []step{
			{"a", 1, 0, 0, firstNew(1)},
			{"b", 1, 0, 0, firstNew(1)},
			{"c", 1, 0, 0, refused},
			{"c", 2, 10, 10, refused},
			{"a", 3, 10, 10, delta(2, 0.2)},
			{"b", 3, 10, 10, delta(2, 0.2)},
		}, counts{firstNew: 2, refused: 2}},
		{"9 dated too far ahead: no delta, baseline kept", noGrace, []step{
			{"a", 10, 0, 0, firstNew(10)},
			{"a", 0, 60 * 86400 * 365, 10, future}, // a forged line dated a year ahead
			{"a", 20, 10, 10, delta(10, 1)},        // not held out of order
			{"a", 30, 140, 19.999, future},         // just past the default 2 min
			{"a", 30, 140, 20, delta(10, 1.0/13)},
		}, counts{firstNew: 1, future: 2}},
		{"9 a first sample dated too far ahead is no baseline", noGrace, []step{
			{"a", 10, 500, 0, future},
			{"a", 12, 10, 10, firstNew(12)},
		}, counts{firstNew: 1, future: 1}},
		{"9 MaxFuture is a setting", Settings{FirstSampleGrace: NoGrace, MaxFuture: time.Hour}, []step{
			{"a", 10, 3000, 0, firstNew(10)},
			{"a", 12, 3700, 10, future},
		}, counts{firstNew: 1, future: 1}},
		{"9 a baseline dated too far ahead is replaced", noGrace, []step{
			{"a", 10, 100, 0, firstNew(10)},
			{"a", 12, -150, -150, unknown}, // the clock stepped back 250 s
			{"a", 15, -140, -140, delta(3, 0.3)},
		}, counts{firstNew: 1, firstUnknown: 0, rebased: 1}},
		{"10 values no counter can have: no delta, baseline kept", noGrace, []step{
			{"a", 10, 0, 0, firstNew(10)},
			{"a", -1, 10, 10, notCount},
			{"a", 9.3e18, 20, 20, notCount}, // beyond a Java long
			{"a", 1e300, 30, 30, notCount},
			{"a", 9.2e18, 40, 40, delta(9.2e18-10, 9.2e18/40)}, // a long: rule 10 passes it
			{"x", -5, 0, 0, notCount},
			{"x", 5, 10, 10, firstNew(5)},
		}, counts{firstNew: 2, notCounter: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, b := New(tc.set, t0), book{}
			for i, s := range tc.steps {
				got := b.update(tr, s.key, s.v, at(s.ts), at(s.now))
				if !sameSample(got, s.want) {
					t.Errorf("step %d: Update(%q, %v, ts=%vs, now=%vs) = %+v, want %+v", i, s.key, s.v, s.ts, s.now, got, s.want)
				}
				if got.HasDelta() != (s.want.Outcome == Delta || s.want.Outcome == FirstNew) {
					t.Errorf("step %d: HasDelta() = %v for %v", i, got.HasDelta(), got.Outcome)
				}
			}
			if got := statsOf(tr); got != tc.stats {
				t.Errorf("stats %+v, want %+v", got, tc.stats)
			}
		})
	}
}

func sameSample(a, b Sample) bool {
	near := func(x, y float64) bool { return x == y || math.Abs(x-y) < 1e-9*math.Abs(y) }
	return a.Outcome == b.Outcome && a.HasRate == b.HasRate && a.Reset == b.Reset && near(a.Delta, b.Delta) && near(a.Rate, b.Rate)
}

// TestForget covers rule 7: the caller drops idle series; one that comes
// back is new again.
func TestForget(t *testing.T) {
	tr, b := New(Settings{FirstSampleGrace: NoGrace, IdleTTL: time.Minute}, t0), book{}
	b.update(tr, "a", 1, at(0), at(0))
	b.update(tr, "b", 1, at(0), at(0))
	if tr.Len() != 2 || tr.IdleTTL() != time.Minute {
		t.Fatalf("Len %d, IdleTTL %v", tr.Len(), tr.IdleTTL())
	}
	b.forget(tr, "a")
	if tr.Len() != 1 || tr.Stats().Evicted.Load() != 1 {
		t.Fatalf("after Forget: Len %d, evicted %d", tr.Len(), tr.Stats().Evicted.Load())
	}
	if got := b.update(tr, "a", 7, at(200), at(200)); !sameSample(got, firstNew(7)) {
		t.Errorf("forgotten series back: %+v", got)
	}
	if New(Settings{}, t0).IdleTTL() != 15*time.Minute {
		t.Error("default IdleTTL is not 15 minutes")
	}
}

// TestLost: after the caller had to drop live series' baselines, a first
// sample may come from one of them, so for IdleTTL it gives no delta.
func TestLost(t *testing.T) {
	tr, b := New(Settings{FirstSampleGrace: NoGrace, IdleTTL: time.Minute}, t0), book{}
	tr.Lost(at(10))
	if got := b.update(tr, "a", 5, at(70), at(70)); got.Outcome != FirstUnknown {
		t.Errorf("within IdleTTL of the loss: %+v", got)
	}
	if got := b.update(tr, "b", 5, at(71), at(71)); !sameSample(got, firstNew(5)) {
		t.Errorf("IdleTTL after the loss: %+v", got)
	}
}

// TestExpire: a caller letting a series go keeps it while it is live and
// there is room; an idle one is forgotten (rule 7), one there is no room
// for is lost (rule 8), one without a baseline just goes.
func TestExpire(t *testing.T) {
	tr, b := New(Settings{FirstSampleGrace: NoGrace, IdleTTL: time.Minute, MaxSeriesPerApp: 2}, t0), book{}
	b.update(tr, "app1/a", 1, at(0), at(0))
	b.update(tr, "app1/b", 1, at(0), at(0))
	if !tr.Expire(*b["app1/a"], "app1", time.Minute, true, at(60)) || tr.Len() != 2 {
		t.Fatalf("idle exactly IdleTTL, with room: not kept (Len %d)", tr.Len())
	}
	if tr.Expire(Unknown(), "app1", 0, true, at(60)) || tr.Len() != 2 {
		t.Fatalf("no baseline: kept, or counted (Len %d)", tr.Len())
	}
	if tr.Expire(*b["app1/a"], "app1", time.Minute+time.Second, true, at(61)) {
		t.Fatal("idle beyond IdleTTL: kept")
	}
	if tr.Len() != 1 || tr.Stats().Evicted.Load() != 1 {
		t.Fatalf("forgotten: Len %d, evicted %d", tr.Len(), tr.Stats().Evicted.Load())
	}
	// Its application's quota has room again.
	if got := b.update(tr, "app1/c", 3, at(62), at(62)); !sameSample(got, firstNew(3)) {
		t.Errorf("a new series of the application: %+v", got)
	}
	if tr.Expire(*b["app1/b"], "app1", time.Second, false, at(62)) {
		t.Fatal("no room: kept")
	}
	// A baseline lost for want of room no longer counts either: the
	// application's quota (2) has room for another series.
	if tr.Len() != 1 || tr.Stats().Evicted.Load() != 1 {
		t.Fatalf("lost: Len %d, evicted %d", tr.Len(), tr.Stats().Evicted.Load())
	}
	if got := b.update(tr, "app1/e", 3, at(62), at(62)); got.Outcome == Refused || got.Outcome == RefusedQuota {
		t.Errorf("a new series after a lost one, within the quota: %+v", got)
	}
	if got := b.update(tr, "d", 5, at(63), at(63)); got.Outcome != FirstUnknown {
		t.Errorf("first sample after a lost baseline: %+v", got)
	}
}

// TestRefusedThenAdmitted: a series refused at MaxSeries that gets room
// later has been counting all along, so its first tracked sample gives no
// delta; once no refusal happened for IdleTTL, first samples are new again.
func TestRefusedThenAdmitted(t *testing.T) {
	tr, b := New(Settings{FirstSampleGrace: NoGrace, MaxSeries: 1, IdleTTL: time.Minute}, t0), book{}
	steps := []struct {
		key     string
		v       float64
		ts      float64
		forget  string
		want    Sample
		wantLen int
	}{
		{"a", 5, 0, "", firstNew(5), 1},
		{"b", 100, 0, "", refused, 1},
		{"b", 110, 10, "", refused, 1},
		{"a", 6, 70, "", delta(1, 1.0/70), 1},
		{"b", 120, 75, "", refused, 1}, // last refusal
		{"", 0, 200, "a", Sample{}, 0}, // a idle since 70s: dropped
		{"b", 130, 100, "", unknown, 1},
		{"b", 140, 110, "", delta(10, 1), 1},
		{"", 0, 400, "b", Sample{}, 0},
		{"c", 9, 400, "", firstNew(9), 1}, // no refusal since 75s
	}
	for i, s := range steps {
		if s.forget != "" {
			b.forget(tr, s.forget)
		} else if got := b.update(tr, s.key, s.v, at(s.ts), at(s.ts)); !sameSample(got, s.want) {
			t.Errorf("step %d: %q = %+v, want %+v", i, s.key, got, s.want)
		}
		if tr.Len() != s.wantLen {
			t.Errorf("step %d: Len %d, want %d", i, tr.Len(), s.wantLen)
		}
	}
}

// TestAppQuota: an application's new series beyond MaxSeriesPerApp get
// no baseline; other applications' series, and series of no application,
// go on; a refused series admitted later gives no delta at first.
func TestAppQuota(t *testing.T) {
	tr, b := New(Settings{FirstSampleGrace: NoGrace, MaxSeriesPerApp: 2, IdleTTL: time.Minute}, t0), book{}
	for i, s := range []step{
		{"flood/a", 1, 0, 0, firstNew(1)},
		{"flood/b", 1, 0, 0, firstNew(1)},
		{"flood/c", 1, 0, 0, Sample{Outcome: RefusedQuota}},
		{"genuine/a", 5, 0, 0, firstNew(5)},
		{"noapp", 5, 0, 0, firstNew(5)},
		{"noapp2", 5, 0, 0, firstNew(5)},
		{"noapp3", 5, 0, 0, firstNew(5)},
		{"flood/c", 2, 10, 10, Sample{Outcome: RefusedQuota}},
	} {
		if got := b.update(tr, s.key, s.v, at(s.ts), at(s.now)); !sameSample(got, s.want) {
			t.Errorf("step %d: %q = %+v, want %+v", i, s.key, got, s.want)
		}
	}
	b.forget(tr, "flood/a")
	if got := b.update(tr, "flood/c", 3, at(20), at(20)); got.Outcome != FirstUnknown {
		t.Errorf("a refused series admitted later: %+v, want no delta", got)
	}
	if got := b.update(tr, "flood/c", 4, at(30), at(30)); !sameSample(got, delta(1, 0.1)) {
		t.Errorf("then: %+v", got)
	}
	if st := statsOf(tr); st.refusedQuota != 2 || st.refused != 0 || st.evicted != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestOutcomeString(t *testing.T) {
	want := map[Outcome]string{Delta: "delta", FirstNew: "first_new", FirstUnknown: "first_unknown", OutOfOrder: "out_of_order", Refused: "refused", RefusedQuota: "refused_app_quota", 200: "unknown"}
	for o, s := range want {
		if o.String() != s {
			t.Errorf("Outcome(%d).String() = %q, want %q", o, o.String(), s)
		}
	}
}

func TestSettingsDefaults(t *testing.T) {
	tr := New(Settings{}, t0)
	if tr.grace != int64(20*time.Second) || tr.idleTTL != int64(15*time.Minute) || tr.maxCount != 1_000_000 {
		t.Errorf("defaults: grace %v, idle %v, max %d", time.Duration(tr.grace), time.Duration(tr.idleTTL), tr.maxCount)
	}
}

// lockedState is a state with its lock, as a caller keeps one.
type lockedState struct {
	mu sync.Mutex
	st State
}

// TestConcurrent: goroutines update distinct series and shared ones, with
// Len and Save running meanwhile. With NoGrace and values that grow with
// time, each series' deltas add up to its last value whatever was dropped
// as out of order: the accepted samples' deltas telescope, and the latest
// sample is always accepted.
func TestConcurrent(t *testing.T) {
	const (
		workers = 8
		shared  = 16
		own     = 64
		rounds  = 200
	)
	// Workers' receive times are their rounds, minutes apart, not
	// clocks: rule 9's bound is set above them.
	tr := New(Settings{FirstSampleGrace: NoGrace, MaxFuture: time.Hour}, t0)
	states := map[string]*lockedState{}
	for s := range shared {
		states[fmt.Sprint("shared", s)] = &lockedState{st: Unknown()}
	}
	for w := range workers {
		for s := range own {
			states[fmt.Sprint("own", w, ".", s)] = &lockedState{st: Unknown()}
		}
	}
	update := func(key string, ts int64, v float64) Sample {
		ls := states[key]
		ls.mu.Lock()
		defer ls.mu.Unlock()
		return tr.Update(&ls.st, "", v, ts, ts)
	}
	value := func(ts int64) float64 { return float64(ts - at(0)) } // grows with ts; integers below 2^53, so sums are exact
	sums := make([]map[string]float64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		sums[w] = map[string]float64{}
		wg.Go(func() {
			for r := range rounds {
				ts := at(float64(r)) + int64(w) // unique per worker: ties only within a worker
				for s := range shared {
					k := fmt.Sprint("shared", s)
					if got := update(k, ts, value(ts)); got.HasDelta() {
						sums[w][k] += got.Delta
					}
				}
				for s := range own {
					k := fmt.Sprint("own", w, ".", s)
					if got := update(k, ts, value(ts)); got.HasDelta() {
						sums[w][k] += got.Delta
					}
				}
			}
		})
	}
	stop := make(chan struct{})
	var side sync.WaitGroup
	side.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = tr.Len()
			err := tr.Save(discard{}, at(0), func(yield func(ID, State) bool) {
				for k, ls := range states {
					ls.mu.Lock()
					st := ls.st
					ls.mu.Unlock()
					if !yield(tr.ID([]byte(k)), st) {
						return
					}
				}
			})
			if err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
	close(stop)
	side.Wait()

	total := map[string]float64{}
	for _, m := range sums {
		for k, d := range m {
			total[k] += d
		}
	}
	last := at(rounds - 1)
	for s := range shared {
		if want := value(last + workers - 1); total[fmt.Sprint("shared", s)] != want {
			t.Errorf("shared %d: deltas add up to %v, want %v", s, total[fmt.Sprint("shared", s)], want)
		}
	}
	for w := range workers {
		for s := range own {
			if want := value(last + int64(w)); total[fmt.Sprint("own", w, ".", s)] != want {
				t.Errorf("own %d.%d: deltas add up to %v, want %v", w, s, total[fmt.Sprint("own", w, ".", s)], want)
			}
		}
	}
	if want := shared + workers*own; tr.Len() != want {
		t.Errorf("Len %d, want %d", tr.Len(), want)
	}
	if st := statsOf(tr); st.firstNew != shared+workers*own || st.resets != 0 {
		t.Errorf("stats %+v", st)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// TestConcurrentMaxSeries: racing first samples never exceed MaxSeries. An
// admitted series may be FirstUnknown rather than FirstNew when a refusal
// raced ahead of it (rule 8), so admission is "not refused".
func TestConcurrentMaxSeries(t *testing.T) {
	tr := New(Settings{FirstSampleGrace: NoGrace, MaxSeries: 100}, t0)
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				st := Unknown()
				if tr.Update(&st, "", 1, at(0), at(0)).Outcome != Refused {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if tr.Len() != 100 || admitted.Load() != 100 || tr.Stats().Refused.Load() != 300 {
		t.Errorf("Len %d, admitted %d, refused %d; want 100, 100, 300", tr.Len(), admitted.Load(), tr.Stats().Refused.Load())
	}
}

// BenchmarkUpdate updates existing series: the steady state.
func BenchmarkUpdate(b *testing.B) {
	const n = 1 << 16
	tr := New(Settings{FirstSampleGrace: NoGrace}, t0)
	states := make([]State, n)
	for i := range states {
		states[i] = Unknown()
		tr.Update(&states[i], "", 0, at(0), at(0))
	}
	b.ReportAllocs()
	ts := at(1)
	k := 0
	for b.Loop() {
		if tr.Update(&states[k], "", float64(ts), ts, ts).Outcome != Delta {
			b.Fatal("not a delta")
		}
		if k++; k == n {
			k, ts = 0, ts+1
		}
	}
}
