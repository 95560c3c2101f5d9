package spark

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sparkpulse/sparkpulse/realspark/recorded"
	"github.com/sparkpulse/sparkpulse/templates"
)

// recordings are the real Spark runs under testdata/spark-real (see
// package realspark), one folder per Spark version.
func recordings(t *testing.T) []string {
	t.Helper()
	var dirs []string
	for _, r := range recorded.AllRuns(t) {
		dirs = append(dirs, r.Dir)
	}
	return dirs
}

// readRecording returns the recorded Graphite lines and the GraphiteSink
// prefix the run used.
func readRecording(t *testing.T, dir string) (lines []string, prefix string) {
	t.Helper()
	run := recorded.MustRun(t, dir)
	for _, l := range run.MustLines(t) {
		lines = append(lines, string(l))
	}
	return lines, run.Prefix
}

// Every path a real Spark sent maps to a documented measurement, none to
// "anything else", and the recorded stream's metric names are the
// committed inventory of its version.
func TestRealSparkInventory(t *testing.T) {
	for _, dir := range recordings(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			lines, prefix := readRecording(t, dir)
			m := NewMapper(Options{Prefixes: []string{prefix}})
			var r templates.Result
			names := map[string]bool{}
			for _, l := range lines {
				path, _, _ := strings.Cut(l, " ")
				if err := m.Apply([]byte(path), &r); err != nil {
					t.Fatalf("%q: %v", l, err)
				}
				n := InventoryName(&r)
				if n == "" {
					t.Errorf("%s: not a documented form", path)
					continue
				}
				names[n] = true
			}
			var got []string
			for n := range names {
				got = append(got, n)
			}
			slices.Sort(got)
			want := readLines(t, filepath.Join(dir, "metric-names.txt"))
			if !slices.Equal(got, want) {
				t.Errorf("%d names in the stream, %d in metric-names.txt: record both in one run (go test ./realspark -update)", len(got), len(want))
			}
		})
	}
}
