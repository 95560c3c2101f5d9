package annotate

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/sparkpulse/sparkpulse/attempt"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/sparkui"
)

// A driver killed while it ran: its live UI goes, and the History Server
// lists the attempt running for ever (its event log never completes). It
// is closed out as lost, at when the live UI last showed it, once the
// event log has not moved and no metrics named it for CloseOutAfter;
// never while either says the driver lives.
func TestDriverGoneUnderHistoryServer(t *testing.T) {
	for _, tc := range []struct {
		name       string
		logMovesAt float64 // > 0: the History Server reads the event log again then, and at every poll after
		logReadAt  float64 // > 0: the History Server reads it again then, once
		uiBackAt   float64 // > 0: the live UI answers again then
		metrics    float64 // metrics name it until then
		closedBy   float64 // closed out by then, and not before closedAfter; 0: never
		after      float64
		full       bool
		hsFirst    bool // the History Server lists it first, and syncs it
	}{
		// Must fire: nothing since the drop, ten minutes on.
		{name: "killed", closedBy: 760, after: 640},
		// The History Server listed it first: the live UI was its second
		// source, and its going counts the same.
		{name: "killed, the History Server first", hsFirst: true, closedBy: 760, after: 640},
		// Metrics named it until 1000 s: closed once they are quiet for
		// half of CloseOutAfter.
		{name: "metrics stopped later", metrics: 1000, closedBy: 1330, after: 1290},
		// The History Server read the log again once (a restart): the
		// wait starts again then.
		{name: "log read again once", logReadAt: 300, closedBy: 910, after: 900},
		// Must not fire: its event log moved after the live UI went (the
		// UI unreachable, the driver alive), its live UI answers again, or
		// its metrics still arrive.
		{name: "event log moves", logMovesAt: 150},
		{name: "metrics arrive", metrics: 2000},
		{name: "live UI back", uiBackAt: 300},
		{name: "live UI back, the History Server first", hsFirst: true, uiBackAt: 300},
		// Must not fire: the watch list is full, so the metrics could
		// not say it lives; it stays running, as without the rule.
		{name: "watch list full", full: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScript(sparkui.LiveUI)
			shs := sparkui.NewServer(sparkui.HistoryServer, &sparkui.Model{})
			shs.SetNow(s.clk.Now)
			sink := newMemSink()
			live, hs := serve(t, s.srv), serve(t, shs)
			p := newPoller(t, Config{Sources: []string{live, hs}, Sink: sink, Now: s.clk.Now})
			if tc.hsFirst {
				// The History Server lists it while the live UI is still
				// starting up; then the live UI lists it too.
				shs.Update(func(m *sparkui.Model) {
					s.srv.Update(func(live *sparkui.Model) { m.Apps = live.Apps })
					m.Apps[0].Attempts[0].Updated = at(30)
				})
				s.srv.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
					w.Write([]byte("Spark is starting up. Please wait a while until it's ready.")) // 200, as Spark serves it
					return true
				})
				s.clk.Set(at(20))
				p.PollOnce(context.Background())
				s.srv.Intercept(nil)
				s.clk.Set(at(30))
			}
			p.PollOnce(context.Background())
			if owner := p.owners[attempt.Key{App: scriptApp, Start: ms(t0)}]; owner == nil || tc.hsFirst != (owner.name == hs) || tc.hsFirst != (len(p.liveSeconds) == 1) {
				t.Fatalf("owner %v, want the History Server: %v; %d live UIs second it", owner, tc.hsFirst, len(p.liveSeconds))
			}
			if tc.full {
				for i := range maxWatched {
					p.drops[attempt.Key{App: fmt.Sprintf("app-%d", i), Start: 0}] = &drop{}
				}
			}
			// The driver dies at 35 s: its UI refuses, and its event log
			// stays as it was written at 30 s.
			s.srv.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
				http.Error(w, "gone", http.StatusBadGateway)
				return true
			})
			shs.Update(func(m *sparkui.Model) {
				s.srv.Update(func(live *sparkui.Model) { m.Apps = live.Apps })
				m.Apps[0].Attempts[0].Updated = at(30)
			})
			closedAt := 0.0
			for sec := 40.0; sec <= 2000; sec += 10 {
				s.clk.Set(at(sec))
				if tc.logMovesAt > 0 && sec >= tc.logMovesAt || sec == tc.logReadAt {
					shs.Update(func(m *sparkui.Model) { m.Apps[0].Attempts[0].Updated = at(sec) })
				}
				if sec == tc.uiBackAt {
					s.srv.Intercept(nil)
				}
				if sec <= tc.metrics {
					p.SeeApp(scriptApp)
				}
				p.PollOnce(context.Background())
				if closedAt == 0 && p.Stats().ClosedOut > 0 {
					closedAt = sec
				}
			}
			switch {
			case tc.closedBy == 0 && closedAt > 0:
				t.Fatalf("closed out at %v s", closedAt)
			case tc.closedBy > 0 && (closedAt == 0 || closedAt > tc.closedBy || closedAt < tc.after):
				t.Fatalf("closed out at %v s, want between %v and %v s", closedAt, tc.after, tc.closedBy)
			case tc.closedBy == 0:
				return
			}
			// Ended when the live UI last showed it (30 s), and not
			// written again while the History Server lists it.
			equalLines(t, "app", sink.stored(schema.MeasurementApp, appRow), []string{
				fmt.Sprintf("%d app %s Nightly ETL RUNNING end=<nil> dur=<nil>", factNs(0, 0, phaseStart), scriptApp),
				fmt.Sprintf("%d app %s Nightly ETL UNKNOWN end=%d dur=30000", factNs(0, 0, phaseLost), scriptApp, ms(at(30))),
			})
			if st := p.Stats(); st.Tracked != 0 || st.ClosedOut != 1 || len(p.watched)+len(p.drops)+len(p.liveSeconds) != 0 {
				t.Errorf("stats %+v, %d watched, %d drops, %d live seconds", st, len(p.watched), len(p.drops), len(p.liveSeconds))
			}
		})
	}
}
