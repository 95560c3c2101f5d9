package facts

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Sink receives the points of facts: complete lines of line protocol,
// delivered in the order received (annotate.Sink). A sink with a method
// Idle(ctx) error, which waits until it holds nothing (influx.Writer),
// can be checkpointed without force.
type Sink interface {
	Append(lines []byte, wait bool) bool
}

// idler is a sink that can tell whether it holds nothing.
type idler interface {
	Idle(ctx context.Context) error
}

// Config configures a Store.
type Config struct {
	Sink Sink
	// History, when set, receives the batches' history points: the
	// figures kept far longer than the facts, elsewhere (a retention
	// policy or bucket of their own). They are journalled with the
	// batch's facts and sent again with them.
	History Sink
	// Timeout bounds each question to InfluxDB (Durability.Stored) and a
	// checkpoint's wait for the sink.
	Timeout time.Duration
	Log     *zap.Logger
	Now     func() time.Time // default time.Now
}

// Store is the record of facts written (the ledger) and, once Recover
// has opened it, its journal; see the package doc.
type Store struct {
	cfg Config

	mu   sync.Mutex
	apps map[string]*appFacts // by application id

	journal *journal // nil until Recover
	damaged atomic.Uint64
}

// New returns an empty Store, without a journal until Recover.
func New(cfg Config) *Store {
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Store{cfg: cfg, apps: map[string]*appFacts{}}
}

// Damaged counts the journal's whole records that failed their checksum
// at Recover, skipped.
func (s *Store) Damaged() uint64 { return s.damaged.Load() }

// Batch is the points of one application handed on at once, and the
// facts and executor snapshots among them.
type Batch struct {
	App     string       // the application's id: the ledger's key
	Attempt fmt.Stringer // the attempt, as logs name it
	Facts   []Key
	Snaps   map[string]Snapshot // by process
	N       int                 // the points in Lines
	Lines   []byte              // line protocol, a point per line
	// The points for the History sink, likewise; none without one.
	HistoryN int
	History  []byte
}

// Write journals b, hands its points to the sink (its history points to
// the History sink), and records its facts and snapshots in the ledger,
// now being the time of the check. The journal is held from the append
// to the record, so that no checkpoint comes between. It returns false
// when the sink, closing, took nothing: then nothing is recorded, and the
// facts are made again.
func (s *Store) Write(b Batch, now time.Time) bool {
	if s.cfg.History == nil {
		b.HistoryN, b.History = 0, nil
	}
	if j := s.journal; j != nil && (b.N > 0 || len(b.Facts) > 0 || len(b.Snaps) > 0) {
		// Durable before it is handed on.
		j.mu.Lock()
		defer j.mu.Unlock()
		r := record{App: b.App, Facts: b.Facts, Snaps: b.Snaps, N: b.N, Lines: string(b.Lines), HN: b.HistoryN, History: string(b.History)}
		if err := j.append(r); err != nil {
			s.cfg.Log.Error("facts journal not written: a crash before the next checkpoint could write these facts again",
				zap.Stringer("application", b.Attempt), zap.Error(err))
		}
	}
	if b.N > 0 && !s.cfg.Sink.Append(b.Lines, true) {
		return false
	}
	// The facts were handed on: they are recorded whatever the history's
	// sink says, or they would be made again, perhaps with other values.
	// A history point refused by a sink that is closing stays in the
	// journal until the next checkpoint.
	if b.HistoryN > 0 && !s.cfg.History.Append(b.History, true) {
		s.cfg.Log.Warn("history points not handed on: their writer is closing", zap.Stringer("application", b.Attempt), zap.Int("points", b.HistoryN))
	}
	s.Record(b.App, b.Facts, b.Snaps, now)
	return true
}

// checkpointEvery is how often Checkpoints checkpoints.
const checkpointEvery = time.Minute

// Checkpoint saves the ledger (Durability.Save) and empties the journal,
// when the sinks hold nothing: every point recorded in the journal was
// delivered or refused. It waits up to Timeout for that, or until ctx
// ends. With force, it does so whatever the sink holds, for a shutdown
// after the sink was closed (what it held went to its disk queue). It
// returns whether it did.
func (s *Store) Checkpoint(ctx context.Context, force bool) (bool, error) {
	j := s.journal
	if j == nil {
		return false, nil
	}
	if !force {
		idle, ok := s.idlers()
		if !ok {
			return false, nil
		}
		// Drain without the lock, then check, under it, that nothing came
		// in meanwhile.
		wait, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		err := idle(wait)
		cancel()
		if err != nil {
			return false, nil
		}
		if !j.mu.TryLock() {
			return false, nil // a batch is being handed on
		}
		defer j.mu.Unlock()
		done, cancel := context.WithCancel(ctx)
		cancel() // asked with a context done, Idle does not wait
		if idle(done) != nil {
			return false, nil
		}
	} else {
		j.mu.Lock()
		defer j.mu.Unlock()
	}
	if j.pending != nil {
		return false, nil // the last run's points are not handed on yet (Resend)
	}
	if err := j.cfg.Save(s.Save); err != nil {
		return false, err
	}
	if err := j.f.Truncate(0); err != nil {
		return false, fmt.Errorf("annotate: emptying the facts journal: %w", err)
	}
	if _, err := j.f.Seek(0, io.SeekStart); err != nil {
		return false, err
	}
	j.size = 0
	j.last = s.cfg.Now()
	return true, nil
}

// idlers is a wait until every sink holds nothing; false when a sink
// cannot tell.
func (s *Store) idlers() (func(ctx context.Context) error, bool) {
	sinks := []Sink{s.cfg.Sink}
	if s.cfg.History != nil {
		sinks = append(sinks, s.cfg.History)
	}
	var idle []idler
	for _, k := range sinks {
		i, ok := k.(idler)
		if !ok {
			return nil, false
		}
		idle = append(idle, i)
	}
	return func(ctx context.Context) error {
		for _, i := range idle {
			if err := i.Idle(ctx); err != nil {
				return err
			}
		}
		return nil
	}, true
}

// Checkpoints tries a checkpoint every interval once checkpointEvery has
// passed since the last, until ctx ends. Run it apart from what writes:
// a checkpoint waits up to Timeout for the sink to deliver, which an
// InfluxDB outage makes it wait every time.
func (s *Store) Checkpoints(ctx context.Context, interval time.Duration) {
	j := s.journal
	if j == nil {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if s.cfg.Now().Sub(j.last) >= checkpointEvery {
			if _, err := s.Checkpoint(ctx, false); err != nil {
				s.cfg.Log.Warn("facts checkpoint failed; the journal keeps them", zap.Error(err))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Close closes the journal file. Checkpoint first, for a clean stop.
func (s *Store) Close() error {
	if s.journal == nil {
		return nil
	}
	return s.journal.f.Close()
}
