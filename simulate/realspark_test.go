package simulate

import (
	"bufio"
	"bytes"
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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
	// By version, not by name: 10.0.0 comes after 4.3.0.
	slices.SortFunc(files, func(a, b string) int {
		return compareVersions(filepath.Base(filepath.Dir(a)), filepath.Base(filepath.Dir(b)))
	})
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

func TestCompareVersions(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{{"3.5.9", "4.3.0", -1}, {"10.0.0", "4.3.0", 1}, {"4.3.0", "4.3.0", 0}, {"4.3", "4.3.1", -1}} {
		if got := compareVersions(c.a, c.b); got != c.want {
			t.Errorf("compareVersions(%s, %s) = %d, want %d", c.a, c.b, got, c.want)
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

// compareVersions orders dotted versions ("3.5.9") by their numbers.
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := range min(len(as), len(bs)) {
		x, _ := strconv.Atoi(as[i])
		y, _ := strconv.Atoi(bs[i])
		if c := cmp.Compare(x, y); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(as), len(bs))
}
