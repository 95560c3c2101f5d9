package influx_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sparkpulse/sparkpulse/influx"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// write appends text (complete lines) through a fresh writer and closes it.
func write(t *testing.T, cfg influx.Config, bucket, text string) influx.Stats {
	t.Helper()
	w, err := influx.NewWriter(cfg, influx.Target{Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	w.Append([]byte(text), true)
	if err := w.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	return w.Stats()
}

// count runs an InfluxQL count(…) whose answer is one row, and returns it.
func count(t *testing.T, srv influxtest.Influxd, db, q string) int64 {
	t.Helper()
	res := srv.Query(t, db, q)
	if len(res) != 1 || len(res[0].Values) != 1 {
		t.Fatalf("%s: %+v", q, res)
	}
	n, err := res[0].Values[0][1].(interface{ Int64() (int64, error) }).Int64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCheckRealInfluxDB(t *testing.T) {
	srv := influxtest.Start(t)
	cfg := influx.Config{URL: srv.URL, Gzip: influx.GzipOn} // as the service runs: only writes are compressed
	ctx := ctxT(t)

	_, err := influx.Check(ctx, cfg, influx.Target{Bucket: "spark"}, false)
	want := `database "spark" does not exist on InfluxDB `
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), " at "+srv.URL+"; create it or set create-database = true") {
		t.Fatalf("missing database: %v", err)
	}
	t.Logf("missing database: %v", err)

	res, err := influx.Check(ctx, cfg, influx.Target{Bucket: "spark"}, true)
	if err != nil || res.Major != 1 || len(res.Created) != 1 {
		t.Fatalf("create: %v, %+v", err, res)
	}
	t.Logf("created: %s", res)
	if res, err := influx.Check(ctx, cfg, influx.Target{Bucket: "spark/"}, false); err != nil || len(res.Created) != 0 {
		t.Fatalf("existing database: %v, %+v", err, res)
	}

	// A named retention policy: a new database gets it as its only one, as
	// from InfluxDB's graphite listener; an existing database gets it added
	// as its default.
	if _, err := influx.Check(ctx, cfg, influx.Target{Bucket: "g/week"}, true); err != nil {
		t.Fatal(err)
	}
	if got := rps(t, srv, "g"); got != "week:true" {
		t.Errorf("retention policies of a created database: %s", got)
	}
	_, err = influx.Check(ctx, cfg, influx.Target{Bucket: "spark/month"}, false)
	if err == nil || !strings.Contains(err.Error(), `retention policy "month" does not exist on database "spark"`) {
		t.Fatalf("missing retention policy: %v", err)
	}
	if _, err := influx.Check(ctx, cfg, influx.Target{Bucket: "spark/month"}, true); err != nil {
		t.Fatal(err)
	}
	if got := rps(t, srv, "spark"); got != "autogen:false month:true" {
		t.Errorf("retention policies after adding one: %s", got)
	}
	// The writer can write to what Check created.
	write(t, cfg, "spark/month", "m value=1 1\n")
	if n := count(t, srv, "spark", `SELECT count(value) FROM "spark"."month"."m"`); n != 1 {
		t.Errorf("count %d", n)
	}
}

func rps(t *testing.T, srv *influxtest.Server, db string) string {
	var out []string
	for _, s := range srv.Query(t, db, "SHOW RETENTION POLICIES ON "+db) {
		for _, v := range s.Values {
			out = append(out, fmt.Sprintf("%v:%v", v[0], v[4]))
		}
	}
	return strings.Join(out, " ")
}

func TestWriteRealInfluxDB(t *testing.T) {
	srv := influxtest.Start(t)
	srv.Exec(t, `CREATE DATABASE "spark"`)
	const n = 10_000
	const t0 = 1_795_300_000_000_000_000
	var batches []int
	cfg := influx.Config{URL: srv.URL, Gzip: influx.GzipOn, BatchSize: 1500,
		OnBatch: func(points int, took time.Duration, err error) {
			if err != nil {
				t.Errorf("write error: %v", err)
			}
			batches = append(batches, points) // MaxInFlight 1: no concurrent calls
		},
		MaxInFlight: 1,
	}
	w, err := influx.NewWriter(cfg, influx.Target{Bucket: "spark"})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "cpuTime.count,applicationid=app-1,process=%d value=%d %d\n", i%5, i, t0+int64(i)*1_000_000)
		if (i+1)%100 == 0 {
			w.Append([]byte(b.String()), true)
			b.Reset()
		}
	}
	if err := w.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if len(batches) != 7 {
		t.Errorf("%d write requests (%v), want 7 of at most 1500 points", len(batches), batches)
	}
	if st := w.Stats(); st.PointsWritten != n || st.BatchesWritten != 7 || len(st.PointsDropped) != 0 {
		t.Errorf("stats %+v", st)
	}
	if got := count(t, srv, "spark", `SELECT count(value) FROM "cpuTime.count"`); got != n {
		t.Errorf("InfluxDB holds %d points, want %d", got, n)
	}
	res := srv.Query(t, "spark", `SELECT value FROM "cpuTime.count" WHERE process = '3' AND time = 1795300008888000000 GROUP BY *`)
	if len(res) != 1 || len(res[0].Values) != 1 || fmt.Sprint(res[0].Values[0]) != "[1795300008888000000 8888]" || res[0].Tags["applicationid"] != "app-1" {
		t.Errorf("sample point: %+v", res)
	}
}

