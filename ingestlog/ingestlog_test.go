package ingestlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

type record struct {
	block int
	recv  int64
	lines string
}

func replayAll(t *testing.T, l *Log, from uint64) ([]record, error) {
	t.Helper()
	var got []record
	_, err := l.Replay(from, func(block int, recv int64, lines []byte) {
		got = append(got, record{block, recv, string(lines)})
	})
	return got, err
}

func appendRecord(l *Log, r record) {
	l.Begin()
	l.End(r.block, r.recv, []byte(r.lines))
}

// Records come back in the order they were appended, from the segment a
// checkpoint named on; Drop removes the segments before it.
func TestReplayFromCheckpoint(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, "tcp://:2003 spark", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	first, err := l.Rotate(nil)
	if err != nil {
		t.Fatal(err)
	}
	a := record{0, 1, "app-1.1.executor.cpuTime.count 10 1\n"}
	b := record{1, 2, "app-1.1.executor.cpuTime.count 20 2\napp-1.1.executor.runTime.count 5 2\n"}
	appendRecord(l, a)
	mark, err := l.Rotate(nil) // a checkpoint: baselines after a saved with mark
	if err != nil {
		t.Fatal(err)
	}
	appendRecord(l, b)
	appendRecord(l, record{0, 3, ""}) // a block that took no line: nothing appended
	if got, err := replayAll(t, l, first); err != nil || fmt.Sprint(got) != fmt.Sprint([]record{a, b}) {
		t.Errorf("from the first segment: %v, %v", got, err)
	}
	if err := l.Drop(mark); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// A start after a crash.
	l2, err := Open(dir, "tcp://:2003 spark", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := replayAll(t, l2, mark); err != nil || fmt.Sprint(got) != fmt.Sprint([]record{b}) {
		t.Errorf("from the checkpoint: %v, %v", got, err)
	}
	if got, _ := replayAll(t, l2, first); len(got) != 1 {
		t.Errorf("the dropped segment was replayed: %v", got)
	}
	// Its own segments come after the last run's.
	if next, err := l2.Rotate(nil); err != nil || next <= mark {
		t.Errorf("the next run's segment %d, after %d: %v", next, mark, err)
	}
	// Written for other listeners: not replayed.
	l3, _ := Open(dir, "tcp://:2004 spark", 0, nil)
	if _, err := replayAll(t, l3, mark); !errors.Is(err, ErrFingerprint) {
		t.Errorf("another config's log: %v", err)
	}
}

// A record a crash cut short ends its segment; a record whose checksum
// fails is skipped and counted, and those after it are kept.
func TestReplayDamaged(t *testing.T) {
	dir := t.TempDir()
	l, _ := Open(dir, "fp", 0, nil)
	seq, _ := l.Rotate(nil)
	for i := range 3 {
		appendRecord(l, record{0, int64(i), fmt.Sprintf("line %d\n", i)})
	}
	l.Close()
	path := l.path(seq)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Flip a byte of the second record's lines.
	i := strings.Index(string(b), "line 1")
	b[i] = 'L'
	cut := b[:len(b)-3] // the third record cut short
	if err := os.WriteFile(path, cut, 0o600); err != nil {
		t.Fatal(err)
	}
	l2, _ := Open(dir, "fp", 0, nil)
	got, err := replayAll(t, l2, seq)
	if err != nil || len(got) != 1 || got[0].lines != "line 0\n" || l2.Damaged() != 1 {
		t.Errorf("replayed %v (%v), %d damaged; want line 0 alone, 1 damaged", got, err, l2.Damaged())
	}
}

// A segment replaced by a symbolic link is not read through it, and a
// Rotate does not write through a link planted under the next name.
func TestLinks(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(outside, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, _ := Open(dir, "fp", 0, nil)
	if err := os.Symlink(outside, l.path(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := replayAll(t, l, 0); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("replay through a link: %v", err)
	}
	if _, err := l.Rotate(nil); err == nil {
		t.Error("a segment was opened through a link")
	}
	if b, _ := os.ReadFile(outside); string(b) != "precious" {
		t.Errorf("the link's target holds %q", b)
	}
}

// An append that fails stops the log and says why; the next Rotate starts
// it again. Past MaxBytes likewise.
func TestBroken(t *testing.T) {
	dir := t.TempDir()
	var why []error
	l, _ := Open(dir, "fp", 0, func(err error) { why = append(why, err) })
	seq, _ := l.Rotate(nil)
	l.mu.Lock()
	l.f.Close() // the next write fails
	l.mu.Unlock()
	appendRecord(l, record{0, 1, "lost\n"})
	appendRecord(l, record{0, 2, "also lost: the log is stopped\n"})
	if len(why) != 1 || !strings.Contains(why[0].Error(), "appending to") {
		t.Fatalf("broken calls: %v", why)
	}
	next, err := l.Rotate(nil)
	if err != nil {
		t.Fatal(err)
	}
	appendRecord(l, record{0, 3, "kept\n"})
	if got, _ := replayAll(t, l, seq); len(got) != 1 || got[0].lines != "kept\n" {
		t.Errorf("replayed %v from %d (next %d)", got, seq, next)
	}
	l.mu.Lock()
	l.total = DefaultMaxBytes
	l.mu.Unlock()
	appendRecord(l, record{0, 4, "over the bound\n"})
	if len(why) != 2 || !strings.Contains(why[1].Error(), "checkpoints are failing") {
		t.Errorf("broken calls: %v", why)
	}
}

// Rotate waits for the blocks between Begin and End: a block that began
// before it is logged in the old segment, whose lines the checkpoint's
// baselines then hold.
func TestRotateWaitsForBlocks(t *testing.T) {
	l, _ := Open(t.TempDir(), "fp", 0, nil)
	first, _ := l.Rotate(nil)
	l.Begin()
	rotated := make(chan uint64)
	go func() {
		seq, _ := l.Rotate(nil)
		rotated <- seq
	}()
	select {
	case <-rotated:
		t.Fatal("Rotate did not wait for the block in flight")
	case <-time.After(50 * time.Millisecond): // no signal tells a goroutine is blocked; a wait that can only pass wrongly
	}
	l.End(0, 1, []byte("in flight\n"))
	second := <-rotated
	got, _ := replayAll(t, l, first)
	if len(got) != 1 {
		t.Fatalf("replayed %v", got)
	}
	if after, _ := replayAll(t, l, second); len(after) != 0 {
		t.Errorf("the block in flight went to the new segment: %v", after)
	}
}

// Blocks of many connections append whole records.
func TestConcurrentAppends(t *testing.T) {
	l, _ := Open(t.TempDir(), "fp", 0, nil)
	seq, _ := l.Rotate(nil)
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Go(func() {
			for i := range 200 {
				appendRecord(l, record{c, int64(i), fmt.Sprintf("conn %d line %d\n", c, i)})
			}
		})
	}
	wg.Wait()
	got, err := replayAll(t, l, seq)
	if err != nil || len(got) != 1600 || l.Damaged() != 0 {
		t.Errorf("%d records, %d damaged: %v", len(got), l.Damaged(), err)
	}
	next := map[int]int64{}
	for _, r := range got {
		if r.recv != next[r.block] || r.lines != fmt.Sprintf("conn %d line %d\n", r.block, r.recv) {
			t.Fatalf("record %v out of its connection's order", r)
		}
		next[r.block]++
	}
}
