package influx

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sparkpulse/sparkpulse/queue"
)

// Writer delivers lines to one Target in three stages: Append cuts them
// into batches (the batcher), the batches wait in a queue.Queue, and
// Config.MaxInFlight senders deliver them. Append is safe for concurrent
// use.
type Writer struct {
	cfg      Config
	target   Target
	writeURL string
	url      string // without password, for logs
	log      *zap.Logger
	dropLog  *zap.Logger // sampled: a few entries per second per message
	client   *client
	q        *queue.Queue

	ctx     context.Context // cancelled when Close gives up
	cancel  context.CancelFunc
	senders sync.WaitGroup

	// The batcher: the batch being filled.
	mu       sync.Mutex
	cur      queue.Lines // the batch being filled; its Len() is its points
	curFirst time.Time
	timer    *time.Timer // seals a partial batch BatchTimeout after its first point
	closing  bool

	closeOnce sync.Once
	closeErr  error

	refusedSeries refusedSeries // see newseries.go

	createMu  sync.Mutex
	createdAt time.Time // of the last try of createMissing

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

// NewWriter opens the writer's queue and starts its senders. It does not
// contact InfluxDB; see Check.
func NewWriter(cfg Config, t Target) (*Writer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("influx: %w", err)
	}
	if err := validTarget(t); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	org := t.Org
	if org == "" {
		org = cfg.Org
	}
	w := &Writer{
		cfg:    cfg,
		target: t,
		url:    RedactURL(cfg.URL),
		stats:  Stats{PointsDropped: map[string]uint64{}, WriteErrors: map[string]uint64{}},
	}
	w.log = cfg.Logger.With(zap.String("influxdb", w.url), zap.String("bucket", t.Bucket))
	w.dropLog = w.log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, time.Second, 3, 0)
	}))
	qc := cfg.Queue
	qc.Log = w.dropLog
	q, err := queue.Open(qc)
	if err != nil {
		return nil, err
	}
	w.q = q
	if b, oldest := q.Backlog(); b > 0 {
		w.log.Info("delivering the disk queue left by the last run first",
			zap.String("dir", qc.Dir), zap.Int64("bytes", b), zap.Time("oldest", oldest))
	}
	w.client = newClient(cfg)
	w.writeURL = w.client.writeURL(org, t.Bucket)
	w.ctx, w.cancel = context.WithCancel(context.Background())
	for range cfg.MaxInFlight {
		w.senders.Go(w.sendLoop)
	}
	return w, nil
}

// Append copies complete lines, each ending in '\n', into the current
// batch: AppendLines for producers that keep no ends, such as the
// annotator's few points per poll; their lines and series keys are found
// once here.
func (w *Writer) Append(lines []byte, wait bool) bool {
	if len(lines) == 0 {
		return true
	}
	if lines[len(lines)-1] != '\n' {
		// A caller bug must not glue two points together.
		lines = append(lines[:len(lines):len(lines)], '\n')
	}
	return w.AppendLines(queue.Scan(lines), wait)
}

