// Package relay turns Graphite lines into InfluxDB line protocol.
//
// A Relay is a graphite.Handler: every TCP connection (or UDP reader) gets
// its own Conn, which parses each line, maps its path to a measurement,
// tags and field, and encodes the point into a connection-local buffer. At
// the end of every block read from the socket the buffer is handed to the
// Sink in one call, so the per-line path sends nothing over channels and,
// once its buffers have grown, allocates nothing.
//
// A path's mapping, its checks and the escaped line-protocol text of its
// measurement, tags and field are worked out on its first line (with
// line-protocol's encoder) and remembered in a cache shared by the Relay's
// connections, which lookups read without locks: after that a line costs a
// parse, a hash, a lookup and a few appends (and, for a cumulative series,
// the delta tracker's update).
//
// A line that cannot become a point is dropped and counted by reason; the
// first few per second are logged. Nothing a line contains stops the
// connection or the lines after it.
//
// Lines of one series and time that come one after another are one
// point: in the wide schema, a run of a Spark report's lines of one
// process and source. With JoinReports the runs of one series and time in
// a block are also joined when it is handed on (join.go).
//
// With Deltas configured, a point of a cumulative series (chosen by the
// rules on its Graphite path or measurement) also gets a field with the
// increase since the series' previous sample, and one with that increase
// per second: "delta" and "rate" when the field is "value", else
// "<field>_delta" and "<field>_rate". The delta package states when they
// are present.
package relay

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/influxdata/line-protocol/v2/lineprotocol"
	"go.uber.org/zap"

	"github.com/sparkpulse/sparkpulse/delta"
	"github.com/sparkpulse/sparkpulse/graphite"
	"github.com/sparkpulse/sparkpulse/queue"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/templates"
)

// Mapper maps a Graphite path to a measurement, tags and field. Both the
// template engine and the built-in Spark mapping satisfy it.
type Mapper interface {
	Apply(path []byte, r *templates.Result) error
}

// Sink receives encoded points: complete lines, each ending in '\n', and
// where each ends. The Sink must copy what it keeps. When it has no room
// it waits (wait), which slows the reader down, or returns false and keeps
// nothing.
type Sink interface {
	AppendLines(lines queue.Lines, wait bool) bool
}

// Reason is why a line was dropped. The parse reasons come first and share
// their values with graphite.Reason.
type Reason uint8

const (
	ReasonMapping    Reason = iota + Reason(graphite.ReasonTimeRange) + 1 // the template rejected the path
	ReasonTimeKey                                                         // a tag or the field is named "time", which InfluxDB refuses
	ReasonKeyTooLong                                                      // series key over InfluxDB's 65535-byte limit
	ReasonEncode                                                          // not representable in line protocol (e.g. invalid UTF-8 in a name)
	ReasonQueueFull                                                       // the sink had no room and the reader could not wait (UDP)
	ReasonFuture                                                          // dated more than MaxFuture after it was received
	ReasonNotCounter                                                      // a cumulative series' value no counter can have
	ReasonPeer                                                            // sent from an address other than the one Spark lists for its process
	ReasonNames                                                           // a metric name past the bounds on names (names.go)
	NumReasons
)

// String is the stable label used in metrics.
func (r Reason) String() string {
	switch r {
	case ReasonMapping:
		return "mapping"
	case ReasonTimeKey:
		return "time_key"
	case ReasonKeyTooLong:
		return "key_too_long"
	case ReasonEncode:
		return "encode"
	case ReasonQueueFull:
		return "queue_full"
	case ReasonFuture:
		return "future"
	case ReasonNotCounter:
		return "not_counter"
	case ReasonPeer:
		return "peer"
	case ReasonNames:
		return "names"
	}
	return graphite.Reason(r).String()
}

// maxKeyLen is InfluxDB's limit on a series key (measurement plus tags).
const maxKeyLen = 65535

// Stats counts what a Relay did. Conns add their counts once per block.
type Stats struct {
	Lines   atomic.Uint64 // lines seen
	Points  atomic.Uint64 // points handed to the sink
	Dropped [NumReasons]atomic.Uint64
}

