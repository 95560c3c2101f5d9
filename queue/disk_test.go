package queue

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/statefile"
)

func mustOpen(t testing.TB, dir string, max int64) *diskQueue {
	t.Helper()
	q, err := openDiskQueue(dir, max)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func batchOf(i, lines int) string {
	var b strings.Builder
	for l := range lines {
		fmt.Fprintf(&b, "m,batch=%d value=%d %d\n", i, l, i*1000+l)
	}
	return b.String()
}

// drain reads and acknowledges everything, returning the payloads.
func drain(q *diskQueue) []string {
	var out []string
	for {
		r, ok := q.next()
		if !ok {
			return out
		}
		out = append(out, string(r.data))
		q.ack()
	}
}

// Records come back in order, with their points and write times, across
// segments and across a close and reopen; delivered segments are deleted.
func TestDiskQueueOrderAndRestart(t *testing.T) {
	dir := t.TempDir()
	q := mustOpen(t, dir, 1<<30)
	q.segMax = 4 << 10 // many segments
	t0 := time.Unix(1795300000, 0)
	var want []string
	for i := range 50 {
		b := batchOf(i, 5)
		want = append(want, b)
		if dropped, err := q.push([]byte(b), 5, t0.Add(time.Duration(i)*time.Second)); err != nil || dropped != 0 {
			t.Fatal(dropped, err)
		}
	}
	// Deliver 20, then "restart".
	for i := range 20 {
		r, ok := q.next()
		if !ok || string(r.data) != want[i] || r.points != 5 || !r.written.Equal(t0.Add(time.Duration(i)*time.Second)) {
			t.Fatalf("record %d: %v %+v", i, ok, r)
		}
		q.ack()
	}
	if _, oldest := q.size(); !oldest.Equal(t0.Add(20 * time.Second)) {
		t.Errorf("oldest %v", oldest)
	}
	if err := q.close(); err != nil {
		t.Fatal(err)
	}
	q = mustOpen(t, dir, 1<<30)
	got := drain(q)
	if len(got) != 30 || got[0] != want[20] || got[29] != want[49] {
		t.Fatalf("after reopen: %d records", len(got))
	}
	if b, oldest := q.size(); b != 0 || !oldest.IsZero() {
		t.Errorf("empty queue: %d bytes, oldest %v", b, oldest)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	if len(segs) != 1 {
		t.Errorf("%d segment files left after delivery: %v", len(segs), segs)
	}
	q.close()
}

// The head is saved in its versioned form; a head of version 1 (no magic,
// as an older sparkpulse saved it) is read still, and one that fails its
// checksum is not (the queue then starts from its first segment).
func TestDiskQueueHeadVersions(t *testing.T) {
	dir := t.TempDir()
	q := mustOpen(t, dir, 1<<30)
	for i := range 3 {
		q.push([]byte(batchOf(i, 1)), 1, time.Now())
	}
	q.next()
	q.ack()
	if err := q.close(); err != nil {
		t.Fatal(err)
	}
	head, err := os.ReadFile(filepath.Join(dir, "head"))
	if err != nil || len(head) != headSize || string(head[:8]) != headMagic {
		t.Fatalf("head %q, %v", head, err)
	}
	for _, c := range []struct {
		name string
		head []byte
		want int // records left
	}{
		{"version 2", head, 2},
		{"version 1", binary.LittleEndian.AppendUint32(slices.Clone(head[8:24]), statefile.Checksum(head[8:24])), 2},
		{"damaged", append(slices.Clone(head[:27]), head[27]^1), 3},
	} {
		if err := os.WriteFile(filepath.Join(dir, "head"), c.head, 0o600); err != nil {
			t.Fatal(err)
		}
		if got := len(drainCopy(t, dir)); got != c.want {
			t.Errorf("%s: %d records left, want %d", c.name, got, c.want)
		}
	}
}

// drainCopy drains a copy of the queue in dir, leaving dir as it is.
func drainCopy(t *testing.T, dir string) []string {
	t.Helper()
	cp := t.TempDir()
	names, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(cp, filepath.Base(n)), b, 0o600)
	}
	q := mustOpen(t, cp, 1<<30)
	defer q.close()
	return drain(q)
}

