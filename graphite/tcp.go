package graphite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// TCPConfig configures ListenTCP. Zero values select the defaults.
type TCPConfig struct {
	Addr string // e.g. ":2003" or "127.0.0.1:0"
	// MaxLineLength bounds a line, without its "\n" or "\r\n" (default
	// 64 KiB). A longer line is dropped and counted in LinesTooLong; the
	// connection goes on with the next line.
	MaxLineLength int
	// IdleTimeout closes a connection that sends nothing for this long,
	// counted in IdleTimeouts (default 2m; negative disables). The
	// deadline is only moved every IdleTimeout/4, so a silent connection
	// is closed after between 1 and 1.25 times IdleTimeout.
	IdleTimeout time.Duration
	// MaxConnections caps open connections (0 = unlimited). Connections
	// beyond it are closed as soon as they are accepted and counted in
	// ConnsRejected.
	MaxConnections int
	// Admit, when set, is called before each accept and returns when a new
	// connection may be taken, or when done is closed: while the points'
	// destination has no room, new connections wait in the kernel's accept
	// queue, and their senders block once it is full, instead of being
	// taken on, each holding buffers and a goroutine until there is room.
	Admit func(done <-chan struct{})
}

// WithDefaults fills zero values.
func (c TCPConfig) WithDefaults() TCPConfig {
	if c.MaxLineLength == 0 {
		c.MaxLineLength = DefaultMaxLineLength
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	return c
}

// Validate rejects negative sizes; zero values select the defaults.
func (c TCPConfig) Validate() error {
	var errs []error
	if c.MaxLineLength < 0 {
		errs = append(errs, fmt.Errorf("max-line-length %d: must not be negative", c.MaxLineLength))
	}
	if c.MaxConnections < 0 {
		errs = append(errs, fmt.Errorf("max-connections %d: must not be negative", c.MaxConnections))
	}
	return errors.Join(errs...)
}

// TCPServer reads Graphite lines from TCP connections, one goroutine per
// connection. Spark opens a new connection for every report, so the
// per-connection cost is kept to a pooled buffer and a map entry.
type TCPServer struct {
	ln       net.Listener
	h        Handler
	admit    func(done <-chan struct{})
	maxLine  int
	idle     time.Duration
	maxConns int
	// bufs are idle block buffers of max(blockSize, maxLine+2) bytes: a
	// bounded free list, which garbage collections do not empty as they
	// do a sync.Pool.
	bufs    chan *[]byte
	bufSize int
	stats   Stats

	mu        sync.Mutex
	conns     map[net.Conn]struct{} // open connections, for Shutdown to close
	closing   bool                  // Shutdown has begun
	refusing  bool                  // the accept backlog is drained: start no more connections
	serving   bool                  // Serve is running
	stop      chan struct{}         // closed when Shutdown begins
	serveDone chan struct{}         // closed when Serve returns
	wg        sync.WaitGroup        // one count per connection until its handler is Closed
}

// acceptDrain is how long Shutdown keeps accepting: connections the kernel
// has already completed (a sender has written and may have closed) wait in
// the backlog, and closing the listener would reset them and lose their
// lines.
const acceptDrain = 20 * time.Millisecond

// ListenTCP binds cfg.Addr at once, so that a bad address fails start-up;
// connections are accepted once Serve runs.
func ListenTCP(cfg TCPConfig, h Handler) (*TCPServer, error) {
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("graphite: TCP listener on %q: %w", cfg.Addr, err)
	}
	return newTCPServer(ln, cfg, h), nil
}

