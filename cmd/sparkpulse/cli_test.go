package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/config/configtest"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
	"github.com/sparkpulse/sparkpulse/report"
)

// runMainCLI runs the program as main does, printing included.
func runMainCLI(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = runMain(context.Background(), args, envOf(env), strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// singleDashLong is a long flag written with one dash.
var singleDashLong = regexp.MustCompile(`(^|[\s\[(])-[a-z][a-z-]+`)

// Help exits 0, on stdout, and writes flags as --flag.
func TestCLIHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"run", "check", "parse", "simulate", "report", "watch", "health", "completion", "version"}},
		{[]string{"-h"}, []string{"run", "health"}},
		{[]string{"help"}, []string{"run", "health"}},
		{[]string{"help", "run"}, []string{"sparkpulse run [flags]", "--config", "--influxdb-url", "--create-database", "--admin-bind"}},
		{[]string{"run", "--help"}, []string{"sparkpulse run [flags]", "--config", "--state-dir"}},
		{[]string{"run", "-h"}, []string{"sparkpulse run [flags]"}},
		{[]string{"check", "--help"}, []string{"--influxdb-url", "--create-database"}},
		{[]string{"report", "--help"}, []string{"--fleet", "--since", "--influxdb-url", "--influxdb-org", "--database", "--bucket", "--url"}},
		{[]string{"watch", "--help"}, []string{"--admin-url", "--interval", "--since", "--note", "--influxdb-url", "--database"}},
		{[]string{"health", "--help"}, []string{"--admin-url", "/healthz"}},
		{[]string{"parse", "--help"}, []string{"--block", "--new-series"}},
		{[]string{"simulate", "--help"}, []string{"--period duration", "--app-lifetime"}},
		{[]string{"completion", "--help"}, []string{"bash", "zsh", "fish"}},
	} {
		code, out, errOut := runMainCLI(t, nil, tc.args...)
		if code != 0 || errOut != "" {
			t.Errorf("sparkpulse %q: exit %d, stderr %q; want 0 and nothing", tc.args, code, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("sparkpulse %q lacks %q:\n%s", tc.args, w, out)
			}
		}
		if m := singleDashLong.FindString(out); m != "" {
			t.Errorf("sparkpulse %q writes a flag as %q:\n%s", tc.args, m, out)
		}
	}
}

// Each error is printed once, with the exit status of its kind.
func TestCLIErrorsPrintedOnce(t *testing.T) {
	bad := writeFile(t, "bad.toml", "[log]\nlevel = \"loud\"\n[[graphite]]\n")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"check", "--nope"}, 2, "unknown flag: --nope"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"parse", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"report"}, 2, "report takes one application id"},
		{[]string{"report", "--fleet", "app-1"}, 2, "report --fleet takes no application id"},
		{[]string{"report", "--fleet", "--since", "1y"}, 2, `invalid duration "1y"`},
		{[]string{"report", "--stages", "0", "app-1"}, 2, "--stages 0: must be at least 1"},
		{[]string{"report", "--fleet", "--stages", "9"}, 2, "--stages is for one application, not --fleet"},
		{[]string{"simulate", "--apps", "0"}, 2, "--apps must be at least 1"},
		{[]string{}, 2, "no command given"},
		{[]string{"check", "--config", bad}, 1, `level "loud"`},
		{[]string{"check", "--config", "/nonexistent.toml"}, 1, "cannot read config"},
	} {
		code, _, errOut := runMainCLI(t, nil, tc.args...)
		if code != tc.code {
			t.Errorf("sparkpulse %q: exit %d, want %d; stderr:\n%s", tc.args, code, tc.code, errOut)
		}
		if n := strings.Count(errOut, tc.want); n != 1 {
			t.Errorf("sparkpulse %q: %q printed %d times:\n%s", tc.args, tc.want, n, errOut)
		}
	}
	// run itself prints nothing: main does, once.
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"check", "--nope"}, noEnv, nil, &out, &errOut)
	if err == nil || strings.Contains(errOut.String(), "--nope") {
		t.Errorf("run: %v; stderr %q", err, errOut.String())
	}
}

func TestCLIVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		code, out, _ := runMainCLI(t, nil, args...)
		if code != 0 || out != "sparkpulse "+versionString()+"\n" {
			t.Errorf("sparkpulse %q: exit %d, %q", args, code, out)
		}
	}
}

// The standard library's single-dash long flags still work.
func TestCLISingleDashFlags(t *testing.T) {
	conf := writeFile(t, "c.toml", "[[graphite]]\nmax-line-length = 20\n")
	out, _, err := runCLI(t, "a 1 1717171717\n", "parse", "-config", conf, "-block=1")
	if err != nil || out != "a value=1 1717171717000000000\n" {
		t.Errorf("parse -config: %q, %v", out, err)
	}
}

func TestCLICompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		code, out, errOut := runMainCLI(t, nil, "completion", shell)
		if code != 0 || len(out) < 500 || !strings.Contains(out, "sparkpulse") {
			t.Errorf("completion %s: exit %d, %d bytes, stderr %q", shell, code, len(out), errOut)
		}
	}
	// Flag values complete too.
	_, out, _ := runMainCLI(t, nil, "__complete", "run", "--log-level", "")
	if !strings.Contains(out, "debug") || !strings.Contains(out, "error") {
		t.Errorf("completion of --log-level:\n%s", out)
	}
}

// fakeInfluxQuery is an InfluxDB 1.x /query that records what it is asked
// and answers with answer.
type fakeInfluxQuery struct {
	mu      sync.Mutex
	forms   []url.Values
	auth    []string
	answer  string
	status  int
	created *httptest.Server
}

func startFakeInflux(t *testing.T, status int, answer string) *fakeInfluxQuery {
	f := &fakeInfluxQuery{answer: answer, status: status}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		f.mu.Lock()
		f.forms = append(f.forms, r.Form)
		f.auth = append(f.auth, r.Header.Get("Authorization"))
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(f.status)
		io.WriteString(w, f.answer)
	}))
	t.Cleanup(srv.Close)
	f.created = srv
	return f
}