// Config is what a Relay needs.
type Config struct {
	Mapper Mapper
	Sink   Sink
	// Now stamps lines that carry no timestamp (or -1); time.Now when nil.
	Now func() time.Time
	// Log receives per-line problems. Give it a sampled core: a sender may
	// repeat the same bad line every few seconds.
	Log *zap.Logger
	// Deltas, when not nil, adds delta and rate fields to cumulative series.
	Deltas *Deltas
	// AppTag is the tag that names a point's application
	// ("applicationid" when empty): for OnApp, PeerCheck and the delta
	// tracker's quota per application. A series keeps its value.
	AppTag string
	// OnApp, when set, is called with the value of the tag AppTag of the
	// points a connection encodes whenever it differs from the previous one
	// on that connection, at most maxAppsPerBlock times per block; Spark
	// sends one application per connection, so that is about once per
	// connection.
	OnApp func(app string)
	// NonBlocking makes a block the Sink has no room for a counted drop
	// (queue_full) instead of a wait: for UDP, whose senders cannot be
	// slowed down, so that the reader keeps draining the socket.
	NonBlocking bool
	// PeerCheck, when set, says whether a TCP connection from peer may
	// carry the points of an application's process (the values of the tags
	// AppTag and "process"); a point it refuses is dropped (ReasonPeer).
	// It is asked when a connection's (application, process) changes,
	// compared as text, not by a checksum another id could share: Spark
	// sends one process's report per connection, so about once per
	// connection; and again when PeerVersion has moved, so that a
	// connection allowed before its process was listed is held to the
	// listing. Points without both tags, and UDP's, are not checked.
	PeerCheck   func(app, process string, peer netip.Addr) bool
	PeerVersion func() uint64 // nil: PeerCheck's answers never change
	// JoinReports, for the built-in mapping's wide schema, also joins the
	// points of one series and time that a block holds apart: Spark's
	// reporter sends a report's gauges, counters, histograms, meters and
	// timers in separate groups, so a source with metrics of several kinds
	// (the executor source's gauges and counters) comes back in runs.
	JoinReports bool
	// MaxFuture is how far after its receive time a line may be dated;
	// later lines are dropped (ReasonFuture): a forged line dated years
	// ahead would otherwise sit in every graph and hold the series' deltas
	// out of order. delta.DefaultMaxFuture when 0.
	MaxFuture time.Duration
	// Ingest, when set, is told of the lines each block took (package
	// ingestlog), so that a start after a crash can hand them to the
	// Relay again (Replay); IngestBlock is the Relay's number in its
	// records.
	Ingest      Ingest
	IngestBlock int
	// CacheSize bounds how many series (Graphite paths) the Relay
	// remembers the mapping of; DefaultCacheSize when 0. A series that is
	// not remembered is mapped again, which costs about as much as its
	// first line did.
	CacheSize int
}

// Ingest is the ingest log as a Relay sees it (ingestlog.Log): Begin
// comes before a block's first line changes a baseline, End with the
// lines the block took (each ending in '\n'), received at recv (unix ns).
type Ingest interface {
	Begin()
	End(block int, recv int64, lines []byte)
}

// DefaultCacheSize is the default Config.CacheSize.
const DefaultCacheSize = 1_000_000

// Deltas is the delta stage of a Relay. The baselines live in the Relay's
// series cache; the Tracker, which Relays may share, holds the rules, the
// counts and the hash seed of saved IDs. Bucket is part of the identity a
// baseline is saved under. A series' application, for the tracker's quota
// per application, is its Config.AppTag value.
type Deltas struct {
	Rules   *delta.Rules
	Tracker *delta.Tracker
	Bucket  string
	// MatchField makes the rules' measurement patterns match the field
	// instead, unless it is "value": in the built-in mapping's wide schema
	// the measurement is the Spark source and the field the metric's name,
	// while a path that is not Spark's is a measurement with a value.
	MatchField bool
}

// Relay is a graphite.Handler that encodes points for one Sink.
type Relay struct {
	cfg    Config
	appTag []byte // Config.AppTag
	cache  *seriesCache
	names  *nameGuard
	known  func(*templates.Result) bool // the Mapper's, if it knows Spark's names
	idle   sync.Pool                    // closed Conns, for reuse
	stats  Stats

	// Block buffers between uses, last in first out: the one released
	// last is likeliest still in the CPU's cache, so encoding into it
	// does not first fetch a cold buffer's lines from memory. A bounded
	// stack rather than a sync.Pool: see release.
	blockMu sync.Mutex
	blocks  [][]byte
}

