package delta

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"iter"
	"math"
	"time"

	"github.com/sparkpulse/sparkpulse/statefile"
)

// The state file, all integers little-endian:
//
//	magic   [8]byte "SPDELTA\x00"
//	version uint32  6
//	saved   int64   save time, unix ns
//	seed    2 × uint64  the Seed (SipHash key) the IDs are hashed with
//	start   int64   when the tracker's first run started, unix ns (rule 5)
//	resume  uint64  the caller's mark: the first ingest log segment the
//	                baselines lack (Tracker.Resume)
//	chunks: count uint32 (> 0), then count × entry; a count of 0 ends them
//	entry:  id0, id1 uint64, value float64 bits, ts, seen int64 (40 bytes)
//	total   uint64  number of entries
//	crc     uint32  CRC-32C of everything before it (statefile.Checksum;
//	                CRC-32 IEEE up to version 5)
//
// Entries come in chunks of at most chunkSize, so that Save never copies
// the whole table: a single count up front would need them all. Version
// 6 is version 5 with the checksum every state file has (CRC-32C). The
// version says how IDs are made: from version 5, by SipHash-2-4-128 keyed
// with the file's seed ([Seed.Hash]), of the bucket, a 0 byte and the
// point's text up to its value as relay encodes it. Versions 3 and 4 made
// them with xxh3's 128-bit hash of the same key, seeded with a uint64
// seed, which a sender could make collide: they are read, and their
// baselines restored by that hash (Restore), once; the next save is
// version 6 with a new key. Version 4 is version 5 with the 8-byte seed;
// version 3 lacks start and resume too: it is read as a start now with no
// ingest log. Versions 1 and 2 made them another way (version 2 with an
// unseeded hash): their files are refused ([ErrOldFormat]), which costs
// one interval of deltas once.
const (
	stateMagic   = "SPDELTA\x00"
	stateVersion = 6
	ieeeUntil    = 5          // the last version checked with CRC-32 (IEEE)
	headerSize   = 8 + 4 + 8  // magic, version, saved: the same in every version
	seedSize     = 16 + 8 + 8 // seed, start, resume
	seedSizeV4   = 8 + 8 + 8  // a uint64 seed, start, resume
	seedSizeV3   = 8          // the seed alone
	entrySize    = 40
	chunkSize    = 4096
)

// ErrStale is wrapped by the error Load returns for a state saved longer
// than IdleTTL ago.
var ErrStale = errors.New("delta: saved state is stale")

// ErrOldFormat is wrapped by the error Load returns for a state an older
// version of sparkpulse saved: its IDs are not this version's.
var ErrOldFormat = errors.New("delta: saved state is of an older format")

