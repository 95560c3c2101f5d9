package spark

import (
	_ "embed"
	"strings"

	"github.com/sparkpulse/sparkpulse/templates"
)

// knownNamesFile lists the names (measurement, tab, field) that real Spark
// sent in the recordings under testdata/spark-real, mapped in both shapes
// (TestKnownNames writes it with -update).
//
//go:embed known-names.txt
var knownNamesFile string

var knownNames = func() map[string]struct{} {
	m := map[string]struct{}{}
	for _, l := range strings.Split(strings.TrimSpace(knownNamesFile), "\n") {
		m[l] = struct{}{}
	}
	return m
}()

// Known reports whether r's name (its measurement and field) is one real
// Spark sends: the relay bounds the names it has not seen from Spark
// (package relay, names.go), not these.
func (m *Mapper) Known(r *templates.Result) bool {
	var b [128]byte
	k := append(append(append(b[:0], r.Measurement...), '\t'), r.Field...)
	_, ok := knownNames[string(k)]
	return ok
}
