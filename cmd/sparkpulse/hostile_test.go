package main

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
)

// settle waits until the goroutines of this process are back to at most
// base+slack (connections and their handlers end asynchronously), and
// returns the heap in use after a collection.
func settle(t *testing.T, what string, base int) uint64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for tick := time.NewTicker(20 * time.Millisecond); runtime.NumGoroutine() > base+5; <-tick.C {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%s: %d goroutines, %d before: leaked\n%s", what, runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
	}
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// Hostile and broken input, each case followed by a canary line on a new
// connection that must be stored, and a check that goroutines and heap are
// back where they were: nothing crashes, leaks, or stalls other
// connections, and every line is a counted drop or a correct point.
func TestHostileInput(t *testing.T) {
	srv := influxtest.Start(t)
	svc := startSparkpulse(t, config.Config{
		InfluxDB: config.InfluxDBConfig{URL: srv.URL},
		Graphite: []config.GraphiteConfig{
			{Database: "hostile", Templates: []string{"t.* measurement.time", "f.* measurement.field", "measurement*"}, MaxLineLength: 65536, IdleTimeout: seconds(2)},
			{Protocol: "udp", Database: "hostile"},
		},
	})
	addr := svc.addr(0)
	baseG := runtime.NumGoroutine()
	baseHeap := settle(t, "start", baseG)
	canaries := 0
	canary := func(what string) {
		t.Helper()
		canaries++
		sendTCP(t, addr, fmt.Sprintf("canary %d %d\n", canaries, 1795300000+canaries))
		heap := settle(t, what, baseG)
		// Beyond 16 MiB of noise, the listener and the relay keep bounded
		// pools for reuse, which a burst of connections fills: up to 64
		// idle read blocks of 64 KiB and 256 idle connection handlers of
		// 48 KiB or more, about 16 MiB.
		if heap > baseHeap+32<<20 {
			t.Errorf("%s: heap in use %d MiB, %d MiB at start", what, heap>>20, baseHeap>>20)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))

	// Garbage: 4 MiB of random bytes, newlines included.
	garbage := make([]byte, 4<<20)
	for i := range garbage {
		garbage[i] = byte(rng.UintN(256))
	}
	sendTCP(t, addr, string(garbage))
	canary("garbage")

	// Lines of megabytes, then a good line on the same connection.
	huge := strings.Repeat("x", 3<<20)
	sendTCP(t, addr, huge+" 1 1795300000\n"+huge+"\n"+"after.huge 1 1795300000\n")
	canary("megabyte lines")

	// A connection that never sends a newline stays open until the idle
	// timeout, without stalling anyone.
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	silent.Write([]byte(strings.Repeat("no.newline.ever ", 1000)))
	canary("an open connection without newline")
	silent.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := silent.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("the silent connection was not closed by the idle timeout: %v", err)
	}
	silent.Close()

	// Values and timestamps: NaN, infinities, out of range, milliseconds,
	// negative, "now".
	sendTCP(t, addr, strings.Join([]string{
		"v.nan NaN 1795300000", "v.inf Infinity 1795300000", "v.minf -Infinity 1795300000", "v.big 1e400 1795300000",
		"v.ms 1 1795300000000", "v.neg 1 -1.5", "v.now 1 -1", "v.none 1", "v.hex 0x1p4 1795300000",
	}, "\n")+"\n")
	canary("values and timestamps")

	// Paths with characters line protocol escapes, invalid UTF-8, and
	// templates that produce a tag or field named "time".
	odd := []string{`co,mma`, `eq=ual`, `quo"te'`, `back\slash`, `esc\,aped`, "ünï.cøde.日本", "t.x", "f.time"}
	var payload strings.Builder
	for i, p := range odd {
		fmt.Fprintf(&payload, "%s %d 1795300000\n", p, i)
	}
	payload.WriteString("bad\xffutf8 1 1795300000\n")
	sendTCP(t, addr, payload.String())
	canary("odd paths")

	// A storm of short connections, one line each, from 16 senders.
	const storm = 5000
	var wg sync.WaitGroup
	errs := make(chan error, storm)
	for g := range 16 {
		wg.Go(func() {
			for i := g; i < storm; i += 16 {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					errs <- err
					continue
				}
				fmt.Fprintf(c, "storm %d %d\n", i, 1795300000+i)
				c.Close()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("storm: %v", err)
	}
	canary("connection storm")

	// UDP: garbage datagrams and good ones.
	sendUDP(t, svc.addr(1), string(garbage[:60000]), "udp.good 1 1795300000\n", "\x00\x01\x02", "udp.good2 2 1795300000")
	canary("udp garbage")

	svc.stop()

	// What was stored: every canary and storm line, the odd paths with
	// their exact names, nothing from the garbage that is not a valid line.
	count := func(q string) int {
		res := srv.Query(t, "hostile", q)
		if len(res) == 0 {
			return 0
		}
		return int(toFloat(t, res[0].Values[0][1]))
	}
	if n := count(`SELECT count("value") FROM "canary"`); n != canaries {
		t.Errorf("%d canaries stored, %d sent", n, canaries)
	}
	if n := count(`SELECT count("value") FROM "storm"`); n != storm {
		t.Errorf("%d storm points stored, %d sent", n, storm)
	}
	var names []string
	for _, s := range srv.Query(t, "hostile", `SHOW MEASUREMENTS`) {
		for _, row := range s.Values {
			if n := fmt.Sprint(row[0]); !strings.ContainsAny(n, "\x00") && len(n) < 64 {
				names = append(names, n)
			}
		}
	}
	for _, want := range []string{`co,mma`, `eq=ual`, `quo"te'`, `back\slash`, `esc,aped`, "ünï.cøde.日本", "after.huge", "v.neg", "v.now", "v.none", "v.hex", "udp.good", "udp.good2"} {
		if !slices.Contains(names, want) {
			t.Errorf("measurement %q not stored (have %q)", want, names)
		}
	}
	for _, gone := range []string{"v.nan", "v.inf", "v.minf", "v.big", "v.ms", "t", "f"} {
		if slices.Contains(names, gone) {
			t.Errorf("measurement %q stored; it should have been dropped", gone)
		}
	}
	for reason, min := range map[string]uint64{"nan": 1, "inf": 2, "value": 1, "timestamp_range": 1, "time_key": 2, "encode": 1, "fields": 1} {
		if got := svc.dropped(0, reason); got < min {
			t.Errorf("dropped[%s] = %d, want at least %d", reason, got, min)
		}
	}
	if got := svc.blocks[0].srv.Stats().LinesTooLong.Load(); got < 2 {
		t.Errorf("lines too long: %d", got)
	}
	if got := svc.blocks[0].srv.Stats().IdleTimeouts.Load(); got < 1 {
		t.Errorf("idle timeouts: %d", got)
	}
}

// 10 000 idle connections to the real sparkpulse binary: it keeps serving
// others, its resident memory stays small (an idle connection holds a
// goroutine, not a read buffer), and everything is released when they
// close.
func TestTenThousandIdleConnections(t *testing.T) {
	srv := influxtest.Start(t)
	bin := sparkpulseBinary(t, "")
	p := startBinary(t, bin, config.Config{
		InfluxDB: config.InfluxDBConfig{URL: srv.URL},
		// Above the default 4096: what 10 000 idle ones cost.
		Graphite: []config.GraphiteConfig{{Database: "idle", MaxConnections: 10100}},
	})
	addr, admin := p.bound.graphiteAddr(t, 0), p.admin
	// metric reads a value from /metrics once it satisfies ok.
	metric := func(name string, ok func(float64) bool) (v float64) {
		t.Helper()
		waitFor(t, p, name+" as awaited", func(m map[string]float64) bool {
			v = m[name]
			return ok(v)
		})
		return v
	}
	always := func(float64) bool { return true }
	rss := func() int64 { return p.status("VmRSS") }
	baseG := metric("go_goroutines", always)
	baseRSS := rss()
	// No socket is opened that the config did not ask for.
	want := []string{"tcp " + admin, "tcp " + addr}
	slices.Sort(want)
	if got := listening(t, p.cmd.Process.Pid); !slices.Equal(got, want) {
		t.Errorf("listening sockets %q, want %q", got, want)
	}

	const n = 10_000
	conns := make([]net.Conn, 0, n)
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("after %d connections: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	metric(`sparkpulse_graphite_connections_active{listener="tcp://127.0.0.1:0#1"}`, func(v float64) bool { return v == n })
	sendTCP(t, addr, "while.idle 1 1795300000\n")
	loaded := rss()
	gor := metric("go_goroutines", always)
	t.Logf("%d idle connections: RSS %d MiB (%d MiB before, %.1f KiB per connection), %v goroutines (%v before)",
		n, loaded>>20, baseRSS>>20, float64(loaded-baseRSS)/n/1024, gor, baseG)
	if per := (loaded - baseRSS) / n; per > 24<<10 {
		t.Errorf("%d bytes of RSS per idle connection", per)
	}
	for _, c := range conns {
		c.Close()
	}
	metric("go_goroutines", func(v float64) bool { return v <= baseG+5 })
	p.stop()
	if res := srv.Query(t, "idle", `SELECT count("value") FROM "while.idle"`); len(res) != 1 {
		t.Errorf("the line sent while 10 000 connections were open is not stored: %v\n%s", res, p.logs.String())
	}
}

// listening lists the sockets process pid listens on (TCP) or is bound to
// (UDP), as "tcp 127.0.0.1:2003", sorted, from /proc.
func listening(t *testing.T, pid int) []string {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil {
			if ino, ok := strings.CutPrefix(l, "socket:["); ok {
				inodes[strings.TrimSuffix(ino, "]")] = true
			}
		}
	}
	var out []string
	for _, table := range []string{"tcp", "tcp6", "udp", "udp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(row)
			if len(f) < 10 || !inodes[f[9]] || strings.HasPrefix(table, "tcp") && f[3] != "0A" { // 0A: LISTEN
				continue
			}
			out = append(out, strings.TrimSuffix(table, "6")+" "+procAddr(f[1]))
		}
	}
	slices.Sort(out)
	return out
}

// procAddr decodes /proc/net's "0100007F:07D3" (IPv4 in host byte order on
// little-endian machines) or its IPv6 form.
func procAddr(s string) string {
	h, p, _ := strings.Cut(s, ":")
	port, _ := strconv.ParseUint(p, 16, 16)
	raw, _ := hex.DecodeString(h)
	ip := make(net.IP, len(raw))
	for i := 0; i+4 <= len(raw); i += 4 { // each 32-bit word is little-endian
		ip[i], ip[i+1], ip[i+2], ip[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	return net.JoinHostPort(ip.String(), strconv.FormatUint(port, 10))
}
