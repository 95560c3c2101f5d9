package graphite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// startTCP serves cfg on a loopback port until the test ends.
func startTCP(t testing.TB, cfg TCPConfig, h Handler) (*TCPServer, <-chan error) {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	s, err := ListenTCP(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // whatever is left is closed at once
		s.Shutdown(ctx)
	})
	return s, served
}

func dial(t testing.TB, addr net.Addr) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func sendTCP(t testing.TB, addr net.Addr, payload string) {
	t.Helper()
	if err := send(addr, payload); err != nil {
		t.Fatal(err)
	}
}

// send is sendTCP for goroutines other than the test's, which must not
// call t.Fatal.
func send(addr net.Addr, payload string) error {
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		return err
	}
	if _, err := io.WriteString(c, payload); err != nil {
		c.Close()
		return err
	}
	return c.Close()
}

// The sequence of spec §10, which InfluxDB was run against: blank lines are
// skipped, "\r\n" is stripped, and (as in InfluxDB) a last line without
// its '\n' is not taken: it is counted as cut.
func TestTCPVerifiedSequence(t *testing.T) {
	rec := newRecorder()
	s, _ := startTCP(t, TCPConfig{}, rec)
	payload := "a 1 T\n\n  \nb Inf T\nc NaN T\nd 4 T\r\ne 5 T\nf 6 T"
	payload = strings.ReplaceAll(payload, "T", T)
	sendTCP(t, s.Addr(), payload)
	c := recv(t, rec.conns, "a connection")
	waitDone(t, c)
	want := []string{"a 1 " + T, "b Inf " + T, "c NaN " + T, "d 4 " + T, "e 5 " + T}
	equalStrings(t, "lines", c.lines, want)
	counter(t, "LinesCut", s.Stats().LinesCut.Load(), 1)
	reasons := []Reason{OK, ReasonInf, ReasonNaN, OK, OK}
	for i, l := range c.lines {
		var pl Line
		if r := Parse([]byte(l), &pl); r != reasons[i] {
			t.Errorf("Parse(%q) = %v, want %v", l, r, reasons[i])
		}
	}
	if c.remote == nil {
		t.Error("TCP remote address is nil")
	}
	st := s.Stats()
	counter(t, "Lines", st.Lines.Load(), 5)
	counter(t, "Bytes", st.Bytes.Load(), uint64(len(payload)))
	counter(t, "ConnsHandled", st.ConnsHandled.Load(), 1)
	counter(t, "ConnsActive", st.ConnsActive.Load(), 0)
}

