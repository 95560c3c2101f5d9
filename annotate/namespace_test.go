package annotate

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sparkpulse/sparkpulse/attempt"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/sparkui"
)

func TestNamesakes(t *testing.T) {
	run := func(id string, start, end int64) interval { return interval{attempt.Key{App: id, Start: start}, end} }
	got := namesakes(map[string][]interval{
		// b overlaps a, c is alone; d overlaps e and f, which do not
		// overlap each other.
		"etl":   {run("c", 300, 400), run("a", 0, 100), run("b", 50, 200)},
		"shell": {run("d", 0, 1000), run("e", 900, 1100), run("f", 10, 20)},
		"alone": {run("g", 0, 10)},
	})
	want := map[attempt.Key][]string{
		{App: "a", Start: 0}: {"b"}, {App: "b", Start: 50}: {"a"},
		{App: "d", Start: 0}: {"f"}, {App: "f", Start: 10}: {"d"}, {App: "e", Start: 900}: {"d"},
	}
	if len(got) != len(want) {
		t.Errorf("namesakes %v, want %v", got, want)
	}
	for k, ids := range want {
		if !slices.Equal(got[k], ids) {
			t.Errorf("%v: namesakes %v, want %v", k, got[k], ids)
		}
	}
}

// Metrics under the application's name join its points; two applications
// of that name running at once can't be told apart in the stream, and
// the accounting says so instead of summing both.
func TestAccountingByName(t *testing.T) {
	m := accountedApp()
	a := m.Apps[0].Attempts[0]
	a.Properties["spark.metrics.namespace"] = "${spark.app.name}"
	a.Properties["spark.app.name"] = m.Apps[0].Name
	srv := sparkui.NewServer(sparkui.HistoryServer, m)
	clk := &clock{now: at(661)}
	srv.SetNow(clk.Now)
	stream := &fakeStream{totals: accountedStream()}
	sink := newMemSink()
	p := newPoller(t, Config{Sources: []string{serve(t, srv)}, Sink: sink, Now: clk.Now, Stream: stream})
	p.PollOnce(context.Background())

	for _, meas := range []string{schema.MeasurementApp, schema.MeasurementUsage, schema.MeasurementReconcile, schema.MeasurementExecutor} {
		keys := sink.stored(meas, func(p point) string { return p.tags["applicationid"] })
		if len(keys) == 0 {
			t.Errorf("no %s points", meas)
		}
		for _, k := range keys {
			if k != "Nightly-ETL" {
				t.Errorf("%s tagged applicationid=%q, want the metrics' Nightly-ETL", meas, k)
			}
		}
	}
	if rec := sink.stored(schema.MeasurementReconcile, reconcileRow); len(rec) != 1 || !strings.Contains(rec[0], " short short=2 tasks=140/150 ") {
		t.Errorf("reconciled by name: %q", rec)
	}
	if ids := sink.stored(schema.MeasurementUsage, func(p point) string { return fmt.Sprint(p.fields["app_id"]) }); len(ids) != 1 || ids[0] != scriptApp {
		t.Errorf("usage app_id: %q, want %s", ids, scriptApp)
	}

	// A second run of the same name at the same time: the stream can't
	// tell them apart, and their points would collide under the name, so
	// they are tagged with their ids.
	m2 := accountedApp()
	twin := m2.Apps[0]
	twin.ID = "app-20240101120000-0099"
	twin.Attempts[0].Properties = a.Properties
	m.Apps = append(m.Apps, twin)
	srv2 := sparkui.NewServer(sparkui.HistoryServer, m)
	srv2.SetNow(clk.Now)
	stream2 := &fakeStream{totals: accountedStream()}
	sink2 := newMemSink()
	p2 := newPoller(t, Config{Sources: []string{serve(t, srv2)}, Sink: sink2, Now: clk.Now, Stream: stream2})
	p2.PollOnce(context.Background())
	for _, k := range sink2.stored(schema.MeasurementApp, func(p point) string { return p.tags["applicationid"] }) {
		if k != scriptApp && k != twin.ID {
			t.Errorf("namesakes' points under %q, want their ids", k)
		}
	}
	if len(stream2.asked) != 0 {
		t.Errorf("the stream was read for ambiguous applications: %v", stream2.asked)
	}
	rec := sink2.stored(schema.MeasurementReconcile, reconcileRow)
	if len(rec) != 2 {
		t.Fatalf("reconciliations %q", rec)
	}
	for i, other := range []string{twin.ID, scriptApp} { // sorted by time, then text: the first is the original's
		if r := rec[i]; !strings.Contains(r, " no_stream ") || !strings.Contains(r, other+" of the same name ran at the same time") {
			t.Errorf("reconciliation %q: want no_stream naming %s", r, other)
		}
	}
}
