package relay

import (
	"sync"
	"sync/atomic"

	"github.com/sparkpulse/sparkpulse/delta"
)

// series is what a Relay made of one Graphite path. A mapping depends on
// the path alone, so it is worked out once, on the path's first line, and
// every later line of the series only parses, looks this up and appends.
// It is kept small: there can be millions.
type series struct {
	// text holds, escaped for line protocol: text[:field] the measurement,
	// tags and field key with its "="; text[field:delta] ",<delta field>=";
	// text[delta:rate] ",<rate field>="; text[rate:] the app tag's value.
	// The delta parts are empty unless the series is cumulative. For a
	// refused path (reason non-zero) it says why.
	text               string
	id                 delta.ID // the series' identity in the delta tracker
	key                delta.ID // the path's hash
	field, delta, rate uint16
	reason             Reason
}

func (s *series) cumulative() bool { return s.rate > s.field }
func (s *series) app() string      { return s.text[s.rate:] }

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

// seriesCache maps path hashes to series. Lookups take no lock and write
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
	perGen int // series per shard generation
	shards [cacheShards]cacheShard
}

type cacheShard struct {
	cur, old atomic.Pointer[table]
	mu       sync.Mutex // serialises changes
	since    int64      // when cur began, unix ns
	_        [24]byte   // keeps shards on their own cache lines
}

// table is an open-addressed hash table of series with linear probing,
// never more than 3/4 full. Only the shard's mutex holder stores.
type table struct {
	slots []atomic.Pointer[series]
	n     int // series stored
}

const firstTableSize = 64

func newTable(size int) *table { return &table{slots: make([]atomic.Pointer[series], size)} }

func (t *table) find(h delta.ID) *series {
	mask := uint64(len(t.slots) - 1)
	for i := h[0] & mask; ; i = (i + 1) & mask {
		s := t.slots[i].Load()
		if s == nil || s.key == h {
			return s
		}
	}
}

func (t *table) store(s *series) {
	mask := uint64(len(t.slots) - 1)
	i := s.key[0] & mask
	for t.slots[i].Load() != nil {
		i = (i + 1) & mask
	}
	t.slots[i].Store(s)
	t.n++
}

// newSeriesCache holds up to about size series.
func newSeriesCache(size int) *seriesCache {
	c := &seriesCache{perGen: max(size/2/cacheShards, 1)}
	for i := range c.shards {
		c.shards[i].cur.Store(newTable(firstTableSize))
	}
	return c
}

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
			sh.add(s, c.perGen, now)
		}
		sh.mu.Unlock()
	}
	return s
}

// put stores s as the series of the path with hash h.
func (c *seriesCache) put(h delta.ID, s *series, now int64) {
	s.key = h
	sh := c.shard(h)
	sh.mu.Lock()
	if sh.cur.Load().find(h) == nil {
		sh.add(s, c.perGen, now)
	}
	sh.mu.Unlock()
}

// add stores s in the current generation, retiring it first when it is
// full or old, and growing its table as needed. Called with mu held.
func (sh *cacheShard) add(s *series, perGen int, now int64) {
	cur := sh.cur.Load()
	if cur.n >= perGen || now-sh.since >= cacheTTL {
		sh.old.Store(cur)
		cur = newTable(firstTableSize)
		sh.cur.Store(cur)
		sh.since = now
	}
	if (cur.n+1)*4 > len(cur.slots)*3 {
		grown := newTable(2 * len(cur.slots))
		for i := range cur.slots {
			if e := cur.slots[i].Load(); e != nil {
				grown.store(e)
			}
		}
		cur = grown
		sh.cur.Store(cur) // readers of the old table still find what it had
	}
	cur.store(s)
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
