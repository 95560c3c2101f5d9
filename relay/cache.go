package relay

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sparkpulse/sparkpulse/delta"
)

// series is what a Relay made of one Graphite path. A mapping depends on
// the path alone, so it is worked out once, on the path's first line, and
// every later line of the series only parses, looks this up and appends.
// It is kept small: there can be millions.
type series struct {
	// text holds, escaped for line protocol: text[:keyEnd] the series key
	// (measurement and tags), text[keyEnd:field] " <field key>=", then the
	// app tag's value (Config.AppTag) unless the key holds it as it is
	// (appAt), the process tag's value (with a PeerCheck only) and, in the
	// last byte, the process value's length. For a refused path (reason
	// non-zero) it says why.
	text string
	key  delta.ID // the path's hash
	// A cumulative series' baseline and when it last had a sample, in
	// seconds since the cache began; guarded by the key's stripe lock.
	// The cache only stores them: what a baseline becomes, and when it
	// expires, is the tracker's to say.
	st            delta.State
	seen          uint32
	appSum        uint32 // appChecksum(app()): a line compares this, not the id
	keyEnd, field uint16
	// appAt, when not 0, is where the app tag's value begins in the key,
	// which holds it as it is (escaping changed nothing): it runs to the
	// next ',' or the key's end. Most ids need no escaping, and a copy
	// would cost every series their length.
	appAt  uint16
	reason Reason
	flags  uint8
}

const (
	cumulative = 1 << iota // the point gets delta and rate fields
	named                  // the field is not "value": its delta field is "<field>_delta", not "delta"
)

func (s *series) cumulative() bool { return s.flags&cumulative != 0 }

// appendDeltaKey appends the key of a cumulative series' delta or rate
// field, with its separators: ",delta=" (plain) for the field "value",
// else ",<field>_delta=" (",<field>" and suffix). They are not kept per
// series: their text is the field's.
func (s *series) appendDeltaKey(b []byte, plain, suffix string) []byte {
	if s.flags&named == 0 {
		return append(b, plain...)
	}
	b = append(append(b, ','), s.text[s.keyEnd+1:s.field-1]...)
	return append(b, suffix...)
}

// app is the series' application: the value of the app tag, "" for none.
func (s *series) app() string {
	if s.appAt != 0 {
		v := s.text[s.appAt:s.keyEnd]
		if i := strings.IndexByte(v, ','); i >= 0 {
			return v[:i]
		}
		return v
	}
	return s.text[s.field : len(s.text)-1-int(s.text[len(s.text)-1])]
}

// process is the process tag's value, kept with a PeerCheck only.
func (s *series) process() string {
	n := int(s.text[len(s.text)-1])
	return s.text[len(s.text)-1-n : len(s.text)-1]
}

// appChecksum is FNV-1a of an application id, 0 for none: a connection
// tells that a line's application is the one of its last line by this
// number alone. Two ids with one checksum cost at most a nomination.
func appChecksum(app []byte) uint32 {
	if len(app) == 0 {
		return 0
	}
	h := uint32(2166136261)
	for _, c := range app {
		h = (h ^ uint32(c)) * 16777619
	}
	return h | 1
}

// maxText bounds a cached series' text, whose parts are found by 16-bit
// offsets; InfluxDB refuses series keys of more than 65535 bytes anyway.
const maxText = 1<<16 - 1

const (
	cacheShards = 64
	// cacheTTL is the age at which a shard's generation is retired on its
	// next insert: a series unused for between one and two of these
	// (an application that ended) is forgotten.
	cacheTTL = int64(60e9)
)

// seriesCache maps path hashes to series, and compares nothing else on a
// hit. A path's hash is SipHash-2-4-128 under a random key of the cache's
// own (delta.Seed), a pseudorandom function: a sender who does not know
// the key cannot make a path of theirs take another application's series
// (a seeded xxh3 could not promise that: its maintainers document
// collisions that hold for every seed). Lookups take no lock and write
// no shared memory, so connections on different cores do not contend:
// each shard's tables are open-addressed arrays of atomic pointers,
// written under the shard's mutex and published whole when they grow.
//
// Each shard keeps two generations: a lookup that finds a series only in
// the old one copies it to the current one, and the old one is dropped
// whenever the current one is full or older than cacheTTL at an insert. So
// the memory is bounded by the size cap and follows the live series, with
// no clock per entry and no scans.
type seriesCache struct {
	perGen  int   // series per shard generation
	start   int64 // unix ns; series' seen counts seconds from it
	tracker *delta.Tracker
	seed    delta.Seed // of path hashes
	shards  [cacheShards]cacheShard
	stripes [numStripes]stripe
}