// New returns a Relay.
func New(cfg Config) *Relay {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = DefaultCacheSize
	}
	if cfg.MaxFuture <= 0 {
		cfg.MaxFuture = delta.DefaultMaxFuture
	}
	if cfg.AppTag == "" {
		cfg.AppTag = schema.TagApplicationID
	}
	var tracker *delta.Tracker
	if cfg.Deltas != nil {
		tracker = cfg.Deltas.Tracker
	}
	r := &Relay{cfg: cfg, cache: newSeriesCache(cfg.CacheSize, tracker, cfg.Now().UnixNano()),
		appTag: []byte(cfg.AppTag), names: newNameGuard(MaxNames, MaxNamesPerApp)}
	if k, ok := cfg.Mapper.(knower); ok {
		r.known = k.Known
	}
	return r
}

// Stats returns the Relay's live counters.
func (r *Relay) Stats() *Stats { return &r.stats }

// CachedSeries returns about how many series' mappings are remembered.
func (r *Relay) CachedSeries() int { return r.cache.len() }

// NewConn implements graphite.Handler.
// Spark opens a connection per report, so Conns are reused, and a Conn
// holds a block buffer only from its first point to the Flush that hands
// the block on: connections waiting for data hold none, and the buffers
// in use are as many as the connections processing a block. Idle Conns
// are kept in a sync.Pool: set beside a bounded channel of Conns, it costs
// the same, also while collections empty it (BenchmarkConnSource). Blocks
// are kept in a stack (see release).
func (r *Relay) NewConn(remote net.Addr) graphite.ConnHandler {
	c, ok := r.idle.Get().(*Conn)
	if !ok {
		c = &Conn{relay: r}
	}
	c.remote = remote
	if t, ok := remote.(*net.TCPAddr); ok && r.cfg.PeerCheck != nil {
		c.peer = t.AddrPort().Addr().Unmap()
	}
	return c
}

// block returns a block buffer: room for the points of a whole Spark
// report, instead of a dozen doublings.
func (r *Relay) block() []byte {
	r.blockMu.Lock()
	defer r.blockMu.Unlock()
	if n := len(r.blocks); n > 0 {
		b := r.blocks[n-1]
		r.blocks[n-1] = nil
		r.blocks = r.blocks[:n-1]
		return b
	}
	return make([]byte, 0, 48<<10)
}

// release keeps a block buffer for the next block, unless it grew large.
//
// A stack rather than a sync.Pool: both take the same time
// (BenchmarkBlockSource: a block of 1000 lines' points in 6.2–7.1 µs on
// one processor either way), but a sync.Pool must box the slice it is
// given, an allocation per block where a Conn whose buffers have grown
// allocates nothing (TestWideDoesNotAllocate), and it lets its buffers go
// at every second collection (with 256 KiB of garbage a block, 6–9 KB a
// block made anew on two processors; the stack, 0.1 KB).
func (r *Relay) release(b []byte) {
	if cap(b) > maxPooledBlock {
		return
	}
	r.blockMu.Lock()
	defer r.blockMu.Unlock()
	if len(r.blocks) < maxIdleBlocks {
		r.blocks = append(r.blocks, b[:0])
	}
}

// Conn processes the lines of one connection. It is not safe for
// concurrent use.
type Conn struct {
	relay  *Relay
	remote net.Addr

	line   graphite.Line
	result templates.Result
	out    []byte               // the block's points, in line protocol
	ends   []int32              // where each of them ends in out
	keys   []int32              // and where its series key ends
	points int                  // points in out since the last Flush
	enc    lineprotocol.Encoder // describes new series

	lastApp uint32 // the appChecksum of the last line's application
	// The TCP peer (invalid for UDP), and PeerCheck's answer for the
	// connection's last (application, process) at PeerVersion peerAt.
	peer     netip.Addr
	peerApp  string
	peerProc string
	peerAt   uint64
	peerOK   bool
	apps     int    // OnApp calls in this block
	meas     []byte // scratch for a measurement rewritten by backslashes
	key      []byte // state ID scratch for the delta stage
	deltaKey []byte // "<field>_delta" scratch
	rateKey  []byte // "<field>_rate" scratch
	now      int64  // receive time of this block, unix ns; 0 until needed
	// A report's lines share their time: the last one written, and its
	// text with the leading ' ', are kept rather than formatted per line.
	lastTS int64
	tsText []byte

	open openPoint // the block's last point, which lines may add fields to

	// With JoinReports: the block's points, the series of their fields in
	// order, and whether two of them share a series and a time (join.go).
	pts     []blockPoint
	fseries []*series
	rejoin  bool
	join    joinScratch

	lines   uint64
	dropped [NumReasons]uint64

	// For Config.Ingest: the block's lines that became points, and
	// whether Begin was called for it. A Conn of Replay logs nothing and
	// publishes no counts.
	raw       []byte
	begun     bool
	replaying bool
}

