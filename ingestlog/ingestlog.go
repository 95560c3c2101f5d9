// Package ingestlog keeps the Graphite lines taken since the delta
// baselines were last saved, so that a crash loses none of what they
// count.
//
// The delta stage turns cumulative counters into deltas in memory, and the
// writer holds their points in memory until InfluxDB takes them. A
// process killed in between loses both: baselines saved earlier would
// count again what was delivered since, and no baselines lose the work
// before the next report. With the log, a start reads the last saved
// baselines and hands the lines logged after them to the relays again, in
// the order they were logged and with the times they were received: the
// same points come out, with the same deltas, and InfluxDB stores a point
// written twice once.
//
// The contract:
//
//   - A relay calls Begin before it applies the first line of a block to
//     its baselines, and End, with the block's lines, once it has handed
//     their points to the writer; End appends them as one record. Blocks
//     run concurrently.
//   - A checkpoint calls Rotate, which waits for the blocks in flight,
//     starts a new segment and, before any block goes on, runs a function
//     that copies the baselines. Once the writers hold in memory no point
//     taken before Rotate returned (delivered, or on their disk queue), it
//     saves the copy with the number Rotate returned, then calls
//     Drop(that number). The saved baselines then hold exactly the lines of
//     the segments before the number, and every point of those lines is
//     out of memory.
//   - A start opens the log, hands the records of the segments from the
//     saved number on to Replay, and checkpoints.
//
// Records are appended with one write each, not synced: a killed process
// loses none (they are in the kernel's page cache); a machine that loses
// power may lose the last ones, as it loses the writer's memory. A record
// cut short ends its segment; a record whose checksum fails is skipped
// and counted. When an append fails, or the log grows past its bound
// because checkpoints fail, the log stops and calls broken: the saved
// baselines then no longer pair with it, and the caller removes them,
// until the next checkpoint starts both afresh.
package ingestlog

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sparkpulse/sparkpulse/statefile"
)

const (
	// prefix and suffix name a segment: prefix, its number in hex, suffix.
	prefix = "ingest-"
	suffix = ".log"
	magic  = "SPINGEST"
	// version 1: header = magic, version u32, fingerprint length u32 and
	// text; record (every line of a block) = CRC-32C u32 of the rest
	// (statefile.Checksum, as in every state file), length u32 of the
	// lines, block u32, receive time i64 (unix ns), lines.
	version    = 1
	recordHead = 4 + 4 + 4 + 8
	// MaxRecord bounds one record's lines: a block is one read of a
	// connection (64 KiB) or 1024 UDP lines.
	MaxRecord = 16 << 20
	// DefaultMaxBytes bounds the log by default: a checkpoint empties it
	// every minute or so; past the bound, checkpoints are failing (or
	// waiting for an InfluxDB that takes nothing) and the log stops.
	DefaultMaxBytes = 1 << 30
	// MinMaxBytes is the least bound: a checkpoint is due at 64 MiB.
	MinMaxBytes = 128 << 20
)

// Log is the ingest log of one state directory. Its methods are safe for
// concurrent use.
type Log struct {
	dir         string
	fingerprint string // what the records' block numbers mean
	maxBytes    int64
	broken      func(error)

	gate sync.RWMutex // Begin/End hold it shared, Rotate alone

	mu     sync.Mutex
	f      *os.File // the segment appended to; nil while stopped
	seq    uint64   // its number
	size   int64    // its bytes
	total  int64    // bytes of every segment not dropped
	buf    []byte
	closed bool

	damaged atomic.Uint64 // records skipped by Replay
}

// Open opens the log in dir, whose records' block numbers mean what
// fingerprint says (the listeners' names, in order): a segment written
// under another fingerprint is not replayed. broken is called, once per
// stop, when appending fails or the log would hold more than maxBytes
// (DefaultMaxBytes when 0).
func Open(dir, fingerprint string, maxBytes int64, broken func(error)) (*Log, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("ingest log: %w", err)
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	l := &Log{dir: dir, fingerprint: fingerprint, maxBytes: maxBytes, broken: broken}
	segs, err := l.segments()
	if err != nil {
		return nil, err
	}
	for _, s := range segs {
		if fi, err := os.Lstat(l.path(s)); err == nil {
			l.total += fi.Size()
		}
	}
	if len(segs) > 0 {
		l.seq = segs[len(segs)-1]
	}
	return l, nil
}

func (l *Log) path(seq uint64) string {
	return filepath.Join(l.dir, fmt.Sprintf("%s%016x%s", prefix, seq, suffix))
}

