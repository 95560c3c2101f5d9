// Package queue holds sealed batches of encoded points between the stage
// that seals them and the senders that deliver them: in memory first,
// bounded in bytes, and on disk when memory is full or when the process
// stops with batches undelivered.
//
// The contract, for any number of producers and senders:
//
//   - Producers: Reserve(n, wait) accounts n bytes before they are copied
//     into a batch, and Put queues the sealed batch. Every byte reserved is
//     Put, so the queue knows when nothing more is coming.
//   - Senders: Get hands out the oldest batch; Done gives it back, delivered
//     (or refused: it is freed) or not (a sender giving up at shutdown: it
//     is kept).
//   - Owner: Drain stops reservations; Get then returns false once every
//     reserved byte is Put and handed out. Abort makes Get return false at
//     once. Close, once the senders have returned, waits for what is
//     reserved to be Put, keeps on disk what is left and reports what it
//     could not keep.
//
// Reserve is the only back-pressure. When memory is full it moves the
// oldest waiting batches to the disk queue; without one it waits for room
// (wait) or returns ErrFull and keeps nothing: a TCP reader that waits
// slows its sender down, a UDP reader that cannot wait counts a drop.
// With a disk queue nothing waits: when batches in flight hold all of
// memory, the batch being filled goes over MaxBytes (by at most its size
// and what producers reserve at once) and moves to disk once sealed.
// WaitRoom lets a listener hold back new connections while memory is
// nearly full. Disk records are older than anything in memory: they are
// handed out first, one at a time, and memory waits until they are all
// delivered, so points reach InfluxDB in the order they came. Once
// draining, disk records stay for the next start, and with a disk queue
// Draining is closed, telling senders to stop retrying: what they hold is
// kept on disk by Close (batches in flight in front, whole) instead of
// holding shutdown up.
//
// The disk format and its guarantees are described in disk.go.
package queue

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Batch is a run of complete lines of line protocol, each ending in '\n',
// and where each ends (see Lines).
type Batch struct {
	Data   []byte
	Ends   []int32   // Lines' Ends, from 0
	Keys   []int32   // Lines' Keys, from 0
	Points int       // the points it counts: its lines, or fewer for a record kept on disk after part of it was delivered
	First  time.Time // when its first point was taken
	// Remaining counts its points neither delivered nor refused yet. A
	// sender that delivers a batch in parts takes them off; Close keeps a
	// batch in flight that still has some, whole (points written twice
	// are stored once).
	Remaining atomic.Int64

	fromDisk bool
}

// Lines is the batch's lines.
func (b *Batch) Lines() Lines { return Lines{Data: b.Data, Ends: b.Ends, Keys: b.Keys} }

// Config bounds a Queue. Zero values select the defaults.
type Config struct {
	// MaxBytes bounds the bytes of points held in memory, in batches being
	// filled, waiting or being sent.
	MaxBytes int
	// Dir holds the disk queue; "" keeps batches in memory only.
	Dir string
	// MaxDiskBytes bounds the disk queue; beyond it its oldest segments
	// are deleted and their points counted in Stats.DiskDropped.
	MaxDiskBytes int64
	// Log receives disk errors, drops and damage; give it a sampled core.
	// nil: no logging.
	Log *zap.Logger
}

// Defaults, and the smallest bounds a configuration should set: below
// them a batch of the default size barely fits. Smaller ones work (a
// batch larger than MaxBytes is taken when the queue is empty) and serve
// tests.
const (
	DefaultMaxBytes     = 64 << 20
	DefaultMaxDiskBytes = 1 << 30
	SaneMaxBytes        = 1 << 20
	SaneMaxDiskBytes    = 16 << 20
)

// WithDefaults fills zero values.
func (c Config) WithDefaults() Config {
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.MaxDiskBytes == 0 {
		c.MaxDiskBytes = DefaultMaxDiskBytes
	}
	if c.Log == nil {
		c.Log = zap.NewNop()
	}
	return c
}

// Validate rejects negative bounds (zero means the default).
func (c Config) Validate() error {
	var errs []error
	if c.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("max-queue-bytes %d: must not be negative", c.MaxBytes))
	}
	if c.MaxDiskBytes < 0 {
		errs = append(errs, fmt.Errorf("max-disk-queue-bytes %d: must not be negative", c.MaxDiskBytes))
	}
	return errors.Join(errs...)
}

