package influxtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// listensOn tells a port this process listens on from one another
// process holds.
func TestListensOn(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	ours, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ours.Close()
	if err := checkOwn(os.Getpid(), ours.Addr().String()); err != nil {
		t.Errorf("a port this process listens on: %v", err)
	}
	// A connected socket on another port is no listener on it.
	c, err := net.Dial("tcp", ours.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := checkOwn(os.Getpid(), c.LocalAddr().String()); !errors.Is(err, errNotOurs) {
		t.Errorf("a port this process only connects from: %v, want errNotOurs", err)
	}
}

// A launch is tried again on a port taken, and only then.
func TestLaunchRetrying(t *testing.T) {
	dir := t.TempDir()
	tries := 0
	_, err := launchRetrying(dir, func(sub string) (int, error) {
		tries++
		if filepath.Base(sub) != strconv.Itoa(tries-1) {
			t.Errorf("try %d in %s", tries, sub)
		}
		if tries < 3 {
			return 0, fmt.Errorf("influxd did not start: influxd exited\nlisten tcp 127.0.0.1:1234: bind: address already in use")
		}
		return tries, nil
	})
	if err != nil || tries != 3 {
		t.Errorf("ports taken twice: %d tries, %v", tries, err)
	}
	tries = 0
	_, err = launchRetrying(dir, func(string) (int, error) { tries++; return 0, errNotOurs })
	if !errors.Is(err, errNotOurs) || tries != launchTries {
		t.Errorf("a port always taken: %d tries, %v", tries, err)
	}
	tries = 0
	_, err = launchRetrying(dir, func(string) (int, error) { tries++; return 0, errors.New("no such file") })
	if err == nil || tries != 1 {
		t.Errorf("another failure: %d tries, %v", tries, err)
	}
}

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

// The bound addresses of influxd's graphite listeners are read from its
// logfmt log, in order; other services' lines and a line not yet ended
// are not.
func TestGraphiteListening(t *testing.T) {
	log := `ts=2026-11-26T01:47:54.829321Z lvl=info msg="Listening on HTTP" log_id=16mOSKJ0000 service=httpd addr=127.0.0.1:45085 https=false
ts=2026-11-26T01:47:54.829331Z lvl=info msg="Starting graphite service" log_id=16mOSKJ0000 service=graphite addr=127.0.0.1:0 batch_size=5000 batch_timeout=1s
ts=2026-11-26T01:47:54.829728Z lvl=info msg=Listening log_id=16mOSKJ0000 service=graphite addr=127.0.0.1:0 protocol=tcp addr=127.0.0.1:45127
ts=2026-11-26T01:47:54.829729Z lvl=info msg=Listening log_id=16mOSKJ0000 service=opentsdb addr=127.0.0.1:4242
ts=2026-11-26T01:47:54.832552Z lvl=info msg=Listening log_id=16mOSKJ0000 service=graphite addr=127.0.0.1:0 protocol=udp addr=127.0.0.1:45199
ts=2026-11-26T01:47:54.832553Z lvl=info msg=Listening log_id=16mOSKJ0000 service=graphite addr=127.0.0.1:0 protocol=tcp addr=127.0.0.1:4`
	got := graphiteListening(log)
	if want := []string{"127.0.0.1:45127", "127.0.0.1:45199"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
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
