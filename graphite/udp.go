package graphite

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/ipv4"
)

// UDPConfig configures ListenUDP.
type UDPConfig struct {
	Addr          string
	ReadBuffer    int // SO_RCVBUF to ask for; 0 keeps the OS default
	MaxLineLength int // default 64 KiB; longer lines are dropped and counted
}

// WithDefaults fills zero values.
func (c UDPConfig) WithDefaults() UDPConfig {
	c.MaxLineLength = cmp.Or(c.MaxLineLength, DefaultMaxLineLength)
	return c
}

// Validate rejects negative sizes; zero values select the defaults.
func (c UDPConfig) Validate() error {
	return errors.Join(
		negative("max-line-length", c.MaxLineLength),
		negative("udp-read-buffer", c.ReadBuffer))
}

// When the UDP reader flushes its handler. Spark sends one line per
// datagram, so flushing per datagram would defeat the handler's batching.
const (
	udpFlushLines = 1024                   // this many lines are pending
	udpQuiet      = 100 * time.Millisecond // no datagram for this long (a report has ended)
	udpMaxAge     = time.Second            // the oldest pending line is this old (a steady trickle never goes quiet)
)

// udpMaxErrors consecutive read errors stop the reader rather than let it spin.
const udpMaxErrors = 100

// UDPServer reads Graphite lines from UDP datagrams. A single goroutine,
// the one running Serve, reads batches of datagrams: one reader keeps a
// single ConnHandler that batches across datagrams.
type UDPServer struct {
	conn    *net.UDPConn
	h       Handler
	maxLine int
	granted int
	queued  func() bool // whether a datagram waits in the socket; nil if unknown
	stats   Stats

	mu       sync.Mutex
	serving  bool
	closing  bool
	draining atomic.Bool   // Shutdown has begun: read what is queued, then stop
	done     chan struct{} // closed when the reader has Flushed and Closed its handler
}

// udpDrainQuiet ends the drain at Shutdown: datagrams already in the
// socket's receive queue are read until none has come for this long.
const udpDrainQuiet = 20 * time.Millisecond

// ListenUDP binds cfg.Addr at once and applies cfg.ReadBuffer; reading
// starts once Serve runs.
func ListenUDP(cfg UDPConfig, h Handler) (*UDPServer, error) {
	pc, err := net.ListenPacket("udp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("graphite: UDP listener on %q: %w", cfg.Addr, err)
	}
	conn := pc.(*net.UDPConn)
	if cfg.ReadBuffer > 0 {
		if err := conn.SetReadBuffer(cfg.ReadBuffer); err != nil {
			conn.Close()
			return nil, fmt.Errorf("graphite: UDP listener on %q: setting the read buffer to %d: %w", cfg.Addr, cfg.ReadBuffer, err)
		}
	}
	s := &UDPServer{conn: conn, h: h, maxLine: cfg.MaxLineLength, done: make(chan struct{})}
	if s.maxLine <= 0 {
		s.maxLine = DefaultMaxLineLength
	}
	s.granted = readBufferSize(conn)
	s.queued = func() bool { return bytesQueued(conn) > 0 }
	return s, nil
}

// Addr returns the bound address.
func (s *UDPServer) Addr() net.Addr { return s.conn.LocalAddr() }

// Stats returns the live counters.
func (s *UDPServer) Stats() *Stats { return &s.stats }

// ReadBufferGranted returns the socket's SO_RCVBUF as the kernel reports
// it, or 0 where that cannot be read. Linux caps requests at
// net.core.rmem_max and reports twice the usable size, for its bookkeeping.
func (s *UDPServer) ReadBufferGranted() int { return s.granted }

// Serve reads datagrams until Shutdown, after which it returns nil.
func (s *UDPServer) Serve() error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil
	}
	if s.serving {
		s.mu.Unlock()
		return errors.New("graphite: UDPServer.Serve called twice")
	}
	s.serving = true
	s.mu.Unlock()
	defer close(s.done)
	return s.read(ipv4.NewPacketConn(s.conn))
}

