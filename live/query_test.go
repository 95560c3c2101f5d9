package live

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sparkpulse/sparkpulse/influx"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
	"github.com/sparkpulse/sparkpulse/schema"
)

// The querier reads applications, executors, busy cores, heap peaks, jobs
// and verdicts from a real InfluxDB, only those dated from Since on, with
// the metrics stream in either shape, or in both (a database written
// before and after a change of schema).
func TestQuerierReadsInfluxDB(t *testing.T) {
	srv := influxtest.Start(t)
	wide, cern := schema.Wide, schema.CERN
	for _, tc := range []struct {
		name    string
		written []schema.Shape // the stream's points take these shapes in turn
		read    []schema.Shape // Config.Schemas
	}{
		{"wide", []schema.Shape{wide}, nil},
		{"cern", []schema.Shape{cern}, []schema.Shape{cern}},
		{"both", []schema.Shape{cern, wide}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := "spark_" + tc.name
			srv.Exec(t, "CREATE DATABASE "+db)
			querierReadsInfluxDB(t, srv.URL, db, tc.written, tc.read)
		})
	}
}

func querierReadsInfluxDB(t *testing.T, url, db string, written, read []schema.Shape) {
	now := time.Now().Truncate(time.Second)
	since := now.Add(-2 * time.Minute)
	ms := func(d time.Duration) int64 { return now.Add(d).UnixNano() }
	const a1, a2, old = "app-20260302140000-0001", "app-20260302140000-0002", "app-20260302130000-0009"
	var lp strings.Builder
	line := func(format string, a ...any) { fmt.Fprintf(&lp, format+"\n", a...) }
	points := 0
	// stream writes a point of the metrics stream; delta < 0: none.
	stream := func(m schema.Metric, process string, value, delta float64, at time.Duration) {
		sc := written[points%len(written)]
		points++
		tags := fmt.Sprintf("applicationid=%s,process=%s", a1, process)
		if ns := sc.Namespace(m); ns != "" {
			tags = "applicationid=" + a1 + ",namespace=" + ns + ",process=" + process
		}
		fields := fmt.Sprintf("%s=%g", sc.Field(m), value)
		if delta >= 0 {
			fields += fmt.Sprintf(",%s=%g", sc.DeltaField(m), delta)
		}
		line("%s,%s %s %d", sc.Measurement(m), tags, fields, ms(at))
	}
	// An application of an earlier run: not shown.
	line(`spark_app,applicationid=%s,appname=old fact="start",status="RUNNING",app_id="%s" %d`, old, old, ms(-time.Hour))
	// a1: running, 2 live executors of 4 cores and one removed, job 3 running after job 2 failed.
	line(`spark_app,applicationid=%s,appname=etl fact="start",status="RUNNING",app_id="%s" %d`, a1, a1, ms(-90*time.Second))
	for p, st := range map[string]string{"driver": "ACTIVE", "1": "ACTIVE", "2": "ACTIVE", "3": "REMOVED"} {
		line(`spark_executor,applicationid=%s,process=%s status="ACTIVE",cores=4i %d`, a1, p, ms(-80*time.Second))
		line(`spark_executor,applicationid=%s,process=%s status="%s",cores=4i %d`, a1, p, st, ms(-20*time.Second))
	}
	line(`spark_job,applicationid=%s fact="end",job_id=2i,status="FAILED" %d`, a1, ms(-60*time.Second)+1)
	line(`spark_job,applicationid=%s fact="start",job_id=3i,status="RUNNING" %d`, a1, ms(-30*time.Second))
	// 36 s of task time in the last minute over two executors: 0.6 cores busy.
	stream(schema.RunTime, "1", 50000, 20000, -40*time.Second)
	stream(schema.RunTime, "2", 50000, 16000, -10*time.Second)
	stream(schema.RunTime, "2", 34000, 99000, -100*time.Second) // before the window
	// Heap: executor 2 is nearer its limit than executor 1 with a larger peak.
	stream(schema.JVMHeapMemory, "1", 3000000000, -1, -30*time.Second)
	stream(schema.HeapMax, "1", 8589934592, -1, -30*time.Second)
	stream(schema.JVMHeapMemory, "2", 2000000000, -1, -30*time.Second)
	stream(schema.HeapMax, "2", 2147483648, -1, -30*time.Second)
	stream(schema.JVMHeapMemory, "driver", 4000000000, -1, -30*time.Second)
	// a2: ended, accounted and reconciled.
	line(`spark_app,applicationid=%s,appname=ml fact="start",status="RUNNING",app_id="%s" %d`, a2, a2, ms(-100*time.Second))
	line(`spark_app,applicationid=%s,appname=ml fact="end",status="COMPLETED",app_id="%s" %d`, a2, a2, ms(-100*time.Second)+1)
	line(`spark_app_usage,applicationid=%s,appname=ml fact="end",app_id="%s",executors=4i,executor_core_seconds=7200,executor_memory_byte_seconds=%d,cpu_utilisation=0.25 %d`,
		a2, a2, int64(3600)<<30, ms(-5*time.Second))
	line(`spark_reconcile,applicationid=%s,appname=ml verdict="exact",text="the stream's totals match Spark's" %d`, a2, ms(-5*time.Second))
	// a3: seen only in its metrics. a4 (its metrics keyed by its name):
	// a stream fact, then a History Server showed it, whose facts win
	// though they are older.
	const a3, a4, a4id = "app-20260302140000-0003", "nightly", "app-20260302140000-0004"
	line(`spark_app,applicationid=%s fact="stream",status="UNKNOWN",app_id="%s",end_ms=%di %d`, a3, a3, now.Add(-30*time.Second).UnixMilli(), ms(-105*time.Second)+3)
	line(`spark_app,applicationid=%s,appname=nightly fact="end",status="COMPLETED",app_id="%s" %d`, a4, a4id, ms(-110*time.Second)+1)
	line(`spark_app,applicationid=%s fact="stream",status="UNKNOWN" %d`, a4, ms(-50*time.Second)+3)
	if err := post(url+"/write?db="+db, lp.String()); err != nil {
		t.Fatal(err)
	}

	q, err := NewQuerier(Config{Influx: influx.Config{URL: url}, MetricsDB: db, Schemas: read, Since: since})
	if err != nil {
		t.Fatal(err)
	}
	s := q.Snapshot(context.Background(), now)
	if s.QueryErr != "" {
		t.Fatal(s.QueryErr)
	}
	if len(s.Apps) != 4 || s.Apps[0].ID != a1 || s.Apps[1].ID != a2 || s.Apps[2].ID != a3 || s.Apps[3].ID != a4id {
		t.Fatalf("applications: %+v", s.Apps)
	}
	if a := s.Apps[2]; a.Status != StatusStream || !a.Started.Equal(now.Add(-105*time.Second)) {
		t.Errorf("application seen only in its metrics: %+v", a)
	}
	if a := s.Apps[3]; a.Status != StatusEnded || a.Name != "nightly" {
		t.Errorf("application a source showed after its stream fact: %+v", a)
	}
	got := s.Apps[0]
	if got.Name != "etl" || got.Status != StatusRunning || got.Executors != 2 || got.Cores != 8 ||
		fmt.Sprintf("%.2f", got.Busy) != "0.60" || got.HeapPeak != 2e9 || got.HeapMax != 2<<30 ||
		got.Job == nil || *got.Job != (Job{3, "RUNNING"}) || got.FailedJobs != 1 {
		t.Errorf("running application: %+v, job %+v", got, got.Job)
	}
	if e := s.Apps[1]; e.Status != StatusEnded || e.Busy != -1 || e.Executors != -1 {
		t.Errorf("ended application: %+v", e)
	}
	if len(s.Verdicts) != 1 {
		t.Fatalf("verdicts: %+v", s.Verdicts)
	}
	v := s.Verdicts[0]
	if v.App != a2 || v.Name != "ml" || v.Executors != 4 || v.CoreHours != 2 || v.GiBHours != 1 || v.CPUUsed != 0.25 || v.MemoryPeak != -1 || v.Verdict != "exact" {
		t.Errorf("verdict: %+v", v)
	}

	// A database not created yet reads as no application, not an error.
	q, _ = NewQuerier(Config{Influx: influx.Config{URL: url}, MetricsDB: "nothing", Since: since})
	if s := q.Snapshot(context.Background(), now); s.QueryErr != "" || len(s.Apps) != 0 {
		t.Errorf("missing database: %+v", s)
	}
}