// report --fleet takes run's InfluxDB flags and environment, and --since
// in days and weeks.
func TestReportFleetFlags(t *testing.T) {
	f := startFakeInflux(t, http.StatusOK, `{"results":[{"statement_id":0}]}`)
	var out bytes.Buffer
	env := envOf(map[string]string{config.EnvToken: "s3cret", config.EnvOrg: "ops"})
	err := run(context.Background(), []string{"report", "--fleet", "--influxdb-url", f.created.URL, "--database", "prod", "--since", "2w3d", "--json"}, env, nil, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	// The ended applications a day at a time, 17 days; then the running
	// ones' estimates: in the range, when each was last written, and in
	// the hour before it; then the applications seen only in their
	// metrics.
	if len(f.forms) != 17+4 {
		t.Fatalf("%d queries", len(f.forms))
	}
	bounds := regexp.MustCompile(`time >= (\d+)ms AND time < (\d+)ms`)
	var lo, hi []int64
	for _, form := range f.forms[:17] {
		m := bounds.FindStringSubmatch(form.Get("q"))
		if form.Get("db") != "prod" || m == nil {
			t.Fatalf("db %q, query %q", form.Get("db"), form.Get("q"))
		}
		l, _ := strconv.ParseInt(m[1], 10, 64)
		h, _ := strconv.ParseInt(m[2], 10, 64)
		lo, hi = append(lo, l), append(hi, h)
	}
	for i := range lo {
		if hi[i]-lo[i] != 24*3600*1000 || i > 0 && lo[i] != hi[i-1] {
			t.Errorf("window %d: %d to %d, after one to %d", i, lo[i], hi[i], hi[max(i-1, 0)])
		}
	}
	if span := time.Duration(hi[16]-lo[0]) * time.Millisecond; span != 17*24*time.Hour {
		t.Errorf("the windows span %s, want 17 days", span)
	}
	if !strings.Contains(f.auth[0], "s3cret") {
		t.Errorf("Authorization %q: the token from %s is not sent", f.auth[0], config.EnvToken)
	}
	var r report.Fleet
	if err := json.Unmarshal(out.Bytes(), &r); err != nil || r.Database != "prod" || r.Applications == nil {
		t.Errorf("%v: %s", err, out.String())
	}

	// The same from the environment, and the words of the text.
	out.Reset()
	env = envOf(map[string]string{config.EnvURL: f.created.URL, "SPARKPULSE_GRAPHITE_1_DATABASE": "fromenv"})
	if err := run(context.Background(), []string{"report", "--fleet", "--since", "1w"}, env, nil, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if db := f.forms[17+4].Get("db"); db != "fromenv" {
		t.Errorf("db %q, want the one from SPARKPULSE_GRAPHITE_1_DATABASE", db)
	}
	if !strings.Contains(out.String(), "0 applications ended in the last 7d (database fromenv)") {
		t.Errorf("text:\n%s", out.String())
	}

	// A database that is not there: said shortly, with the remedy, not the
	// whole statement.
	missing := startFakeInflux(t, http.StatusOK, `{"results":[{"statement_id":0,"error":"database not found: spark"}]}`)
	err = run(context.Background(), []string{"report", "--fleet", "--influxdb-url", missing.created.URL}, noEnv, nil, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `database "spark"`) || !strings.Contains(err.Error(), "--database") || strings.Contains(err.Error(), "SELECT") {
		t.Errorf("missing database: %v", err)
	}
}

// run against an InfluxDB 1.x without the database says which flag or
// variable creates it; the config key only when there is a file.
func TestRunCreateDatabaseHint(t *testing.T) {
	srv := influxtest.Start(t)
	conf := writeFile(t, "c.toml", "[[graphite]]\nbind-address = \"127.0.0.1:0\"\n")
	confFalse := writeFile(t, "f.toml", "[influxdb]\ncreate-database = false\n[[graphite]]\nbind-address = \"127.0.0.1:0\"\n")
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want []string
		not  string
	}{
		{"no file", []string{"run", "--bind", "127.0.0.1:0"}, nil,
			[]string{`database "spark" does not exist`, "--create-database", config.EnvCreateDatabase + "=true"}, "create-database = true"},
		{"file", []string{"run", "--config", conf}, nil,
			[]string{"--create-database", config.EnvCreateDatabase + "=true", "create-database = true to [influxdb] in " + conf}, ""},
		{"file says false", []string{"run", "--config", confFalse}, nil,
			[]string{"set create-database = true at " + confFalse + ":2:1 (it is false)"}, "--create-database"},
		{"env says false", []string{"run", "--bind", "127.0.0.1:0"}, map[string]string{config.EnvCreateDatabase: "false"},
			[]string{"set " + config.EnvCreateDatabase + "=true (it is false)"}, "--create-database"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{config.EnvURL: srv.URL, config.EnvAdminBind: "off"}
			for k, v := range tc.env {
				env[k] = v
			}
			err := run(context.Background(), tc.args, envOf(env), nil, io.Discard, io.Discard)
			if err == nil {
				t.Fatal("run started")
			}
			t.Log(err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if tc.not != "" && strings.Contains(err.Error(), tc.not) {
				t.Errorf("error %q names %q", err, tc.not)
			}
		})
	}
}

// logWatch is a log writer that tells when a line with a given text was
// written.
type logWatch struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	waits map[string]chan struct{} // set once, then only read
	fired map[string]bool
}

func newLogWatch(texts ...string) *logWatch {
	w := &logWatch{waits: map[string]chan struct{}{}, fired: map[string]bool{}}
	for _, s := range texts {
		w.waits[s] = make(chan struct{})
	}
	return w
}

func (w *logWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for s, ch := range w.waits {
		if !w.fired[s] && strings.Contains(w.buf.String(), s) {
			w.fired[s] = true
			close(ch)
		}
	}
	return len(p), nil
}

