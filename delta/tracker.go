package delta

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults for zero [Settings] fields.
const (
	DefaultFirstSampleGrace = 20 * time.Second // 2 × Spark's default 10 s period
	DefaultIdleTTL          = 15 * time.Minute
	DefaultMaxSeries        = 1_000_000
)

// NoGrace as Settings.FirstSampleGrace makes every first sample new (rule 4),
// for callers that know they see every series from its start.
const NoGrace time.Duration = -1

// Settings tune a [Tracker]; zero fields take the defaults.
type Settings struct {
	FirstSampleGrace time.Duration // 0 = default 20s; use NoGrace (negative) for "every first sample is new"
	IdleTTL          time.Duration // 0 = default 15m
	MaxSeries        int           // 0 = default 1_000_000
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
	return errors.Join(errs...)
}

// Outcome says what [Tracker.Update] made of a sample.
type Outcome uint8

const (
	Delta        Outcome = iota // rules 2 and 3
	FirstNew                    // rule 4: Delta is the value itself
	FirstUnknown                // rule 5: baseline only
	OutOfOrder                  // rule 6: ignored
	Refused                     // rule 8: not tracked
)

var outcomeNames = [...]string{"delta", "first_new", "first_unknown", "out_of_order", "refused"}

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
	Resets, FirstNew, FirstUnknown, OutOfOrder, Evicted, Refused atomic.Uint64
}

// entry is the state of one series; with its 16-byte ID it makes a 40-byte
// map slot.
type entry struct {
	value float64
	ts    int64 // sample time of value, unix ns
	seen  int64 // receive time of the last sample, unix ns, for rule 7
}

const numShards = 256

// shard is padded to a cache line so that neighbouring locks taken by
// different cores do not share one.
type shard struct {
	mu sync.Mutex
	m  map[ID]entry
	_  [64 - 16]byte
}

// Tracker holds the last sample of every series. Its methods are safe for
// concurrent use; Update locks only the series' shard.
type Tracker struct {
	shards [numShards]shard

	start    int64 // unix ns
	grace    int64 // ns; negative: no grace
	idleTTL  int64 // ns
	maxCount int64

	count atomic.Int64 // series held, so Len needs no lock
	// lastRefused is the receive time of the latest refusal, 0 if none: a
	// refused series later admitted is not new, see rule 8.
	lastRefused atomic.Int64

	stats Stats
}

// New returns an empty tracker that started at start: rule 5's grace period
// runs from there.
func New(s Settings, start time.Time) *Tracker {
	s = s.WithDefaults()
	t := &Tracker{
		start:    start.UnixNano(),
		grace:    int64(s.FirstSampleGrace),
		idleTTL:  int64(s.IdleTTL),
		maxCount: int64(s.MaxSeries),
	}
	for i := range t.shards {
		t.shards[i].m = make(map[ID]entry)
	}
	return t
}

func (t *Tracker) shard(id ID) *shard { return &t.shards[id[0]>>56] }

// Update records a sample of series id with value taken at ts (unix ns) and
// received at now (unix ns), and returns its delta as the package's rules
// say. value must be finite (the Graphite parser refuses NaN and ±Inf).
func (t *Tracker) Update(id ID, value float64, ts, now int64) Sample {
	sh := t.shard(id)
	sh.mu.Lock()
	e, ok := sh.m[id]
	if !ok {
		return t.first(sh, id, value, ts, now) // unlocks
	}
	e.seen = now // a duplicate still shows the series is alive
	if ts <= e.ts {
		sh.m[id] = e
		sh.mu.Unlock()
		t.stats.OutOfOrder.Add(1)
		return Sample{Outcome: OutOfOrder}
	}
	s := Sample{Outcome: Delta, Delta: value - e.value, HasRate: true}
	if value < e.value {
		s.Delta, s.Reset = value, true
	}
	s.Rate = s.Delta / (float64(ts-e.ts) / 1e9)
	sh.m[id] = entry{value: value, ts: ts, seen: now}
	sh.mu.Unlock()
	if s.Reset {
		t.stats.Resets.Add(1)
	}
	return s
}

// first handles the first sample of a series, with sh locked; it unlocks.
func (t *Tracker) first(sh *shard, id ID, value float64, ts, now int64) Sample {
	if t.count.Add(1) > t.maxCount {
		t.count.Add(-1)
		sh.mu.Unlock()
		for r := t.lastRefused.Load(); now > r && !t.lastRefused.CompareAndSwap(r, now); r = t.lastRefused.Load() {
		}
		t.stats.Refused.Add(1)
		return Sample{Outcome: Refused}
	}
	sh.m[id] = entry{value: value, ts: ts, seen: now}
	sh.mu.Unlock()
	if t.baselineUnknown(now) {
		t.stats.FirstUnknown.Add(1)
		return Sample{Outcome: FirstUnknown}
	}
	t.stats.FirstNew.Add(1)
	return Sample{Outcome: FirstNew, Delta: value}
}

// baselineUnknown reports whether a series seen first at now may have been
// counting before: during the grace after start (rule 5), or while a series
// refused within IdleTTL could be the one now admitted (rule 8).
func (t *Tracker) baselineUnknown(now int64) bool {
	if t.grace >= 0 && now-t.start <= t.grace {
		return true
	}
	r := t.lastRefused.Load()
	return r != 0 && now-r <= t.idleTTL
}

// Evict removes the series not updated for longer than IdleTTL before now
// (rule 7) and returns how many it removed. The caller runs it periodically.
func (t *Tracker) Evict(now int64) int {
	n := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for id, e := range sh.m {
			if now-e.seen > t.idleTTL {
				delete(sh.m, id)
				n++
			}
		}
		sh.mu.Unlock()
	}
	t.count.Add(-int64(n))
	t.stats.Evicted.Add(uint64(n))
	return n
}

// Len returns the number of series tracked.
func (t *Tracker) Len() int { return int(t.count.Load()) }

// Stats returns the tracker's live counters.
func (t *Tracker) Stats() *Stats { return &t.stats }
