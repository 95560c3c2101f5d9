package delta

import (
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/sparkpulse/sparkpulse/statefile"
)

// StateFile is the name of the baselines' file in the state directory.
const StateFile = "delta.state"

// Store keeps a Tracker's baselines in a directory across restarts: the
// file StateFile, replaced whole at each Save (package statefile), so that
// a crash leaves the last complete one. Baselines saved at one moment are
// only right for a start after a crash together with the lines taken
// since (package ingestlog, whose segment Save's mark names): a caller
// without them calls Forget once it has read the file, so that a start
// after a crash does not count again, from the last baselines saved, what
// the crashed run delivered.
type Store struct {
	tracker *Tracker
	dir     string // "" keeps nothing
	log     *zap.Logger
	loaded  bool // baselines were read at the start
}

// Loaded reports whether OpenState read baselines the last run saved.
func (st *Store) Loaded() bool { return st != nil && st.loaded }

// OpenState returns a tracker with settings s, started now, with the
// baselines the last run saved in dir, and the Store that saves them there
// for the next start. A missing, older version's, stale or damaged file is
// not an error: the tracker starts without baselines, which costs one
// interval of deltas, and a warning says why. With dir "" nothing is kept
// across restarts.
func OpenState(dir string, s Settings, log *zap.Logger) (*Tracker, *Store) {
	st := &Store{tracker: New(s, time.Now()), dir: dir, log: log}
	if dir == "" {
		log.Info("no state-dir: delta baselines are not kept across restarts")
		return st.tracker, st
	}
	path := filepath.Join(dir, StateFile)
	var n int
	found, err := statefile.Read(dir, StateFile, func(r io.Reader) (err error) {
		n, err = st.tracker.Load(r, time.Now().UnixNano())
		return err
	})
	switch {
	case errors.Is(err, ErrOldFormat):
		log.Warn("ignoring the delta state of an older sparkpulse version; starting without baselines, which loses one interval of deltas",
			zap.String("file", path), zap.Error(err))
	case err != nil:
		log.Warn("ignoring delta state; starting without baselines", zap.String("file", path), zap.Error(err))
	case found:
		st.loaded = true
		log.Info("read the delta baselines of the last run", zap.String("file", path), zap.Int("series", n))
	}
	return st.tracker, st
}

// Forget removes the saved baselines: a start after a crash of this run
// then starts without them, rather than count again from them what this
// run delivered since they were saved.
func (st *Store) Forget() {
	if st == nil || st.dir == "" {
		return
	}
	path := filepath.Join(st.dir, StateFile)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		st.log.Warn("delta baselines not removed: a crash of this run would count again from them", zap.String("file", path), zap.Error(err))
	}
}

// Save writes the baselines series yields (IDs made by the tracker's ID)
// for the next start, replacing the file atomically, and logs the outcome.
// A nil Store (deltas off), or one without a directory, saves nothing.
func (st *Store) Save(series iter.Seq2[ID, State], mark uint64) error {
	if st == nil || st.dir == "" {
		return nil
	}
	st.tracker.SetMark(mark)
	err := statefile.Replace(st.dir, StateFile, func(w io.Writer) error {
		return st.tracker.Save(w, time.Now().UnixNano(), series)
	})
	if err != nil {
		return fmt.Errorf("delta baselines not saved to %s: %w", filepath.Join(st.dir, StateFile), err)
	}
	return nil
}
