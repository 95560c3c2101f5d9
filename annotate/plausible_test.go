package annotate

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/influxdata/line-protocol/v2/lineprotocol"

	"github.com/sparkpulse/sparkpulse/delta"
	"github.com/sparkpulse/sparkpulse/relay"
	"github.com/sparkpulse/sparkpulse/sizing"
	"github.com/sparkpulse/sparkpulse/spark"
	"github.com/sparkpulse/sparkpulse/sparkapi"
)

// screenApp is an ended application of 4g executors with two cores each,
// run from t0 for 10 minutes; executor 2 was killed after 5 minutes.
func screenApp() *appState {
	x := func(id string, removed time.Time, reason string) *executorItem {
		e := sparkapi.Executor{ID: id, TotalCores: 2, AddTime: sparkapi.OptDate(at(0)), CompletedTasks: 100,
			TotalDuration: 400_000, TotalGCTime: 9_000, TotalInputBytes: 5 << 30, TotalShuffleRead: 1 << 30, TotalShuffleWrite: 1 << 30,
			PeakMemoryMetrics: map[string]int64{"ProcessTreeJVMRSSMemory": 3 << 30, "JVMHeapMemory": 2 << 30}}
		if !removed.IsZero() {
			e.RemoveTime, e.RemoveReason = sparkapi.OptDate(removed), reason
		}
		return &executorItem{e}
	}
	return &appState{
		properties: map[string]string{"spark.master": "yarn", "spark.executor.memory": "4g", "spark.executor.cores": "2"},
		executors: map[string]*executorItem{
			"1": x("1", time.Time{}, ""),
			"2": x("2", at(300), "Container killed by YARN for exceeding physical memory limits. 4.6 GB of 4.4 GB physical memory used."),
		},
	}
}

// genuine is what a stream that only Spark wrote says of screenApp's
// executors: at most Spark's totals.
func genuine() map[string]ProcessTotals {
	p := func() ProcessTotals {
		return ProcessTotals{
			Sums: map[string]float64{"succeededTasks.count": 100, "cpuTime.count": 300e9, "runTime.count": 390_000, "jvmGCTime.count": 8_000,
				"bytesRead.count": 5 << 30, "shuffleTotalBytesRead.count": 1 << 30, "shuffleBytesWritten.count": 1 << 30},
			Peak: map[string]float64{"ProcessTreeJVMRSSMemory": 3 << 30, "JVMHeapMemory": 2 << 30},
			Mean: map[string]float64{"ProcessTreeJVMRSSMemory": 2 << 30, "JVMHeapMemory": 1 << 30},
		}
	}
	return map[string]ProcessTotals{"1": p(), "2": p()}
}

