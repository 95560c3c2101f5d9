package recorded

import (
	"bytes"
	"path/filepath"
	"testing"
)

// Root is testdata/spark-real as the tests of a package at the top of the
// module see it from their package's folder.
var Root = filepath.Join("..", "testdata", "spark-real")

// AllRuns are the runs recorded under Root; tb fails when fewer than two
// are.
func AllRuns(tb testing.TB) []Run {
	tb.Helper()
	runs, err := Runs(Root)
	if err != nil {
		tb.Fatal(err)
	}
	return runs
}

// Answers decodes, by file, each recorded answer under Root/<version>/
// whose path matches glob; tb fails with fewer than least of them.
func Answers[T any](tb testing.TB, glob string, least int) map[string]T {
	tb.Helper()
	out, err := JSON[T](Root, glob, least)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// ReadFile decodes the recorded JSON file at path into v; tb fails when it
// cannot.
func ReadFile(tb testing.TB, path string, v any) {
	tb.Helper()
	if err := readJSON(path, v); err != nil {
		tb.Fatal(err)
	}
}

// MustLines are the run's Graphite lines (Lines); tb fails when they
// cannot be read.
func (r Run) MustLines(tb testing.TB) [][]byte {
	tb.Helper()
	lines, err := r.Lines()
	if err != nil {
		tb.Fatal(err)
	}
	return lines
}

// MustRun is the run recorded in dir (ReadRun); tb fails when it cannot
// be read.
func MustRun(tb testing.TB, dir string) Run {
	tb.Helper()
	r, err := ReadRun(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// Paths are the Graphite paths of the run's lines (MustLines), in order:
// each line's text before its first space.
func (r Run) Paths(tb testing.TB) []string {
	tb.Helper()
	var paths []string
	for _, l := range r.MustLines(tb) {
		p, _, _ := bytes.Cut(l, []byte(" "))
		paths = append(paths, string(p))
	}
	return paths
}
