package relay

import (
	"bytes"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sparkpulse/sparkpulse/queue"
	"github.com/sparkpulse/sparkpulse/spark"
)

// The benchmarks in this file set the ways to keep the Relay's block
// buffers and idle Conns side by side, on the paths that use them:
// bounded free lists (the Relay's stack of blocks, a channel of Conns),
// sync.Pools (the Relay's pool of Conns), and no reuse at all (a new
// buffer or Conn each time), while the goroutine allocates garbage at a
// given rate so that collections run: sync.Pool moves its contents to a
// victim cache at each collection and drops them at the next, a free list
// keeps them.
//
// garbage=8KiB is about what the whole service allocates per block of
// 1000 lines (BenchmarkTCP's few bytes per line, the writer's requests);
// garbage=256KiB is a collection every few dozen blocks. The benchmark's
// heap is small, so collections come far more often than in the service,
// whose series cache sets a larger heap goal: the figures are the worst
// case for sync.Pool.

// poolGarbage is the garbage levels the benchmarks run at, in bytes per
// block or per report.
var poolGarbage = []int{0, 8 << 10, 256 << 10}

// garbageSink keeps the garbage reachable until the next allocation, so
// the compiler keeps the allocation.
var garbageSink atomic.Int64

// litter allocates n bytes of garbage, in 1 KiB objects as a service's
// small allocations are.
func litter(n int) {
	var keep []byte
	for ; n > 0; n -= 1 << 10 {
		keep = make([]byte, min(n, 1<<10))
	}
	garbageSink.Add(int64(len(keep)))
}

// firstBlock keeps a copy of the first block handed on.
type firstBlock struct{ data []byte }

func (s *firstBlock) AppendLines(l queue.Lines, _ bool) bool {
	if s.data == nil {
		s.data = bytes.Clone(l.Data)
	}
	return true
}

// encodedBlock returns the points of a block of 1000 simulated Spark
// lines as the Relay encodes them, one point per element.
func encodedBlock(tb testing.TB) [][]byte {
	lines := simulated(tb, "", 2)
	s := &firstBlock{}
	c := New(Config{Mapper: spark.NewMapper(spark.Options{}), Sink: s}).NewConn(nil)
	for _, l := range lines[:1000] {
		c.Line(l)
	}
	c.Flush()
	pts := bytes.SplitAfter(s.data, []byte("\n"))
	if len(pts) < 500 {
		tb.Fatalf("%d points from 1000 lines", len(pts))
	}
	return pts
}

// blockSource is where a block buffer comes from and goes back to: its
// cycle takes one, appends the points to it and gives it back.
type blockSource interface{ cycle(pts [][]byte) }

// relayBlocks is the Relay's own stack (block, release).
type relayBlocks struct{ r *Relay }

func (s relayBlocks) cycle(pts [][]byte) {
	out := s.r.block()
	for _, p := range pts {
		out = append(out, p...)
	}
	s.r.release(out)
}

// poolBlocks is a sync.Pool behind block and release as they are called:
// release is given the slice a Conn holds, which the pool must box.
type poolBlocks struct{ p *sync.Pool }

func (s poolBlocks) cycle(pts [][]byte) {
	var out []byte
	if b, ok := s.p.Get().(*[]byte); ok {
		out = *b
	} else {
		out = newBlock()
	}
	for _, p := range pts {
		out = append(out, p...)
	}
	if cap(out) <= maxPooledBlock {
		b := out[:0]
		s.p.Put(&b)
	}
}

// heldBlocks is a sync.Pool of buffers held by pointer from taking to
// giving back, as a Conn would hold its block to keep it in a pool
// without boxing it.
type heldBlocks struct{ p *sync.Pool }

func (s heldBlocks) cycle(pts [][]byte) {
	bp, ok := s.p.Get().(*[]byte)
	if !ok {
		b := newBlock()
		bp = &b
	}
	out := *bp
	for _, p := range pts {
		out = append(out, p...)
	}
	if cap(out) <= maxPooledBlock {
		*bp = out[:0]
		s.p.Put(bp)
	}
}