func TestRejectedLinesRealInfluxDB(t *testing.T) {
	srv := influxtest.Start(t)
	srv.Exec(t, `CREATE DATABASE "db"`)
	core, logs := observer.New(zapcore.InfoLevel)
	cfg := influx.Config{URL: srv.URL, Gzip: influx.GzipOn, Logger: zap.New(core)}

	write(t, cfg, "db", "m value=1i 1\n") // value is now an integer field
	st := write(t, cfg, "db", "good value=1 1\nm value=2 2\ngood value=3 3\nm value=4i 4\n")
	if st.PointsDropped["field type conflict"] != 1 || st.PointsWritten != 3 || st.BatchesWritten != 1 {
		t.Errorf("field type conflict: stats %+v", st)
	}
	// 1.x stores the lines it can parse and reports the others.
	st = write(t, cfg, "db", "good value=5 5\nnot line protocol\ngood value=6 6\nalso bad\n")
	if st.PointsDropped["unable to parse"] != 2 || st.PointsWritten != 2 {
		t.Errorf("unparsable lines: stats %+v", st)
	}
	// Conflicting types for a new field within one request refuse it as a
	// whole: halving finds the line.
	st = write(t, cfg, "db", "n value=1 1\nn value=2 2\nn value=3i 3\nn value=4 4\n")
	if st.PointsDropped["field type conflict"] != 1 || st.PointsWritten != 3 {
		t.Errorf("conflict within a request: stats %+v", st)
	}
	if got := count(t, srv, "db", `SELECT count(value) FROM good`); got != 4 {
		t.Errorf("good holds %d points, want 4", got)
	}
	if got := count(t, srv, "db", `SELECT count(value) FROM m`); got != 2 {
		t.Errorf("m holds %d points, want 2 (1 and 4)", got)
	}
	if got := count(t, srv, "db", `SELECT count(value) FROM n`); got != 3 {
		t.Errorf("n holds %d points, want 3", got)
	}
	for _, e := range logs.All() {
		t.Logf("log: %s %v", e.Message, e.ContextMap())
	}
}

