package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
	"github.com/sparkpulse/sparkpulse/schema"
)

// Tests of the whole service against a real InfluxDB 2.x (influxd 2.7.12,
// built by scripts/influxd2.sh), mirroring the 1.8 ones.

// influxdb2 is how sparkpulse writes to srv: to url (srv.URL, or a proxy in
// front of it) with srv's organization, and srv's token in env, as a
// deployment sets it (SPARKPULSE_INFLUXDB_TOKEN).
func influxdb2(srv *influxtest.Server2, url string) (cfg config.InfluxDBConfig, env string) {
	return config.InfluxDBConfig{URL: url, Org: srv.Org}, config.EnvToken + "=" + srv.Token
}

// TestOutagesLoseNothing against 2.x: Spark-shaped traffic streams into
// sparkpulse while influxd 2.x is killed (SIGKILL) and restarted twice, and
// sparkpulse is stopped and started again during the second outage: every
// value sparkpulse accepted is in the bucket at the end, once.
func TestOutagesLoseNothingInfluxDB2(t *testing.T) {
	srv := influxtest.Start2(t)
	dest, env := influxdb2(srv, srv.URL)
	outagesLoseNothing(t, srv, config.Config{InfluxDB: dest, Graphite: []config.GraphiteConfig{{Bucket: "spark"}}}, env)
}

// TestDashboardsOnRealData against 2.x, compared with 1.8: the workload of
// TestDashboardsOnRealData goes through sparkpulse to InfluxDB 2.x, once per
// schema into a bucket of its own, and a proxy in front of it sends every
// write request to an InfluxDB 1.8 as well, so both hold the same points.
// Every panel, variable and annotation query of each schema's committed
// dashboards then runs as Grafana would (with the token, through the
// bucket's automatic DBRP mapping) against 2.x, and each answer must equal
// 1.8's to the same query.
func TestDashboardsOnRealDataInfluxDB2(t *testing.T) {
	srv1 := influxtest.Start(t)
	srv2 := influxtest.Start2(t)
	end := time.Now().Truncate(time.Second)
	const rounds = 90
	start := end.Add(-rounds * 10 * time.Second)

	tee := newWriteTee(t, srv1.URL, srv2.URL)
	defer tee.Close()

	for _, sc := range dashboardSchemas(t) {
		db := dashboardDB(sc)
		srv1.Exec(t, fmt.Sprintf(`CREATE DATABASE %q`, db))
		if db != srv2.Bucket {
			srv2.CreateBucket(t, db, 0)
		}
		conflict := typeConflict(sc, start)
		srv1.Write(t, "/write?db="+db, conflict)
		srv2.Write(t, "/api/v2/write?org="+url.QueryEscape(srv2.Org)+"&bucket="+url.QueryEscape(db), conflict)
		dest, env := influxdb2(srv2, tee.URL)
		cfg := config.Config{InfluxDB: dest, Graphite: []config.GraphiteConfig{{Bucket: db, Schema: sc.String()}}}
		if sc == schema.Default {
			srv1.Exec(t, fmt.Sprintf(`CREATE DATABASE %q`, dashboardHistoryDB))
			srv2.CreateBucket(t, dashboardHistoryDB, 0)
			cfg.Annotate.HistoryBucket = dashboardHistoryDB
		}
		dashboardWorkload(t, start, end, rounds, cfg, env)
	}
	tee.Close()
	t.Logf("%d write requests sent to both servers", tee.writes.Load())
	if tee.writes.Load() == 0 {
		t.Fatal("no write went through the proxy")
	}

	cmp := &compareQueries{t: t, url1: srv1.URL, rt2: srv2.TokenTransport()}
	both := influxtest.InfluxQLVia(srv2.URL, cmp)
	to := time.Now()
	examples := docExamples(t)
	for _, sc := range dashboardSchemas(t) {
		t.Run(sc.String(), func(t *testing.T) {
			began, db := time.Now(), dashboardDB(sc)
			compared := cmp.queries
			for _, f := range dashboardFiles(t, sc) {
				t.Run(filepath.Base(f), func(t *testing.T) {
					cmp.t = t
					defer func() { cmp.t = nil }()
					checkDashboard(t, both, dashboardDBOf(db, f), f, start, to)
				})
			}
			// The documentation's InfluxQL examples, likewise.
			cmp.t = t
			runExamples(t, both, db, sc, examples, start, to)
			cmp.t = nil
			t.Logf("schema %s: %d queries compared on bucket %s in %s", sc, cmp.queries-compared, db, time.Since(began).Round(time.Millisecond))
		})
	}
	cmp.t = t
	t.Logf("%d queries compared, %d with data; %d answers differed", cmp.queries, cmp.withData, cmp.differed)
	if cmp.queries < 50 || cmp.withData == 0 {
		t.Errorf("%d queries compared, %d with data", cmp.queries, cmp.withData)
	}
}

