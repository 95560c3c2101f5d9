package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/sparkpulse/sparkpulse/delta"
	"github.com/sparkpulse/sparkpulse/relay"
)

// deltaState is the delta tracker the relays share, and the baselines
// they keep, saved in state-dir across restarts.
type deltaState struct {
	tracker *delta.Tracker
	relays  []*relay.Relay // whose baselines are saved
	dir     string         // "" keeps nothing
	log     *zap.Logger
}

const stateFile = "delta.state"

// openDeltaState starts a tracker with the baselines saved at the last
// shutdown. A missing, stale or damaged file is not an error: sparkpulse
// starts with no baselines, which costs one interval of deltas.
func openDeltaState(plan *Plan, log *zap.Logger) *deltaState {
	s := &deltaState{tracker: delta.New(plan.Deltas.Settings, time.Now()), dir: plan.StateDir, log: log}
	if s.dir == "" {
		log.Info("no state-dir: delta baselines are not kept across restarts")
		return s
	}
	path := filepath.Join(s.dir, stateFile)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return s
	}
	if err != nil {
		log.Warn("cannot read delta state; starting without baselines", zap.String("file", path), zap.Error(err))
		return s
	}
	defer f.Close()
	n, err := s.tracker.Load(bufio.NewReader(f), time.Now().UnixNano())
	if err != nil {
		log.Warn("ignoring delta state; starting without baselines", zap.String("file", path), zap.Error(err))
		return s
	}
	log.Info("read the delta baselines of the last run", zap.String("file", path), zap.Int("series", n))
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

// save writes the baselines for the next start, atomically. A nil state
// (deltas off) saves nothing.
func (s *deltaState) save() error {
	if s == nil || s.dir == "" {
		return nil
	}
	err := s.write()
	if err != nil {
		s.log.Error("delta baselines not saved; the next start loses one interval of deltas", zap.Error(err))
		return err
	}
	s.log.Info("saved delta baselines", zap.String("file", filepath.Join(s.dir, stateFile)), zap.Int("series", s.tracker.Len()))
	return nil
}

func (s *deltaState) write() error {
	if err := os.MkdirAll(s.dir, 0o750); err != nil {
		return fmt.Errorf("state-dir: %w", err)
	}
	tmp, err := os.CreateTemp(s.dir, stateFile+".*")
	if err != nil {
		return fmt.Errorf("saving delta state: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	err = s.tracker.Save(tmp, time.Now().UnixNano(), s.states)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(s.dir, stateFile))
	}
	if err != nil {
		return fmt.Errorf("saving delta state to %s: %w", tmp.Name(), err)
	}
	return nil
}