func TestAuthRealInfluxDB(t *testing.T) {
	srv := influxtest.Start(t, influxtest.WithEnv("INFLUXDB_HTTP_AUTH_ENABLED=true"))
	srv.Exec(t, `CREATE USER admin WITH PASSWORD 'pa55' WITH ALL PRIVILEGES`) // the first admin needs no credentials
	ctx := ctxT(t)

	res, err := influx.Check(ctx, influx.Config{URL: srv.URL, Token: "admin:pa55"}, influx.Target{Bucket: "secure"}, true)
	if err != nil || len(res.Created) != 1 {
		t.Fatalf("Check with credentials: %v %+v", err, res)
	}
	_, err = influx.Check(ctx, influx.Config{URL: srv.URL, Token: "admin:wrong"}, influx.Target{Bucket: "secure"}, false)
	if err == nil || !strings.Contains(err.Error(), "401 authorization failed") || strings.Contains(err.Error(), "wrong") {
		t.Errorf("Check with a wrong password: %v", err)
	}
	t.Logf("wrong password: %v", err)

	st := write(t, influx.Config{URL: srv.URL, Token: "admin:pa55"}, "secure", "m value=1 1\n")
	if st.PointsWritten != 1 {
		t.Errorf("stats %+v", st)
	}

	// A wrong password is retried (the operator may fix it) until Close
	// gives up, and logged without the token.
	core, logs := observer.New(zapcore.InfoLevel)
	failed := make(chan struct{}, 1)
	w, err := influx.NewWriter(influx.Config{URL: srv.URL, Token: "admin:wrong", Logger: zap.New(core),
		OnBatch: func(int, time.Duration, error) {
			select {
			case failed <- struct{}{}:
			default:
			}
		}}, influx.Target{Bucket: "secure"})
	if err != nil {
		t.Fatal(err)
	}
	w.Append([]byte("m value=2 2\n"), true)
	w.Append([]byte("m value=3 3\n"), true)
	<-failed
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = w.Close(cctx)
	if err == nil || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "2 points") {
		t.Errorf("Close: %v", err)
	}
	if w.Stats().WriteErrors["4xx"] == 0 {
		t.Errorf("stats %+v", w.Stats())
	}
	entries := logs.FilterMessageSnippet("refused the credentials").All()
	if len(entries) == 0 {
		t.Fatal("a 401 was not logged")
	}
	for _, e := range logs.All() {
		if s := fmt.Sprint(e.Message, e.ContextMap()); strings.Contains(s, "wrong") {
			t.Errorf("log shows the password: %s", s)
		}
	}
	t.Logf("401 logged as: %s %v", entries[0].Message, entries[0].ContextMap())
}

