package influxtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/build"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Influxd is a running influxd, 1.x (*Server) or 2.x (*Server2): what a
// test does to the process, and how it reads back what was written to it
// (InfluxQL; on 2.x through the 1.x compatibility API, a bucket as its
// database), are the same for both.
type Influxd interface {
	// Kill stops influxd with SIGKILL, as a crash or an OOM kill would,
	// and waits until it has exited. Its data stays for Restart, and its
	// HTTP port is held until then (see holdPort): connections to it are
	// refused.
	Kill()
	// Restart starts influxd again on the same HTTP address and data,
	// after Kill or Stop: the programs under test have its URL in their
	// configuration. Kill held the port, so a server another test starts
	// on port 0 meanwhile cannot take it and the writes meant for this
	// one; a process that binds that very port can, and then influxd
	// cannot start, and Restart fails the test saying so.
	Restart(tb testing.TB)
	// Stop sends SIGTERM and waits for influxd to exit, killing it if it
	// takes too long.
	Stop()
	// PID is the process id of the running influxd, for a test that
	// stops it (SIGSTOP) or a load harness that reads its CPU time.
	PID() int
	// Log returns what influxd has printed.
	Log() string
	// Query runs q on database db ("" for none) with epoch=ns and returns
	// the series of all its statements. An error fails the test.
	Query(tb testing.TB, db, q string) []Series
	// TryQuery is Query returning the error instead of failing the test.
	TryQuery(db, q string) ([]Series, error)
	// Write posts line protocol to path (1.x's /write?db=…, or
	// /api/v2/write?…, which both versions take) with the server's
	// credentials, and fails the test unless it is taken (204).
	Write(tb testing.TB, path, lines string)
}

var (
	_ Influxd = (*Server)(nil)
	_ Influxd = (*Server2)(nil)
)

const (
	startTimeout = 60 * time.Second
	pollInterval = 50 * time.Millisecond
	stopTimeout  = 30 * time.Second
)

// process is one influxd, of either version. What differs between the
// versions is how it is run (command), the log line that names the HTTP
// address it bound (listening), and the endpoint that says it is ready
// (probe, ready); the rest is done here, once.
type process struct {
	URL      string // http://127.0.0.1:port (https with WithTLS)
	HTTPAddr string // 127.0.0.1:port
	Dir      string // its data (1.x: and influxd.conf)

	scheme    string                                   // http, or https with WithTLS
	command   func(httpAddr string) (*exec.Cmd, error) // influxd serving HTTP on httpAddr
	listening listenLine
	probe     string                    // GET it until ready answers true
	ready     func(*http.Response) bool // nil: never asked (InfluxQLVia)

	cmd     *exec.Cmd
	exited  chan struct{} // closed when the process has exited
	held    func()        // after Kill: releases HTTPAddr (see holdPort)
	log     *Output
	logFrom int          // where in log the running process's output starts
	client  *http.Client // trusts the CA WithTLS
	token   string       // 2.x: the operator's, sent with queries and writes
}

// launch runs influxd serving HTTP on httpAddr, reads the address it bound
// from its log into HTTPAddr and URL, and waits until it is ready.
func (p *process) launch(httpAddr string) error {
	cmd, err := p.command(httpAddr)
	if err != nil {
		return err
	}
	cmd.Stdout = p.log
	cmd.Stderr = p.log
	p.logFrom = p.log.Len()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %v", cmd.Path, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	p.cmd, p.exited = cmd, exited
	addrs, err := p.listening.await(p.log, p.logFrom, cmd, exited, 1)
	if err == nil {
		p.HTTPAddr = addrs[0]
		p.URL = p.scheme + "://" + p.HTTPAddr
		err = p.waitReady()
	}
	if err != nil {
		p.Stop()
		return fmt.Errorf("%s did not start: %v\n%s", cmd.Path, err, p.log.String())
	}
	return nil
}

// waitReady polls the probe once influxd listens, for HTTPS set up and
// the server answering: influxd has no readiness signal beyond its log.
func (p *process) waitReady() error {
	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	client := *p.client
	client.Timeout = time.Second
	for {
		resp, err := client.Get(p.URL + p.probe)
		if err == nil {
			ok := p.ready(resp)
			resp.Body.Close()
			if ok {
				return nil
			}
		}
		select {
		case <-p.exited:
			return fmt.Errorf("influxd exited: %v", p.cmd.ProcessState)
		case <-deadline.C:
			return fmt.Errorf("no answer on %s%s within %s", p.URL, p.probe, startTimeout)
		case <-tick.C:
		}
	}
}

// PID is the process id of the running influxd.
func (p *process) PID() int { return p.cmd.Process.Pid }

// Log returns what influxd has printed.
func (p *process) Log() string { return p.log.String() }

// Kill stops influxd with SIGKILL and holds its HTTP port (see Influxd).
func (p *process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
	p.held = holdAfterKill(p.HTTPAddr)
}

// holdAfterKill holds the port of a server just killed, or returns nil
// when another process took it in the instant since, which its restart
// then reports.
func holdAfterKill(addr string) func() {
	release, err := holdPort(addr)
	if err != nil {
		return nil
	}
	return release
}

// release lets the held port go, if one is.
func (p *process) release() {
	if p.held != nil {
		p.held()
		p.held = nil
	}
}

// Restart starts influxd again on its HTTP address (see Influxd). A 1.x
// server's [[graphite]] listeners bind port 0 again: addresses
// GraphiteAddrs gave before a Restart are stale after it.
func (p *process) Restart(tb testing.TB) {
	tb.Helper()
	err := p.launch(p.HTTPAddr)
	p.release() // influxd listens there now, or the test ends
	if err != nil {
		if strings.Contains(err.Error(), "address already in use") {
			err = fmt.Errorf("another process took the port while influxd was down: %w", err)
		}
		tb.Fatalf("influxtest: restart on %s: %v", p.HTTPAddr, err)
	}
}

