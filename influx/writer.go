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

	influxdb2 "github.com/influxdata/influxdb-client-go/v2"
	"github.com/influxdata/influxdb-client-go/v2/api"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// batch is a sealed run of complete lines. data is never modified once the
// batch is sealed, so its halves can be sent while it is being retried.
type batch struct {
	data      string
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
	cur      strings.Builder
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
	OldestQueuedAge time.Duration     // age of the oldest undelivered point
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
		url:    redactURL(cfg.URL),
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
// batch. It blocks while the queue is full. After Close the lines are
// dropped and counted under "writer closed".
func (w *Writer) Append(lines []byte, n int) {
	if n <= 0 || len(lines) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for !w.closing && w.pending > 0 && w.pending+len(lines) > w.cfg.MaxQueueBytes {
		// A full queue should drain as fast as possible: do not let the
		// batch being filled wait for its timer.
		if w.curPts > 0 {
			w.seal()
		}
		w.space.Wait()
	}
	if w.closing {
		w.drop("writer closed", n)
		return
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
		w.cur.Write(lines[:cut])
		w.curPts += take
		lines, n = lines[cut:], n-take
		if w.curPts >= w.cfg.BatchSize {
			w.seal()
		}
	}
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
	w.cur.Grow(min(max(w.lastSize+w.lastSize/8, 4<<10), w.cfg.MaxQueueBytes))
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
	b := &batch{data: w.cur.String(), points: w.curPts, first: w.curFirst}
	b.remaining.Store(int64(b.points))
	w.lastSize = len(b.data)
	w.cur = strings.Builder{}
	w.curPts = 0
	if w.timer != nil {
		w.timer.Stop()
	}
	w.queue = append(w.queue, b)
	w.work.Signal()
}

// sender takes batches off the queue until the writer is closed and the
// queue is empty, or Close gives up.
func (w *Writer) sender() {
	for {
		w.mu.Lock()
		for len(w.queue) == 0 && !w.closing && !w.aborted {
			w.work.Wait()
		}
		if w.aborted || len(w.queue) == 0 {
			w.mu.Unlock()
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
		w.space.Broadcast()
		w.mu.Unlock()
	}
}

// Close seals the partial batch and waits until every batch is delivered or
// refused. When ctx ends first it cancels the requests in flight, stops, and
// returns an error with the number of points not delivered. Later calls
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
	w.mu.Lock()
	for _, q := range [][]*batch{w.queue, w.active} {
		for _, b := range q {
			points += b.remaining.Load()
			batches++
		}
	}
	w.mu.Unlock()
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