// joins reports whether the current line, of series s with the series key
// key and time ts, adds a field to the open point rather than starting
// one: the lines of one report of one process and source share a series
// key and a time in the wide schema, and come one after another.
func (c *Conn) joins(s *series, key string, ts int64) bool {
	o := &c.open
	return o.end > 0 && ts == o.ts && len(key) == len(o.key) && key == o.key && o.add(s)
}

// openPoint is the point at the end of a block, and the series whose
// fields it holds: a series repeated within one report (a forgery, or two
// reporters) starts a new point rather than repeating a field, which
// InfluxDB 3 may refuse with the rest of the point.
type openPoint struct {
	key    string // the series key, in the series' text
	ts     int64
	end    int // where its fields end in the block; 0 when none is open
	n      int // fields in it
	gen    uint32
	fields [openSlots]struct {
		s   *series
		gen uint32
	}
}

// maxPointFields bounds the fields of a point; openSlots, twice as many
// and a power of two, keeps their table half empty.
const (
	maxPointFields = 128
	openSlots      = 256
)

// start opens a point with the field of s.
func (o *openPoint) start(s *series, key string, ts int64) {
	o.key, o.ts, o.n = key, ts, 0
	if o.gen++; o.gen == 0 { // wrapped: forget every slot
		o.fields = [openSlots]struct {
			s   *series
			gen uint32
		}{}
		o.gen = 1
	}
	o.add(s)
}

// add records the field of s in the open point, unless the point already
// has it or is full.
func (o *openPoint) add(s *series) bool {
	if o.n >= maxPointFields {
		return false
	}
	for i := uint32(s.key[0]) & (openSlots - 1); ; i = (i + 1) & (openSlots - 1) {
		f := &o.fields[i]
		if f.gen != o.gen {
			f.s, f.gen = s, o.gen
			o.n++
			return true
		}
		if f.s == s {
			return false
		}
	}
}

// close forgets the open point: the block it was in has been handed on.
func (o *openPoint) close() { o.key, o.end = "", 0 }

var (
	processKey   = []byte(schema.TagProcess) // the tag of a Spark process, for PeerCheck
	timeKey      = []byte("time")
	errNoKey     = errors.New(`InfluxDB refuses a tag or field named "time"`)
	errComment   = errors.New(`a measurement beginning with "#" would be read as a comment by InfluxDB and silently lost`)
	errQueueFull = errors.New("the write queue is full (InfluxDB is slow or down, and no state-dir holds a disk queue): this block of points is dropped")
)

// Line implements graphite.ConnHandler.
func (c *Conn) Line(line []byte) {
	c.lines++
	in := c.relay.cfg.Ingest
	if in != nil && !c.begun && !c.replaying {
		in.Begin()
		c.begun = true
	}
	if reason, why := c.encode(line); reason != 0 {
		c.dropped[reason]++
		c.logDrop(line, reason, why)
	} else if c.begun {
		// Only lines that became points: a start hands them to the
		// relay again without the checks of their peer.
		c.raw = append(append(c.raw, line...), '\n')
	}
}

// Replay hands lines (each ending in '\n') that the ingest log kept,
// received at recv (unix ns), to the Relay again, as one block: their
// points go to the Sink, with the deltas they had, and nothing is logged
// or counted.
func (r *Relay) Replay(recv int64, lines []byte) {
	c := r.NewConn(nil).(*Conn)
	c.replaying, c.now = true, recv // the block's receive time, until Flush
	for len(lines) > 0 {
		line, rest, _ := bytes.Cut(lines, []byte{'\n'})
		lines = rest
		if len(line) > 0 {
			c.Line(line)
		}
	}
	c.Flush()
	c.replaying = false
	c.Close()
}

