package queue

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"
)

func open(t *testing.T, cfg Config) *Queue {
	t.Helper()
	q, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// put reserves and queues a batch of one line of size bytes.
func put(t *testing.T, q *Queue, name string, size int) *Batch {
	t.Helper()
	if err := q.Reserve(size, false); err != nil {
		t.Fatalf("Reserve(%d) for %s: %v", size, name, err)
	}
	data := append(bytes.Repeat([]byte("x"), size-len(name)-1), name+"\n"...)
	b := &Batch{Data: data, Points: 1, First: time.Now()}
	q.Put(b)
	return b
}

// deliver takes n batches and says each delivered, returning their names.
func deliver(t *testing.T, q *Queue, n int) []string {
	t.Helper()
	var got []string
	for range n {
		b, ok := q.Get()
		if !ok {
			t.Fatalf("Get: nothing after %v", got)
		}
		got = append(got, name(b))
		q.Done(b, true)
	}
	return got
}

func name(b *Batch) string {
	s := string(b.Data)
	return s[bytes.LastIndexByte(b.Data[:len(b.Data)-1], 'x')+1 : len(s)-1]
}

// Memory only: Reserve refuses or waits when full, and a Done makes room.
func TestReserveWaitsForDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := open(t, Config{MaxBytes: 100})
		put(t, q, "a", 60)
		if err := q.Reserve(50, false); !errors.Is(err, ErrFull) {
			t.Fatalf("Reserve past the bound: %v, want ErrFull", err)
		}
		reserved := make(chan error)
		go func() { reserved <- q.Reserve(50, true) }()
		synctest.Wait()
		select {
		case err := <-reserved:
			t.Fatalf("Reserve returned %v while full", err)
		default:
		}
		b, ok := q.Get()
		if !ok || name(b) != "a" {
			t.Fatalf("Get: %v", ok)
		}
		q.Done(b, true)
		if err := <-reserved; err != nil {
			t.Fatalf("Reserve after Done: %v", err)
		}
		if st := q.Stats(); st.Bytes != 50 || st.Batches != 0 {
			t.Errorf("stats %+v: want the 50 bytes reserved and no batch", st)
		}
	})
}

// With a disk queue, batches in flight that hold all of memory do not
// make a producer wait: the batch being filled goes over the bound, and
// to disk once sealed; the next in order all the same.
func TestReserveWithDiskPassesInFlight(t *testing.T) {
	q := open(t, Config{MaxBytes: 100, Dir: t.TempDir()})
	put(t, q, "a", 60)
	put(t, q, "b", 40)
	a, _ := q.Get()
	b, _ := q.Get() // a and b in flight: nothing to spill
	if err := q.Reserve(50, false); err != nil {
		t.Fatalf("Reserve with every batch in flight: %v", err)
	}
	q.Put(&Batch{Data: append(bytes.Repeat([]byte("x"), 48), "c\n"...), Points: 1, First: time.Now()})
	if st := q.Stats(); st.Bytes != 150 || st.Spilled != 0 {
		t.Fatalf("stats %+v: want 150 bytes in memory, nothing spilled", st)
	}
	put(t, q, "d", 10) // c spills
	if st := q.Stats(); st.Bytes != 110 || st.Spilled != 1 {
		t.Fatalf("stats %+v: want c spilled, 110 bytes in memory", st)
	}
	q.Done(a, true)
	q.Done(b, true)
	if got := deliver(t, q, 2); got[0] != "c" || got[1] != "d" {
		t.Errorf("after the batches in flight: %v, want c then d", got)
	}
}