// Errors of Reserve.
var (
	ErrFull   = errors.New("queue: full")
	ErrClosed = errors.New("queue: draining")
)

// Stats is a snapshot of a Queue.
type Stats struct {
	Batches     int       // batches in memory, waiting or being sent
	Bytes       int64     // bytes reserved in memory
	Oldest      time.Time // first point of the oldest batch in memory or on disk; zero if none
	DiskBytes   int64     // bytes waiting in the disk queue
	Spilled     uint64    // batches moved to the disk queue
	DiskDropped uint64    // points dropped because the disk queue was full
	Damaged     uint64    // damaged disk records skipped
	Peak        int64     // largest memory plus disk backlog so far, in bytes
}

// Queue is safe for concurrent use.
type Queue struct {
	cfg Config

	mu       sync.Mutex
	room     sync.Cond // Reserve and WaitRoom wait here
	ready    sync.Cond // Get waits here
	waiting  []*Batch  // sealed, not handed out, oldest first
	out      []*Batch  // memory batches handed out and not acknowledged
	bytes    int       // reserved: batches being filled, waiting and out
	filling  int       // reserved and not Put yet
	waiters  int       // producers waiting in Reserve for room
	free     [][]byte  // memory of done batches, for later ones
	freeEnds [][]int32 // and of their line and key ends, in pairs
	freeCap  int       // bytes of the buffers in free
	lastSize int       // bytes of the last batch put, to size the next
	disk     *diskQueue
	diskBusy bool          // a disk record is handed out
	draining bool          // Drain was called
	drainCh  chan struct{} // closed by Drain; nil without a disk queue
	aborted  bool
	closed   bool
	peak     int64
	stats    Stats // Spilled, DiskDropped, Damaged
}

// Open returns a queue, opening (or creating) its disk queue in cfg.Dir.
// A disk queue left by an earlier run is delivered first.
func Open(cfg Config) (*Queue, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	q := &Queue{cfg: cfg.WithDefaults()}
	q.room.L, q.ready.L = &q.mu, &q.mu
	if q.cfg.Dir != "" {
		d, err := openDiskQueue(q.cfg.Dir, q.cfg.MaxDiskBytes)
		if err != nil {
			return nil, err
		}
		q.disk, q.drainCh = d, make(chan struct{})
		q.stats.Damaged = uint64(d.damaged())
	}
	return q, nil
}

// Persistent reports whether the queue has a disk queue.
func (q *Queue) Persistent() bool { return q.disk != nil }

// Backlog returns the bytes and oldest write time of what an earlier run
// left in the disk queue (or what has been spilled since).
func (q *Queue) Backlog() (int64, time.Time) {
	if q.disk == nil {
		return 0, time.Time{}
	}
	return q.disk.size()
}

// Reserve accounts n bytes of points about to be put in a batch. See the
// package documentation. After Drain it returns ErrClosed.
func (q *Queue) Reserve(n int, wait bool) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for !q.draining && q.bytes > 0 && q.bytes+n > q.cfg.MaxBytes {
		if q.spill() {
			continue
		}
		if q.disk != nil && len(q.waiting) == 0 {
			// Batches in flight and the one being filled hold all of
			// memory: nothing can move to disk until that one is sealed.
			// It takes the bytes over the bound (at most a batch, and
			// what producers reserve at once) and spills once sealed;
			// waiting would tie the readers to InfluxDB, which a disk
			// queue exists to spare them, and a stop could not end.
			break
		}
		if !wait {
			return ErrFull
		}
		q.waiters++
		q.room.Wait()
		q.waiters--
	}
	if q.draining {
		return ErrClosed
	}
	q.bytes += n
	q.filling += n
	q.notePeak()
	return nil
}

// Blocked reports whether a producer waits in Reserve for room.
func (q *Queue) Blocked() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.waiters > 0
}

// Starved reports whether no sealed batch waits to be sent: a producer
// that finds the queue full then seals the batch it is filling, lest the
// senders idle while its points wait for the batch timer.
func (q *Queue) Starved() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiting) == 0
}

