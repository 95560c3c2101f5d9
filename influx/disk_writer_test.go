package influx

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sparkpulse/sparkpulse/queue"
)

// InfluxDB is down: Append never blocks, batches beyond the memory bound go
// to the disk queue, Close keeps what is left in memory there too, and a
// new writer on the same directory delivers every point exactly once, the
// disk backlog first.
func TestDiskQueueThroughOutageAndRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var up atomic.Bool
		f := &fakeInflux{respond: func(r *request, n int) (int, http.Header, string) {
			if !up.Load() {
				h, b := v1Error("timeout")
				return http.StatusServiceUnavailable, h, b
			}
			return http.StatusNoContent, nil, ""
		}}
		dir := t.TempDir()
		cfg := Config{BatchSize: 10, Queue: queue.Config{MaxBytes: 2 << 10, Dir: dir}, MaxRetryBackoff: time.Second}
		w := newBubbleWriter(t, f, cfg)
		for i := 0; i < 500; i += 10 {
			w.Append(lines(i, 10), true) // never blocks: the overflow spills
		}
		synctest.Wait()
		st := w.Stats()
		if st.DiskSpilled == 0 || st.DiskBytes == 0 || st.QueuedBytes > 2<<10+600 || st.PeakBacklog < 20_000 {
			t.Fatalf("stats %+v", st)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := w.Close(ctx); err != nil {
			t.Fatalf("Close with InfluxDB down and a disk queue: %v", err)
		}
		if ctx.Err() != nil {
			t.Error("Close retried until its deadline instead of keeping the batches on disk")
		}
		if len(f.storedLines()) != 0 {
			t.Fatal("stored while down")
		}

		up.Store(true)
		w = newBubbleWriter(t, f, cfg)
		for w.Stats().DiskBytes > 0 {
			advance(100 * time.Millisecond)
		}
		w.Append(lines(500, 5), true)
		closeOK(t, w)
		stored := f.storedLines()
		want := strings.Split(strings.TrimSuffix(string(lines(0, 505)), "\n"), "\n")
		got := slices.Clone(stored)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("stored %d lines, want each of the %d exactly once", len(stored), len(want))
		}
		// The backlog went first, in the order it was written.
		if stored[len(stored)-1] != strings.TrimSuffix(string(lines(504, 1)), "\n") ||
			!slices.IsSortedFunc(stored[:500], func(a, b string) int { return strings.Compare(lineTime(a), lineTime(b)) }) {
			t.Errorf("delivery order: first %q, last %q", stored[0], stored[len(stored)-1])
		}
	})
}

func lineTime(l string) string { return l[strings.LastIndexByte(l, ' ')+1:] }

// Without a disk queue, TryAppend refuses what does not fit, where Append
// would wait.
func TestTryAppendRefusesWhenFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, _, release := heldWriter(t)
		line := []byte("m value=1\n")
		if !w.Append(line, false) || !w.Append(line, false) {
			t.Fatal("refused with room left")
		}
		synctest.Wait()
		if w.Append(line, false) {
			t.Fatal("accepted beyond the bound")
		}
		close(release)
		closeOK(t, w)
		if st := w.Stats(); st.PointsWritten != 2 {
			t.Errorf("written %d", st.PointsWritten)
		}
	})
}

// WaitRoom blocks while the queue is over three quarters full, and returns
// once deliveries make room, or when done is closed; with a disk queue it
// never blocks.
func TestWaitRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, f, release := heldWriter(t)
		line := []byte("m value=1\n")
		w.Append(line, true)
		w.Append(line, true) // 20 bytes: over three quarters of 25
		synctest.Wait()

		roomy := make(chan struct{})
		go func() { w.WaitRoom(nil); close(roomy) }()
		done := make(chan struct{})
		gaveUp := make(chan struct{})
		go func() { w.WaitRoom(done); close(gaveUp) }()
		synctest.Wait()
		select {
		case <-roomy:
			t.Fatal("WaitRoom returned while the queue was full")
		case <-gaveUp:
			t.Fatal("WaitRoom returned before done was closed")
		default:
		}
		close(done)
		<-gaveUp
		close(release) // deliveries make room
		<-roomy
		closeOK(t, w)

		d := newBubbleWriter(t, f, Config{BatchSize: 1, MaxInFlight: 1, Queue: queue.Config{MaxBytes: 25, Dir: t.TempDir()}})
		for range 5 {
			d.Append(line, true)
		}
		d.WaitRoom(nil) // spills rather than blocks
		closeOK(t, d)
	})
}