// AppendLines copies complete lines into the current batch. When the
// queue has no room it waits (wait) — a TCP reader then slows its sender
// down — or returns false and keeps nothing, for a reader that cannot wait
// (UDP). After Close or Refuse the lines are dropped, counted under DropWriterClosed:
// true then means there is nothing left for the caller to count.
func (w *Writer) AppendLines(l queue.Lines, wait bool) bool {
	if l.Len() == 0 {
		return true
	}
	size := l.Size() // what the batch's copy takes: the queue expects it Put
	err := w.q.Reserve(size, false)
	if errors.Is(err, queue.ErrFull) {
		// With nothing sealed to send, the senders would idle while the
		// partial batch waits for its timer. With batches waiting, it is
		// left to fill: sealing it at every full queue would make many
		// small batches, each a request, when InfluxDB is already behind.
		if w.q.Starved() {
			w.Flush()
		}
		if !wait {
			return false
		}
		err = w.q.Reserve(size, true)
	}
	if err != nil {
		w.drop(DropWriterClosed, l.Len())
		w.dropLog.Error("points appended after the writer began closing were dropped", zap.Int("points", l.Len()))
		return true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for l.Len() > 0 {
		if w.cur.Len() == 0 {
			w.start()
		}
		k := min(l.Len(), w.cfg.BatchSize-w.cur.Len(), l.Within(w.cfg.BatchBytes-len(w.cur.Data)))
		if k == 0 && w.cur.Len() == 0 {
			k = 1 // a line larger than BatchBytes goes alone
		}
		var take queue.Lines
		take, l = l.Cut(k)
		w.cur.AppendLines(take)
		if l.Len() > 0 || w.cur.Len() >= w.cfg.BatchSize || len(w.cur.Data) >= w.cfg.BatchBytes {
			w.seal() // full: what is left goes to the next batch
		}
	}
	if w.closing {
		// Reserved just before Close began: the queue delivers or keeps
		// it like the rest.
		w.seal()
	}
	return true
}

// HeldSince is when the oldest point the Writer holds in memory was
// taken (appended); zero if it holds none. Points on its disk queue are
// not held: a crash keeps them. Every point appended before a time t is
// delivered, refused or on disk once HeldSince is zero or not before t.
func (w *Writer) HeldSince() time.Time {
	w.mu.Lock() // no batch is between the one being filled and the queue
	defer w.mu.Unlock()
	oldest := w.q.MemorySince()
	if w.cur.Len() > 0 && (oldest.IsZero() || w.curFirst.Before(oldest)) {
		oldest = w.curFirst
	}
	return oldest
}

// Blocked reports whether a producer waits for room in the queue: a TCP
// reader held up until InfluxDB takes points.
func (w *Writer) Blocked() bool { return w.q.Blocked() }

// Refuse makes the producers waiting for room, and every later Append,
// drop their points, counted under DropWriterClosed; Close delivers or
// keeps what was taken before. For a stop that cannot wait for InfluxDB
// to make room.
func (w *Writer) Refuse() { w.q.Drain() }

// WaitRoom returns once the queue has room for more connections, or done
// is closed; see queue.Queue.WaitRoom.
func (w *Writer) WaitRoom(done <-chan struct{}) { w.q.WaitRoom(done) }

// Flush seals the batch being filled, so that it is sent without waiting
// for its timer.
func (w *Writer) Flush() {
	w.mu.Lock()
	w.seal()
	w.mu.Unlock()
}

// Idle seals the batch being filled and waits until every batch taken so
// far is delivered or refused, or ctx ends.
func (w *Writer) Idle(ctx context.Context) error {
	w.Flush()
	if !w.q.WaitEmpty(ctx.Done()) {
		return fmt.Errorf("influx: waiting for the writer of bucket %q to deliver: %w", w.target.Bucket, ctx.Err())
	}
	return nil
}

// start begins a batch in memory the queue recycles, and arms its timer.
// Called with mu held.
func (w *Writer) start() {
	w.curFirst = time.Now()
	w.cur = w.q.Buffer()
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
	if w.cur.Len() > 0 && time.Since(w.curFirst) >= w.cfg.BatchTimeout {
		w.seal()
	}
}

// seal hands the current batch to the queue. Called with mu held.
func (w *Writer) seal() {
	if w.cur.Len() == 0 {
		return
	}
	w.q.Put(&queue.Batch{Data: w.cur.Data, Ends: w.cur.Ends, Keys: w.cur.Keys, Points: w.cur.Len(), First: w.curFirst})
	w.cur = queue.Lines{}
	if w.timer != nil {
		w.timer.Stop()
	}
}

// sendLoop delivers batches until the queue has nothing more to send now,
// or Close gives up.
func (w *Writer) sendLoop() {
	for {
		b, ok := w.q.Get()
		if !ok {
			return
		}
		delivered := w.deliver(b, b.Lines())
		w.q.Done(b, delivered)
		if !delivered { // Close gave up, or the queue keeps b on disk
			return
		}
	}
}

// Close seals the partial batch and waits until every batch is delivered or
// refused. When ctx ends first it cancels the requests in flight, stops, and
// returns an error with the number of points not delivered. With a disk
// queue, a write that fails once Close has begun is not retried, and what
// is undelivered goes to the disk queue for the next start. Later calls
// return the first call's result.
func (w *Writer) Close(ctx context.Context) error {
	w.closeOnce.Do(func() { w.closeErr = w.close(ctx) })
	return w.closeErr
}

func (w *Writer) close(ctx context.Context) error {
	w.q.Drain() // an Append waiting for room returns; one that has its room seals what it adds
	w.mu.Lock()
	w.closing = true
	w.seal()
	w.mu.Unlock()

	done := make(chan struct{})
	go func() {
		w.senders.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		w.q.Abort()
		w.cancel() // requests and backoffs end at once
		<-done
	}
	w.cancel()
	w.client.close()

	left, err := w.q.Close()
	if err != nil {
		w.log.Error("cannot keep the undelivered batches on disk", zap.Error(err))
		err = fmt.Errorf("influx: closing the disk queue %s: %w", w.cfg.Queue.Dir, err)
	}
	if left.KeptPoints > 0 {
		w.log.Warn("InfluxDB did not take everything before shutdown; the rest is in the disk queue for the next start",
			zap.Int64("points", left.KeptPoints), zap.String("dir", w.cfg.Queue.Dir))
	}
	if left.LostPoints > 0 {
		err = fmt.Errorf("influx: %d points (%d batches) for bucket %q at %s not delivered before shutdown ended: %w",
			left.LostPoints, left.LostBatches, w.target.Bucket, w.url, ctx.Err())
	}
	return err
}

// Stats returns a snapshot of the counters and the queue.
func (w *Writer) Stats() Stats {
	w.statsMu.Lock()
	s := w.stats
	s.PointsDropped = clone(w.stats.PointsDropped)
	s.WriteErrors = clone(w.stats.WriteErrors)
	w.statsMu.Unlock()

	qs := w.q.Stats()
	s.QueuedBatches, s.QueuedBytes, s.DiskBytes = qs.Batches, qs.Bytes, qs.DiskBytes
	s.DiskSpilled, s.DiskDamaged, s.PeakBacklog = qs.Spilled, qs.Damaged, qs.Peak
	s.PointsDropped[DropDiskQueueFull] += qs.DiskDropped
	if s.PointsDropped[DropDiskQueueFull] == 0 {
		delete(s.PointsDropped, DropDiskQueueFull)
	}
	oldest := qs.Oldest
	w.mu.Lock()
	if w.cur.Len() > 0 {
		s.QueuedBatches++
		if oldest.IsZero() || w.curFirst.Before(oldest) {
			oldest = w.curFirst
		}
	}
	w.mu.Unlock()
	if !oldest.IsZero() {
		s.OldestQueuedAge = time.Since(oldest)
	}
	return s
}

func clone(m map[string]uint64) map[string]uint64 {
	c := make(map[string]uint64, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// drop counts points that will never be delivered.
func (w *Writer) drop(reason string, n int) {
	w.statsMu.Lock()
	w.stats.PointsDropped[reason] += uint64(n)
	w.statsMu.Unlock()
}