// Process handles one line and returns its point in line protocol (with a
// nanosecond timestamp and the trailing newline), or the reason and error
// that dropped it. The returned bytes are valid until the next call. It is
// what `sparkpulse parse` prints; the service path uses Line.
func (c *Conn) Process(line []byte) ([]byte, error) {
	c.now = 0 // each line is its own block
	c.out = c.out[:0]
	c.ends, c.keys = c.ends[:0], c.keys[:0]
	c.points = 0
	c.open.close()
	c.forgetPoints()
	reason, why := c.encode(line)
	if reason != 0 {
		return nil, c.explain(line, reason, why)
	}
	return c.out, nil
}

// encode appends line's point to c.out. On failure it returns the reason,
// and for mapping and encoding failures what went wrong (parse errors are
// explained lazily, only when they are logged): a drop allocates nothing.
func (c *Conn) encode(line []byte) (Reason, string) {
	if pr := graphite.Parse(line, &c.line); pr != graphite.OK {
		return Reason(pr), ""
	}
	h := c.relay.cache.id(c.line.Path)
	s := c.relay.cache.get(h, c.receiveTime())
	if s == nil {
		s = c.firstSight(h)
	}
	if s.reason != 0 {
		return s.reason, s.text
	}
	if c.peer.IsValid() && s.text[len(s.text)-1] != 0 {
		var at uint64
		if v := c.relay.cfg.PeerVersion; v != nil {
			at = v()
		}
		if app, proc := s.app(), s.process(); app != c.peerApp || proc != c.peerProc || at != c.peerAt {
			c.peerApp, c.peerProc, c.peerAt = app, proc, at
			c.peerOK = c.relay.cfg.PeerCheck(app, proc, c.peer)
		}
		if !c.peerOK {
			return ReasonPeer, ""
		}
	}
	ts := c.line.Time
	if c.line.Now {
		ts = c.receiveTime()
	} else if ts-c.receiveTime() > int64(c.relay.cfg.MaxFuture) {
		return ReasonFuture, ""
	}
	var d delta.Sample
	if s.cumulative() {
		d = c.relay.cache.update(s, c.line.Value, ts, c.receiveTime())
		switch d.Outcome {
		case delta.NotCounter:
			return ReasonNotCounter, ""
		case delta.Future: // the tracker's bound is below the relay's
			return ReasonFuture, ""
		}
	}
	if c.out == nil {
		c.out = c.relay.block()
	}
	var b []byte
	if key := s.text[:s.keyEnd]; c.joins(s, key, ts) {
		// The open point's series and time: its fields go on, in place
		// of its time and newline.
		b = append(append(c.out[:c.open.end], ','), s.text[s.keyEnd+1:s.field]...)
	} else {
		c.open.start(s, key, ts)
		c.points++
		c.ends = append(c.ends, 0) // set once the point is written
		c.keys = append(c.keys, int32(len(c.out)+int(s.keyEnd)))
		if c.relay.cfg.JoinReports {
			c.notePoint(key, ts, len(c.out), int(s.keyEnd)+1)
		}
		b = append(c.out, s.text[:s.field]...)
	}
	b = appendFloat(b, c.line.Value) // finite: Parse rejects NaN and ±Inf
	if s.cumulative() && d.HasDelta() {
		b = appendFloat(s.appendDeltaKey(b, ",delta=", "_delta="), d.Delta)
		if d.HasRate {
			b = appendFloat(s.appendDeltaKey(b, ",rate=", "_rate="), d.Rate)
		}
	}
	c.open.end = len(b)
	if c.relay.cfg.JoinReports {
		c.noteField(s, len(b))
	}
	if ts != c.lastTS || len(c.tsText) == 0 {
		c.lastTS, c.tsText = ts, strconv.AppendInt(append(c.tsText[:0], ' '), ts, 10)
	}
	b = append(b, c.tsText...)
	c.out = append(b, '\n')
	c.ends[len(c.ends)-1] = int32(len(c.out))
	if s.appSum != c.lastApp && c.apps < maxAppsPerBlock {
		c.lastApp = s.appSum
		if s.appSum != 0 && c.relay.cfg.OnApp != nil {
			c.apps++
			c.relay.cfg.OnApp(s.app())
		}
	}
	return 0, ""
}

