package influx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	influxdb2 "github.com/influxdata/influxdb-client-go/v2"
	"github.com/influxdata/influxdb-client-go/v2/api"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// batch is a sealed run of complete lines. data is never modified once the
// batch is sealed, so its halves can be sent while it is being retried.
type batch struct {
	data      string // its lines; a view of buf when buf is set
	buf       []byte // the memory of data, reused once the batch is done
	points    int
	first     time.Time    // when its first point was appended
	remaining atomic.Int64 // points neither delivered nor dropped yet
}

// Writer delivers lines to one Target. Append is safe for concurrent use.
type Writer struct {
	cfg     Config
	target  Target
	url     string // without password, for logs
	log     *zap.Logger
	dropLog *zap.Logger // sampled: a few entries per second per message
	client  influxdb2.Client
	api     api.WriteAPIBlocking

	ctx    context.Context // cancelled when Close gives up
	cancel context.CancelFunc
	done   chan struct{} // closed when every sender has returned

	mu       sync.Mutex
	space    sync.Cond // Append waits here for queue space
	work     sync.Cond // senders wait here for batches
	cur      []byte    // the batch being filled
	free     [][]byte  // memory of done batches, for the next ones
	curPts   int
	curFirst time.Time
	lastSize int           // bytes of the last sealed batch, to size the next
	timer    *time.Timer   // seals a partial batch BatchTimeout after its first point
	queue    []*batch      // sealed, waiting for a sender
	active   []*batch      // being sent
	pending  int           // bytes of cur, queue and active
	closing  bool          // Close was called
	aborted  bool          // Close gave up
	closeErr error         // result of the first Close
	closed   chan struct{} // closed when closeErr is set

	disk      *diskQueue    // nil without Config.QueueDir
	stopRetry chan struct{} // with a disk queue, closed by Close: failed writes go to disk instead of being retried
	diskBusy  bool          // a sender is delivering a disk record
	peak      int64         // largest backlog seen: memory plus disk bytes

	statsMu sync.Mutex
	stats   Stats
}

// Stats is a snapshot of a Writer's counters.
type Stats struct {
	PointsWritten   uint64            // accepted by InfluxDB
	BatchesWritten  uint64            // write requests accepted, wholly or in part
	PointsDropped   map[string]uint64 // refused by InfluxDB (or appended after Close), by reason
	WriteErrors     map[string]uint64 // failed requests by kind: network, 5xx, 429, 4xx
	Retries         uint64            // requests repeated after an error
	QueuedBatches   int               // batches not yet delivered, including the one being filled
	QueuedBytes     int64             // their size
	OldestQueuedAge time.Duration     // age of the oldest undelivered point, in memory or on disk
	DiskBytes       int64             // bytes waiting in the disk queue
	DiskSpilled     uint64            // batches written to the disk queue
	DiskDamaged     uint64            // damaged disk records skipped (with the rest of their segment when their length is damaged)
	PeakBacklog     int64             // largest memory plus disk backlog so far, in bytes
}

// NewWriter starts the sending goroutines of a writer for t. It does not
// contact InfluxDB; see Check.
func NewWriter(cfg Config, t Target) (*Writer, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if t.Bucket == "" {
		return nil, errors.New("influx: target bucket is empty")
	}
	if strings.HasPrefix(t.Bucket, "/") {
		return nil, fmt.Errorf("influx: bucket %q: empty database name", t.Bucket)
	}
	org := t.Org
	if org == "" {
		org = cfg.Org
	}
	w := &Writer{
		cfg:    cfg,
		target: t,
		url:    RedactURL(cfg.URL),
		done:   make(chan struct{}),
		closed: make(chan struct{}),
		stats: Stats{
			PointsDropped: map[string]uint64{},
			WriteErrors:   map[string]uint64{},
		},
	}
	w.log = cfg.Logger.With(zap.String("influxdb", w.url), zap.String("bucket", t.Bucket))
	w.dropLog = w.log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, time.Second, 3, 0)
	}))
	w.space.L = &w.mu
	w.work.L = &w.mu
	if cfg.QueueDir != "" {
		if w.disk, err = openDiskQueue(cfg.QueueDir, cfg.MaxDiskBytes); err != nil {
			return nil, err
		}
		w.stopRetry = make(chan struct{})
		if b, oldest := w.disk.size(); b > 0 {
			w.log.Info("delivering the disk queue left by the last run first",
				zap.String("dir", cfg.QueueDir), zap.Int64("bytes", b), zap.Time("oldest", oldest))
		}
	}
	w.client = newClient(cfg)
	w.api = w.client.WriteAPIBlocking(org, t.Bucket)
	w.ctx, w.cancel = context.WithCancel(context.Background())

	var senders sync.WaitGroup
	for range cfg.MaxInFlight {
		senders.Go(w.sender)
	}
	go func() {
		senders.Wait()
		close(w.done)
	}()
	return w, nil
}

