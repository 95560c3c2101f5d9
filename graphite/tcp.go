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
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// TCPConfig configures ListenTCP. Zero values select the defaults.
type TCPConfig struct {
	Addr string // e.g. ":2003" or "127.0.0.1:0"
	// MaxLineLength bounds a line, without its "\n" or "\r\n" (default
	// 64 KiB). A longer line is dropped and counted in LinesTooLong; the
	// connection goes on with the next line.
	MaxLineLength int
	// IdleTimeout closes a connection that completes no line for this
	// long, counted in IdleTimeouts (default 2m; negative disables): a
	// sender that trickles bytes without ending lines cannot keep it open.
	// The deadline is only moved every IdleTimeout/4, so a connection is
	// closed after between 1 and 1.25 times IdleTimeout.
	IdleTimeout time.Duration
	// MaxConnections caps open connections (default 4096, about 18 MiB
	// of idle connections at the 4.3 KiB each measured). At the cap the
	// listener stops accepting until one closes, counted in AcceptPaused:
	// new connections wait in the kernel's accept queue, with their data,
	// rather than being lost.
	MaxConnections int
	// MaxHeldBytes bounds the memory of partial lines longer than 4 KiB
	// held by all connections together, waiting for their '\n' (default
	// 64 MiB). A connection whose long partial line does not fit is
	// closed, counted in ConnsDropped; its complete lines have been taken.
	// A partial line of up to 4 KiB is always kept, so that all partial
	// lines take at most MaxHeldBytes plus 4 KiB per connection.
	MaxHeldBytes int64
	// Admit, when set, is called before each accept and returns when a new
	// connection may be taken, or when done is closed: while the points'
	// destination has no room, new connections wait in the kernel's accept
	// queue, and their senders block once it is full, instead of being
	// taken on, each holding buffers and a goroutine until there is room.
	Admit func(done <-chan struct{})
}

// WithDefaults fills zero values.
func (c TCPConfig) WithDefaults() TCPConfig {
	c.MaxLineLength = cmp.Or(c.MaxLineLength, DefaultMaxLineLength)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, DefaultIdleTimeout)
	c.MaxConnections = cmp.Or(c.MaxConnections, DefaultMaxConnections)
	c.MaxHeldBytes = cmp.Or(c.MaxHeldBytes, DefaultMaxHeldBytes)
	return c
}

// Validate rejects negative sizes; zero values select the defaults.
func (c TCPConfig) Validate() error {
	return errors.Join(
		negative("max-line-length", c.MaxLineLength),
		negative("max-connections", c.MaxConnections),
		negative("max-held-bytes", c.MaxHeldBytes))
}

