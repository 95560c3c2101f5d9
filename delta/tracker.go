package delta

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults for zero [Settings] fields.
const (
	DefaultFirstSampleGrace = 20 * time.Second // 2 × Spark's default 10 s period
	DefaultIdleTTL          = 15 * time.Minute
	DefaultMaxSeries        = 1_000_000
	// DefaultMaxSeriesPerApp is a quarter of DefaultMaxSeries: an
	// application of 1 000 executors has about 60 000 cumulative series.
	DefaultMaxSeriesPerApp = 250_000
	// DefaultMaxFuture bounds how far ahead of the receive time a
	// sample's own time may be (rule 9). Clocks kept by NTP are well
	// within it; a forged line dated years ahead is not.
	DefaultMaxFuture = 2 * time.Minute
)

// MaxCounter is the first value no counter can reach: Dropwizard's
// counters and Spark's task metrics are Java longs.
const MaxCounter = 0x1p63

// NoGrace as Settings.FirstSampleGrace makes every first sample new (rule 4),
// for callers that know they see every series from its start.
const NoGrace time.Duration = -1

// Settings tune a [Tracker]; zero fields take the defaults.
type Settings struct {
	FirstSampleGrace time.Duration // 0 = default 20s; use NoGrace (negative) for "every first sample is new"
	IdleTTL          time.Duration // 0 = default 15m
	MaxSeries        int           // 0 = default 1_000_000
	MaxSeriesPerApp  int           // 0 = default 250_000; series of no application are not counted
	MaxFuture        time.Duration // 0 = default 2m
}

// WithDefaults fills zero values.
func (s Settings) WithDefaults() Settings {
	if s.FirstSampleGrace == 0 {
		s.FirstSampleGrace = DefaultFirstSampleGrace
	}
	if s.IdleTTL <= 0 {
		s.IdleTTL = DefaultIdleTTL
	}
	if s.MaxSeries <= 0 {
		s.MaxSeries = DefaultMaxSeries
	}
	if s.MaxSeriesPerApp <= 0 {
		s.MaxSeriesPerApp = DefaultMaxSeriesPerApp
	}
	if s.MaxFuture <= 0 {
		s.MaxFuture = DefaultMaxFuture
	}
	return s
}

// Validate rejects negative values other than NoGrace; zero values select
// the defaults.
func (s Settings) Validate() error {
	var errs []error
	if s.FirstSampleGrace < 0 && s.FirstSampleGrace != NoGrace {
		errs = append(errs, fmt.Errorf("first-sample-grace %s: must not be negative", s.FirstSampleGrace))
	}
	if s.IdleTTL < 0 {
		errs = append(errs, fmt.Errorf("idle-ttl %s: must not be negative", s.IdleTTL))
	}
	if s.MaxSeries < 0 {
		errs = append(errs, fmt.Errorf("max-series %d: must be positive", s.MaxSeries))
	}
	if s.MaxSeriesPerApp < 0 {
		errs = append(errs, fmt.Errorf("max-series-per-app %d: must be positive", s.MaxSeriesPerApp))
	}
	if s.MaxFuture < 0 {
		errs = append(errs, fmt.Errorf("max-future %s: must not be negative", s.MaxFuture))
	}
	return errors.Join(errs...)
}

// Outcome says what [Tracker.Update] made of a sample.
type Outcome uint8

const (
	Delta        Outcome = iota // rules 2 and 3
	FirstNew                    // rule 4: Delta is the value itself
	FirstUnknown                // rule 5: baseline only
	OutOfOrder                  // rule 6: ignored
	Refused                     // rule 8: not tracked, MaxSeries reached
	RefusedQuota                // rule 8: not tracked, its application's MaxSeriesPerApp reached
	Future                      // rule 9: dated too far ahead; ignored
	NotCounter                  // rule 10: a value no counter can have; ignored
)

var outcomeNames = [...]string{"delta", "first_new", "first_unknown", "out_of_order", "refused", "refused_app_quota", "future", "not_counter"}

// String returns the outcome's label, fit for a metric label.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// Sample is the result of one [Tracker.Update].
type Sample struct {
	Outcome Outcome
	Delta   float64 // valid for Delta and FirstNew
	Rate    float64 // valid when HasRate
	HasRate bool    // Delta outcome with dt > 0
	Reset   bool    // rule 3 applied
}

// HasDelta reports whether s.Delta is to be written.
func (s Sample) HasDelta() bool { return s.Outcome == Delta || s.Outcome == FirstNew }