// Append copies n complete lines, each ending in '\n', into the current
// batch. When the memory queue is full it moves the oldest batches to the
// disk queue, or, without one, blocks until there is room: a TCP reader
// then slows its sender down. After Close the lines are dropped and counted
// under "writer closed".
func (w *Writer) Append(lines []byte, n int) {
	w.appendLines(lines, n, true)
}

// WaitRoom returns once the memory queue is at most three quarters full, or
// done is closed; with a disk queue, at once. A listener that waits here
// before taking a connection leaves a quarter of the queue for the
// connections it took just before.
func (w *Writer) WaitRoom(done <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	room := func() bool {
		return w.disk != nil || w.closing || w.pending <= w.cfg.MaxQueueBytes-w.cfg.MaxQueueBytes/4
	}
	if room() {
		return
	}
	waiting := make(chan struct{})
	defer close(waiting)
	go func() {
		select {
		case <-done:
			w.mu.Lock()
			w.space.Broadcast()
			w.mu.Unlock()
		case <-waiting:
		}
	}()
	for !room() {
		select {
		case <-done:
			return
		default:
		}
		w.space.Wait()
	}
}

// TryAppend is Append for a reader that cannot wait (UDP): it returns false,
// and keeps nothing, when the lines fit neither in memory nor on disk.
func (w *Writer) TryAppend(lines []byte, n int) bool {
	return w.appendLines(lines, n, false)
}

