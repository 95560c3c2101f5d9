package annotate

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/attempt"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/sparkui"
)

// Only ids of Spark's shapes fill a template, and in a host only those
// that make a valid DNS label; what reaches a URL is escaped for its part.
func TestAppIDsRefused(t *testing.T) {
	s := newScript(sparkui.LiveUI)
	var paths []string
	var mu sync.Mutex
	base := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.EscapedPath())
		mu.Unlock()
		http.NotFound(w, r)
	}))
	p := newPoller(t, Config{Sources: []string{base + "/proxy/{app_id}"}, Sink: newMemSink(), Now: s.clk.Now})
	for _, id := range []string{"..", ".", "", "app-evil.example:1@", "application_1_1/../../x", strings.Repeat("9", 70_000),
		"application_" + strings.Repeat("1", 60) + "_1"} {
		p.SeeApp(id)
	}
	p.SeeApp("application_1628109047826_1317105")
	p.PollOnce(context.Background())
	if got := p.Stats().Refused; got[refusedShape] != 6 {
		t.Errorf("refused %v, want 6 for their shape", got)
	}
	// The proxy's 404, then its ResourceManager, which would vouch for
	// an application it runs (TestYARNStartingApplication).
	if want := []string{"/proxy/application_1628109047826_1317105/api/v1/applications/application_1628109047826_1317105",
		"/ws/v1/cluster/apps/application_1628109047826_1317105"}; !slices.Equal(paths, want) {
		t.Errorf("requests %q, want only %q", paths, want)
	}

	host := newPoller(t, Config{Sources: []string{"http://{app_id}-driver-svc.spark:4040"}, Sink: newMemSink(), Now: s.clk.Now})
	host.SeeApp("application_1628109047826_1317105") // '_' is no DNS label character
	host.SeeApp("app-20261122100000-0001")
	host.mu.Lock()
	defer host.mu.Unlock()
	if _, ok := host.nominees["app-20261122100000-0001"]; !ok || host.refused[refusedHostLabel] != 1 {
		t.Errorf("nominees %v, refused %v", host.nominees, host.refused)
	}
	if err := CheckSource("http://{app_id}" + strings.Repeat("x", 40) + ".spark:4040"); err == nil {
		t.Error("a host template whose label no application id fits is accepted")
	}
}

// A flood of Spark-shaped ids that no source knows, sent once each, costs
// at most new-apps-per-poll requests per poll, no goroutine per id, and no
// second request for a retired id; an application seen from its processes
// during the flood is admitted at the next poll. The flood is what one TCP
// send of 200 000 lines with distinct ids nominates (relay nominates at
// most 4 ids per 64 KiB block: about 800) and 100 UDP datagrams.
func TestDiscoveryFlood(t *testing.T) {
	s := newScript(sparkui.LiveUI)
	var requests atomic.Int64
	mux := http.NewServeMux()
	mux.Handle("/proxy/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if id, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/proxy/"), "/"); id == scriptApp {
			r.URL.Path = "/" + rest
			s.srv.ServeHTTP(w, r)
			return
		}
		http.NotFound(w, r)
	}))
	base := serve(t, mux)
	sink := newMemSink()
	p := newPoller(t, Config{Sources: []string{base + "/proxy/{app_id}"}, Sink: sink, Now: s.clk.Now, NewAppsPerPoll: 4})
	goroutines := runtime.NumGoroutine()
	const flood = 900
	for i := range flood {
		p.SeeApp(fmt.Sprintf("application_1700000000000_%d", i))
		if i%(flood/4) == flood/8 { // the driver and three executors report
			p.SeeApp(scriptApp)
		}
	}
	p.PollOnce(context.Background())
	if got := sink.stored(schema.MeasurementApp, appRow); len(got) != 1 {
		t.Fatalf("the genuine application was not polled during the flood: %q", got)
	}
	first := requests.Load()
	st := p.Stats()
	if st.Sources > 4 || st.Refused[refusedRate] == 0 {
		t.Errorf("after the first poll: %d sources, refused %v", st.Sources, st.Refused)
	}
	if n := runtime.NumGoroutine(); n > goroutines+parallel+5 {
		t.Errorf("%d goroutines, %d before", n, goroutines)
	}
	// The same flood again: the 3 fakes admitted with the genuine one are
	// retired and not asked again; 4 new ones are.
	before := requests.Load()
	for i := range flood {
		p.SeeApp(fmt.Sprintf("application_1700000000000_%d", i))
	}
	p.PollOnce(context.Background())
	t.Logf("%d requests at the first poll, %d at the second", first, requests.Load()-before)
	if got := requests.Load() - before; got > 4+10 { // 4 new ids, and the genuine app's incremental sync
		t.Errorf("%d requests at the second poll", got)
	}
	if st := p.Stats(); st.Refused[refusedRetired] < 3 || st.Sources > 5 {
		t.Errorf("after the second poll: %d sources, refused %v", st.Sources, st.Refused)
	}
}

