package relay

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/sparkpulse/sparkpulse/realspark/recorded"
	"github.com/sparkpulse/sparkpulse/spark"
	"github.com/sparkpulse/sparkpulse/sparkapi"
)

// The recorded stream of each real Spark run (testdata/spark-real, see
// package realspark), through the built-in mapping and the delta stage as
// if sparkpulse ran from before the applications started: the deltas of
// each executor's succeededTasks add up to Spark's count of its tasks, for
// every executor whose last report arrived, and never exceed it.
func TestRealSparkDeltas(t *testing.T) {
	for _, rec := range recorded.AllRuns(t) {
		dir := rec.Dir
		t.Run(filepath.Base(dir), func(t *testing.T) {
			conn := New(Config{
				Mapper: spark.NewMapper(spark.Options{Prefixes: []string{rec.Prefix}}),
				Deltas: newDeltas(t, "spark"),
			}).NewConn(nil).(*Conn)

			sums := map[string]map[string]int64{} // applicationid → process → Σ delta
			for _, line := range rec.MustLines(t) {
				lp, err := conn.Process(line)
				if err != nil {
					// Only a ratio gauge of 0/0 or x/0 (a pool's usage with
					// no maximum) is dropped.
					if f := strings.Fields(string(line)); len(f) != 3 || f[1] != "NaN" && f[1] != "Infinity" && f[1] != "-Infinity" {
						t.Errorf("%q: %v", line, err)
					}
					continue
				}
				app, process, d, ok := succeededDelta(t, lp)
				if !ok {
					continue
				}
				if sums[app] == nil {
					sums[app] = map[string]int64{}
				}
				sums[app][process] += d
			}

			for _, name := range []string{"main", "failures"} {
				var app struct {
					Application string `json:"application"`
					MetricsKey  string `json:"metrics_key"`
				}
				recorded.ReadFile(t, filepath.Join(dir, name, "app.json"), &app)
				var execs []sparkapi.Executor
				recorded.ReadFile(t, filepath.Join(dir, name, "allexecutors.json"), &execs)
				exact := 0
				for _, x := range execs {
					if x.ID == "driver" {
						continue
					}
					got := sums[app.MetricsKey][x.ID]
					switch {
					case got > int64(x.CompletedTasks):
						t.Errorf("%s executor %s: deltas add up to %d tasks, Spark counts %d", name, x.ID, got, x.CompletedTasks)
					case got == int64(x.CompletedTasks):
						exact++
					case x.IsActive:
						t.Errorf("%s executor %s, alive at the end: deltas add up to %d tasks, Spark counts %d", name, x.ID, got, x.CompletedTasks)
					}
				}
				if exact == 0 {
					t.Errorf("%s: no executor's deltas add up to Spark's count", name)
				}
			}
		})
	}
}

// succeededDelta reads the delta of an executor's succeededTasks.count
// point.
func succeededDelta(t *testing.T, lp []byte) (app, process string, d int64, ok bool) {
	for _, p := range decodePoints(t, lp) {
		if p.measurement != "succeededTasks.count" {
			return "", "", 0, false
		}
		for _, kv := range p.tags {
			switch kv[0] {
			case "applicationid":
				app = kv[1]
			case "process":
				process = kv[1]
			}
		}
		for _, f := range p.fields {
			if f.key == "delta" {
				d, ok = int64(f.value.FloatV()), true
			}
		}
	}
	return app, process, d, ok
}