// Save writes the states that series yields, as of now (unix ns), to w,
// with the tracker's Seed: series must yield IDs made by [Tracker.ID].
// The caller's iterator reads each state safely; updates may run
// meanwhile.
func (t *Tracker) Save(w io.Writer, now int64, series iter.Seq2[ID, State]) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	crc := statefile.NewChecksum()
	out := io.MultiWriter(bw, crc)

	buf := make([]byte, 0, 4+chunkSize*entrySize)
	buf = append(buf, stateMagic...)
	buf = binary.LittleEndian.AppendUint32(buf, stateVersion)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(now))
	buf = binary.LittleEndian.AppendUint64(buf, t.seed.k0)
	buf = binary.LittleEndian.AppendUint64(buf, t.seed.k1)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(t.start))
	buf = binary.LittleEndian.AppendUint64(buf, t.mark.Load())
	if _, err := out.Write(buf); err != nil {
		return fmt.Errorf("delta: save state: %w", err)
	}
	var total uint64
	n := 0
	flush := func() error {
		if n == 0 {
			return nil
		}
		binary.LittleEndian.PutUint32(buf, uint32(n))
		total += uint64(n)
		n = 0
		_, err := out.Write(buf)
		return err
	}
	buf = append(buf[:0], 0, 0, 0, 0)
	for id, st := range series {
		if !st.Known() {
			continue
		}
		buf = binary.LittleEndian.AppendUint64(buf, id[0])
		buf = binary.LittleEndian.AppendUint64(buf, id[1])
		buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(st.value))
		buf = binary.LittleEndian.AppendUint64(buf, uint64(st.ts))
		buf = binary.LittleEndian.AppendUint64(buf, uint64(now)) // seen: the series is live
		if n++; n == chunkSize {
			if err := flush(); err != nil {
				return fmt.Errorf("delta: save state: %w", err)
			}
			buf = buf[:4]
		}
	}
	if err := flush(); err != nil {
		return fmt.Errorf("delta: save state: %w", err)
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

// Load reads the states that a Save wrote to r, as of now (unix ns), and
// returns how many it keeps for Restore. It keeps nothing and returns an
// error if the file is not a complete, intact state of this version
// (ErrOldFormat for an older version's), or if it was saved longer than
// IdleTTL before now (ErrStale: its series would all be idle). Otherwise it
// skips series idle for longer than IdleTTL, keeps at most MaxSeries, and
// the tracker takes the file's Seed, so that [Tracker.ID] gives the IDs
// the last run saved; of a version 3 or 4 file it keeps its own key, and
// Restore finds the saved baselines by their old hash. A restored series
// has a baseline: its next sample yields a delta (rule 5). Load comes
// before the tracker's IDs are used.
func (t *Tracker) Load(r io.Reader, now int64) (int, error) {
	s := &stateReader{r: bufio.NewReaderSize(r, 64<<10)}
	h, err := s.read(headerSize, "the header", -1)
	if err != nil {
		return 0, err
	}
	if string(h[:8]) != stateMagic {
		return 0, fmt.Errorf("delta: load state: bad magic %q, not a sparkpulse delta state file", h[:8])
	}
	v := binary.LittleEndian.Uint32(h[8:])
	if v >= 1 && v < 3 {
		return 0, fmt.Errorf("%w: version %d, this version reads %d (series IDs are made another way)", ErrOldFormat, v, stateVersion)
	}
	sizes := map[uint32]int{3: seedSizeV3, 4: seedSizeV4, 5: seedSize, stateVersion: seedSize}
	if sizes[v] == 0 {
		return 0, fmt.Errorf("delta: load state: unsupported version %d (want %d)", v, stateVersion)
	}
	s.crc = statefile.NewChecksum()
	if v <= ieeeUntil {
		s.crc = crc32.NewIEEE()
	}
	saved := int64(binary.LittleEndian.Uint64(h[12:]))
	s.crc.Write(h)
	b, err := s.read(sizes[v], "the seed", -1)
	if err != nil {
		return 0, err
	}
	s.crc.Write(b)
	seed, legacy := t.seed, (*legacySeed)(nil)
	if v >= 5 {
		seed, b = SeedOf(binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])), b[8:]
	} else {
		l := legacySeed(binary.LittleEndian.Uint64(b))
		legacy = &l
	}
	start, resume := t.start, uint64(0)
	if v != 3 {
		start, resume = min(start, int64(binary.LittleEndian.Uint64(b[8:]))), binary.LittleEndian.Uint64(b[16:])
	}
	// A stale file is still read to the end: a damaged one should be
	// reported as damaged, not as stale.
	stale := now-saved > t.idleTTL

	recs := map[ID]State{}
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
			id := ID{binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])}
			st := State{
				value: math.Float64frombits(binary.LittleEndian.Uint64(b[16:])),
				ts:    int64(binary.LittleEndian.Uint64(b[24:])),
			}
			seen := int64(binary.LittleEndian.Uint64(b[32:]))
			if stale || now-seen > t.idleTTL || int64(len(recs)) >= t.maxCount || !st.Known() {
				continue
			}
			recs[id] = st
		}
	}
	b, err = s.read(8, "the entry total", -1)
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

	t.mu.Lock()
	t.restored, t.seed, t.legacy, t.start = recs, seed, legacy, start
	t.mu.Unlock()
	t.mark.Store(resume)
	return len(recs), nil
}

// Mark is the caller's mark a Save writes and a Load read: for the
// relays, the first ingest log segment the baselines lack.
func (t *Tracker) Mark() uint64 { return t.mark.Load() }

// SetMark sets the mark the next Save writes.
func (t *Tracker) SetMark(m uint64) { t.mark.Store(m) }