// With a disk queue nothing waits: the oldest batches spill, and come back
// before anything in memory, in order, also after a restart.
func TestSpillOrderAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	q := open(t, Config{MaxBytes: 100, Dir: dir})
	for i := range 5 {
		put(t, q, fmt.Sprint("b", i), 40)
	}
	if st := q.Stats(); st.Spilled != 3 || st.Bytes != 80 {
		t.Fatalf("stats %+v: want 3 batches spilled, 80 bytes in memory", st)
	}
	b, _ := q.Get() // b0, from disk
	q.Done(b, true)
	b, _ = q.Get() // b1, from disk, in flight at shutdown
	if name(b) != "b1" {
		t.Fatalf("second batch %q", name(b))
	}
	q.Drain()
	if err := q.Reserve(1, false); !errors.Is(err, ErrClosed) {
		t.Errorf("Reserve while draining: %v", err)
	}
	q.Done(b, false) // the sender gives up: b1 stays on disk
	if _, ok := q.Get(); ok {
		t.Fatal("Get handed out memory ahead of the disk backlog while draining")
	}
	left, err := q.Close()
	if err != nil || left.KeptPoints != 2 || left.LostPoints != 0 {
		t.Fatalf("Close: %+v, %v; want the 2 memory batches kept", left, err)
	}

	q = open(t, Config{MaxBytes: 100, Dir: dir})
	if got, want := deliver(t, q, 4), "[b1 b2 b3 b4]"; fmt.Sprint(got) != want {
		t.Errorf("after restart %v, want %s", got, want)
	}
	if st := q.Stats(); st.DiskBytes != 0 {
		t.Errorf("disk still holds %d bytes", st.DiskBytes)
	}
}

// A batch in flight at Close goes to disk in front of those waiting, whole,
// unless it was delivered; without a disk queue its points are lost.
func TestCloseKeepsInFlightFirst(t *testing.T) {
	for _, disk := range []bool{true, false} {
		t.Run(fmt.Sprint("disk=", disk), func(t *testing.T) {
			cfg := Config{}
			if disk {
				cfg.Dir = t.TempDir()
			}
			q := open(t, cfg)
			put(t, q, "sent", 20)
			put(t, q, "half", 20)
			put(t, q, "waiting", 20)
			sent, _ := q.Get()
			half, _ := q.Get()
			q.Done(sent, true)
			half.Points = 4
			half.Remaining.Store(2) // two of four delivered
			q.Drain()
			left, err := q.Close()
			if err != nil {
				t.Fatal(err)
			}
			if !disk {
				if left.LostPoints != 3 || left.LostBatches != 2 {
					t.Errorf("lost %+v, want 3 points in 2 batches", left)
				}
				return
			}
			if left.KeptPoints != 5 || left.LostPoints != 0 {
				t.Errorf("left %+v, want 5 points kept", left)
			}
			q = open(t, cfg)
			for _, want := range []string{"half", "waiting"} {
				b, ok := q.Get()
				if !ok || name(b) != want {
					t.Fatalf("after restart: %v, want %s", ok, want)
				}
				q.Done(b, true)
			}
		})
	}
}

// A done batch's memory is the next batch's, whether the batches that
// follow are a little larger or smaller; a buffer from a time of much
// smaller batches is let go.
func TestBufferReused(t *testing.T) {
	q := open(t, Config{MaxBytes: 1 << 30})
	fill := func(size int) *byte {
		buf := q.Buffer().Data
		buf = append(buf, bytes.Repeat([]byte("x"), size-1)...)
		buf = append(buf, '\n')
		p := unsafe.SliceData(buf)
		if err := q.Reserve(size, false); err != nil {
			t.Fatal(err)
		}
		q.Put(&Batch{Data: buf, Points: 1})
		b, _ := q.Get()
		q.Done(b, true) // delivered
		return p
	}
	// Batches of 90 000 to 110 000 bytes: memory is allocated while the
	// buffer grows to fit the largest, then reused.
	var last *byte
	news := 0
	for i := range 100 {
		size := 90_000 + (i*7919)%20_001
		if p := fill(size); p != last {
			news++
			last = p
		}
	}
	if news > 4 {
		t.Fatalf("100 batches took new memory %d times", news)
	}
	fill(1000) // sized by the batches before it
	small := fill(1000)
	if small == last {
		t.Fatal("batches of 1000 bytes keep a buffer grown for 100 000")
	}
	if p := fill(1100); p != small {
		t.Fatal("a batch of 1100 bytes after one of 1000 got new memory")
	}
}