// firstSight describes a path not in the cache and puts it there. A
// cumulative series takes the baseline the last run saved, if any, once
// it is the one in the cache (another connection may have put it first).
func (c *Conn) firstSight(h delta.ID) *series {
	s := c.describe(c.line.Path)
	if got := c.relay.cache.put(h, s, c.receiveTime()); got != s {
		return got
	}
	if ds := c.relay.cfg.Deltas; ds != nil && s.cumulative() {
		mu := c.relay.cache.stripe(h)
		mu.Lock()
		ds.Tracker.Restore(c.stateKey(ds.Bucket, s.text[:s.field]), s.app(), &s.st, c.receiveTime())
		mu.Unlock()
	}
	return s
}

// zero is the placeholder value describe encodes fields with.
var zero, _ = lineprotocol.FloatValue(0)

// describe works out what lines of path become: the mapping, the checks
// InfluxDB would otherwise fail the write on, and the escaped text of the
// point up to its value, from line-protocol's encoder.
func (c *Conn) describe(path []byte) *series {
	refuse := func(reason Reason, err error) *series { return &series{reason: reason, text: err.Error()} }
	r := &c.result
	if err := c.relay.cfg.Mapper.Apply(path, r); err != nil {
		return refuse(ReasonMapping, err)
	}
	c.backslashes(r)
	if len(r.Measurement) > 0 && r.Measurement[0] == '#' {
		return refuse(ReasonEncode, errComment)
	}
	keyLen := len(r.Measurement)
	var app, proc []byte
	for _, t := range r.Tags {
		if bytes.Equal(t.Key, timeKey) {
			return refuse(ReasonTimeKey, errNoKey)
		}
		if bytes.Equal(t.Key, c.relay.appTag) {
			app = t.Value
		}
		if c.relay.cfg.PeerCheck != nil && bytes.Equal(t.Key, processKey) {
			proc = t.Value
		}
		keyLen += 2 + len(t.Key) + len(t.Value)
	}
	if bytes.Equal(r.Field, timeKey) {
		return refuse(ReasonTimeKey, errNoKey)
	}
	if keyLen > maxKeyLen {
		return refuse(ReasonKeyTooLong, fmt.Errorf("series key of %d bytes exceeds InfluxDB's limit of %d", keyLen, maxKeyLen))
	}
	if why := c.relay.names.check(r, app, c.relay.known, c.relay.cfg.Now()); why != "" {
		return refuse(ReasonNames, errors.New(why))
	}

	// Each field is encoded with the value 0: the text before that "0"
	// is what a point of the series starts with.
	e := &c.enc
	e.Reset()
	e.StartLineRaw(r.Measurement)
	appAt := 0 // where the app value is in the key, when escaping left it as it was
	for _, t := range r.Tags {
		n := len(e.Bytes())
		e.AddTagRaw(t.Key, t.Value)
		if len(app) > 0 && bytes.Equal(t.Key, c.relay.appTag) && len(e.Bytes())-n == 2+len(t.Key)+len(t.Value) {
			appAt = len(e.Bytes()) - len(t.Value)
		}
	}
	keyEnd := len(e.Bytes())
	e.AddFieldRaw(r.Field, zero)
	field := len(e.Bytes()) - 1
	s := &series{}
	if ds := c.relay.cfg.Deltas; ds != nil {
		name := r.Measurement
		if ds.MatchField && !bytes.Equal(r.Field, valueField) {
			name = r.Field // a Spark metric; a path that is not Spark's keeps its measurement
		}
		if cum, _ := ds.Rules.Match(path, name); cum {
			// Encoded to check them; a line writes them from the field.
			dk, rk := c.deltaFields(r.Field)
			e.AddFieldRaw(dk, zero)
			e.AddFieldRaw(rk, zero)
			s.st, s.flags = delta.Unknown(), s.flags|cumulative
			if !bytes.Equal(r.Field, valueField) {
				s.flags |= named
			}
		}
	}
	if err := e.Err(); err != nil {
		e.ClearErr()
		return refuse(ReasonEncode, err)
	}
	lp := e.Bytes()
	if len(app) == 0 || len(proc) > 255 {
		proc = nil // checked by application and process, or not at all
	}
	if len(lp)+len(app)+len(proc) > maxText {
		return refuse(ReasonKeyTooLong, fmt.Errorf("point of %d bytes before its value is too long", len(lp)))
	}
	s.appSum = appChecksum(app)
	if appAt != 0 {
		s.appAt, app = uint16(appAt), nil // read from the key: no copy
	}
	var text strings.Builder
	text.Grow(field + len(app) + len(proc) + 1) // exactly: the string keeps the builder's memory
	text.Write(lp[:field])
	s.field = uint16(text.Len())
	text.Write(app)
	text.Write(proc)
	text.WriteByte(byte(len(proc)))
	s.keyEnd = uint16(keyEnd)
	s.text = text.String()
	return s
}

