package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/influx"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
	"github.com/sparkpulse/sparkpulse/relay"
	"github.com/sparkpulse/sparkpulse/simulate"
)

// restRecorder is the Spark REST side of TestUntrustedInput: a
// ResourceManager-style proxy that serves the genuine application from the
// simulator and answers every other id slowly or with 404, a source that
// redirects to a secret, and sources whose answers are 60 MB.
type restRecorder struct {
	cluster *simulate.Cluster
	genuine string
	slow    atomic.Bool // other ids: answer after 6 s instead of at once

	mu         sync.Mutex
	paths      []string       // every request's escaped path, as received
	fakeAsked  map[string]int // requests for ids other than the genuine one, by the id's cluster part (application_<this>_n)
	secretHits int
}

const secretBody = `{"aws_secret_access_key":"not-for-sparkpulse-eyes"}`

func (r *restRecorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.paths = append(r.paths, req.URL.EscapedPath())
	r.mu.Unlock()
	path := req.URL.Path
	switch {
	case path == "/secret":
		r.mu.Lock()
		r.secretHits++
		r.mu.Unlock()
		io.WriteString(w, secretBody)
	case strings.HasPrefix(path, "/redirect/"):
		http.Redirect(w, req, "/secret", http.StatusFound)
	case strings.HasPrefix(path, "/huge"):
		// A list of applications with very long names, 60 MB in all.
		w.Write([]byte("["))
		item := []byte(`{"id":"app-20261122101500-0001","name":"` + strings.Repeat("n", 1<<20) + `","attempts":[]},`)
		for n := 0; n < 60<<20; n += len(item) {
			if _, err := w.Write(item); err != nil {
				return
			}
		}
		w.Write([]byte(`{"id":"x","attempts":[]}]`))
	case strings.HasPrefix(path, "/proxy/"):
		id, rest, _ := strings.Cut(strings.TrimPrefix(path, "/proxy/"), "/")
		if id == r.genuine {
			req.URL.Path = "/" + rest
			r.cluster.UI.ServeHTTP(w, req)
			return
		}
		r.mu.Lock()
		cluster, _, _ := strings.Cut(strings.TrimPrefix(id, "application_"), "_")
		r.fakeAsked[cluster]++
		r.mu.Unlock()
		if r.slow.Load() {
			select {
			case <-time.After(6 * time.Second):
			case <-req.Context().Done():
				return
			}
		}
		http.NotFound(w, req)
	default:
		http.NotFound(w, req)
	}
}