func newTCPServer(ln net.Listener, cfg TCPConfig, h Handler) *TCPServer {
	cfg = cfg.WithDefaults()
	s := &TCPServer{
		ln:        ln,
		h:         h,
		admit:     cfg.Admit,
		maxLine:   cfg.MaxLineLength,
		idle:      cfg.IdleTimeout,
		maxConns:  cfg.MaxConnections,
		conns:     make(map[net.Conn]struct{}),
		stop:      make(chan struct{}),
		serveDone: make(chan struct{}),
	}
	// Room for the longest acceptable line and its "\r\n", so a line that
	// may still be good never has to be cut.
	s.bufSize = max(blockSize, s.maxLine+2)
	s.bufs = make(chan *[]byte, maxIdleBufs)
	return s
}

// Addr returns the bound address.
func (s *TCPServer) Addr() net.Addr { return s.ln.Addr() }

// Stats returns the live counters.
func (s *TCPServer) Stats() *Stats { return &s.stats }

// Serve accepts connections until Shutdown, after which it returns nil.
func (s *TCPServer) Serve() error {
	s.mu.Lock()
	if s.closing || s.serving {
		s.mu.Unlock()
		return nil
	}
	s.serving = true
	s.mu.Unlock()
	defer close(s.serveDone)
	// Closed before Serve returns: once the backlog is drained, a new
	// connection is refused at once rather than completed by the kernel
	// and reset when Shutdown gets to closing the listener.
	defer s.ln.Close()
	var delay time.Duration
	for {
		if s.admit != nil {
			s.admit(s.stop)
		}
		c, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.stop:
				return nil
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Usually out of file descriptors: back off rather than spin,
			// as open connections will end and free some.
			s.stats.ReadErrors.Add(1)
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			t := time.NewTimer(delay)
			select {
			case <-s.stop:
				t.Stop()
				return nil
			case <-t.C:
			}
			continue
		}
		delay = 0
		s.startConn(c)
	}
}

// startConn registers c and starts its goroutine, unless the server is
// shutting down or full.
func (s *TCPServer) startConn(c net.Conn) {
	s.mu.Lock()
	if s.refusing {
		s.mu.Unlock()
		c.Close()
		return
	}
	if s.maxConns > 0 && len(s.conns) >= s.maxConns {
		s.mu.Unlock()
		s.stats.ConnsRejected.Add(1)
		c.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1) // under mu, so never after Shutdown's Wait has begun
	s.mu.Unlock()
	s.stats.ConnsActive.Add(1)
	s.stats.ConnsHandled.Add(1)
	go s.serveConn(c)
}

// serveConn reads c in blocks and hands its lines to a new ConnHandler.
func (s *TCPServer) serveConn(c net.Conn) {
	ch := s.h.NewConn(c.RemoteAddr())
	sp := splitter{ch: ch, maxLine: s.maxLine}
	var armed time.Time
	arm := func() {
		if s.idle > 0 {
			// Moving the deadline updates a runtime timer; do it at most
			// once per quarter of IdleTimeout, and add that quarter to the
			// deadline so that no connection is cut early.
			if now := time.Now(); now.Sub(armed) >= s.idle/4 {
				c.SetReadDeadline(now.Add(s.idle + s.idle/4))
				armed = now
			}
		}
	}
	// Wait for the first byte before taking a block buffer, so that a
	// connection that sends nothing holds a goroutine and no 64 KiB.
	var first [1]byte
	arm()
	n, err := c.Read(first[:])
	var bp *[]byte
	tail := 0 // buf[:tail] is the start of a line whose '\n' has not come yet
	if n > 0 {
		s.stats.Bytes.Add(1)
		bp = s.getBuf()
		if first[0] != '\n' { // a lone "\n" is an empty line
			(*bp)[0] = first[0]
			tail = 1
		}
	}
	if err != nil {
		s.endConn(c, ch, &sp, bp, err, tail, false)
		return
	}
	buf := *bp
	skipping := false // inside an over-long line: drop bytes up to the next '\n'
	for {
		arm()
		n, err := c.Read(buf[tail:])
		if n > 0 {
			s.stats.Bytes.Add(uint64(n))
			tail, skipping = sp.block(buf, tail, tail+n, skipping)
			if sp.lines > 0 {
				sp.publish(&s.stats)
				ch.Flush()
			}
		}
		if err != nil {
			s.endConn(c, ch, &sp, bp, err, tail, skipping)
			return
		}
	}
}

