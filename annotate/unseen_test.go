package annotate

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/facts"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/sparkui"
)

// refusedURL is a loopback address nothing listens on.
func refusedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	return "http://" + ln.Addr().String()
}

// totals is a process's stream totals: counter sums and gauge peaks.
func totals(sums, peaks map[string]float64) ProcessTotals {
	return ProcessTotals{Sums: sums, Peak: peaks, Mean: map[string]float64{}, NoDelta: map[string]int{}, Samples: map[string]float64{}}
}

// pointOf is the one stored point of measurement with the given fact.
func pointOf(t *testing.T, sink *memSink, measurement, fact string) *point {
	t.Helper()
	sink.mu.Lock()
	defer sink.mu.Unlock()
	var found *point
	for _, p := range sink.latest {
		if p.measurement == measurement && p.fields[schema.FieldFact] == fact {
			if found != nil {
				t.Fatalf("%s: two %s facts", measurement, fact)
			}
			found = &p
		}
	}
	return found
}

// An application whose metrics arrive while its only source refuses
// (its UI on a port no source names) is written, once quiet for
// CloseOutAfter, with what its metrics say; one a source shows is not, nor
// one whose figures no process could report.
func TestStreamOnly(t *testing.T) {
	const unseen, shown = "app-20261122100000-0007", "app-20261122100000-0008"
	ui := sparkui.NewServer(sparkui.LiveUI, liveApp(shown, "shown", t0))
	clk := &clock{now: t0}
	ui.SetNow(clk.Now)
	stream := &fakeStream{totals: map[string]ProcessTotals{
		"driver": totals(map[string]float64{"cpuTime.count": 5e9}, nil),
		"1": totals(map[string]float64{"cpuTime.count": 40e9, "runTime.count": 50_000, "jvmGCTime.count": 2_000},
			map[string]float64{"ProcessTreeJVMRSSMemory": 1 << 30, "ProcessTreePythonRSSMemory": 256 << 20}),
		"2": totals(map[string]float64{"cpuTime.count": 20e9, "runTime.count": 30_000, "jvmGCTime.count": 1_000},
			map[string]float64{"ProcessTreeJVMRSSMemory": 1.5 * (1 << 30)}),
		// Forged: past anything a process reports; left out.
		"3": totals(map[string]float64{"cpuTime.count": 9.2e18, "runTime.count": -5},
			map[string]float64{"ProcessTreeJVMRSSMemory": 9.2e18}),
	}}
	sink := newMemSink()
	p := newPoller(t, Config{Sources: []string{refusedURL(t), serve(t, ui)}, Sink: sink, Now: clk.Now, Stream: stream})
	for s := 0.0; s <= 60; s += 10 {
		clk.Set(at(s))
		p.SeeApp(unseen)
		p.SeeApp(shown)
		p.PollOnce(context.Background())
	}
	if got := p.Stats().StreamOnlyWaiting; got != 1 {
		t.Fatalf("%d keys waiting, want 1 (the application no source shows)", got)
	}
	clk.Set(at(60).Add(DefaultCloseOutAfter - time.Second))
	p.PollOnce(context.Background())
	if a := pointOf(t, sink, schema.MeasurementApp, "stream"); a != nil {
		t.Fatalf("written before close-out-after: %v", a.fields)
	}
	clk.Set(at(60).Add(DefaultCloseOutAfter))
	p.PollOnce(context.Background())

	a := pointOf(t, sink, schema.MeasurementApp, "stream")
	if a == nil {
		t.Fatal("no spark_app stream fact")
	}
	if a.tags[schema.TagApplicationID] != unseen || a.ns != factTime(ms(t0), 0, phaseStream) || a.fields["status"] != statusUnknown ||
		a.fields[schema.FieldAppID] != unseen || a.fields["end_ms"] != ms(at(60)) || a.fields["duration_ms"] != int64(60_000) {
		t.Errorf("spark_app stream fact: tags %v at %d, fields %v", a.tags, a.ns, a.fields)
	}
	u := pointOf(t, sink, schema.MeasurementUsage, "stream")
	if u == nil {
		t.Fatal("no spark_app_usage stream fact")
	}
	want := map[string]any{
		schema.UsageDurationMs: int64(60_000), schema.UsageExecutors: int64(3), schema.UsageTaskCPUSeconds: 60.0, schema.UsageTaskRunSeconds: 80.0,
		schema.UsageGCSeconds: 3.0, schema.UsageGCShare: 3.0 / 80, schema.UsagePeakRSSBytes: int64(1.5 * (1 << 30)), schema.UsagePeakPythonRSSBytes: int64(256 << 20),
		schema.UsageOutcome: "unknown", schema.FieldAppID: unseen,
	}
	for k, v := range want {
		if u.fields[k] != v {
			t.Errorf("spark_app_usage %s = %v (%T), want %v", k, u.fields[k], u.fields[k], v)
		}
	}
	for _, k := range []string{schema.UsageExecutorCoreSeconds, schema.UsageCPUUtilisation, schema.UsageSlotOccupancy, schema.UsageRecommended} {
		if v, ok := u.fields[k]; ok {
			t.Errorf("spark_app_usage %s = %v: the stream alone cannot say", k, v)
		}
	}
	if u.ns != ms(at(60))*1_000_000+phaseStream {
		t.Errorf("spark_app_usage stream fact at %d, want the last report's time", u.ns)
	}
	if got, want := stream.asked[len(stream.asked)-1], [2]time.Time{t0.Add(-time.Minute), at(120)}; got != want {
		t.Errorf("stream read over %v, want from a minute before the first report to a minute after the last", got)
	}
	if n := len(sink.stored(schema.MeasurementApp, func(p point) string {
		return fmt.Sprint(p.tags[schema.TagApplicationID], p.fields[schema.FieldFact])
	})); n != 2 {
		t.Errorf("%d spark_app facts, want the shown application's start and the stream fact", n)
	}
	if got := p.Stats().StreamOnly["written"]; got != 1 {
		t.Errorf("stream_only written %d, want 1", got)
	}

	// Named again later: it is not followed again, and nothing is
	// written twice (the sink fails the test on a rewrite).
	before := sink.count()
	for s := 0.0; s <= 30; s += 10 {
		clk.Set(at(60).Add(DefaultCloseOutAfter + 30*time.Minute + time.Duration(s)*time.Second))
		p.SeeApp(unseen)
		p.PollOnce(context.Background())
	}
	clk.Set(at(60).Add(2*DefaultCloseOutAfter + time.Hour))
	p.PollOnce(context.Background())
	sink.mu.Lock()
	for _, pt := range sink.written[before:] {
		if pt.tags[schema.TagApplicationID] == unseen {
			t.Errorf("written again after it was written once: %s %v", pt.measurement, pt.fields)
		}
	}
	sink.mu.Unlock()
}