// A source's redirect is not followed: the credentials and the request
// stay with the source as configured.
func TestNoRedirects(t *testing.T) {
	s := newScript(sparkui.LiveUI)
	var elsewhere atomic.Int64
	other := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		w.Write([]byte(`{"secret":"credentials of another service"}`))
	}))
	src := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other+"/credentials", http.StatusFound)
	}))
	p := newPoller(t, Config{Sources: []string{src}, Sink: newMemSink(), Now: s.clk.Now, Auth: Auth{Token: "t0ken"}})
	p.PollOnce(context.Background())
	if elsewhere.Load() != 0 {
		t.Error("the redirect was followed")
	}
	if st := p.Stats(); st.Errors[src]["http_status"] != 1 {
		t.Errorf("errors %v, want the 302 counted", st.Errors)
	}
}

// The poller's max-response-bytes reaches its REST client: a larger
// answer is a failed request, read no further than the limit (the
// client's own bound is tested in sparkapi).
func TestResponseLimit(t *testing.T) {
	s := newScript(sparkui.LiveUI)
	const limit = 4 << 10
	body := "[" + strings.Repeat(`{"id":"x","attempts":[]},`, 4*limit/25) + `{"id":"x","attempts":[]}]`
	src := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) }))
	p := newPoller(t, Config{Sources: []string{src}, Sink: newMemSink(), Now: s.clk.Now, MaxResponseBytes: limit})
	p.PollOnce(context.Background())
	if st := p.Stats(); st.Errors[src]["decode"] != 1 || st.Bytes > limit+1 {
		t.Errorf("errors %v, %d bytes read; want one decode error after at most %d bytes", st.Errors, st.Bytes, limit+1)
	}
}

// A template instance speaks for its application only: a UI reached as
// another application's that answers about the application of the
// script, as an impersonating driver would, writes nothing, is counted
// as wrong_app and is not asked again; the application's genuine source
// then writes its facts.
func TestWrongApplicationAnswer(t *testing.T) {
	s := newScript(sparkui.LiveUI)
	var requests atomic.Int64
	impostor := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		_, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/proxy/"), "/")
		r.URL.Path = "/" + strings.ReplaceAll(rest, "application_1700000000000_0666", scriptApp)
		s.srv.ServeHTTP(w, r)
	}))
	sink := newMemSink()
	p := newPoller(t, Config{Sources: []string{impostor + "/proxy/{app_id}"}, Sink: sink, Now: s.clk.Now})
	p.SeeApp("application_1700000000000_0666")
	p.PollOnce(context.Background())
	p.SeeApp("application_1700000000000_0666")
	p.PollOnce(context.Background())
	if sink.count() != 0 {
		t.Errorf("%d points written from an answer about another application", sink.count())
	}
	var wrong uint64
	for _, kinds := range p.Stats().Errors {
		wrong += kinds[kindWrongApp]
	}
	if wrong != 1 || requests.Load() != 1 {
		t.Errorf("wrong_app %d, requests %d; want 1 and 1 (retired)", wrong, requests.Load())
	}

	genuine := newPoller(t, Config{Sources: []string{serve(t, s.srv)}, Sink: sink, Now: s.clk.Now})
	genuine.PollOnce(context.Background())
	if sink.latestOf(schema.MeasurementApp) == nil {
		t.Error("the genuine source wrote no application fact")
	}
}

