package annotate

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/influx/influxtest"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/sparkui"
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
		if err := p.SaveFacts(&saved); err != nil {
			t.Fatal(err)
		}
		p = start()
		if restarts {
			if err := p.LoadFacts(&saved); err != nil {
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
// running items again: what LoadFacts is for.
func TestRestartWithoutFactsWritesAgain(t *testing.T) {
	if sink := wholeRun(t, false, nil); len(sink.again) == 0 {
		t.Error("a restart without the facts of the last run wrote nothing twice; the ledger test proves nothing")
	}
}

// The ledger survives Save and Load; a damaged file is refused whole.
func TestLedgerSaveLoad(t *testing.T) {
	l := newLedger()
	l.record("app-1", []factKey{{M: 1, TS: 5}, {M: 2, TS: 7}}, map[string]snapshot{"3": {Sum: 9, TS: 11}}, time.UnixMilli(100))
	var b bytes.Buffer
	if err := l.Save(&b); err != nil {
		t.Fatal(err)
	}
	saved := b.String()
	m := newLedger()
	if err := m.Load(&b); err != nil {
		t.Fatal(err)
	}
	if at := time.UnixMilli(100); !m.has("app-1", factKey{M: 2, TS: 7}, at) || m.has("app-1", factKey{M: 2, TS: 8}, at) || m.lastSnapshot("app-1", "3", at) != (snapshot{Sum: 9, TS: 11}) {
		t.Errorf("loaded ledger differs: %s", saved)
	}
	for _, bad := range []string{"", "{", `{"version":2,"applications":{}}`, `{"version":1,"applications":{"a":null}}`} {
		if err := newLedger().Load(strings.NewReader(bad)); err == nil {
			t.Errorf("Load(%q): no error", bad)
		}
	}
	m.forget(time.UnixMilli(102), time.Millisecond)
	if m.has("app-1", factKey{M: 1, TS: 5}, time.UnixMilli(200)) {
		t.Error("forget kept an application unused since before")
	}
}

// An application checked in this run is forgotten by the time since its
// check as the clock measures it (monotonic with time.Now), not by the
// wall time it recorded: a step of the wall clock three hours ahead
// leaves its recorded time three hours behind, and it is kept. One only
// loaded from the last run is timed by its recorded wall time.
func TestLedgerForgetsByItsChecks(t *testing.T) {
	const keep = time.Hour + 20*time.Minute
	l := newLedger()
	l.record("running", []factKey{{M: 1, TS: 5}}, nil, time.Now())
	l.apps["running"].Used = time.Now().Add(-3 * time.Hour).UnixMilli() // as after a step of the wall clock
	var b bytes.Buffer
	loaded := newLedger()
	old := newLedger()
	old.record("ended", []factKey{{M: 1, TS: 6}}, nil, time.Now().Add(-3*time.Hour))
	old.Save(&b)
	if err := loaded.Load(&b); err != nil {
		t.Fatal(err)
	}
	l.apps["ended"] = loaded.apps["ended"]
	l.forget(time.Now(), keep)
	if !l.holds("running") || l.holds("ended") {
		t.Errorf("after forget: running kept %v (want true), ended kept %v (want false)", l.holds("running"), l.holds("ended"))
	}
}
