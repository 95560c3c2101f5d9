package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/influxdata/line-protocol/v2/lineprotocol"
	"go.uber.org/zap"

	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/delta"
	"github.com/sparkpulse/sparkpulse/facts"
	"github.com/sparkpulse/sparkpulse/influx"
	"github.com/sparkpulse/sparkpulse/influxql"
	"github.com/sparkpulse/sparkpulse/ingestlog"
	"github.com/sparkpulse/sparkpulse/relay"
	"github.com/sparkpulse/sparkpulse/statefile"
)

// deltaState is the delta tracker the relays share, the baselines they
// keep, saved in state-dir across restarts (delta.OpenState), and the
// ingest log of the lines taken since they were saved (package ingestlog).
type deltaState struct {
	tracker *delta.Tracker
	store   *delta.Store
	ingest  *ingestlog.Log   // nil without state-dir, or when it cannot open
	relays  []*relay.Relay   // whose baselines are saved, in the log's block order
	writers []*influx.Writer // the relays' writers
	log     *zap.Logger

	mu sync.Mutex // one checkpoint at a time
}

// ingestDir is the ingest log's folder in state-dir.
const ingestDir = "ingest"

// Checkpoints: every checkpointEvery, or sooner once the ingest log's
// segment holds checkpointBytes.
const (
	checkpointEvery = time.Minute
	checkpointBytes = 64 << 20
)

// openDeltaState starts a tracker with the baselines the last run saved,
// and opens the ingest log beside them.
func openDeltaState(plan *config.Plan, log *zap.Logger) *deltaState {
	s := &deltaState{log: log}
	s.tracker, s.store = delta.OpenState(plan.StateDir, plan.Deltas.Settings, log)
	if plan.StateDir == "" {
		return s
	}
	var names []string
	for _, l := range plan.Listeners {
		names = append(names, l.Name()+" "+l.Target.Bucket)
	}
	dir := filepath.Join(plan.StateDir, ingestDir)
	in, err := ingestlog.Open(dir, strings.Join(names, "\n"), plan.Deltas.IngestLogBytes, func(err error) {
		log.Error("the ingest log stopped: until the next checkpoint a crash costs an interval of deltas, not counted twice", zap.Error(err))
		s.store.Forget()
	})
	if err == nil {
		// This run's lines go to a segment of their own from the first:
		// the last run's are replayed before the listeners serve.
		_, err = in.Rotate(nil)
	}
	if err != nil {
		log.Warn("no ingest log: a crash costs an interval of deltas", zap.String("dir", dir), zap.Error(err))
		s.store.Forget()
		return s
	}
	s.ingest = in
	return s
}

// recover hands the lines the last run took after its last saved
// baselines to the relays again: after a crash, the same points with the
// same deltas, none counted twice. The first checkpoint follows in the
// background (checkpoints).
func (s *deltaState) recover() {
	if s == nil || s.ingest == nil || !s.store.Loaded() {
		return
	}
	n, err := s.ingest.Replay(s.tracker.Mark(), func(block int, recv int64, lines []byte) {
		if block >= 0 && block < len(s.relays) {
			s.relays[block].Replay(recv, lines)
		}
	})
	switch {
	case errors.Is(err, ingestlog.ErrFingerprint):
		s.log.Warn("the ingest log was kept for other [[graphite]] blocks: not replayed", zap.Error(err))
	case err != nil:
		s.log.Warn("the ingest log could not be read to its end: a crash costs an interval of deltas", zap.Int("records", n), zap.Error(err))
	case n > 0:
		s.log.Info("the last run stopped without saving its delta baselines: the lines it took since are handed to the relays again",
			zap.Int("records", n), zap.Uint64("damaged", s.ingest.Damaged()))
	}
}

// savedState is a baseline copied for a checkpoint.
type savedState struct {
	id delta.ID
	st delta.State
}

// checkpoint saves the baselines and drops the ingest log's lines they
// hold: it copies them as the log rotates, waits until the writers hold
// in memory no point taken before (delivered, or on their disk queue), and
// saves the copy. Stopped by ctx while it waits, it saves nothing: the
// last baselines saved and the log still pair.
func (s *deltaState) checkpoint(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var snap []savedState
	seq, err := s.ingest.Rotate(func() {
		snap = make([]savedState, 0, s.tracker.Len())
		for id, st := range s.states {
			snap = append(snap, savedState{id, st})
		}
	})
	if err != nil {
		s.store.Forget()
		return err
	}
	at := time.Now()
	tick := time.NewTicker(checkpointPoll)
	defer tick.Stop()
	for since := s.held(); !since.IsZero() && since.Before(at); since = s.held() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	err = s.store.Save(func(yield func(delta.ID, delta.State) bool) {
		for _, c := range snap {
			if !yield(c.id, c.st) {
				return
			}
		}
	}, seq)
	if err != nil {
		return err // the older baselines still pair with the log
	}
	return s.ingest.Drop(seq)
}

// held is when the oldest point the relays' writers hold in memory was
// taken; zero if none.
func (s *deltaState) held() time.Time {
	var oldest time.Time
	for _, w := range s.writers {
		if t := w.HeldSince(); !t.IsZero() && (oldest.IsZero() || t.Before(oldest)) {
			oldest = t
		}
	}
	return oldest
}

// checkpointPoll is how often a checkpoint looks whether the writers
// still hold points taken before it.
const checkpointPoll = 100 * time.Millisecond