func TestTCPManyShortConnections(t *testing.T) {
	rec := newRecorder()
	s, _ := startTCP(t, TCPConfig{}, rec)
	const senders, each = 4, 50
	var wg sync.WaitGroup
	for g := range senders {
		wg.Go(func() {
			for i := range each {
				// Spark-like: a fresh connection per report.
				id := g*each + i
				if err := send(s.Addr(), fmt.Sprintf("c%d.x 1 %s\r\nc%d.y 2 %s\n", id, T, id, T)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	var got, want []string
	for id := range senders * each {
		c := recv(t, rec.conns, "a connection")
		waitDone(t, c)
		got = append(got, c.lines...)
		want = append(want, fmt.Sprintf("c%d.x 1 %s", id, T), fmt.Sprintf("c%d.y 2 %s", id, T))
	}
	slices.Sort(got)
	slices.Sort(want)
	equalStrings(t, "lines", got, want)
	st := s.Stats()
	counter(t, "ConnsHandled", st.ConnsHandled.Load(), senders*each)
	counter(t, "Lines", st.Lines.Load(), 2*senders*each)
	counter(t, "ConnsActive", st.ConnsActive.Load(), 0)
}

func TestTCPTooLongLine(t *testing.T) {
	for _, tc := range []struct {
		name    string
		maxLine int
		long    int
	}{
		{"in one read", 64, 200},
		{"across many reads", 0, 300 << 10}, // default 64 KiB limit, 300 KiB line
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder()
			s, _ := startTCP(t, TCPConfig{MaxLineLength: tc.maxLine}, rec)
			sendTCP(t, s.Addr(), "good.a 1 "+T+"\n"+strings.Repeat("x", tc.long)+" 1 "+T+"\ngood.b 2 "+T+"\n")
			c := recv(t, rec.conns, "a connection")
			waitDone(t, c)
			equalStrings(t, "lines", c.lines, []string{"good.a 1 " + T, "good.b 2 " + T})
			counter(t, "LinesTooLong", s.Stats().LinesTooLong.Load(), 1)
			counter(t, "Lines", s.Stats().Lines.Load(), 2)
		})
	}
}

// pipeConn serves one connection of a listener-less server over net.Pipe,
// whose writes reach the reader one by one: that pins read boundaries.
func pipeConn(cfg TCPConfig, h Handler) (*TCPServer, net.Conn) {
	s := newTCPServer(nil, cfg, h)
	client, server := net.Pipe()
	s.startConn(server)
	return s, client
}

func TestTCPReadBoundaries(t *testing.T) {
	long := strings.Repeat("L", 100000)
	for _, tc := range []struct {
		name    string
		maxLine int
		chunks  []string
		lines   []string
		flushes []int
		tooLong uint64
		cut     uint64
	}{
		{
			name:    "split lines",
			chunks:  []string{"ab", "c 1 2\r", "\nd 2", " 3\n", "e 3 4\n"},
			lines:   []string{"abc 1 2", "d 2 3", "e 3 4"},
			flushes: []int{1, 1, 1, 0}, // one per read that completed a line, and one at EOF
		},
		{
			// A sender that died mid-line: the rest of its last line
			// never comes, and what came is not taken.
			name:   "cut at EOF",
			chunks: []string{"a 1 2\nb 2 3\nc.executor.cpuTime.count 8123"},
			lines:  []string{"a 1 2", "b 2 3"},
			cut:    1,
		},
		{
			name:    "blank and padded lines",
			chunks:  []string{"\n\r\n \t \n", "  x 1  \r\n\u00a0y 2\u00a0\n", " \u2028"},
			lines:   []string{"x 1", "y 2"},
			flushes: []int{2, 0},
		},
		{
			name:    "too long across reads",
			maxLine: 10,
			chunks:  []string{"ok 1\nxxxxxxxx", "xxxxxxxxxxxx", "xxx\nok 2\n"},
			lines:   []string{"ok 1", "ok 2"},
			flushes: []int{1, 1, 0},
			tooLong: 1,
		},
		{
			name:    "exactly the limit, with and without \\r",
			maxLine: 10,
			chunks:  []string{"0123456789\r", "\n0123456789", "\n01234567890", "\nx\n"},
			lines:   []string{"0123456789", "0123456789", "x"},
			flushes: []int{1, 1, 1, 0},
			tooLong: 1,
		},
		{
			name:    "too long at EOF",
			maxLine: 10,
			chunks:  []string{"ok 1\n", strings.Repeat("y", 50)},
			lines:   []string{"ok 1"},
			flushes: []int{1, 0},
			tooLong: 1,
		},
		{
			name:    "limit above the block size",
			maxLine: len(long),
			chunks:  []string{long + "\n" + long + "L\n" + long + "\n"},
			lines:   []string{long, long},
			tooLong: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder()
			s, client := pipeConn(TCPConfig{MaxLineLength: tc.maxLine}, rec)
			for _, chunk := range tc.chunks {
				if _, err := io.WriteString(client, chunk); err != nil {
					t.Fatal(err)
				}
			}
			client.Close()
			c := recv(t, rec.conns, "a connection")
			waitDone(t, c)
			equalStrings(t, "lines", c.lines, tc.lines)
			if tc.flushes != nil {
				equalInts(t, "flushes", c.flushes, tc.flushes)
			}
			counter(t, "LinesTooLong", s.Stats().LinesTooLong.Load(), tc.tooLong)
			counter(t, "LinesCut", s.Stats().LinesCut.Load(), tc.cut)
			counter(t, "Lines", s.Stats().Lines.Load(), uint64(len(tc.lines)))
		})
	}
}

// advance moves a synctest bubble's fake clock forward by d, then lets
// every goroutine in the bubble run until it blocks.
func advance(d time.Duration) {
	<-time.After(d)
	synctest.Wait()
}

func isDone(c *recConn) bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Idle timeouts on a fake clock: real sockets cannot join a synctest bubble
// (their reads are not durably blocking), but net.Pipe deadlines can.
func TestTCPIdleTimeoutSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idle = time.Minute
		rec := newRecorder()
		s, client := pipeConn(TCPConfig{IdleTimeout: idle}, rec)
		c := <-rec.conns
		// Deadline armed at 0 for 0 + 1.25 × idle = 75s. Data at 10s is
		// within the first quarter, so the deadline stays.
		advance(10 * time.Second)
		io.WriteString(client, "a 1\n")
		advance(idle + 4*time.Second) // 74s: 64s of silence
		if isDone(c) {
			t.Fatal("closed before the deadline")
		}
		advance(time.Second) // 75s
		if !isDone(c) {
			t.Fatal("not closed at 1.25 × IdleTimeout after the deadline was armed")
		}
		equalStrings(t, "lines", c.lines, []string{"a 1"})
		counter(t, "IdleTimeouts", s.Stats().IdleTimeouts.Load(), 1)
		if _, err := client.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("client read after the timeout: %v, want EOF", err)
		}

		// Data more than a quarter after arming moves the deadline: silence
		// is then allowed for 1.25 × idle from that point.
		_, client = pipeConn(TCPConfig{IdleTimeout: idle}, rec)
		c = <-rec.conns
		for range 10 { // 20s apart: never idle
			advance(20 * time.Second)
			io.WriteString(client, "b 2\n")
		}
		advance(idle + 14*time.Second)
		if isDone(c) {
			t.Fatal("closed before IdleTimeout of silence")
		}
		advance(time.Second)
		if !isDone(c) {
			t.Fatal("not closed after 1.25 × IdleTimeout of silence")
		}
		if len(c.lines) != 10 {
			t.Fatalf("got %d lines, want 10", len(c.lines))
		}
	})
}