// Stats count the samples that did not simply yield a delta, and removals.
type Stats struct {
	Resets, FirstNew, FirstUnknown, OutOfOrder, Evicted, Refused, RefusedQuota atomic.Uint64
	// Future and NotCounter count rules 9 and 10's refusals; Rebased
	// counts baselines dated too far ahead that a sample replaced.
	Future, NotCounter, Rebased atomic.Uint64
}

// State is one series' last sample: the baseline of its next delta. The
// caller keeps it with the series (relay keeps it in its series cache, so a
// line costs one lookup) and serialises the calls that use it. A State
// starts as Unknown().
type State struct {
	value float64
	ts    int64 // sample time of value, unix ns; noBaseline when there is none
}

// noBaseline and refusedBaseline are times no sample has (Graphite times
// start in 1901): the series has no baseline; the series has none
// because it was refused, so that when it is admitted it may have been
// counting all along.
const (
	noBaseline      = math.MinInt64
	refusedBaseline = math.MinInt64 + 1
)

// Unknown is the State of a series with no baseline yet.
func Unknown() State { return State{ts: noBaseline} }

// Known reports whether s holds a baseline.
func (s State) Known() bool { return s.ts != noBaseline && s.ts != refusedBaseline }

// Tracker applies the rules to samples of series whose States the caller
// keeps, and counts the outcomes. Its methods are safe for concurrent use.
type Tracker struct {
	start    int64 // unix ns
	grace    int64 // ns; negative: no grace
	idleTTL  int64 // ns
	future   int64 // ns: rule 9's bound
	maxCount int64

	count atomic.Int64 // series with a baseline, so Len needs no lock
	// lastLost is the receive time of the latest refusal, or loss of live
	// baselines, 0 if none: a series first seen after it may have been
	// counting all along, see rule 8.
	lastLost atomic.Int64

	maxPerApp int
	seed      Seed // IDs' hash key: random, or the saved state's (Load)
	// legacy is the seed of a state of version 3 or 4 that Load read:
	// its IDs are xxh3's, and Restore looks them up by it.
	legacy *legacySeed
	mark   atomic.Uint64

	mu       sync.Mutex
	perApp   map[string]int // series with a baseline, by application
	restored map[ID]State   // loaded by Load, until claimed by Restore
	stats    Stats
}

// New returns a tracker that started at start: rule 5's grace period
// runs from there.
func New(s Settings, start time.Time) *Tracker {
	s = s.WithDefaults()
	return &Tracker{
		start:     start.UnixNano(),
		grace:     int64(s.FirstSampleGrace),
		idleTTL:   int64(s.IdleTTL),
		future:    int64(s.MaxFuture),
		maxCount:  int64(s.MaxSeries),
		maxPerApp: s.MaxSeriesPerApp,
		perApp:    map[string]int{},
		seed:      NewSeed(),
	}
}

// ID returns the ID a series key is saved under: its hash with the
// tracker's Seed, chosen at random by New, or the one of the state Load
// read.
func (t *Tracker) ID(key []byte) ID { return t.seed.Hash(key) }

// IdleTTL is how long an idle series keeps its baseline (rule 7).
func (t *Tracker) IdleTTL() time.Duration { return time.Duration(t.idleTTL) }

// Update records a sample of the series whose state is st, with value
// taken at ts (unix ns) and received at now (unix ns), and returns its
// delta as the package's rules say. value must be finite (the Graphite
// parser refuses NaN and ±Inf). app, the series' application ("" for
// none), only matters while st has no baseline (rule 8); a caller may
// leave it empty otherwise. The caller serialises calls on one st.
func (t *Tracker) Update(st *State, app string, value float64, ts, now int64) Sample {
	if value < 0 || value >= MaxCounter {
		t.stats.NotCounter.Add(1)
		return Sample{Outcome: NotCounter}
	}
	if ts-now > t.future {
		t.stats.Future.Add(1)
		return Sample{Outcome: Future}
	}
	if !st.Known() {
		return t.first(st, app, value, ts, now)
	}
	if st.ts-now > t.future {
		// A baseline dated too far ahead (saved by a version without rule
		// 9, or the clock stepped back) would hold every sample out of
		// order until then: this sample replaces it.
		*st = State{value: value, ts: ts}
		t.stats.Rebased.Add(1)
		return Sample{Outcome: FirstUnknown}
	}
	if ts <= st.ts {
		t.stats.OutOfOrder.Add(1)
		return Sample{Outcome: OutOfOrder}
	}
	s := Sample{Outcome: Delta, Delta: value - st.value, HasRate: true}
	if value < st.value {
		s.Delta, s.Reset = value, true
		t.stats.Resets.Add(1)
	}
	s.Rate = s.Delta / (float64(ts-st.ts) / 1e9)
	*st = State{value: value, ts: ts}
	return s
}

