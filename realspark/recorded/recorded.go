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
		r, err := ReadRun(filepath.Dir(f))
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// ReadRun reads the run recorded in dir (testdata/spark-real/<version>).
func ReadRun(dir string) (Run, error) {
	r := Run{Dir: dir}
	err := readJSON(filepath.Join(dir, "recording.json"), &r)
	return r, err
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

// ClusterApp is an application the suite recorded on a real cluster
// manager, under testdata/spark-real/<version>/<manager>/<scenario>/: its
// REST answers and app.json, which names the application and, for every
// executor the test removed, the kind its removal must read as (package
// sizing's RemoveKind values), worked out from what the test did.
type ClusterApp struct {
	Dir         string // …/<version>/<manager>/<scenario>
	Manager     string // yarn, standalone
	Application string
	// Removed: executor → the kind of its removal, for every executor
	// removed before the application's end.
	Removed map[string]string
	// YARN is what YARN's ResourceManager said of the application, on
	// YARN.
	YARN *struct {
		Queue               string `json:"queue"`
		User                string `json:"user"`
		PreemptedContainers int64  `json:"numNonAMContainerPreempted"` // YARN's own names
	}
}

// ClusterApps are the applications recorded on real cluster managers
// under root (testdata/spark-real); an error when fewer than least are.
func ClusterApps(root string, least int) ([]ClusterApp, error) {
	files, _ := filepath.Glob(filepath.Join(root, "*", "*", "*", "app.json"))
	var out []ClusterApp
	for _, f := range files {
		dir := filepath.Dir(f)
		a := ClusterApp{Dir: dir, Manager: filepath.Base(filepath.Dir(dir))}
		if a.Manager != "yarn" && a.Manager != "standalone" {
			continue
		}
		var meta struct {
			Application string            `json:"application"`
			Removed     map[string]string `json:"removed"`
			YARN        json.RawMessage   `json:"yarn"`
		}
		if err := readJSON(f, &meta); err != nil {
			return nil, err
		}
		a.Application, a.Removed = meta.Application, meta.Removed
		if len(meta.YARN) > 0 {
			if err := json.Unmarshal(meta.YARN, &a.YARN); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
		}
		out = append(out, a)
	}
	if len(out) < least {
		return nil, fmt.Errorf("recorded real cluster applications under %s: %d, want at least %d", root, len(out), least)
	}
	return out, nil
}

// Read decodes the application's recorded answer name (allexecutors,
// environment, …) into v.
func (a ClusterApp) Read(name string, v any) error {
	return readJSON(filepath.Join(a.Dir, name+".json"), v)
}