// backslashes gives names holding backslashes the form InfluxDB 1.x stores
// them in: a measurement's "\," and "\ " are unescaped, and a trailing
// backslash, which line protocol cannot carry, is dropped from the
// measurement and from tag values (a tag left empty goes, as empty tags
// do). It copies only when it changes something, which Spark's paths never
// need.
func (c *Conn) backslashes(r *templates.Result) {
	if m := r.Measurement; bytes.IndexByte(m, '\\') >= 0 {
		out := c.meas[:0]
		for i := 0; i < len(m); i++ {
			if m[i] == '\\' && i+1 < len(m) && (m[i+1] == ',' || m[i+1] == ' ') {
				continue
			}
			out = append(out, m[i])
		}
		c.meas = out
		r.Measurement = bytes.TrimRight(out, `\`)
	}
	trimmed := false
	for i := range r.Tags {
		if v := r.Tags[i].Value; len(v) > 0 && v[len(v)-1] == '\\' {
			r.Tags[i].Value = bytes.TrimRight(v, `\`)
			trimmed = true
		}
	}
	if trimmed {
		r.Tags = slices.DeleteFunc(r.Tags, func(t templates.Tag) bool { return len(t.Value) == 0 })
	}
}

// receiveTime is the time the current block was read. One clock read per
// block is precise enough for stamping and idle tracking, and cheaper than
// one per line.
func (c *Conn) receiveTime() int64 {
	if c.now == 0 {
		c.now = c.relay.cfg.Now().UnixNano()
	}
	return c.now
}

// stateKey is what names a cumulative series' baseline in saved state
// (the tracker's ID of it): the bucket, a 0 byte and the point's text up
// to its value (escaped measurement, tags and field key), which no two
// series share.
func (c *Conn) stateKey(bucket, text string) []byte {
	c.key = append(append(append(c.key[:0], bucket...), 0), text...)
	return c.key
}

// States yields the baseline of every cumulative series the Relay keeps,
// under the ID it is saved as.
func (r *Relay) States(yield func(delta.ID, delta.State) bool) {
	if r.cfg.Deltas == nil {
		return
	}
	var key []byte
	r.cache.states(func(s *series, st delta.State) bool {
		key = append(append(append(key[:0], r.cfg.Deltas.Bucket...), 0), s.text[:s.field]...)
		return yield(r.cfg.Deltas.Tracker.ID(key), st)
	})
}

var (
	valueField = []byte("value")
	fieldDelta = []byte("delta")
	fieldRate  = []byte("rate")
)

// deltaFields returns the delta and rate field keys for a point whose
// field is f.
func (c *Conn) deltaFields(f []byte) (deltaKey, rateKey []byte) {
	if bytes.Equal(f, valueField) {
		return fieldDelta, fieldRate
	}
	c.deltaKey = append(append(c.deltaKey[:0], f...), "_delta"...)
	c.rateKey = append(append(c.rateKey[:0], f...), "_rate"...)
	return c.deltaKey, c.rateKey
}

// Flush implements graphite.ConnHandler: it hands the block's points to the
// sink and publishes the block's counts.
func (c *Conn) Flush() {
	if c.begun {
		// Logged once the points are with the writer: a checkpoint, which
		// waits for End, then knows they were taken before it.
		recv := c.now
		if recv == 0 {
			recv = c.relay.cfg.Now().UnixNano()
		}
		defer c.endBlock(recv)
	}
	c.now, c.apps = 0, 0
	st := &c.relay.stats
	if c.replaying {
		st = &Stats{} // counted when they were first taken
	}
	if c.points > 0 {
		lines := queue.Lines{Data: c.out, Ends: c.ends, Keys: c.keys}
		if c.rejoin {
			lines = c.joined()
			c.points = lines.Len()
		}
		if c.relay.cfg.Sink.AppendLines(lines, !c.relay.cfg.NonBlocking || c.replaying) {
			st.Points.Add(uint64(c.points))
		} else {
			c.dropped[ReasonQueueFull] += uint64(c.points)
			c.relay.cfg.Log.Warn("dropped points", zap.String("reason", ReasonQueueFull.String()),
				zap.Int("points", c.points), zap.Error(errQueueFull))
		}
		c.relay.release(c.out)
		if c.rejoin {
			c.relay.release(lines.Data)
		}
		c.out, c.ends, c.keys = nil, c.ends[:0], c.keys[:0]
		c.points = 0
	}
	c.open.close()
	c.forgetPoints()
	if c.lines > 0 {
		st.Lines.Add(c.lines)
		c.lines = 0
	}
	for i, n := range c.dropped {
		if n > 0 {
			st.Dropped[i].Add(n)
			c.dropped[i] = 0
		}
	}
}

// endBlock logs the block's lines, received at recv, in the ingest log.
func (c *Conn) endBlock(recv int64) {
	c.relay.cfg.Ingest.End(c.relay.cfg.IngestBlock, recv, c.raw)
	c.begun = false
	if cap(c.raw) > maxPooledBlock {
		c.raw = nil
	}
	c.raw = c.raw[:0]
}

// Close implements graphite.ConnHandler.
// The Conn must not be used after it.
func (c *Conn) Close() {
	c.Flush()
	c.remote, c.now, c.lastApp = nil, 0, 0
	c.peer, c.peerApp, c.peerProc, c.peerAt, c.peerOK = netip.Addr{}, "", "", 0, false
	c.relay.idle.Put(c)
}

// maxPooledBlock bounds the block buffer kept for reuse: a 64 KiB read
// of Spark's lines makes about 100 KiB of points.
const maxPooledBlock = 1 << 20

// maxAppsPerBlock bounds the OnApp calls per block of lines: Spark sends
// one application per connection, and a connection that carries thousands
// must not make thousands of calls (the annotator's discovery counts them).
const maxAppsPerBlock = 4

// maxIdleBlocks bounds the block buffers kept: more than the connections
// that process a block at once (graphite's processing slots).
const maxIdleBlocks = 64

// explain is the error of a dropped line: the parser's, worked out now,
// or why, which encode returned.
func (c *Conn) explain(line []byte, reason Reason, why string) error {
	switch {
	case reason < ReasonMapping:
		return graphite.Explain(line, graphite.Reason(reason))
	case reason == ReasonFuture:
		return fmt.Errorf("timestamp %s is more than %s after the time the line was received", time.Unix(0, c.line.Time).UTC().Format(time.RFC3339), c.relay.cfg.MaxFuture)
	case reason == ReasonPeer:
		return fmt.Errorf("sent from %s, not from the address Spark's REST API lists for the process", c.peer)
	case reason == ReasonNotCounter:
		return fmt.Errorf("value %g of a cumulative series is no counter's (negative, or beyond a Java long)", c.line.Value)
	}
	return errors.New(why)
}

// maxLoggedLine bounds how much of a bad line goes into a log entry.
const maxLoggedLine = 256

func (c *Conn) logDrop(line []byte, reason Reason, why string) {
	// NaN is routine (Spark reports NaN ratios) and InfluxDB 1.x drops it
	// silently too: count it, log it only at debug.
	level := zap.InfoLevel
	if reason == Reason(graphite.ReasonNaN) {
		level = zap.DebugLevel
	}
	ce := c.relay.cfg.Log.Check(level, "dropped line")
	if ce == nil {
		return
	}
	shown := line
	if len(shown) > maxLoggedLine {
		shown = shown[:maxLoggedLine]
	}
	fields := []zap.Field{
		zap.String("reason", reason.String()),
		zap.Error(c.explain(line, reason, why)),
		zap.ByteString("line", shown),
	}
	if c.remote != nil {
		fields = append(fields, zap.Stringer("remote", c.remote))
	}
	ce.Write(fields...)
}
