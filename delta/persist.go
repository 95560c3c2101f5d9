package delta

import (
	"errors"
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
// a crash leaves the last complete one, and removed once a start has
// read it, so that a start after a crash does not count again, from the
// last clean stop's baselines, what the crashed run delivered.
type Store struct {
	tracker *Tracker
	dir     string // "" keeps nothing
	log     *zap.Logger
}

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
		log.Info("read the delta baselines of the last run", zap.String("file", path), zap.Int("series", n))
		// Read once: the baselines are those of the clean stop that wrote
		// them. Should this run be killed, the next start must not count
		// what this one delivered again from them; it starts without.
		if err := os.Remove(path); err != nil {
			log.Warn("delta baselines read but not removed: a crash of this run would count again from them", zap.String("file", path), zap.Error(err))
		}
	}
	return st.tracker, st
}

// Save writes the baselines series yields (IDs made by the tracker's ID)
// for the next start, replacing the file atomically, and logs the outcome.
// A nil Store (deltas off), or one without a directory, saves nothing.
func (st *Store) Save(series iter.Seq2[ID, State]) error {
	if st == nil || st.dir == "" {
		return nil
	}
	err := statefile.Replace(st.dir, StateFile, func(w io.Writer) error {
		return st.tracker.Save(w, time.Now().UnixNano(), series)
	})
	if err != nil {
		st.log.Error("delta baselines not saved; the next start loses one interval of deltas", zap.Error(err))
		return err
	}
	st.log.Info("saved delta baselines", zap.String("file", filepath.Join(st.dir, StateFile)), zap.Int("series", st.tracker.Len()))
	return nil
}
