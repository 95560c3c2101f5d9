package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"golang.org/x/sys/unix"

	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/config/configtest"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
	"github.com/sparkpulse/sparkpulse/relay"
)

// A test starts sparkpulse from a configuration it builds in code, a
// config.Config that holds what the test is about; configtest.Write adds
// what every test wants and writes the file `sparkpulse run` reads. The same
// configuration runs in-process (startSparkpulse, startService), where the
// test reads the pipeline's own state, or as the built binary
// (startBinary), which the test can kill. Every listener and the admin
// endpoint bind port 0, and the test learns the ports bound from the
// pipeline or from run --ready-file: no port is picked beforehand, so none
// can be taken by another process in between.

// seconds is a duration setting of n seconds.
func seconds(n int) config.Duration { return config.Duration(time.Duration(n) * time.Second) }

// environ is the environment of env's "KEY=value" pairs alone, as a
// process started with them reads it (a later pair wins).
func environ(env []string) func(string) string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return envOf(m)
}

// testService runs the whole service in-process, as `sparkpulse run` would.
type testService struct {
	*pipeline
	t       *testing.T
	stopped bool
}

// startSparkpulse starts sparkpulse in-process with cfg (see configtest.Write)
// and env ("KEY=value", its whole environment), logging to the test, and
// returns once its listeners serve. It stops at the end of the test.
func startSparkpulse(t *testing.T, cfg config.Config, env ...string) *testService {
	t.Helper()
	s, err := startService(t, cfg, zaptest.NewLogger(t), env...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// startService is startSparkpulse logging to log, returning the error of
// a start that fails.
func startService(t *testing.T, cfg config.Config, log *zap.Logger, env ...string) (*testService, error) {
	t.Helper()
	plan, err := config.Load(&config.Overrides{Config: configtest.Write(t, cfg)}, environ(env))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := startPipeline(ctx, plan, log)
	if err != nil {
		return nil, err
	}
	<-p.Ready()
	s := &testService{pipeline: p, t: t}
	t.Cleanup(s.stop)
	return s, nil
}

// addr is the bound address of the n-th listener (from 0).
func (s *testService) addr(n int) string { return s.blocks[n].srv.Addr().String() }

// flush waits until the points of every line read so far are in InfluxDB.
func (s *testService) flush() {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Flush(ctx); err != nil {
		s.t.Fatal(err)
	}
}

// shutdown stops the service as `sparkpulse run` does on a signal, giving
// it timeout, and returns how long it took and what it returned.
func (s *testService) shutdown(timeout time.Duration) (time.Duration, error) {
	s.stopped = true
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	began := time.Now()
	err := s.Shutdown(ctx)
	return time.Since(began), err
}

// stop shuts the service down, which delivers everything it has received;
// after it, InfluxDB holds every point. After a stop or a shutdown it does
// nothing.
func (s *testService) stop() {
	if s.stopped {
		return
	}
	if _, err := s.shutdown(30 * time.Second); err != nil {
		s.t.Errorf("shutdown: %v", err)
	}
}

// dropped reports the relay's drop counter for a reason label.
func (s *testService) dropped(n int, reason string) uint64 {
	return s.blocks[n].relay.Stats().Dropped[relayReason(s.t, reason)].Load()
}

// relayReason finds a drop reason by its label.
func relayReason(t *testing.T, label string) relay.Reason {
	t.Helper()
	for i := relay.Reason(1); i < relay.NumReasons; i++ {
		if i.String() == label {
			return i
		}
	}
	t.Fatalf("no drop reason %q", label)
	return 0
}

// readyTimeout bounds how long a start may take before the test fails.
const readyTimeout = 30 * time.Second

// sparkpulseBinary is sparkpulse built for the tests that run it as a
// process, once for them all (TestMain removes it); with -short they are
// skipped, saying why they are long.
func sparkpulseBinary(t *testing.T, why string) string {
	t.Helper()
	if testing.Short() && why != "" {
		t.Skip(why)
	}
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// buildBinary returns $SPARKPULSE_BIN, the binary `make check` builds
// once for every package's tests, or builds one for this test process.
var buildBinary = sync.OnceValues(func() (string, error) {
	if p := os.Getenv("SPARKPULSE_BIN"); p != "" {
		return p, nil
	}
	dir, err := os.MkdirTemp("", "sparkpulse-bin")
	if err != nil {
		return "", err
	}
	binaryDir.Store(&dir)
	bin := filepath.Join(dir, "sparkpulse")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// binaryDir is where buildBinary built sparkpulse, once it has.
var binaryDir atomic.Pointer[string]

// TestMain removes the binary the tests built, if they did.
func TestMain(m *testing.M) {
	code := m.Run()
	if dir := binaryDir.Load(); dir != nil {
		os.RemoveAll(*dir)
	}
	os.Exit(code)
}

// proc is sparkpulse running as a process, with the addresses it bound
// and its admin endpoint's.
type proc struct {
	t     *testing.T
	cmd   *exec.Cmd
	conf  string // its config file
	bound boundAddrs
	admin string
	logs  *influxtest.Output
}

// startBinary runs the sparkpulse binary bin with cfg (see configtest.Write)
// and env ("KEY=value", added to this process's environment), and waits
// until it is ready: p.bound holds the addresses it bound, p.admin the
// admin endpoint's. It is killed at the end of the test, if it still runs.
func startBinary(t *testing.T, bin string, cfg config.Config, env ...string) *proc {
	t.Helper()
	readyFile := filepath.Join(t.TempDir(), "ready.json")
	p := &proc{t: t, conf: configtest.Write(t, cfg), logs: &influxtest.Output{}}
	p.cmd = exec.Command(bin, "run", "--config", p.conf, "--ready-file", readyFile)
	if len(env) > 0 {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.cmd.Process.Kill() })
	exited := make(chan struct{})
	go func() {
		// Waits for the exit without reaping it, which cmd.Wait does.
		var info unix.Siginfo
		for unix.Waitid(unix.P_PID, p.cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
		}
		close(exited)
	}()
	var err error
	if p.bound, err = waitReadyFile(readyFile, exited); err != nil {
		t.Fatalf("sparkpulse did not start: %v\n%s", err, p.logs.String())
	}
	p.admin = p.bound.Admin
	return p
}

// startRun runs `sparkpulse run` in-process with the config file conf,
// logging to logs, and waits until it serves: bound holds the addresses
// it bound; done receives run's error once ctx is cancelled.
func startRun(t *testing.T, ctx context.Context, conf string, logs interface {
	io.Writer
	fmt.Stringer
}) (bound boundAddrs, done <-chan error) {
	t.Helper()
	readyFile := filepath.Join(t.TempDir(), "ready.json")
	errc, ended := make(chan error, 1), make(chan struct{})
	go func() {
		errc <- run(ctx, []string{"run", "--config", conf, "--ready-file", readyFile}, noEnv, nil, io.Discard, logs)
		close(ended) // errc holds run's error by then
	}()
	bound, err := waitReadyFile(readyFile, ended)
	if err != nil {
		select {
		case <-ended:
			err = fmt.Errorf("%v: %v", err, <-errc)
		default:
		}
		t.Fatalf("sparkpulse did not start: %v\n%s", err, logs.String())
	}
	return bound, errc
}

// waitReadyFile waits until run has written its ready file (it renames
// it into place whole), or exited is closed, or readyTimeout has passed.
// run is another process or goroutine with no other signal than the file,
// so its existence is polled.
func waitReadyFile(path string, exited <-chan struct{}) (boundAddrs, error) {
	deadline := time.NewTimer(readyTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		data, err := os.ReadFile(path)
		if err == nil {
			var a boundAddrs
			if err := json.Unmarshal(data, &a); err != nil {
				return a, err
			}
			return a, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return boundAddrs{}, err
		}
		select {
		case <-exited:
			return boundAddrs{}, errors.New("it exited")
		case <-deadline.C:
			return boundAddrs{}, errors.New("no ready file within " + readyTimeout.String())
		case <-tick.C:
		}
	}
}

// graphiteAddr is the address bound by the n-th enabled [[graphite]]
// block, from 0.
func (a boundAddrs) graphiteAddr(t *testing.T, n int) string {
	t.Helper()
	if n >= len(a.Graphite) {
		t.Fatalf("%d listeners bound, want at least %d: %+v", len(a.Graphite), n+1, a)
	}
	return a.Graphite[n].Address
}

// kill kills sparkpulse with SIGKILL, as a crash or an OOM kill would, and
// waits until it has exited.
func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

// stop sends SIGTERM and fails the test unless sparkpulse exits cleanly.
func (p *proc) stop() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(unix.SIGTERM); err != nil {
		p.t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		p.t.Fatalf("sparkpulse exited: %v\n%s", err, p.logs.String())
	}
}

// adminGet gets path from the admin endpoint at addr and returns the
// answer's status and body; a request that fails fails the test.
func adminGet(t *testing.T, addr, path string) (status int, body string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// metrics reads /metrics into name{labels} → value.
func (p *proc) metrics() map[string]float64 {
	p.t.Helper()
	resp, err := http.Get("http://" + p.admin + "/metrics")
	if err != nil {
		p.t.Fatalf("/metrics: %v\n%s", err, p.logs.String())
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "#") {
			continue
		}
		if i := strings.LastIndexByte(l, ' '); i > 0 {
			v, _ := strconv.ParseFloat(l[i+1:], 64)
			out[l[:i]] = v
		}
	}
	return out
}

// status reads a "Name: value kB" line of /proc/<pid>/status, in bytes.
func (p *proc) status(name string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		p.t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// until polls cond, a state of sparkpulse or of what it wrote, until it
// holds, failing the test after limit with sparkpulse's log.
func (p *proc) until(limit time.Duration, what string, cond func() bool) {
	p.t.Helper()
	held := false
	defer func() {
		if !held { // waitUntil failed the test
			p.t.Log(p.logs.String())
		}
	}()
	waitUntil(p.t, limit, what, cond)
	held = true
}

// waitFor polls the process's /metrics until ok, failing after 30 s with
// its log.
func waitFor(t *testing.T, p *proc, what string, ok func(map[string]float64) bool) {
	t.Helper()
	p.until(30*time.Second, what, func() bool { return ok(p.metrics()) })
}
