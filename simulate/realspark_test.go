package simulate

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/spark"
	"github.com/sparkpulse/sparkpulse/templates"
)

// The simulator sends at least every metric a real Spark's driver and
// executors sent in the recorded runs (testdata/spark-real/<version>/
// metric-names.txt, see package realspark), so that make run and the
// tests built on the simulator see real Spark's names. It is the newest
// Spark: of an older version's names, those the newest no longer sends
// (a class renamed, e.g. StreamingQueryListenerBus in 4.x) are left out.
func TestSimulatorCoversRealSpark(t *testing.T) {
	sent := map[string]bool{}
	m := spark.NewMapper(spark.Options{})
	var r templates.Result
	start := time.Unix(1795300000, 0)
	for _, p := range []*process{
		{ns: "app-20261122101500-0001", id: "1", rng: newRand(1)},
		{ns: "app-20261122101500-0001", id: "2", rng: newRand(2), pyspark: true},
		{ns: "app-20261122101500-0001", id: "driver", rng: newRand(3), stream: "rate_counts"},
	} {
		var buf bytes.Buffer
		for n := range 3 {
			if err := p.report(&buf, "", start.Add(time.Duration(n)*10*time.Second)); err != nil {
				t.Fatal(err)
			}
			p.advance()
		}
		sc := bufio.NewScanner(&buf)
		for sc.Scan() {
			path, _, _ := strings.Cut(sc.Text(), " ")
			if err := m.Apply([]byte(path), &r); err != nil {
				t.Fatal(err)
			}
			sent[spark.InventoryName(&r)] = true
		}
	}
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "spark-real", "*", "metric-names.txt"))
	if len(files) < 2 {
		t.Fatalf("metric names of real Spark: %v", files)
	}
	// Versions sort as folder names do here (3.5.9 < 4.3.0).
	newest := map[string]bool{}
	for _, n := range readNames(t, files[len(files)-1]) {
		newest[n] = true
	}
	for i, f := range files {
		var missing []string
		for _, n := range readNames(t, f) {
			if (strings.HasPrefix(n, "driver ") || strings.HasPrefix(n, "executor ")) && !sent[n] &&
				(i == len(files)-1 || newest[n]) {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			t.Errorf("%s: the simulator does not send %d names real Spark sent:\n%s", f, len(missing), strings.Join(missing, "\n"))
		}
	}
}

func readNames(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}