// writeTee is a proxy in front of InfluxDB 2.x that sends every write
// request to an InfluxDB 1.8 first (which takes /api/v2/write too, the
// bucket as its database), then to 2.x, whose answer it returns: the two
// hold the same points whatever the writer does with 2.x's answers (a
// write that is repeated, halved or retried stores the same points again).
type writeTee struct {
	*httptest.Server
	writes atomic.Int64
}

func newWriteTee(t *testing.T, url1, url2 string) *writeTee {
	target, err := url.Parse(url2)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	tee := &writeTee{}
	tee.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/api/v2/write" {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			req, err := http.NewRequest(http.MethodPost, url1+r.URL.RequestURI(), bytes.NewReader(body))
			if err != nil {
				t.Error(err) // not Fatal: this is a server's goroutine
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			req.Header.Set("Content-Type", r.Header.Get("Content-Type"))
			req.Header.Set("Content-Encoding", r.Header.Get("Content-Encoding"))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("InfluxDB 1.8: %v", err)
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent && !(resp.StatusCode == http.StatusBadRequest && bytes.Contains(b, []byte("partial write"))) {
				t.Errorf("InfluxDB 1.8 answered %s %s", resp.Status, b)
			}
			tee.writes.Add(1)
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		proxy.ServeHTTP(w, r)
	}))
	return tee
}

// compareQueries is the RoundTripper of the queries grafanatest runs: it
// sends each /query to InfluxDB 1.8 as well, and fails the test when the
// two answers differ. It answers with 2.x's.
type compareQueries struct {
	t    *testing.T // the running (sub)test: RoundTrip runs in its goroutine
	url1 string
	rt2  http.RoundTripper

	mu                          sync.Mutex
	queries, withData, differed int
}

func (c *compareQueries) RoundTrip(r *http.Request) (*http.Response, error) {
	form, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	r.Body.Close()
	q, err := url.ParseQuery(string(form))
	if err != nil {
		return nil, err
	}
	began := time.Now()
	r2 := r.Clone(r.Context())
	r2.Body = io.NopCloser(bytes.NewReader(form))
	resp2, err := c.rt2.RoundTrip(r2)
	if err != nil {
		return nil, err
	}
	body2, err := io.ReadAll(resp2.Body)
	resp2.Body.Close()
	if err != nil {
		return nil, err
	}
	resp1, err := http.Post(c.url1+"/query", r.Header.Get("Content-Type"), bytes.NewReader(form))
	if err != nil {
		return nil, err
	}
	body1, err := io.ReadAll(resp1.Body)
	resp1.Body.Close()
	if err != nil {
		return nil, err
	}
	// A query relative to now() (e.g. "time >= now() - 7d" with several
	// selectors, whose time is the range's start) is evaluated a moment
	// later on 1.8: its times may differ by that moment.
	var slack time.Duration
	if strings.Contains(q.Get("q"), "now()") {
		slack = time.Since(began)
	}
	a1, a2 := canonicalAnswers(body1, body2, slack)
	c.mu.Lock()
	c.queries++
	if strings.Contains(a2, `"values"`) {
		c.withData++
	}
	same := resp1.StatusCode == resp2.StatusCode && a1 == a2
	if !same {
		c.differed++
	}
	c.mu.Unlock()
	if !same {
		c.t.Errorf("InfluxDB 1.8 and 2.x answer %q on %q differently:\n1.8: %d %s\n2.x: %d %s",
			q.Get("q"), q.Get("db"), resp1.StatusCode, a1, resp2.StatusCode, a2)
	}
	resp2.Body = io.NopCloser(bytes.NewReader(body2))
	resp2.ContentLength = int64(len(body2))
	return resp2, nil
}

