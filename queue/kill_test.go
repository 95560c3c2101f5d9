package queue

import (
	"fmt"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/statefile/statefiletest"
)

// A disk queue written and read by a process killed at random moments
// (records appended across many segments, the head saved as records are
// delivered) opens again whole: its records come back in the order they
// were written, none damaged, from at most the last saved head on, and it
// takes new ones.
func TestKilledDuringDiskWrites(t *testing.T) {
	record := func(n int) []byte { return fmt.Appendf(nil, "m,n=%d value=%d %d\n", n, n, n) }
	statefiletest.KillDuring(t, "disk-queue", 10, 300*time.Millisecond, func(dir string, ready func()) {
		q, err := openDiskQueue(dir, 1<<30)
		if err != nil {
			panic(err)
		}
		q.segMax = 4 << 10 // segments rotate and are deleted all the time
		for n := 1; ; n++ {
			if _, err := q.push(record(n), 1, time.Now()); err != nil {
				panic(err)
			}
			if n%3 == 0 { // deliver one of three: the head moves on
				q.next()
				q.ack()
			}
			if n%200 == 0 { // and is saved, as at most once a second
				q.mu.Lock()
				q.saveHead()
				q.mu.Unlock()
			}
			if n == 1 {
				ready()
			}
		}
	}, func(t *testing.T, dir string, round int) {
		q := mustOpen(t, dir, 1<<30)
		got := drain(q)
		if q.damaged() != 0 {
			t.Errorf("round %d: %d damaged records", round, q.damaged())
		}
		if len(got) == 0 {
			t.Fatalf("round %d: nothing left to deliver", round)
		}
		var first int
		if _, err := fmt.Sscanf(got[0], "m,n=%d", &first); err != nil {
			t.Fatalf("round %d: first record %q", round, got[0])
		}
		for i, r := range got {
			if r != string(record(first+i)) {
				t.Fatalf("round %d: record %d is %q, want %q", round, i, r, record(first+i))
			}
		}
		// What the kill left takes new records; the next writer starts
		// from an empty queue.
		if _, err := q.push(record(0), 1, time.Now()); err != nil {
			t.Fatal(err)
		}
		if d := drain(q); len(d) != 1 {
			t.Errorf("round %d: after a push, %d records", round, len(d))
		}
		if err := q.close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: %d records from %d on", round, len(got), first)
	})
}
