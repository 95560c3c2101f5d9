package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/influxdata/line-protocol/v2/lineprotocol"
	"go.uber.org/zap"

	"github.com/sparkpulse/sparkpulse/annotate"
	"github.com/sparkpulse/sparkpulse/delta"
	"github.com/sparkpulse/sparkpulse/influx"
	"github.com/sparkpulse/sparkpulse/relay"
	"github.com/sparkpulse/sparkpulse/statefile"
)

// deltaState is the delta tracker the relays share, and the baselines
// they keep, saved in state-dir across restarts (delta.OpenState).
type deltaState struct {
	tracker *delta.Tracker
	store   *delta.Store
	relays  []*relay.Relay // whose baselines are saved
}

// openDeltaState starts a tracker with the baselines saved at the last
// shutdown.
func openDeltaState(plan *Plan, log *zap.Logger) *deltaState {
	s := &deltaState{}
	s.tracker, s.store = delta.OpenState(plan.StateDir, plan.Deltas.Settings, log)
	return s
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

// save writes the baselines for the next start. A nil state (deltas off)
// saves nothing.
func (s *deltaState) save() error {
	if s == nil {
		return nil
	}
	return s.store.Save(s.states)
}

// factsFile keeps which annotation facts were written, so that a restart
// writes none of them again; journalFile the facts written since, so that
// a crash does not either (annotate/journal.go).
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
	found, err := statefile.Read(dir, factsFile, p.annotator.LoadFacts)
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
	n, err := p.annotator.Recover(annotate.Durability{
		Journal: filepath.Join(dir, journalFile),
		Save:    func(write func(io.Writer) error) error { return statefile.Replace(dir, factsFile, write) },
		Stored:  p.storedPoints,
	})
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
func (p *pipeline) saveFacts(delivered bool) error {
	if p.annotator == nil || p.plan.StateDir == "" {
		return nil
	}
	defer p.annotator.CloseJournal()
	if !delivered {
		return nil
	}
	if _, err := p.annotator.Checkpoint(true); err != nil {
		p.log.Error("annotation facts not saved; the next start sends the journal's points again", zap.Error(err))
		return err
	}
	return nil
}

// storedPoints says, for each point of lines, whether the annotations'
// database holds a point at its series and time: one InfluxQL select per
// point, for the few a crash left in the journal, over one connection.
func (p *pipeline) storedPoints(ctx context.Context, lines []byte) ([]bool, error) {
	db, _, _ := strings.Cut(p.plan.Annotate.Target.Bucket, "/")
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
			where += influx.QuoteIdent(string(k)) + " = " + influx.QuoteString(string(v)) + " AND "
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
		series, err := reader.Query(ctx, db, fmt.Sprintf("SELECT * FROM %s WHERE %stime = %d LIMIT 1",
			influx.QuoteIdent(string(m)), where, ts.UnixNano()))
		if err != nil {
			return nil, err
		}
		out = append(out, len(series) > 0)
	}
	return out, nil
}
