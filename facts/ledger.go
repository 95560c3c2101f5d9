package facts

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/statefile"
)

// Key is a written fact: its measurement (an index into measurements)
// and time. The tags are the application's.
type Key struct {
	M  uint8 `json:"m"`
	TS int64 `json:"t"`
}

// measurements are the facts' measurements, by their index in Key.M: the
// index is what the journal and the checkpoint store, so a measurement is
// only ever appended.
var measurements = []string{schema.MeasurementApp, schema.MeasurementJob, schema.MeasurementStage, schema.MeasurementSQL,
	schema.MeasurementExecutor, schema.MeasurementExecutorRemoval, schema.MeasurementSizing, schema.MeasurementTaskFailure, schema.MeasurementStageProgress,
	schema.MeasurementUsage, schema.MeasurementReconcile}

// NewKey is the key of the fact of measurement at ts (unix ns).
func NewKey(measurement string, ts int64) Key {
	return Key{M: uint8(slices.Index(measurements, measurement)), TS: ts}
}

// Snapshot is the last point written of an executor, which is not a fact
// (it is written again when it changed) but must not share a time with
// the one before.
type Snapshot struct {
	Sum uint64 `json:"s"` // fingerprint of its fields and tags
	TS  int64  `json:"t"`
}

type appFacts struct {
	Used int64 `json:"used"` // unix ms of the last check
	// checked is the last check of this run, as the clock gave it: with
	// time.Now, its monotonic reading, so that how long ago it was is
	// not moved by a step of the wall clock (Forget).
	checked time.Time
	Facts   map[Key]struct{}    `json:"-"`
	List    []Key               `json:"facts"` // Facts, for Save and Load
	Execs   map[string]Snapshot `json:"executors"`
}

// app is the record of an application, counting now as a check of it.
// Called with mu held.
func (s *Store) app(id string, now time.Time) *appFacts {
	a := s.apps[id]
	if a == nil {
		a = &appFacts{Facts: map[Key]struct{}{}, Execs: map[string]Snapshot{}}
		s.apps[id] = a
	}
	a.Used = max(a.Used, now.UnixMilli())
	if a.checked.IsZero() || now.After(a.checked) {
		a.checked = now
	}
	return a
}

// Has reports whether app's fact k was written; now is the time of the
// check, which keeps the application (Forget).
func (s *Store) Has(app string, k Key, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.app(app, now).Facts[k]
	return ok
}

// LastSnapshot is the last snapshot written of an executor of app.
func (s *Store) LastSnapshot(app, process string, now time.Time) Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.app(app, now).Execs[process]
}

// Record notes facts and snapshots of app as written, without the
// journal: Write is how a batch is written.
func (s *Store) Record(app string, facts []Key, snaps map[string]Snapshot, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.app(app, now)
	for _, k := range facts {
		a.Facts[k] = struct{}{}
	}
	maps.Copy(a.Execs, snaps)
}

// Holds reports whether facts of app are kept, without counting it as a
// check.
func (s *Store) Holds(app string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.apps[app]
	return a != nil && len(a.Facts) > 0
}

// Forget drops the applications not checked for keep: their attempts
// are done and no source lists them any more. One checked in this run is
// timed from its check (monotonic with time.Now); one only loaded, from
// the wall time its last run recorded.
func (s *Store) Forget(now time.Time, keep time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	maps.DeleteFunc(s.apps, func(_ string, a *appFacts) bool {
		if !a.checked.IsZero() {
			return now.Sub(a.checked) > keep
		}
		return now.Sub(time.UnixMilli(a.Used)) > keep
	})
}

// ledgerVersion is the checkpoint file's format (doc.go); version 1 had no
// checksum, and is read still.
const ledgerVersion = 2

// Save writes the ledger, the checkpoint, which Load reads: the CRC-32C
// of what follows as eight hex digits and a space, then the ledger as
// JSON and a newline.
func (s *Store) Save(w io.Writer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.apps {
		a.List = slices.SortedFunc(maps.Keys(a.Facts), func(x, y Key) int {
			return cmp.Or(cmp.Compare(x.M, y.M), cmp.Compare(x.TS, y.TS))
		})
	}
	var body bytes.Buffer
	err := json.NewEncoder(&body).Encode(struct {
		Version int                  `json:"version"`
		Apps    map[string]*appFacts `json:"applications"`
	}{ledgerVersion, s.apps})
	for _, a := range s.apps {
		a.List = nil
	}
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "%08x ", statefile.Checksum(body.Bytes())); err != nil {
		return err
	}
	_, err = w.Write(body.Bytes())
	return err
}

// Load replaces the ledger with one Save wrote. Call it before Recover.
func (s *Store) Load(r io.Reader) error {
	var f struct {
		Version int                  `json:"version"`
		Apps    map[string]*appFacts `json:"applications"`
	}
	// The messages name the annotator, whose state this is to an operator.
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("annotate: reading the facts written: %w", err)
	}
	want := 1 // a bare JSON object: version 1, without a checksum
	if len(data) > 0 && data[0] != '{' {
		sum, body, ok := bytes.Cut(data, []byte(" "))
		if !ok || len(sum) != 8 || fmt.Sprintf("%08x", statefile.Checksum(body)) != string(sum) {
			return fmt.Errorf("annotate: facts written: the checksum does not match the content (a damaged file)")
		}
		data, want = body, ledgerVersion
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("annotate: reading the facts written: %w", err)
	}
	if f.Version != want {
		return fmt.Errorf("annotate: facts written: version %d, want %d", f.Version, ledgerVersion)
	}
	for _, a := range f.Apps {
		if a == nil {
			return fmt.Errorf("annotate: facts written: an application without facts")
		}
		a.Facts = make(map[Key]struct{}, len(a.List))
		for _, k := range a.List {
			a.Facts[k] = struct{}{}
		}
		a.List = nil
		if a.Execs == nil {
			a.Execs = map[string]Snapshot{}
		}
	}
	s.mu.Lock()
	s.apps = f.Apps
	if s.apps == nil {
		s.apps = map[string]*appFacts{}
	}
	s.mu.Unlock()
	return nil
}