// negative is the error of a size set below zero, nil for any other.
func negative[T int | int64](name string, v T) error {
	if v < 0 {
		return fmt.Errorf("%s %d: must not be negative", name, v)
	}
	return nil
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
	maxHeld  int64
	held     atomic.Int64 // bytes of partial lines held by all connections
	// bufs holds idle block buffers of max(blockSize, maxLine+2) bytes.
	// A sync.Pool hands each processor the buffer it returned last; it is
	// as fast as a bounded channel of buffers on one processor and faster
	// on two, also while collections empty it (BenchmarkReadBuffers).
	bufs    sync.Pool
	bufSize int
	// slots bounds the connections processing a block at once, and so
	// the block buffers in use: processing is CPU work, and more
	// connections at it than cores gain nothing.
	slots chan struct{}
	stats Stats

	room chan struct{} // signalled when a connection closes, for an accept paused at maxConns

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
	// No TCP keep-alive on accepted connections: senders open one per
	// report (three setsockopt calls each, for nothing), and a silent
	// connection is closed by IdleTimeout anyway.
	lc := net.ListenConfig{KeepAlive: -1}
	ln, err := lc.Listen(context.Background(), "tcp", cfg.Addr)
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
		maxHeld:   cfg.MaxHeldBytes,
		conns:     make(map[net.Conn]struct{}),
		room:      make(chan struct{}, 1),
		stop:      make(chan struct{}),
		serveDone: make(chan struct{}),
	}
	// Room for the longest acceptable line and its "\r\n", so a line that
	// may still be good never has to be cut.
	s.bufSize = max(blockSize, s.maxLine+2)
	s.bufs.New = func() any {
		b := make([]byte, s.bufSize)
		return &b
	}
	s.slots = make(chan struct{}, processingSlots())
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
		if !s.waitForRoom() {
			return nil
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

// waitForRoom returns once fewer than maxConns connections are open, or
// false when Shutdown begins first.
func (s *TCPServer) waitForRoom() bool {
	paused := false
	for {
		s.mu.Lock()
		open := len(s.conns)
		s.mu.Unlock()
		if open < s.maxConns {
			return true
		}
		if !paused {
			paused = true
			s.stats.AcceptPaused.Add(1)
		}
		select {
		case <-s.room:
		case <-s.stop:
			return false
		}
	}
}

// startConn registers c and starts its goroutine, unless the server is
// shutting down.
func (s *TCPServer) startConn(c net.Conn) {
	s.mu.Lock()
	if s.refusing {
		s.mu.Unlock()
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

// serveConn hands the lines of c to a new ConnHandler, a block at a time.
// Between blocks it holds no buffer: it waits for the next byte with a
// one-byte read, then takes one of the processing slots and a block buffer,
// reads what else has arrived without waiting, and hands on the block's
// complete lines. A line cut by the end of a block waits in the
// connection's tail for its end. So an idle or slow connection costs a
// goroutine and its tail, and buffers are held by at most as many
// connections as there are slots, however many are open.
func (s *TCPServer) serveConn(c net.Conn) {
	cs := &connState{c: c, now: nowReaderOf(c), progress: time.Now()}
	cs.sp = splitter{ch: s.h.NewConn(c.RemoteAddr()), maxLine: s.maxLine}
	// A sender usually writes as soon as it connects: try to read at once,
	// saving the one-byte read.
	s.arm(cs)
	err := s.process(cs, nil)
	var one [1]byte
	for err == nil {
		s.arm(cs)
		var n int
		if n, err = c.Read(one[:]); n > 0 {
			err = s.process(cs, one[:])
		}
	}
	s.endConn(cs, err)
}

// connState is what a connection keeps between blocks.
type connState struct {
	c        net.Conn
	now      func(b []byte) (int, error) // reads what has arrived, without waiting
	sp       splitter
	tail     []byte    // the start of a line whose '\n' has not come yet
	skipping bool      // inside an over-long line: drop bytes up to the next '\n'
	progress time.Time // when the connection began, or last completed a line
	armed    time.Time // the progress the read deadline was last set from
}

// arm sets the connection's read deadline IdleTimeout after it last
// completed a line. Moving a deadline updates a runtime timer: it is done
// at most once per quarter of IdleTimeout, and that quarter is added to
// the deadline so that no connection is cut early.
func (s *TCPServer) arm(cs *connState) {
	if s.idle <= 0 {
		return
	}
	if cs.progress.Sub(cs.armed) >= s.idle/4 || cs.armed.IsZero() {
		cs.c.SetReadDeadline(cs.progress.Add(s.idle + s.idle/4))
		cs.armed = cs.progress
	}
}

// process handles the block made of the tail, first (the byte the
// connection waited for, if any) and whatever else has arrived. It returns
// the error of the read, io.EOF when the sender has closed.
func (s *TCPServer) process(cs *connState, first []byte) error {
	s.slots <- struct{}{}
	defer func() { <-s.slots }()
	bp := s.getBuf()
	defer s.putBuf(bp)
	buf := *bp
	from := copy(buf, cs.tail)
	from += copy(buf[from:], first)
	n, err := cs.now(buf[from:])
	s.stats.Bytes.Add(uint64(len(first) + n))
	var rest int
	rest, cs.skipping = cs.sp.block(buf, len(cs.tail), from+n, cs.skipping)
	if errors.Is(err, io.EOF) && rest > 0 && !cs.skipping {
		// A last line that lacks its '\n' was cut by the sender's end.
		cs.sp.cutLine(buf[:rest])
		rest = 0
	}
	// The tail is kept before the flush: once a handler has a block's
	// lines, the block's partial line is counted in MaxHeldBytes.
	err = s.keepTail(cs, buf[:rest], err)
	if cs.sp.lines > 0 {
		cs.progress = time.Now()
		cs.sp.publish(&s.stats)
		cs.sp.ch.Flush()
	}
	return err
}

// errHeld closes a connection whose partial line does not fit in
// MaxHeldBytes.
var errHeld = errors.New("graphite: partial lines of all connections reached max-held-bytes")

// keepTail keeps the partial line that ends a block for the next one,
// within the bytes all connections may hold.
func (s *TCPServer) keepTail(cs *connState, rest []byte, err error) error {
	before := int64(cap(cs.tail))
	switch {
	case len(rest) == 0 && before > maxKeptTail:
		cs.tail = nil // a long line has ended: let its memory go
	case len(rest) > maxKeptTail && int64(len(rest)) > before && s.held.Load()-before+int64(len(rest)) > s.maxHeld:
		// Growing this tail would pass what all connections may hold. A
		// partial line of up to maxKeptTail, as a sender's lines cut by
		// a block's end are, is always kept: a flood of long partial
		// lines cannot get ordinary senders' connections closed.
		s.held.Add(-before)
		cs.tail = nil
		if err == nil {
			err = errHeld
		}
		return err
	}
	cs.tail = append(cs.tail[:0], rest...)
	s.held.Add(int64(cap(cs.tail)) - before)
	return err
}

// maxKeptTail bounds the tail memory a connection keeps once empty, and
// the partial line it may always hold, whatever MaxHeldBytes says.
const maxKeptTail = 4 << 10

// endConn finishes a connection after the read error err: at EOF, a last
// line without '\n' (the tail) is counted as cut and dropped. The
// handler has every line before the socket closes: a sender that
// half-closes and waits for the server's close knows they are taken.
func (s *TCPServer) endConn(cs *connState, err error) {
	sp := &cs.sp
	switch {
	case errors.Is(err, io.EOF):
		if len(cs.tail) > 0 && !cs.skipping {
			sp.cutLine(cs.tail)
		}
	case errors.Is(err, os.ErrDeadlineExceeded):
		s.stats.IdleTimeouts.Add(1)
	case errors.Is(err, net.ErrClosed):
		// Shutdown ran out of time and closed it.
	case errors.Is(err, errHeld):
		s.stats.ConnsDropped.Add(1)
	default:
		s.stats.ReadErrors.Add(1)
	}
	s.held.Add(-int64(cap(cs.tail)))
	cs.tail = nil
	sp.publish(&s.stats)
	sp.ch.Flush()
	cs.c.Close()
	s.mu.Lock()
	delete(s.conns, cs.c)
	s.mu.Unlock()
	select {
	case s.room <- struct{}{}:
	default: // already signalled
	}
	s.stats.ConnsActive.Add(^uint64(0))
	sp.ch.Close()
	s.wg.Done()
}

// processingSlots is how many connections process a block at once.
func processingSlots() int { return max(4, 2*runtime.GOMAXPROCS(0)) }

func (s *TCPServer) getBuf() *[]byte { return s.bufs.Get().(*[]byte) }

func (s *TCPServer) putBuf(b *[]byte) { s.bufs.Put(b) }

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