// segments lists the segments' numbers, in order.
func (l *Log) segments() ([]uint64, error) {
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("ingest log: %w", err)
	}
	var out []uint64
	for _, e := range ents {
		hex, ok := strings.CutPrefix(e.Name(), prefix)
		if hex, ok = strings.CutSuffix(hex, suffix); !ok || len(hex) != 16 {
			continue
		}
		if n, err := strconv.ParseUint(hex, 16, 64); err == nil {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Replay calls fn with each record of the segments numbered from on, in
// order, under this fingerprint; it returns the records handed on. fn's
// lines are valid during the call.
func (l *Log) Replay(from uint64, fn func(block int, recv int64, lines []byte)) (int, error) {
	segs, err := l.segments()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range segs {
		if s < from {
			continue
		}
		k, err := l.replay(l.path(s), fn)
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// ErrFingerprint is wrapped by Replay's error for a segment of other
// listeners.
var ErrFingerprint = errors.New("ingest log: written for other listeners")

func (l *Log) replay(path string, fn func(block int, recv int64, lines []byte)) (int, error) {
	f, err := statefile.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return 0, fmt.Errorf("ingest log: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 256<<10)
	head := make([]byte, len(magic)+8)
	if _, err := io.ReadFull(br, head); err != nil {
		return 0, nil // a segment cut before its header was whole: nothing in it
	}
	if string(head[:len(magic)]) != magic || binary.LittleEndian.Uint32(head[len(magic):]) != version {
		return 0, fmt.Errorf("ingest log: %s: not a version %d segment", path, version)
	}
	fp := make([]byte, binary.LittleEndian.Uint32(head[len(magic)+4:]))
	if len(fp) > 1<<20 {
		return 0, fmt.Errorf("ingest log: %s: a damaged header", path)
	}
	if _, err := io.ReadFull(br, fp); err != nil {
		return 0, nil
	}
	if string(fp) != l.fingerprint {
		return 0, fmt.Errorf("%w: %s", ErrFingerprint, path)
	}
	n := 0
	rec := make([]byte, recordHead)
	var lines []byte
	for {
		if _, err := io.ReadFull(br, rec); err != nil {
			return n, nil // the end, or a record cut short by a crash
		}
		size := binary.LittleEndian.Uint32(rec[4:])
		if size > MaxRecord {
			l.damaged.Add(1)
			return n, nil // its length is damaged: nothing after it can be found
		}
		lines = slices.Grow(lines[:0], int(size))[:size]
		if _, err := io.ReadFull(br, lines); err != nil {
			return n, nil
		}
		if statefile.Checksum(rec[4:], lines) != binary.LittleEndian.Uint32(rec) {
			l.damaged.Add(1)
			continue
		}
		fn(int(binary.LittleEndian.Uint32(rec[8:])), int64(binary.LittleEndian.Uint64(rec[12:])), lines)
		n++
	}
}

// Begin is called before a block's first line changes any baseline: a
// Rotate waits until its End.
func (l *Log) Begin() { l.gate.RLock() }

// End appends the block's lines, received at recv (unix ns), by the
// listener numbered block, and lets a Rotate go on. With no lines it only
// does the latter.
func (l *Log) End(block int, recv int64, lines []byte) {
	defer l.gate.RUnlock()
	if len(lines) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return // stopped, until the next Rotate
	}
	if len(lines) > MaxRecord {
		l.stop(fmt.Errorf("a block of %d bytes, more than %d", len(lines), MaxRecord))
		return
	}
	b := binary.LittleEndian.AppendUint32(l.buf[:0], 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(lines)))
	b = binary.LittleEndian.AppendUint32(b, uint32(block))
	b = binary.LittleEndian.AppendUint64(b, uint64(recv))
	b = append(b, lines...)
	binary.LittleEndian.PutUint32(b, statefile.Checksum(b[4:]))
	l.buf = b
	if l.total+int64(len(b)) > l.maxBytes {
		l.stop(fmt.Errorf("the log holds %d bytes, and %d more would pass max-ingest-log-bytes %d: checkpoints are failing", l.total, len(b), l.maxBytes))
		return
	}
	if _, err := l.f.Write(b); err != nil {
		// Cut back, so that the next segment's replay is not misled by a
		// partial record (this one is not replayed: the log stops).
		l.f.Truncate(l.size)
		l.stop(fmt.Errorf("appending to %s: %w", l.f.Name(), err))
		return
	}
	l.size += int64(len(b))
	l.total += int64(len(b))
	if cap(l.buf) > 1<<20 {
		l.buf = nil
	}
}

// stop closes the segment and reports why; l.mu is held.
func (l *Log) stop(err error) {
	l.f.Close()
	l.f = nil
	if l.broken != nil {
		l.broken(err)
	}
}

// Rotate waits for the blocks in flight, starts a new segment, runs
// during (if not nil) before any block goes on, and returns the segment's
// number: baselines copied by during are those of the lines before it. It
// restarts a stopped log.
func (l *Log) Rotate(during func()) (uint64, error) {
	l.gate.Lock()
	defer l.gate.Unlock()
	seq, err := l.rotate()
	if err == nil && during != nil {
		during()
	}
	return seq, err
}

func (l *Log) rotate() (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, errors.New("ingest log: closed")
	}
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	seq := l.seq + 1
	f, err := statefile.OpenFile(l.path(seq), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, fmt.Errorf("ingest log: %w", err)
	}
	head := append([]byte(magic), 0, 0, 0, 0, 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(head[len(magic):], version)
	binary.LittleEndian.PutUint32(head[len(magic)+4:], uint32(len(l.fingerprint)))
	head = append(head, l.fingerprint...)
	if _, err := f.Write(head); err != nil {
		f.Close()
		os.Remove(f.Name())
		return 0, fmt.Errorf("ingest log: %w", err)
	}
	l.f, l.seq, l.size = f, seq, int64(len(head))
	l.total += l.size
	return seq, nil
}

// Drop removes the segments numbered before seq: saved baselines hold
// their lines' effect.
func (l *Log) Drop(seq uint64) error {
	segs, err := l.segments()
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range segs {
		if s >= seq {
			continue
		}
		p := l.path(s)
		fi, serr := os.Lstat(p)
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("ingest log: %w", err))
		} else if serr == nil {
			l.mu.Lock()
			l.total -= fi.Size()
			l.mu.Unlock()
		}
	}
	return errors.Join(errs...)
}

// Size is the bytes of the segment appended to: a checkpoint is due when
// it grows large.
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.size
}

// Damaged counts the records Replay skipped for a failed checksum.
func (l *Log) Damaged() uint64 { return l.damaged.Load() }

// Close stops appending; the segments stay for the next start.
func (l *Log) Close() error {
	l.gate.Lock()
	defer l.gate.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
