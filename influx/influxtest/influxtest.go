// Package influxtest runs a real InfluxDB 1.x server (influxd) for
// integration tests, on loopback ports it picks with its data in a
// temporary directory, and reads it back with InfluxQL. influxd binds
// port 0 for its HTTP and RPC listeners and its [[graphite]] listeners
// (WithGraphite), so a test does not depend on what else runs on the
// machine: influxd runs at log level info, at which it names the HTTP and
// graphite ports it bound, and Start reads the HTTP address from its log
// (GraphiteAddrs, those of the graphite listeners). Restart comes back on
// the same HTTP address. InfluxDB 2.x (Start2) is run the same way.
// RefusingAddr gives an address that refuses connections for the whole
// test.
//
// The binary is $INFLUXD, else $(go env GOPATH)/bin/influxd, else influxd on
// PATH. When it is missing or does not start, the test is skipped with the
// install command, except in CI (CI set), where it fails: integration tests
// must not pass there by not running.
package influxtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/build"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// InstallCommand installs the influxd these tests are written against.
const InstallCommand = "go install github.com/influxdata/influxdb/cmd/influxd@v1.8.10"

const (
	startTimeout = 60 * time.Second
	pollInterval = 50 * time.Millisecond
	stopTimeout  = 30 * time.Second
)

// Server is a running influxd.
type Server struct {
	URL      string // http://127.0.0.1:port
	HTTPAddr string // 127.0.0.1:port
	Dir      string // meta, data and wal directories, and influxd.conf
	CAFile   string // WithTLS: PEM of the CA that signed the server's certificate

	bin, confPath string
	env           []string

	scheme             string // http, or https WithTLS
	confHead, confTail string // influxd.conf around [http]'s bind-address

	cmd     *exec.Cmd
	exited  chan struct{} // closed when the process has exited
	held    func()        // after Kill: releases HTTPAddr (see holdPort)
	log     *syncBuffer
	logFrom int          // where in log the running process's output starts
	client  *http.Client // trusts CAFile
}

// Option changes how Start runs influxd.
type Option func(*options)

type options struct {
	extra, env []string
	tls        bool
}

// WithTLS serves HTTPS only, with a certificate for 127.0.0.1 signed by a
// CA made for this server, whose PEM is in Server.CAFile.
func WithTLS() Option {
	return func(o *options) { o.tls = true }
}

// WithConfig appends TOML to influxd's configuration. For [[graphite]]
// blocks, use WithGraphite.
func WithConfig(toml string) Option {
	return func(o *options) { o.extra = append(o.extra, toml) }
}

// WithGraphite appends [[graphite]] blocks to influxd's configuration.
// Their bind-address should be "127.0.0.1:0": GraphiteAddrs returns the
// addresses they bound, which influxd logs (at level info, at which it
// runs; graphite lines it cannot parse are logged at that level too).
func WithGraphite(toml string) Option {
	return func(o *options) { o.extra = append(o.extra, toml) }
}

// WithEnv adds "KEY=value" environment variables, which influxd reads
// over its configuration (e.g. INFLUXDB_HTTP_AUTH_ENABLED=true).
func WithEnv(kv ...string) Option {
	return func(o *options) { o.env = append(o.env, kv...) }
}

// Start runs influxd until the end of the test and waits until it answers
// /ping. On failure its log is printed.
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	s, err := Launch(tb.TempDir(), opts...)
	if err != nil {
		unavailable(tb, err.Error(), InstallCommand)
	}
	tb.Cleanup(func() {
		s.Stop()
		if tb.Failed() {
			tb.Logf("influxd log (%s):\n%s", s.Dir, s.log.String())
		}
	})
	return s
}

