package queue

import (
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
	"time"

	"github.com/sparkpulse/sparkpulse/statefile"
)

// The disk queue keeps batches the Queue could not hold in memory, or that
// were not delivered before shutdown, in segment files under its directory:
//
//	<seq>.seg   16-digit sequence number; header "SPQSEG1\n", then records:
//	            length uint32 (payload bytes), points uint32, written int64
//	            (unix ns), CRC-32C uint32 of the 16 bytes before it and the
//	            payload, then the payload (complete lines of line protocol)
//	head        the next record to deliver: "SPQHEAD2", seq uint64, offset
//	            uint64, and the CRC-32C of the 24 bytes before it; replaced
//	            atomically (statefile.Replace). Version 1, read still, had
//	            no magic: seq, offset and the CRC-32C of those 16 bytes.
//
// Checksums are statefile.Checksum's, as in every file of state-dir.
//
// Every file is created under a fresh random name (os.CreateTemp, which
// opens with O_EXCL) and renamed into place, or with O_EXCL itself, and
// opened with statefile.OpenFile (O_NOFOLLOW): a symbolic link planted in the directory is
// never written through, and a segment or head that is not a regular file
// is ignored.
//
// Records are delivered in the order they were written, one at a time.
// The head moves on when a record is delivered and is saved at most once a
// second and at Close, so a crash can deliver a second of records twice
// (InfluxDB keeps one point per series and time: a repeat changes nothing).
// Segment files are written through the page cache and flushed to disk
// (fsync) at most once a second and at Close: a killed process loses
// nothing it had written, a machine that loses power up to a second.
//
// When the segments would exceed the bound, the oldest segments are
// deleted, and their records counted as dropped.
const (
	segMagic     = "SPQSEG1\n"
	headMagic    = "SPQHEAD2"
	headSize     = len(headMagic) + 8 + 8 + 4
	headSizeV1   = 8 + 8 + 4
	recHeader    = 4 + 4 + 8 + 4
	maxRecord    = 256 << 20 // a batch larger than this in a segment is damage
	syncInterval = time.Second
)

// diskRecord is one batch read back from the queue.
type diskRecord struct {
	data    []byte
	points  int
	written time.Time
}

type segment struct {
	seq   uint64
	size  int64
	start int64    // where reading starts when it becomes the head; 0: after the header
	f     *os.File // open while the segment is read or written
}

// firstSeq numbers the first segment: pushFront numbers segments below it.
const firstSeq = 1 << 40

// diskQueue is safe for concurrent use: one goroutine pushes (spills),
// another reads and acknowledges.
type diskQueue struct {
	dir      string
	maxBytes int64
	segMax   int64

	mu       sync.Mutex
	segs     []*segment // ascending seq; the last one is written to
	headOff  int64      // offset of the next record in segs[0]
	inFlight int64      // size of the record handed out and not yet acknowledged; 0 if none
	bytes    int64      // bytes of segment files (headers and records) from the head on
	dirty    bool       // written since the last fsync
	headSave bool       // the head moved since it was last saved
	lastSync time.Time
	closed   bool

	// Counters, read by Stats.
	dropped, corrupt, records int64
}

// errQueueClosed is returned for pushes after Close.
var errQueueClosed = errors.New("queue: disk closed")

// errChecksum is a record whose length fits its segment but whose checksum
// does not match: damage inside the segment, or a torn last record.
var errChecksum = errors.New("checksum mismatch")

// skippable reports whether the damaged record at off, which readRecord
// failed with err after reading its length as n bytes, can be stepped
// over: its checksum alone failed and a sound record follows it. Only one
// record is skipped on trust, so a damaged length cannot lead the reader
// through garbage.
func skippable(f io.ReaderAt, off, size, n int64, err error) bool {
	if !errors.Is(err, errChecksum) || off+n >= size {
		return false
	}
	_, _, err = readRecord(f, off+n, size)
	return err == nil
}

