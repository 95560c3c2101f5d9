package influx_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sparkpulse/sparkpulse/influx"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
)

// Tests against a real InfluxDB 2.x (influxd 2.7.12, built by
// scripts/influxd2.sh), mirroring the 1.8 ones of integration_test.go.

func config2(srv *influxtest.Server2) influx.Config {
	return influx.Config{URL: srv.URL, Org: srv.Org, Token: srv.Token, Gzip: influx.GzipOn}
}

// values returns the rows of an InfluxQL result, each as its values
// joined with spaces: "time value" for a query of one field.
func values(t *testing.T, srv influxtest.Influxd, db, q string) string {
	t.Helper()
	var out []string
	for _, s := range srv.Query(t, db, q) {
		for _, row := range s.Values {
			cells := make([]string, len(row))
			for i, v := range row {
				cells[i] = fmt.Sprint(v)
			}
			out = append(out, strings.Join(cells, " "))
		}
	}
	return strings.Join(out, ", ")
}

// replay2 is an InfluxDB 2.x entry of testdata/write-answers.json with the
// request that gets its answer from a server set up as
// TestAnswersRealInfluxDB2 does. (The 1.8 entries' "replay" is replayed by
// TestAnswersRealInfluxDB against 1.8.)
type replay2 struct {
	Server string `json:"server"`
	Case   string `json:"case"`
	Status int    `json:"status"`
	Body   string `json:"body"`
	Lines  int    `json:"lines"`
	Replay *struct {
		Query string `json:"query"` // of /api/v2/write
		Token string `json:"token"` // "operator", "read-only" or "bad"
		Body  string `json:"body"`  // {now}: the time now, in ns
		// Vary matches what differs from run to run (a time, an ID): it
		// is left out of the comparison.
		Vary string `json:"vary"`
	} `json:"replay_v2"`
}

// TestAnswersRealInfluxDB2 replays the InfluxDB 2.x entries against a real
// influxd 2.7.12: the quoted answers are the server's own. Where the
// request is refused whole, nothing of it is stored; where in part, the
// rest is.
func TestAnswersRealInfluxDB2(t *testing.T) {
	srv := influxtest.Start2(t)
	srv.CreateBucket(t, "short", time.Hour)
	tokens := map[string]string{"operator": srv.Token, "read-only": srv.CreateToken(t, "read"), "bad": "not-a-token"}
	post := func(query, token, body string) (int, string) {
		t.Helper()
		return srv.Post(t, "/api/v2/write?"+query, token, body)
	}
	if status, body := post("org=spark&bucket=spark&precision=ns", srv.Token, "m value=1 1\n"); status != http.StatusNoContent {
		t.Fatalf("setup: %d %s", status, body)
	}

	b, err := os.ReadFile("testdata/write-answers.json")
	if err != nil {
		t.Fatal(err)
	}
	var answers []replay2
	if err := json.Unmarshal(b, &answers); err != nil {
		t.Fatal(err)
	}
	replayed := 0
	for _, a := range answers {
		if a.Replay == nil {
			continue
		}
		if !strings.HasPrefix(a.Server, "InfluxDB 2.x") {
			t.Errorf("%s: replay_v2 on a %s entry", a.Case, a.Server)
		}
		replayed++
		body := strings.ReplaceAll(a.Replay.Body, "{now}", strconv.FormatInt(time.Now().UnixNano(), 10))
		if n := strings.Count(body, "\n"); n != a.Lines {
			t.Errorf("%s: replay has %d lines, the entry says %d", a.Case, n, a.Lines)
		}
		token, ok := tokens[a.Replay.Token]
		if !ok {
			t.Fatalf("%s: no token %q", a.Case, a.Replay.Token)
		}
		status, got := post(a.Replay.Query, token, body)
		want := a.Body
		if a.Replay.Vary != "" {
			vary := regexp.MustCompile(a.Replay.Vary)
			got, want = vary.ReplaceAllString(got, "…"), vary.ReplaceAllString(want, "…")
		}
		if status != a.Status || got != want {
			t.Errorf("%s: InfluxDB %s answered\n%d %s\nthe entry quotes\n%d %s", a.Case, srv.Version, status, got, a.Status, a.Body)
		}
	}
	if replayed < 7 {
		t.Errorf("%d answers replayed", replayed)
	}
	// What the replays left: the seed (1), the good line beside the type
	// conflict (3), not the good line beside the unparsable one (4): 2.x
	// refuses that batch whole. In "short", the two points of now.
	if got := values(t, srv, "spark", `SELECT value FROM m`); got != "1 1, 3 3" {
		t.Errorf("spark holds %q, want the seed and the good line of the partial write", got)
	}
	if got := count(t, srv, "short", `SELECT count(value) FROM m`); got != 2 {
		t.Errorf("short holds %d points, want the 2 within its retention", got)
	}
}