// endConn finishes a connection after the read error err: a last line
// without '\n' (buf[:tail]) is taken at EOF, unless it is being skipped.
func (s *TCPServer) endConn(c net.Conn, ch ConnHandler, sp *splitter, bp *[]byte, err error, tail int, skipping bool) {
	switch {
	case errors.Is(err, io.EOF):
		// Unlike InfluxDB, keep a last line that lacks its '\n'.
		if tail > 0 && !skipping {
			sp.line((*bp)[:tail])
		}
	case errors.Is(err, os.ErrDeadlineExceeded):
		s.stats.IdleTimeouts.Add(1)
	case errors.Is(err, net.ErrClosed):
		// Shutdown ran out of time and closed it.
	default:
		s.stats.ReadErrors.Add(1)
	}
	if bp != nil {
		s.putBuf(bp)
	}
	sp.publish(&s.stats)
	// The handler has every line before the socket closes: a sender that
	// half-closes and waits for the server's close knows they are taken.
	ch.Flush()
	c.Close()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.stats.ConnsActive.Add(^uint64(0))
	ch.Close()
	s.wg.Done()
}

// maxIdleBufs bounds the idle block buffers kept: 4 MiB of 64 KiB ones.
const maxIdleBufs = 64

func (s *TCPServer) getBuf() *[]byte {
	select {
	case b := <-s.bufs:
		return b
	default:
		b := make([]byte, s.bufSize)
		return &b
	}
}

func (s *TCPServer) putBuf(b *[]byte) {
	select {
	case s.bufs <- b:
	default:
	}
}

// block hands on the complete lines in buf[:end], of which buf[:from] is a
// carried-over line start (and so holds no '\n'). It moves what follows
// the last '\n' to the front of buf and returns its length and whether the
// line it starts is being skipped as too long.
func (sp *splitter) block(buf []byte, from, end int, skipping bool) (int, bool) {
	data := buf[:end]
	start := 0
	for {
		i := bytes.IndexByte(data[from:], '\n')
		if i < 0 {
			break
		}
		nl := from + i
		if skipping {
			skipping = false // the over-long line ends here
		} else {
			sp.line(data[start:nl])
		}
		start = nl + 1
		from = start
	}
	rest := end - start
	switch {
	case skipping:
		return 0, true
	case rest > sp.maxLine+1: // too long even if it ends in "\r\n"
		sp.tooLong++
		return 0, true
	}
	if start > 0 {
		copy(buf, data[start:])
	}
	return rest, false
}

// Shutdown stops accepting (after taking the connections already waiting in
// the backlog) and lets open connections read to EOF. When ctx
// ends first, it closes them, and returns ctx.Err() once their handlers
// are Closed; otherwise it returns nil once every handler is Closed.
func (s *TCPServer) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	first := !s.closing
	if first {
		s.closing = true
		close(s.stop)
	}
	serving := s.serving
	s.serving = true // a later Serve returns at once
	s.mu.Unlock()
	if d, ok := s.ln.(interface{ SetDeadline(time.Time) error }); ok && first {
		// Accept what is already in the backlog, until the deadline.
		d.SetDeadline(time.Now().Add(acceptDrain))
		if serving {
			select {
			case <-s.serveDone:
			case <-ctx.Done():
			}
		} else {
			// Serve never ran (or has not been scheduled yet): the
			// backlog is ours to take.
			for {
				c, err := s.ln.Accept()
				if err != nil {
					break
				}
				s.startConn(c)
			}
		}
	}
	s.mu.Lock()
	s.refusing = true
	s.mu.Unlock()
	if s.ln != nil {
		s.ln.Close()
	}
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	<-done
	return ctx.Err()
}