// The baselines of cumulative series are guarded by striped locks rather
// than one per series, which would cost memory in every entry.
const numStripes = 256

type stripe struct {
	sync.Mutex
	_ [56]byte // keeps stripes on their own cache lines
}

func (c *seriesCache) stripe(h delta.ID) *sync.Mutex { return &c.stripes[h[1]%numStripes].Mutex }

type cacheShard struct {
	cur, old atomic.Pointer[table]
	mu       sync.Mutex // serialises changes
	since    int64      // when cur began, unix ns
	_        [24]byte   // keeps shards on their own cache lines
}

// table is an open-addressed hash table of series, probed linearly by
// bucket and never more than 7/8 full. A bucket is one cache line: seven
// series pointers and, in one word, a byte of each one's hash (its tag).
// A lookup reads a bucket's tags and follows only a pointer whose tag
// matches: with one pointer per slot and no tags, every probe of a slot
// that holds another series read that series from memory, a cache miss
// that cost more than the rest of the line's work. Only the shard's mutex
// holder stores; a slot's pointer is stored before its tag, so a reader
// that sees the tag sees the pointer.
type table struct {
	buckets []bucket
	n       int // series stored
}

const slotsPerBucket = 7

type bucket struct {
	tags  atomic.Uint64 // byte i is slots[i]'s tag, 0 while it is empty; slots fill in order
	slots [slotsPerBucket]atomic.Pointer[series]
}

// firstTableBuckets is a new table's size: 56 series.
const firstTableBuckets = 8

func newTable(buckets int) *table { return &table{buckets: make([]bucket, buckets)} }

// tagOf is the byte of h a bucket keeps for its series: never 0, which
// marks an empty slot. It comes from the half of h that neither the shard
// nor the bucket index is taken from.
func tagOf(h delta.ID) uint8 { return max(uint8(h[1]>>56), 1) }

func (t *table) find(h delta.ID) *series {
	tag, mask := tagOf(h), uint64(len(t.buckets)-1)
	for i := h[0] & mask; ; i = (i + 1) & mask {
		b := &t.buckets[i]
		tags := b.tags.Load()
		for j := range slotsPerBucket {
			switch uint8(tags >> (8 * j)) {
			case 0: // the end of the probe sequence: slots are never emptied
				return nil
			case tag:
				if s := b.slots[j].Load(); s.key == h {
					return s
				}
			}
		}
	}
}

func (t *table) store(s *series) {
	tag, mask := tagOf(s.key), uint64(len(t.buckets)-1)
	for i := s.key[0] & mask; ; i = (i + 1) & mask {
		b := &t.buckets[i]
		tags := b.tags.Load()
		for j := range slotsPerBucket {
			if uint8(tags>>(8*j)) == 0 {
				b.slots[j].Store(s)
				b.tags.Store(tags | uint64(tag)<<(8*j))
				t.n++
				return
			}
		}
	}
}

// full reports whether one more series would fill t past 7/8 of its slots.
func (t *table) full() bool { return (t.n+1)*8 > len(t.buckets)*slotsPerBucket*7 }

// all yields every series in t.
func (t *table) all(yield func(*series) bool) {
	for i := range t.buckets {
		b := &t.buckets[i]
		tags := b.tags.Load()
		for j := range slotsPerBucket {
			if uint8(tags>>(8*j)) == 0 {
				break
			}
			if !yield(b.slots[j].Load()) {
				return
			}
		}
	}
}

// newSeriesCache holds up to about size series, from now (unix ns); with
// a tracker, the baselines of cumulative series follow its rules.
func newSeriesCache(size int, tracker *delta.Tracker, now int64) *seriesCache {
	c := &seriesCache{perGen: max(size/2/cacheShards, 1), start: now, tracker: tracker, seed: delta.NewSeed()}
	for i := range c.shards {
		c.shards[i].cur.Store(newTable(firstTableBuckets))
	}
	return c
}

// id is the hash of a path, the key of its series.
func (c *seriesCache) id(path []byte) delta.ID { return c.seed.Hash(path) }

func (c *seriesCache) shard(h delta.ID) *cacheShard {
	return &c.shards[h[0]>>58] // the top 6 bits; the tables index by the low ones
}

