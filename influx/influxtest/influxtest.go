// Package influxtest runs a real InfluxDB 1.x server (influxd) for
// integration tests, on loopback ports it picks with its data in a
// temporary directory, and reads it back with InfluxQL. influxd binds
// port 0 for its HTTP and RPC listeners and its [[graphite]] listeners
// (WithGraphite), so a test does not depend on what else runs on the
// machine: influxd runs at log level info, at which it names the HTTP and
// graphite ports it bound, and Start reads the HTTP address from its log
// (GraphiteAddrs, those of the graphite listeners). Restart comes back on
// the same HTTP address. InfluxDB 2.x (Start2) is run the same way, and
// both are an Influxd: a test that runs against either version kills,
// restarts and queries it through that one interface. RefusingAddr gives an address that refuses connections for the whole
// test.
//
// The binary is $INFLUXD, else $(go env GOPATH)/bin/influxd, else influxd on
// PATH. When it is missing or does not start, the test is skipped with the
// install command, except in CI (CI set), where it fails: integration tests
// must not pass there by not running.
package influxtest

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// InstallCommand installs the influxd these tests are written against.
const InstallCommand = "go install github.com/influxdata/influxdb/cmd/influxd@v1.8.10"

// Server is a running influxd 1.x.
type Server struct {
	process
	CAFile string // WithTLS: PEM of the CA that signed the server's certificate
}

// WithTLS serves HTTPS only, with a certificate for 127.0.0.1 signed by a
// CA made for this server, whose PEM is in Server.CAFile. 1.x only.
func WithTLS() Option {
	return func(o *options) { o.tls = true }
}

// WithConfig appends TOML to influxd's configuration. For [[graphite]]
// blocks, use WithGraphite. 1.x only.
func WithConfig(toml string) Option {
	return func(o *options) { o.extra = append(o.extra, toml) }
}

// WithGraphite appends [[graphite]] blocks to influxd's configuration.
// Their bind-address should be "127.0.0.1:0": GraphiteAddrs returns the
// addresses they bound, which influxd logs (at level info, at which it
// runs; graphite lines it cannot parse are logged at that level too).
// 1.x only.
func WithGraphite(toml string) Option {
	return func(o *options) { o.extra = append(o.extra, toml) }
}

// Start runs influxd until the end of the test and waits until it answers
// /ping. On failure its log is printed.
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	return start(tb, "influxd", InstallCommand, func(dir string) (*Server, error) { return Launch(dir, opts...) })
}

// Launch runs influxd with its data under dir, on loopback ports it picks,
// and waits until it answers /ping. The caller stops it with Stop. It is
// Start for programs, such as load harnesses.
func Launch(dir string, opts ...Option) (*Server, error) {
	o, bin, err := prepare(dir, opts, func() (string, error) {
		return findBinary("INFLUXD", filepath.Join(gopathFirst(), "bin", "influxd"), "influxd")
	})
	if err != nil {
		return nil, err
	}
	return start1(dir, bin, o)
}

func start1(dir, bin string, o options) (*Server, error) {
	s := &Server{process: process{
		Dir:       dir,
		scheme:    "http",
		listening: httpListening,
		probe:     "/ping",
		ready:     func(r *http.Response) bool { return r.StatusCode == http.StatusNoContent },
		log:       &Output{},
		client:    &http.Client{Timeout: 30 * time.Second},
	}}
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
	head := fmt.Sprintf(`reporting-disabled = true
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
	tail := fmt.Sprintf(`  log-enabled = false
  pprof-enabled = false
%s
[logging]
  level = "info"
`, httpsConf) + strings.Join(o.extra, "\n")
	confPath := filepath.Join(dir, "influxd.conf")
	// influxd.conf is written again at each start, with [http] bound to
	// the address of the first.
	s.command = func(httpAddr string) (*exec.Cmd, error) {
		conf := head + fmt.Sprintf("  bind-address = %q\n", httpAddr) + tail
		if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
			return nil, err
		}
		cmd := exec.Command(bin, "run", "-config", confPath)
		cmd.Env = append(append(os.Environ(), "INFLUXDB_REPORTING_DISABLED=true"), o.env...)
		return cmd, nil
	}
	if err := s.launch("127.0.0.1:0"); err != nil {
		return nil, err
	}
	return s, nil
}

// Exec runs a statement such as CREATE DATABASE. An error fails the test.
func (s *Server) Exec(tb testing.TB, q string) {
	tb.Helper()
	if _, err := s.TryQuery("", q); err != nil {
		tb.Fatalf("influxtest: %q: %v", q, err)
	}
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
