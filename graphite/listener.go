package graphite

import (
	"bytes"
	"net"
	"sync/atomic"
	"time"
)

// ConnHandler receives the lines of one TCP connection or of one UDP reader
// goroutine. It is used by a single goroutine; line is valid only during the
// call.
type ConnHandler interface {
	// Line receives one line without its terminator or surrounding white
	// space; it is never blank (whitespace-only lines are skipped).
	Line(line []byte)
	// Flush ends a block, so the handler can pass on what it buffered:
	// over TCP it follows the lines of each read that completed any; over
	// UDP it follows 1024 lines, or a pause of the senders.
	Flush()
	// Close ends the stream; a Flush always comes just before it.
	Close()
}

// Handler creates a ConnHandler for each TCP connection and for the UDP
// reader. remote is nil for UDP.
type Handler interface {
	NewConn(remote net.Addr) ConnHandler
}

// Stats are a listener's counters. They are updated once per read rather
// than per line, and may be read at any time.
type Stats struct {
	ConnsActive  atomic.Uint64 // TCP connections open now
	ConnsHandled atomic.Uint64 // TCP connections accepted and served
	AcceptPaused atomic.Uint64 // times the TCP listener stopped accepting because MaxConnections were open
	ConnsDropped atomic.Uint64 // TCP connections closed because their partial line did not fit in MaxHeldBytes
	IdleTimeouts atomic.Uint64 // TCP connections closed after IdleTimeout without data
	Bytes        atomic.Uint64 // bytes received
	Lines        atomic.Uint64 // lines handed to a ConnHandler
	LinesTooLong atomic.Uint64 // lines dropped for exceeding MaxLineLength
	LinesCut     atomic.Uint64 // TCP: last lines without '\n' when the sender closed, dropped (a sender that died mid-report)
	ReadErrors   atomic.Uint64 // accept and read errors other than EOF, Shutdown and idle timeouts
	Datagrams    atomic.Uint64 // UDP datagrams received
}

// Defaults of TCPConfig and UDPConfig.
const (
	DefaultMaxLineLength  = 64 << 10
	DefaultIdleTimeout    = 2 * time.Minute
	DefaultMaxConnections = 4096
	DefaultMaxHeldBytes   = 64 << 20
)

// blockSize is the TCP read size, and the UDP buffer (the largest datagram
// fits).
const blockSize = 64 << 10

// splitter hands lines to a ConnHandler and counts them; the counts are
// published to Stats once per block by the caller.
type splitter struct {
	ch      ConnHandler
	maxLine int
	lines   uint64
	tooLong uint64
	cut     uint64
}

// line hands on one line given without its '\n'.
func (sp *splitter) line(b []byte) {
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	if len(b) > sp.maxLine {
		sp.tooLong++
		return
	}
	// Trimming here gives handlers (and Explain's quotes) the same line
	// InfluxDB's TCP reader parses, and makes blank lines empty.
	if b = bytes.TrimSpace(b); len(b) == 0 {
		return
	}
	sp.ch.Line(b)
	sp.lines++
}

// cutLine counts a last line the sender's close left without its '\n'.
// Dropwizard's reporter ends every line it writes with '\n' and flushes
// before it closes; a line without one was cut when the process died
// mid-report (real Spark executors killed or out of heap do this), and
// what is left of it may parse as a smaller value or an earlier time:
// like InfluxDB's listener, it is not taken.
func (sp *splitter) cutLine(b []byte) {
	if len(bytes.TrimSpace(b)) > 0 {
		sp.cut++
	}
}

// publish adds the counts since the last call to st.
func (sp *splitter) publish(st *Stats) {
	if sp.cut > 0 {
		st.LinesCut.Add(sp.cut)
		sp.cut = 0
	}
	if sp.lines > 0 {
		st.Lines.Add(sp.lines)
		sp.lines = 0
	}
	if sp.tooLong > 0 {
		st.LinesTooLong.Add(sp.tooLong)
		sp.tooLong = 0
	}
}