// get returns the series of the path with hash h, or nil.
func (c *seriesCache) get(h delta.ID, now int64) *series {
	sh := c.shard(h)
	if s := sh.cur.Load().find(h); s != nil {
		return s
	}
	old := sh.old.Load()
	if old == nil {
		return nil
	}
	s := old.find(h)
	if s != nil {
		sh.mu.Lock()
		if sh.cur.Load().find(h) == nil {
			c.add(sh, s, now)
		}
		sh.mu.Unlock()
	}
	return s
}

// put stores s as the series of the path with hash h, unless the current
// generation has one already, and returns the one it holds.
func (c *seriesCache) put(h delta.ID, s *series, now int64) *series {
	s.key = h
	sh := c.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if got := sh.cur.Load().find(h); got != nil {
		return got
	}
	c.add(sh, s, now)
	return s
}

// add stores s in the shard's current generation, retiring it first when
// it is full or old, and growing its table as needed. Called with the
// shard's mu held.
func (c *seriesCache) add(sh *cacheShard, s *series, now int64) {
	cur := sh.cur.Load()
	if full := cur.n >= c.perGen; full || now-sh.since >= cacheTTL {
		dropped := sh.old.Load()
		sh.old.Store(cur)
		cur = newTable(firstTableBuckets)
		sh.cur.Store(cur)
		sh.since = now
		if dropped != nil && c.tracker != nil {
			c.retire(sh, dropped, cur, full, now)
		}
	}
	sh.store(s)
}

// store puts s in the current table, growing it first when it would be
// more than 7/8 full.
func (sh *cacheShard) store(s *series) {
	cur := sh.cur.Load()
	if cur.full() {
		grown := newTable(2 * len(cur.buckets))
		for e := range cur.all {
			grown.store(e)
		}
		cur = grown
		sh.cur.Store(cur) // readers of the old table still find what it had
	}
	cur.store(s)
}

// retire lets a dropped generation go. The tracker decides what becomes
// of each of its cumulative series' baselines ([delta.Tracker.Expire]):
// one it keeps moves to the new current generation; there is room for it
// unless the generation was retired for being full and the new one holds
// half of it already. Called with the shard's mu held.
func (c *seriesCache) retire(sh *cacheShard, dropped, cur *table, full bool, now int64) {
	old := sh.old.Load() // holds every series used since dropped was current
	nowSec := c.sec(now)
	for e := range dropped.all {
		if !e.cumulative() || old.find(e.key) != nil {
			continue
		}
		mu := c.stripe(e.key)
		mu.Lock()
		st, seen := e.st, int64(e.seen)
		mu.Unlock()
		room := !full || cur.n < c.perGen/2
		if c.tracker.Expire(st, e.app(), time.Duration(nowSec-seen)*time.Second, room, now) {
			sh.store(e)
			cur = sh.cur.Load()
		}
	}
}

// sec is now in seconds since the cache began.
func (c *seriesCache) sec(now int64) int64 { return (now - c.start) / 1e9 }

// update applies a sample to a cumulative series' baseline.
func (c *seriesCache) update(s *series, value float64, ts, now int64) delta.Sample {
	mu := c.stripe(s.key)
	mu.Lock()
	app := ""
	if !s.st.Known() {
		app = s.app() // for the quota: only a first sample needs it
	}
	d := c.tracker.Update(&s.st, app, value, ts, now)
	s.seen = uint32(c.sec(now))
	mu.Unlock()
	return d
}

// states yields every cumulative series once, with its baseline.
func (c *seriesCache) states(yield func(*series, delta.State) bool) {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		cur, old := sh.cur.Load(), sh.old.Load()
		sh.mu.Unlock()
		for _, t := range []*table{cur, old} {
			if t == nil {
				continue
			}
			for e := range t.all {
				if !e.cumulative() || t == old && cur.find(e.key) == e {
					continue
				}
				mu := c.stripe(e.key)
				mu.Lock()
				st := e.st
				mu.Unlock()
				if !yield(e, st) {
					return
				}
			}
		}
	}
}

// len returns about how many series are held: a series copied from the
// old generation to the current one counts twice until the old one goes.
func (c *seriesCache) len() int {
	n := 0
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		n += sh.cur.Load().n
		if old := sh.old.Load(); old != nil {
			n += old.n
		}
		sh.mu.Unlock()
	}
	return n
}
