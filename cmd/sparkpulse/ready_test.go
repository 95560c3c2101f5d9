package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The tests start sparkpulse with port 0 for every listener and its admin
// endpoint, and learn the ports bound from run --ready-file: no port is
// picked beforehand, so none can be taken by another process in between.

// readyTimeout bounds how long a start may take before the test fails.
const readyTimeout = 30 * time.Second

// startBinary runs sparkpulse with conf (its ports 0) and extra
// environment variables, and waits until it is ready: p.bound holds the
// addresses it bound, p.admin the admin endpoint's.
func startBinary(t *testing.T, bin, conf string, env ...string) *proc {
	t.Helper()
	readyFile := filepath.Join(t.TempDir(), "ready.json")
	p := &proc{t: t, logs: &lockedBuffer{}}
	p.cmd = exec.Command(bin, "run", "--config", conf, "--ready-file", readyFile)
	if len(env) > 0 {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
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
		p.cmd.Process.Kill()
		t.Fatalf("sparkpulse did not start: %v\n%s", err, p.logs.String())
	}
	p.admin = p.bound.Admin
	return p
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

// run --ready-file with port 0 everywhere: the file appears once the
// listeners and the admin endpoint serve, names the addresses bound, in
// the order of the blocks, replaces a file left by an earlier run, and is
// removed when run returns.
func TestReadyFile(t *testing.T) {
	readyFile := filepath.Join(t.TempDir(), "ready.json")
	if err := os.WriteFile(readyFile, []byte(`{"admin": "127.0.0.1:1"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := writeFile(t, "run.toml", `
[influxdb]
  url = "http://127.0.0.1:1"
[admin]
  bind-address = "127.0.0.1:0"
[internal]
  enabled = false
[[graphite]]
  bind-address = "127.0.0.1:0"
[[graphite]]
  bind-address = "127.0.0.1:0"
  protocol = "udp"
[[graphite]]
  enabled = false
  bind-address = "127.0.0.1:0"
`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := newLogWatch()
	done, ended := make(chan error, 1), make(chan struct{})
	go func() {
		done <- run(ctx, []string{"run", "--config", conf, "--ready-file", readyFile}, noEnv, nil, io.Discard, logs)
		close(ended)
	}()
	// The stale file is removed before anything is bound: what is read
	// is this run's.
	var bound boundAddrs
	for {
		var err error
		if bound, err = waitReadyFile(readyFile, ended); err != nil {
			t.Fatalf("%v\n%s", err, logs.String())
		}
		if bound.Admin != "127.0.0.1:1" {
			break
		}
		runtime.Gosched()
	}
	if len(bound.Graphite) != 2 || bound.Graphite[0].Protocol != "tcp" || bound.Graphite[1].Protocol != "udp" {
		t.Fatalf("listeners %+v, want tcp then udp", bound.Graphite)
	}
	for _, a := range append([]string{bound.Admin}, bound.Graphite[0].Address, bound.Graphite[1].Address) {
		if host, port, err := net.SplitHostPort(a); err != nil || host != "127.0.0.1" || port == "0" {
			t.Errorf("address %q, want 127.0.0.1 and the port bound", a)
		}
	}
	resp, err := http.Get("http://" + bound.Admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz answered %s once the file was there", resp.Status)
	}
	c, err := net.Dial("tcp", bound.Graphite[0].Address)
	if err != nil {
		t.Fatalf("the TCP listener: %v", err)
	}
	c.Close()

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if _, err := os.Stat(readyFile); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the ready file after run returned: %v", err)
	}
}
