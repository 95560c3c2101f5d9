package annotate

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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
	if rec := first.stored(MeasurementReconcile, reconcileRow); len(rec) != 1 || !strings.Contains(rec[0], " short short=2 ") {
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
		if _, ok := first.latest[key]; !ok && !strings.HasPrefix(key, MeasurementExecutor+"|") {
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
// are all sent again, and it is not asked record after record: a start
// does not wait on it for each.
func TestJournalInfluxDBDownAtStart(t *testing.T) {
	dir := t.TempDir()
	s := newScript(sparkui.LiveUI)
	base := serve(t, s.srv)
	first := newMemSink()
	p1, _ := restart(t, dir, Config{Sources: []string{base}, Sink: first, Now: s.clk.Now})
	p1.PollOnce(context.Background())
	s.step2()
	p1.PollOnce(context.Background())
	p1.CloseJournal() // killed: no checkpoint

	asked := 0
	d := durability(dir)
	d.Stored = func(context.Context, []byte) ([]bool, error) {
		asked++
		return nil, fmt.Errorf("influx: connection refused")
	}
	second := newMemSink()
	p2 := newPoller(t, Config{Sources: []string{base}, Sink: second, Now: s.clk.Now})
	n, err := p2.Recover(d)
	t.Cleanup(func() { p2.CloseJournal() })
	if err != nil || n < 2 {
		t.Fatalf("recovered %d records: %v", n, err)
	}
	if asked != 3 {
		t.Errorf("InfluxDB asked %d times for %d records, want 3 tries for the first only", asked, n)
	}
	if second.count() != first.count() {
		t.Errorf("%d points sent again, the first run wrote %d", second.count(), first.count())
	}
}