// DiskBytes is about how many bytes of records the disk queue in dir
// holds (delivered records before the head are counted too), without
// opening it; 0 when there is none.
func DiskBytes(dir string) int64 {
	names, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	var n int64
	for _, name := range names {
		if st, err := os.Lstat(name); err == nil && st.Mode().IsRegular() && st.Size() > int64(len(segMagic)) {
			n += st.Size() - int64(len(segMagic))
		}
	}
	return n
}

// openDiskQueue opens or creates the queue in dir. A damaged tail (a record
// cut short by a crash) is truncated; a damaged head file restarts from the
// first segment, which may deliver records twice.
func openDiskQueue(dir string, maxBytes int64) (*diskQueue, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("queue: disk: %w", err)
	}
	q := &diskQueue{dir: dir, maxBytes: maxBytes, segMax: min(16<<20, max(maxBytes/8, 1<<20)), lastSync: time.Now()}
	// Temporary files of a write cut short by a crash.
	if tmps, err := filepath.Glob(filepath.Join(dir, "*.tmp")); err == nil {
		for _, t := range tmps {
			os.Remove(t)
		}
	}
	names, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		seq, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(n), ".seg"), 10, 64)
		if err != nil {
			continue // not ours
		}
		st, err := os.Lstat(n)
		if err != nil {
			return nil, fmt.Errorf("queue: disk: %w", err)
		}
		if !st.Mode().IsRegular() {
			q.corrupt++ // planted, not ours: never opened
			continue
		}
		q.segs = append(q.segs, &segment{seq: seq, size: st.Size()})
	}
	slices.SortFunc(q.segs, func(a, b *segment) int { return int(a.seq - b.seq) })

	q.headOff = int64(len(segMagic))
	if seq, off, ok := q.readHead(); ok {
		for len(q.segs) > 0 && q.segs[0].seq < seq {
			os.Remove(q.path(q.segs[0].seq)) // delivered before the last save
			q.segs = q.segs[1:]
		}
		if len(q.segs) > 0 && q.segs[0].seq == seq && off >= q.headOff && off <= q.segs[0].size {
			q.headOff = off
		}
	}
	if len(q.segs) > 0 {
		if err := q.recoverTail(); err != nil {
			return nil, err
		}
	}
	if err := q.openTail(); err != nil {
		return nil, err
	}
	for i, s := range q.segs {
		q.bytes += s.size
		if i == 0 {
			q.bytes -= q.headOff - int64(len(segMagic))
		}
	}
	return q, nil
}

func (q *diskQueue) path(seq uint64) string {
	return filepath.Join(q.dir, fmt.Sprintf("%016d.seg", seq))
}

// readHead reads the saved head, of either version, if it is intact.
func (q *diskQueue) readHead() (seq uint64, off int64, ok bool) {
	b, err := readNoFollow(filepath.Join(q.dir, "head"), int64(headSize))
	if err != nil {
		return 0, 0, false
	}
	var pos []byte
	switch {
	case len(b) == headSize && string(b[:len(headMagic)]) == headMagic:
		pos = b[len(headMagic) : len(headMagic)+16]
	case len(b) == headSizeV1:
		pos = b[:16]
	default:
		return 0, 0, false
	}
	if statefile.Checksum(b[:len(b)-4]) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return 0, 0, false
	}
	return binary.LittleEndian.Uint64(pos), int64(binary.LittleEndian.Uint64(pos[8:])), true
}

// saveHead writes the head atomically. Called with mu held.
func (q *diskQueue) saveHead() error {
	if len(q.segs) == 0 {
		return nil
	}
	b := binary.LittleEndian.AppendUint64([]byte(headMagic), q.segs[0].seq)
	b = binary.LittleEndian.AppendUint64(b, uint64(q.headOff))
	b = binary.LittleEndian.AppendUint32(b, statefile.Checksum(b))
	err := statefile.Replace(q.dir, "head", func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
	if err != nil {
		return err
	}
	q.headSave = false
	return nil
}

// readNoFollow reads at most max bytes of a regular file, refusing a
// symbolic link.
func readNoFollow(path string, max int64) ([]byte, error) {
	f, err := statefile.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, max+1))
}

