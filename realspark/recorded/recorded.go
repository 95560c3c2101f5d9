// Package recorded reads the real Spark runs that the real-Spark suite
// (package realspark, `go test ./realspark -run TestRealSpark -update`)
// records under testdata/spark-real/<version>/: the Graphite lines Spark
// sent (graphite.txt.gz), the GraphiteSink prefix of the run
// (recording.json) and the REST API's answers. Fast tests elsewhere read
// them through this package, so that the layout is known in one place.
package recorded

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// Run is one recorded run, of one Spark version.
type Run struct {
	Dir    string // testdata/spark-real/<version>
	Prefix string // the GraphiteSink prefix it used
}

// Runs are the runs recorded under root (testdata/spark-real), one per
// Spark version; an error when fewer than two are.
func Runs(root string) ([]Run, error) {
	files, _ := filepath.Glob(filepath.Join(root, "*", "graphite.txt.gz"))
	if len(files) < 2 {
		return nil, fmt.Errorf("recorded real Spark streams under %s: %v", root, files)
	}
	var out []Run
	for _, f := range files {
		r := Run{Dir: filepath.Dir(f)}
		if err := readJSON(filepath.Join(r.Dir, "recording.json"), &r); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// Lines are the Graphite lines the run's Spark sent, in order.
func (r Run) Lines() ([][]byte, error) {
	name := filepath.Join(r.Dir, "graphite.txt.gz")
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var lines [][]byte
	sc := bufio.NewScanner(zr)
	for sc.Scan() {
		lines = append(lines, slices.Clone(sc.Bytes()))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return lines, nil
}

// JSON decodes, by file, each recorded answer under root/<version>/
// whose path matches glob; an error with fewer than least of them.
func JSON[T any](root, glob string, least int) (map[string]T, error) {
	files, _ := filepath.Glob(filepath.Join(root, "*", glob))
	if len(files) < least {
		return nil, fmt.Errorf("recorded real Spark %s: %v", glob, files)
	}
	out := map[string]T{}
	for _, f := range files {
		var v T
		if err := readJSON(f, &v); err != nil {
			return nil, err
		}
		out[f] = v
	}
	return out, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