// A record handed out and not acknowledged (a crash, or Close giving up) is
// handed out again after reopening.
func TestDiskQueueUnackedRedelivered(t *testing.T) {
	dir := t.TempDir()
	q := mustOpen(t, dir, 1<<30)
	q.push([]byte("a 1 1\n"), 1, time.Now())
	q.push([]byte("b 1 1\n"), 1, time.Now())
	r, _ := q.next()
	q.release()
	if r2, _ := q.next(); string(r2.data) != string(r.data) {
		t.Errorf("released record not handed out again: %q", r2.data)
	}
	q.close()
	q = mustOpen(t, dir, 1<<30)
	if got := drain(q); strings.Join(got, "") != "a 1 1\nb 1 1\n" {
		t.Errorf("after reopen: %q", got)
	}
}

// Over the bound, the oldest segments go first, and their points are
// counted; a record in flight from a dropped segment is still delivered
// once.
func TestDiskQueueBound(t *testing.T) {
	q := mustOpen(t, t.TempDir(), 64<<10)
	q.segMax = 8 << 10
	var dropped int
	q.push([]byte(batchOf(0, 40)), 40, time.Now())
	inFlight, _ := q.next()
	for i := 1; i < 200; i++ {
		d, err := q.push([]byte(batchOf(i, 40)), 40, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		dropped += d
	}
	q.ack() // of the record from a dropped segment: ignored
	b, _ := q.size()
	if b > 64<<10 {
		t.Errorf("queue holds %d bytes, bound 64 KiB", b)
	}
	got := drain(q)
	if delivered := len(got) * 40; delivered+dropped+40 != 8000 || dropped == 0 {
		t.Errorf("delivered %d + dropped %d + in flight 40 != 8000 points sent", delivered, dropped)
	}
	if !strings.HasPrefix(string(inFlight.data), "m,batch=0 ") || got[len(got)-1] != batchOf(199, 40) {
		t.Errorf("in flight %q, last %q", string(inFlight.data[:20]), got[len(got)-1][:20])
	}
	if q.dropped != int64(dropped) {
		t.Errorf("dropped counter %d, want %d", q.dropped, dropped)
	}
}

// A crash in the middle of a write leaves a partial record: it is cut off
// at open, and everything before it is delivered.
func TestDiskQueueTornTail(t *testing.T) {
	dir := t.TempDir()
	q := mustOpen(t, dir, 1<<30)
	q.push([]byte(batchOf(1, 3)), 3, time.Now())
	q.push([]byte(batchOf(2, 3)), 3, time.Now())
	q.close()
	seg := filepath.Join(dir, fmt.Sprintf("%016d.seg", uint64(firstSeq)))
	st, _ := os.Stat(seg)
	if err := os.Truncate(seg, st.Size()-7); err != nil {
		t.Fatal(err)
	}
	q = mustOpen(t, dir, 1<<30)
	if got := drain(q); len(got) != 1 || got[0] != batchOf(1, 3) {
		t.Errorf("after a torn write: %q", got)
	}
	// New records go after the cut.
	q.push([]byte(batchOf(3, 3)), 3, time.Now())
	if got := drain(q); len(got) != 1 || got[0] != batchOf(3, 3) {
		t.Errorf("after appending: %q", got)
	}
}

// A record whose payload is damaged is skipped alone, also in the segment
// being written when the queue is opened (which is repaired only at a torn
// end); one whose length is damaged ends its segment, and the following
// segments are still read.
func TestDiskQueueCorruptRecordSkipped(t *testing.T) {
	for _, tc := range []struct {
		name      string
		segMax    int64
		record    int // which record to damage
		at        int // and which of its bytes
		delivered []int
	}{
		{"payload", 1 << 10, 0, recHeader + 3, []int{1, 2, 3, 4, 5}},
		{"payload in the tail segment", 1 << 20, 2, recHeader + 3, []int{0, 1, 3, 4, 5}},
		{"length", 1 << 10, 0, 2, nil}, // nil: the records after the first segment
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			q := mustOpen(t, dir, 1<<30)
			q.segMax = tc.segMax
			inFirst := 0 // records in the first segment
			for i := range 6 {
				q.push([]byte(batchOf(i, 8)), 8, time.Now())
				if len(q.segs) == 1 {
					inFirst++
				}
			}
			q.close()
			off := len(segMagic) + tc.at
			for i := range tc.record {
				off += recHeader + len(batchOf(i, 8))
			}
			seg := filepath.Join(dir, fmt.Sprintf("%016d.seg", uint64(firstSeq)))
			b, _ := os.ReadFile(seg)
			b[off] ^= 0xff
			os.WriteFile(seg, b, 0o640)
			want := tc.delivered
			if want == nil {
				for i := inFirst; i < 6; i++ {
					want = append(want, i)
				}
				if inFirst < 2 || len(want) == 0 {
					t.Fatalf("%d of 6 records in the first segment: the test needs several segments of several records", inFirst)
				}
			}
			q = mustOpen(t, dir, 1<<30)
			got := drain(q)
			var wantData []string
			for _, i := range want {
				wantData = append(wantData, batchOf(i, 8))
			}
			if q.damaged() != 1 || !slices.Equal(got, wantData) {
				t.Errorf("damaged %d, delivered %d records, want records %v", q.damaged(), len(got), want)
			}
		})
	}
}