// The writer against 2.x: a type conflict and points beyond the retention
// period are partial writes (the rest is stored, the refused points
// counted); a batch with lines 2.x cannot parse is refused whole, and
// halving finds them.
func TestRejectedLinesRealInfluxDB2(t *testing.T) {
	srv := influxtest.Start2(t)
	srv.CreateBucket(t, "short", time.Hour)
	core, logs := observer.New(zapcore.InfoLevel)
	cfg := config2(srv)
	cfg.Logger = zap.New(core)

	write(t, cfg, "spark", "m value=1i 1\n") // value is now an integer field
	st := write(t, cfg, "spark", "good value=1 1\nm value=2 2\ngood value=3 3\nm value=4i 4\n")
	if st.PointsDropped["field type conflict"] != 1 || st.PointsWritten != 3 || st.BatchesWritten != 1 {
		t.Errorf("field type conflict: stats %+v", st)
	}
	st = write(t, cfg, "spark", "good value=5 5\nnot line protocol\ngood value=6 6\nalso bad\n")
	if st.PointsDropped["unable to parse"] != 2 || st.PointsWritten != 2 {
		t.Errorf("unparsable lines: stats %+v", st)
	}
	now := time.Now().UnixNano()
	st = write(t, cfg, "short", fmt.Sprintf("r value=1 1\nr value=2 %d\nr value=3 2\n", now))
	if st.PointsDropped["beyond retention policy"] != 2 || st.PointsWritten != 1 || st.BatchesWritten != 1 {
		t.Errorf("beyond retention: stats %+v", st)
	}
	if got := values(t, srv, "spark", `SELECT value FROM good`); got != "1 1, 3 3, 5 5, 6 6" {
		t.Errorf("good holds %q", got)
	}
	if got := values(t, srv, "spark", `SELECT value FROM m`); got != "1 1, 4 4" {
		t.Errorf("m holds %q, want 1 and 4 (the integers)", got)
	}
	if got := values(t, srv, "short", `SELECT value FROM r`); got != fmt.Sprintf("%d 2", now) {
		t.Errorf("r holds %q, want the point of now", got)
	}
	for _, e := range logs.All() {
		t.Logf("log: %s %v", e.Message, e.ContextMap())
	}
}

