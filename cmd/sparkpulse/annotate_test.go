package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
	"github.com/sparkpulse/sparkpulse/sparkui"
)

// Metrics of an application make sparkpulse poll its Spark UI through a
// ResourceManager-proxy URL template; the jobs land as annotation points in
// their own database, tagged with the same applicationid as the metrics.
func TestAnnotationsEndToEnd(t *testing.T) {
	const app = "application_1717000000000_0042"
	start := time.Now().Add(-time.Minute).Truncate(time.Millisecond).UTC()
	ui := oneJobUI(app, start)

	// The second listing of the application means the first sync is done.
	listings := make(chan struct{}, 100)
	mux := http.NewServeMux()
	mux.Handle("/proxy/"+app+"/", http.StripPrefix("/proxy/"+app, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/applications/"+app {
			listings <- struct{}{}
		}
		ui.ServeHTTP(w, r)
	})))
	rm := httptest.NewServer(mux)
	defer rm.Close()

	srv := influxtest.Start(t)
	svc := startSparkpulse(t, config.Config{
		InfluxDB: config.InfluxDBConfig{URL: srv.URL},
		Annotate: config.AnnotateConfig{URLs: []string{rm.URL + "/proxy/{app_id}"}, Interval: seconds(1), Database: "annotations"},
		Graphite: []config.GraphiteConfig{{Database: "metrics"}},
	})
	sendTCP(t, svc.addr(0), app+".driver.DAGScheduler.job.allJobs 1 "+fmt.Sprint(start.Unix())+"\n")
	for range 2 {
		select {
		case <-listings:
		case <-time.After(30 * time.Second):
			t.Fatal("the application's UI was not polled")
		}
	}
	_, metrics := adminGet(t, svc.adminLn.Addr().String(), "/metrics")
	svc.stop()

	// The first sync wrote the application, its usage estimate, its job
	// and its stage; later syncs rewrite the running application's point
	// as its end moves.
	for _, name := range []string{"sparkpulse_annotate_points_total "} {
		_, rest, ok := strings.Cut(metrics, "\n"+name)
		var n int
		if _, err := fmt.Sscan(rest, &n); !ok || err != nil || n < 3 {
			t.Errorf("/metrics: %s%d (%v, %v), want at least 3", name, n, ok, err)
		}
	}
	for _, want := range []string{"sparkpulse_annotate_sources 1", `sparkpulse_influxdb_queue_batches{listener="annotate"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	got := dump(t, srv, "annotations")
	if len(got) != 4 {
		t.Fatalf("annotations: %q", got)
	}
	for i, want := range []string{
		"spark_app,applicationid=" + app + ",appname=orders ",
		"spark_app_usage,applicationid=" + app + ",appname=orders,user=etl ", // the estimate at its first read
		"spark_job,applicationid=" + app + ",appname=orders ",
		"spark_stage,applicationid=" + app + ",appname=orders ",
	} {
		if !strings.HasPrefix(got[i], want) {
			t.Errorf("annotation %d: %q, want %q…", i, got[i], want)
		}
	}
	if !strings.Contains(got[2], `title=Job 0 SUCCEEDED`) || !strings.Contains(got[2], fmt.Sprint("end_ms=", start.Add(3*time.Second).UnixMilli())) {
		t.Errorf("job: %s", got[2])
	}
	if m := dump(t, srv, "metrics"); len(m) != 1 || !strings.Contains(m[0], "applicationid="+app) {
		t.Errorf("metrics: %q", m)
	}
}

func TestCheckShowsAnnotate(t *testing.T) {
	var out strings.Builder
	path := writeFile(t, "c.toml", "[annotate]\nurls = [\"http://rm:8088/proxy/{app_id}\"]\nusername = \"spark\"\npassword = \"s3cret\"\nhistory-retention-policy = \"year\"\n[[graphite]]\n")
	if err := run(t.Context(), []string{"check", "--config", path, "--influxdb-url", refusedURL(t)}, noEnv, nil, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `annotate: every 10s → bucket "spark", auth: basic auth as spark`) ||
		!strings.Contains(out.String(), "http://rm:8088/proxy/{app_id} (filled with each applicationid tag value seen)") ||
		!strings.Contains(out.String(), `history: each ended application's usage → bucket "spark/year" (spark_app_history, by name)`) ||
		strings.Contains(out.String(), "s3cret") {
		t.Errorf("check output:\n%s", out.String())
	}
}

// oneJobUI is a Spark UI with one running application, started at start,
// that has run one job.
func oneJobUI(app string, start time.Time) *sparkui.Server {
	att := &sparkui.Attempt{Start: start, User: "etl", SparkVersion: "3.5.3"}
	att.AddJob(&sparkui.Job{ID: 0, Name: "count at etl.py:12", Submitted: start.Add(time.Second), Completed: start.Add(3 * time.Second),
		StageIDs: []int{0}, Status: sparkui.JobSucceeded, Tasks: 4, CompletedTasks: 4, SQLExecutionID: -1})
	att.AddStage(&sparkui.Stage{ID: 0, Name: "count at etl.py:12", Status: sparkui.StageComplete, Submitted: start.Add(time.Second),
		Completed: start.Add(3 * time.Second), Tasks: 4, CompleteTasks: 4})
	return sparkui.NewServer(sparkui.LiveUI, &sparkui.Model{Apps: []*sparkui.App{{ID: app, Name: "orders", Attempts: []*sparkui.Attempt{att}}}})
}
