package graphite

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkReadBuffers sets the ways to hold the TCP server's read
// buffers side by side, as process takes and returns them: syncpool is a
// sync.Pool, as TCPServer.bufs is; list a bounded channel of idle buffers;
// make a new buffer for each block. An op is one block: a buffer taken, the block read into
// it (copied from memory: a Spark report of about 10 KiB, or a full 64 KiB
// read), its lines split and handed to a handler that counts them, the
// buffer returned, on every processor at once.
//
// The goroutine also allocates garbage, so that collections run: sync.Pool
// moves its contents to a victim cache at each collection and drops them
// at the next, a free list keeps them. garbage=8KiB is about what the
// whole service allocates per block; garbage=256KiB is a collection every
// few dozen blocks. The benchmark's heap is small, so collections come far
// more often than in the service: the figures are the worst case for
// sync.Pool.
func BenchmarkReadBuffers(b *testing.B) {
	var full []byte
	for len(full) < blockSize {
		for _, l := range sparkLines {
			full = append(append(full, l...), '\n')
		}
	}
	full = full[:blockSize]
	report := full[:10<<10]
	for _, data := range []struct {
		name string
		b    []byte
	}{{"report", report}, {"block", full}} {
		for _, garbage := range []int{0, 8 << 10, 256 << 10} {
			for _, src := range []struct {
				name string
				new  func(size int) bufSource
			}{
				{"list", newListBufs},
				{"syncpool", newPoolBufs},
				{"make", func(size int) bufSource { return makeBufs(size) }},
			} {
				b.Run(fmt.Sprintf("%s/garbage=%dKiB/%s", data.name, garbage>>10, src.name), func(b *testing.B) {
					s := src.new(max(blockSize, DefaultMaxLineLength+2))
					b.SetBytes(int64(len(data.b)))
					b.ReportAllocs()
					b.RunParallel(func(pb *testing.PB) {
						h := &countLines{}
						sp := splitter{ch: h, maxLine: DefaultMaxLineLength}
						ops := 0
						for pb.Next() {
							ops++
							bp := s.get()
							buf := *bp
							n := copy(buf, data.b)
							sp.block(buf, 0, n, false)
							s.put(bp)
							litter(garbage)
						}
						if ops > 0 && (sp.lines == 0 || h.n != int(sp.lines)) {
							b.Error("no lines split")
						}
					})
				})
			}
		}
	}
}

// countLines is a ConnHandler that only counts.
type countLines struct{ n int }

func (h *countLines) Line([]byte) { h.n++ }
func (h *countLines) Flush()      {}
func (h *countLines) Close()      {}

// bufSource holds idle read buffers.
type bufSource interface {
	get() *[]byte
	put(*[]byte)
}

// listBufs is a bounded channel of idle buffers.
type listBufs struct {
	ch   chan *[]byte
	size int
}

func newListBufs(size int) bufSource { return &listBufs{make(chan *[]byte, 64), size} }

func (s *listBufs) get() *[]byte {
	select {
	case b := <-s.ch:
		return b
	default:
		b := make([]byte, s.size)
		return &b
	}
}

func (s *listBufs) put(b *[]byte) {
	select {
	case s.ch <- b:
	default:
	}
}

// poolBufs is a sync.Pool of buffers.
type poolBufs struct{ p sync.Pool }

func newPoolBufs(size int) bufSource {
	s := &poolBufs{}
	s.p.New = func() any {
		b := make([]byte, size)
		return &b
	}
	return s
}

func (s *poolBufs) get() *[]byte  { return s.p.Get().(*[]byte) }
func (s *poolBufs) put(b *[]byte) { s.p.Put(b) }

// makeBufs makes a buffer each time.
type makeBufs int

func (s makeBufs) get() *[]byte {
	b := make([]byte, s)
	return &b
}

func (makeBufs) put(*[]byte) {}

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