// Every row of the untrusted-input table, replayed against the real binary
// and a real influxd while a genuine Spark application reports through the
// same listeners and is polled through the same {app_id} template: each
// hostile input is a counted refusal, goroutines and resident memory stay
// bounded, no request is steered, and the genuine application's points,
// deltas and annotations arrive exactly.
func TestUntrustedInput(t *testing.T) {
	bin := sparkpulseBinary(t, "floods a real sparkpulse")
	srv := influxtest.Start(t)
	const tcpListener = "tcp://127.0.0.1:0#1" // the name of the first block, bound to a free port
	start := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	cluster := simulate.NewCluster(simulate.Config{Apps: 1, Executors: 3, Period: 10 * time.Second, Seed: 11}, start)
	rest := &restRecorder{cluster: cluster, genuine: simulate.AppID(start, 1), fakeAsked: map[string]int{}}
	ui := httptest.NewServer(rest)
	defer ui.Close()

	stateDir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("precious"), 0o600)
	// Row 10: links planted in the TCP block's disk queue directory.
	qdir := queueDir(stateDir, tcpListener, influx.Target{Bucket: "untrusted"})
	os.MkdirAll(qdir, 0o700)
	for _, n := range []string{"head", "head.tmp", "0000001099511627776.seg"} {
		os.Symlink(victim, filepath.Join(qdir, n))
	}

	p := startBinary(t, bin, config.Config{
		StateDir: stateDir,
		InfluxDB: config.InfluxDBConfig{URL: srv.URL},
		Deltas:   config.DeltaSettings{MaxSeries: 200000, MaxSeriesPerApp: 50000},
		Annotate: config.AnnotateConfig{
			URLs: []string{ui.URL + "/proxy/{app_id}", "http://{app_id}-driver-svc.invalid:4040", ui.URL + "/redirect",
				ui.URL + "/huge1", ui.URL + "/huge2", ui.URL + "/huge3", ui.URL + "/huge4"},
			Username: "spark", Interval: seconds(1), Timeout: seconds(2), MaxApps: 32, Database: "untrusted"},
		Graphite: []config.GraphiteConfig{{Database: "untrusted"}, {Protocol: "udp", Database: "untrusted"}},
	}, "SPARKPULSE_ANNOTATE_PASSWORD=s3cret-pw")
	tcpAddr, udpAddr := p.bound.graphiteAddr(t, 0), p.bound.graphiteAddr(t, 1)
	baseG := p.metrics()["go_goroutines"]
	baseRSS := p.status("VmRSS")

	// The genuine application reports a round: each process on its own
	// connection, as Spark does. Its NaN ratios are dropped by design.
	genuineLines := 0
	round := 0
	report := func() {
		t.Helper()
		now := start.Add(time.Duration(round) * 10 * time.Second)
		cluster.Step(now)
		for p := range cluster.Processes() {
			var b bytes.Buffer
			cluster.Report(p, &b, now)
			for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
				if f := strings.Fields(l); len(f) == 3 && f[1] != "NaN" {
					genuineLines++
				}
			}
			sendTCP(t, tcpAddr, b.String())
		}
		round++
	}
	report()

	// Row 1: one TCP send of 200 000 lines with distinct application ids,
	// the proxy answering unknown ids after 6 s.
	rest.slow.Store(true)
	var flood strings.Builder
	for i := range 200_000 {
		fmt.Fprintf(&flood, "application_1700000000000_%d.driver.jvm.heap.used 1 %d\n", i, start.Unix())
	}
	sendTCP(t, tcpAddr, flood.String())
	report()
	// Row 3: 100 UDP datagrams with new ids.
	var dgrams []string
	for i := range 100 {
		dgrams = append(dgrams, fmt.Sprintf("application_1700000000001_%d.driver.jvm.heap.used 1 %d", i, start.Unix()))
	}
	sendUDP(t, udpAddr, dgrams...)
	// Rows 4 and 5: ids that would change a URL's meaning.
	sendTCP(t, tcpAddr, strings.Join([]string{
		fmt.Sprintf("...driver.jvm.heap.used 1 %d", start.Unix()),
		fmt.Sprintf("app-20261122101500-0001..driver.jvm.heap.used 1 %d", start.Unix()),
		fmt.Sprintf("evil.example:1@.driver.jvm.heap.used 1 %d", start.Unix()),
	}, "\n")+"\n")
	waitFor(t, p, "the genuine application polled", func(m map[string]float64) bool {
		rest.mu.Lock()
		defer rest.mu.Unlock()
		for _, path := range rest.paths {
			if strings.Contains(path, "/proxy/"+rest.genuine+"/api/v1/applications/"+rest.genuine) {
				return true
			}
		}
		return false
	})
	report()
	m := p.metrics()
	t.Logf("during the id flood: %v goroutines (%v before), %v sources", m["go_goroutines"], baseG, m["sparkpulse_annotate_sources"])
	// At most 32 poll workers while polls are slow (annotate's
	// maxWorkers), each with its request's connection: a few goroutines.
	if m["go_goroutines"] > baseG+32*4+20 || m["sparkpulse_annotate_sources"] > 7+2*32 {
		t.Errorf("goroutines %v (base %v), sources %v", m["go_goroutines"], baseG, m["sparkpulse_annotate_sources"])
	}

	// Row 2: unknown ids answered 404 at once: requests stay within
	// new-apps-per-poll (8) per poll, each carrying the credentials.
	rest.slow.Store(false)
	began := time.Now()
	var ids strings.Builder
	for i := range 20_000 {
		fmt.Fprintf(&ids, "application_1700000000002_%d.driver.jvm.heap.used 1 %d\n", i, start.Unix())
	}
	sendTCP(t, tcpAddr, ids.String())
	report()
	waitFor(t, p, "polls after the 404 flood", func(m map[string]float64) bool {
		return m["sparkpulse_annotate_polls_total"] > 0 && time.Since(began) > 3*time.Second
	})
	// The flood's ids alone: those of row 1, answered slowly, may still
	// be asked a second time meanwhile (a failure is asked again once).
	rest.mu.Lock()
	fakes := rest.fakeAsked["1700000000002"]
	rest.mu.Unlock()
	if polls := time.Since(began).Seconds() + 2; float64(fakes) > 8*polls {
		t.Errorf("%d requests for unknown ids in %.0f s, want at most 8 per poll", fakes, polls)
	}

	// Row 9: 300 000 distinct cumulative paths under one application:
	// its quota fills, not the table.
	var series strings.Builder
	for i := range 300_000 {
		fmt.Fprintf(&series, "application_1700000000003_0001.%d.executor.cpuTime.count 1 %d\n", i, start.Unix())
	}
	sendTCP(t, tcpAddr, series.String())
	report()

	// Row 8: 8 000 connections each holding 65 000 bytes without a newline.
	partial := []byte(strings.Repeat("p", 65_000))
	var held []net.Conn
	for range 8000 {
		c, err := net.Dial("tcp", tcpAddr)
		if err != nil {
			break // the backlog is full once max-connections are open
		}
		c.Write(partial)
		held = append(held, c)
	}
	report()
	m = p.metrics()
	rss := p.status("VmRSS")
	t.Logf("8 000 connections holding partial lines: %v open, accept paused %v times, %v dropped, RSS %d MiB (%d before), %v goroutines",
		m[`sparkpulse_graphite_connections_active{listener="`+tcpListener+`"}`],
		m[`sparkpulse_graphite_accept_paused_total{listener="`+tcpListener+`"}`],
		m[`sparkpulse_graphite_connections_dropped_total{listener="`+tcpListener+`"}`], rss>>20, baseRSS>>20, m["go_goroutines"])
	if m["go_goroutines"] > baseG+4096+60 {
		t.Errorf("%v goroutines with max-connections 4096", m["go_goroutines"])
	}
	for _, c := range held {
		c.Close()
	}
	report()

	// Rows 6 and 7 run all along: the redirecting source and the four 60 MB
	// sources are polled every second.
	report()
	peak := p.status("VmHWM")
	t.Logf("peak RSS %d MiB (%d MiB at start)", peak>>20, baseRSS>>20)
	// The peak holds garbage the collector has not reclaimed yet, more of
	// it when the machine is busy: 290–316 MiB with this test alone, 443
	// MiB beside the real-Spark suite's JVMs. A leak grows past any bound.
	if peak > baseRSS+512<<20 {
		t.Errorf("peak RSS %d MiB, %d MiB at start", peak>>20, baseRSS>>20)
	}

	m = p.metrics()
	for _, want := range []string{
		`sparkpulse_annotate_apps_refused_total{reason="rate"}`,
		`sparkpulse_annotate_apps_refused_total{reason="shape"}`,
		`sparkpulse_annotate_apps_refused_total{reason="host_label"}`,
		`sparkpulse_annotate_apps_refused_total{reason="retired"}`,
		`sparkpulse_delta_samples_total{outcome="refused_app_quota"}`,
		`sparkpulse_graphite_connections_dropped_total{listener="` + tcpListener + `"}`,
		`sparkpulse_annotate_errors_total{kind="http_status",source="` + ui.URL + `/redirect"}`,
		`sparkpulse_annotate_errors_total{kind="decode",source="` + ui.URL + `/huge1"}`,
	} {
		if m[want] == 0 {
			t.Errorf("%s is 0 or absent", want)
		}
	}
	p.stop()

	// Nothing was steered: no request left the proxy's path or went to
	// the secret, no '..' reached a URL, and no secret reached the log.
	rest.mu.Lock()
	for _, path := range rest.paths {
		if strings.Contains(path, "..") || strings.Contains(strings.ToLower(path), "%2e") || strings.Contains(path, "@") {
			t.Errorf("request %q", path)
		}
	}
	if rest.secretHits != 0 {
		t.Errorf("the redirect to /secret was followed %d times", rest.secretHits)
	}
	rest.mu.Unlock()
	logs := p.logs.String()
	for _, secret := range []string{"s3cret-pw", "not-for-sparkpulse-eyes"} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log holds %q", secret)
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious" {
		t.Errorf("a planted link was written through: %q", b)
	}

	// The genuine application's data is all there, its deltas exact.
	app := rest.genuine
	if stored := storedValues(t, srv, "untrusted", fmt.Sprintf(`"applicationid" = '%s'`, app)); stored != uint64(genuineLines) {
		t.Errorf("%d values of the genuine application stored, %d lines sent", stored, genuineLines)
	}
	for _, s := range srv.Query(t, "untrusted", fmt.Sprintf(
		`SELECT sum("cpuTime.count_delta"), max("cpuTime.count") - min("cpuTime.count") FROM "executor" WHERE "applicationid" = '%s' GROUP BY "process"`, app)) {
		if got, want := toFloat(t, s.Values[0][1]), toFloat(t, s.Values[0][2]); got != want {
			t.Errorf("process %s: deltas sum to %v, the counter grew by %v", s.Tags["process"], got, want)
		}
	}
	if res := srv.Query(t, "untrusted", fmt.Sprintf(`SELECT count("status") FROM "spark_app" WHERE "applicationid" = '%s'`, app)); len(res) == 0 {
		t.Error("no annotation of the genuine application")
	}
}

