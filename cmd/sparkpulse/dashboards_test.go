package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/grafana"
	"github.com/sparkpulse/sparkpulse/grafana/grafanatest"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/simulate"
)

// Every panel, variable and annotation query of every committed dashboard
// runs against a real InfluxDB holding a Spark workload that went through
// sparkpulse: two applications (one PySpark, one with a streaming query)
// with a driver and three executors each, each executor replaced by a new
// one every 4 minutes, 15 minutes of reports from the
// simulator (Spark's full metric set in the reporter's format), their jobs,
// stages and SQL executions polled from the simulated REST API, and
// sparkpulse's own metrics. The workload is written once per schema, each
// by a [[graphite]] block of that schema to a database of its own, and
// each schema's dashboards (grafana.Dir) run against its database.
// Variables are resolved from their own queries and substituted as Grafana
// does; a query that fails, or returns no data for every application,
// fails the test.
func TestDashboardsOnRealData(t *testing.T) {
	srv := influxtest.Start(t)
	end := time.Now().Truncate(time.Second)
	const rounds = 90
	start := end.Add(-rounds * 10 * time.Second)

	for _, sc := range dashboardSchemas(t) {
		db := dashboardDB(sc)
		srv.Exec(t, fmt.Sprintf(`CREATE DATABASE %q`, db))
		srv.Write(t, "/write?db="+db, typeConflict(sc, start))
		cfg := config.Config{
			InfluxDB: config.InfluxDBConfig{URL: srv.URL},
			Graphite: []config.GraphiteConfig{{Database: db, Schema: sc.String()}},
		}
		if sc == schema.Default {
			srv.Exec(t, fmt.Sprintf(`CREATE DATABASE %q`, dashboardHistoryDB))
			cfg.Annotate.HistoryDatabase = dashboardHistoryDB
		}
		dashboardWorkload(t, start, end, rounds, cfg)
	}
	// sparkpulse's own metrics are stamped with the wall clock, after the
	// replayed reports.
	to := time.Now()
	examples := docExamples(t)
	for _, sc := range dashboardSchemas(t) {
		t.Run(sc.String(), func(t *testing.T) {
			began, db := time.Now(), dashboardDB(sc)
			queries, runs := 0, 0
			for _, f := range dashboardFiles(t, sc) {
				t.Run(filepath.Base(f), func(t *testing.T) {
					q, r := checkDashboard(t, srv, dashboardDBOf(db, f), f, start, to)
					queries, runs = queries+q, runs+r
				})
			}
			// The InfluxQL examples of the README and docs/ of this schema
			// work on the same data.
			ran := runExamples(t, srv, db, sc, examples, start, to)
			t.Logf("schema %s: %d dashboard queries (%d runs, for each application and repeat) and %d documentation examples on database %s in %s",
				sc, queries, runs, ran, db, time.Since(began).Round(time.Millisecond))
		})
	}
}

// dashboardSchemas are the schemas whose dashboards are checked: every
// schema a [[graphite]] block may name.
func dashboardSchemas(t *testing.T) []schema.Shape {
	t.Helper()
	var out []schema.Shape
	for _, name := range schema.Shapes {
		sc, err := schema.ParseShape(name)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sc)
	}
	return out
}

// dashboardDB is the database (or bucket) sc's workload is written to: the
// one the provisioned data source reads for the default schema.
func dashboardDB(sc schema.Shape) string {
	if sc == schema.Default {
		return "spark"
	}
	return "spark_" + sc.String()
}

// dashboardHistoryDB is the database (or bucket) of spark_app_history in
// the default schema's workload, which the history dashboard reads.
const dashboardHistoryDB = "spark_history"

// dashboardDBOf is the database the dashboard in file reads, given db,
// its set's.
func dashboardDBOf(db, file string) string {
	if filepath.Base(file) == grafana.HistoryDashboardFile {
		return dashboardHistoryDB
	}
	return db
}

// dashboardFiles are the committed dashboards of sc's set.
func dashboardFiles(t *testing.T, sc schema.Shape) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("../../grafana", grafana.Dir(sc), "*.json"))
	if len(files) < 3 {
		t.Fatalf("the %s dashboards: %v", sc, files)
	}
	return files
}

// typeConflict is a point whose field has another type than the workload's
// for the same field, so that InfluxDB refuses some of the workload's
// points and the health dashboard's refusal and error panels have data.
// Its source is one no dashboard reads: a refused wide point takes the
// source's other metrics of its report with it.
func typeConflict(sc schema.Shape, at time.Time) string {
	mt := schema.Metric{Source: "HiveExternalCatalog", Name: "fileCacheHits.count"}
	return fmt.Sprintf(`%s,applicationid=x %s="conflict" %d`, sc.Measurement(mt), sc.Field(mt), at.UnixNano())
}

