package spark

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sparkpulse/sparkpulse/templates"
)

// recordings are the real Spark runs under testdata/spark-real (see
// package realspark), one folder per Spark version.
func recordings(t *testing.T) []string {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join("..", "testdata", "spark-real", "*", "graphite.txt.gz"))
	if len(dirs) < 2 {
		t.Fatalf("recorded real Spark streams: %v", dirs)
	}
	for i := range dirs {
		dirs[i] = filepath.Dir(dirs[i])
	}
	return dirs
}

// readRecording returns the recorded Graphite lines and the GraphiteSink
// prefix the run used.
func readRecording(t *testing.T, dir string) (lines []string, prefix string) {
	t.Helper()
	var meta struct{ Prefix string }
	b, err := os.ReadFile(filepath.Join(dir, "recording.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "graphite.txt.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(zr)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines, meta.Prefix
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