// TestScreen: each check of screen, with cases where it must and must not
// set a figure aside.
func TestScreen(t *testing.T) {
	end := ms(at(600))
	for _, tc := range []struct {
		name    string
		final   bool
		change  func(map[string]ProcessTotals)
		aside   []string // "process:counters" or "process:<gauge>"
		above   []string
		whyPart string
	}{
		{"a genuine stream", true, func(map[string]ProcessTotals) {}, nil, nil, ""},
		{"a genuine stream, running", false, func(map[string]ProcessTotals) {}, nil, nil, ""},
		{"no stream for one executor", true, func(s map[string]ProcessTotals) { delete(s, "2") }, nil, nil, ""},
		// The forged line of the probe: 1e13 ns for executor 1.
		{"task CPU beyond its cores", false, func(s map[string]ProcessTotals) { s["1"].Sums["cpuTime.count"] = 1e13 },
			[]string{"1:counters"}, nil, "cpu_time_ns 1e+13 > 1.32e+12, 2 cores for 10m0s"},
		{"run time beyond its cores", false, func(s map[string]ProcessTotals) { s["2"].Sums["runTime.count"] = 800_000 },
			[]string{"2:counters"}, nil, "run_time_ms 8e+05 > 7.2e+05, 2 cores for 5m0s"},
		{"task CPU above Spark's task time", true, func(s map[string]ProcessTotals) { s["1"].Sums["cpuTime.count"] = 401e9 },
			[]string{"1:counters"}, []string{"1"}, "cpu_time_ns 4.01e+11 > 4e+11, Spark's total"},
		{"task CPU above Spark's task time, running: Spark's may be older", false, func(s map[string]ProcessTotals) { s["1"].Sums["cpuTime.count"] = 401e9 },
			nil, nil, ""},
		{"tasks above Spark's", true, func(s map[string]ProcessTotals) { s["2"].Sums["succeededTasks.count"] = 102 },
			[]string{"2:counters"}, []string{"2"}, "tasks 102 > 100, Spark's total"},
		{"input above Spark's", true, func(s map[string]ProcessTotals) { s["1"].Sums["bytesRead.count"] = 6 << 30 },
			[]string{"1:counters"}, []string{"1"}, "input_bytes"},
		{"shortfalls are the reconciliation's", true, func(s map[string]ProcessTotals) { s["2"].Sums["succeededTasks.count"] = 60 },
			nil, nil, ""},
		{"overflowing sums", false, func(s map[string]ProcessTotals) { s["1"].Sums["jvmGCTime.count"] = 1e300 },
			[]string{"1:counters"}, nil, "jvmGCTime.count 1e+300 is no counter's sum"},
		// The forged gauge of the probe: 60 GiB of resident memory.
		{"a peak beyond the container", true, func(s map[string]ProcessTotals) { s["1"].Peak["ProcessTreeJVMRSSMemory"] = 60 << 30 },
			[]string{"1:ProcessTreeJVMRSSMemory"}, nil, "ProcessTreeJVMRSSMemory peak 60.0 GiB > 4.4 GiB it could hold"},
		{"a peak beyond the container, running", false, func(s map[string]ProcessTotals) { s["1"].Peak["ProcessTreeJVMRSSMemory"] = 60 << 30 },
			[]string{"1:ProcessTreeJVMRSSMemory"}, nil, "> 4.4 GiB it could hold"},
		// Spark keeps peaks only of polls made while a stage runs: the
		// stream's may be above them.
		{"a peak above Spark's, within the container", true, func(s map[string]ProcessTotals) { s["1"].Peak["ProcessTreeJVMRSSMemory"] = 4 << 30 },
			nil, nil, ""},
		// Executor 2 was killed for its memory: seen at 4.6 GB of 4.4.
		{"a killed executor's last peak", true, func(s map[string]ProcessTotals) { s["2"].Peak["ProcessTreeJVMRSSMemory"] = 4.6e9 },
			nil, nil, ""},
		{"Python's peak beyond the container", true, func(s map[string]ProcessTotals) { s["2"].Peak["ProcessTreePythonRSSMemory"] = 5 << 30 },
			[]string{"2:ProcessTreePythonRSSMemory"}, nil, "> 4.4 GiB it could hold"},
		{"a heap above the heap", true, func(s map[string]ProcessTotals) { s["2"].Peak["JVMHeapMemory"] = 5 << 30 },
			[]string{"2:JVMHeapMemory"}, nil, "JVMHeapMemory peak 5.0 GiB > 4.0 GiB it could hold"},
		{"a negative peak", true, func(s map[string]ProcessTotals) { s["1"].Peak["JVMHeapMemory"] = -1 },
			[]string{"1:JVMHeapMemory"}, nil, "no amount of memory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, stream := screenApp(), genuine()
			tc.change(stream)
			before, _ := json.Marshal(stream)
			kept, aside := screen(st, stream, end, tc.final)
			if after, _ := json.Marshal(stream); string(after) != string(before) {
				t.Error("screen changed the stream it was given")
			}
			var got, above []string
			var why string
			for _, a := range aside {
				why += a.String() + "; "
				if a.aboveSpk {
					above = append(above, a.process)
				}
				if a.counters {
					got = append(got, a.process+":counters")
					if kept[a.process].Sums != nil {
						t.Errorf("process %s: counters set aside but kept", a.process)
					}
					continue
				}
				for _, m := range StreamGauges {
					g := StreamKey(m)
					if _, ok := kept[a.process].Peak[g]; !ok && stream[a.process].Peak[g] != 0 {
						got = append(got, a.process+":"+g)
						if _, ok := kept[a.process].Mean[g]; ok {
							t.Errorf("process %s: %s's peak set aside but not its mean", a.process, g)
						}
					}
				}
			}
			if !slices.Equal(got, tc.aside) || !slices.Equal(above, tc.above) {
				t.Errorf("set aside %v (above Spark %v), want %v (%v): %s", got, above, tc.aside, tc.above, why)
			}
			if !strings.Contains(why, tc.whyPart) {
				t.Errorf("why %q lacks %q", why, tc.whyPart)
			}
			for id, p := range stream {
				if len(kept[id].Sums) == 0 && len(p.Sums) > 0 && !slices.Contains(got, id+":counters") {
					t.Errorf("process %s's counters lost", id)
				}
			}
		})
	}
}

// TestScreenUnbounded: where no cluster manager holds a process to its
// container, resident memory has no bound to check and the screen stays
// quiet; where Spark saw a heap above the setting, the JVM got more than
// the setting says.
func TestScreenUnbounded(t *testing.T) {
	st, stream := screenApp(), genuine()
	st.properties["spark.master"] = "spark://master:7077"
	stream["1"].Peak["ProcessTreeJVMRSSMemory"] = 60 << 30
	if _, aside := screen(st, stream, ms(at(600)), true); len(aside) != 0 {
		t.Errorf("standalone: set aside %v", aside)
	}
	st, stream = screenApp(), genuine()
	st.executors["2"].PeakMemoryMetrics["JVMHeapMemory"] = 5 << 30
	stream["2"].Peak["JVMHeapMemory"] = 5 << 30
	stream["1"].Peak["JVMHeapMemory"] = 5 << 30
	_, aside := screen(st, stream, ms(at(600)), true)
	if len(aside) != 1 || aside[0].process != "1" {
		t.Errorf("heap above the setting: set aside %v, want executor 1's only", aside)
	}
}

