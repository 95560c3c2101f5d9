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
	runs, err := recorded.Runs(filepath.Join("..", "testdata", "spark-real"))
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, r := range runs {
		dirs = append(dirs, r.Dir)
	}
	return dirs
}

// readRecording returns the recorded Graphite lines and the GraphiteSink
// prefix the run used.
func readRecording(t *testing.T, dir string) (lines []string, prefix string) {
	t.Helper()
	runs, err := recorded.Runs(filepath.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(runs, func(r recorded.Run) bool { return r.Dir == dir })
	if i < 0 {
		t.Fatalf("%s: no recorded run", dir)
	}
	raw, err := runs[i].Lines()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range raw {
		lines = append(lines, string(l))
	}
	return lines, runs[i].Prefix
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
