package delta

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math"
	"time"
)

// The state file, all integers little-endian:
//
//	magic   [8]byte "SPDELTA\x00"
//	version uint32  1
//	saved   int64   save time, unix ns
//	chunks: count uint32 (> 0), then count × entry; a count of 0 ends them
//	entry:  id0, id1 uint64, value float64 bits, ts, seen int64 (40 bytes)
//	total   uint64  number of entries
//	crc     uint32  CRC-32 (IEEE) of everything before it
//
// Entries come in chunks, one per non-empty shard, so that Save holds one
// shard lock at a time and never copies the whole table: a single count up
// front would need them all. Version 1 also means the IDs come from this
// package's Hash as it is; a new hash needs a new version.
const (
	stateMagic   = "SPDELTA\x00"
	stateVersion = 1
	headerSize   = 8 + 4 + 8
	entrySize    = 40
)

// ErrStale is wrapped by the error Load returns for a state saved longer
// than IdleTTL ago.
var ErrStale = errors.New("delta: saved state is stale")

// Save writes every series' state, as of now (unix ns), to w. Updates may
// run meanwhile: each shard is written as it was when Save reached it.
func (t *Tracker) Save(w io.Writer, now int64) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	crc := crc32.NewIEEE()
	out := io.MultiWriter(bw, crc)

	buf := make([]byte, 0, 64<<10)
	buf = append(buf, stateMagic...)
	buf = binary.LittleEndian.AppendUint32(buf, stateVersion)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(now))
	if _, err := out.Write(buf); err != nil {
		return fmt.Errorf("delta: save state: %w", err)
	}
	var total uint64
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		n := len(sh.m)
		buf = binary.LittleEndian.AppendUint32(buf[:0], uint32(n))
		for id, e := range sh.m {
			buf = binary.LittleEndian.AppendUint64(buf, id[0])
			buf = binary.LittleEndian.AppendUint64(buf, id[1])
			buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(e.value))
			buf = binary.LittleEndian.AppendUint64(buf, uint64(e.ts))
			buf = binary.LittleEndian.AppendUint64(buf, uint64(e.seen))
		}
		sh.mu.Unlock()
		if n == 0 {
			continue
		}
		total += uint64(n)
		if _, err := out.Write(buf); err != nil {
			return fmt.Errorf("delta: save state: %w", err)
		}
	}
	buf = binary.LittleEndian.AppendUint32(buf[:0], 0)
	buf = binary.LittleEndian.AppendUint64(buf, total)
	if _, err := out.Write(buf); err != nil {
		return fmt.Errorf("delta: save state: %w", err)
	}
	buf = binary.LittleEndian.AppendUint32(buf[:0], crc.Sum32())
	if _, err := bw.Write(buf); err != nil {
		return fmt.Errorf("delta: save state: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("delta: save state: %w", err)
	}
	return nil
}

// stateReader reads the state file, keeping its CRC and offset.
type stateReader struct {
	r   *bufio.Reader
	crc hash.Hash32
	off int64
	buf [entrySize]byte
}

// read returns the next n (≤ entrySize) bytes, which stay valid until the
// next call; what, followed by index unless it is negative, names them for
// the error.
func (s *stateReader) read(n int, what string, index int64) ([]byte, error) {
	b := s.buf[:n]
	if k, err := io.ReadFull(s.r, b); err != nil {
		if index >= 0 {
			what = fmt.Sprintf("%s %d", what, index)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, fmt.Errorf("delta: load state: truncated at byte %d, in %s", s.off+int64(k), what)
		}
		return nil, fmt.Errorf("delta: load state: reading %s: %w", what, err)
	}
	s.off += int64(n)
	return b, nil
}

// Load restores the series that a Save wrote to r, as of now (unix ns), and
// returns how many it restored. It restores nothing and returns an error if
// the file is not a complete, intact state of this version, or if it was
// saved longer than IdleTTL before now (ErrStale: its series would all be
// evicted). Otherwise it skips series idle for longer than IdleTTL and
// series already tracked, and stops at MaxSeries. Restored series have a
// baseline: their next sample yields a delta (rule 5).
func (t *Tracker) Load(r io.Reader, now int64) (int, error) {
	s := &stateReader{r: bufio.NewReaderSize(r, 64<<10), crc: crc32.NewIEEE()}
	h, err := s.read(headerSize, "the header", -1)
	if err != nil {
		return 0, err
	}
	if string(h[:8]) != stateMagic {
		return 0, fmt.Errorf("delta: load state: bad magic %q, not a sparkpulse delta state file", h[:8])
	}
	if v := binary.LittleEndian.Uint32(h[8:]); v != stateVersion {
		return 0, fmt.Errorf("delta: load state: unsupported version %d (want %d)", v, stateVersion)
	}
	saved := int64(binary.LittleEndian.Uint64(h[12:]))
	s.crc.Write(h)
	// A stale file is still read to the end: a damaged one should be
	// reported as damaged, not as stale.
	stale := now-saved > t.idleTTL

	type rec struct {
		id ID
		e  entry
	}
	var recs []rec
	var total uint64
	for chunk := int64(0); ; chunk++ {
		b, err := s.read(4, "the count of chunk", chunk)
		if err != nil {
			return 0, err
		}
		s.crc.Write(b)
		n := binary.LittleEndian.Uint32(b)
		if n == 0 {
			break
		}
		for range n {
			b, err := s.read(entrySize, "entry", int64(total))
			if err != nil {
				return 0, err
			}
			s.crc.Write(b)
			total++
			r := rec{
				id: ID{binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])},
				e: entry{
					value: math.Float64frombits(binary.LittleEndian.Uint64(b[16:])),
					ts:    int64(binary.LittleEndian.Uint64(b[24:])),
					seen:  int64(binary.LittleEndian.Uint64(b[32:])),
				},
			}
			if stale || now-r.e.seen > t.idleTTL || int64(len(recs)) >= t.maxCount {
				continue
			}
			r.e.seen = min(r.e.seen, now) // a clock that went back must not keep it forever
			recs = append(recs, r)
		}
	}
	b, err := s.read(8, "the entry total", -1)
	if err != nil {
		return 0, err
	}
	s.crc.Write(b)
	if n := binary.LittleEndian.Uint64(b); n != total {
		return 0, fmt.Errorf("delta: load state: corrupt: %d entries, total says %d", total, n)
	}
	sum := s.crc.Sum32()
	b, err = s.read(4, "the checksum", -1)
	if err != nil {
		return 0, err
	}
	if c := binary.LittleEndian.Uint32(b); c != sum {
		return 0, fmt.Errorf("delta: load state: checksum mismatch: file says %08x, content has %08x", c, sum)
	}
	if _, err := s.r.ReadByte(); err == nil {
		return 0, fmt.Errorf("delta: load state: corrupt: data after the checksum at byte %d", s.off)
	}
	if stale {
		age := time.Duration(now - saved)
		return 0, fmt.Errorf("%w: saved %v ago (at %s), more than IdleTTL %v",
			ErrStale, age, time.Unix(0, saved).UTC().Format(time.RFC3339), time.Duration(t.idleTTL))
	}

	restored := 0
	for _, r := range recs {
		sh := t.shard(r.id)
		sh.mu.Lock()
		if _, ok := sh.m[r.id]; !ok {
			if t.count.Add(1) > t.maxCount {
				t.count.Add(-1)
				sh.mu.Unlock()
				break
			}
			sh.m[r.id] = r.e
			restored++
		}
		sh.mu.Unlock()
	}
	return restored, nil
}
