package queue

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkBatchBuffer sets the queue's memory of done batches (Buffer,
// recycle) beside a sync.Pool of batch buffers and beside a new buffer
// for each batch. An op is one batch: its memory taken, filled with five
// blocks of 1000 points as the writer appends the relay's blocks (about
// 640 KiB, under the writer's 1 MiB and 5000 points), and given back when
// the batch is done, on every processor at once.
//
// The goroutine also allocates garbage, so that collections run: sync.Pool
// moves its contents to a victim cache at each collection and drops them
// at the next, the queue keeps them. garbage=40KiB is about what the whole
// service allocates per batch; garbage=1280KiB is a collection every few
// batches. The benchmark's heap is small, so collections come far more
// often than in the service: the figures are the worst case for
// sync.Pool.
func BenchmarkBatchBuffer(b *testing.B) {
	var data []byte
	for i := 0; len(data) < 128<<10; i++ {
		data = fmt.Appendf(data, "executor,applicationid=app-20261122101500-%04d,executorid=%d,host=10.0.%d.%d value=%d.5 1795300000000000000\n", i%7, i%20, i%3, i%250, i*7919)
	}
	block := Scan(data)
	block, _ = block.Cut(1000)
	const blocks = 5
	size := blocks * len(block.Data)
	for _, garbage := range []int{0, 40 << 10, 1280 << 10} {
		for _, src := range []string{"list", "syncpool", "make"} {
			b.Run(fmt.Sprintf("garbage=%dKiB/%s", garbage>>10, src), func(b *testing.B) {
				q, err := Open(Config{})
				if err != nil {
					b.Fatal(err)
				}
				q.lastSize = size
				var pool sync.Pool
				pool.New = func() any { return &Lines{Data: make([]byte, 0, size+size/8)} }
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						var l Lines
						var lp *Lines
						switch src {
						case "list":
							l = q.Buffer()
						case "syncpool":
							lp = pool.Get().(*Lines)
							l = *lp
						case "make":
							l = Lines{Data: make([]byte, 0, size+size/8)}
						}
						for range blocks {
							l.AppendLines(block)
						}
						if l.Len() != blocks*block.Len() || !bytes.HasSuffix(l.Data, block.Data) {
							b.Error("batch filled wrong")
						}
						switch src {
						case "list":
							q.mu.Lock()
							q.recycle(&Batch{Data: l.Data, Ends: l.Ends, Keys: l.Keys})
							q.mu.Unlock()
						case "syncpool":
							*lp = Lines{Data: l.Data[:0], Ends: l.Ends[:0], Keys: l.Keys[:0]}
							pool.Put(lp)
						}
						litter(garbage)
					}
				})
			})
		}
	}
}

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
