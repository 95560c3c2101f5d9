package ingestlog

import (
	"fmt"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/statefile/statefiletest"
)

// An ingest log appended to, rotated and dropped by a process killed at
// random moments replays whole: its records in the order they were
// appended, from the oldest segment kept on, none damaged; the next run
// appends after it.
func TestKilledDuringAppends(t *testing.T) {
	lines := func(n int) string { return fmt.Sprintf("app-1.1.executor.runTime.count %d %d\n", n, n) }
	statefiletest.KillDuring(t, "ingest-log", 10, 300*time.Millisecond, func(dir string, ready func()) {
		l, err := Open(dir, "fp", 0, nil)
		if err != nil {
			panic(err)
		}
		from, err := l.Rotate(nil)
		if err != nil {
			panic(err)
		}
		for n := 1; ; n++ {
			appendRecord(l, record{n, int64(n), lines(n)})
			if n%500 == 0 { // a checkpoint: a new segment, the older ones dropped
				next, err := l.Rotate(nil)
				if err != nil {
					panic(err)
				}
				if err := l.Drop(from); err != nil {
					panic(err)
				}
				from = next
			}
			if n == 1 {
				ready()
			}
		}
	}, func(t *testing.T, dir string, round int) {
		l, err := Open(dir, "fp", 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := replayAll(t, l, 0)
		if err != nil || l.Damaged() != 0 || len(got) == 0 {
			t.Fatalf("round %d: %d records, %d damaged, %v", round, len(got), l.Damaged(), err)
		}
		for i, r := range got {
			if n := got[0].block + i; r != (record{n, int64(n), lines(n)}) {
				t.Fatalf("round %d: record %d is %+v, want block %d", round, i, r, n)
			}
		}
		// The next run's segments come after these; this round's are
		// dropped, as a checkpoint would.
		next, err := l.Rotate(nil)
		if err != nil {
			t.Fatal(err)
		}
		appendRecord(l, record{0, 0, lines(0)})
		if again, err := replayAll(t, l, next); err != nil || len(again) != 1 {
			t.Errorf("round %d: after the restart's append: %v, %v", round, again, err)
		}
		if err := l.Drop(next + 1); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: %d records from block %d on", round, len(got), got[0].block)
	})
}