// A failing read of the stream is retried, as an ended application's
// accounting is; the facts wait for it.
func TestStreamOnlyRetried(t *testing.T) {
	const unseen = "app-20261122100000-0007"
	clk := &clock{now: t0}
	stream := &fakeStream{err: errors.New("influxdb restarting"),
		totals: map[string]ProcessTotals{"1": totals(map[string]float64{"cpuTime.count": 4e9}, nil)}}
	sink := newMemSink()
	p := newPoller(t, Config{Sources: []string{refusedURL(t)}, Sink: sink, Now: clk.Now, Stream: stream})
	p.SeeApp(unseen)
	p.PollOnce(context.Background())
	clk.Set(t0.Add(DefaultCloseOutAfter))
	p.PollOnce(context.Background())
	if a := pointOf(t, sink, schema.MeasurementApp, "stream"); a != nil {
		t.Fatal("written while the stream could not be read")
	}
	stream.mu.Lock()
	stream.err = nil
	stream.mu.Unlock()
	clk.Set(t0.Add(DefaultCloseOutAfter + DefaultInterval))
	p.PollOnce(context.Background())
	u := pointOf(t, sink, schema.MeasurementUsage, "stream")
	if u == nil || u.fields[schema.UsageTaskCPUSeconds] != 4.0 {
		t.Fatalf("after the retry: %v, want the stream's figures", u)
	}
}

