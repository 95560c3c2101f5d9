package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
	"github.com/sparkpulse/sparkpulse/simulate"
	"github.com/sparkpulse/sparkpulse/sparkui"
)

// The REST rows of the forged-numbers table, against the real binary and
// a real influxd, while a genuine simulated application reports and is
// polled through the same {app_id} template:
//
//   - an impostor: the UI reached as application …0666 answers about the
//     genuine application (wrong_app, nothing written, retired);
//   - absurd numbers: …0777's UI lists an executor with 10^9 cores,
//     maxMemory −5 and an addTime in the year 3000, another with −8 cores
//     (read as absent, counted);
//   - invented executors: …0888's UI lists 1 500 new executor ids at
//     every read (4 096 followed, counted; memory bounded).
//
// The genuine application's points and facts arrive as ever.
func TestForgedAnswers(t *testing.T) {
	bin := sparkpulseBinary(t, "runs a real sparkpulse")
	srv := influxtest.Start(t)
	start := time.Now().Add(-time.Hour).Truncate(time.Second)
	var cluster atomic.Pointer[simulate.Cluster] // made once sparkpulse's address is known
	genuine := simulate.AppID(start, 1)
	const impostor, absurd, inventor = "application_1700000000000_0666", "application_1700000000000_0777", "application_1700000000000_0888"

	absurdUI := sparkui.NewServer(sparkui.LiveUI, &sparkui.Model{Apps: []*sparkui.App{{ID: absurd, Name: "absurd", Attempts: []*sparkui.Attempt{{
		Start: start, User: "mallory", SparkVersion: "3.5.3",
		Executors: []*sparkui.Executor{
			{ID: "1", HostPort: "x:1", Cores: 1_000_000_000, MaxMemory: -5, Added: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)},
			{ID: "2", HostPort: "x:2", Cores: -8, Added: start},
		}}}}}})
	inventorUI := sparkui.NewServer(sparkui.LiveUI, &sparkui.Model{Apps: []*sparkui.App{{ID: inventor, Name: "inventor", Attempts: []*sparkui.Attempt{{
		Start: start, User: "mallory", SparkVersion: "3.5.3"}}}}})
	var invented, impostorAsked atomic.Int64
	ui := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/proxy/"), "/")
		r.URL.Path = "/" + rest
		switch c := cluster.Load(); {
		case c != nil && id == genuine:
			c.UI.ServeHTTP(w, r)
		case c != nil && id == impostor:
			impostorAsked.Add(1)
			r.URL.Path = strings.ReplaceAll(r.URL.Path, impostor, genuine)
			c.UI.ServeHTTP(w, r)
		case id == absurd:
			absurdUI.ServeHTTP(w, r)
		case id == inventor:
			if strings.HasSuffix(r.URL.Path, "/allexecutors") {
				inventorUI.Update(func(m *sparkui.Model) {
					a := m.Apps[0].Attempts[0]
					for range 1500 {
						n := invented.Add(1)
						a.Executors = append(a.Executors, &sparkui.Executor{ID: fmt.Sprint(n), HostPort: "x:1", Cores: 1, Added: start})
					}
				})
			}
			inventorUI.ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	}))
	defer ui.Close()

	p := startBinary(t, bin, config.Config{
		StateDir: t.TempDir(),
		InfluxDB: config.InfluxDBConfig{URL: srv.URL},
		Annotate: config.AnnotateConfig{URLs: []string{ui.URL + "/proxy/{app_id}"}, Interval: seconds(1), Database: "answers"},
		Graphite: []config.GraphiteConfig{{Database: "answers"}},
	})
	tcpAddr := p.bound.graphiteAddr(t, 0)
	c := simulate.NewCluster(simulate.Config{Addr: tcpAddr, Apps: 1, Executors: 2, Period: 10 * time.Second, Seed: 13, Confirm: true}, start)
	cluster.Store(c)
	baseRSS := p.status("VmRSS")

	// Each application reports: the genuine one as Spark does, the three
	// others one line each, which puts their ids forward for {app_id}.
	lines, err := c.Replay(t.Context(), start, 3)
	if err != nil {
		t.Fatal(err)
	}
	var others strings.Builder
	for _, id := range []string{impostor, absurd, inventor} {
		fmt.Fprintf(&others, "%s.driver.jvm.heap.used 1 %d\n", id, start.Unix())
	}
	sendTCP(t, tcpAddr, others.String())

	invalid := func(m map[string]float64) (wrong float64) {
		for k, v := range m {
			if strings.HasPrefix(k, "sparkpulse_annotate_errors_total{") && strings.Contains(k, `kind="wrong_app"`) {
				wrong += v
			}
		}
		return wrong
	}
	waitFor(t, p, "the impostor refused, the absurd numbers read as absent, the invented executors capped", func(m map[string]float64) bool {
		return invalid(m) >= 1 && m["sparkpulse_annotate_invalid_total"] >= 3 && m[`sparkpulse_annotate_capped_total{what="executors"}`] > 0
	})
	m := p.metrics()
	peak := p.status("VmHWM")
	t.Logf("wrong_app %v, invalid %v, executors capped %v (%d invented), impostor asked %d times; peak RSS %d MiB (%d at start)",
		invalid(m), m["sparkpulse_annotate_invalid_total"], m[`sparkpulse_annotate_capped_total{what="executors"}`], invented.Load(),
		impostorAsked.Load(), peak>>20, baseRSS>>20)
	if impostorAsked.Load() != 1 {
		t.Errorf("the impostor was asked %d times, want once: an answer about another application retires it", impostorAsked.Load())
	}
	if peak > baseRSS+256<<20 {
		t.Errorf("peak RSS %d MiB, %d MiB at start", peak>>20, baseRSS>>20)
	}
	p.stop()

	// Nothing written under the impostor's id; the absurd executors have
	// no impossible cores or times; the inventor's executors stop at 4 096.
	if res := srv.Query(t, "answers", fmt.Sprintf(`SELECT count("status") FROM /^spark_/ WHERE "applicationid" = '%s'`, impostor)); len(res) != 0 {
		t.Errorf("points under the impostor's id: %v", res)
	}
	for _, s := range srv.Query(t, "answers", fmt.Sprintf(`SELECT "cores", "added_ms" FROM "spark_executor" WHERE "applicationid" = '%s'`, absurd)) {
		for _, v := range s.Values {
			if cores, added := toFloat(t, v[1]), toFloat(t, v[2]); cores < 0 || cores > 65536 || added > float64(time.Now().Add(24*time.Hour).UnixMilli()) {
				t.Errorf("absurd executor written as given: cores %v, added %v", cores, added)
			}
		}
	}
	if res := srv.Query(t, "answers", fmt.Sprintf(`SHOW TAG VALUES FROM "spark_executor" WITH KEY = "process" WHERE "applicationid" = '%s'`, inventor)); len(res) == 1 && len(res[0].Values) > 4096 {
		t.Errorf("%d executors of the inventor written, want at most 4096", len(res[0].Values))
	}
	// The genuine application as ever: every line, and its facts.
	if stored := storedValues(t, srv, "answers", fmt.Sprintf(`"applicationid" = '%s'`, genuine)); stored == 0 || stored > uint64(lines) {
		t.Errorf("%d values of the genuine application stored, %d lines sent", stored, lines)
	}
	if res := srv.Query(t, "answers", fmt.Sprintf(`SELECT count("status") FROM "spark_app" WHERE "applicationid" = '%s'`, genuine)); len(res) == 0 {
		t.Error("no annotation of the genuine application")
	}
}

// lateHistoryServer is a simulated History Server for a cluster made once
// sparkpulse's address is known: until it is stored, one with no
// applications (the annotator's first poll may come first).
func lateHistoryServer(t *testing.T) (*httptest.Server, *atomic.Pointer[simulate.Cluster]) {
	t.Helper()
	var cluster atomic.Pointer[simulate.Cluster]
	empty := sparkui.NewServer(sparkui.HistoryServer, &sparkui.Model{})
	ui := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c := cluster.Load(); c != nil {
			c.UI.ServeHTTP(w, r)
			return
		}
		empty.ServeHTTP(w, r)
	}))
	t.Cleanup(ui.Close)
	return ui, &cluster
}
