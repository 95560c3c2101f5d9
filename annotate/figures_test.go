package annotate

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sparkpulse/sparkpulse/accounting"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/sparkui"
)

// figuresRow formats the figures of a spark_app_usage point.
func figuresRow(p point) string {
	f := p.fields
	occ := fmt.Sprint(f["slot_occupancy"])
	if v, ok := f["slot_occupancy"].(float64); ok {
		occ = fmt.Sprintf("%.4f", v)
	}
	return fmt.Sprintf("%d %v occupancy=%s driver_only=%v failed_attempts=%v lost=%v outcome=%v reason=%q",
		p.ns, f["fact"], occ, f["driver_only_ms"], f["failed_stage_attempts"], f["lost_task_seconds"], f["outcome"], f["outcome_reason"])
}

// The figures in spark_app_usage at the end, worked by hand on
// accountedApp: executors held 3600 core-seconds and ran tasks 560 s
// (the stream's run time): 15.56 % occupancy; stage 0 ran 1–590 s of the
// 600 s: 11 s with no stage; no task failed: nothing lost, though the
// stream is short; job 0, the last, succeeded.
func TestUsageFiguresAtTheEnd(t *testing.T) {
	sink := accountWith(t, accountedApp(), accountedStream())
	equalLines(t, "usage", sink.stored(schema.MeasurementUsage, figuresRow), []string{
		fmt.Sprintf(`%d end occupancy=0.1556 driver_only=11000 failed_attempts=0 lost=0 outcome=succeeded reason="its last job, 0, succeeded"`, ms(at(600))*1_000_000),
	})

	// With 3 failed tasks: Spark's stage list counts 612 s of run time,
	// the executors' counters (now whole) the successful tasks' 600 s:
	// 12 s lost (the failed tasks are not in the History Server's task
	// lists: the stream tells). Stage 0's first attempt failed 1–100 s
	// and its second ran 110–590 s: 0–1, 100–110 and 590–600, 21 s with
	// no stage.
	m := accountedApp()
	a := m.Apps[0].Attempts[0]
	s0 := a.Stage(0, 0)
	s0.Status, s0.Completed, s0.FailedTasks, s0.RunTimeMs, s0.CPUTimeNs, s0.Tasks, s0.CompleteTasks = sparkui.StageFailed, at(100), 3, 12_000, 5e9, 150, 0
	s0.FailureReason = "FetchFailed(BlockManagerId(2, node-2, 7337, None), shuffleId=0, mapIndex=3)"
	a.AddStage(&sparkui.Stage{ID: 0, Attempt: 1, Name: "save", Status: sparkui.StageComplete, Submitted: at(110), Completed: at(590), Tasks: 150, CompleteTasks: 150,
		CPUTimeNs: 450e9, RunTimeMs: 600_000})
	stream := accountedStream()
	stream["2"] = ProcessTotals{Sums: map[string]float64{"succeededTasks.count": 50, "cpuTime.count": 150e9, "runTime.count": 200_000, "jvmGCTime.count": 10_000,
		"bytesRead.count": 512 << 20, "shuffleBytesWritten.count": 50 << 20}}
	sink = accountWith(t, m, stream)
	equalLines(t, "usage with failures", sink.stored(schema.MeasurementUsage, figuresRow), []string{
		fmt.Sprintf(`%d end occupancy=0.1667 driver_only=21000 failed_attempts=1 lost=12 outcome=succeeded reason="its last job, 0, succeeded"`, ms(at(600))*1_000_000),
	})
	if rec := sink.stored(schema.MeasurementReconcile, func(p point) string { return fmt.Sprint(p.fields["verdict"]) }); len(rec) != 1 || rec[0] != accounting.ReconcileFailedTasks {
		t.Errorf("reconciliation %v, want failed_tasks", rec)
	}

	// Must not: driver-only time or lost time from a stage list Spark
	// dropped stages from (stage 0 gone, stage 1 listed).
	m = accountedApp()
	a = m.Apps[0].Attempts[0]
	a.Stage(0, 0).ID = 1
	sink = accountWith(t, m, accountedStream())
	u := sink.latestOf(schema.MeasurementUsage)
	if u == nil {
		t.Fatal("no usage")
	}
	for _, f := range []string{"driver_only_ms", "failed_stage_attempts", "lost_task_seconds"} {
		if v, ok := u.fields[f]; ok {
			t.Errorf("stages dropped: %s = %v", f, v)
		}
	}
	if notes := fmt.Sprint(u.fields["notes"]); !strings.Contains(notes, "driver-only time and failed stage attempts unknown: 1 of the 2 stages") {
		t.Errorf("notes %q", notes)
	}
}

// accountWith polls a History Server showing m until its accounting is
// written, the stream answering stream.
func accountWith(t *testing.T, m *sparkui.Model, stream map[string]ProcessTotals) *memSink {
	t.Helper()
	srv := sparkui.NewServer(sparkui.HistoryServer, m)
	clk := &clock{now: at(661)}
	srv.SetNow(clk.Now)
	sink := newMemSink()
	p := newPoller(t, Config{Sources: []string{serve(t, srv)}, Sink: sink, Now: clk.Now, Stream: &fakeStream{totals: stream}})
	p.PollOnce(context.Background())
	return sink
}