// What the stream names is bounded: keys past maxUnseen are counted and
// not kept, and at most unseenPerRound are written per round.
func TestStreamOnlyBounded(t *testing.T) {
	clk := &clock{now: t0}
	sink := newMemSink()
	p := newPoller(t, Config{Sources: []string{refusedURL(t)}, Sink: sink, Now: clk.Now})
	for i := range maxUnseen + 5 {
		p.SeeApp(fmt.Sprintf("forged-%d", i))
	}
	st := p.Stats()
	if st.StreamOnlyWaiting != maxUnseen || st.StreamOnly["not_kept"] != 5 {
		t.Fatalf("waiting %d, not kept %d; want %d and 5", st.StreamOnlyWaiting, st.StreamOnly["not_kept"], maxUnseen)
	}
	clk.Set(t0.Add(DefaultCloseOutAfter))
	p.PollOnce(context.Background())
	if got := p.Stats().StreamOnly["written"]; got != unseenPerRound {
		t.Errorf("%d written in one round, want %d", got, unseenPerRound)
	}
	// A key that is not a Spark id has no app_id.
	ids := sink.stored(schema.MeasurementApp, func(p point) string { return fmt.Sprint(p.fields[schema.FieldAppID]) })
	if len(ids) != unseenPerRound || ids[0] != "<nil>" {
		t.Errorf("app_id of the forged keys' facts: %v, want %d without", ids, unseenPerRound)
	}
}

// closingSink is a memSink that, once closing, takes nothing, as a sink
// that is stopping.
type closingSink struct {
	*memSink
	closing atomic.Bool
}

func (s *closingSink) Append(lines []byte, wait bool) bool {
	return !s.closing.Load() && s.memSink.Append(lines, wait)
}

// Which keys a source answered for: an {app_id} template's 404 is Spark's
// word that it runs no such application, kept past the id's retirement; a
// template that does not answer is no answer, and the stream's facts are
// written; a key whose facts the ledger keeps (written before a restart)
// is answered for, as is one a source lists whose facts are not written
// yet (its jobs fail to read); facts the sink refuses as it closes are
// not counted as written, and the key stays waiting.
func TestStreamOnlyAnswered(t *testing.T) {
	const denied, silent, kept, closing, listed = "app-20261122100000-0001", "app-20261122100000-0002",
		"app-20261122100000-0003", "app-20261122100000-0004", "app-20261122100000-0005"
	ui := sparkui.NewServer(sparkui.LiveUI, liveApp(listed, "listed", t0))
	failing := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/jobs") {
			http.Error(w, "broken", http.StatusInternalServerError)
			return
		}
		ui.ServeHTTP(w, r)
	}))
	base := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, denied) {
			http.NotFound(w, r)
			return
		}
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	}))
	clk := &clock{now: t0}
	sink := &closingSink{memSink: newMemSink()}
	t.Cleanup(func() { sink.appendOnly(t) })
	ui.SetNow(clk.Now)
	p := newPoller(t, Config{Sources: []string{base + "/ui/{app_id}", failing}, Sink: sink, Now: clk.Now})
	p.Facts().Record(kept, []facts.Key{facts.NewKey(schema.MeasurementApp, factTime(ms(t0)-3_600_000, 0, phaseEnd))}, nil, t0)
	for s := 0.0; s <= 60; s += 10 {
		clk.Set(at(s))
		for _, k := range []string{denied, silent, kept, listed} {
			p.SeeApp(k)
		}
		p.PollOnce(context.Background())
	}
	// Past giveUp, when the denied id's retirement has lapsed.
	clk.Set(at(60).Add(DefaultCloseOutAfter))
	p.PollOnce(context.Background())
	ids := sink.stored(schema.MeasurementApp, func(p point) string {
		return p.tags[schema.TagApplicationID] + " " + fmt.Sprint(p.fields[schema.FieldFact])
	})
	if want := []string{silent + " stream"}; !slices.Equal(ids, want) {
		t.Errorf("spark_app facts %q, want %q", ids, want)
	}

	sink.closing.Store(true)
	clk.Set(at(100))
	p.SeeApp(closing)
	clk.Set(at(100).Add(2 * DefaultCloseOutAfter))
	p.PollOnce(context.Background())
	st := p.Stats()
	if st.StreamOnly["written"] != 1 || st.StreamOnlyWaiting != 1 {
		t.Errorf("with the sink closing: %d written, %d waiting; want 1 and 1 (the key kept)", st.StreamOnly["written"], st.StreamOnlyWaiting)
	}
	sink.closing.Store(false)
	clk.Set(clk.Now().Add(DefaultInterval))
	p.PollOnce(context.Background())
	ids = sink.stored(schema.MeasurementApp, func(p point) string {
		return p.tags[schema.TagApplicationID] + " " + fmt.Sprint(p.fields[schema.FieldFact])
	})
	if want := []string{silent + " stream", closing + " stream"}; !slices.Equal(ids, want) || p.Stats().StreamOnly["written"] != 2 {
		t.Errorf("once the sink takes it: spark_app facts %q, written %d; want %q", ids, p.Stats().StreamOnly["written"], want)
	}
}