// A flood of a million metric names no Spark sends, from one application,
// through the real binary: the flood stops at its application's quota,
// and a genuine application's line sent right after it is stored within
// seconds; the rest are counted.
func TestNameFlood(t *testing.T) {
	bin := sparkpulseBinary(t, "floods a real sparkpulse with metric names")
	srv := influxtest.Start(t)
	const tcpListener = "tcp://127.0.0.1:0#1"
	p := startBinary(t, bin, config.Config{InfluxDB: config.InfluxDBConfig{URL: srv.URL}, Graphite: []config.GraphiteConfig{{Database: "spark"}}})
	addr := p.bound.graphiteAddr(t, 0)
	const flood, genuine, names = "app-20261122101500-0001", "app-20261122101500-0002", 1_000_000
	now := time.Now().Unix()
	var b strings.Builder
	for i := range names {
		fmt.Fprintf(&b, "%s.1.executor.f%d.count %d %d\n", flood, i, i, now)
	}
	began := time.Now()
	sendTCP(t, addr, b.String())
	sent := time.Since(began)
	sendTCP(t, addr, fmt.Sprintf("%s.1.executor.cpuTime.count 81234 %d\n", genuine, now))
	genuineAt := time.Now()
	waitUntil(t, 60*time.Second, "the genuine line stored", func() bool {
		got := srv.Query(t, "spark", `SELECT "cpuTime.count" FROM "executor" WHERE "applicationid" = '`+genuine+`'`)
		return len(got) == 1 && len(got[0].Values) == 1
	})
	stored := time.Since(genuineAt)
	key := `sparkpulse_lines_dropped_total{listener="` + tcpListener + `",reason="names"}`
	waitFor(t, p, "the flood's drops counted", func(m map[string]float64) bool { return m[key] == names-relay.MaxNamesPerApp })
	var fields int
	for _, s := range srv.Query(t, "spark", `SHOW FIELD KEYS FROM "executor"`) {
		fields += len(s.Values)
	}
	// Each name a counter: the field, its delta and its rate.
	if fields > 3*(relay.MaxNamesPerApp+1) {
		t.Errorf("%d fields in executor, want at most the quota's and cpuTime.count's", fields)
	}
	t.Logf("%d names sent in %s; the genuine line stored %s after it was sent; %d fields in executor",
		names, sent.Round(time.Millisecond), stored.Round(time.Millisecond), fields)
}
