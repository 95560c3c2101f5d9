// Package influxtest runs a real InfluxDB 1.x server (influxd) for
// integration tests, on free loopback ports with its data in a temporary
// directory, and reads it back with InfluxQL. influxd's HTTP and RPC
// ports are ports free a moment before (influxd names the ports it bound
// only at log level info, and it logs at warn unless WithGraphite), and
// it is started again on others when one was taken in between, so a test does
// not depend on what else runs on the machine. Its [[graphite]]
// listeners (WithGraphite) bind port 0 instead, and GraphiteAddrs reads
// the ports they got from its log. RefusingAddr gives an address that
// refuses connections for the whole test.
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
	"strconv"
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

	cmd     *exec.Cmd
	exited  chan struct{} // closed when the process has exited
	log     *syncBuffer
	logFrom int          // where in log the running process's output starts
	info    bool         // influxd logs at level info (WithGraphite)
	client  *http.Client // trusts CAFile
}

// Option changes how Start runs influxd.
type Option func(*options)

type options struct {
	extra, env []string
	tls        bool
	logLevel   string // influxd's [logging] level; "" for warn
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
// addresses they bound, which influxd logs at level info, so influxd logs
// at that level (graphite lines it cannot parse are logged at that level
// too).
func WithGraphite(toml string) Option {
	return func(o *options) {
		o.extra = append(o.extra, toml)
		o.logLevel = "info"
	}
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

// Launch runs influxd with its data under dir, on free loopback ports, and
// waits until it answers /ping. The caller stops it with Stop. It is Start
// for programs, such as load harnesses.
func Launch(dir string, opts ...Option) (*Server, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	bin, err := findBinary()
	if err != nil {
		return nil, err
	}
	return launchRetrying(dir, func(sub string) (*Server, error) { return start(sub, bin, o) })
}

// launchRetrying runs launch in dir/0, dir/1, … until it succeeds or
// fails otherwise than on a port taken: influxd cannot say which port it
// bound, so it is given one that was free a moment ago, which another
// process can take before influxd binds it; then influxd exits at once
// ("address already in use") and is started again on other ports. Any
// other failure is returned at once.
func launchRetrying[S any](dir string, launch func(sub string) (S, error)) (S, error) {
	var s S
	var err error
	for try := range launchTries {
		sub := filepath.Join(dir, strconv.Itoa(try))
		if err = os.MkdirAll(sub, 0o755); err != nil {
			return s, err
		}
		if s, err = launch(sub); err == nil || !portTaken(err) {
			return s, err
		}
	}
	return s, err
}

// launchTries bounds the starts on ports taken in between.
const launchTries = 5

// portTaken reports whether a launch failed because a port it was given
// was taken: influxd's log, in the error, says so, or the port answered
// but influxd did not hold it.
func portTaken(err error) bool {
	return errors.Is(err, errNotOurs) || strings.Contains(err.Error(), "address already in use")
}

// errNotOurs: the port answered, but another process serves it.
var errNotOurs = errors.New("the port answered, but influxd does not listen on it: another process took it")

// listensOn reports whether process pid holds a listening TCP socket on
// port, from /proc (Linux); ok is false where /proc cannot say. It tells
// influxd's own answer from that of another server that took its port.
func listensOn(pid, port int) (listens, ok bool) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return false, false
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil {
			if in, ok := strings.CutPrefix(l, "socket:["); ok {
				inodes[strings.TrimSuffix(in, "]")] = true
			}
		}
	}
	for _, table := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			return false, false
		}
		for _, l := range strings.Split(string(b), "\n")[1:] {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			f := strings.Fields(l)
			if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] { // 0A: LISTEN
				continue
			}
			if _, hexPort, found := strings.Cut(f[1], ":"); found {
				if p, err := strconv.ParseUint(hexPort, 16, 16); err == nil && int(p) == port {
					return true, true
				}
			}
		}
	}
	return false, true
}

// checkOwn returns errNotOurs when process pid is known not to listen on
// the port of addr (host:port).
func checkOwn(pid int, addr string) error {
	_, p, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(p)
	if listens, ok := listensOn(pid, port); ok && !listens {
		return errNotOurs
	}
	return nil
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
	httpPort, err := freePort()
	if err != nil {
		return nil, err
	}
	rpcPort, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &Server{
		HTTPAddr: fmt.Sprintf("127.0.0.1:%d", httpPort),
		Dir:      dir,
		log:      &syncBuffer{},
	}
	s.URL = "http://" + s.HTTPAddr
	s.client = &http.Client{Timeout: 30 * time.Second}
	httpsConf := ""
	if o.tls {
		cert, key, err := makeCert(dir, s)
		if err != nil {
			return nil, fmt.Errorf("influxtest: %v", err)
		}
		s.URL = "https://" + s.HTTPAddr
		httpsConf = fmt.Sprintf("  https-enabled = true\n  https-certificate = %q\n  https-private-key = %q\n", cert, key)
	}
	level := "warn"
	if o.logLevel != "" {
		level, s.info = o.logLevel, true
	}
	conf := fmt.Sprintf(`reporting-disabled = true
bind-address = "127.0.0.1:%d"

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
  bind-address = %q
  log-enabled = false
  pprof-enabled = false
%s
[logging]
  level = %q
`, rpcPort, filepath.Join(dir, "meta"), filepath.Join(dir, "data"), filepath.Join(dir, "wal"), s.HTTPAddr, httpsConf, level)
	conf += strings.Join(o.extra, "\n")
	confPath := filepath.Join(dir, "influxd.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return nil, err
	}

	s.bin, s.confPath, s.env = bin, confPath, o.env
	if err := s.launch(); err != nil {
		return nil, err
	}
	return s, nil
}

// launch runs influxd with the server's configuration and waits until it
// answers.
func (s *Server) launch() error {
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
	if err := s.waitReady(); err != nil {
		s.Stop()
		return fmt.Errorf("%s did not start: %v\n%s", s.bin, err, s.log.String())
	}
	return nil
}

// PID is the process id of the running influxd, for load harnesses that
// read its CPU time.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Kill stops influxd with SIGKILL, as a crash or an OOM kill would, and
// waits until it has exited. Its data stays for Restart.
func (s *Server) Kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// Restart starts influxd again on the same ports and data after Kill.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	if err := s.launch(); err != nil {
		tb.Fatalf("influxtest: restart: %v", err)
	}
}

// waitReady polls /ping: influxd is an external process with no readiness
// signal of its own.
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
				return checkOwn(s.cmd.Process.Pid, s.HTTPAddr)
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
// take it before the server binds it: the caller makes that fail loudly,
// or retries on "address already in use", as Start does. Its one caller is
// the real-Spark test's driver UI port, which is in sparkpulse's
// configuration before Spark starts, and which Spark is told not to move
// from (spark.port.maxRetries=0). Where the server can bind port 0 and
// say which port it got, it does: sparkpulse (run --ready-file), influxd's
// [[graphite]] listeners (GraphiteAddrs), Spark's History Server (its
// log); for an address that refuses connections, use RefusingAddr.
func FreePort(tb testing.TB) int {
	tb.Helper()
	p, err := freePort()
	if err != nil {
		tb.Fatalf("influxtest: finding a free port: %v", err)
	}
	return p
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
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