// recoverTail truncates the last segment after its last complete record.
func (q *diskQueue) recoverTail() error {
	last := q.segs[len(q.segs)-1]
	f, err := statefile.OpenFile(q.path(last.seq), os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("queue: disk: %w", err)
	}
	defer f.Close()
	var magic [len(segMagic)]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil || string(magic[:]) != segMagic {
		// Not even a header: the segment was being created.
		if err := f.Truncate(0); err != nil {
			return err
		}
		if _, err := f.WriteAt([]byte(segMagic), 0); err != nil {
			return err
		}
		last.size = int64(len(segMagic))
		return nil
	}
	off := int64(len(segMagic))
	if len(q.segs) == 1 {
		off = q.headOff
	}
	for off < last.size {
		_, n, err := readRecord(f, off, last.size)
		if err != nil && !skippable(f, off, last.size, n, err) {
			break // a record cut short by a crash, and anything after it
		}
		off += n // the reader counts and skips a damaged record
	}
	if off < last.size {
		if err := f.Truncate(off); err != nil {
			return fmt.Errorf("queue: disk: truncating a damaged tail: %w", err)
		}
		last.size = off
	}
	return nil
}

// openTail opens the last segment for appending, creating the first one.
func (q *diskQueue) openTail() error {
	if len(q.segs) == 0 {
		return q.rotate()
	}
	last := q.segs[len(q.segs)-1]
	f, err := statefile.OpenFile(q.path(last.seq), os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("queue: disk: %w", err)
	}
	last.f = f
	return nil
}

// rotate starts a new segment. Called with mu held (or at open).
func (q *diskQueue) rotate() error {
	seq := uint64(firstSeq)
	if n := len(q.segs); n > 0 {
		seq = q.segs[n-1].seq + 1
		if last := q.segs[n-1]; last.f != nil && n > 1 {
			last.f.Close()
			last.f = nil
		}
	}
	f, err := statefile.OpenFile(q.path(seq), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("queue: disk: %w", err)
	}
	if _, err := f.WriteAt([]byte(segMagic), 0); err != nil {
		f.Close()
		return fmt.Errorf("queue: disk: %w", err)
	}
	q.segs = append(q.segs, &segment{seq: seq, size: int64(len(segMagic)), f: f})
	q.bytes += int64(len(segMagic))
	q.dirty = true
	return nil
}

// push appends a batch. It returns the points of the oldest segments it
// deleted to stay within the bound.
func (q *diskQueue) push(data []byte, points int, written time.Time) (dropped int, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return 0, errQueueClosed
	}
	rec := encodeRecord(nil, data, points, written)
	tail := q.segs[len(q.segs)-1]
	if tail.size > int64(len(segMagic)) && tail.size+int64(len(rec)) > q.segMax {
		if err := q.rotate(); err != nil {
			return 0, err
		}
		tail = q.segs[len(q.segs)-1]
	}
	if _, err := tail.f.WriteAt(rec, tail.size); err != nil {
		return 0, fmt.Errorf("queue: disk: writing %s: %w", q.path(tail.seq), err)
	}
	tail.size += int64(len(rec))
	q.bytes += int64(len(rec))
	q.records++
	q.dirty = true
	for q.bytes > q.maxBytes && len(q.segs) > 1 {
		dropped += q.dropOldest()
	}
	q.maybeSync()
	return dropped, nil
}

// encodeRecord appends a record to b.
func encodeRecord(b []byte, data []byte, points int, written time.Time) []byte {
	at := len(b)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(data)))
	b = binary.LittleEndian.AppendUint32(b, uint32(points))
	b = binary.LittleEndian.AppendUint64(b, uint64(written.UnixNano()))
	crc := statefile.Checksum(b[at:at+16], data)
	b = binary.LittleEndian.AppendUint32(b, crc)
	return append(b, data...)
}