// The reader survives any bytes in a segment file and its head file.
func FuzzDiskQueueOpen(f *testing.F) {
	dir := f.TempDir()
	q := mustOpen(f, dir, 1<<30)
	q.push([]byte(batchOf(1, 2)), 2, time.Unix(1, 0))
	q.push([]byte(batchOf(2, 2)), 2, time.Unix(2, 0))
	q.close()
	seg, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%016d.seg", uint64(firstSeq))))
	head, _ := os.ReadFile(filepath.Join(dir, "head"))
	f.Add(seg, head)
	f.Add(seg[:len(seg)-3], head)
	f.Add([]byte(segMagic), []byte{})
	f.Add([]byte{}, head)
	f.Fuzz(func(t *testing.T, seg, head []byte) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("%016d.seg", uint64(firstSeq))), seg, 0o640)
		os.WriteFile(filepath.Join(dir, "head"), head, 0o640)
		q, err := openDiskQueue(dir, 1<<30)
		if err != nil {
			return
		}
		defer q.close()
		for range 1000 {
			r, ok := q.next()
			if !ok {
				break
			}
			if r.points < 0 || len(r.data) > len(seg) {
				t.Fatalf("impossible record %+v", r)
			}
			q.ack()
		}
		if _, err := q.push([]byte("x 1 1\n"), 1, time.Now()); err != nil {
			t.Fatal(err)
		}
		if r, ok := q.next(); !ok || string(r.data) != "x 1 1\n" {
			t.Fatalf("a record pushed after recovery: %+v %v", r, ok)
		}
	})
}

// Batches put in front come first, then the queue goes on where it was.
func TestDiskQueuePushFront(t *testing.T) {
	q := mustOpen(t, t.TempDir(), 1<<30)
	for i := range 4 {
		q.push([]byte(batchOf(i, 2)), 2, time.Now())
	}
	drainOne := func() string { r, _ := q.next(); q.ack(); return string(r.data) }
	if got := drainOne(); got != batchOf(0, 2) {
		t.Fatalf("first: %q", got)
	}
	if err := q.pushFront([]diskRecord{{data: []byte(batchOf(90, 2)), points: 2}, {data: []byte(batchOf(91, 2)), points: 2}}); err != nil {
		t.Fatal(err)
	}
	got := drain(q)
	want := []string{batchOf(90, 2), batchOf(91, 2), batchOf(1, 2), batchOf(2, 2), batchOf(3, 2)}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("order after pushFront:\n%q\nwant\n%q", got, want)
	}
	if b, _ := q.size(); b != 0 {
		t.Errorf("%d bytes left", b)
	}
}