func TestTCPIdleTimeout(t *testing.T) {
	rec := newRecorder()
	s, _ := startTCP(t, TCPConfig{IdleTimeout: 100 * time.Millisecond}, rec)
	client := dial(t, s.Addr())
	defer client.Close()
	io.WriteString(client, "a 1\n")
	c := recv(t, rec.conns, "a connection")
	waitDone(t, c) // the server gives up on the silent client
	equalStrings(t, "lines", c.lines, []string{"a 1"})
	counter(t, "IdleTimeouts", s.Stats().IdleTimeouts.Load(), 1)
	client.SetReadDeadline(time.Now().Add(failsafe))
	if _, err := client.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("client read: %v, want EOF", err)
	}
}

func TestTCPMaxConnections(t *testing.T) {
	rec := newRecorder()
	s, _ := startTCP(t, TCPConfig{MaxConnections: 1}, rec)
	a := dial(t, s.Addr())
	io.WriteString(a, "a 1\n")
	ca := recv(t, rec.conns, "connection a")
	recv(t, ca.lineCh, "a's line") // a is registered and counted

	// b waits in the kernel's accept queue, its line with it, until a
	// closes: nothing is lost.
	b := dial(t, s.Addr())
	io.WriteString(b, "b 2\n")
	b.(*net.TCPConn).CloseWrite()
	defer b.Close()
	select {
	case c := <-rec.conns:
		t.Fatalf("a second connection was taken at max-connections 1: %v", c)
	case <-time.After(50 * time.Millisecond): // nothing signals "not accepted"
	}
	a.Close()
	waitDone(t, ca)
	cb := recv(t, rec.conns, "connection b")
	waitDone(t, cb)
	equalStrings(t, "lines", cb.lines, []string{"b 2"})
	if n := s.Stats().AcceptPaused.Load(); n < 1 {
		t.Errorf("AcceptPaused = %d, want at least 1", n)
	}
	counter(t, "ConnsHandled", s.Stats().ConnsHandled.Load(), 2)
}

