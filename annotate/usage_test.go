package annotate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/accounting"
	"github.com/sparkpulse/sparkpulse/attempt"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/sparkui"
)

// fakeStream answers Totals with fixed totals, or an error, and records
// the windows asked for.
type fakeStream struct {
	mu     sync.Mutex
	totals map[string]ProcessTotals
	err    error
	asked  [][2]time.Time
	// dated, when set, are the totals of points stamped at a time: a
	// window gets those it holds, [from, to). Otherwise every window gets
	// totals.
	dated []datedTotals
}

type datedTotals struct {
	at     time.Time
	totals map[string]ProcessTotals
}

func (f *fakeStream) Totals(_ context.Context, app string, from, to time.Time) (map[string]ProcessTotals, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, [2]time.Time{from, to})
	if f.dated == nil || f.err != nil {
		return f.totals, f.err
	}
	out := map[string]ProcessTotals{}
	for _, d := range f.dated {
		if !d.at.Before(from) && d.at.Before(to) {
			accounting.MergeTotals(out, d.totals)
		}
	}
	return out, nil
}

// A completed application of two executors: executor 1 ran 600 s with 4
// cores, executor 2 300 s; their totals in Spark's executor list; stage
// totals in the stage list.
func accountedApp() *sparkui.Model {
	m := liveApp(scriptApp, "Nightly ETL", t0)
	a := m.Apps[0].Attempts[0]
	a.End = at(600)
	a.Properties = map[string]string{"spark.executor.memory": "4g", "spark.executor.cores": "4", "spark.yarn.queue": "etl"}
	a.Executors = []*sparkui.Executor{
		{ID: "driver", HostPort: "10.0.0.1:40000", Added: at(0)},
		{ID: "1", HostPort: "node-1:40001", Cores: 4, Added: at(0), CompletedTasks: 100, TaskTimeMs: 400_000, GCTimeMs: 20_000,
			InputBytes: 1 << 30, ShuffleRead: 0, ShuffleWrite: 100 << 20},
		{ID: "2", HostPort: "node-2:40002", Cores: 4, Added: at(100), Removed: at(400), RemoveReason: "Container killed by YARN for exceeding physical memory limits.",
			CompletedTasks: 50, TaskTimeMs: 200_000, GCTimeMs: 10_000, InputBytes: 512 << 20, ShuffleWrite: 50 << 20},
	}
	a.AddJob(&sparkui.Job{ID: 0, Name: "save", Submitted: at(1), Completed: at(590), StageIDs: []int{0}, Status: sparkui.JobSucceeded, Tasks: 150, CompletedTasks: 150})
	a.AddStage(&sparkui.Stage{ID: 0, Name: "save", Status: sparkui.StageComplete, Submitted: at(1), Completed: at(590), Tasks: 150, CompleteTasks: 150,
		CPUTimeNs: 450e9, RunTimeMs: 600_000, MemorySpilled: 1 << 20})
	return m
}

// The stream has executor 1 whole and executor 2 without its last 10
// tasks (its last report never came: killed over its memory limit).
func accountedStream() map[string]ProcessTotals {
	return map[string]ProcessTotals{
		"1": {Sums: map[string]float64{"succeededTasks.count": 100, "cpuTime.count": 300e9, "runTime.count": 400_000, "jvmGCTime.count": 20_000,
			"bytesRead.count": 1 << 30, "shuffleBytesWritten.count": 100 << 20},
			Peak: map[string]float64{"ProcessTreeJVMRSSMemory": 2 << 30}, Mean: map[string]float64{"ProcessTreeJVMRSSMemory": 1 << 30}},
		"2": {Sums: map[string]float64{"succeededTasks.count": 40, "cpuTime.count": 120e9, "runTime.count": 160_000, "jvmGCTime.count": 8_000,
			"bytesRead.count": 400 << 20, "shuffleBytesWritten.count": 40 << 20},
			Peak: map[string]float64{"ProcessTreeJVMRSSMemory": 4 << 30}, Mean: map[string]float64{"ProcessTreeJVMRSSMemory": 3 << 30}},
		"driver": {Peak: map[string]float64{"JVMHeapMemory": 300 << 20}},
	}
}

