package delta

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func observed() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zap.InfoLevel)
	return zap.New(core), logs
}

// TestOpenState: a run's baselines, saved in the directory, are the next
// run's, with the same IDs; a missing, older or damaged file starts
// without baselines, with a warning that says why.
func TestOpenState(t *testing.T) {
	dir := t.TempDir()
	key := []byte("spark\x00executor,applicationid=app-1 cpuTime.count=")

	log, logs := observed()
	tr, store := OpenState(dir, Settings{FirstSampleGrace: NoGrace}, log)
	if n := logs.Len(); n != 0 {
		t.Errorf("no file yet: %d log lines, want none", n)
	}
	st := Unknown()
	tr.Update(&st, "app-1", 100, at(0), at(0))
	if err := store.Save(func(yield func(ID, State) bool) { yield(tr.ID(key), st) }, 7); err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*")); len(m) != 1 || filepath.Base(m[0]) != StateFile {
		t.Errorf("the directory holds %q, want only %s", m, StateFile)
	}

	log, logs = observed()
	tr2, _ := OpenState(dir, Settings{}, log)
	if e := logs.FilterMessage("read the delta baselines of the last run").All(); len(e) != 1 || e[0].ContextMap()["series"] != int64(1) {
		t.Errorf("load logged %v", logs.All())
	}
	got := Unknown()
	if tr2.ID(key) != tr.ID(key) || !tr2.Restore(key, "app-1", &got, at(1)) || got != st {
		t.Errorf("restored %v, want %v", got, st)
	}
	// The mark names the ingest log's segment to replay from, and the
	// first run's start is kept (rule 5's grace does not begin again).
	if tr2.Mark() != 7 || tr2.start != tr.start {
		t.Errorf("restored mark %d, start %d; want 7, %d", tr2.Mark(), tr2.start, tr.start)
	}
	// Without an ingest log a caller forgets them once read: a start
	// after this run is killed has none.
	_, store2 := OpenState(dir, Settings{}, zap.NewNop())
	store2.Forget()
	tr4, store4 := OpenState(dir, Settings{}, zap.NewNop())
	if len(tr4.restored) != 0 || store4.Loaded() {
		t.Errorf("a start after Forget restored %d baselines", len(tr4.restored))
	}

	// An older version's file: ignored, and the warning says so.
	old, err := os.ReadFile("testdata/version2.state")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, StateFile), old, 0o600); err != nil {
		t.Fatal(err)
	}
	log, logs = observed()
	tr3, _ := OpenState(dir, Settings{}, log)
	if e := logs.FilterLevelExact(zap.WarnLevel).All(); len(e) != 1 || !strings.Contains(e[0].Message, "older sparkpulse version") ||
		!strings.Contains(e[0].Message, "loses one interval of deltas") || len(tr3.restored) != 0 {
		t.Errorf("old file logged %v", logs.All())
	}

	// A damaged file: ignored, with a warning.
	if err := os.WriteFile(filepath.Join(dir, StateFile), []byte(stateMagic+"\x03\x00\x00\x00"), 0o600); err != nil {
		t.Fatal(err)
	}
	log, logs = observed()
	OpenState(dir, Settings{}, log)
	if e := logs.FilterMessage("ignoring delta state; starting without baselines").All(); len(e) != 1 {
		t.Errorf("damaged file logged %v", logs.All())
	}
}

// Without a directory nothing is kept; a nil Store (deltas off) saves
// nothing.
func TestOpenStateNoDir(t *testing.T) {
	log, logs := observed()
	_, store := OpenState("", Settings{}, log)
	if err := store.Save(func(func(ID, State) bool) {}, 0); err != nil {
		t.Error(err)
	}
	if e := logs.All(); len(e) != 1 || !strings.Contains(e[0].Message, "no state-dir") {
		t.Errorf("logged %v", e)
	}
	if err := (*Store)(nil).Save(nil, 0); err != nil {
		t.Error(err)
	}
}

// A save that fails says so, naming the file.
func TestStoreSaveError(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "not a directory")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, store := OpenState(file, Settings{}, zap.NewNop())
	if err := store.Save(func(func(ID, State) bool) {}, 0); err == nil || !strings.Contains(err.Error(), "delta baselines not saved") ||
		!strings.Contains(err.Error(), StateFile) {
		t.Errorf("saved under a file: %v", err)
	}
}
