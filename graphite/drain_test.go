package graphite

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// tally counts the lines of all connections and signals each handler Close.
type tally struct {
	mu     sync.Mutex
	lines  int
	closed chan struct{}
}

func newTally() *tally                        { return &tally{closed: make(chan struct{}, 1000)} }
func (h *tally) NewConn(net.Addr) ConnHandler { return h }
func (h *tally) Line([]byte)                  { h.mu.Lock(); h.lines++; h.mu.Unlock() }
func (h *tally) Flush()                       {}
func (h *tally) Close()                       { h.closed <- struct{}{} }
func (h *tally) count() int                   { h.mu.Lock(); defer h.mu.Unlock(); return h.lines }
func shutdown(t *testing.T, s interface{ Shutdown(context.Context) error }) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// Connections a sender has completed, written to and closed, but which
// still wait in the accept backlog when Shutdown begins, are read too:
// closing the listener at once would reset them and lose their lines.
func TestTCPShutdownTakesBacklog(t *testing.T) {
	h := newTally()
	s, err := ListenTCP(TCPConfig{Addr: "127.0.0.1:0"}, h)
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve()
	sendTCP(t, s.Addr(), "first 1 "+T+"\n")
	<-h.closed // Serve is running
	const conns = 50
	for i := range conns {
		sendTCP(t, s.Addr(), fmt.Sprintf("c%d 1 %s\nc%d 2 %s\n", i, T, i, T))
	}
	shutdown(t, s)
	if got, want := h.count(), 1+2*conns; got != want {
		t.Errorf("%d lines read, want %d", got, want)
	}
}

// Datagrams the kernel has queued before Shutdown are read, not dropped.
func TestUDPShutdownDrainsQueue(t *testing.T) {
	h := newTally()
	s, err := ListenUDP(UDPConfig{Addr: "127.0.0.1:0", ReadBuffer: 4 << 20}, h)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	client, err := net.Dial("udp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	const datagrams = 500
	for i := range datagrams {
		io.WriteString(client, fmt.Sprintf("d%d 1 %s\n", i, T))
	}
	shutdown(t, s)
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if got := h.count(); got != datagrams {
		t.Errorf("%d lines read, want %d", got, datagrams)
	}
}

// A Shutdown that comes before Serve has run (its goroutine not yet
// scheduled) still takes the backlog.
func TestTCPShutdownBeforeServe(t *testing.T) {
	h := newTally()
	s, err := ListenTCP(TCPConfig{Addr: "127.0.0.1:0"}, h)
	if err != nil {
		t.Fatal(err)
	}
	const conns = 20
	for i := range conns {
		sendTCP(t, s.Addr(), fmt.Sprintf("c%d 1 %s\n", i, T))
	}
	shutdown(t, s)
	if got := h.count(); got != conns {
		t.Errorf("%d lines read, want %d", got, conns)
	}
	if err := s.Serve(); err != nil {
		t.Errorf("Serve after Shutdown: %v", err)
	}
}

// While Admit holds the accept loop, connections wait in the accept queue,
// their lines unread; once it lets go they are taken and read in full.
func TestTCPAdmit(t *testing.T) {
	g := newTally()
	waiting, open := make(chan struct{}, 100), make(chan struct{})
	admit := func(done <-chan struct{}) {
		waiting <- struct{}{}
		select {
		case <-open:
		case <-done:
		}
	}
	s, _ := startTCP(t, TCPConfig{Admit: admit}, g)
	<-waiting // the accept loop is in Admit
	const conns = 5
	for i := range conns {
		sendTCP(t, s.Addr(), fmt.Sprintf("c%d 1 %s\n", i, T))
	}
	if n := s.Stats().ConnsHandled.Load(); n != 0 {
		t.Fatalf("%d connections taken while the gate was shut", n)
	}
	close(open)
	for range conns {
		<-g.closed
	}
	if got := g.count(); got != conns {
		t.Errorf("%d lines read, want %d", got, conns)
	}
}