// Launch runs influxd with its data under dir, on loopback ports it picks,
// and waits until it answers /ping. The caller stops it with Stop. It is
// Start for programs, such as load harnesses.
func Launch(dir string, opts ...Option) (*Server, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	bin, err := findBinary()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return start(dir, bin, o)
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

func findBinary() (string, error) {
	if p := os.Getenv("INFLUXD"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("$INFLUXD %q: %v", p, err)
		}
		return p, nil
	}
	gopath := build.Default.GOPATH
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		if p := strings.TrimSpace(string(out)); p != "" {
			gopath = strings.Split(p, string(os.PathListSeparator))[0]
		}
	}
	if p := filepath.Join(gopath, "bin", "influxd"); fileExists(p) {
		return p, nil
	}
	p, err := exec.LookPath("influxd")
	if err != nil {
		return "", fmt.Errorf("influxd not found in $INFLUXD, %s or PATH", filepath.Join(gopath, "bin"))
	}
	return p, nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

func start(dir, bin string, o options) (*Server, error) {
	s := &Server{
		Dir:    dir,
		scheme: "http",
		log:    &syncBuffer{},
		client: &http.Client{Timeout: 30 * time.Second},
	}
	httpsConf := ""
	if o.tls {
		cert, key, err := makeCert(dir, s)
		if err != nil {
			return nil, fmt.Errorf("influxtest: %v", err)
		}
		s.scheme = "https"
		httpsConf = fmt.Sprintf("  https-enabled = true\n  https-certificate = %q\n  https-private-key = %q\n", cert, key)
	}
	// The RPC listener (backup and restore) binds port 0 on every start:
	// no test connects to it. The HTTP listener binds port 0 on the first.
	s.confHead = fmt.Sprintf(`reporting-disabled = true
bind-address = "127.0.0.1:0"

[meta]
  dir = %q
  logging-enabled = false

[data]
  dir = %q
  wal-dir = %q
  query-log-enabled = false

[monitor]
  store-enabled = false

[http]
`, filepath.Join(dir, "meta"), filepath.Join(dir, "data"), filepath.Join(dir, "wal"))
	s.confTail = fmt.Sprintf(`  log-enabled = false
  pprof-enabled = false
%s
[logging]
  level = "info"
`, httpsConf) + strings.Join(o.extra, "\n")
	s.bin, s.confPath, s.env = bin, filepath.Join(dir, "influxd.conf"), o.env
	if err := s.launch("127.0.0.1:0"); err != nil {
		return nil, err
	}
	return s, nil
}

// launch writes influxd's configuration with [http] bound to httpAddr,
// runs influxd, reads the HTTP address it bound from its log into HTTPAddr
// and URL, and waits until it answers.
func (s *Server) launch(httpAddr string) error {
	conf := s.confHead + fmt.Sprintf("  bind-address = %q\n", httpAddr) + s.confTail
	if err := os.WriteFile(s.confPath, []byte(conf), 0o644); err != nil {
		return err
	}
	cmd := exec.Command(s.bin, "run", "-config", s.confPath)
	cmd.Stdout = s.log
	cmd.Stderr = s.log
	cmd.Env = append(append(os.Environ(), "INFLUXDB_REPORTING_DISABLED=true"), s.env...)
	s.logFrom = s.log.Len()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %v", s.bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited
	addrs, err := httpListening.await(s.log, s.logFrom, cmd, exited, 1)
	if err == nil {
		s.HTTPAddr = addrs[0]
		s.URL = s.scheme + "://" + s.HTTPAddr
		err = s.waitReady()
	}
	if err != nil {
		s.Stop()
		return fmt.Errorf("%s did not start: %v\n%s", s.bin, err, s.log.String())
	}
	return nil
}

// PID is the process id of the running influxd, for load harnesses that
// read its CPU time.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Kill stops influxd with SIGKILL, as a crash or an OOM kill would, and
// waits until it has exited. Its data stays for Restart, and its HTTP
// port is held until then (see holdPort): connections to it are refused.
func (s *Server) Kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.held = holdAfterKill(s.HTTPAddr)
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
func release(held *func()) {
	if *held != nil {
		(*held)()
		*held = nil
	}
}