// checkpoints runs checkpoint at once (after a replay), then every
// checkpointEvery, and when the ingest log grows past checkpointBytes,
// until stop is closed.
func (s *deltaState) checkpoints(stop <-chan struct{}) {
	if s == nil || s.ingest == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-stop
		cancel()
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last time.Time
	for {
		if ctx.Err() != nil {
			return // the stop saves them
		}
		if now := time.Now(); last.IsZero() || now.Sub(last) >= checkpointEvery || s.ingest.Size() >= checkpointBytes {
			last = now
			if err := s.checkpoint(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("delta baselines not saved: the ingest log keeps the lines since the last save", zap.Error(err))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// states yields the baselines of every relay.
func (s *deltaState) states(yield func(delta.ID, delta.State) bool) {
	for _, r := range s.relays {
		for id, st := range r.States {
			if !yield(id, st) {
				return
			}
		}
	}
}

// save writes the baselines for the next start, at a clean stop, once
// the writers are closed, and closes the ingest log. When the writers
// could not deliver or keep everything (delivered false), the log is kept
// instead: the next start hands its lines on again. A nil state (deltas
// off) saves nothing.
func (s *deltaState) save(delivered bool) error {
	if s == nil {
		return nil
	}
	if s.ingest == nil {
		return s.store.Save(s.states, 0)
	}
	var err error
	if delivered {
		if err = s.checkpoint(context.Background()); err == nil {
			s.log.Info("saved delta baselines", zap.Int("series", s.tracker.Len()))
		}
	}
	return errors.Join(err, s.ingest.Close())
}

// factsFile keeps which annotation facts were written, so that a restart
// writes none of them again; journalFile the facts written since, so that
// a crash does not either (package facts).
const (
	factsFile   = "annotate.state"
	journalFile = "annotate.journal"
)

// loadFacts restores the annotation facts the last run wrote, from its
// last checkpoint and its journal, and hands the journal's points to the
// writer again. Without the files (or with a damaged snapshot) facts of
// applications still listed are written again, with the same values.
func (p *pipeline) loadFacts() error {
	dir := p.plan.StateDir
	if dir == "" {
		return nil
	}
	found, err := statefile.Read(dir, factsFile, p.annotator.Facts().Load)
	switch {
	case err != nil:
		p.log.Warn("ignoring the annotation facts of the last run; facts of applications still listed are written again",
			zap.String("file", filepath.Join(dir, factsFile)), zap.Error(err))
	case found:
		p.log.Info("read the annotation facts the last run wrote", zap.String("file", filepath.Join(dir, factsFile)))
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("state-dir: %w", err)
	}
	d := facts.InDir(dir, journalFile, factsFile)
	d.Stored = p.storedIn(p.plan.Annotate.Target)
	if h := p.plan.Annotate.History; h != nil {
		d.StoredHistory = p.storedIn(*h)
	}
	n, err := p.annotator.Facts().Recover(d)
	if n > 0 {
		p.log.Info("the last run stopped without a checkpoint: its last annotation facts are read, and their points sent again beside ingest, with the same values",
			zap.String("file", filepath.Join(dir, journalFile)), zap.Int("records", n))
	}
	return err
}

// saveFacts checkpoints the annotation facts written, once the writers
// are closed: what the annotation writer held is delivered or in its disk
// queue. delivered is false when it could not close cleanly: the journal
// then stays, and the next start sends its points again.
func (p *pipeline) saveFacts(ctx context.Context, delivered bool) error {
	if p.annotator == nil || p.plan.StateDir == "" {
		return nil
	}
	defer p.annotator.Facts().Close()
	if !delivered {
		return nil
	}
	if _, err := p.annotator.Facts().Checkpoint(ctx, true); err != nil {
		p.log.Error("annotation facts not saved; the next start sends the journal's points again", zap.Error(err))
		return err
	}
	return nil
}

// storedIn says, for each point of lines, whether the database of target
// t holds a point at its series and time: one InfluxQL select per point,
// for the few a crash left in the journal, over one connection.
func (p *pipeline) storedIn(t influx.Target) func(ctx context.Context, lines []byte) ([]bool, error) {
	return func(ctx context.Context, lines []byte) ([]bool, error) { return p.stored(ctx, t, lines) }
}

func (p *pipeline) stored(ctx context.Context, t influx.Target, lines []byte) ([]bool, error) {
	db, rp, _ := strings.Cut(t.Bucket, "/")
	from := "" // the measurement's retention policy, where the target names one
	if rp != "" {
		from = influxql.QuoteIdent(rp) + "."
	}
	reader, err := influx.NewQuerier(p.plan.Influx)
	if err != nil {
		return nil, err
	}
	defer reader.Close()
	var out []bool
	dec := lineprotocol.NewDecoderWithBytes(lines)
	for dec.Next() {
		m, err := dec.Measurement()
		if err != nil {
			return nil, err
		}
		where := ""
		for {
			k, v, err := dec.NextTag()
			if err != nil {
				return nil, err
			}
			if k == nil {
				break
			}
			where += influxql.QuoteIdent(string(k)) + " = " + influxql.QuoteString(string(v)) + " AND "
		}
		for {
			k, _, err := dec.NextField()
			if err != nil {
				return nil, err
			}
			if k == nil {
				break
			}
		}
		ts, err := dec.Time(lineprotocol.Nanosecond, time.Time{})
		if err != nil {
			return nil, err
		}
		series, err := reader.Query(ctx, db, fmt.Sprintf("SELECT * FROM %s%s WHERE %stime = %d LIMIT 1",
			from, influxql.QuoteIdent(string(m)), where, ts.UnixNano()))
		if err != nil {
			return nil, err
		}
		out = append(out, len(series) > 0)
	}
	return out, nil
}