// InfluxDB 1.8 answers a batch that would add a value to a tag at
// max-values-per-tag with "partial write … dropped=K" (K: the points that
// would add one), and stores none of it. The writer halves the batch as
// for max-series-per-database: the others, new series of other
// measurements included, are stored, only the refused points are
// counted, and the refused series' later points are refused without a
// request. Nothing is read from InfluxDB to decide.
func TestMaxValuesPerTagLosesTheBatch(t *testing.T) {
	srv := influxtest.Start(t, influxtest.WithEnv("INFLUXDB_DATA_MAX_VALUES_PER_TAG=10"))
	srv.Exec(t, `CREATE DATABASE "db"`)
	var full strings.Builder
	for i := range 10 {
		fmt.Fprintf(&full, "m,app=a%d value=1 1\n", i)
	}
	cfg := influx.Config{URL: srv.URL}
	write(t, cfg, "db", full.String())
	batch := "m,app=new1 value=1 2\nother,app=x value=5 2\nm,app=a5 value=2 2\nm,app=new2 value=1 2\n"

	srv.Exec(t, "CREATE DATABASE raw")
	write(t, cfg, "raw", full.String())
	losesBatch(t, srv, batch, "partial write: max-values-per-tag limit exceeded", 2, `SELECT * FROM other`, `SELECT * FROM m WHERE time > 1`)

	cfg.MaxInFlight = 1
	w, err := influx.NewWriter(cfg, influx.Target{Bucket: "db"})
	if err != nil {
		t.Fatal(err)
	}
	w.Append([]byte(batch), true)
	if err := w.Idle(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	// 4 lines, K=2: refused. Halves: new1 other (K=1), then new1 refused
	// alone and other stored; a5 new2 (K=1), then a5 stored and new2
	// refused: 5 refusals.
	st := w.Stats()
	if st.PointsDropped["max values per tag"] != 2 || st.PointsWritten != 2 || st.WriteErrors["4xx"] != 5 {
		t.Errorf("stats %+v: want the 2 new values refused, the 2 others written, after 5 refusals", st)
	}
	if got := count(t, srv, "db", `SELECT count(value) FROM other`); got != 1 {
		t.Errorf("other holds %d points, want 1", got)
	}
	if got := count(t, srv, "db", `SELECT count(value) FROM m WHERE time > 1`); got != 1 {
		t.Errorf("m holds %d new points, want a5's", got)
	}

	// The same series again: the new values are refused without a request.
	sameSeriesAgain(t, w, batch, "max values per tag", st)
	if got := count(t, srv, "db", `SELECT count(value) FROM m WHERE time > 2`); got != 1 {
		t.Errorf("m holds %d points at 3, want a5's", got)
	}
}

// losesBatch posts batch to database raw as InfluxDB's own clients do,
// and fails the test unless InfluxDB refuses it with a partial write that
// names limit and the dropped points, and stores none of it (the queries
// find nothing): while it does, the writer needs its workaround.
func losesBatch(t *testing.T, srv *influxtest.Server, batch, limit string, dropped int, queries ...string) {
	t.Helper()
	resp, err := http.Post(srv.URL+"/write?db=raw", "text/plain", strings.NewReader(batch))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	stored := 0
	for _, q := range queries {
		stored += len(srv.Query(t, "raw", q))
	}
	if !strings.Contains(string(body), limit) || !strings.Contains(string(body), fmt.Sprintf("dropped=%d", dropped)) || stored != 0 {
		t.Fatalf("InfluxDB no longer loses the batch (%s): the writer's workaround can go", body)
	}
}

// sameSeriesAgain appends batch again, its points a second later, to w,
// which before had the stats first: the points it refused for reason are
// refused again and the others written, without a request refused.
func sameSeriesAgain(t *testing.T, w *influx.Writer, batch, reason string, first influx.Stats) {
	t.Helper()
	w.Append([]byte(strings.ReplaceAll(batch, " 2\n", " 3\n")), true)
	if err := w.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	if st.PointsDropped[reason] != 2*first.PointsDropped[reason] || st.PointsWritten != 2*first.PointsWritten || st.WriteErrors["4xx"] != first.WriteErrors["4xx"] {
		t.Errorf("stats %+v after %+v: want as many more refused and written, no request refused", st, first)
	}
}

// At max-series-per-database, InfluxDB 1.8 answers "partial write …
// dropped=K" (K: the points of new series) and stores none of the batch.
// The writer halves it until the points of existing series are stored
// (and new series while they fit), refuses a half whose points are all
// new without halving it further, and refuses the same series' later
// points without a request.
func TestMaxSeriesPerDatabase(t *testing.T) {
	srv := influxtest.Start(t, influxtest.WithEnv("INFLUXDB_DATA_MAX_SERIES_PER_DATABASE=10"))
	srv.Exec(t, `CREATE DATABASE "db"`)
	srv.Exec(t, `CREATE DATABASE "raw"`)
	var full strings.Builder
	for i := range 8 {
		fmt.Fprintf(&full, "m,app=a%d value=1 1\n", i)
	}
	cfg := influx.Config{URL: srv.URL, MaxInFlight: 1}
	write(t, cfg, "db", full.String())
	write(t, cfg, "raw", full.String())
	// 2 points of known series, 5 of new ones: 8 + 5 > 10, so all 5 go.
	batch := "m,app=a1 value=2 2\nm,app=n1 value=1 2\nm,app=n2 value=1 2\nm,app=a2 value=2 2\nm,app=n3 value=1 2\nm,app=n4 value=1 2\nm,app=n5 value=1 2\n"

	losesBatch(t, srv, batch, "max-series-per-database limit exceeded", 5, `SELECT * FROM m WHERE time > 1`)

	w, err := influx.NewWriter(cfg, influx.Target{Bucket: "db"})
	if err != nil {
		t.Fatal(err)
	}
	w.Append([]byte(batch), true)
	w.Flush()
	if err := w.Idle(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	// 7 lines, K=5: refused. Halves: a1 n1 n2 fits (8 + 2 = 10 series)
	// and is stored; a2 n3 n4 n5 (K=3) is refused, then a2 n3 (K=1), and
	// a2 is stored, n3 refused alone, n4 n5 refused whole (K=2): 5
	// refusals, 4 points stored, 3 refused.
	st := w.Stats()
	if st.PointsDropped["max series per database"] != 3 || st.PointsWritten != 4 || st.WriteErrors["4xx"] != 5 {
		t.Errorf("stats %+v: want 3 points of new series refused, 4 written, after 5 refusals", st)
	}
	if got := count(t, srv, "db", `SELECT count(value) FROM m WHERE time > 1`); got != 4 {
		t.Errorf("m holds %d new points, want 4", got)
	}

	// The same series again: the new ones are refused without a request.
	sameSeriesAgain(t, w, batch, "max series per database", st)
	if got := count(t, srv, "db", `SELECT count(value) FROM m WHERE time > 2`); got != 4 {
		t.Errorf("m holds %d points at 3, want 4", got)
	}
}