// makeBlocks makes a block buffer each time, as block does when its stack
// is empty.
type makeBlocks struct{}

func (makeBlocks) cycle(pts [][]byte) {
	out := newBlock()
	for _, p := range pts {
		out = append(out, p...)
	}
}

// newBlock makes a block buffer on the heap, as block does.
//
//go:noinline
func newBlock() []byte { return make([]byte, 0, 48<<10) }

// BenchmarkBlockSource is the block buffer's cycle in Conn: taken at a
// block's first point, filled with the block's points (those of 1000
// Spark lines, appended one at a time as encode does), released at Flush,
// on every processor at once. An op is one block.
func BenchmarkBlockSource(b *testing.B) {
	pts := encodedBlock(b)
	size := 0
	for _, p := range pts {
		size += len(p)
	}
	for _, garbage := range poolGarbage {
		for _, src := range []struct {
			name string
			new  func() blockSource
		}{
			{"list", func() blockSource { return relayBlocks{New(Config{})} }},
			{"syncpool", func() blockSource { return poolBlocks{&sync.Pool{}} }},
			{"syncpool-held", func() blockSource { return heldBlocks{&sync.Pool{}} }},
			{"make", func() blockSource { return makeBlocks{} }},
		} {
			b.Run(fmt.Sprintf("garbage=%dKiB/%s", garbage>>10, src.name), func(b *testing.B) {
				s := src.new()
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						s.cycle(pts)
						litter(garbage)
					}
				})
			})
		}
	}
}

// BenchmarkConnSource is a Spark report's connection as the Relay sees
// it: NewConn, the report's lines (one process's share of a round of a
// simulated cluster, every series seen before), Close, on every processor
// at once. An op is one report. syncpool is the Relay's own pool of idle
// Conns. list keeps them in a channel of up to 256 instead: Close puts a
// Conn in the Relay's pool, from which it is taken back at once (from the
// processor's own slot, some ns of the tens of µs a report takes). make
// flushes a Conn rather than closing it, so none is ever kept.
func BenchmarkConnSource(b *testing.B) {
	lines := simulated(b, "", 2)
	perRound := len(lines) / 2
	const processes = 2 * (20 + 1) // simulated's apps × (executors + driver)
	per := perRound / processes
	var reports [][][]byte
	for i := 0; i+per <= perRound; i += per {
		reports = append(reports, lines[perRound+i:perRound+i+per])
	}
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
	for _, garbage := range poolGarbage {
		for _, src := range []string{"syncpool", "list", "make"} {
			b.Run(fmt.Sprintf("garbage=%dKiB/%s", garbage>>10, src), func(b *testing.B) {
				r := New(Config{Mapper: spark.NewMapper(spark.Options{}), Sink: &countingSink{}})
				warm := r.NewConn(addr)
				for _, l := range lines {
					warm.Line(l)
				}
				warm.Close()
				get := func() *Conn { return r.NewConn(addr).(*Conn) }
				put := (*Conn).Close
				switch src {
				case "list":
					idle := make(chan *Conn, 256)
					get = func() *Conn {
						select {
						case c := <-idle:
							c.remote = addr
							return c
						default:
							return r.NewConn(addr).(*Conn)
						}
					}
					put = func(c *Conn) {
						c.Close()
						if c, ok := r.idle.Get().(*Conn); ok {
							select {
							case idle <- c:
							default:
							}
						}
					}
				case "make":
					put = (*Conn).Flush
				}
				b.ReportAllocs()
				var next atomic.Int64
				b.RunParallel(func(pb *testing.PB) {
					i := int(next.Add(7))
					for pb.Next() {
						c := get()
						for _, l := range reports[i%len(reports)] {
							c.Line(l)
						}
						put(c)
						litter(garbage)
						i++
					}
				})
			})
		}
	}
}