func (w *Writer) appendLines(lines []byte, n int, wait bool) bool {
	if n <= 0 || len(lines) == 0 {
		return true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for !w.closing && w.pending > 0 && w.pending+len(lines) > w.cfg.MaxQueueBytes {
		// A full queue should drain as fast as possible: do not let the
		// batch being filled wait for its timer.
		if w.curPts > 0 {
			w.seal()
		}
		if w.spill() {
			continue
		}
		if !wait {
			return false
		}
		w.space.Wait()
	}
	if w.closing {
		w.drop("writer closed", n)
		return true // counted; the caller has nothing to do
	}
	if lines[len(lines)-1] != '\n' {
		// A caller bug must not glue two points together.
		lines = append(lines[:len(lines):len(lines)], '\n')
	}
	w.pending += len(lines)
	for n > 0 && len(lines) > 0 {
		room := w.cfg.BatchSize - w.curPts
		take, cut := n, len(lines)
		if n > room {
			take, cut = room, lineEnd(lines, room)
		}
		if w.curPts == 0 {
			w.start()
		}
		w.cur = append(w.cur, lines[:cut]...)
		w.curPts += take
		lines, n = lines[cut:], n-take
		if w.curPts >= w.cfg.BatchSize {
			w.seal()
		}
	}
	w.notePeak()
	return true
}

// spill moves the oldest batch waiting in memory to the disk queue and
// reports whether it did. Called with mu held: batches reach the disk in
// the order they were sealed.
func (w *Writer) spill() bool {
	if w.disk == nil || len(w.queue) == 0 {
		return false
	}
	b := w.queue[0]
	dropped, err := w.disk.push(b.data, int(b.remaining.Load()), b.first)
	if err != nil {
		w.dropLog.Error("cannot write to the disk queue; holding points in memory", zap.Error(err))
		return false
	}
	w.queue[0] = nil
	w.queue = w.queue[1:]
	w.pending -= len(b.data)
	w.recycle(b)
	w.statsMu.Lock()
	w.stats.DiskSpilled++
	if dropped > 0 {
		w.stats.PointsDropped["disk queue full"] += uint64(dropped)
	}
	w.statsMu.Unlock()
	if dropped > 0 {
		w.dropLog.Error("disk queue full: dropped its oldest points", zap.Int("points", dropped),
			zap.Int64("max_disk_bytes", w.cfg.MaxDiskBytes), zap.String("dir", w.cfg.QueueDir))
	}
	w.notePeak()
	w.work.Signal()
	return true
}

// notePeak records the largest backlog. Called with mu held.
func (w *Writer) notePeak() {
	backlog := int64(w.pending)
	if w.disk != nil {
		b, _ := w.disk.size()
		backlog += b
	}
	w.peak = max(w.peak, backlog)
}

// lineEnd is the offset just after the k-th newline of b (k ≥ 1), or len(b)
// when b has fewer lines than the caller said.
func lineEnd(b []byte, k int) int {
	off := 0
	for range k {
		i := bytes.IndexByte(b[off:], '\n')
		if i < 0 {
			return len(b)
		}
		off += i + 1
	}
	return off
}

// lineEndString is lineEnd for a sealed batch.
func lineEndString(s string, k int) int {
	off := 0
	for range k {
		i := strings.IndexByte(s[off:], '\n')
		if i < 0 {
			return len(s)
		}
		off += i + 1
	}
	return off
}

// start begins a batch: sizes its buffer like the last one and arms the
// batch timer. Called with mu held.
func (w *Writer) start() {
	w.curFirst = time.Now()
	size := min(max(w.lastSize+w.lastSize/8, 4<<10), w.cfg.MaxQueueBytes)
	for len(w.free) > 0 && w.cur == nil {
		buf := w.free[len(w.free)-1]
		w.free = w.free[:len(w.free)-1]
		// One that held a batch about as big as the last is kept (the
		// append grows it in the rare case it falls short); one from a
		// time of much smaller or larger batches is let go.
		if c := cap(buf); c >= w.lastSize-w.lastSize/8 && c <= 4*size {
			w.cur = buf[:0]
		}
	}
	if w.cur == nil {
		w.cur = make([]byte, 0, size)
	}
	if w.timer == nil {
		w.timer = time.AfterFunc(w.cfg.BatchTimeout, w.onTimer)
	} else {
		w.timer.Reset(w.cfg.BatchTimeout)
	}
}

// onTimer seals the current batch if it is old enough. A timer armed for an
// earlier batch may fire late, after a newer batch started: the age check
// leaves that one alone (its own Reset fires again).
func (w *Writer) onTimer() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.curPts > 0 && time.Since(w.curFirst) >= w.cfg.BatchTimeout {
		w.seal()
	}
}

// seal queues the current batch for the senders. Called with mu held.
func (w *Writer) seal() {
	if w.curPts == 0 {
		return
	}
	b := &batch{points: w.curPts, first: w.curFirst}
	if w.cfg.Gzip {
		// Compressing reads the whole body before the request is sent,
		// so nothing holds on to data once the batch is done and its
		// memory can serve the next one. Without it, the HTTP transport
		// may still be writing a body after the response has come.
		b.buf, b.data = w.cur, unsafe.String(unsafe.SliceData(w.cur), len(w.cur))
	} else {
		b.data = string(w.cur)
		if len(w.free) < maxFree {
			w.free = append(w.free, w.cur)
		}
	}
	b.remaining.Store(int64(b.points))
	w.lastSize = len(b.data)
	w.cur = nil
	w.curPts = 0
	if w.timer != nil {
		w.timer.Stop()
	}
	w.queue = append(w.queue, b)
	w.work.Signal()
}