// A missing bucket and a bad token refuse the request as a whole (404,
// 401): the writer keeps the points and retries, logging what to fix; once
// the bucket exists, every point arrives, once.
func TestMissingBucketRetriedRealInfluxDB2(t *testing.T) {
	srv := influxtest.Start2(t)
	core, logs := observer.New(zapcore.InfoLevel)
	cfg := config2(srv)
	cfg.Logger = zap.New(core)
	cfg.MaxRetryBackoff = 50 * time.Millisecond
	refused := make(chan error, 1)
	cfg.OnBatch = func(_ int, _ time.Duration, err error) {
		if err != nil {
			select {
			case refused <- err:
			default:
			}
		}
	}
	w, err := influx.NewWriter(cfg, influx.Target{Bucket: "late"})
	if err != nil {
		t.Fatal(err)
	}
	w.Append([]byte("m value=1 1\nm value=2 2\n"), true)
	w.Flush()
	select {
	case err := <-refused:
		t.Logf("refused: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no write request was answered")
	}
	srv.CreateBucket(t, "late", 0)
	if err := w.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	if st.PointsWritten != 2 || len(st.PointsDropped) != 0 || st.WriteErrors["4xx"] == 0 {
		t.Errorf("stats %+v", st)
	}
	if got := values(t, srv, "late", `SELECT value FROM m`); got != "1 1, 2 2" {
		t.Errorf("late holds %q", got)
	}
	if len(logs.FilterMessageSnippet(`InfluxDB has no such bucket or database (bucket "late" not found); create it`).All()) == 0 {
		t.Errorf("the 404 was not logged as a missing bucket: %v", logs.All())
	}

	// A bad token: the same, and the token is not logged.
	core, logs = observer.New(zapcore.InfoLevel)
	failed := make(chan struct{}, 1)
	bad := influx.Config{URL: srv.URL, Org: srv.Org, Token: "bad-token-xyz", Logger: zap.New(core),
		OnBatch: func(int, time.Duration, error) {
			select {
			case failed <- struct{}{}:
			default:
			}
		}}
	w, err = influx.NewWriter(bad, influx.Target{Bucket: "spark"})
	if err != nil {
		t.Fatal(err)
	}
	w.Append([]byte("m value=3 3\n"), true)
	w.Flush()
	select {
	case <-failed:
	case <-time.After(30 * time.Second):
		t.Fatal("no write request was answered")
	}
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Close(cctx); err == nil || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "1 points") {
		t.Errorf("Close: %v", err)
	}
	if w.Stats().WriteErrors["4xx"] == 0 || w.Stats().PointsWritten != 0 {
		t.Errorf("stats %+v", w.Stats())
	}
	if len(logs.FilterMessageSnippet("refused the credentials").All()) == 0 {
		t.Errorf("a 401 was not logged as refused credentials: %v", logs.All())
	}
	for _, e := range logs.All() {
		if s := fmt.Sprint(e.Message, e.ContextMap()); strings.Contains(s, "bad-token-xyz") {
			t.Errorf("log shows the token: %s", s)
		}
	}
	if got := srv.Query(t, "spark", `SELECT value FROM m`); len(got) != 0 {
		t.Errorf("spark holds %+v after a refused token", got)
	}
}