// Shutdown lets the reader take the datagrams already queued in the
// socket (the kernel accepted them; dropping them would lose lines), then
// closes the socket and waits until the reader has Flushed and Closed its
// handler, or until ctx ends (then it returns ctx.Err()).
func (s *UDPServer) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	serving := s.serving
	s.serving = true // a later Serve returns at once
	s.mu.Unlock()
	s.draining.Store(true)
	s.conn.SetReadDeadline(time.Now().Add(udpDrainQuiet))
	defer s.conn.Close()
	if !serving {
		// Serve never ran: drain here, so queued datagrams are not lost.
		err := s.read(ipv4.NewPacketConn(s.conn))
		close(s.done)
		return err
	}
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// setDeadline sets the reader's deadline, unless Shutdown has begun
// draining: then the drain deadline wins. Shutdown stores draining before it
// sets its deadline, so whichever order the two goroutines run in, the
// drain deadline is the last one set.
func (s *UDPServer) setDeadline(conn datagramConn, t time.Time) {
	conn.SetReadDeadline(t)
	if s.draining.Load() {
		conn.SetReadDeadline(time.Now().Add(udpDrainQuiet))
	}
}

// datagramConn is what the reader needs from a socket: ipv4.PacketConn
// (or ipv6's, the same method) reads a batch of datagrams per system call,
// recvmmsg on Linux. Tests substitute net.Pipe, one write per datagram.
type datagramConn interface {
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
	SetReadDeadline(t time.Time) error
}

// udpBatch datagrams are read per system call, each into its own buffer of
// blockSize bytes (the largest datagram fits). Spark sends a datagram per
// line, so one read per datagram cost more than everything after it. The
// 2 MiB are allocated once per listener; the kernel backs only the pages
// datagrams are written to.
const udpBatch = 32

// read is the reader loop. The read deadline is only set while lines are
// pending, to notice when the senders go quiet.
func (s *UDPServer) read(conn datagramConn) error {
	ch := s.h.NewConn(nil)
	sp := splitter{ch: ch, maxLine: s.maxLine}
	ms := make([]ipv4.Message, udpBatch)
	mem := make([]byte, udpBatch*blockSize)
	for i := range ms {
		ms[i].Buffers = [][]byte{mem[i*blockSize : (i+1)*blockSize : (i+1)*blockSize]}
	}
	pending := 0 // lines handed on since the last Flush
	var first, last time.Time
	armed := false
	errs := 0
	var err error
	for {
		var n int
		n, err = conn.ReadBatch(ms, 0)
		if err == nil && n > 0 {
			errs = 0
			if s.draining.Load() {
				conn.SetReadDeadline(time.Now().Add(udpDrainQuiet))
				armed = true
			}
			got, size := 0, 0
			for i := range ms[:n] {
				before := sp.lines
				sp.datagram(ms[i].Buffers[0][:ms[i].N])
				size += ms[i].N
				if k := int(sp.lines - before); k > 0 {
					got += k
					if pending += k; pending >= udpFlushLines {
						ch.Flush()
						pending = 0
					}
				}
			}
			s.stats.Datagrams.Add(uint64(n))
			s.stats.Bytes.Add(uint64(size))
			sp.publish(&s.stats)
			if got == 0 || pending == 0 {
				continue
			}
			now := time.Now()
			if pending <= got {
				first = now
			}
			last = now
			if !armed {
				s.setDeadline(conn, now.Add(udpQuiet))
				armed = true
			}
			continue
		}
		if err == nil {
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if s.draining.Load() {
				// The deadline may have passed before the reader got to
				// the queue at all (Shutdown set it, then the reader's
				// goroutine waited for a CPU): only an empty queue ends
				// the drain.
				if s.queued != nil && s.queued() {
					conn.SetReadDeadline(time.Now().Add(udpDrainQuiet))
					continue
				}
				err = nil
				break // the queue is empty: Shutdown may close the socket
			}
			armed = false
			if pending > 0 {
				now := time.Now()
				due := last.Add(udpQuiet)
				if old := first.Add(udpMaxAge); old.Before(due) {
					due = old
				}
				if now.Before(due) {
					s.setDeadline(conn, due)
					armed = true
					continue
				}
				ch.Flush()
				pending = 0
			}
			s.setDeadline(conn, time.Time{})
			continue
		}
		if errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) {
			err = nil
			break
		}
		s.stats.ReadErrors.Add(1)
		if errs++; errs >= udpMaxErrors {
			err = fmt.Errorf("graphite: UDP reader stopped after %d consecutive errors: %w", errs, err)
			break
		}
	}
	ch.Flush()
	ch.Close()
	return err
}

// datagram hands on the lines of one datagram; the last needs no '\n'.
func (sp *splitter) datagram(d []byte) {
	for len(d) > 0 {
		i := bytes.IndexByte(d, '\n')
		if i < 0 {
			sp.line(d)
			return
		}
		sp.line(d[:i])
		d = d[i+1:]
	}
}
