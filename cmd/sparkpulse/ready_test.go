package main

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/config/configtest"
)

// run --ready-file with port 0 everywhere: the file appears once the
// listeners and the admin endpoint serve, names the addresses bound, in
// the order of the blocks, replaces a file left by an earlier run, and is
// removed when run returns.
func TestReadyFile(t *testing.T) {
	readyFile := filepath.Join(t.TempDir(), "ready.json")
	if err := os.WriteFile(readyFile, []byte(`{"admin": "127.0.0.1:1"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := configtest.Write(t, config.Config{
		InfluxDB: config.InfluxDBConfig{URL: "http://127.0.0.1:1"},
		Graphite: []config.GraphiteConfig{{}, {Protocol: "udp"}, {Enabled: new(false)}},
	})
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
	if status, _ := adminGet(t, bound.Admin, "/readyz"); status != http.StatusOK {
		t.Errorf("/readyz answered %d once the file was there", status)
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