// Put queues a sealed batch whose bytes were reserved. It is taken after
// Drain too: its points were accepted before.
func (q *Queue) Put(b *Batch) {
	b.Remaining.Store(int64(b.Points))
	q.mu.Lock()
	q.waiting = append(q.waiting, b)
	q.lastSize = len(b.Data)
	q.filling = max(q.filling-len(b.Data), 0)
	if q.filling == 0 && q.draining {
		q.ready.Broadcast() // an idle sender may stop
		q.room.Broadcast()  // and Close may go on
	} else {
		q.ready.Signal()
	}
	q.mu.Unlock()
}

// Buffer returns memory for a new batch: that of a done batch about as
// large as the last one put, or a new buffer of about that size.
func (q *Queue) Buffer() Lines {
	q.mu.Lock()
	defer q.mu.Unlock()
	var ends, keys []int32
	if n := len(q.freeEnds); n >= 2 {
		ends, keys = q.freeEnds[n-2][:0], q.freeEnds[n-1][:0]
		q.freeEnds[n-2], q.freeEnds[n-1] = nil, nil
		q.freeEnds = q.freeEnds[:n-2]
	}
	size := min(max(q.lastSize+q.lastSize/8, 4<<10), q.cfg.MaxBytes)
	for len(q.free) > 0 {
		buf := q.free[len(q.free)-1]
		q.free[len(q.free)-1] = nil
		q.free = q.free[:len(q.free)-1]
		q.freeCap -= cap(buf)
		// One from a time of much smaller or larger batches is let go; a
		// slightly small one grows in the rare case it falls short.
		if c := cap(buf); c >= q.lastSize-q.lastSize/8 && c <= 4*size {
			return Lines{Data: buf[:0], Ends: ends, Keys: keys}
		}
	}
	return Lines{Data: make([]byte, 0, size), Ends: ends, Keys: keys}
}

// minFree done batches are always kept for reuse: enough for the batches
// in flight and the one being filled.
const minFree = 4

// recycle keeps the memory of a done memory batch for a later one: a few
// always, more while the batches held and kept stay within MaxBytes. A
// new batch then rarely needs new memory, which costs more than filling
// it: fresh pages fault in and are cleared, and memory the collector
// returned to the system must be fetched again. Called with mu held.
func (q *Queue) recycle(b *Batch) {
	if c := cap(b.Data); !b.fromDisk && (len(q.free) < minFree || q.bytes+q.freeCap+c <= q.cfg.MaxBytes) {
		q.free = append(q.free, b.Data)
		q.freeCap += c
		if len(q.freeEnds) < 2*minFree && b.Ends != nil && b.Keys != nil {
			q.freeEnds = append(q.freeEnds, b.Ends, b.Keys)
		}
	}
	b.Data, b.Ends, b.Keys = nil, nil, nil
}

// WaitEmpty returns true once nothing is left to send: no batch waits or
// is out, and the disk queue is empty; false if done is closed first.
func (q *Queue) WaitEmpty(done <-chan struct{}) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.waitFor(done, func() bool {
		return len(q.waiting) == 0 && len(q.out) == 0 && !q.diskBusy && (q.disk == nil || !q.disk.has())
	})
}

// waitFor waits on room until cond holds (true) or done is closed
// (false). Called with mu held.
func (q *Queue) waitFor(done <-chan struct{}, cond func() bool) bool {
	if cond() {
		return true
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-done:
			q.mu.Lock()
			q.room.Broadcast()
			q.mu.Unlock()
		case <-stop:
		}
	}()
	for !cond() {
		select {
		case <-done:
			return false
		default:
		}
		q.room.Wait()
	}
	return true
}

// WaitRoom returns once memory is at most three quarters full, or done is
// closed; with a disk queue, at once. A listener that waits here before
// taking a connection leaves a quarter of the queue for the connections
// it took just before.
func (q *Queue) WaitRoom(done <-chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.waitFor(done, func() bool {
		return q.disk != nil || q.draining || q.bytes <= q.cfg.MaxBytes-q.cfg.MaxBytes/4
	})
}

