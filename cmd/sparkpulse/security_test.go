package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/config/configtest"
	"github.com/sparkpulse/sparkpulse/delta"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
)

// counting passes requests to h and signals each listing of applications,
// which begins a poll: the second one means the first poll is done.
func counting(h http.Handler, listings chan<- struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/applications" {
			select {
			case listings <- struct{}{}:
			default:
			}
		}
		h.ServeHTTP(w, r)
	})
}

func waitN(t *testing.T, ch <-chan struct{}, n int, what string) {
	t.Helper()
	for range n {
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TLS to InfluxDB and to a Spark UI, each trusting only the CA its section
// names: metrics and annotations arrive over HTTPS. Without the CA,
// start-up fails and says which setting to look at.
func TestTLSWithCustomCA(t *testing.T) {
	const app = "app-20261122101500-0007"
	srv := influxtest.Start(t, influxtest.WithTLS())
	listings := make(chan struct{}, 100)
	ui := httptest.NewTLSServer(counting(oneJobUI(app, time.Now().Add(-time.Minute).Truncate(time.Millisecond).UTC()), listings))
	defer ui.Close()
	uiCA := writeFile(t, "ui-ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ui.Certificate().Raw})))

	svc := startSparkpulse(t, config.Config{
		InfluxDB: config.InfluxDBConfig{URL: srv.URL, TLSCA: srv.CAFile},
		Annotate: config.AnnotateConfig{URLs: []string{ui.URL}, Interval: seconds(1), Database: "annotations", TLSCA: uiCA},
		Graphite: []config.GraphiteConfig{{Database: "metrics"}},
	})
	sendTCP(t, svc.addr(0), app+".driver.DAGScheduler.job.allJobs 1 "+T+"\n")
	waitN(t, listings, 2, "two polls of the UI")
	svc.stop()

	if m := dump(t, srv, "metrics"); len(m) != 1 || !strings.HasPrefix(m[0], "DAGScheduler,applicationid="+app) {
		t.Errorf("metrics over HTTPS: %q", m)
	}
	if a := dump(t, srv, "annotations"); len(a) != 4 || !strings.HasPrefix(a[2], "spark_job,applicationid="+app) {
		t.Errorf("annotations over HTTPS: %q", a)
	}

	// The system roots do not include the test CA.
	_, err := startService(t, config.Config{InfluxDB: config.InfluxDBConfig{URL: srv.URL}, Graphite: []config.GraphiteConfig{{}}}, zap.NewNop())
	if err == nil {
		t.Fatal("started without trusting InfluxDB's certificate")
	}
	if !strings.Contains(err.Error(), "check tls-ca") || !strings.Contains(err.Error(), srv.URL) {
		t.Errorf("error without the CA: %v", err)
	}
}

// Secrets (the InfluxDB token, a Spark UI password) appear in no log line
// (at debug level), no /metrics sample, no `check` output and no error,
// even when the server refuses them; a config file any user can read that
// holds a secret, and a secret file any user can read, are warned about.
func TestSecretsStayHidden(t *testing.T) {
	const secret = "SECRET"
	srv := influxtest.Start(t, influxtest.WithEnv("INFLUXDB_HTTP_AUTH_ENABLED=true"))
	srv.Exec(t, `CREATE USER admin WITH PASSWORD 'SECRET-influx' WITH ALL PRIVILEGES`) // the first admin needs no credentials

	// A Spark UI behind basic auth, to which sparkpulse has the wrong password.
	const app = "app-20261122101500-0008"
	refused := make(chan struct{}, 100)
	uiHandler := oneJobUI(app, time.Now().Add(-time.Minute).Truncate(time.Millisecond).UTC())
	ui := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "spark" || p != "SECRET-ui-right" {
			w.Header().Set("WWW-Authenticate", `Basic realm="spark"`)
			http.Error(w, "wrong credentials", http.StatusUnauthorized)
			select {
			case refused <- struct{}{}:
			default:
			}
			return
		}
		uiHandler.ServeHTTP(w, r)
	}))
	defer ui.Close()
	pwFile := writeFile(t, "ui-password", "SECRET-ui-wrong\n")
	if err := os.Chmod(pwFile, 0o644); err != nil {
		t.Fatal(err)
	}
	conf := func(token string) string {
		return configtest.Write(t, config.Config{
			InfluxDB: config.InfluxDBConfig{URL: srv.URL, Token: token},
			Log:      config.LogConfig{Level: "debug", Format: "json"},
			Annotate: config.AnnotateConfig{URLs: []string{ui.URL}, Interval: seconds(1), Username: "spark", PasswordFile: pwFile},
			Graphite: []config.GraphiteConfig{{Database: "metrics"}},
		})
	}
	path := conf("admin:SECRET-influx")
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}

	var shown []string // everything a person or a scraper could see
	check := func(what, text string) {
		t.Helper()
		if strings.Contains(text, secret) {
			t.Errorf("%s shows a secret:\n%s", what, text)
		}
		shown = append(shown, text)
	}

	// The service, running: a point written with the token, the UI
	// refusing its password.
	var logs influxtest.Output
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bound, done := startRun(t, ctx, path, &logs)
	adminAddr := bound.Admin
	conn, err := net.Dial("tcp", bound.graphiteAddr(t, 0))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "%s.driver.DAGScheduler.job.allJobs 1 %s\n", app, T)
	conn.Close()
	waitN(t, refused, 2, "two refused polls")
	_, metrics := adminGet(t, adminAddr, "/metrics")
	check("/metrics", metrics)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
	check("the log", logs.String())
	for _, want := range []string{
		path + ` holds [influxdb] token and is readable by every user (mode 0644)`,
		"secret file " + pwFile + " is readable by every user (mode 0644)",
		`401 Unauthorized`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, logs.String())
		}
	}
	if n := queryAuth(t, srv, "admin", "SECRET-influx", "metrics", `SELECT count("job.allJobs") FROM "DAGScheduler"`); n != 1 {
		t.Errorf("%d points stored, want 1", n)
	}

	// `check` says a token is set, and warns.
	var out bytes.Buffer
	if err := run(context.Background(), []string{"check", "--config", path}, noEnv, nil, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	check("check", out.String())
	if !strings.Contains(out.String(), "(token set)") || !strings.Contains(out.String(), "warning: "+path+" holds [influxdb] token") {
		t.Errorf("check output:\n%s", out.String())
	}

	// Errors: InfluxDB refusing the token at start (the config's own
	// errors: TestConfigErrorsHideURLCredentials in package config).
	wrong := conf("admin:SECRET-wrong")
	err = run(context.Background(), []string{"run", "--config", wrong}, noEnv, nil, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("a refused token: %v", err)
	} else {
		check("the start-up error", err.Error())
	}

	// Files only their owner can read draw no warning.
	for _, p := range []string{path, pwFile} {
		if err := os.Chmod(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	plan, err := config.Load(&config.Overrides{Config: path}, noEnv)
	if err != nil || len(plan.Warnings) != 0 {
		t.Errorf("owner-only files: warnings %q, %v", plan.Warnings, err)
	}
	t.Logf("checked %d texts, %d bytes, for secrets", len(shown), len(strings.Join(shown, "")))
}

// queryAuth runs a count query as user and returns the first count.
func queryAuth(t *testing.T, srv *influxtest.Server, user, password, db, q string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/query", strings.NewReader(url.Values{"db": {db}, "q": {q}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(user, password)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Results []struct {
			Series []struct{ Values [][]any }
		}
	}
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	if err := dec.Decode(&r); err != nil {
		t.Fatal(err)
	}
	if len(r.Results) == 0 || len(r.Results[0].Series) == 0 || len(r.Results[0].Series[0].Values) == 0 {
		return 0
	}
	n, _ := r.Results[0].Series[0].Values[0][1].(json.Number).Int64()
	return int(n)
}