func TestAccountingAndReconciliation(t *testing.T) {
	srv := sparkui.NewServer(sparkui.HistoryServer, accountedApp())
	clk := &clock{now: at(630)}
	srv.SetNow(clk.Now)
	stream := &fakeStream{totals: accountedStream()}
	sink := newMemSink()
	p := newPoller(t, Config{Sources: []string{serve(t, srv)}, Sink: sink, Now: clk.Now, Stream: stream})
	ctx := context.Background()

	// 30 s after the end: the last reports may still be on their way.
	p.PollOnce(ctx)
	if len(stream.asked) != 0 || len(sink.stored(schema.MeasurementUsage, usageRow)) != 0 {
		t.Fatalf("before the delay: stream asked %v, usage %v", stream.asked, sink.stored(schema.MeasurementUsage, usageRow))
	}
	// A minute after: the stream is read over the whole run, once.
	clk.Set(at(661))
	p.PollOnce(ctx)
	clk.Set(at(700))
	p.PollOnce(ctx)
	if want := [2]time.Time{at(-60), at(660)}; len(stream.asked) != 1 || !stream.asked[0][0].Equal(want[0]) || !stream.asked[0][1].Equal(want[1]) {
		t.Fatalf("stream asked %v, want once for %v", stream.asked, want)
	}

	// Given: executor 1 4 cores × 600 s, executor 2 4 × 300 s: 3600
	// core-seconds; the 4g container (4 GiB + 409.6 MiB = 4724464025 B)
	// for 900 s. Used: 420 s of task CPU: 11.7 %. The largest resident
	// memory, 4 GiB, is 90.9 % of the container; the mean of the means
	// 2 GiB. GC: 30 s of 600 s of task time.
	got := sink.stored(schema.MeasurementUsage, usageRow)
	want := []string{fmt.Sprintf("%d end queue=etl user=etl dur=600000 execs=2 cores=3600 bytes=%v cpu=420 util=0.1167 from=tasks peak=%d mem=0.9091 mean=%d gc=0.0500 failed=0 killed=0 spill=1048576",
		ms(at(600))*1_000_000, float64(4724464025*900), int64(4<<30), int64(2<<30))}
	equalLines(t, "usage", got, want)

	// Reconciled: executor 2 is 10 tasks short; CPU against the stage
	// list's 450 s; input 1.375 GiB of 1.5 GiB: −112/1536 = −7.29 %.
	rec := sink.stored(schema.MeasurementReconcile, reconcileRow)
	equalLines(t, "reconcile", rec, []string{fmt.Sprintf(`%d short short=2 tasks=140/150 cpu=420/450 gc=28000/30000 text="the last reports of executor 2 are missing: tasks -6.67 %%, cpu_time_ns -6.67 %%, run_time_ms -6.67 %%, gc_time_ms -6.67 %%, input_bytes -7.29 %%, shuffle_write_bytes -6.67 %%"`,
		ms(at(600))*1_000_000)})

	// The sizing advice came with it, the same time as ever.
	if n := len(sink.stored(schema.MeasurementSizing, func(p point) string { return fmt.Sprint(p.fields["kind"]) })); n == 0 {
		t.Error("no sizing advice")
	}
}

// Without the stream (InfluxDB down for longer than stream-retry), the
// accounting goes ahead without CPU and the reconciliation says why it
// has nothing.
func TestAccountingWithoutTheStream(t *testing.T) {
	srv := sparkui.NewServer(sparkui.HistoryServer, accountedApp())
	clk := &clock{now: at(661)}
	srv.SetNow(clk.Now)
	stream := &fakeStream{err: errors.New("influx: connection refused")}
	sink := newMemSink()
	p := newPoller(t, Config{Sources: []string{serve(t, srv)}, Sink: sink, Now: clk.Now, Stream: stream, StreamRetry: 30 * time.Minute})
	for s := 661.0; s < 661+32*60; s += 10 {
		clk.Set(at(s))
		p.PollOnce(context.Background())
	}
	// Backoff from 10 s doubling to 5 min: 10+20+…+160 s, then every
	// 5 min up to 30 min and a last read.
	if n := len(stream.asked); n < 8 || n > 12 {
		t.Errorf("stream asked %d times in 32 min, want 8 to 12", n)
	}
	usage := sink.latestOf(schema.MeasurementUsage)
	if usage == nil || usage.fields["cpu_utilisation"] != nil ||
		!strings.HasPrefix(fmt.Sprint(usage.fields["notes"]), "no task CPU time in the metrics stream: CPU utilisation unknown; "+
			"no process-tree metrics: memory utilisation unknown (spark.executor.processTreeMetrics.enabled=true); "+
			"metrics stream not read: influx: connection refused (failing for 3") {
		t.Errorf("usage %+v", usage)
	}
	rec := sink.latestOf(schema.MeasurementReconcile)
	if rec == nil || rec.fields["verdict"] != accounting.ReconcileNoStream {
		t.Errorf("reconcile %+v", rec)
	}
}