// sender takes batches off the queue until the writer is closed and the
// queue is empty, or Close gives up. Records of the disk queue are older
// than anything in memory: they go first, one at a time, and memory waits
// until they are all delivered.
func (w *Writer) sender() {
	for {
		w.mu.Lock()
		for !w.diskReady() && !w.memoryReady() && !w.closing && !w.aborted {
			w.work.Wait()
		}
		if w.aborted {
			w.mu.Unlock()
			return
		}
		if w.diskReady() {
			w.diskBusy = true
			w.mu.Unlock()
			if !w.sendFromDisk() {
				return // aborted: the record stays on disk
			}
			continue
		}
		if !w.memoryReady() {
			w.mu.Unlock()
			// Closing, and memory is empty or must wait behind a disk
			// backlog: Close moves it to disk for the next start.
			return
		}
		b := w.queue[0]
		w.queue[0] = nil
		w.queue = w.queue[1:]
		w.active = append(w.active, b)
		w.mu.Unlock()

		if !w.send(b, b.data, b.points) {
			return // aborted: b stays in active and is counted by Close
		}

		w.mu.Lock()
		for i, a := range w.active {
			if a == b {
				w.active = append(w.active[:i], w.active[i+1:]...)
				break
			}
		}
		w.pending -= len(b.data)
		w.recycle(b)
		w.space.Broadcast()
		w.mu.Unlock()
	}
}

// maxFree bounds the memory of done batches kept for reuse: enough for the
// batches in flight and the one being filled.
const maxFree = 4

// recycle keeps the memory of a done batch for a later one. Called with mu
// held; b must not be used after it.
func (w *Writer) recycle(b *batch) {
	if b.buf != nil && len(w.free) < maxFree {
		w.free = append(w.free, b.buf)
	}
	b.buf, b.data = nil, ""
}

// diskReady reports whether a sender should deliver a disk record now: at
// most one at a time, and none once Close began (the backlog is kept for
// the next start rather than holding shutdown up). Called with mu held.
func (w *Writer) diskReady() bool {
	return w.disk != nil && !w.diskBusy && !w.closing && w.disk.has()
}

// memoryReady reports whether a sender may take a batch from memory: one
// waits, and no disk record is waiting or being delivered, so that points
// reach InfluxDB in the order they came. Called with mu held.
func (w *Writer) memoryReady() bool {
	return len(w.queue) > 0 && (w.disk == nil || !w.diskBusy && !w.disk.has())
}

// sendFromDisk delivers the oldest disk record. It returns false when Close
// gave up; the record is then delivered again after the next start.
func (w *Writer) sendFromDisk() bool {
	before := w.disk.damaged()
	rec, ok := w.disk.next()
	if d := w.disk.damaged() - before; d > 0 {
		w.statsMu.Lock()
		w.stats.DiskDamaged += uint64(d)
		w.statsMu.Unlock()
		w.dropLog.Error("skipped a damaged record in the disk queue (a bad disk?), with the rest of its segment file if no sound record follows it",
			zap.String("dir", w.cfg.QueueDir), zap.Int64("damaged", d))
	}
	if ok {
		b := &batch{data: rec.data, points: rec.points, first: rec.written}
		b.remaining.Store(int64(rec.points))
		if !w.send(b, b.data, b.points) {
			w.disk.release()
			return false
		}
		w.disk.ack()
	}
	w.mu.Lock()
	w.diskBusy = false
	w.space.Broadcast()
	w.work.Broadcast() // memory may be next
	w.mu.Unlock()
	return true
}