// spill moves the oldest waiting batch to the disk queue and reports
// whether it did. Called with mu held: batches reach the disk in the
// order they were sealed.
func (q *Queue) spill() bool {
	if q.disk == nil || len(q.waiting) == 0 {
		return false
	}
	b := q.waiting[0]
	dropped, err := q.disk.push(b.Data, int(b.Remaining.Load()), b.First)
	if err != nil {
		q.cfg.Log.Error("cannot write to the disk queue; holding points in memory", zap.String("dir", q.cfg.Dir), zap.Error(err))
		return false // the caller waits or refuses
	}
	if dropped > 0 {
		q.cfg.Log.Error("disk queue full: dropped its oldest points", zap.Int("points", dropped),
			zap.Int64("max_disk_bytes", q.cfg.MaxDiskBytes), zap.String("dir", q.cfg.Dir))
	}
	q.waiting[0] = nil
	q.waiting = q.waiting[1:]
	q.bytes -= len(b.Data)
	q.recycle(b)
	q.stats.Spilled++
	q.stats.DiskDropped += uint64(dropped)
	q.notePeak()
	q.ready.Signal()
	return true
}

// notePeak records the largest backlog. Called with mu held.
func (q *Queue) notePeak() {
	backlog := int64(q.bytes)
	if q.disk != nil {
		b, _ := q.disk.size()
		backlog += b
	}
	q.peak = max(q.peak, backlog)
}

// Get hands out the oldest batch, waiting for one. It returns false after
// Abort, and after Drain once nothing more is to be sent now.
func (q *Queue) Get() (*Batch, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for !q.aborted {
		if q.diskReady() {
			q.diskBusy = true
			q.mu.Unlock()
			rec, ok := q.disk.next()
			q.mu.Lock()
			if d := uint64(q.disk.damaged()); d > q.stats.Damaged {
				q.cfg.Log.Error("skipped a damaged record in the disk queue (a bad disk?), with the rest of its segment file if no sound record follows it",
					zap.String("dir", q.cfg.Dir), zap.Uint64("damaged", d-q.stats.Damaged))
				q.stats.Damaged = d
			}
			if ok {
				// A record keeps its bytes only: its lines are found once here.
				l := Scan(rec.data)
				b := &Batch{Data: rec.data, Ends: l.Ends, Keys: l.Keys, Points: rec.points, First: rec.written, fromDisk: true}
				b.Remaining.Store(int64(rec.points))
				return b, true
			}
			q.diskBusy = false
			q.ready.Broadcast() // memory may be next
			q.room.Broadcast()
			continue
		}
		if q.memoryReady() {
			b := q.waiting[0]
			q.waiting[0] = nil
			q.waiting = q.waiting[1:]
			q.out = append(q.out, b)
			return b, true
		}
		if q.draining && q.filling == 0 && !q.diskBusy {
			// Memory is empty, or must wait behind disk records that are
			// kept for the next start: Close moves it to disk.
			return nil, false
		}
		q.ready.Wait()
	}
	return nil, false
}

// diskReady reports whether a disk record should be handed out: one at a
// time, and none once draining (the backlog is kept for the next start
// rather than holding shutdown up). Called with mu held.
func (q *Queue) diskReady() bool {
	return q.disk != nil && !q.diskBusy && !q.draining && q.disk.has()
}

// memoryReady reports whether a memory batch may be handed out: one waits
// and no disk record is waiting or out. Called with mu held.
func (q *Queue) memoryReady() bool {
	return len(q.waiting) > 0 && (q.disk == nil || !q.diskBusy && !q.disk.has())
}

// Done gives back b, handed out by Get. Delivered (or refused) frees it:
// its memory is for a later batch, or the disk head moves on. Not
// delivered, a sender gave up on it at shutdown: a disk record stays on
// disk, to be delivered after the next start; a memory batch is kept by
// Close.
func (q *Queue) Done(b *Batch, delivered bool) {
	if b.fromDisk {
		if delivered {
			q.disk.ack()
		} else {
			q.disk.release()
		}
	} else if !delivered {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if b.fromDisk {
		q.diskBusy = false
		b.Data = nil
		q.ready.Broadcast()
	} else if i := slices.Index(q.out, b); i >= 0 {
		q.out = slices.Delete(q.out, i, i+1)
		q.bytes -= len(b.Data)
		q.recycle(b)
	}
	q.room.Broadcast()
}

// Drain stops new reservations and disk deliveries; see the package
// documentation. Batches being filled are still Put.
func (q *Queue) Drain() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.drain()
}