// docExample is an InfluxQL statement of a fenced sql block of the README
// or a page of docs/, and the schema it reads: a comment line that starts
// with a schema's name ("-- cern") marks the statements after it, the
// default schema's otherwise.
type docExample struct {
	file, query string
	schema      schema.Shape
}

// docExamples returns every InfluxQL example the documentation shows, so
// that each is run against real data of its schema.
func docExamples(t *testing.T) []docExample {
	t.Helper()
	var out []docExample
	for _, page := range docPages(t) {
		f := page.path
		for n, block := range strings.Split(page.text, "```sql\n")[1:] {
			block, _, _ = strings.Cut(block, "```")
			sc := schema.Default
			// Each schema's statements of the block: with Grafana's
			// variables, and as pasted (none).
			forms := map[schema.Shape][2]int{}
			for _, line := range strings.Split(block, "\n") {
				line = strings.TrimSpace(line)
				if c, ok := strings.CutPrefix(line, "--"); ok {
					if w := strings.Fields(c); len(w) > 0 && strings.TrimSuffix(w[0], ":") != "" {
						if s, err := schema.ParseShape(strings.TrimSuffix(w[0], ":")); err == nil {
							sc = s
						}
					}
					continue
				}
				if line != "" {
					out = append(out, docExample{f, line, sc})
					c := forms[sc]
					if strings.Contains(line, "$") {
						c[0]++
					} else {
						c[1]++
					}
					forms[sc] = c
				}
			}
			for sc, c := range forms {
				if c[0] > 0 && c[1] == 0 {
					t.Errorf("%s: sql block %d, schema %s: %d statements with Grafana's variables and none to paste as is", f, n+1, sc, c[0])
				}
			}
		}
	}
	return out
}

// runExamples runs sc's examples against db, for the second application,
// and returns how many ran; each must return data.
func runExamples(t *testing.T, srv *influxtest.Server, db string, sc schema.Shape, examples []docExample, from, to time.Time) int {
	t.Helper()
	vars := []grafana.Variable{{Name: "app"}}
	vals := grafana.Values{Selected: map[string][]string{"app": {simulate.AppID(from, 1)}}}
	ran := 0
	for _, ex := range examples {
		if ex.schema != sc {
			continue
		}
		text, err := grafana.Interpolate(ex.query, vars, vals, from, to, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		ran++
		res, err := srv.TryQuery(db, text)
		ok := grafanatest.HasData(res, false)
		if strings.HasPrefix(text, "SHOW MEASUREMENTS") {
			// Names only; the one example lists Spark's alone, without
			// sparkpulse's own (schema.md).
			ok = len(res) == 1 && len(res[0].Values) > 0
			for _, row := range res[0:min(len(res), 1)] {
				for _, v := range row.Values {
					if name, _ := v[0].(string); strings.HasPrefix(name, "sparkpulse_") {
						t.Errorf("%s example %q lists %s", ex.file, text, name)
					}
				}
			}
		}
		if err != nil || !ok {
			t.Errorf("%s example of the %s schema %q: %v, %d series", ex.file, sc, text, err, len(res))
		}
	}
	// The README's two, and an example of each other schema.
	want := 1
	if sc == schema.Default {
		want = 2
	}
	if ran < want {
		t.Errorf("%d InfluxQL examples of the %s schema found in the README and docs/", ran, sc)
	}
	return ran
}

// checkDashboard runs the dashboard in file against db and returns how
// many queries it has, and how many times they ran.
func checkDashboard(t *testing.T, srv *influxtest.Server, db, file string, from, to time.Time) (queries, runs int) {
	for _, r := range grafanatest.Run(t, srv, db, file, from, to) {
		if r.WithData == 0 {
			t.Errorf("%s: no data for any application: %s", r.Where, r.Text)
		}
		queries, runs = queries+1, runs+r.Runs
	}
	return queries, runs
}

// dashboardWorkload runs the dashboards' workload through a sparkpulse
// that writes as cfg says, from its [[graphite]] block, with env: two
// simulated applications report for rounds periods up to end, their REST
// API behind a ResourceManager-style proxy whose {app_id} sources exist
// once metrics name the applications and are first polled once the
// workload is in.
func dashboardWorkload(t *testing.T, start, end time.Time, rounds int, cfg config.Config, env ...string) {
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
	cfg.Annotate = config.AnnotateConfig{
		URLs:            []string{ui.URL + "/proxy/{app_id}", "http://127.0.0.1:1"}, // the second never answers: its errors are counted
		Interval:        seconds(3600),                                              // polled below, once the workload is in
		UsageDelay:      config.Duration(time.Millisecond),                          // the accounting reads the stream at once: it is flushed
		HistoryDatabase: cfg.Annotate.HistoryDatabase,
		HistoryBucket:   cfg.Annotate.HistoryBucket,
	}
	cfg.Internal = config.InternalConfig{Interval: seconds(3600)}
	svc := startSparkpulse(t, cfg, env...)
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