// InfluxDB down for an hour when an application's accounting is due,
// long after its source stopped listing it: the read is retried with
// backoff, and the accounting, written once, is the one the stream gives.
func TestAccountingThroughAnOutage(t *testing.T) {
	srv := sparkui.NewServer(sparkui.HistoryServer, accountedApp())
	clk := &clock{now: at(661)}
	srv.SetNow(clk.Now)
	stream := &fakeStream{totals: accountedStream(), err: errors.New("influx: connection refused")}
	sink := newMemSink()
	p := newPoller(t, Config{Sources: []string{serve(t, srv)}, Sink: sink, Now: clk.Now, Stream: stream})
	for s := 661.0; s < 600+3700; s += 10 {
		if s >= 600+3600 {
			stream.mu.Lock()
			stream.err = nil
			stream.mu.Unlock()
		}
		clk.Set(at(s))
		p.PollOnce(context.Background())
	}
	if n := len(stream.asked); n < 10 || n > 20 {
		t.Errorf("stream asked %d times in an hour, want 10 to 20", n)
	}
	got := sink.stored(schema.MeasurementUsage, usageRow)
	if len(got) != 1 || !strings.Contains(got[0], " cpu=420 ") {
		t.Errorf("usage %q, want one end fact with the stream's 420 s of CPU", got)
	}
	if rec := sink.stored(schema.MeasurementReconcile, reconcileRow); len(rec) != 1 || !strings.Contains(rec[0], " short short=2 ") {
		t.Errorf("reconcile %q", rec)
	}
}

func usageRow(p point) string {
	f := p.fields
	num := func(k string) string {
		if v, ok := f[k].(float64); ok {
			return fmt.Sprintf("%.4f", v)
		}
		return fmt.Sprint(f[k])
	}
	return fmt.Sprintf("%d %v queue=%s user=%s dur=%v execs=%v cores=%v bytes=%v cpu=%v util=%s from=%v peak=%v mem=%s mean=%v gc=%s failed=%v killed=%v spill=%v",
		p.ns, f["fact"], p.tags["queue"], p.tags["user"], f["duration_ms"], f["executors"], f["executor_core_seconds"], f["executor_memory_byte_seconds"],
		f["task_cpu_seconds"], num("cpu_utilisation"), f["cpu_from"], f["peak_rss_bytes"], num("memory_utilisation"), f["mean_rss_bytes"],
		num("gc_share"), f["failed_tasks"], f["killed_tasks"], f["memory_spilled_bytes"])
}

func reconcileRow(p point) string {
	f := p.fields
	return fmt.Sprintf("%d %v short=%v tasks=%v/%v cpu=%v/%v gc=%v/%v text=%q", p.ns, f["verdict"], f["short_executors"],
		f["stream_tasks"], f["spark_tasks"], secs(f["stream_cpu_time_ns"]), secs(f["spark_cpu_time_ns"]), f["stream_gc_time_ms"], f["spark_gc_time_ms"], f["text"])
}

func secs(v any) any {
	if f, ok := v.(float64); ok {
		return f / 1e9
	}
	return v
}

// latestOf is the last point written of measurement, or nil.
func (s *memSink) latestOf(measurement string) *point {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.written) - 1; i >= 0; i-- {
		if s.written[i].measurement == measurement {
			p := s.written[i]
			return &p
		}
	}
	return nil
}