// Check (sparkpulse's start-up check) against 2.x: the bucket is found,
// with no DBRP warning (2.4+ maps every bucket to a database of its name);
// a missing bucket is named with its organization; a bad token is refused
// without being shown.
func TestCheckRealInfluxDB2(t *testing.T) {
	srv := influxtest.Start2(t)
	ctx := ctxT(t)
	cfg := config2(srv)

	res, err := influx.Check(ctx, cfg, influx.Target{Bucket: "spark"}, true)
	if err != nil || res.Major != 2 || res.Version != influxtest.Influxd2Version || res.Build != "OSS" || len(res.Created) != 0 || len(res.Warnings) != 0 {
		t.Fatalf("existing bucket: %v, %+v", err, res)
	}
	if got := res.String(); got != "InfluxDB "+influxtest.Influxd2Version {
		t.Errorf("summary %q", got)
	}

	// 2.7.12 answers the lookup of a bucket or an organization that does
	// not exist (GET /api/v2/buckets?name=…&org=…) with 404: Check says
	// which, and how to make the bucket.
	_, err = influx.Check(ctx, cfg, influx.Target{Bucket: "nobucket"}, true)
	if !errors.Is(err, influx.ErrMissing) || !strings.Contains(err.Error(), `bucket "nobucket" does not exist in organization "spark" on InfluxDB `+
		influxtest.Influxd2Version+` at `+srv.URL+`; create it (influx bucket create --name "nobucket" --org "spark")`) {
		t.Errorf("missing bucket: %v", err)
	}
	t.Logf("missing bucket: %v (ErrMissing: %v)", err, errors.Is(err, influx.ErrMissing))
	_, err = influx.Check(ctx, cfg, influx.Target{Bucket: "spark", Org: "noorg"}, false)
	if !errors.Is(err, influx.ErrMissing) || !strings.Contains(err.Error(), `organization "noorg" does not exist on InfluxDB `+influxtest.Influxd2Version) {
		t.Errorf("missing organization: %v", err)
	}
	t.Logf("missing organization: %v", err)

	bad := cfg
	bad.Token = "bad-token-xyz"
	_, err = influx.Check(ctx, bad, influx.Target{Bucket: "spark"}, false)
	if err == nil || !strings.Contains(err.Error(), "unauthorized access") || errors.Is(err, influx.ErrUnreachable) ||
		errors.Is(err, influx.ErrMissing) || strings.Contains(err.Error(), "bad-token-xyz") {
		t.Errorf("bad token: %v", err)
	}
	t.Logf("bad token: %v", err)

	// A token that may read but not write passes the check (it only
	// reads); the writer's first request is refused with 403.
	ro := cfg
	ro.Token = srv.CreateToken(t, "read")
	if _, err := influx.Check(ctx, ro, influx.Target{Bucket: "spark"}, false); err != nil {
		t.Errorf("read-only token: %v", err)
	}

	// The writer writes to what Check found, and InfluxQL reads it through
	// the automatic mapping.
	write(t, cfg, "spark", "m value=1 1\n")
	if n := count(t, srv, "spark", `SELECT count(value) FROM "spark"."autogen"."m"`); n != 1 {
		t.Errorf("count %d", n)
	}
}

// A DBRP mapping made by API (as `influx v1 dbrp create` does) maps an
// InfluxQL database and retention policy of another name to a bucket: the
// 1.x write API and /query both reach the bucket through it.
func TestManualDBRPRealInfluxDB2(t *testing.T) {
	srv := influxtest.Start2(t)
	id := srv.CreateBucket(t, "archive", 0)
	mapping := srv.CreateDBRP(t, "legacy", "week", id, true)

	var list struct {
		Content []struct {
			ID, Database, RetentionPolicy, BucketID string
			Default, Virtual                        bool
		}
	}
	srv.API(t, http.MethodGet, "/api/v2/dbrps?orgID="+srv.OrgID+"&db=legacy", nil, &list)
	if len(list.Content) != 1 || list.Content[0].ID != mapping || list.Content[0].BucketID != id || !list.Content[0].Default || list.Content[0].Virtual {
		t.Errorf("GET /api/v2/dbrps: %+v", list)
	}

	write(t, config2(srv), "archive", "m,host=a value=1.5 1000\n")
	// The 1.x write API finds the bucket through the mapping.
	srv.Write(t, "/write?db=legacy&rp=week&precision=ns", "m,host=b value=2.5 2000\n")

	for _, q := range []string{`SELECT value FROM m`, `SELECT value FROM "legacy"."week"."m"`} {
		if got := values(t, srv, "legacy", q); got != "1000 1.5, 2000 2.5" {
			t.Errorf("%s on legacy: %q", q, got)
		}
	}
	// The bucket's own name maps to it too, and it holds both points.
	if got := values(t, srv, "archive", `SELECT value FROM m WHERE host = 'b'`); got != "2000 2.5" {
		t.Errorf("archive holds %q", got)
	}
	rps := srv.Query(t, "legacy", `SHOW RETENTION POLICIES ON legacy`)
	if len(rps) != 1 || len(rps[0].Values) != 1 || rps[0].Values[0][0] != "week" {
		t.Errorf("SHOW RETENTION POLICIES ON legacy: %+v", rps)
	}
	if _, err := srv.TryQuery("nodb", `SELECT value FROM m`); err == nil || !strings.Contains(err.Error(), "nodb") {
		t.Errorf("an unmapped database: %v", err)
	}
}