func (w *logWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// startServing runs `sparkpulse run` in-process with its admin endpoint
// and TCP listener on port 0, InfluxDB unreachable; it returns once they
// serve, with the addresses bound and conf, a config naming them as a
// client reads it.
func startServing(t *testing.T, ctx context.Context, logs *logWatch) (conf, admin, listener string, done <-chan error) {
	t.Helper()
	bound, done := startRun(t, ctx, configtest.Write(t, config.Config{InfluxDB: config.InfluxDBConfig{URL: "http://127.0.0.1:1"}, Graphite: []config.GraphiteConfig{{}}}), logs)
	admin, listener = bound.Admin, bound.graphiteAddr(t, 0)
	conf = writeFile(t, "client.toml", fmt.Sprintf("[admin]\nbind-address = %q\n", admin))
	return conf, admin, listener, done
}

// health against the real admin endpoint of a running sparkpulse, found
// from its config, then after it stopped; a clean stop exits 0, and the
// start-up line carries the version.
func TestHealth(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := newLogWatch("admin endpoint")
	conf, admin, _, done := startServing(t, ctx, logs)
	if start, _, _ := strings.Cut(logs.String(), "\n"); !strings.Contains(start, "starting sparkpulse") || !strings.Contains(start, `"version": "`+versionString()+`"`) {
		t.Errorf("start-up log line without the version: %s", start)
	}

	code, out, errOut := runMainCLI(t, nil, "health", "--config", conf)
	if code != 0 || !strings.Contains(out, "healthy: http://"+admin+"/healthz answered 200") {
		t.Errorf("health of a running sparkpulse: exit %d, %q %q", code, out, errOut)
	}
	code, out, _ = runMainCLI(t, map[string]string{config.EnvConfig: conf}, "health")
	if code != 0 || !strings.Contains(out, "healthy") {
		t.Errorf("health with %s: exit %d, %q", config.EnvConfig, code, out)
	}
	code, out, _ = runMainCLI(t, map[string]string{config.EnvAdminBind: "0.0.0.0:" + strings.Split(admin, ":")[1]}, "health")
	if code != 0 || !strings.Contains(out, "http://127.0.0.1:") {
		t.Errorf("health of 0.0.0.0: exit %d, %q", code, out)
	}
	code, _, _ = runMainCLI(t, nil, "health", "--admin-url", admin)
	if code != 0 {
		t.Errorf("health --admin-url %s: exit %d", admin, code)
	}

	cancel()
	if err := <-done; exitCode(err) != 0 {
		t.Fatalf("a clean stop: %v (exit %d)", err, exitCode(err))
	}
	code, _, errOut = runMainCLI(t, nil, "health", "--config", conf)
	if code != 1 || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "unhealthy: http://"+admin+"/healthz") || !strings.Contains(errOut, "refused") {
		t.Errorf("health of a stopped sparkpulse: exit %d, %q", code, errOut)
	}
}

func TestHealthAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "not ready: InfluxDB unreachable", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	code, _, errOut := runMainCLI(t, nil, "health", "--admin-url", srv.URL)
	if code != 1 || !strings.Contains(errOut, "answered 503 Service Unavailable: not ready: InfluxDB unreachable") {
		t.Errorf("503: exit %d, %q", code, errOut)
	}
	code, _, errOut = runMainCLI(t, map[string]string{config.EnvAdminBind: "off"}, "health")
	if code != 1 || !strings.Contains(errOut, "the admin endpoint is off") {
		t.Errorf("admin off: exit %d, %q", code, errOut)
	}
	for in, want := range map[string]string{"0.0.0.0:2033": "http://127.0.0.1:2033", "[::]:9": "http://127.0.0.1:9", ":2033": "http://127.0.0.1:2033",
		"10.1.2.3:2033": "http://10.1.2.3:2033", "[::1]:2033": "http://[::1]:2033"} {
		if got := probeURL(in); got != want {
			t.Errorf("probeURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// A second signal during the graceful stop stops at once, exit 130,
// saying what was abandoned.
func TestRunSecondSignal(t *testing.T) {
	stop := &stopSignals{forced: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), stopSignalsKey{}, stop))
	defer cancel()
	logs := newLogWatch("admin endpoint", "shutting down")
	_, _, listener, done := startServing(t, ctx, logs)
	// An open connection holds the graceful stop: it is read to its end.
	c, err := net.Dial("tcp", listener)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "a.b 1 1717171717\n"); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-logs.waits["shutting down"]
	select {
	case err := <-done:
		t.Fatalf("the graceful stop did not wait for the open connection: %v", err)
	default:
	}
	close(stop.forced)
	err = <-done
	if exitCode(err) != 130 || !strings.Contains(err.Error(), "graceful stop was abandoned") {
		t.Errorf("forced stop: %v (exit %d)", err, exitCode(err))
	}
}