func TestTCPShutdownWaitsForEOF(t *testing.T) {
	rec := newRecorder()
	s, served := startTCP(t, TCPConfig{}, rec)
	client := dial(t, s.Addr())
	io.WriteString(client, "a 1\n")
	c := recv(t, rec.conns, "a connection")
	recv(t, c.lineCh, "the first line")

	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	if err := recv(t, served, "Serve to return"); err != nil {
		t.Fatalf("Serve after Shutdown: %v", err)
	}
	if _, err := net.Dial("tcp", s.Addr().String()); err == nil {
		t.Error("a new connection was accepted during Shutdown")
	}
	// The open connection still delivers, up to its EOF.
	io.WriteString(client, "b 2\n")
	client.Close()
	if err := recv(t, shut, "Shutdown to return"); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if !isDone(c) {
		t.Fatal("Shutdown returned before the handler was Closed")
	}
	equalStrings(t, "lines", c.lines, []string{"a 1", "b 2"})
}

func TestTCPShutdownForcesClose(t *testing.T) {
	rec := newRecorder()
	s, served := startTCP(t, TCPConfig{}, rec)
	client := dial(t, s.Addr())
	defer client.Close()
	io.WriteString(client, "a 1\nb 2") // "b 2" is cut off: it never gets its '\n'
	c := recv(t, rec.conns, "a connection")
	recv(t, c.lineCh, "the first line")

	ctx, cancel := context.WithCancel(context.Background())
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(ctx) }()
	recv(t, served, "Serve to return")
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v while a client held its connection open", err)
	default:
	}
	cancel()
	if err := recv(t, shut, "Shutdown to return"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown: %v, want context.Canceled", err)
	}
	if !isDone(c) {
		t.Fatal("Shutdown returned before the handler was Closed")
	}
	equalStrings(t, "lines", c.lines, []string{"a 1"})
	client.SetReadDeadline(time.Now().Add(failsafe))
	if _, err := client.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("client read after a forced Shutdown: %v, want the connection closed", err)
	}
	counter(t, "ReadErrors", s.Stats().ReadErrors.Load(), 0)
}

func TestListenTCPError(t *testing.T) {
	s, _ := startTCP(t, TCPConfig{}, newRecorder())
	listenBusy(t, s.Addr(), func(addr string) error {
		_, err := ListenTCP(TCPConfig{Addr: addr}, newRecorder())
		return err
	})
}

func TestShutdownBeforeServe(t *testing.T) {
	s, err := ListenTCP(TCPConfig{Addr: "127.0.0.1:0"}, newRecorder())
	shutdownBeforeServe(t, s, err)
}

// lineCounter only counts, so BenchmarkTCP measures the listener.
type lineCounter struct {
	n    int
	done chan int
}

func (h *lineCounter) NewConn(net.Addr) ConnHandler { return h }
func (h *lineCounter) Line([]byte)                  { h.n++ }
func (h *lineCounter) Flush()                       {}
func (h *lineCounter) Close()                       { h.done <- h.n }

