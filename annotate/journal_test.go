package annotate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/sparkui"
)

// durability keeps the journal and the snapshot in dir, as the service
// does in its state-dir.
func durability(dir string) Durability {
	return Durability{
		Journal: filepath.Join(dir, "annotate.journal"),
		Save: func(write func(io.Writer) error) error {
			f, err := os.Create(filepath.Join(dir, "annotate.state"))
			if err != nil {
				return err
			}
			defer f.Close()
			return write(f)
		},
	}
}

// restart is a poller starting on dir after the last one stopped or was
// killed: it loads the snapshot and recovers the journal into sink.
func restart(t *testing.T, dir string, cfg Config) (*Poller, int) {
	t.Helper()
	p := newPoller(t, cfg)
	if f, err := os.Open(filepath.Join(dir, "annotate.state")); err == nil {
		if err := p.LoadFacts(f); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	n, err := p.Recover(durability(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.CloseJournal() })
	if _, err := p.Resend(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p, n
}

// A poller killed after writing an application's facts, and started
// again while the stream now says something else (the missing reports
// arrived): the facts are not made again with the new values; the
// journal's points are sent again, the very same; nothing is lost. After
// a checkpoint, nothing is sent again.
func TestJournalAcrossACrash(t *testing.T) {
	dir := t.TempDir()
	srv := sparkui.NewServer(sparkui.HistoryServer, accountedApp())
	clk := &clock{now: at(661)}
	srv.SetNow(clk.Now)
	base := serve(t, srv)
	stream := &fakeStream{totals: accountedStream()}
	ctx := context.Background()

	first := newMemSink()
	p1, n := restart(t, dir, Config{Sources: []string{base}, Sink: first, Now: clk.Now, Stream: stream})
	if n != 0 {
		t.Fatalf("%d records replayed from an empty state-dir", n)
	}
	p1.PollOnce(ctx)
	if rec := first.stored(schema.MeasurementReconcile, reconcileRow); len(rec) != 1 || !strings.Contains(rec[0], " short short=2 ") {
		t.Fatalf("first run's reconciliation %q", rec)
	}
	// Killed: no checkpoint. A half-written record at the end of the
	// journal, as a kill in the middle of a write leaves.
	jf, err := os.OpenFile(filepath.Join(dir, "annotate.journal"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	jf.WriteString(`0badc0de {"a":"app-`)
	jf.Close()

	// Every report arrived after all: the stream would now reconcile exact.
	whole := accountedStream()
	whole["2"].Sums["succeededTasks.count"] = 50
	stream.mu.Lock()
	stream.totals = whole
	stream.mu.Unlock()
	second := newMemSink()
	clk.Set(at(671))
	p2, n := restart(t, dir, Config{Sources: []string{base}, Sink: second, Now: clk.Now, Stream: stream})
	if n == 0 {
		t.Fatal("nothing replayed from the journal")
	}
	p2.PollOnce(ctx)
	if len(second.again) != 0 {
		t.Errorf("second run wrote %d series and times twice, e.g. %s", len(second.again), second.again[0])
	}
	for key, p := range first.latest {
		q, ok := second.latest[key]
		switch {
		case !ok:
			t.Errorf("%s: written by the first run, not sent again by the second", key)
		case pointText(p) != pointText(q):
			t.Errorf("%s: the first run wrote\n  %s\nthe second\n  %s", key, pointText(p), pointText(q))
		}
	}
	for key := range second.latest {
		if _, ok := first.latest[key]; !ok && !strings.HasPrefix(key, schema.MeasurementExecutor+"|") {
			t.Errorf("%s: a fact the first run did not write", key)
		}
	}

	// A checkpoint: the next start sends nothing again, and writes
	// nothing new.
	if ok, err := p2.Checkpoint(true); !ok || err != nil {
		t.Fatalf("checkpoint: %v %v", ok, err)
	}
	p2.CloseJournal()
	third := newMemSink()
	p3, n := restart(t, dir, Config{Sources: []string{base}, Sink: third, Now: clk.Now, Stream: stream})
	if n != 0 {
		t.Errorf("%d records replayed after a checkpoint", n)
	}
	p3.PollOnce(ctx)
	if third.count() != 0 {
		t.Errorf("third run wrote %d points", third.count())
	}
}

// pointText is a point's tags and fields, for comparing two writes.
func pointText(p point) string {
	var b strings.Builder
	for _, k := range slices.SortedFunc(maps.Keys(p.tags), strings.Compare) {
		b.WriteString(k + "=" + p.tags[k] + " ")
	}
	for _, k := range slices.SortedFunc(maps.Keys(p.fields), strings.Compare) {
		b.WriteString(k + "=" + strings.TrimSpace(strings.ReplaceAll(fmtAny(p.fields[k]), "\n", " ")) + " ")
	}
	return b.String()
}

func fmtAny(v any) string { return fmt.Sprintf("%v", v) }

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
	s := newScript(sparkui.LiveUI)
	base := serve(t, s.srv)
	first := newMemSink()
	p1, _ := restart(t, dir, Config{Sources: []string{base}, Sink: first, Now: s.clk.Now})
	p1.PollOnce(context.Background())
	s.step2()
	p1.PollOnce(context.Background())
	s.step3()
	p1.PollOnce(context.Background())
	// One record more than InfluxDB is asked for when it is down.
	extra := journalRecord{App: "app-extra", N: 1, Facts: []factKey{{M: measurementIndex(schema.MeasurementApp), TS: factTime(ms(t0), 0, phaseStart)}},
		Lines: "spark_app,applicationid=app-extra status=\"RUNNING\" " + strconv.FormatInt(ms(t0)*1_000_000, 10) + "\n"}
	if err := p1.journal.append(extra); err != nil {
		t.Fatal(err)
	}
	p1.CloseJournal() // killed: no checkpoint

	asked := 0
	d := durability(dir)
	d.Stored = func(_ context.Context, lines []byte) ([]bool, error) {
		asked++
		if down || asked <= askTries {
			return nil, fmt.Errorf("influx: connection refused")
		}
		return make([]bool, bytes.Count(lines, []byte("\n"))), nil // none held
	}
	second := newMemSink()
	p2 := newPoller(t, Config{Sources: []string{base}, Sink: second, Now: s.clk.Now})
	n, err := p2.Recover(d)
	t.Cleanup(func() { p2.CloseJournal() })
	if err != nil || n <= askGiveUp {
		t.Fatalf("recovered %d records, want more than %d: %v", n, askGiveUp, err)
	}
	if ok, err := p2.Checkpoint(true); ok || err != nil {
		t.Errorf("checkpoint before the journal's points were handed on: %v %v", ok, err)
	}
	if _, err := p2.Resend(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := askTries * min(n, askGiveUp)
	if !down {
		want = askTries + 2*(n-1) // the others once, and once more after settleDelay (none held)
	}
	if asked != want {
		t.Errorf("InfluxDB asked %d times for %d records, want %d", asked, n, want)
	}
	if second.count() != first.count()+extra.N {
		t.Errorf("%d points sent again, the first run wrote %d and 1 was added", second.count(), first.count())
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
	clk := &clock{now: t0}
	rec := func(app string) journalRecord {
		return journalRecord{App: app, Facts: []factKey{{M: measurementIndex(schema.MeasurementApp), TS: factTime(ms(t0), 0, phaseStart)}}, N: 1,
			Lines: "spark_app,applicationid=" + app + " status=\"RUNNING\" " + strconv.FormatInt(ms(t0)*1_000_000, 10) + "\n"}
	}
	p, _ := restart(t, dir, Config{Sink: newMemSink(), Now: clk.Now})
	j := p.journal
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
	p.CloseJournal()
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
	sink := newMemSink()
	p2, n := restart(t, dir, Config{Sink: sink, Now: clk.Now})
	got := sink.stored(schema.MeasurementApp, func(p point) string { return p.tags[schema.TagApplicationID] })
	slices.Sort(got)
	if n != 3 || !slices.Equal(got, []string{"app-1", "app-3", "app-4"}) || p2.Stats().JournalDamaged != 1 {
		t.Errorf("recovered %d records, points of %q, %d damaged; want 3, app-1, app-3 and app-4, 1", n, got, p2.Stats().JournalDamaged)
	}
}

// downSink is a sink whose InfluxDB does not answer: it takes points,
// and never drains.
type downSink struct {
	*memSink
	waits chan struct{}
}

func (s *downSink) Idle(ctx context.Context) error {
	select {
	case s.waits <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return ctx.Err()
}

// During an InfluxDB outage a checkpoint waits for the sink in vain, up
// to the timeout, and polling goes on meanwhile at its interval.
func TestCheckpointDoesNotHoldPolling(t *testing.T) {
	base, listed := listingUI(t, "app-20261122100000-0001", "etl")
	sink := &downSink{memSink: newMemSink(), waits: make(chan struct{}, 1)}
	p, _ := restart(t, t.TempDir(), Config{Sources: []string{base}, Sink: sink, Interval: time.Second, Timeout: time.Minute})
	p.journal.last = time.Time{} // a checkpoint is due
	defer running(p)()
	deadline := time.After(10 * time.Second)
	select {
	case <-sink.waits:
	case <-deadline:
		t.Fatal("no checkpoint tried in 10 s")
	}
	for n := 0; n < 3; n++ {
		select {
		case <-listed:
		case <-deadline:
			t.Fatalf("the source was listed %d times in 10 s while a checkpoint waited for InfluxDB", n)
		}
	}
}