// Impossible numbers in Spark's answers are read as absent, counted, and
// said in the accounting's notes: cores −8 become the application's
// spark.executor.cores, and the core-seconds held stay true.
func TestImpossibleAnswersNoted(t *testing.T) {
	m := accountedApp()
	m.Apps[0].Attempts[0].Executors[1].Cores = -8
	srv := sparkui.NewServer(sparkui.HistoryServer, m)
	clk := &clock{now: at(661)}
	srv.SetNow(clk.Now)
	sink := newMemSink()
	p := newPoller(t, Config{Sources: []string{serve(t, srv)}, Sink: sink, Now: clk.Now, Stream: &fakeStream{totals: accountedStream()}})
	p.PollOnce(context.Background())
	u := sink.latestOf(schema.MeasurementUsage)
	if u == nil {
		t.Fatal("no usage")
	}
	if notes := fmt.Sprint(u.fields["notes"]); !strings.Contains(notes, "values in Spark's answers that no Spark writes were read as absent: totalCores -8") {
		t.Errorf("notes %q", notes)
	}
	// 4 cores × 600 s and 4 × 300 s, as with the genuine answer.
	if got := u.fields["executor_core_seconds"]; got != 3600.0 {
		t.Errorf("core-seconds %v, want 3600", got)
	}
	if p.Stats().Invalid == 0 {
		t.Error("not counted")
	}
}

// Read through a YARN ResourceManager's proxy, an application's usage is
// tagged with the queue and user YARN reports (root.etl, after its
// placement rules), not those Spark asked for, and its end carries what
// YARN says it held; the ResourceManager is asked twice, at the first
// read and after the end. Without an answer from it, spark.yarn.queue
// stands and YARN's figures are absent.
func TestYARNQueueAndUser(t *testing.T) {
	for _, tc := range []struct {
		name        string
		answer      string // the ResourceManager's, "" for a 404
		queue, user string
		held        string
	}{
		{"YARN says", `{"app":{"id":"` + scriptApp + `","user":"etl-svc","queue":"root.etl","state":"FINISHED","memorySeconds":4404019,"vcoreSeconds":4301}}`,
			"root.etl", "etl-svc", "4301 4.617948626944e+12"},
		{"another application's answer", `{"app":{"id":"application_1_0002","user":"mallory","queue":"root.x","state":"FINISHED","vcoreSeconds":1}}`, "etl", "etl", "<nil> <nil>"},
		{"no answer", "", "etl", "etl", "<nil> <nil>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := sparkui.NewServer(sparkui.LiveUI, accountedApp())
			clk := &clock{now: at(630)}
			srv.SetNow(clk.Now)
			var asked atomic.Int64
			mux := http.NewServeMux()
			mux.Handle("/proxy/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/proxy/"), "/")
				r.URL.Path = "/" + rest
				srv.ServeHTTP(w, r)
			}))
			mux.Handle("/ws/v1/cluster/apps/"+scriptApp, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				asked.Add(1)
				if tc.answer == "" {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, tc.answer)
			}))
			sink := newMemSink()
			p := newPoller(t, Config{Sources: []string{serve(t, mux) + "/proxy/{app_id}"}, Sink: sink, Now: clk.Now, Stream: &fakeStream{totals: accountedStream()}})
			p.SeeApp(scriptApp)
			for _, s := range []float64{630, 661, 700} {
				clk.Set(at(s))
				p.PollOnce(context.Background())
			}
			got := sink.stored(schema.MeasurementUsage, func(p point) string {
				return fmt.Sprint(p.tags[schema.TagQueue], " ", p.tags[schema.TagUser], " ", p.fields[schema.UsageYARNVcoreSeconds], " ", p.fields[schema.UsageYARNMemoryByteSeconds])
			})
			if want := tc.queue + " " + tc.user + " " + tc.held; len(got) != 1 || got[0] != want {
				t.Errorf("usage %q, want %q", got, want)
			}
			if asked.Load() != 2 {
				t.Errorf("the ResourceManager was asked %d times, want twice", asked.Load())
			}
		})
	}
}