// TestScreenedAccounting: a forged counter and a forged gauge change
// neither the accounting nor the advice; the usage says what was set
// aside and the reconciliation's verdict is above_spark.
func TestScreenedAccounting(t *testing.T) {
	st := screenApp()
	st.key.start, st.end = ms(at(0)), ms(at(600))
	st.stageTotals = &stageTotals{}
	st.stageTotals.add(&sparkapi.Stage{StageID: 0, ExecutorCPUTime: 600e9, ExecutorRunTime: 780_000})
	s, _ := sizing.FromProperties(st.properties)
	r, _ := sizing.ResourcesFromProperties(st.properties)
	account := func(stream map[string]ProcessTotals) (sizing.Usage, sizing.Advice, Reconciliation) {
		kept, aside := screen(st, stream, st.end, true)
		execs := sizingExecutors(st, kept, st.end)
		u := sizing.Account(s, r, execs, st.end-st.key.start)
		setAsideIn(&u, aside, st.stageTotals)
		a := sizing.Advise(s, execs)
		sizing.RightSize(&a, s, r, u, execs, nil)
		var xs []sparkapi.Executor
		for _, id := range sortedKeys(st.executors, compareExecutorIDs) {
			xs = append(xs, st.executors[id].Executor)
		}
		return u, a, reconcile(xs, *st.stageTotals, stream, aside)
	}
	u0, a0, r0 := account(genuine())
	if len(u0.SetAside) != 0 || r0.Verdict == ReconcileAboveSpark || u0.CPUFrom != "tasks" {
		t.Fatalf("genuine: set aside %v, verdict %s, CPU from %q", u0.SetAside, r0.Verdict, u0.CPUFrom)
	}
	forged := genuine()
	forged["1"].Sums["cpuTime.count"] = 1e13
	forged["1"].Peak["ProcessTreeJVMRSSMemory"] = 60 << 30
	u, a, rec := account(forged)
	if rec.Verdict != ReconcileAboveSpark || !slices.Equal(rec.Above, []string{"1"}) {
		t.Errorf("verdict %s above %v: %s", rec.Verdict, rec.Above, rec.Text)
	}
	if len(u.SetAside) != 1 || !strings.HasPrefix(u.SetAside[0], "process 1: cpu_time_ns 1e+13") {
		t.Errorf("set aside %q", u.SetAside)
	}
	// Task times are Spark's own, over every task.
	if u.CPUFrom != "stages" || u.TaskCPUSeconds != 600 || u.TaskRunSeconds != 780 {
		t.Errorf("CPU from %q: %v s CPU, %v s run; want stages, 600 and 780", u.CPUFrom, u.TaskCPUSeconds, u.TaskRunSeconds)
	}
	if u.PeakRSS != u0.PeakRSS {
		t.Errorf("peak RSS %d, want Spark's %d", u.PeakRSS, u0.PeakRSS)
	}
	if !slices.Equal(recommendedOf(a), recommendedOf(a0)) {
		t.Errorf("advice %v, want %v as without the forged lines", recommendedOf(a), recommendedOf(a0))
	}
	// Without Spark's whole stage list, the task times are unknown.
	st.stageTotals = &stageTotals{}
	st.stageTotals.add(&sparkapi.Stage{StageID: 3})
	u, _, _ = account(forged)
	if u.CPUFrom != "" || u.TaskCPUSeconds != 0 || !slices.ContainsFunc(u.Notes, func(n string) bool { return strings.HasPrefix(n, "CPU utilisation unknown") }) {
		t.Errorf("without the stage list: CPU from %q, %v s, notes %q", u.CPUFrom, u.TaskCPUSeconds, u.Notes)
	}
}

func recommendedOf(a sizing.Advice) []string {
	var out []string
	for _, r := range a.Recommendations {
		out = append(out, r.Property+"="+r.ValueString())
	}
	return out
}

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
				stream := streams[st.metricsKey]
				if len(stream) < 3 {
					t.Fatalf("%s: stream of %d processes", name, len(stream))
				}
				_, aside := screen(st, stream, last[st.metricsKey], true)
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
func realStream(t *testing.T, dir, file string) (map[string]map[string]ProcessTotals, map[string]int64) {
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
	out, last := map[string]map[string]ProcessTotals{}, map[string]int64{}
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
			is := func(m spark.Metric) bool { return StreamKey(m) == meas }
			counter, gauge := slices.ContainsFunc(StreamCounters, is), slices.ContainsFunc(StreamGauges, is)
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
				out[app] = map[string]ProcessTotals{}
			}
			p, ok := out[app][process]
			if !ok {
				p = ProcessTotals{Sums: map[string]float64{}, Peak: map[string]float64{}, Mean: map[string]float64{}}
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
