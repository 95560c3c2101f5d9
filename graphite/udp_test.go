package graphite

import (
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/net/ipv4"
)

// startUDP serves cfg on a loopback port until the test ends.
func startUDP(t *testing.T, cfg UDPConfig, h Handler) (*UDPServer, <-chan error, net.Conn) {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	s, err := ListenUDP(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	client, err := net.Dial("udp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return s, served, client
}

func TestUDPDatagrams(t *testing.T) {
	rec := newRecorder()
	s, served, client := startUDP(t, UDPConfig{MaxLineLength: 1000}, rec)

	// The §10 sequence in one datagram: pieces split on '\n', blank ones
	// skipped, "\r" stripped, the last piece taken without its '\n'.
	payload := strings.ReplaceAll("a 1 T\n\n  \nb Inf T\nc NaN T\nd 4 T\r\ne 5 T", "T", T)
	io.WriteString(client, payload)
	c := recv(t, rec.conns, "the reader's handler")
	if c.remote != nil {
		t.Errorf("UDP remote = %v, want nil", c.remote)
	}
	want := []string{"a 1 " + T, "b Inf " + T, "c NaN " + T, "d 4 " + T, "e 5 " + T}
	for _, w := range want {
		if got := recv(t, c.lineCh, w); got != w {
			t.Fatalf("line %.80q, want %q", got, w)
		}
	}
	// One line per datagram, as Spark sends them; one ends in '\n'.
	io.WriteString(client, "f 6 "+T)
	io.WriteString(client, "g 7 "+T+"\n")
	io.WriteString(client, strings.Repeat("x", 1001)) // too long, dropped
	io.WriteString(client, "h 8 "+T)
	for _, w := range []string{"f 6 " + T, "g 7 " + T, "h 8 " + T} {
		if got := recv(t, c.lineCh, w); got != w {
			t.Fatalf("line %.80q, want %q", got, w)
		}
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, served, "Serve to return"); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	waitDone(t, c)
	sum := 0
	for _, n := range c.flushes {
		sum += n
	}
	if sum != 8 {
		t.Errorf("flushes %v cover %d lines, want 8", c.flushes, sum)
	}
	st := s.Stats()
	counter(t, "Datagrams", st.Datagrams.Load(), 5)
	counter(t, "Lines", st.Lines.Load(), 8)
	counter(t, "LinesTooLong", st.LinesTooLong.Load(), 1)
	counter(t, "Bytes", st.Bytes.Load(), uint64(len(payload)+3*len("f 6 "+T)+1+1001))
}

// Over a real socket the reader batches: a burst of one-line datagrams
// gets far fewer Flushes than datagrams. (Exact thresholds are checked on a
// fake clock below, where scheduling delays cannot trigger the timers.)
func TestUDPFlushBatches(t *testing.T) {
	rec := newRecorder()
	_, _, client := startUDP(t, UDPConfig{}, rec)
	var c *recConn
	const total, burst = 1100, 100
	for i := 0; i < total; i += burst {
		for j := i; j < i+burst; j++ {
			fmt.Fprintf(client, "m%d %d %s", j, j, T)
		}
		if c == nil {
			c = recv(t, rec.conns, "the reader's handler")
		}
		for range burst { // pace the sender so the socket never overflows
			recv(t, c.lineCh, "a line")
		}
	}
	sum, flushes := 0, 0
	for sum < total {
		f := recv(t, c.flushCh, "a Flush")
		if f.lines > udpFlushLines {
			t.Fatalf("a Flush after %d lines", f.lines)
		}
		sum += f.lines
		flushes++
	}
	if sum != total || flushes > total/10 {
		t.Fatalf("%d Flushes for %d lines", flushes, sum)
	}
}

// flushed returns the Flushes reported since the last call. In a bubble,
// after synctest.Wait, that is everything that has happened.
func flushed(c *recConn) []flushEvent {
	var fs []flushEvent
	for {
		select {
		case f := <-c.flushCh:
			fs = append(fs, f)
		default:
			return fs
		}
	}
}

// The quiet and maximum-age flushes on a fake clock, through the reader
// loop fed by net.Pipe (each write arrives as one read, like a datagram).
func TestUDPFlushTimingSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		s := &UDPServer{h: rec, maxLine: DefaultMaxLineLength}
		client, server := net.Pipe()
		result := make(chan error, 1)
		go func() { result <- s.read(pipeDatagrams{server}) }()
		c := <-rec.conns
		start := time.Now()

		io.WriteString(client, "a 1")
		advance(99 * time.Millisecond)
		io.WriteString(client, "b 2")
		advance(99 * time.Millisecond) // 198ms: 99ms since "b 2"
		if fs := flushed(c); len(fs) != 0 {
			t.Fatalf("flushed %v before 100ms of quiet", fs)
		}
		advance(time.Millisecond)
		fs := flushed(c)
		if len(fs) != 1 || fs[0].lines != 2 || fs[0].at.Sub(start) != 199*time.Millisecond {
			t.Fatalf("flushes %v, want 2 lines at 199ms", fs)
		}

		// A steady trickle never goes quiet: the oldest line bounds the wait.
		first := time.Now()
		for range 30 {
			io.WriteString(client, "c 3\n")
			advance(50 * time.Millisecond)
		}
		fs = flushed(c)
		if len(fs) != 1 || fs[0].lines != 20 || fs[0].at.Sub(first) != udpMaxAge {
			t.Fatalf("flushes %v, want 20 lines %v after the first", fs, udpMaxAge)
		}
		advance(udpQuiet)
		if fs = flushed(c); len(fs) != 1 || fs[0].lines != 10 {
			t.Fatalf("flushes %v, want the last 10 lines once quiet", fs)
		}

		// A burst: Flush every 1024 lines, the rest once quiet.
		for i := range 2100 {
			fmt.Fprintf(client, "e %d", i)
		}
		synctest.Wait()
		if fs = flushed(c); len(fs) != 2 || fs[0].lines != 1024 || fs[1].lines != 1024 {
			t.Fatalf("flushes %v, want 2 of 1024 lines", fs)
		}
		advance(udpQuiet)
		if fs = flushed(c); len(fs) != 1 || fs[0].lines != 52 {
			t.Fatalf("flushes %v, want the last 52 lines once quiet", fs)
		}

		// Nothing pending: no Flush however long it stays quiet.
		advance(time.Hour)
		if fs = flushed(c); len(fs) != 0 {
			t.Fatalf("flushes %v while idle", fs)
		}
		io.WriteString(client, "d 4")
		client.Close() // the reader ends: final Flush, then Close
		if err := <-result; err != nil {
			t.Fatal(err)
		}
		equalInts(t, "flushes", c.flushes, []int{2, 20, 10, 1024, 1024, 52, 1})
		if !isDone(c) || !c.closedOK {
			t.Fatal("handler not Closed right after a Flush")
		}
	})
}