// canonicalAnswers re-encodes two InfluxQL JSON answers (numbers as
// written), so that they compare by content. A time of the second that is
// within slack of the first's is taken as the first's.
func canonicalAnswers(body1, body2 []byte, slack time.Duration) (string, string) {
	decode := func(b []byte) (any, bool) {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var v any
		return v, dec.Decode(&v) == nil
	}
	v1, ok1 := decode(body1)
	v2, ok2 := decode(body2)
	if !ok1 || !ok2 {
		return string(body1), string(body2)
	}
	if slack > 0 {
		alignTimes(v1, v2, int64(slack))
	}
	b1, _ := json.Marshal(v1)
	b2, _ := json.Marshal(v2)
	return string(b1), string(b2)
}

// alignTimes sets each time (the first column) of answer v2 that is
// within slack ns of v1's to v1's.
func alignTimes(v1, v2 any, slack int64) {
	list := func(v any, key string) []any {
		m, _ := v.(map[string]any)
		l, _ := m[key].([]any)
		return l
	}
	r1, r2 := list(v1, "results"), list(v2, "results")
	for i := range min(len(r1), len(r2)) {
		s1, s2 := list(r1[i], "series"), list(r2[i], "series")
		for j := range min(len(s1), len(s2)) {
			if cols := list(s1[j], "columns"); len(cols) == 0 || cols[0] != "time" {
				continue
			}
			rows1, rows2 := list(s1[j], "values"), list(s2[j], "values")
			for k := range min(len(rows1), len(rows2)) {
				row1, _ := rows1[k].([]any)
				row2, _ := rows2[k].([]any)
				if len(row1) == 0 || len(row2) == 0 {
					continue
				}
				n1, ok1 := row1[0].(json.Number)
				n2, ok2 := row2[0].(json.Number)
				if !ok1 || !ok2 {
					continue
				}
				t1, err1 := n1.Int64()
				t2, err2 := n2.Int64()
				if err1 == nil && err2 == nil && t1-t2 <= slack && t2-t1 <= slack {
					row2[0] = row1[0]
				}
			}
		}
	}
}

// The accounting's read of the metrics stream against 2.x, through its
// InfluxQL: the sums and peaks, and the process tree's peak at one
// moment, which takes a subquery (TestStreamReadsEachBlocksShapes on
// 1.8).
func TestStreamTotalsInfluxDB2(t *testing.T) {
	srv := influxtest.Start2(t)
	const app = "app-20261125100000-0001"
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	at := func(s int) int64 { return t0.Add(time.Duration(s) * time.Second).UnixNano() }
	srv.Write(t, "/api/v2/write?org="+url.QueryEscape(srv.Org)+"&bucket="+url.QueryEscape(srv.Bucket), strings.Join([]string{
		fmt.Sprintf(`executor,applicationid=%s,process=1 cpuTime.count=300,cpuTime.count_delta=150 %d`, app, at(20)),
		fmt.Sprintf(`ExecutorMetrics,applicationid=%s,process=1 ProcessTreeJVMRSSMemory=1000,ProcessTreePythonRSSMemory=100,ProcessTreeOtherRSSMemory=0 %d`, app, at(20)),
		fmt.Sprintf(`ExecutorMetrics,applicationid=%s,process=1 ProcessTreeJVMRSSMemory=600,ProcessTreePythonRSSMemory=700,ProcessTreeOtherRSSMemory=0 %d`, app, at(30)),
	}, "\n"))
	dest, env := influxdb2(srv, srv.URL)
	plan := streamPlan(t, config.Config{InfluxDB: dest, Graphite: []config.GraphiteConfig{{Bucket: srv.Bucket, Schema: "wide"}}}, env)
	p := streamTotals(t, plan, app, t0)["1"]
	if p.Sums["cpuTime.count"] != 150 || p.Peak["ProcessTreeJVMRSSMemory"] != 1000 || p.Peak["ProcessTreePythonRSSMemory"] != 700 || p.TreePeak != 1300 {
		t.Errorf("process 1: sums %v, peaks %v, tree peak %v; want 150, 1000 and 700, 1300", p.Sums, p.Peak, p.TreePeak)
	}
}
