package facts

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/statefile"
)

// The ledger survives Save and Load; a damaged file is refused whole.
func TestLedgerSaveLoad(t *testing.T) {
	l := New(Config{})
	l.Record("app-1", []Key{{M: 1, TS: 5}, {M: 2, TS: 7}}, map[string]Snapshot{"3": {Sum: 9, TS: 11}}, time.UnixMilli(100))
	var b bytes.Buffer
	if err := l.Save(&b); err != nil {
		t.Fatal(err)
	}
	saved := b.String()
	m := New(Config{})
	if err := m.Load(&b); err != nil {
		t.Fatal(err)
	}
	if at := time.UnixMilli(100); !m.Has("app-1", Key{M: 2, TS: 7}, at) || m.Has("app-1", Key{M: 2, TS: 8}, at) || m.LastSnapshot("app-1", "3", at) != (Snapshot{Sum: 9, TS: 11}) {
		t.Errorf("loaded ledger differs: %s", saved)
	}
	for _, bad := range []string{"", "{", `{"version":2,"applications":{}}`, `{"version":1,"applications":{"a":null}}`} {
		if err := New(Config{}).Load(strings.NewReader(bad)); err == nil {
			t.Errorf("Load(%q): no error", bad)
		}
	}
	m.Forget(time.UnixMilli(102), time.Millisecond)
	if m.Has("app-1", Key{M: 1, TS: 5}, time.UnixMilli(200)) {
		t.Error("forget kept an application unused since before")
	}
}

// An application checked in this run is forgotten by the time since its
// check as the clock measures it (monotonic with time.Now), not by the
// wall time it recorded: a step of the wall clock three hours ahead
// leaves its recorded time three hours behind, and it is kept. One only
// loaded from the last run is timed by its recorded wall time.
func TestLedgerForgetsByItsChecks(t *testing.T) {
	const keep = time.Hour + 20*time.Minute
	l := New(Config{})
	l.Record("running", []Key{{M: 1, TS: 5}}, nil, time.Now())
	l.apps["running"].Used = time.Now().Add(-3 * time.Hour).UnixMilli() // as after a step of the wall clock
	var b bytes.Buffer
	loaded := New(Config{})
	old := New(Config{})
	old.Record("ended", []Key{{M: 1, TS: 6}}, nil, time.Now().Add(-3*time.Hour))
	old.Save(&b)
	if err := loaded.Load(&b); err != nil {
		t.Fatal(err)
	}
	l.apps["ended"] = loaded.apps["ended"]
	l.Forget(time.Now(), keep)
	if !l.Holds("running") || l.Holds("ended") {
		t.Errorf("after forget: running kept %v (want true), ended kept %v (want false)", l.Holds("running"), l.Holds("ended"))
	}
}

// The checkpoint file is as doc.go describes it, version 1: a file
// written by an earlier release reads the same.
func TestCheckpointFormat(t *testing.T) {
	s := New(Config{})
	s.Record("app-2", []Key{{M: 3, TS: 9}, {M: 1, TS: 5}, {M: 1, TS: 4}}, map[string]Snapshot{"1": {Sum: 1, TS: 2}}, time.UnixMilli(1_700_000_000_500))
	var b bytes.Buffer
	if err := s.Save(&b); err != nil {
		t.Fatal(err)
	}
	const body = `{"version":2,"applications":{"app-2":{"used":1700000000500,"facts":[{"m":1,"t":4},{"m":1,"t":5},{"m":3,"t":9}],"executors":{"1":{"s":1,"t":2}}}}}` + "\n"
	if want := "8d831273 " + body; b.String() != want {
		t.Errorf("checkpoint\n  %s\nwant\n  %s", b.String(), want)
	}
	// Read back; version 1 (no checksum, an older sparkpulse's) read too;
	// a damaged one, or version 1 with a checksum, refused.
	v1 := strings.Replace(body, `"version":2`, `"version":1`, 1)
	for _, c := range []struct{ name, file, err string }{
		{"version 2", b.String(), ""},
		{"doc.go's example", `10c83da6 {"version":2,"applications":{"app-2":{"used":1700000000500,"facts":[{"m":1,"t":4}],"executors":{"1":{"s":1,"t":2}}}}}` + "\n", ""},
		{"version 1", v1, ""},
		{"damaged", strings.Replace(b.String(), `"t":5`, `"t":6`, 1), "checksum"},
		{"version 1 with a checksum", fmt.Sprintf("%08x %s", statefile.Checksum([]byte(v1)), v1), "version 1, want 2"},
	} {
		l := New(Config{})
		err := l.Load(strings.NewReader(c.file))
		if c.err == "" && (err != nil || !l.Has("app-2", Key{M: 1, TS: 4}, time.UnixMilli(1_700_000_000_600))) {
			t.Errorf("%s: %v, or the facts not read", c.name, err)
		}
		if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.err)
		}
	}
}

// A measurement's index is what the journal and the checkpoint store:
// the list is only ever appended to.
func TestMeasurementIndices(t *testing.T) {
	for i, m := range []string{schema.MeasurementApp, schema.MeasurementJob, schema.MeasurementStage, schema.MeasurementSQL,
		schema.MeasurementExecutor, schema.MeasurementExecutorRemoval, schema.MeasurementSizing, schema.MeasurementTaskFailure,
		schema.MeasurementStageProgress, schema.MeasurementUsage, schema.MeasurementReconcile} {
		if k := NewKey(m, 7); k != (Key{M: uint8(i), TS: 7}) {
			t.Errorf("NewKey(%q, 7) = %+v, want M %d", m, k, i)
		}
	}
}
