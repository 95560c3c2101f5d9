package spark

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/templates"
)

// known-names.txt is every name (measurement and field) the recorded real
// Spark streams map to, in both shapes; each is Known, and a name no Spark
// sends is not.
func TestKnownNames(t *testing.T) {
	names := map[string]bool{}
	var r templates.Result
	for _, dir := range recordings(t) {
		lines, prefix := readRecording(t, dir)
		for _, sc := range []schema.Shape{schema.CERN, schema.Wide} {
			m := NewMapper(Options{Prefixes: []string{prefix}, Schema: sc})
			for _, l := range lines {
				path, _, _ := strings.Cut(l, " ")
				if err := m.Apply([]byte(path), &r); err != nil {
					t.Fatalf("%q: %v", l, err)
				}
				if !m.Known(&r) && !*update {
					t.Errorf("%s (%s): %s %s not known", path, sc, r.Measurement, r.Field)
				}
				names[string(r.Measurement)+"\t"+string(r.Field)] = true
			}
		}
	}
	var got []string
	for n := range names {
		got = append(got, n)
	}
	slices.Sort(got)
	text := strings.Join(got, "\n") + "\n"
	if *update {
		if err := os.WriteFile("known-names.txt", []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if text != knownNamesFile {
		t.Errorf("known-names.txt is not the recordings' names: go test ./spark -run TestKnownNames -update")
	}
	m := NewMapper(Options{Schema: schema.Wide})
	if err := m.Apply([]byte("app-20261122101500-0001.1.executor.f1.count"), &r); err != nil || m.Known(&r) {
		t.Errorf("a name no Spark sends (%s %s) is known: %v", r.Measurement, r.Field, err)
	}
}
