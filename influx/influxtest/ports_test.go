package influxtest

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A connection to RefusingAddr is refused, for as long as the test runs.
func TestRefusingAddr(t *testing.T) {
	addr := RefusingAddr(t)
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			t.Fatalf("a connection to %s was accepted", addr)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("a connection to %s: %v, want connection refused", addr, err)
		}
	}
	// The port is held: no listener can take it.
	if l, err := net.Listen("tcp", addr); err == nil {
		l.Close()
		t.Errorf("a listener bound %s", addr)
	}
}

// The bound addresses of influxd's listeners are read from its logfmt
// log, in order; other services' lines and a line not yet ended are not.
func TestListening(t *testing.T) {
	log := `ts=2026-11-26T01:47:54.829321Z lvl=info msg="Listening on HTTP" log_id=16mOSKJ0000 service=httpd addr=127.0.0.1:45085 https=false
ts=2026-11-26T01:47:54.829331Z lvl=info msg="Starting graphite service" log_id=16mOSKJ0000 service=graphite addr=127.0.0.1:0 batch_size=5000 batch_timeout=1s
ts=2026-11-26T01:47:54.829728Z lvl=info msg=Listening log_id=16mOSKJ0000 service=graphite addr=127.0.0.1:0 protocol=tcp addr=127.0.0.1:45127
ts=2026-11-26T01:47:54.829729Z lvl=info msg=Listening log_id=16mOSKJ0000 service=opentsdb addr=127.0.0.1:4242
ts=2026-11-26T01:47:54.832552Z lvl=info msg=Listening log_id=16mOSKJ0000 service=graphite addr=127.0.0.1:0 protocol=udp addr=127.0.0.1:45199
ts=2026-11-26T02:04:55.733575Z lvl=info msg=Listening log_id=16mPQczW000 service=tcp-listener transport=http addr=127.0.0.1:0 port=34007
ts=2026-11-26T01:47:54.832553Z lvl=info msg=Listening log_id=16mOSKJ0000 service=graphite addr=127.0.0.1:0 protocol=tcp addr=127.0.0.1:4`
	for _, c := range []struct {
		name string
		ll   listenLine
		want []string
	}{
		{"graphite", graphiteListening, []string{"127.0.0.1:45127", "127.0.0.1:45199"}},
		{"http", httpListening, []string{"127.0.0.1:45085"}},
		{"http 2.x", http2Listening, []string{"127.0.0.1:34007"}},
	} {
		if got := c.ll.find(log); !slices.Equal(got, c.want) {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

// influxd comes back on the address Start got, with its data, after Kill.
// Until then connections to it are refused.
func TestRestart(t *testing.T) {
	srv := Start(t)
	restarts(t, &srv.process, func() { srv.Exec(t, "CREATE DATABASE kept") }, func() {
		series := srv.Query(t, "", "SHOW DATABASES")
		if len(series) != 1 || !slices.ContainsFunc(series[0].Values, func(v []any) bool { return fmt.Sprint(v[0]) == "kept" }) {
			t.Errorf("databases after restart: %v", series)
		}
	})
}

// influxd 2.x likewise, onboarded still: it takes a write.
func TestRestart2(t *testing.T) {
	srv := Start2(t)
	write := func(v int) {
		srv.Write(t, "/api/v2/write?org="+Org2+"&bucket="+Bucket2, fmt.Sprintf("cpu value=%d %d", v, 1700000000000000000+v))
	}
	restarts(t, &srv.process, func() { write(1) }, func() {
		write(2)
		series := srv.Query(t, Bucket2, "SELECT value FROM cpu")
		if len(series) != 1 || len(series[0].Values) != 2 {
			t.Errorf("after restart: %v", series)
		}
	})
}

// restarts kills p once keep has stored something, checks that its
// address refuses connections, restarts it and checks that it is back on
// the same address, where kept finds what keep stored.
func restarts(t *testing.T, p *process, keep, kept func()) {
	addr := p.HTTPAddr
	if _, port, _ := net.SplitHostPort(addr); port == "0" || port == "" {
		t.Fatalf("HTTPAddr %q", addr)
	}
	keep()
	p.Kill()
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Errorf("a connection to the killed server's %s was accepted", addr)
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("a connection to the killed server's %s: %v, want connection refused", addr, err)
	}
	p.Restart(t)
	if p.HTTPAddr != addr || p.URL != "http://"+addr {
		t.Errorf("restarted on %s (%s), want %s", p.HTTPAddr, p.URL, addr)
	}
	kept()
}

// A [[graphite]] listener on port 0 is found at the address influxd bound,
// and takes lines there.
func TestGraphiteAddrs(t *testing.T) {
	srv := Start(t, WithGraphite(`
[[graphite]]
  enabled = true
  bind-address = "127.0.0.1:0"
  database = "a"
  batch-timeout = "100ms"
[[graphite]]
  enabled = true
  bind-address = "127.0.0.1:0"
  database = "b"
  batch-timeout = "100ms"
`))
	addrs := srv.GraphiteAddrs(t, 2)
	if len(addrs) != 2 || addrs[0] == addrs[1] {
		t.Fatalf("addresses %q", addrs)
	}
	for i, db := range []string{"a", "b"} {
		c, err := net.Dial("tcp", addrs[i])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fmt.Fprintf(c, "cpu %d 1700000000\n", i+1); err != nil {
			t.Fatal(err)
		}
		c.Close()
		// The listener writes its batch after batch-timeout, creating
		// its database then: poll, as influxd gives no other signal.
		deadline := time.Now().Add(30 * time.Second)
		for tick := time.NewTicker(pollInterval); ; <-tick.C {
			series, err := srv.TryQuery(db, "SELECT value FROM cpu")
			if err == nil && len(series) == 1 && len(series[0].Values) == 1 && fmt.Sprint(series[0].Values[0][1]) == strconv.Itoa(i+1) {
				tick.Stop()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("database %s: %v, %v", db, series, err)
			}
		}
	}
}

// A restart on a port another process took in between fails, saying so.
func TestRestartPortTaken(t *testing.T) {
	srv := Start(t)
	srv.Kill()
	l, err := net.Listen("tcp", srv.HTTPAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Restart(tb)
	}()
	<-done
	if !strings.Contains(tb.fatal, "another process took the port while influxd was down") {
		t.Errorf("restart on a taken port: %q", tb.fatal)
	}
}

// fatalTB records Fatalf's message and ends the goroutine, as testing
// does, without failing the test.
type fatalTB struct {
	testing.TB
	fatal string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