// Close seals the partial batch and waits until every batch is delivered or
// refused. When ctx ends first it cancels the requests in flight, stops, and
// returns an error with the number of points not delivered. With a disk
// queue, a write that fails once Close has begun is not retried, and what
// is undelivered goes to the disk queue for the next start. Later calls
// return the first call's result.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	if w.closing {
		w.mu.Unlock()
		select {
		case <-w.closed:
			return w.closeErr
		case <-ctx.Done():
			return fmt.Errorf("influx: closing writer for bucket %q: %w", w.target.Bucket, ctx.Err())
		}
	}
	w.closing = true
	w.seal()
	if w.timer != nil {
		w.timer.Stop()
	}
	if w.stopRetry != nil {
		// Retrying would hold shutdown up to its deadline while InfluxDB
		// is down; the disk queue keeps the batch for the next start.
		close(w.stopRetry)
	}
	w.work.Broadcast()
	w.space.Broadcast()
	w.mu.Unlock()

	select {
	case <-w.done:
	case <-ctx.Done():
		w.mu.Lock()
		w.aborted = true
		w.work.Broadcast()
		w.mu.Unlock()
		w.cancel()
		<-w.done // senders return promptly: their requests and backoffs end with w.ctx
	}
	w.cancel()
	w.client.Close()

	var points, batches int64
	var kept int
	w.mu.Lock()
	if w.disk != nil {
		// The batches in flight are older than anything spilled while they
		// were retried: they go in front. A batch cut short in the middle of
		// a split is kept whole (points written twice are stored once).
		var front []diskRecord
		for _, b := range w.active {
			if b.remaining.Load() > 0 {
				front = append(front, diskRecord{data: b.data, points: b.points, written: b.first})
			}
		}
		if err := w.disk.pushFront(front); err == nil {
			for _, r := range front {
				kept += r.points
			}
			w.active = nil
		} else {
			w.log.Error("cannot keep the batches in flight on disk", zap.Error(err))
		}
		var rest []*batch
		for _, b := range w.queue {
			if _, err := w.disk.push(b.data, b.points, b.first); err == nil {
				kept += b.points
			} else {
				rest = append(rest, b)
			}
		}
		w.queue = rest
	}
	for _, q := range [][]*batch{w.active, w.queue} {
		for _, b := range q {
			if n := b.remaining.Load(); n > 0 {
				points += n
				batches++
			}
		}
	}
	w.mu.Unlock()
	if w.disk != nil {
		if kept > 0 {
			w.log.Warn("InfluxDB did not take everything before shutdown; the rest is in the disk queue for the next start",
				zap.Int("points", kept), zap.String("dir", w.cfg.QueueDir))
		}
		if err := w.disk.close(); err != nil {
			w.closeErr = fmt.Errorf("influx: closing the disk queue %s: %w", w.cfg.QueueDir, err)
		}
	}
	if points > 0 {
		w.closeErr = fmt.Errorf("influx: %d points (%d batches) for bucket %q at %s not delivered before shutdown ended: %w",
			points, batches, w.target.Bucket, w.url, ctx.Err())
	}
	close(w.closed)
	return w.closeErr
}

// Stats returns a snapshot of the counters and the queue.
func (w *Writer) Stats() Stats {
	w.statsMu.Lock()
	s := w.stats
	s.PointsDropped = make(map[string]uint64, len(w.stats.PointsDropped))
	for k, v := range w.stats.PointsDropped {
		s.PointsDropped[k] = v
	}
	s.WriteErrors = make(map[string]uint64, len(w.stats.WriteErrors))
	for k, v := range w.stats.WriteErrors {
		s.WriteErrors[k] = v
	}
	w.statsMu.Unlock()

	w.mu.Lock()
	defer w.mu.Unlock()
	s.QueuedBytes = int64(w.pending)
	s.QueuedBatches = len(w.queue) + len(w.active)
	var oldest time.Time
	for _, b := range append(w.active[:len(w.active):len(w.active)], w.queue...) {
		if oldest.IsZero() || b.first.Before(oldest) {
			oldest = b.first
		}
	}
	if w.curPts > 0 {
		s.QueuedBatches++
		if oldest.IsZero() || w.curFirst.Before(oldest) {
			oldest = w.curFirst
		}
	}
	if w.disk != nil {
		var diskOldest time.Time
		s.DiskBytes, diskOldest = w.disk.size()
		if !diskOldest.IsZero() && (oldest.IsZero() || diskOldest.Before(oldest)) {
			oldest = diskOldest
		}
	}
	s.PeakBacklog = w.peak
	if !oldest.IsZero() {
		s.OldestQueuedAge = time.Since(oldest)
	}
	return s
}

// drop counts points that will never be delivered.
func (w *Writer) drop(reason string, n int) {
	w.statsMu.Lock()
	w.stats.PointsDropped[reason] += uint64(n)
	w.statsMu.Unlock()
	if reason == "writer closed" {
		w.dropLog.Error("points appended after Close were dropped", zap.Int("points", n))
	}
}