// A symbolic link planted under a state file's name is never read,
// written or truncated through: the baselines and the facts snapshot are
// ignored with a warning and replaced by files of their own at the stop;
// a linked journal stops sparkpulse from starting, naming the link.
func TestStateLinks(t *testing.T) {
	srv := influxtest.Start(t)
	segment := filepath.Join(ingestDir, "ingest-0000000000000001.log")
	for _, name := range []string{delta.StateFile, factsFile, journalFile, segment} {
		t.Run(name, func(t *testing.T) {
			stateDir := t.TempDir()
			victim := filepath.Join(t.TempDir(), "victim")
			if err := os.WriteFile(victim, []byte("precious"), 0o600); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(stateDir, name)
			if err := os.MkdirAll(filepath.Dir(link), 0o750); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(victim, link); err != nil {
				t.Fatal(err)
			}
			p, err := startService(t, config.Config{
				StateDir: stateDir,
				InfluxDB: config.InfluxDBConfig{URL: srv.URL},
				Annotate: config.AnnotateConfig{URLs: []string{refusedURL(t)}},
				Graphite: []config.GraphiteConfig{{Database: "spark"}},
			}, zaptest.NewLogger(t))
			if name == journalFile {
				if err == nil || !strings.Contains(err.Error(), link+" is a symbolic link") {
					t.Errorf("started with a linked journal: %v", err)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				p.stop()
				if fi, err := os.Lstat(link); name == segment && errors.Is(err, os.ErrNotExist) {
					// An ingest segment the saved baselines hold is dropped.
				} else if err != nil || !fi.Mode().IsRegular() {
					t.Errorf("%s after the stop: %v, %v; want a file of its own", name, fi, err)
				}
			}
			if b, err := os.ReadFile(victim); err != nil || string(b) != "precious" {
				t.Errorf("the link's target: %q, %v", b, err)
			}
		})
	}
}

// A flood of admin clients that connect and send nothing costs at most
// adminMaxConns file descriptors (the rest wait in the kernel), Graphite
// keeps accepting and storing, and a silent connection is closed after
// adminHeaderTimeout.
func TestAdminFlood(t *testing.T) {
	srv := influxtest.Start(t)
	svc := startSparkpulse(t, config.Config{InfluxDB: config.InfluxDBConfig{URL: srv.URL}, Graphite: []config.GraphiteConfig{{Database: "spark"}}})
	admin := svc.Bound().Admin
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	before := fds()
	const clients = 3 * adminMaxConns
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range clients {
		c, err := net.Dial("tcp", admin)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	// Both ends are in this process: the clients' and what the admin
	// endpoint accepted.
	limit := before + clients + adminMaxConns
	waitUntil(t, 10*time.Second, "the admin endpoint's accepts", func() bool { return fds() >= limit })
	sendTCP(t, svc.addr(0), fmt.Sprintf("app-20261122101500-0001.driver.jvm.heap.used 42 %d\n", time.Now().Unix()))
	svc.flush()
	if got := srv.Query(t, "spark", `SELECT count(*) FROM /.*/`); len(got) == 0 {
		t.Error("the Graphite line was not stored during the flood")
	}
	if n := fds(); n > limit+8 {
		t.Errorf("%d file descriptors, %d before %d clients: the admin endpoint took more than %d", n, before, clients, adminMaxConns)
	}
	conns[0].SetReadDeadline(time.Now().Add(adminHeaderTimeout + 10*time.Second))
	if _, err := conns[0].Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("a silent connection after %s: %v, want it closed", adminHeaderTimeout, err)
	}
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	if status, _ := adminGet(t, admin, "/healthz"); status != http.StatusOK {
		t.Errorf("/healthz after the flood: %d", status)
	}
}
