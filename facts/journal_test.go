package facts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/statefile"
)

// lineSink keeps the lines handed to it; idle, when set, is its Idle.
type lineSink struct {
	mu    sync.Mutex
	lines []string
	idle  func(ctx context.Context) error
}

func (s *lineSink) Append(lines []byte, _ bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines = slices.AppendSeq(s.lines, strings.Lines(string(lines)))
	return true
}

func (s *lineSink) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(slices.Values(s.lines))
}

// idleSink is a lineSink with Idle.
type idleSink struct{ *lineSink }

func (s idleSink) Idle(ctx context.Context) error { return s.idle(ctx) }

// durability keeps the journal and the checkpoint in dir, as the service
// does in its state-dir.
func durability(dir string) Durability { return InDir(dir, "annotate.journal", "annotate.state") }

// restart is a store starting on state directory dir after the last one
// stopped or was killed: it loads the checkpoint and recovers the journal
// into sink.
func restart(t *testing.T, dir string, sink Sink) (*Store, int) {
	t.Helper()
	s := New(Config{Sink: sink, Timeout: time.Second})
	if _, err := statefile.Read(dir, "annotate.state", s.Load); err != nil {
		t.Fatal(err)
	}
	n, err := s.Recover(durability(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Resend(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, n
}

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// appBatch is an application's start fact, one point.
func appBatch(app string) Batch {
	ts := t0.UnixNano()
	return Batch{App: app, Facts: []Key{NewKey(schema.MeasurementApp, ts)}, N: 1,
		Lines: fmt.Appendf(nil, "spark_app,applicationid=%s status=\"RUNNING\" %d\n", app, ts)}
}

// The journal's line is as doc.go describes it: a written batch reads
// the same in an earlier release, and one it wrote reads the same here.
func TestJournalFormat(t *testing.T) {
	dir := t.TempDir()
	s, _ := restart(t, dir, &lineSink{})
	b := Batch{App: "app-1", Facts: []Key{{M: 0, TS: 1_700_000_000_000_000_000}, {M: 2, TS: 1_700_000_000_000_000_041}},
		Snaps: map[string]Snapshot{"driver": {Sum: 42, TS: 7}}, N: 3, Lines: []byte("spark_app,applicationid=app-1 status=\"RUNNING\" 1700000000000000000\n")}
	s.Write(b, t0)
	got, err := os.ReadFile(filepath.Join(dir, "annotate.journal"))
	if err != nil {
		t.Fatal(err)
	}
	const want = `2 771713da {"a":"app-1","f":[{"m":0,"t":1700000000000000000},{"m":2,"t":1700000000000000041}],"x":{"driver":{"s":42,"t":7}},"n":3,"l":"spark_app,applicationid=app-1 status=\"RUNNING\" 1700000000000000000\n"}` + "\n"
	if string(got) != want {
		t.Errorf("journal\n  %s\nwant\n  %s", got, want)
	}
	// doc.go's example, and a line of version 1 (an older sparkpulse's:
	// no version, CRC-32 IEEE), read; either with its checksum of the
	// other version, not.
	const doc = `2 e47fdecf {"a":"app-1","f":[{"m":0,"t":1700000000000000000}],"n":1,"l":"spark_app,applicationid=app-1 status=\"RUNNING\" 1700000000000000000\n"}` + "\n"
	const v1 = `8dd9103d {"a":"app-1","f":[{"m":0,"t":1700000000000000000},{"m":2,"t":1700000000000000041}],"x":{"driver":{"s":42,"t":7}},"n":3,"l":"spark_app,applicationid=app-1 status=\"RUNNING\" 1700000000000000000\n"}` + "\n"
	for _, c := range []struct {
		name, line string
		ok         bool
		n          int
	}{
		{"doc.go's example", doc, true, 1},
		{"version 1", v1, true, 3},
		{"version 2 with version 1's checksum", "2 " + v1, false, 0},
		{"version 1 with version 2's checksum", want[2:], false, 0},
	} {
		if r, ok := parseRecord([]byte(c.line)); ok != c.ok || r.N != c.n || ok && r.App != "app-1" {
			t.Errorf("%s reads as %+v, %v", c.name, r, ok)
		}
	}
}

// When InfluxDB cannot say which of the journal's points it holds, they
// are all sent again, and once it has failed for askGiveUp records in a
// row it is not asked for the rest. One record it fails for is sent again
// alone: the records after it are asked for.
func TestJournalInfluxDBDownAtStart(t *testing.T) {
	for _, down := range []bool{true, false} {
		t.Run(map[bool]string{true: "down", false: "one failure"}[down], func(t *testing.T) { journalDownAtStart(t, down) })
	}
}

func journalDownAtStart(t *testing.T, down bool) {
	dir := t.TempDir()
	first := &lineSink{}
	s1, _ := restart(t, dir, first)
	// One record more than InfluxDB is asked for when it is down.
	for i := range askGiveUp + 1 {
		s1.Write(appBatch(fmt.Sprint("app-", i)), t0)
	}
	s1.Close() // killed: no checkpoint

	asked := 0
	d := durability(dir)
	d.Stored = func(_ context.Context, lines []byte) ([]bool, error) {
		asked++
		if down || asked <= askTries {
			return nil, fmt.Errorf("influx: connection refused")
		}
		return make([]bool, bytes.Count(lines, []byte("\n"))), nil // none held
	}
	second := &lineSink{}
	s2 := New(Config{Sink: second, Timeout: time.Second})
	n, err := s2.Recover(d)
	t.Cleanup(func() { s2.Close() })
	if err != nil || n <= askGiveUp {
		t.Fatalf("recovered %d records, want more than %d: %v", n, askGiveUp, err)
	}
	if ok, err := s2.Checkpoint(context.Background(), true); ok || err != nil {
		t.Errorf("checkpoint before the journal's points were handed on: %v %v", ok, err)
	}
	if _, err := s2.Resend(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := askTries * min(n, askGiveUp)
	if !down {
		want = askTries + 2*(n-1) // the others once, and once more after settleDelay (none held)
	}
	if asked != want {
		t.Errorf("InfluxDB asked %d times for %d records, want %d", asked, n, want)
	}
	if !slices.Equal(second.got(), first.got()) {
		t.Errorf("sent again\n  %q\nthe first run wrote\n  %q", second.got(), first.got())
	}
}

// fullDisk is a journal file on a disk that fills after room more bytes:
// a write takes what fits and fails.
type fullDisk struct {
	*os.File
	room int
}

func (f *fullDisk) Write(b []byte) (int, error) {
	if len(b) <= f.room {
		f.room -= len(b)
		return f.File.Write(b)
	}
	n, _ := f.File.Write(b[:f.room])
	f.room = 0
	return n, syscall.ENOSPC
}

// A full disk during an append leaves no torn record for the next ones
// to follow: the append is cut back. A whole record damaged on disk is
// skipped at the next start, and the records after it are kept.
func TestJournalDamaged(t *testing.T) {
	dir := t.TempDir()
	rec := func(app string) record {
		b := appBatch(app)
		return record{App: app, Facts: b.Facts, N: b.N, Lines: string(b.Lines)}
	}
	s, _ := restart(t, dir, &lineSink{})
	j := s.journal
	if err := j.append(rec("app-1")); err != nil {
		t.Fatal(err)
	}
	j.f = &fullDisk{File: j.f.(*os.File), room: 20}
	if err := j.append(rec("app-2")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append on a full disk: %v", err)
	}
	j.f.(*fullDisk).room = 1 << 20 // space freed
	if err := j.append(rec("app-3")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// A whole record damaged on disk (a flipped byte), then one more.
	b, err := os.ReadFile(filepath.Join(dir, "annotate.journal"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	if len(lines) != 3 || lines[2] != "" {
		t.Fatalf("journal after the full disk: %q, want app-1's and app-3's records, whole", b)
	}
	damaged := strings.Replace(lines[0], "app-1", "app-9", 1) // its checksum is app-1's
	third, _ := json.Marshal(rec("app-4"))
	b = fmt.Appendf(nil, "%s%s%08x %s\n", lines[0], damaged, crc32.ChecksumIEEE(third), third)
	b = append(b, lines[1]...)
	if err := os.WriteFile(filepath.Join(dir, "annotate.journal"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	sink := &lineSink{}
	s2, n := restart(t, dir, sink)
	var want []string
	for _, app := range []string{"app-1", "app-3", "app-4"} {
		want = append(want, string(appBatch(app).Lines))
	}
	if got := sink.got(); n != 3 || !slices.Equal(got, want) || s2.Damaged() != 1 {
		t.Errorf("recovered %d records, points %q, %d damaged; want 3, those of app-1, app-3 and app-4, 1", n, got, s2.Damaged())
	}
}

// A checkpoint without force waits for the sink to deliver, up to
// Timeout or until its caller's ctx ends, and empties the journal only
// once the sink holds nothing.
func TestCheckpointWaitsForTheSink(t *testing.T) {
	dir := t.TempDir()
	held := make(chan struct{}) // closed: the sink delivered
	sink := idleSink{&lineSink{idle: func(ctx context.Context) error {
		select {
		case <-held: // first, as a context done only stops a wait
			return nil
		default:
		}
		select {
		case <-held:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}}
	s := New(Config{Sink: sink, Timeout: time.Hour})
	if _, err := s.Recover(durability(dir)); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Write(appBatch("app-1"), t0)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if ok, err := s.Checkpoint(ctx, false); ok || err != nil {
		t.Errorf("checkpoint while the sink holds points: %v %v", ok, err)
	}
	close(held)
	if ok, err := s.Checkpoint(context.Background(), false); !ok || err != nil {
		t.Errorf("checkpoint once the sink delivered: %v %v", ok, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "annotate.journal")); err != nil || len(b) != 0 {
		t.Errorf("journal after a checkpoint: %q %v", b, err)
	}
	loaded := New(Config{})
	if found, err := statefile.Read(dir, "annotate.state", loaded.Load); !found || err != nil || !loaded.Holds("app-1") {
		t.Errorf("checkpoint without app-1's fact: %v %v", found, err)
	}
}

// funcSink is a sink that calls append.
type funcSink func(lines []byte) bool

func (f funcSink) Append(lines []byte, _ bool) bool { return f(lines) }

// Write has a batch's record on disk before the sink sees its points, and
// records its facts only once the sink took them: a sink that refuses
// leaves them to be made again.
func TestWriteJournalsFirst(t *testing.T) {
	dir := t.TempDir()
	var s *Store
	b := appBatch("app-1")
	take := true
	s = New(Config{Sink: funcSink(func(lines []byte) bool {
		j, _ := os.ReadFile(filepath.Join(dir, "annotate.journal"))
		last, ok := parseRecord(j[bytes.LastIndexByte(bytes.TrimSuffix(j, []byte("\n")), '\n')+1:])
		if !ok || last.Lines != string(lines) {
			t.Errorf("the sink got %q before the journal had it: %q", lines, j)
		}
		if s.Has("app-1", b.Facts[0], t0) {
			t.Error("the fact was recorded before the sink took it")
		}
		return take
	})})
	if _, err := s.Recover(durability(dir)); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	take = false
	if s.Write(b, t0) || s.Has("app-1", b.Facts[0], t0) {
		t.Error("a batch the sink refused is recorded")
	}
	take = true
	if !s.Write(b, t0) || !s.Has("app-1", b.Facts[0], t0) {
		t.Error("a batch the sink took is not recorded")
	}
}

// A batch's history points go to the History sink, journalled with its
// facts: after a kill, those the history's InfluxDB does not hold are
// sent there again, asked for where it writes (StoredHistory), and the
// facts' points go to their own sink. Without a History sink, none are
// written nor journalled.
func TestHistoryJournalled(t *testing.T) {
	dir := t.TempDir()
	history := func(app string) []byte {
		return fmt.Appendf(nil, "spark_app_history,appname=etl app_id=%q,outcome=\"succeeded\" %d\n", app, t0.UnixNano())
	}
	batch := func(app string) Batch {
		b := appBatch(app)
		b.HistoryN, b.History = 1, history(app)
		return b
	}
	facts, hist := &lineSink{}, &lineSink{}
	s := New(Config{Sink: facts, History: hist, Timeout: time.Second})
	if _, err := s.Recover(durability(dir)); err != nil {
		t.Fatal(err)
	}
	for _, app := range []string{"app-1", "app-2"} {
		if !s.Write(batch(app), t0) {
			t.Fatalf("%s not written", app)
		}
	}
	s.Close() // killed: no checkpoint
	if got, want := hist.got(), []string{string(history("app-1")), string(history("app-2"))}; !slices.Equal(got, want) {
		t.Fatalf("history sink got %q, want %q", got, want)
	}

	// The next start: the history's InfluxDB holds app-1's point only;
	// the facts' InfluxDB none.
	facts2, hist2 := &lineSink{}, &lineSink{}
	s2 := New(Config{Sink: facts2, History: hist2, Timeout: time.Second})
	d := durability(dir)
	asked := map[string]int{}
	d.Stored = func(_ context.Context, lines []byte) ([]bool, error) {
		asked["facts"]++
		return make([]bool, bytes.Count(lines, []byte("\n"))), nil
	}
	d.StoredHistory = func(_ context.Context, lines []byte) ([]bool, error) {
		asked["history"]++
		return []bool{strings.Contains(string(lines), `"app-1"`)}, nil
	}
	if n, err := s2.Recover(d); n != 2 || err != nil {
		t.Fatalf("recovered %d, %v", n, err)
	}
	t.Cleanup(func() { s2.Close() })
	if _, err := s2.Resend(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, want := hist2.got(), []string{string(history("app-2"))}; !slices.Equal(got, want) {
		t.Errorf("history sent again: %q, want %q", got, want)
	}
	if got := facts2.got(); len(got) != 2 || strings.Contains(strings.Join(got, ""), "spark_app_history") {
		t.Errorf("facts sent again: %q", got)
	}
	if asked["history"] < 2 || asked["facts"] < 2 {
		t.Errorf("asked %v", asked)
	}

	// Without a History sink: no history journalled, none written.
	dir3 := t.TempDir()
	plain := &lineSink{}
	s3 := New(Config{Sink: plain, Timeout: time.Second})
	if _, err := s3.Recover(durability(dir3)); err != nil {
		t.Fatal(err)
	}
	s3.Write(batch("app-3"), t0)
	s3.Close()
	if b, _ := os.ReadFile(filepath.Join(dir3, "annotate.journal")); bytes.Contains(b, []byte("spark_app_history")) {
		t.Errorf("journalled history without a History sink: %s", b)
	}
	if got := plain.got(); len(got) != 1 {
		t.Errorf("facts sink got %q", got)
	}
}

// refusingSink takes nothing, as a writer that is closing.
type refusingSink struct{}

func (refusingSink) Append([]byte, bool) bool { return false }

// A history sink that refuses (closing) does not undo the facts its
// batch handed on: they are recorded, so that they are not made again.
func TestHistoryRefusedFactsKept(t *testing.T) {
	facts := &lineSink{}
	s := New(Config{Sink: facts, History: refusingSink{}, Timeout: time.Second})
	b := appBatch("app-1")
	b.HistoryN, b.History = 1, []byte("spark_app_history,appname=etl app_id=\"app-1\" 1\n")
	if !s.Write(b, t0) {
		t.Fatal("the batch was refused for its history")
	}
	if !s.Has("app-1", b.Facts[0], t0) || len(facts.got()) != 1 {
		t.Errorf("facts recorded %v, written %q", s.Has("app-1", b.Facts[0], t0), facts.got())
	}
}