// Restart starts influxd again on the same HTTP address and data after
// Kill, as the programs under test have its URL in their configuration.
// Kill held the port, so a server another test starts on port 0 meanwhile
// cannot take it and the writes meant for this one; a process that binds
// that very port can, and then influxd cannot start, and Restart fails
// the test saying so. Its [[graphite]] listeners bind port 0 again:
// addresses GraphiteAddrs gave before a Restart are stale after it.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	err := s.launch(s.HTTPAddr)
	release(&s.held) // influxd listens there now, or the test ends
	if err != nil {
		tb.Fatalf("influxtest: restart on %s: %v", s.HTTPAddr, restartError(err))
	}
}

// restartError says why a restart on a known address failed when another
// process took the address.
func restartError(err error) error {
	if strings.Contains(err.Error(), "address already in use") {
		return fmt.Errorf("another process took the port while influxd was down: %w", err)
	}
	return err
}

// waitReady polls /ping once influxd listens, for HTTPS set up and the
// server answering: influxd has no readiness signal beyond its log.
func (s *Server) waitReady() error {
	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	client := *s.client
	client.Timeout = time.Second
	for {
		resp, err := client.Get(s.URL + "/ping")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusNoContent {
				return nil
			}
		}
		select {
		case <-s.exited:
			return fmt.Errorf("influxd exited: %v", s.cmd.ProcessState)
		case <-deadline.C:
			return fmt.Errorf("no answer on %s/ping within %s", s.URL, startTimeout)
		case <-tick.C:
		}
	}
}

// Log returns what influxd has printed.
func (s *Server) Log() string { return s.log.String() }

// Stop sends SIGTERM and waits for influxd to exit, killing it if it takes
// too long.
func (s *Server) Stop() {
	release(&s.held)
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(stopTimeout)
	defer t.Stop()
	select {
	case <-s.exited:
	case <-t.C:
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
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
func (s *Server) Query(tb testing.TB, db, q string) []Series {
	tb.Helper()
	series, err := s.query(db, q)
	if err != nil {
		tb.Fatalf("influxtest: query %q on database %q: %v", q, db, err)
	}
	return series
}

// TryQuery is Query returning the error instead of failing the test.
func (s *Server) TryQuery(db, q string) ([]Series, error) { return s.query(db, q) }

// Exec runs a statement such as CREATE DATABASE. An error fails the test.
func (s *Server) Exec(tb testing.TB, q string) {
	tb.Helper()
	if _, err := s.query("", q); err != nil {
		tb.Fatalf("influxtest: %q: %v", q, err)
	}
}

func (s *Server) query(db, q string) ([]Series, error) {
	form := url.Values{"q": {q}, "epoch": {"ns"}}
	if db != "" {
		form.Set("db", db)
	}
	resp, err := s.client.PostForm(s.URL+"/query", form)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
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
		return nil, fmt.Errorf("%s: %s", resp.Status, body)
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

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago, for
// a port that must be known before its server starts. Another process can
// take it before the server binds it: the caller makes that fail loudly.
// It is kept for its one caller, the real-Spark test's driver UI port,
// which is in sparkpulse's configuration before Spark starts, and which
// Spark is told not to move from (spark.port.maxRetries=0). Where the
// server can bind port 0 and say which port it got, it does: sparkpulse
// (run --ready-file), influxd 1.x and 2.x (Start, Start2: their log),
// influxd's [[graphite]] listeners (GraphiteAddrs), Spark's History Server
// (its log); for an address that refuses connections, use RefusingAddr.
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("influxtest: finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// syncBuffer collects influxd's output from two pipes, and tells those
// who wait for a line that more has come.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	written chan struct{} // closed at the next Write
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.written != nil {
		close(b.written)
		b.written = nil
	}
	return b.b.Write(p)
}

// Len is the number of bytes written so far.
func (b *syncBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Len()
}

// From returns what was written from offset on, and a channel closed at
// the next Write.
func (b *syncBuffer) From(offset int) (string, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.written == nil {
		b.written = make(chan struct{})
	}
	return string(b.b.Bytes()[offset:]), b.written
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