func TestUDPReadBuffer(t *testing.T) {
	s, _, _ := startUDP(t, UDPConfig{ReadBuffer: 256 << 10}, newRecorder())
	got := s.ReadBufferGranted()
	if runtime.GOOS == "linux" && got <= 0 {
		t.Fatalf("ReadBufferGranted = %d", got)
	}
	t.Logf("asked for 256 KiB, granted %d bytes", got)
}

func TestListenUDPError(t *testing.T) {
	s, _, _ := startUDP(t, UDPConfig{}, newRecorder())
	listenBusy(t, s.Addr(), func(addr string) error {
		_, err := ListenUDP(UDPConfig{Addr: addr}, newRecorder())
		return err
	})
}

func TestUDPShutdownBeforeServe(t *testing.T) {
	s, err := ListenUDP(UDPConfig{Addr: "127.0.0.1:0"}, newRecorder())
	shutdownBeforeServe(t, s, err)
}

// pipeDatagrams reads one write of a net.Pipe per batch, as one datagram.
type pipeDatagrams struct{ net.Conn }

func (p pipeDatagrams) ReadBatch(ms []ipv4.Message, _ int) (int, error) {
	n, err := p.Read(ms[0].Buffers[0])
	if err != nil {
		return 0, err
	}
	ms[0].N = n
	return 1, nil
}

// A burst is read in batches of datagrams, on IPv4, IPv6 and dual-stack
// sockets alike: every line arrives once, in order, and the counters agree.
func TestUDPBatchReadFamilies(t *testing.T) {
	for _, tc := range []struct{ listen, dial string }{
		{"127.0.0.1:0", "127.0.0.1"},
		{"[::1]:0", "::1"},
		{":0", "127.0.0.1"},
		{":0", "::1"},
	} {
		t.Run(tc.listen+"←"+tc.dial, func(t *testing.T) {
			rec := newRecorder()
			s, err := ListenUDP(UDPConfig{Addr: tc.listen, ReadBuffer: 4 << 20}, rec)
			if err != nil {
				t.Fatal(err)
			}
			_, port, _ := net.SplitHostPort(s.Addr().String())
			client, err := net.Dial("udp", net.JoinHostPort(tc.dial, port))
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			// Sent before Serve runs, so they wait in the socket together
			// and are read several per call.
			const total = 500
			for i := range total {
				fmt.Fprintf(client, "m%d %d %s", i, i, T)
			}
			served := make(chan error, 1)
			go func() { served <- s.Serve() }()
			c := recv(t, rec.conns, "the reader's handler")
			for i := range total {
				if got, want := recv(t, c.lineCh, "a line"), fmt.Sprintf("m%d %d %s", i, i, T); got != want {
					t.Fatalf("line %d = %q, want %q", i, got, want)
				}
			}
			if err := s.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := recv(t, served, "Serve to return"); err != nil {
				t.Fatal(err)
			}
			counter(t, "Datagrams", s.Stats().Datagrams.Load(), total)
			counter(t, "Lines", s.Stats().Lines.Load(), total)
		})
	}
}