func post(url, body string) error {
	resp, err := http.Post(url, "text/plain", strings.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// sparkpulse's own figures come from its /metrics; lines/s once a span of
// reads is long enough.
func TestSelfFromMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	lines := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sparkpulse_lines_received_total"}, []string{"listener"})
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sparkpulse_lines_dropped_total"}, []string{"listener", "reason"})
	queued := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sparkpulse_influxdb_queue_bytes"}, []string{"listener"})
	outcomes := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sparkpulse_delta_samples_total"}, []string{"outcome"})
	sourceErrs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sparkpulse_annotate_errors_total"}, []string{"source", "kind"})
	sources := prometheus.NewGauge(prometheus.GaugeOpts{Name: "sparkpulse_annotate_sources"})
	reg.MustRegister(lines, dropped, queued, outcomes, sourceErrs, sources)
	sources.Set(2)
	sourceErrs.WithLabelValues("http://localhost:4040", "network").Add(9)
	sourceErrs.WithLabelValues("http://hs:18080", "http_status").Add(1)
	lines.WithLabelValues("tcp").Add(1000)
	lines.WithLabelValues("udp").Add(200)
	dropped.WithLabelValues("tcp", "nan").Add(3)
	dropped.WithLabelValues("udp", "nan").Add(2)
	dropped.WithLabelValues("tcp", "unmapped").Add(0)
	queued.WithLabelValues("tcp").Set(2048)
	queued.WithLabelValues("annotate").Set(1024)
	outcomes.WithLabelValues("first_unknown").Add(7)
	ts := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer ts.Close()

	q, err := NewQuerier(Config{Influx: influx.Config{URL: "http://127.0.0.1:1"}, MetricsDB: "spark", AdminURL: ts.URL + "/"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	s, err := q.readSelf(context.Background(), now)
	if err != nil {
		t.Fatal(err)
	}
	if s.Lines != 1200 || s.QueueBytes != 3072 || s.NoDelta != 7 || len(s.Dropped) != 1 || s.Dropped["nan"] != 5 || s.LinesPerSec != -1 ||
		s.Sources != 2 || s.SourceErrors["http://localhost:4040"] != 9 || s.SourceFailing != nil {
		t.Errorf("first read: %+v", s)
	}
	lines.WithLabelValues("tcp").Add(300)
	sourceErrs.WithLabelValues("http://localhost:4040", "network").Add(3)
	if s, _ = q.readSelf(context.Background(), now.Add(5*time.Second)); s.LinesPerSec != -1 || s.SourceFailing != nil {
		t.Errorf("lines/s after 5 s: %v, failing %v", s.LinesPerSec, s.SourceFailing)
	}
	// The History Server answered throughout; the live UI failed 3 times.
	if s, _ = q.readSelf(context.Background(), now.Add(20*time.Second)); s.LinesPerSec != 15 || !maps.Equal(s.SourceFailing, map[string]float64{"http://localhost:4040": 3}) {
		t.Errorf("lines/s after 20 s: %v, failing %v", s.LinesPerSec, s.SourceFailing)
	}
	// A minute later, nothing failed in that minute.
	s, _ = q.readSelf(context.Background(), now.Add(81*time.Second))
	s, _ = q.readSelf(context.Background(), now.Add(82*time.Second))
	if len(s.SourceFailing) != 0 || s.SourceFailing == nil {
		t.Errorf("failing a minute later: %v", s.SourceFailing)
	}

	ts.Close()
	if _, err := q.readSelf(context.Background(), now); err == nil || !strings.Contains(err.Error(), ts.URL) {
		t.Errorf("a closed admin endpoint: %v", err)
	}
}

// Not on a terminal, frames follow each other without escape sequences;
// Run returns nil once its context ends.
func TestRunPlainFrames(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out bytes.Buffer
	w := &frameWriter{w: &out, frames: 2, done: cancel}
	err := Run(ctx, Config{Influx: influx.Config{URL: "http://127.0.0.1:1"}, MetricsDB: "spark", Interval: 10 * time.Millisecond,
		Notes: []string{"next: try this"}}, w)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "\x1b") {
		t.Errorf("escape sequences in plain frames: %q", out.String())
	}
	if n := strings.Count(out.String(), "sparkpulse watch ·"); n != 2 {
		t.Errorf("%d frames:\n%s", n, out.String())
	}
	if n := strings.Count(out.String(), "\nnext: try this\n"); n != 2 || strings.Contains(out.String(), Dashboards) {
		t.Errorf("the note is in %d frames, want every one, in place of the dashboards line:\n%s", n, out.String())
	}
	if !strings.Contains(out.String(), "InfluxDB not read:") {
		t.Errorf("unreachable InfluxDB not said:\n%s", out.String())
	}
}

// frameWriter ends the view after a number of frames.
type frameWriter struct {
	w      *bytes.Buffer
	frames int
	done   func()
}

func (f *frameWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if f.frames--; f.frames == 0 {
		f.done()
	}
	return n, err
}

// On a terminal a frame is drawn from the top, each line clearing the
// rest of the last frame's.
func TestDrawInPlace(t *testing.T) {
	var b strings.Builder
	w := &b
	if err := draw(w, []string{"a", "b"}, true, true); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "\x1b[Ha\x1b[K\nb\x1b[K\n\x1b[J"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