// pushFront puts batches ahead of everything queued: the batches a Writer
// was sending when it closed, older than what it had spilled meanwhile.
// The head segment, if partly read, resumes where it was afterwards (after
// a restart: from its start, so its delivered records come again).
func (q *diskQueue) pushFront(recs []diskRecord) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(recs) == 0 {
		return nil
	}
	if q.closed {
		return errQueueClosed
	}
	head := q.segs[0]
	if head.seq <= 1 {
		return errors.New("queue: disk: no sequence number left in front")
	}
	b := []byte(segMagic)
	for _, r := range recs {
		b = encodeRecord(b, r.data, r.points, r.written)
	}
	seq := head.seq - 1
	err := statefile.Replace(q.dir, filepath.Base(q.path(seq)), func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
	if err != nil {
		return fmt.Errorf("queue: disk: %w", err)
	}
	head.start = q.headOff
	q.segs = append([]*segment{{seq: seq, size: int64(len(b))}}, q.segs...)
	q.headOff = int64(len(segMagic))
	q.inFlight = 0
	q.bytes += int64(len(b))
	q.records += int64(len(recs))
	q.dirty, q.headSave = true, true
	return nil
}

// dropOldest deletes the oldest segment and returns its undelivered
// points. A record in flight from it is still delivered, and its
// acknowledgement ignored. Called with mu held.
func (q *diskQueue) dropOldest() int {
	s := q.segs[0]
	points := 0
	f := s.f
	if f == nil {
		f, _ = statefile.OpenFile(q.path(s.seq), os.O_RDONLY, 0)
	}
	if f != nil {
		off := q.headOff + max(q.inFlight, 0)
		for off < s.size {
			r, n, err := readRecord(f, off, s.size)
			if err != nil && !skippable(f, off, s.size, n, err) {
				break
			}
			points += r.points
			off += n
		}
		f.Close()
	}
	os.Remove(q.path(s.seq))
	q.bytes -= s.size - q.headOff + int64(len(segMagic))
	q.segs = q.segs[1:]
	q.headOff = max(q.segs[0].start, int64(len(segMagic)))
	q.inFlight = -1 // acknowledging it must not move the new head
	q.headSave = true
	q.dropped += int64(points)
	return points
}

// damaged is the number of damaged records (or unreadable segments) met.
func (q *diskQueue) damaged() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.corrupt
}

// has reports whether a record waits to be handed out.
func (q *diskQueue) has() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.hasLocked()
}

func (q *diskQueue) hasLocked() bool {
	if q.inFlight != 0 || len(q.segs) == 0 {
		return false
	}
	return q.headOff < q.segs[0].size || len(q.segs) > 1
}

// next hands out the oldest record; at most one is out at a time. A
// damaged record is skipped and counted; when no sound record follows it,
// so is the rest of its segment.
func (q *diskQueue) next() (diskRecord, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.hasLocked() {
		s := q.segs[0]
		if q.headOff >= s.size {
			q.removeHead()
			continue
		}
		if s.f == nil {
			f, err := statefile.OpenFile(q.path(s.seq), os.O_RDONLY, 0)
			if err != nil {
				q.corrupt++
				q.removeHead()
				continue
			}
			s.f = f
		}
		r, n, err := readRecord(s.f, q.headOff, s.size)
		if err != nil && skippable(s.f, q.headOff, s.size, n, err) {
			q.corrupt++
			q.bytes -= n
			q.headOff += n
			q.headSave = true
			continue
		}
		if err != nil {
			q.corrupt++
			q.bytes -= s.size - q.headOff
			q.headOff = s.size
			q.headSave = true
			if len(q.segs) == 1 {
				return diskRecord{}, false
			}
			q.removeHead()
			continue
		}
		q.inFlight = n
		return r, true
	}
	return diskRecord{}, false
}

