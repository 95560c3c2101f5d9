package attempt

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/influxdata/line-protocol/v2/lineprotocol"

	"github.com/sparkpulse/sparkpulse/accounting"
	"github.com/sparkpulse/sparkpulse/delta"
	"github.com/sparkpulse/sparkpulse/relay"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/spark"
)

// TestScreenRealSpark: real Spark's streams (testdata/spark-real, see
// package realspark), through the built-in mapping and the delta stage,
// against Spark's own executor lists: nothing is set aside, killed and
// out-of-memory executors included.
func TestScreenRealSpark(t *testing.T) {
	for _, f := range realRecordings(t) {
		dir := filepath.Dir(f)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			streams, last := realStream(t, dir, f)
			for _, name := range []string{"main", "failures"} {
				st := recordedApp(t, filepath.Join(dir, name))
				stream := streams[st.MetricsKey]
				if len(stream) < 3 {
					t.Fatalf("%s: stream of %d processes", name, len(stream))
				}
				_, aside := accounting.Screen(st.Properties, accounting.RunCPUs{0: 1}, executorList(st), stream, last[st.MetricsKey], true)
				for _, a := range aside {
					t.Errorf("%s: set aside %s", name, a)
				}
			}
		})
	}
}

// realRecordings are the recorded real Spark streams (testdata/spark-real,
// see package realspark), one per version.
func realRecordings(t *testing.T) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "spark-real", "*", "graphite.txt.gz"))
	if len(files) < 2 {
		t.Fatalf("recorded real Spark streams: %v", files)
	}
	return files
}

// realStream runs a recorded stream through the relay and sums it as
// the accounting's stream read does: by application and process, the
// counters' deltas, the gauges' peaks. last is each application's last
// report, in ms.
func realStream(t *testing.T, dir, file string) (map[string]map[string]accounting.ProcessTotals, map[string]int64) {
	t.Helper()
	var meta struct{ Prefix string }
	readJSONFile(t, filepath.Join(dir, "recording.json"), &meta)
	rules, err := delta.CompileRules(spark.DeltaRules())
	if err != nil {
		t.Fatal(err)
	}
	conn := relay.New(relay.Config{
		Mapper: spark.NewMapper(spark.Options{Prefixes: []string{meta.Prefix}}),
		Deltas: &relay.Deltas{Rules: rules, Tracker: delta.New(delta.Settings{FirstSampleGrace: delta.NoGrace}, time.Now()), Bucket: "spark"},
	}).NewConn(nil).(*relay.Conn)
	fh, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	zr, err := gzip.NewReader(fh)
	if err != nil {
		t.Fatal(err)
	}
	out, last := map[string]map[string]accounting.ProcessTotals{}, map[string]int64{}
	sc := bufio.NewScanner(zr)
	for sc.Scan() {
		lp, err := conn.Process(sc.Bytes())
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
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out, last
}

func readJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