// While an application runs, its first sync and then every
// usageEstimateEvery intervals write the figures so far: the running stage
// counts up to the read.
func TestUsageFiguresEstimate(t *testing.T) {
	m := liveApp(scriptApp, "Nightly ETL", t0)
	a := m.Apps[0].Attempts[0]
	a.Properties = map[string]string{"spark.executor.memory": "4g", "spark.executor.cores": "4"}
	a.Executors = []*sparkui.Executor{{ID: "driver", HostPort: "10.0.0.1:40000", Added: at(0)}, {ID: "1", HostPort: "node-1:40001", Cores: 4, Added: at(0)}}
	a.AddJob(&sparkui.Job{ID: 0, Name: "save", Submitted: at(5), StageIDs: []int{0}, Status: sparkui.JobRunning, Tasks: 8})
	a.AddStage(&sparkui.Stage{ID: 0, Name: "save", Status: sparkui.StageActive, Submitted: at(100), Tasks: 8, ActiveTasks: 4})
	srv := sparkui.NewServer(sparkui.LiveUI, m)
	clk := &clock{now: at(10)}
	srv.SetNow(clk.Now)
	stream := &fakeStream{dated: []datedTotals{{at(100), map[string]ProcessTotals{"1": {Sums: map[string]float64{"cpuTime.count": 100e9, "runTime.count": 290_000}}}}}}
	sink := newMemSink()
	p := newPoller(t, Config{Sources: []string{serve(t, srv)}, Sink: sink, Now: clk.Now, Stream: stream})
	for i := range usageEstimateEvery + 2 {
		clk.Set(at(10 * float64(i+1)))
		p.PollOnce(context.Background())
	}
	// Read at the first sync, 10 s, and 300 s later: executor 1 held 4
	// cores × 310 s = 1240 core-seconds, its tasks ran 290 s: 23.4 %.
	// Stage 0 has run since 100 s: 100 s with no stage.
	// The first sync's estimate, at 10 s: no report yet, no stage yet;
	// 4 cores held at both.
	equalLines(t, "estimate", sink.stored(schema.MeasurementUsage, func(p point) string { return figuresRow(p) + fmt.Sprintf(" held=%v", p.fields["cores_held"]) }), []string{
		fmt.Sprintf(`%d estimate occupancy=<nil> driver_only=10000 failed_attempts=0 lost=<nil> outcome=running reason="the attempt has not completed" held=4`, ms(at(10))*1_000_000+1),
		fmt.Sprintf(`%d estimate occupancy=0.2339 driver_only=100000 failed_attempts=0 lost=<nil> outcome=running reason="the attempt has not completed" held=4`, ms(at(310))*1_000_000+1),
	})
}

// An idle application on a History Server (its event log unchanged, so
// not read again) still gets an estimate every usageEstimateEvery
// intervals, no more: it runs, and holds its executors.
func TestUsageEstimateIdleOnHistoryServer(t *testing.T) {
	m := liveApp(scriptApp, "notebook", t0)
	a := m.Apps[0].Attempts[0]
	a.Updated = at(5) // the event log, last written at 5 s
	a.Properties = map[string]string{"spark.executor.memory": "4g", "spark.executor.cores": "4"}
	a.Executors = []*sparkui.Executor{{ID: "driver", HostPort: "10.0.0.1:40000", Added: at(0)}, {ID: "1", HostPort: "node-1:40001", Cores: 4, Added: at(0)}}
	srv := sparkui.NewServer(sparkui.HistoryServer, m)
	clk := &clock{now: at(10)}
	srv.SetNow(clk.Now)
	sink := newMemSink()
	p := newPoller(t, Config{Sources: []string{serve(t, srv)}, Sink: sink, Now: clk.Now, Stream: &fakeStream{}})
	for i := range 2*usageEstimateEvery + 1 {
		clk.Set(at(10 * float64(i+1)))
		p.PollOnce(context.Background())
	}
	var times []int64
	for _, l := range sink.stored(schema.MeasurementUsage, func(p point) string { return fmt.Sprint(p.ns / 1_000_000) }) {
		n, _ := strconv.ParseInt(l, 10, 64)
		times = append(times, n)
	}
	if want := []int64{ms(at(10)), ms(at(310)), ms(at(610))}; !slices.Equal(times, want) {
		t.Errorf("estimates at %v ms, want %v", times, want)
	}
}

// An application lost while it ran, with no History Server to show its
// end, is closed out with what it held until it was last seen, and the
// outcome driver_lost.
func TestUsageDriverLost(t *testing.T) {
	s := newScript(sparkui.LiveUI)
	s.srv.Update(func(m *sparkui.Model) {
		a := m.Apps[0].Attempts[0]
		a.Properties = map[string]string{"spark.executor.memory": "4g", "spark.executor.cores": "4"}
		a.Executors = []*sparkui.Executor{{ID: "driver", HostPort: "10.0.0.1:40000", Added: at(0)}, {ID: "1", HostPort: "node-1:40001", Cores: 4, Added: at(0)}}
	})
	sink, p := s.poller(t)
	p.PollOnce(context.Background())
	loseSource(p, s)
	// Last seen at 30 s: stage 0 had run since 5 s (up to the read), so
	// 5 s with no stage; no task counters without the stream.
	u := sink.latestOf(schema.MeasurementUsage)
	if u == nil {
		t.Fatal("no usage for the lost application")
	}
	if got := figuresRow(*u); !strings.HasPrefix(got, fmt.Sprintf("%d lost occupancy=<nil> driver_only=5000 failed_attempts=0 lost=<nil> outcome=driver_lost reason=\"no source has shown it since ", ms(at(30))*1_000_000+2)) {
		t.Errorf("usage %s", got)
	}
	if got := u.fields["executor_core_seconds"]; got != 120.0 {
		t.Errorf("core-seconds %v, want 4 × 30 s", got)
	}
}