// removeHead deletes segs[0], fully read. Called with mu held.
func (q *diskQueue) removeHead() {
	s := q.segs[0]
	if len(q.segs) == 1 {
		return // the tail stays, to be written to
	}
	if s.f != nil {
		s.f.Close()
	}
	os.Remove(q.path(s.seq))
	q.bytes -= s.size - q.headOff + int64(len(segMagic))
	q.segs = q.segs[1:]
	q.headOff = max(q.segs[0].start, int64(len(segMagic)))
	q.headSave = true
}

// ack marks the record handed out by next as delivered.
func (q *diskQueue) ack() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.inFlight > 0 {
		q.headOff += q.inFlight
		q.bytes -= q.inFlight
		q.headSave = true
		if q.headOff >= q.segs[0].size && len(q.segs) > 1 {
			q.removeHead()
		}
	}
	q.inFlight = 0
	q.maybeSync()
}

// release returns a record handed out by next without delivering it: it
// will be handed out again (after a restart).
func (q *diskQueue) release() {
	q.mu.Lock()
	q.inFlight = 0
	q.mu.Unlock()
}

// maybeSync flushes segment data and the head at most once a second.
// Called with mu held.
func (q *diskQueue) maybeSync() {
	if time.Since(q.lastSync) < syncInterval {
		return
	}
	q.syncLocked()
}

func (q *diskQueue) syncLocked() error {
	q.lastSync = time.Now()
	var errs []error
	if q.dirty {
		if tail := q.segs[len(q.segs)-1]; tail.f != nil {
			errs = append(errs, tail.f.Sync())
		}
		q.dirty = false
	}
	if q.headSave {
		errs = append(errs, q.saveHead())
	}
	return errors.Join(errs...)
}

// size returns the bytes waiting on disk and the write time of the oldest
// record, zero when the queue is empty.
func (q *diskQueue) size() (int64, time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.hasLocked() && q.inFlight == 0 {
		return 0, time.Time{}
	}
	s := q.segs[0]
	if s.f == nil || q.headOff >= s.size {
		return q.bytes, time.Time{}
	}
	var h [recHeader]byte
	if _, err := s.f.ReadAt(h[:], q.headOff); err != nil {
		return q.bytes, time.Time{}
	}
	return q.bytes, time.Unix(0, int64(binary.LittleEndian.Uint64(h[8:])))
}

// close flushes and closes the files; the queue stays on disk.
func (q *diskQueue) close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil
	}
	q.closed = true
	q.headSave = true
	err := q.syncLocked()
	for _, s := range q.segs {
		if s.f != nil {
			s.f.Close()
			s.f = nil
		}
	}
	return err
}

// readRecord reads the record at off of a segment of the given size and
// returns it and its length on disk.
func readRecord(f io.ReaderAt, off, size int64) (diskRecord, int64, error) {
	if size-off < recHeader {
		return diskRecord{}, 0, io.ErrUnexpectedEOF
	}
	var h [recHeader]byte
	if _, err := f.ReadAt(h[:], off); err != nil {
		return diskRecord{}, 0, err
	}
	n := int64(binary.LittleEndian.Uint32(h[:]))
	if n > maxRecord || n > size-off-recHeader {
		return diskRecord{}, 0, fmt.Errorf("record at %d: length %d beyond the segment", off, n)
	}
	payload := make([]byte, n)
	if _, err := f.ReadAt(payload, off+recHeader); err != nil {
		return diskRecord{}, 0, err
	}
	crc := statefile.Checksum(h[:16], payload)
	if crc != binary.LittleEndian.Uint32(h[16:]) {
		return diskRecord{}, recHeader + n, fmt.Errorf("record at %d: %w", off, errChecksum)
	}
	return diskRecord{
		data:    payload,
		points:  int(binary.LittleEndian.Uint32(h[4:])),
		written: time.Unix(0, int64(binary.LittleEndian.Uint64(h[8:]))),
	}, recHeader + n, nil
}