// BenchmarkTCP pushes Spark-shaped lines through one loopback connection;
// an op is one line.
func BenchmarkTCP(b *testing.B) {
	var payload []byte
	var ends []int // ends[i] is the length of the first i+1 lines
	for len(payload) < 1<<20 {
		for _, l := range sparkLines {
			payload = append(append(payload, l...), '\n')
			ends = append(ends, len(payload))
		}
	}
	b.SetBytes(int64(len(payload) / len(ends)))
	b.ReportAllocs()
	h := &lineCounter{done: make(chan int, 1)}
	s, _ := startTCP(b, TCPConfig{}, h)
	c := dial(b, s.Addr())
	b.ResetTimer()
	start := time.Now()
	for left := b.N; left > 0; left -= len(ends) {
		chunk := payload
		if left < len(ends) {
			chunk = payload[:ends[left-1]]
		}
		if _, err := c.Write(chunk); err != nil {
			b.Fatal(err)
		}
	}
	c.Close()
	n := <-h.done
	elapsed := time.Since(start)
	b.StopTimer()
	if n != b.N {
		b.Fatalf("handler saw %d lines, want %d", n, b.N)
	}
	b.ReportMetric(float64(n)/elapsed.Seconds(), "lines/s")
}

// A sender that trickles bytes without completing a line cannot keep its
// connection open past IdleTimeout: only complete lines move the deadline.
func TestTCPTrickleTimesOut(t *testing.T) {
	rec := newRecorder()
	s, _ := startTCP(t, TCPConfig{IdleTimeout: 200 * time.Millisecond}, rec)
	client := dial(t, s.Addr())
	defer client.Close()
	io.WriteString(client, "a 1\nb")
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(20 * time.Millisecond) // well inside IdleTimeout
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := io.WriteString(client, "x"); err != nil {
					return
				}
			}
		}
	}()
	c := recv(t, rec.conns, "a connection")
	waitDone(t, c)
	equalStrings(t, "lines", c.lines, []string{"a 1"})
	counter(t, "IdleTimeouts", s.Stats().IdleTimeouts.Load(), 1)
}

// Long partial lines held by all connections together stay within
// MaxHeldBytes: a connection whose partial line does not fit is closed and
// counted, and the others go on; a short partial line is always kept.
func TestTCPMaxHeldBytes(t *testing.T) {
	rec := newRecorder()
	s, _ := startTCP(t, TCPConfig{MaxHeldBytes: 12000}, rec)
	a := dial(t, s.Addr())
	defer a.Close()
	io.WriteString(a, "a 1\n"+strings.Repeat("A", 8000)) // one write: one block on loopback
	ca := recv(t, rec.conns, "connection a")
	recv(t, ca.flushCh, "a's first block") // its partial line is held by then

	b := dial(t, s.Addr())
	defer b.Close()
	io.WriteString(b, "b 1\n"+strings.Repeat("B", 8000))
	cb := recv(t, rec.conns, "connection b")
	waitDone(t, cb) // closed: 16 000 bytes of partial lines do not fit in 12 000
	equalStrings(t, "b's lines", cb.lines, []string{"b 1"})
	counter(t, "ConnsDropped", s.Stats().ConnsDropped.Load(), 1)

	c := dial(t, s.Addr())
	io.WriteString(c, "c 1\nc 2 "+strings.Repeat("C", 2000)) // short: kept over the budget
	cc := recv(t, rec.conns, "connection c")
	recv(t, cc.lineCh, "c's first line")
	io.WriteString(c, " "+T+"\n")
	c.Close()
	waitDone(t, cc)
	equalStrings(t, "c's lines", cc.lines, []string{"c 1", "c 2 " + strings.Repeat("C", 2000) + " " + T})

	io.WriteString(a, " 2 "+T+"\n")
	a.Close()
	waitDone(t, ca)
	equalStrings(t, "a's lines", ca.lines, []string{"a 1", strings.Repeat("A", 8000) + " 2 " + T})
	if held := s.held.Load(); held != 0 {
		t.Errorf("%d bytes still held with no connection open", held)
	}
}