// Stop sends SIGTERM and waits for influxd to exit, killing it if it takes
// too long.
func (p *process) Stop() {
	p.release()
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(stopTimeout)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// start is Start and Start2: it runs a server with launch in a temporary
// directory until the end of the test, printing its log if the test
// failed, or skips the test (fails it in CI) when the server cannot be
// had, saying how to install it.
func start[S Influxd](tb testing.TB, name, install string, launch func(dir string) (S, error)) S {
	tb.Helper()
	dir := tb.TempDir()
	s, err := launch(dir)
	if err != nil {
		unavailable(tb, err.Error(), install)
	}
	tb.Cleanup(func() {
		s.Stop()
		if tb.Failed() {
			tb.Logf("%s log (%s):\n%s", name, dir, s.Log())
		}
	})
	return s
}

// Option changes how Start or Start2 runs influxd.
type Option func(*options)

type options struct {
	extra, env []string
	tls        bool
}

// WithEnv adds "KEY=value" environment variables, which influxd reads
// over its configuration: INFLUXDB_… for 1.x (e.g.
// INFLUXDB_HTTP_AUTH_ENABLED=true), INFLUXD_… for 2.x.
func WithEnv(kv ...string) Option {
	return func(o *options) { o.env = append(o.env, kv...) }
}

// prepare applies opts, finds the binary and makes dir.
func prepare(dir string, opts []Option, find func() (string, error)) (options, string, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	bin, err := find()
	if err != nil {
		return o, "", err
	}
	return o, bin, os.MkdirAll(dir, 0o755)
}

// unavailable skips the test, or fails it when CI is set, saying how to
// get the server.
func unavailable(tb testing.TB, why, how string) {
	tb.Helper()
	if os.Getenv("CI") != "" {
		tb.Fatalf("influxtest: %s (CI is set, so this fails instead of skipping; get it with %s)", why, how)
	}
	tb.Skipf("influxtest: %s; get it with: %s", why, how)
}

// findBinary returns $env when it is set (the file must exist), else the
// first of paths that is a file; a path without a slash is looked up in
// PATH.
func findBinary(env string, paths ...string) (string, error) {
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("$%s %q: %v", env, p, err)
		}
		return p, nil
	}
	for _, p := range paths {
		if !strings.Contains(p, "/") {
			if found, err := exec.LookPath(p); err == nil {
				return found, nil
			}
		} else if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("influxd not found: $%s is not set, and none of %s is there", env, strings.Join(paths, ", "))
}

// gopathFirst is the first entry of `go env GOPATH`.
func gopathFirst() string {
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		if p := strings.TrimSpace(string(out)); p != "" {
			return filepath.SplitList(p)[0]
		}
	}
	if p := filepath.SplitList(build.Default.GOPATH); len(p) > 0 {
		return p[0]
	}
	return "go" // no GOPATH and no home: nothing will be found there
}

// Series is one series of an InfluxQL result. Numbers are json.Number and
// times (epoch=ns) too, so nanoseconds are exact.
type Series struct {
	Name    string
	Tags    map[string]string
	Columns []string
	Values  [][]any
}

// Query runs q on db ("" for none) with epoch=ns and returns the series of
// all its statements. An error fails the test.
func (p *process) Query(tb testing.TB, db, q string) []Series {
	tb.Helper()
	series, err := p.TryQuery(db, q)
	if err != nil {
		tb.Fatalf("influxtest: query %q on database %q: %v", q, db, err)
	}
	return series
}

// TryQuery is Query returning the error instead of failing the test.
func (p *process) TryQuery(db, q string) ([]Series, error) {
	form := url.Values{"q": {q}, "epoch": {"ns"}}
	if db != "" {
		form.Set("db", db)
	}
	status, body, err := p.post("/query", p.token, "application/x-www-form-urlencoded", form.Encode())
	if err != nil {
		return nil, err
	}
	var r struct {
		Error   string
		Results []struct {
			Error  string
			Series []Series
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("%d %s: %s", status, http.StatusText(status), body)
	}
	if r.Error != "" {
		return nil, errors.New(r.Error)
	}
	var out []Series
	for _, res := range r.Results {
		if res.Error != "" {
			return nil, errors.New(res.Error)
		}
		out = append(out, res.Series...)
	}
	return out, nil
}

// Write posts lines to path with the server's credentials (see Influxd).
func (p *process) Write(tb testing.TB, path, lines string) {
	tb.Helper()
	if status, answer := p.Post(tb, path, p.token, lines); status != http.StatusNoContent {
		tb.Fatalf("influxtest: write %q to %s: %d %s", lines, path, status, answer)
	}
}

// Post sends lines (line protocol) to path with token ("" for none:
// 1.x's own credentials go as "user:password"), and returns the answer's
// status and body, trimmed, as a test of what the server answers wants
// them. A request that fails on the way fails the test.
func (p *process) Post(tb testing.TB, path, token, lines string) (status int, answer string) {
	tb.Helper()
	status, body, err := p.post(path, token, "text/plain; charset=utf-8", lines)
	if err != nil {
		tb.Fatalf("influxtest: POST %s: %v", path, err)
	}
	return status, strings.TrimSpace(string(body))
}

func (p *process) post(path, token, contentType, body string) (status int, answer []byte, err error) {
	req, err := http.NewRequest(http.MethodPost, p.URL+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", contentType)
	if token != "" {
		req.Header.Set("Authorization", "Token "+token)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	answer, err = io.ReadAll(resp.Body)
	return resp.StatusCode, answer, err
}
