package annotate

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/facts"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/sparkui"
	"github.com/sparkpulse/sparkpulse/statefile"
)

// tee hands what a poller writes to several sinks.
type tee []Sink

func (t tee) Append(lines []byte, wait bool) bool {
	ok := true
	for _, s := range t {
		ok = s.Append(lines, wait) && ok
	}
	return ok
}

// wholeRun drives the scripted application through every change — jobs,
// stages and SQL executions that start, end and fail, an executor that is
// removed with new peaks, the application's end — with sparkpulse
// restarted twice along the way (the facts written are saved and read
// back, as state-dir keeps them, when restarts is true). It returns the
// sink's record.
func wholeRun(t *testing.T, restarts bool, extra Sink) *memSink {
	s := newScript(sparkui.LiveUI)
	s.srv.Update(func(m *sparkui.Model) {
		m.Apps[0].Attempts[0].Executors = []*sparkui.Executor{
			{ID: "driver", HostPort: "10.0.0.1:40000", Added: at(0)},
			{ID: "1", HostPort: "node-1:40001", Cores: 4, Added: at(2)},
			{ID: "2", HostPort: "node-2:40002", Cores: 4, Added: at(3)},
		}
	})
	sink := newMemSink()
	var out Sink = sink
	if extra != nil {
		out = tee{sink, extra}
	}
	url := serve(t, s.srv)
	start := func() *Poller {
		p, err := New(Config{Sources: []string{url}, Sink: out, Now: s.clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := start()
	restart := func() {
		var saved bytes.Buffer
		if err := p.Facts().Save(&saved); err != nil {
			t.Fatal(err)
		}
		p = start()
		if restarts {
			if err := p.Facts().Load(&saved); err != nil {
				t.Fatal(err)
			}
		}
	}
	ctx := context.Background()
	p.PollOnce(ctx)
	s.step2()
	p.PollOnce(ctx)
	restart()
	s.clk.Set(at(45))
	s.srv.Update(func(m *sparkui.Model) {
		x := m.Apps[0].Attempts[0].Executors[2]
		x.Removed, x.RemoveReason = at(44), "lost worker"
		x.Peak = map[string]int64{"JVMHeapMemory": 1 << 30}
	})
	p.PollOnce(ctx)
	s.step3()
	p.PollOnce(ctx)
	restart()
	s.clk.Set(at(80))
	p.PollOnce(ctx)
	return sink
}

// Over a whole run with restarts, no series and time is written twice
// (newPoller's cleanup checks it), and the last fact of every item is its
// final truth, as the REST API gives it.
func TestWholeRunAppendOnly(t *testing.T) {
	srv := influxtest.Start(t)
	w := writerTo(t, srv, "spark")
	sink := wholeRun(t, true, w)
	closeWriter(t, w)
	sink.appendOnly(t)

	// The end facts, in InfluxDB, as the dashboard's annotation query
	// reads them.
	q := fmt.Sprintf(`SELECT "title", "end_ms", "status" FROM "spark_job" WHERE "applicationid" =~ /^%s$/ AND "fact" = 'end' AND time >= %dms - 1d AND time <= %dms`,
		scriptApp, ms(at(60)), ms(at(3600)))
	var got []string
	for _, s := range srv.Query(t, "spark", q) {
		for _, v := range s.Values {
			got = append(got, fmt.Sprint(v[1:]...))
		}
	}
	equalLines(t, "job ends in InfluxDB", got, []string{
		fmt.Sprint("Job 0 SUCCEEDED", ms(at(36)), "SUCCEEDED"),
		fmt.Sprint("Job 1 FAILED", ms(at(38)), "FAILED"),
		fmt.Sprint("Job 2 SUCCEEDED", ms(at(50)), "SUCCEEDED"),
	})
	// The executors table: each executor's last snapshot.
	q = fmt.Sprintf(`SELECT last("status"), last("end_ms"), last("remove_reason") FROM "spark_executor" WHERE "applicationid" =~ /^%s$/ AND time >= %dms - 1d AND time <= %dms GROUP BY "process"`,
		scriptApp, ms(at(60)), ms(at(3600)))
	got = nil
	for _, s := range srv.Query(t, "spark", q) {
		for _, v := range s.Values {
			got = append(got, fmt.Sprint(s.Tags["process"], " ", v[1], " ", v[2], " ", v[3]))
		}
	}
	slices.Sort(got)
	equalLines(t, "executors table", got, []string{
		fmt.Sprint("1 ENDED ", ms(at(55)), " <nil>"),
		fmt.Sprint("2 REMOVED ", ms(at(44)), " lost worker"),
		fmt.Sprint("driver ENDED ", ms(at(55)), " <nil>"),
	})
	// Every item that ran has exactly one end fact.
	ends := map[string]int{}
	for _, p := range sink.written {
		if p.fields["fact"] == "end" {
			ends[p.measurement]++
		}
	}
	if want := map[string]int{schema.MeasurementApp: 1, schema.MeasurementJob: 3, schema.MeasurementStage: 4, schema.MeasurementSQL: 2, schema.MeasurementExecutorRemoval: 1, schema.MeasurementUsage: 1}; !maps.Equal(ends, want) {
		t.Errorf("end facts %v, want %v", ends, want)
	}
}

// Without the facts of the last run, a restart writes the start facts of
// running items again: what the ledger's Save and Load are for.
func TestRestartWithoutFactsWritesAgain(t *testing.T) {
	if sink := wholeRun(t, false, nil); len(sink.again) == 0 {
		t.Error("a restart without the facts of the last run wrote nothing twice; the ledger test proves nothing")
	}
}

// restart is a poller starting on state directory dir after the last
// one stopped or was killed: it loads the checkpoint and recovers the
// journal into sink.
func restart(t *testing.T, dir string, cfg Config) (*Poller, int) {
	t.Helper()
	p := newPoller(t, cfg)
	if _, err := statefile.Read(dir, "annotate.state", p.Facts().Load); err != nil {
		t.Fatal(err)
	}
	n, err := p.Facts().Recover(facts.InDir(dir, "annotate.journal", "annotate.state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Facts().Close() })
	if _, err := p.Facts().Resend(context.Background()); err != nil {
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
	if ok, err := p2.Facts().Checkpoint(ctx, true); !ok || err != nil {
		t.Fatalf("checkpoint: %v %v", ok, err)
	}
	p2.Facts().Close()
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
	var ahead atomic.Int64 // of the clock, ns
	now := func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	p, _ := restart(t, t.TempDir(), Config{Sources: []string{base}, Sink: sink, Interval: time.Second, Timeout: time.Minute, Now: now})
	ahead.Store(int64(time.Minute)) // a minute on since the start: a checkpoint is due
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