// A UI that answers new executor ids at every read: the application's
// executors stop at attempt.MaxExecutors, counted; each poll writes at most
// its share of points for it; and another application's facts are written
// at the first poll all the same.
func TestInventedExecutors(t *testing.T) {
	m := liveApp(scriptApp, "Nightly ETL", t0)
	m.Apps = append(m.Apps, liveApp("app-20261122100000-0002", "genuine", t0).Apps...)
	m.Apps[1].Attempts[0].AddJob(&sparkui.Job{ID: 0, Name: "count", Submitted: at(1), Completed: at(5), Status: sparkui.JobSucceeded, Tasks: 1, CompletedTasks: 1})
	clk := &clock{now: at(60)}
	srv := sparkui.NewServer(sparkui.HistoryServer, m)
	srv.SetNow(clk.Now)
	next := 0
	invent := func() {
		srv.Update(func(m *sparkui.Model) {
			a := m.Apps[0].Attempts[0]
			for range 1500 {
				next++
				a.Executors = append(a.Executors, &sparkui.Executor{ID: fmt.Sprint(next), HostPort: "evil:1", Cores: 1, Added: at(1)})
			}
		})
	}
	sink := newMemSink()
	p := newPoller(t, Config{Sources: []string{serve(t, srv)}, Sink: sink, Now: clk.Now})
	perPoll := []int{}
	for i := range 4 {
		invent()
		clk.Set(at(60 + 30*float64(i)))
		before := len(sink.stored(schema.MeasurementExecutor, func(p point) string { return p.tags["process"] + fmt.Sprint(p.ns) }))
		p.PollOnce(context.Background())
		after := len(sink.stored(schema.MeasurementExecutor, func(p point) string { return p.tags["process"] + fmt.Sprint(p.ns) }))
		perPoll = append(perPoll, after-before)
		if i == 0 && len(sink.stored(schema.MeasurementJob, func(p point) string { return p.tags["applicationid"] })) == 0 {
			t.Error("the genuine application's job was not written at the first poll")
		}
	}
	for i, n := range perPoll {
		if n > maxPointsPerEmit {
			t.Errorf("poll %d wrote %d executor snapshots of one application, more than its share %d", i, n, maxPointsPerEmit)
		}
	}
	st := p.Stats()
	if st.Capped["executors"] == 0 || st.Capped["points"] == 0 {
		t.Errorf("capped %v, want executors and points", st.Capped)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.static {
		for _, a := range s.apps {
			if a.Key.App == scriptApp && len(a.Executors) != attempt.MaxExecutors {
				t.Errorf("%d executors followed, want %d", len(a.Executors), attempt.MaxExecutors)
			}
		}
	}
}

// Two sources showing one running application: the first one's answers
// are written, once; the second is counted once, however often it shows
// it.
func TestSecondSource(t *testing.T) {
	s := newScript(sparkui.LiveUI)
	sink := newMemSink()
	p := newPoller(t, Config{Sources: []string{serve(t, s.srv), serve(t, s.srv)}, Sink: sink, Now: s.clk.Now})
	for range 3 {
		p.PollOnce(context.Background())
	}
	if got := p.Stats().SecondSource; got != 1 {
		t.Errorf("second_source %d, want 1", got)
	}
	if sink.latestOf(schema.MeasurementApp) == nil {
		t.Error("no application fact")
	}
}

// A configured source takes an application over from the {app_id}
// template instance that showed it first: the instance lets it go at its
// next poll, the configured source goes on, and no fact is written twice.
func TestConfiguredSourceTakesOver(t *testing.T) {
	s := newScript(sparkui.LiveUI)
	var down atomic.Bool
	down.Store(true)
	mux := http.NewServeMux()
	mux.Handle("/proxy/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/proxy/"), "/")
		r.URL.Path = "/" + rest
		s.srv.ServeHTTP(w, r)
	}))
	mux.Handle("/hs/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		r.URL.Path = strings.TrimPrefix(r.URL.Path, "/hs")
		s.srv.ServeHTTP(w, r)
	}))
	base := serve(t, mux)
	sink := newMemSink()
	p := newPoller(t, Config{Sources: []string{base + "/proxy/{app_id}", base + "/hs"}, Sink: sink, Now: s.clk.Now})
	p.SeeApp(scriptApp)
	p.PollOnce(context.Background())
	owner := func() string {
		p.mu.Lock()
		defer p.mu.Unlock()
		for k, o := range p.owners {
			if k.App == scriptApp {
				return o.base
			}
		}
		return ""
	}
	if got := owner(); !strings.Contains(got, "/proxy/") {
		t.Fatalf("first owner %q, want the template instance", got)
	}
	down.Store(false)
	for i := range 3 {
		s.clk.Set(at(40 + 10*float64(i)))
		p.PollOnce(context.Background())
	}
	if got := owner(); got != base+"/hs" {
		t.Errorf("owner %q, want the configured source", got)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.perApp {
		for _, inst := range l {
			if len(inst.apps) != 0 {
				t.Errorf("the template instance still syncs %d attempts", len(inst.apps))
			}
		}
	}
	if p.stats.secondSource.Load() == 0 {
		t.Error("the take-over was not counted")
	}
}