// A configured History Server that takes an application over from a YARN
// proxy template's instance still asks the ResourceManager behind the
// proxy: the usage it writes has YARN's queue, user and figures.
func TestYARNAfterTakeOver(t *testing.T) {
	live := sparkui.NewServer(sparkui.LiveUI, accountedApp())
	hs := sparkui.NewServer(sparkui.HistoryServer, accountedApp())
	clk := &clock{now: at(630)}
	live.SetNow(clk.Now)
	hs.SetNow(clk.Now)
	mux := http.NewServeMux()
	mux.Handle("/proxy/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/proxy/"), "/")
		r.URL.Path = "/" + rest
		live.ServeHTTP(w, r)
	}))
	mux.Handle("/hs/", http.StripPrefix("/hs", hs))
	mux.Handle("/ws/v1/cluster/apps/"+scriptApp, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"app":{"id":%q,"user":"etl-svc","queue":"root.etl","state":"FINISHED","memorySeconds":10,"vcoreSeconds":3}}`, scriptApp)
	}))
	base := serve(t, mux)
	for _, hsFirst := range []bool{false, true} {
		// hsFirst: the History Server lists the application before the
		// metrics name it to the proxy template.
		t.Run(fmt.Sprint("hs first ", hsFirst), func(t *testing.T) {
			sink := newMemSink()
			p := newPoller(t, Config{Sources: []string{base + "/proxy/{app_id}", base + "/hs"}, Sink: sink, Now: clk.Now, Stream: &fakeStream{totals: accountedStream()}})
			for i, s := range []float64{630, 640, 661, 700, 710} {
				if i == 0 && !hsFirst || i == 1 && hsFirst {
					p.SeeApp(scriptApp)
				}
				clk.Set(at(s))
				p.PollOnce(context.Background())
			}
			got := sink.stored(schema.MeasurementUsage, func(p point) string {
				return fmt.Sprint(p.tags[schema.TagQueue], " ", p.tags[schema.TagUser], " ", p.fields[schema.UsageYARNVcoreSeconds])
			})
			if want := "root.etl etl-svc 3"; len(got) != 1 || got[0] != want {
				t.Errorf("usage %q, want %q", got, want)
			}
		})
	}
}

// With a History sink, the usage's end fact is written there again as
// spark_app_history: its tags but applicationid, its fields, at its
// millisecond with the application's digits below it; estimates are not.
// Without one, nothing of it is encoded.
func TestHistoryPoint(t *testing.T) {
	srv := sparkui.NewServer(sparkui.HistoryServer, accountedApp())
	clk := &clock{now: at(661)}
	srv.SetNow(clk.Now)
	sink, history := newMemSink(), newMemSink()
	p := newPoller(t, Config{Sources: []string{serve(t, srv)}, Sink: sink, History: history, Now: clk.Now, Stream: &fakeStream{totals: accountedStream()}})
	p.PollOnce(context.Background())

	var usage []point
	sink.mu.Lock()
	for _, pt := range sink.written {
		if pt.measurement == schema.MeasurementUsage {
			usage = append(usage, pt)
		}
	}
	sink.mu.Unlock()
	history.mu.Lock()
	got := slices.Clone(history.written)
	history.mu.Unlock()
	if len(usage) != 1 || len(got) != 1 {
		t.Fatalf("%d usage points, %d history points; want one of each", len(usage), len(got))
	}
	u, h := usage[0], got[0]
	wantTags := maps.Clone(u.tags)
	delete(wantTags, schema.TagApplicationID)
	if h.measurement != schema.MeasurementAppHistory || !maps.Equal(h.tags, wantTags) || len(h.tags) != 3 {
		t.Errorf("history %s %v; want %s %v", h.measurement, h.tags, schema.MeasurementAppHistory, wantTags)
	}
	if !reflect.DeepEqual(h.fields, u.fields) || h.fields[schema.FieldAppID] != u.tags[schema.TagApplicationID] {
		t.Errorf("history fields %v\nusage fields %v", h.fields, u.fields)
	}
	if h.ns/1_000_000 != u.ns/1_000_000 || h.ns == u.ns || h.ns != historyTime(u.ns, u.tags[schema.TagApplicationID]) {
		t.Errorf("history at %d, usage at %d", h.ns, u.ns)
	}

	// Two applications ending in one millisecond: two history times.
	if historyTime(u.ns, "app-1") == historyTime(u.ns, "app-2") {
		t.Error("two applications, one history time")
	}

	// No History sink: none encoded.
	srv2 := sparkui.NewServer(sparkui.HistoryServer, accountedApp())
	srv2.SetNow(clk.Now)
	p2 := newPoller(t, Config{Sources: []string{serve(t, srv2)}, Sink: newMemSink(), Now: clk.Now, Stream: &fakeStream{totals: accountedStream()}})
	w := &points{p: p2, st: newAppState(attempt.Key{App: "app-1", Start: 0})}
	w.history()
	if w.hn != 0 || len(w.hist) != 0 {
		t.Errorf("history encoded without a sink: %q", w.hist)
	}
}
