package attempt

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/influxdata/line-protocol/v2/lineprotocol"

	"github.com/sparkpulse/sparkpulse/accounting"
	"github.com/sparkpulse/sparkpulse/delta"
	"github.com/sparkpulse/sparkpulse/realspark/recorded"
	"github.com/sparkpulse/sparkpulse/relay"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/spark"
)

// TestScreenRealSpark: real Spark's streams (testdata/spark-real, see
// package realspark), through the built-in mapping and the delta stage,
// against Spark's own executor lists: nothing is set aside, killed and
// out-of-memory executors included.
func TestScreenRealSpark(t *testing.T) {
	eachRealApp(t, func(t *testing.T, name string, st *State, stream map[string]accounting.ProcessTotals, last int64) {
		if len(stream) < 3 {
			t.Fatalf("%s: stream of %d processes", name, len(stream))
		}
		_, aside := accounting.Screen(st.Properties, accounting.RunCPUs{0: 1}, executorList(st), stream, last, true)
		for _, a := range aside {
			t.Errorf("%s: set aside %s", name, a)
		}
	})
}

// eachRealApp calls f, in a subtest for each recorded real Spark run
// (testdata/spark-real, see package realspark), with each of the run's
// applications (main, failures) as recordedApp reads it, its stream as
// realStream sums it and its last report, in ms.
func eachRealApp(t *testing.T, f func(t *testing.T, name string, st *State, stream map[string]accounting.ProcessTotals, last int64)) {
	for _, run := range recorded.AllRuns(t) {
		t.Run(filepath.Base(run.Dir), func(t *testing.T) {
			streams, last := realStream(t, run)
			for _, name := range []string{"main", "failures"} {
				st := recordedApp(t, filepath.Join(run.Dir, name))
				f(t, name, st, streams[st.MetricsKey], last[st.MetricsKey])
			}
		})
	}
}

// realStream runs a recorded stream through the relay and sums it as
// the accounting's stream read does: by application and process, the
// counters' deltas, the gauges' peaks. last is each application's last
// report, in ms.
func realStream(t *testing.T, run recorded.Run) (map[string]map[string]accounting.ProcessTotals, map[string]int64) {
	t.Helper()
	rules, err := delta.CompileRules(spark.DeltaRules())
	if err != nil {
		t.Fatal(err)
	}
	conn := relay.New(relay.Config{
		Mapper: spark.NewMapper(spark.Options{Prefixes: []string{run.Prefix}}),
		Deltas: &relay.Deltas{Rules: rules, Tracker: delta.New(delta.Settings{FirstSampleGrace: delta.NoGrace}, time.Now()), Bucket: "spark"},
	}).NewConn(nil).(*relay.Conn)
	out, last := map[string]map[string]accounting.ProcessTotals{}, map[string]int64{}
	for _, line := range run.MustLines(t) {
		lp, err := conn.Process(line)
		if err != nil {
			continue // NaN ratios
		}
		dec := lineprotocol.NewDecoderWithBytes(lp)
		for dec.Next() {
			m, _ := dec.Measurement()
			meas := string(m)
			is := func(m schema.Metric) bool { return accounting.StreamKey(m) == meas }
			counter, gauge := slices.ContainsFunc(accounting.StreamCounters, is), slices.ContainsFunc(accounting.StreamGauges, is)
			var app, process string
			for {
				k, v, err := dec.NextTag()
				if err != nil || k == nil {
					break
				}
				switch string(k) {
				case "applicationid":
					app = string(v)
				case "process":
					process = string(v)
				}
			}
			fields := map[string]float64{}
			for {
				k, v, err := dec.NextField()
				if err != nil || k == nil {
					break
				}
				fields[string(k)] = v.FloatV()
			}
			ts, _ := dec.Time(lineprotocol.Nanosecond, time.Time{})
			if app == "" || process == "" {
				continue
			}
			last[app] = max(last[app], ts.UnixMilli())
			if !counter && !gauge {
				continue
			}
			if out[app] == nil {
				out[app] = map[string]accounting.ProcessTotals{}
			}
			p, ok := out[app][process]
			if !ok {
				p = accounting.ProcessTotals{Sums: map[string]float64{}, Peak: map[string]float64{}, Mean: map[string]float64{}}
				out[app][process] = p
			}
			if counter {
				p.Sums[meas] += fields["delta"]
			} else {
				p.Peak[meas] = max(p.Peak[meas], fields["value"])
			}
		}
	}
	return out, last
}
