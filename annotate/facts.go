package annotate

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/sparkpulse/sparkpulse/schema"
)

// Facts are append-only: a series and time is written once and never
// again, because InfluxDB 3 does not reliably keep the later of two points
// at one series and time. An item's facts are at its start time, apart in
// the sub-millisecond digits (factTime):
//
//   - start: the item seen running, with what is known when it starts;
//   - end: its final state, written once it has one;
//   - lost: what was last seen of an item still running when its source
//     lost the application (status UNKNOWN), written at the close-out.
//
// An executor's facts are snapshots at the time they were seen, in a series
// of its own (tag process), written when something changed.
//
// The ledger remembers which facts were written, per application, so that
// a fact is never written twice: not by two sources that show one
// application, nor after a restart (Save and Load keep it in state-dir).

// Phases of an item, the last two bits of its facts' times.
const (
	phaseStart = 0
	phaseEnd   = 1
	phaseLost  = 2
	// phaseStream: an application no source showed, as its metrics
	// tell it (unseen.go).
	phaseStream = 3
)

var phaseNames = [...]string{phaseStart: "start", phaseEnd: "end", phaseLost: "lost", phaseStream: "stream"}

// factTime is the time of an item's fact: its start in ms, then the item's
// id (modulo 250 000) and the phase in the sub-millisecond digits.
func factTime(startMs, id int64, phase int) int64 {
	return startMs*1_000_000 + (id%250_000)*4 + int64(phase)
}

// factKey is a written point: its measurement (an index into
// measurements) and time. The tags are the application's.
type factKey struct {
	M  uint8 `json:"m"`
	TS int64 `json:"t"`
}

var measurements = []string{schema.MeasurementApp, schema.MeasurementJob, schema.MeasurementStage, schema.MeasurementSQL,
	schema.MeasurementExecutor, schema.MeasurementExecutorRemoval, schema.MeasurementSizing, schema.MeasurementTaskFailure, schema.MeasurementStageProgress,
	schema.MeasurementUsage, schema.MeasurementReconcile}

func measurementIndex(m string) uint8 { return uint8(slices.Index(measurements, m)) }

// snapshot is the last fact written of an executor.
type snapshot struct {
	Sum uint64 `json:"s"` // fingerprint of its fields and tags
	TS  int64  `json:"t"`
}

type appFacts struct {
	Used int64 `json:"used"` // unix ms of the last check
	// checked is the last check of this run, as the clock gave it: with
	// time.Now, its monotonic reading, so that how long ago it was is
	// not moved by a step of the wall clock (forget).
	checked time.Time
	Facts   map[factKey]struct{} `json:"-"`
	List    []factKey            `json:"facts"` // Facts, for Save and Load
	Execs   map[string]snapshot  `json:"executors"`
}

// ledger is the poller's record of facts written.
type ledger struct {
	mu   sync.Mutex
	apps map[string]*appFacts // by application id
}

func newLedger() *ledger { return &ledger{apps: map[string]*appFacts{}} }

func (l *ledger) app(id string, now time.Time) *appFacts {
	a := l.apps[id]
	if a == nil {
		a = &appFacts{Facts: map[factKey]struct{}{}, Execs: map[string]snapshot{}}
		l.apps[id] = a
	}
	a.Used = max(a.Used, now.UnixMilli())
	if a.checked.IsZero() || now.After(a.checked) {
		a.checked = now
	}
	return a
}

// has reports whether the fact was written.
func (l *ledger) has(app string, k factKey, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.app(app, now).Facts[k]
	return ok
}

// lastSnapshot is the last snapshot written of an executor.
func (l *ledger) lastSnapshot(app, process string, now time.Time) snapshot {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.app(app, now).Execs[process]
}

// record notes facts and snapshots as written.
func (l *ledger) record(app string, facts []factKey, snaps map[string]snapshot, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.app(app, now)
	for _, k := range facts {
		a.Facts[k] = struct{}{}
	}
	maps.Copy(a.Execs, snaps)
}

// holds reports whether facts of app are kept, without counting it as a
// check.
func (l *ledger) holds(app string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.apps[app]
	return a != nil && len(a.Facts) > 0
}

// forget drops the applications not checked for keep: their attempts
// are done and no source lists them any more. One checked in this run is
// timed from its check (monotonic with time.Now); one only loaded, from
// the wall time its last run recorded.
func (l *ledger) forget(now time.Time, keep time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	maps.DeleteFunc(l.apps, func(_ string, a *appFacts) bool {
		if !a.checked.IsZero() {
			return now.Sub(a.checked) > keep
		}
		return now.Sub(time.UnixMilli(a.Used)) > keep
	})
}

const ledgerVersion = 1

// Save writes the ledger as JSON.
func (l *ledger) Save(w io.Writer) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range l.apps {
		a.List = slices.SortedFunc(maps.Keys(a.Facts), func(x, y factKey) int {
			return cmp.Or(cmp.Compare(x.M, y.M), cmp.Compare(x.TS, y.TS))
		})
	}
	bw := bufio.NewWriter(w)
	err := json.NewEncoder(bw).Encode(struct {
		Version int                  `json:"version"`
		Apps    map[string]*appFacts `json:"applications"`
	}{ledgerVersion, l.apps})
	for _, a := range l.apps {
		a.List = nil
	}
	if err != nil {
		return err
	}
	return bw.Flush()
}

// Load replaces the ledger with one Save wrote.
func (l *ledger) Load(r io.Reader) error {
	var f struct {
		Version int                  `json:"version"`
		Apps    map[string]*appFacts `json:"applications"`
	}
	if err := json.NewDecoder(r).Decode(&f); err != nil {
		return fmt.Errorf("annotate: reading the facts written: %w", err)
	}
	if f.Version != ledgerVersion {
		return fmt.Errorf("annotate: facts written: version %d, want %d", f.Version, ledgerVersion)
	}
	for _, a := range f.Apps {
		if a == nil {
			return fmt.Errorf("annotate: facts written: an application without facts")
		}
		a.Facts = make(map[factKey]struct{}, len(a.List))
		for _, k := range a.List {
			a.Facts[k] = struct{}{}
		}
		a.List = nil
		if a.Execs == nil {
			a.Execs = map[string]snapshot{}
		}
	}
	l.mu.Lock()
	l.apps = f.Apps
	if l.apps == nil {
		l.apps = map[string]*appFacts{}
	}
	l.mu.Unlock()
	return nil
}
