package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/grafana"
	"github.com/sparkpulse/sparkpulse/grafana/grafanatest"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
	"github.com/sparkpulse/sparkpulse/simulate"
)

// Every panel, variable and annotation query of every committed dashboard
// runs against a real InfluxDB holding a Spark workload that went through
// sparkpulse: two applications (one PySpark, one with a streaming query)
// with a driver and three executors each, each executor replaced by a new
// one every 4 minutes, 15 minutes of reports from the
// simulator (Spark's full metric set in the reporter's format), their jobs,
// stages and SQL executions polled from the simulated REST API, and
// sparkpulse's own metrics. Variables are resolved from their own queries
// and substituted as Grafana does; a query that fails, or returns no data
// for every application, fails the test.
func TestDashboardsOnRealData(t *testing.T) {
	srv := influxtest.Start(t)
	end := time.Now().Truncate(time.Second)
	const rounds = 90
	start := end.Add(-rounds * 10 * time.Second)

	// A field of another type makes InfluxDB refuse some points, so the
	// health dashboard's refusal and error panels have data too.
	srv.Exec(t, `CREATE DATABASE "spark"`)
	writeLine(t, srv, "spark", fmt.Sprintf(`compilationTime.p98,applicationid=x value="conflict" %d`, start.UnixNano()))
	dashboardWorkload(t, start, end, rounds, `database = "spark"`, func(conf string) *testService { return startSparkpulse(t, srv, conf) })

	files, _ := filepath.Glob("../../grafana/dashboards/*.json")
	if len(files) < 2 {
		t.Fatalf("dashboards: %v", files)
	}
	// sparkpulse's own metrics are stamped with the wall clock, after the
	// replayed reports.
	to := time.Now()
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { checkDashboard(t, srv, f, start, to) })
	}

	// The InfluxQL examples of the README and docs/ work on the same data.
	vars := []grafana.Variable{{Name: "app"}}
	vals := grafana.Values{Selected: map[string][]string{"app": {simulate.AppID(start, 1)}}}
	examples := docExamples(t)
	for _, ex := range examples {
		text, err := grafana.Interpolate(ex.query, vars, vals, start, to, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		res, err := srv.TryQuery("spark", text)
		if err != nil || !grafanatest.HasData(res, false) {
			t.Errorf("%s example %q: %v, %d series", ex.file, text, err, len(res))
		}
	}
	if len(examples) < 2 {
		t.Errorf("%d InfluxQL examples found in the README and docs/", len(examples))
	}
}

// docExample is a fenced sql block of the README or a page of docs/.
type docExample struct{ file, query string }

// docExamples returns every InfluxQL example the documentation shows, so
// that each is run against real data.
func docExamples(t *testing.T) []docExample {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []docExample
	for _, f := range append([]string{"../../README.md"}, files...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, block := range strings.Split(string(b), "```sql\n")[1:] {
			q, _, _ := strings.Cut(block, "```")
			out = append(out, docExample{strings.TrimPrefix(f, "../../"), strings.TrimSpace(q)})
		}
	}
	return out
}

func writeLine(t *testing.T, srv *influxtest.Server, db, line string) {
	t.Helper()
	resp, err := http.Post(srv.URL+"/write?db="+db, "text/plain", strings.NewReader(line))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("write %q: %s", line, resp.Status)
	}
}

func checkDashboard(t *testing.T, srv *influxtest.Server, file string, from, to time.Time) {
	for _, r := range grafanatest.Run(t, srv, "spark", file, from, to) {
		if r.WithData == 0 {
			t.Errorf("%s: no data for any application: %s", r.Where, r.Text)
		}
	}
}

// dashboardWorkload runs the dashboards' workload through a sparkpulse
// that startSvc starts from conf (its [[graphite]] block writes with
// target, e.g. `database = "spark"`): two simulated applications report
// for rounds periods up to end, their REST API behind a
// ResourceManager-style proxy whose {app_id} sources exist once metrics
// name the applications and are first polled once the workload is in.
func dashboardWorkload(t *testing.T, start, end time.Time, rounds int, target string, startSvc func(conf string) *testService) {
	t.Helper()
	var cluster atomic.Pointer[simulate.Cluster]
	ui := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := cluster.Load()
		rest, ok := strings.CutPrefix(r.URL.Path, "/proxy/")
		_, rest, _ = strings.Cut(rest, "/")
		if c == nil || !ok {
			http.NotFound(w, r)
			return
		}
		r.URL.Path = "/" + rest
		c.UI.ServeHTTP(w, r)
	}))
	defer ui.Close()
	svc := startSvc(fmt.Sprintf(`
[annotate]
  urls = ["%s/proxy/{app_id}", "http://127.0.0.1:1"]   # the second never answers: its errors are counted
  interval = "1h"                                      # polled below, once the workload is in
  usage-delay = "1ms"                                  # the accounting reads the stream at once: it is flushed
[internal]
  interval = "1h"
[[graphite]]
  bind-address = "127.0.0.1:0"
  %s
`, ui.URL, target))
	c := simulate.NewCluster(simulate.Config{Addr: svc.addr(0), Apps: 2, Executors: 3, Period: 10 * time.Second, Seed: 7,
		ExecutorLifetime: 4 * time.Minute}, start)
	cluster.Store(c)
	lines, err := c.Replay(context.Background(), start, rounds)
	if err != nil {
		t.Fatal(err)
	}
	// A read while the applications run: their first estimate, with the
	// cores they hold.
	svc.flush()
	svc.annotator.PollOnce(context.Background())
	c.End(end)
	// An application id of Spark's form but too long for a URL: refused
	// for {app_id}, so that the health dashboard's refusal panel has data.
	sendTCP(t, svc.addr(0), fmt.Sprintf("application_1_%s.driver.jvm.heap.used 1 %d\n", strings.Repeat("9", 70), end.Unix()))
	svc.flush()
	svc.annotator.PollOnce(context.Background())
	svc.reportInternal(time.Now())
	svc.stop()
	t.Logf("replayed %d lines from %d processes over %s", lines, c.Processes(), end.Sub(start))
}