// drain is Drain, called with mu held.
func (q *Queue) drain() {
	if q.draining {
		return
	}
	q.draining = true
	if q.drainCh != nil {
		close(q.drainCh)
	}
	q.room.Broadcast()
	q.ready.Broadcast()
}

// Draining is closed by Drain when the queue has a disk queue, which keeps
// undelivered batches for the next start; without one it is nil, which
// never becomes ready.
func (q *Queue) Draining() <-chan struct{} { return q.drainCh }

// Abort makes Get return false at once: the senders are to stop.
func (q *Queue) Abort() {
	q.mu.Lock()
	q.aborted = true
	q.ready.Broadcast()
	q.room.Broadcast()
	q.mu.Unlock()
}

// Leftover is what Close found undelivered.
type Leftover struct {
	KeptPoints  int64 // kept in the disk queue for the next start
	LostPoints  int64 // neither delivered nor kept
	LostBatches int
}

// Close is called once every sender has returned. It drains the queue and
// waits until the bytes reserved are Put: a producer that had room
// reserved when the senders stopped still hands in its batch, which is
// kept with the rest. With a disk queue it keeps there, for the next
// start, the batches in flight (in front: they are older than anything
// spilled meanwhile) and those waiting.
func (q *Queue) Close() (left Leftover, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return left, nil
	}
	q.drain()
	for q.filling > 0 {
		q.room.Wait() // Put broadcasts when the last reserved byte is in
	}
	q.closed = true
	if q.disk != nil {
		if q.diskBusy {
			q.disk.release() // not released by its sender: stays on disk
			q.diskBusy = false
		}
		var front []diskRecord
		for _, b := range q.out {
			if b.Remaining.Load() > 0 {
				front = append(front, diskRecord{data: b.Data, points: b.Points, written: b.First})
			}
		}
		if err = q.disk.pushFront(front); err == nil {
			for _, r := range front {
				left.KeptPoints += int64(r.points)
			}
			q.out = nil
		}
		var rest []*Batch
		for _, b := range q.waiting {
			if _, perr := q.disk.push(b.Data, b.Points, b.First); perr == nil {
				left.KeptPoints += int64(b.Points)
			} else {
				rest = append(rest, b)
				err = errors.Join(err, perr)
			}
		}
		q.waiting = rest
		err = errors.Join(err, q.disk.close())
	}
	for _, b := range append(q.out, q.waiting...) {
		if n := b.Remaining.Load(); n > 0 {
			left.LostPoints += n
			left.LostBatches++
		}
	}
	return left, err
}

// MemorySince is when the oldest point held in memory (waiting or handed
// out, not on disk) was taken; zero if none.
func (q *Queue) MemorySince() time.Time {
	q.mu.Lock()
	defer q.mu.Unlock()
	var oldest time.Time
	for _, b := range q.out {
		if oldest.IsZero() || b.First.Before(oldest) {
			oldest = b.First
		}
	}
	if len(q.waiting) > 0 && (oldest.IsZero() || q.waiting[0].First.Before(oldest)) {
		oldest = q.waiting[0].First
	}
	return oldest
}

// Stats returns a snapshot.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.stats
	s.Batches = len(q.waiting) + len(q.out)
	s.Bytes = int64(q.bytes)
	s.Peak = q.peak
	for _, b := range q.out {
		if s.Oldest.IsZero() || b.First.Before(s.Oldest) {
			s.Oldest = b.First
		}
	}
	if len(q.waiting) > 0 && (s.Oldest.IsZero() || q.waiting[0].First.Before(s.Oldest)) {
		s.Oldest = q.waiting[0].First
	}
	if q.disk != nil {
		var oldest time.Time
		s.DiskBytes, oldest = q.disk.size()
		if !oldest.IsZero() && (s.Oldest.IsZero() || oldest.Before(s.Oldest)) {
			s.Oldest = oldest
		}
	}
	return s
}