// Through a YARN ResourceManager's proxy, an application that YARN says
// it runs is polled until its UI answers, however its proxy answers
// before (a redirect while ACCEPTED, the UI's 404 while it comes up); an
// id that YARN does not know is retired at its first failure.
func TestYARNStartingApplication(t *testing.T) {
	const fake = "application_1628109047826_9999999"
	s := newScript(sparkui.LiveUI)
	var up atomic.Bool
	mux := http.NewServeMux()
	mux.Handle("/proxy/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/proxy/"), "/")
		if id != scriptApp || !up.Load() {
			http.NotFound(w, r)
			return
		}
		r.URL.Path = "/" + rest
		s.srv.ServeHTTP(w, r)
	}))
	var rmAsked atomic.Int64
	mux.Handle("/ws/v1/cluster/apps/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rmAsked.Add(1)
		if id := strings.TrimPrefix(r.URL.Path, "/ws/v1/cluster/apps/"); id != scriptApp {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, `{"app":{"id":%q,"state":"RUNNING","queue":"root.default","user":"etl"}}`, scriptApp)
	}))
	base := serve(t, mux)
	sink := newMemSink()
	p := newPoller(t, Config{Sources: []string{base + "/proxy/{app_id}"}, Sink: sink, Now: s.clk.Now})
	for i := range 4 {
		p.SeeApp(scriptApp)
		p.SeeApp(fake)
		s.clk.Set(at(10 * float64(i+1)))
		p.PollOnce(context.Background())
	}
	if st := p.Stats(); st.Refused[refusedRetired] == 0 {
		t.Errorf("the id YARN does not know was not retired: refused %v", st.Refused)
	}
	p.mu.Lock()
	_, polled := p.perApp[scriptApp]
	p.mu.Unlock()
	if !polled {
		t.Fatal("the application YARN runs was retired before its UI answered")
	}
	up.Store(true)
	s.clk.Set(at(50))
	p.PollOnce(context.Background())
	if got := sink.stored(schema.MeasurementApp, appRow); len(got) != 1 {
		t.Errorf("once its UI answered, the application's facts: %q", got)
	}
	t.Logf("the ResourceManager was asked %d times", rmAsked.Load())
}

// Sixteen sources that never answer before the timeout take no turns from
// one that answers: it is polled every interval beside them, and the
// workers stay bounded.
func TestSlowSourcesDoNotStarve(t *testing.T) {
	release := make(chan struct{})
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		http.Error(w, "gone", http.StatusServiceUnavailable)
	})
	var sources []string
	for range 16 {
		sources = append(sources, serve(t, slow))
	}
	genuine, polled := listingUI(t, "app-20261122100000-0009", "genuine")
	sources = append(sources, genuine)
	p := newPoller(t, Config{Sources: sources, Sink: newMemSink(), Interval: time.Second, Timeout: time.Minute})
	stop := running(p)
	defer func() {
		close(release)
		stop()
	}()
	deadline := time.After(20 * time.Second)
	for n := 0; n < 3; n++ {
		select {
		case <-polled:
		case <-deadline:
			t.Fatalf("the answering source was listed %d times in 20 s beside 16 that do not answer", n)
		}
	}
	p.mu.Lock()
	running := p.running
	p.mu.Unlock()
	if running > maxWorkers {
		t.Errorf("%d workers, more than %d", running, maxWorkers)
	}
}
