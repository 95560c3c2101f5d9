package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/human"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func noEnv(string) string { return "" }

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// runCLI runs the program as a user would, minus the process.
func runCLI(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = run(context.Background(), args, noEnv, strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{nil, {"frobnicate"}, {"check", "--nope"}, {"parse", "extra"}} {
		_, _, err := runCLI(t, "", args...)
		if err == nil || exitCode(err) != 2 {
			t.Errorf("sparkpulse %q: err %v (exit %d), want a usage error (exit 2)", args, err, exitCode(err))
		}
	}
	if _, _, err := runCLI(t, "", "check", "--config", "/nonexistent.toml"); err == nil || exitCode(err) != 1 {
		t.Errorf("missing config: err %v, want exit 1", err)
	}
}

func TestVersion(t *testing.T) {
	out, _, err := runCLI(t, "", "version")
	if err != nil || !strings.HasPrefix(out, "sparkpulse ") {
		t.Fatalf("version: %q %v", out, err)
	}
}

// checkWith runs sparkpulse check with InfluxDB at url.
func checkWith(t *testing.T, url string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	env := func(k string) string {
		if k == config.EnvURL {
			return url
		}
		return ""
	}
	err := run(context.Background(), append([]string{"check"}, args...), env, nil, &out, io.Discard)
	return out.String(), err
}

func TestCheck(t *testing.T) {
	out, err := checkWith(t, "http://127.0.0.1:1", "--config", "testdata/parse/cern.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"testdata/parse/cern.toml: OK",
		`[[graphite]] #1: tcp://:2003 → bucket "graphite"`,
		"username.applicationid.process.namespace.measurement*",
		// The CERN list has a template that some paths cannot reach.
		"warning:",
		// InfluxDB is not there: noted, not an error.
		"influxdb: not reached, the targets were not checked",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check output lacks %q:\n%s", want, out)
		}
	}

	// With a state-dir: where it is, and the ingest log's bound.
	stateful := writeFile(t, "state.toml", fmt.Sprintf("state-dir = %q\n[deltas]\n  max-ingest-log-bytes = %d\n[[graphite]]\n  bind-address = \"127.0.0.1:0\"\n", t.TempDir(), 256<<20))
	out, err = checkWith(t, "http://127.0.0.1:1", "--config", stateful)
	if err != nil || !strings.Contains(out, "(the ingest log up to "+human.Bytes(256<<20)+")") {
		t.Errorf("check with a state-dir: %v\n%s", err, out)
	}

	bad := writeFile(t, "bad.toml", "[[graphite]]\ntemplates = [\"a.* host\"]\n")
	_, _, err = runCLI(t, "", "check", "--config", bad)
	if err == nil || !strings.Contains(err.Error(), "no measurement in template `host`") || exitCode(err) != 1 {
		t.Errorf("check of a bad config: %v", err)
	}
}

// TestParseGolden runs `sparkpulse parse` over testdata/parse/NAME.in, with
// NAME.toml as config when it exists (else the built-in Spark mapping), and
// compares with NAME.golden. `go test ./cmd/sparkpulse -update` rewrites them.
func TestParseGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/parse/*.in")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no inputs: %v", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(in, ".in")
		t.Run(filepath.Base(name), func(t *testing.T) {
			stdin, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			args := []string{"parse"}
			if _, err := os.Stat(name + ".toml"); err == nil {
				args = append(args, "--config", name+".toml")
			}
			out, _, err := runCLI(t, string(stdin), args...)
			if err != nil {
				t.Fatal(err)
			}
			nonBlank := 0
			for _, l := range strings.Split(string(stdin), "\n") {
				if strings.TrimSpace(l) != "" {
					nonBlank++
				}
			}
			if got := strings.Count(out, "\n"); got != nonBlank {
				t.Errorf("%d output lines for %d non-blank input lines", got, nonBlank)
			}
			golden := name + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if out != string(want) {
				t.Errorf("parse output differs from %s:\ngot\n%s\nwant\n%s", golden, out, want)
			}
		})
	}
}

// A line without timestamp (or with -1) gets the time it was read.
func TestParseStampsNow(t *testing.T) {
	before := time.Now().UnixNano()
	out, _, err := runCLI(t, "a.b 1\nc.d 2 -1\n", "parse")
	after := time.Now().UnixNano()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		ts, err := strconv.ParseInt(f[len(f)-1], 10, 64)
		if err != nil || ts < before || ts > after {
			t.Errorf("%q: timestamp not between %d and %d", line, before, after)
		}
	}
}

func TestParseLongLine(t *testing.T) {
	conf := writeFile(t, "c.toml", "[[graphite]]\nmax-line-length = 20\n")
	out, _, err := runCLI(t, "a 1 1717171717\n"+strings.Repeat("x", 50)+" 1 1717171717\nb 2 1717171717", "parse", "--config", conf)
	if err != nil {
		t.Fatal(err)
	}
	want := "a value=1 1717171717000000000\n# line longer than max-line-length (20 bytes)\nb value=2 1717171717000000000\n"
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
}

// `simulate --rounds` sends that many rounds as fast as the listener takes
// them, a TCP connection per report, and says how many lines it sent.
func TestSimulateRounds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	received := make(chan int)
	go func() {
		lines, conns := 0, 0
		for conns < 2*(1+2) { // 2 rounds of a driver and 2 executors
			c, err := ln.Accept()
			if err != nil {
				break
			}
			b, _ := io.ReadAll(c)
			c.Close()
			lines += bytes.Count(b, []byte("\n"))
			conns++
		}
		received <- lines
	}()
	out, _, err := runCLI(t, "", "simulate", "--addr", ln.Addr().String(), "--apps", "1", "--executors", "2", "--rounds", "2")
	if err != nil {
		t.Fatal(err)
	}
	got := <-received
	if !strings.Contains(out, fmt.Sprintf("sent %d lines in ", got)) || got < 2*(360+2*190) {
		t.Errorf("received %d lines; output:\n%s", got, out)
	}
}

// check looks at the configured InfluxDB as run would at start, creating
// nothing: a missing database fails it unless run would create it.
func TestCheckTarget(t *testing.T) {
	srv := influxtest.Start(t)
	cfg := func(create bool) string {
		return writeFile(t, "target.toml", fmt.Sprintf("[influxdb]\ncreate-database = %v\n\n[[graphite]]\nbind-address = \":2003\"\ndatabase = \"spark\"\n", create))
	}
	_, err := checkWith(t, srv.URL, "--config", cfg(false))
	if err == nil || !strings.Contains(err.Error(), `database "spark" does not exist`) || exitCode(err) != 1 {
		t.Errorf("missing database: %v", err)
	}
	out, err := checkWith(t, srv.URL, "--config", cfg(true))
	if err != nil || !strings.Contains(out, "target spark: InfluxDB 1.x") || !strings.Contains(out, "run creates it (create-database = true at ") {
		t.Errorf("missing database that run creates: %v\n%s", err, out)
	}
	if res := srv.Query(t, "", "SHOW DATABASES"); len(res) > 0 && slices.ContainsFunc(res[0].Values, func(v []any) bool { return v[0] == "spark" }) {
		t.Error("check created the database")
	}
	srv.Exec(t, `CREATE DATABASE "spark"`)
	out, err = checkWith(t, srv.URL, "--config", cfg(false))
	if err != nil || !strings.Contains(out, "target spark: InfluxDB 1.x") || !strings.Contains(out, ": OK") {
		t.Errorf("existing database: %v\n%s", err, out)
	}
}