// Symbolic links planted in the queue's directory are never followed: not
// to save the head, to start a segment or to put one in front, nor when
// the queue is opened again.
func TestPlantedLinksNotFollowed(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	plant := func(name string) {
		t.Helper()
		os.Remove(filepath.Join(dir, name))
		if err := os.Symlink(victim, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	q := open(t, Config{MaxBytes: 100, Dir: dir})
	q.disk.segMax = 100 // a segment per record
	plant("head")
	plant("head.tmp")
	plant(fmt.Sprintf("%016d.seg", firstSeq+2)) // the third segment

	put(t, q, "a", 60)
	put(t, q, "b", 60) // spills a into the first segment
	put(t, q, "c", 60) // spills b into a second one
	if err := q.Reserve(60, false); !errors.Is(err, ErrFull) {
		t.Errorf("Reserve with the third segment's name taken by a link: %v, want ErrFull (c stays in memory)", err)
	}
	a, _ := q.Get()
	q.Done(a, true)
	b, _ := q.Get()
	q.Done(b, true)
	front := fmt.Sprintf("%016d.seg", firstSeq) // a's segment, deleted: where Close puts batches in flight
	plant(front)
	c, _ := q.Get() // in flight at Close: put in front
	q.Drain()
	q.Done(c, false)
	if left, err := q.Close(); err != nil || left.KeptPoints != 1 {
		t.Fatalf("Close: %+v, %v; want c kept", left, err)
	}
	if got, _ := os.ReadFile(victim); string(got) != "precious" {
		t.Fatalf("the links' target was written: %q", got)
	}
	for _, n := range []string{"head", front} {
		if st, err := os.Lstat(filepath.Join(dir, n)); err != nil || !st.Mode().IsRegular() {
			t.Errorf("%s is not a regular file: %v", n, err)
		}
	}
	// Reopening delivers c and ignores the link that is left.
	q = open(t, Config{MaxBytes: 100, Dir: dir})
	if got, ok := q.Get(); !ok || name(got) != "c" {
		t.Fatalf("after reopening: %v", ok)
	}
	if st := q.Stats(); st.Damaged != 1 {
		t.Errorf("damaged %d, want the planted segment counted", st.Damaged)
	}
	if got, _ := os.ReadFile(victim); string(got) != "precious" {
		t.Fatalf("the link's target was written on reopen: %q", got)
	}
}

// An idle sender does not stop at Drain: the writer's last batch is Put
// after it, and must be handed out before Get says there is no more.
func TestLastBatchAfterDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := open(t, Config{})
		got := make(chan string, 2)
		go func() {
			for {
				b, ok := q.Get()
				if !ok {
					got <- "end"
					return
				}
				got <- name(b)
				q.Done(b, true)
			}
		}()
		synctest.Wait()                              // the sender waits in Get
		if err := q.Reserve(10, false); err != nil { // the batch being filled
			t.Fatal(err)
		}
		q.Drain()
		synctest.Wait()
		select {
		case g := <-got:
			t.Fatalf("the sender got %q at Drain, before the last batch", g)
		default:
		}
		q.Put(&Batch{Data: []byte("xxxxx" + "last\n"), Points: 1, First: time.Now()})
		if a, b := <-got, <-got; a != "last" || b != "end" {
			t.Errorf("sender got %q then %q, want the last batch then the end", a, b)
		}
	})
}

// Close waits for a producer that had room reserved when the senders
// stopped: its batch, Put after them, is kept on disk with the rest
// rather than added to a closed queue and lost uncounted.
func TestCloseWaitsForReservedBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		q := open(t, Config{Dir: dir})
		put(t, q, "first", 20)
		if err := q.Reserve(10, false); err != nil { // a producer about to seal
			t.Fatal(err)
		}
		q.Drain()
		type closed struct {
			left Leftover
			err  error
		}
		done := make(chan closed)
		go func() {
			left, err := q.Close()
			done <- closed{left, err}
		}()
		synctest.Wait()
		select {
		case c := <-done:
			t.Fatalf("Close returned %+v before the reserved batch was Put", c)
		default:
		}
		q.Put(&Batch{Data: []byte("xxxxx" + "last\n"), Points: 1, First: time.Now()})
		if c := <-done; c.err != nil || c.left.KeptPoints != 2 || c.left.LostPoints != 0 {
			t.Fatalf("Close: %+v, %v; want both batches kept", c.left, c.err)
		}
		q = open(t, Config{Dir: dir})
		if got := deliver(t, q, 2); fmt.Sprint(got) != "[first last]" {
			t.Errorf("after restart %v", got)
		}
	})
}