// first handles the first sample of a series, or the next one of a
// refused series.
func (t *Tracker) first(st *State, app string, value float64, ts, now int64) Sample {
	refusedBefore := st.ts == refusedBaseline
	if t.count.Add(1) > t.maxCount {
		t.count.Add(-1)
		t.Lost(now)
		st.ts = refusedBaseline
		t.stats.Refused.Add(1)
		return Sample{Outcome: Refused}
	}
	if !t.take(app) {
		t.count.Add(-1)
		st.ts = refusedBaseline
		t.stats.RefusedQuota.Add(1)
		return Sample{Outcome: RefusedQuota}
	}
	*st = State{value: value, ts: ts}
	if refusedBefore || t.baselineUnknown(now) {
		t.stats.FirstUnknown.Add(1)
		return Sample{Outcome: FirstUnknown}
	}
	t.stats.FirstNew.Add(1)
	return Sample{Outcome: FirstNew, Delta: value}
}

// baselineUnknown reports whether a series seen first at now may have been
// counting before: during the grace after start (rule 5), or while a series
// refused or forgotten within IdleTTL could be the one now seen (rule 8).
func (t *Tracker) baselineUnknown(now int64) bool {
	if t.grace >= 0 && now-t.start <= t.grace {
		return true
	}
	r := t.lastLost.Load()
	return r != 0 && now-r <= t.idleTTL
}

// Lost says that series which may still be live lost their baselines at
// now (the caller had no room to keep them): for IdleTTL, first samples are
// treated as by rule 5.
func (t *Tracker) Lost(now int64) {
	for r := t.lastLost.Load(); now > r && !t.lastLost.CompareAndSwap(r, now); r = t.lastLost.Load() {
	}
}

// take counts a series of app in its quota, if there is room.
func (t *Tracker) take(app string) bool {
	if app == "" {
		return true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.perApp[app] >= t.maxPerApp {
		return false
	}
	t.perApp[app]++
	return true
}

// Forget says that the caller dropped a series of app that had a baseline,
// idle for longer than IdleTTL (rule 7).
func (t *Tracker) Forget(app string) {
	t.stats.Evicted.Add(1)
	t.release(app)
}

// release stops counting a series of app that the caller dropped, in the
// total and in its application's quota.
func (t *Tracker) release(app string) {
	t.count.Add(-1)
	if app == "" {
		return
	}
	t.mu.Lock()
	if t.perApp[app]--; t.perApp[app] <= 0 {
		delete(t.perApp, app)
	}
	t.mu.Unlock()
}

// Expire decides the fate of st, the state of a series of app that its
// caller is letting go, idle (no sample received) for idle at now; room
// says whether the caller has room to keep it. It returns true when the
// caller keeps the series: it has a baseline, idle for no longer than
// IdleTTL, and there is room. Otherwise the baseline goes: forgotten if
// idle for longer than IdleTTL (rule 7, as by Forget), lost if there was
// no room (rule 8, as by Lost); a state with no baseline just goes.
func (t *Tracker) Expire(st State, app string, idle time.Duration, room bool, now int64) bool {
	switch {
	case !st.Known():
		return false
	case int64(idle) > t.idleTTL:
		t.Forget(app)
		return false
	case !room:
		t.release(app) // it goes from the cache: no longer counted against the limits
		t.Lost(now)
		return false
	}
	return true
}

// Restore gives st, the state of the series of key (see ID) of app seen
// at now for the first time since start, its baseline saved by the last
// run (see Load), if there is one. IdleTTL after start, what was not
// claimed is idle and let go.
func (t *Tracker) Restore(key []byte, app string, st *State, now int64) bool {
	id := t.ID(key)
	t.mu.Lock()
	if now-t.start > t.idleTTL {
		t.restored = nil
	}
	if t.legacy != nil {
		id = t.legacy.hash(key)
	}
	saved, ok := t.restored[id]
	if ok {
		delete(t.restored, id)
	}
	t.mu.Unlock()
	if !ok || t.count.Add(1) > t.maxCount {
		if ok {
			t.count.Add(-1)
		}
		return false
	}
	if !t.take(app) {
		t.count.Add(-1)
		return false
	}
	*st = saved
	return true
}

// Len returns the number of series with a baseline.
func (t *Tracker) Len() int { return int(t.count.Load()) }

// Stats returns the tracker's live counters.
func (t *Tracker) Stats() *Stats { return &t.stats }
