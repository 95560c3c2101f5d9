package graphite

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// What the TCP and UDP listeners promise alike is checked by the same
// code for both.

// listenBusy checks that listen on addr, which another listener holds,
// fails with an error that names the address.
func listenBusy(t *testing.T, addr net.Addr, listen func(addr string) error) {
	t.Helper()
	if err := listen(addr.String()); err == nil || !strings.Contains(err.Error(), addr.String()) {
		t.Fatalf("listening on the busy %s: %v, want an error naming it", addr, err)
	}
}

// shutdownBeforeServe checks that s, just made by a Listen that returned
// err, shuts down, and that Serve then returns at once without an error.
func shutdownBeforeServe(t *testing.T, s interface {
	Serve() error
	Shutdown(context.Context) error
}, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(); err != nil {
		t.Fatalf("Serve after Shutdown: %v", err)
	}
}

// recorder is a Handler that records everything its ConnHandlers see.
type recorder struct {
	conns chan *recConn // every NewConn, in order
}

func newRecorder() *recorder { return &recorder{conns: make(chan *recConn, 1024)} }

func (r *recorder) NewConn(remote net.Addr) ConnHandler {
	c := &recConn{
		remote:  remote,
		lineCh:  make(chan string, 4096),
		flushCh: make(chan flushEvent, 4096),
		done:    make(chan struct{}),
	}
	r.conns <- c
	return c
}

// recConn's slices belong to the connection goroutine until done is
// closed; the channels give a live, non-blocking view.
type recConn struct {
	remote     net.Addr
	lines      []string
	flushes    []int // lines per Flush
	sinceFlush int
	lastFlush  bool // the last call was a Flush
	closedOK   bool // Close came right after a Flush
	lineCh     chan string
	flushCh    chan flushEvent
	done       chan struct{}
}

func (c *recConn) Line(b []byte) {
	s := string(b)
	c.lines = append(c.lines, s)
	c.sinceFlush++
	c.lastFlush = false
	select {
	case c.lineCh <- s:
	default:
	}
}

func (c *recConn) Flush() {
	now := time.Now()
	c.flushes = append(c.flushes, c.sinceFlush)
	select {
	case c.flushCh <- flushEvent{c.sinceFlush, now}:
	default:
	}
	c.sinceFlush = 0
	c.lastFlush = true
}

func (c *recConn) Close() {
	c.closedOK = c.lastFlush
	close(c.done) // a second Close panics
}

type flushEvent struct {
	lines int
	at    time.Time
}

// failsafe bounds every wait on real sockets; nothing in these tests is
// expected to take more than a fraction of it.
const failsafe = 10 * time.Second

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(failsafe):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func waitDone(t *testing.T, c *recConn) {
	t.Helper()
	recv(t, (<-chan struct{})(c.done), "the handler to be Closed")
	if !c.closedOK {
		t.Error("Close did not come right after a Flush")
	}
}

func equalStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d %q, want %d %q", what, len(got), got, len(want), want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s[%d]: got %q, want %q", what, i, got[i], want[i])
		}
	}
}

func equalInts(t *testing.T, what string, got, want []int) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: got %v, want %v", what, got, want)
		}
	}
}

func counter(t *testing.T, what string, got, want uint64) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %d, want %d", what, got, want)
	}
}
