package accounting

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/sizing"
	"github.com/sparkpulse/sparkpulse/sparkapi"
)

// screenApp is an ended application of 4g executors with two cores each,
// run from t0 for 10 minutes; executor 2 was killed after 5 minutes.
func screenApp() *Attempt {
	x := func(id string, removed time.Time, reason string) sparkapi.Executor {
		e := sparkapi.Executor{ID: id, TotalCores: 2, AddTime: sparkapi.OptDate(at(0)), CompletedTasks: 100,
			TotalDuration: 400_000, TotalGCTime: 9_000, TotalInputBytes: 5 << 30, TotalShuffleRead: 1 << 30, TotalShuffleWrite: 1 << 30,
			// As Spark 3+ lists them: every gauge, 0 where none was seen.
			PeakMemoryMetrics: map[string]int64{"ProcessTreeJVMRSSMemory": 3 << 30, "JVMHeapMemory": 2 << 30,
				"ProcessTreePythonRSSMemory": 0, "ProcessTreeOtherRSSMemory": 0}}
		if !removed.IsZero() {
			e.RemoveTime, e.RemoveReason = sparkapi.OptDate(removed), reason
		}
		return e
	}
	return &Attempt{
		StartMs:    ms(at(0)),
		Completed:  true,
		Properties: map[string]string{"spark.master": "yarn", "spark.executor.memory": "4g", "spark.executor.cores": "2"},
		Executors: []sparkapi.Executor{
			x("1", time.Time{}, ""),
			x("2", at(300), "Container killed by YARN for exceeding physical memory limits. 4.6 GB of 4.4 GB physical memory used."),
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
			Peak:     map[string]float64{"ProcessTreeJVMRSSMemory": 3 << 30, "JVMHeapMemory": 2 << 30},
			Mean:     map[string]float64{"ProcessTreeJVMRSSMemory": 2 << 30, "JVMHeapMemory": 1 << 30},
			TreePeak: 3 << 30,
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
			[]string{"1:ProcessTreeJVMRSSMemory"}, nil, "ProcessTreeJVMRSSMemory peak 60.0 GiB > 10.0 GiB it could hold"},
		{"a peak beyond the container, running", false, func(s map[string]ProcessTotals) { s["1"].Peak["ProcessTreeJVMRSSMemory"] = 60 << 30 },
			[]string{"1:ProcessTreeJVMRSSMemory"}, nil, "> 10.0 GiB it could hold"},
		// Spark keeps peaks only of polls made while a stage runs: the
		// stream's may be well above them (real Spark's heap, by 1.58
		// times on YARN): no bound (the usage says who saw the peak).
		{"a peak above Spark's, within the container", true, func(s map[string]ProcessTotals) { s["1"].Peak["ProcessTreeJVMRSSMemory"] = 4 << 30 },
			nil, nil, ""},
		{"a heap far above Spark's, within the heap", true, func(s map[string]ProcessTotals) { s["1"].Peak["JVMHeapMemory"] = 3.5 * (1 << 30) },
			nil, nil, ""},
		// Python workers keep memory after their tasks end, which
		// Spark's peaks miss: not bound by them, but the container holds
		// the whole tree.
		{"Python workers above Spark's, within the container", true, func(s map[string]ProcessTotals) { s["1"].Peak["ProcessTreePythonRSSMemory"] = 1 << 30 },
			nil, nil, ""},
		{"the process tree beyond twice YARN's limit", true, func(s map[string]ProcessTotals) { s["1"].Peak["ProcessTreePythonRSSMemory"] = 8 << 30 },
			[]string{"1:ProcessTreeJVMRSSMemory", "1:ProcessTreePythonRSSMemory"}, nil, "process 1: resident memory peak 11.0 GiB > 10.0 GiB it could hold"},
		// Executor 2 was killed for its memory: seen at 4.6 GB of 4.4.
		{"a killed executor's last peak", true, func(s map[string]ProcessTotals) { s["2"].Peak["ProcessTreeJVMRSSMemory"] = 4.6e9 },
			nil, nil, ""},
		// On YARN a process tree lives over its limit until the
		// NodeManager's check after next, and over twice it not at all:
		// YARN's own message once read "1.4 GB of 1 GB". The limit is
		// the container rounded up to a GiB (4.4 GiB: 5 GiB), or the one
		// a kill message states (executor 2's 4.4 GB).
		{"a peak over the container, before YARN's kill", true, func(s map[string]ProcessTotals) { s["2"].Peak["ProcessTreeJVMRSSMemory"] = 4.9e9 },
			nil, nil, ""},
		// YARN's kill states what the process tree used: 4.6 GB.
		{"a killed executor's resident memory above what YARN measured", true, func(s map[string]ProcessTotals) {
			s["2"].Peak["ProcessTreePythonRSSMemory"] = 2 << 30
		}, []string{"2:ProcessTreeJVMRSSMemory", "2:ProcessTreePythonRSSMemory"}, nil, "process 2: resident memory 5.0 GiB > 4.6 GiB, what YARN measured at its kill"},
		{"Python's peak beyond twice YARN's limit", true, func(s map[string]ProcessTotals) { s["2"].Peak["ProcessTreePythonRSSMemory"] = 9 << 30 },
			[]string{"2:ProcessTreePythonRSSMemory"}, nil, "> 8.8 GiB it could hold"},
		{"a heap above the heap", true, func(s map[string]ProcessTotals) { s["2"].Peak["JVMHeapMemory"] = 5 << 30 },
			[]string{"2:JVMHeapMemory"}, nil, "JVMHeapMemory peak 5.0 GiB > 4.0 GiB it could hold"},
		{"a negative peak", true, func(s map[string]ProcessTotals) { s["1"].Peak["JVMHeapMemory"] = -1 },
			[]string{"1:JVMHeapMemory"}, nil, "no amount of memory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, stream := screenApp(), genuine()
			tc.change(stream)
			before, _ := json.Marshal(stream)
			kept, aside := Screen(st.Properties, RunCPUs{0: 1}, st.Executors, stream, end, tc.final)
			if after, _ := json.Marshal(stream); string(after) != string(before) {
				t.Error("screen changed the stream it was given")
			}
			var got, above []string
			var why string
			for _, a := range aside {
				why += a.String() + "; "
				if a.AboveSpark {
					above = append(above, a.Process)
				}
				if a.Counters {
					got = append(got, a.Process+":counters")
					if kept[a.Process].Sums != nil {
						t.Errorf("process %s: counters set aside but kept", a.Process)
					}
					continue
				}
				for _, m := range StreamGauges {
					g := StreamKey(m)
					if _, ok := kept[a.Process].Peak[g]; !ok && stream[a.Process].Peak[g] != 0 {
						got = append(got, a.Process+":"+g)
						if _, ok := kept[a.Process].Mean[g]; ok {
							t.Errorf("process %s: %s's peak set aside but not its mean", a.Process, g)
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
				// The tree's one-moment peak goes with any of its parts.
				want := p.TreePeak
				if slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, id+":ProcessTree") }) {
					want = 0
				}
				if kept[id].TreePeak != want {
					t.Errorf("process %s: tree peak %v kept, want %v", id, kept[id].TreePeak, want)
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
	st.Properties["spark.master"] = "spark://master:7077"
	st.Executors[0].PeakMemoryMetrics = nil // Spark lists no peaks (metrics off): nothing bounds it
	stream["1"].Peak["ProcessTreeJVMRSSMemory"] = 60 << 30
	if _, aside := Screen(st.Properties, RunCPUs{0: 1}, st.Executors, stream, ms(at(600)), true); len(aside) != 0 {
		t.Errorf("standalone: set aside %v", aside)
	}
	// Spark's own peak is no bound either: its peaks miss polls between
	// stages (the usage says the figure is the stream's alone).
	st = screenApp()
	st.Properties["spark.master"] = "spark://master:7077"
	if _, aside := Screen(st.Properties, RunCPUs{0: 1}, st.Executors, stream, ms(at(600)), true); len(aside) != 0 {
		t.Errorf("standalone, Spark's peak listed: set aside %v", aside)
	}
	st, stream = screenApp(), genuine()
	st.Executors[1].PeakMemoryMetrics["JVMHeapMemory"] = 5 << 30
	stream["2"].Peak["JVMHeapMemory"] = 5 << 30
	stream["1"].Peak["JVMHeapMemory"] = 5 << 30
	_, aside := Screen(st.Properties, RunCPUs{0: 1}, st.Executors, stream, ms(at(600)), true)
	if len(aside) != 1 || aside[0].Process != "1" {
		t.Errorf("heap above the setting: set aside %v, want executor 1's only", aside)
	}
}

// TestScreenedAccounting: a forged counter and a forged gauge change
// neither the accounting nor the advice; the usage says what was set
// aside and the reconciliation's verdict is above_spark.
func TestScreenedAccounting(t *testing.T) {
	st := screenApp()
	end := ms(at(600))
	st.StageTotals = &StageTotals{}
	st.StageTotals.Add(&sparkapi.Stage{StageID: 0, ExecutorCPUTime: 600e9, ExecutorRunTime: 780_000})
	s, _ := sizing.FromProperties(st.Properties)
	r, _ := sizing.ResourcesFromProperties(st.Properties)
	account := func(stream map[string]ProcessTotals) (sizing.Usage, sizing.Advice, Reconciliation) {
		kept, aside := Screen(st.Properties, RunCPUs{0: 1}, st.Executors, stream, end, true)
		execs := SizingExecutors(st.Executors, kept, end)
		u := sizing.Account(s, r, execs, end-st.StartMs)
		SetAsideIn(&u, aside, st.StageTotals)
		a := sizing.Advise(s, execs)
		sizing.RightSize(&a, s, r, u, execs, nil)
		return u, a, Reconcile(st.Executors, *st.StageTotals, stream, aside)
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
	st.StageTotals = &StageTotals{}
	st.StageTotals.Add(&sparkapi.Stage{StageID: 3})
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

// Kubernetes holds a container's memory with its cgroup: resident memory
// is plausible up to the container plus 10 %, where on YARN it may reach
// twice the limit YARN enforces before the NodeManager's check kills it.
func TestScreenByClusterManager(t *testing.T) {
	for _, tc := range []struct {
		master string
		rss    float64
		aside  bool
	}{
		{"yarn", 6 << 30, false},                      // 4.4 GiB asked, 5 GiB enforced: twice is 10 GiB (a NodeManager may not kill at all)
		{"yarn", 11 << 30, true},                      // over twice
		{"k8s://https://10.0.0.1:6443", 4.6e9, false}, // 4.3 GiB: within 10 %
		{"k8s://https://10.0.0.1:6443", 6 << 30, true},
		{"spark://10.0.0.1:7077", 60 << 30, false}, // standalone: no container
	} {
		st, stream := screenApp(), genuine()
		st.Properties["spark.master"] = tc.master
		st.Executors[0].PeakMemoryMetrics = nil // Spark lists no peaks: the cluster manager's bound alone
		stream["1"].Peak["ProcessTreeJVMRSSMemory"] = tc.rss
		_, aside := Screen(st.Properties, RunCPUs{0: 1}, st.Executors, stream, ms(at(600)), true)
		if got := len(aside) > 0; got != tc.aside {
			t.Errorf("%s, resident %.3g: set aside %v, want %v: %v", tc.master, tc.rss, aside, tc.aside, aside)
		}
	}
}

// The executors' task CPU and run time are never above Spark's stage
// totals in a genuine stream: where a forged one makes them so with every
// process's figures plausible, the accounting takes Spark's and names
// what it set aside; where they are at or below Spark's, or the stage
// list is not whole, it keeps the stream's.
func TestWithinSparkTotals(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cpu, run  float64 // the stream's, executor 1 (executor 2 as genuine)
		dropped   bool    // Spark no longer lists every stage
		wantFrom  string
		wantCPU   float64
		wantAside string
	}{
		{"genuine", 300e9, 390_000, false, "tasks", 600, ""},
		{"short", 250e9, 390_000, false, "tasks", 550, ""},
		// A reset forged between two reports: the next counts whole, +14 %
		// of the CPU, within the executor's cores × life and task time.
		{"reset", 384e9, 390_000, false, "stages", 600, "the executors' task CPU 684.000 s > 600.000 s, Spark's stage totals over every task"},
		{"run", 300e9, 395_000, false, "stages", 600, "the executors' task run time 785.000 s > 780.000 s, Spark's stage totals over every task"},
		{"no whole stage list", 384e9, 390_000, true, "tasks", 684, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := screenApp()
			a.StageTotals = &StageTotals{}
			a.StageTotals.Add(&sparkapi.Stage{StageID: 0, ExecutorCPUTime: 600e9, ExecutorRunTime: 780_000})
			if tc.dropped {
				a.StageTotals.Add(&sparkapi.Stage{StageID: 3})
			}
			a.Stream = genuine()
			a.Stream["1"].Sums["cpuTime.count"], a.Stream["1"].Sums["runTime.count"] = tc.cpu, tc.run
			a.StreamRead = true
			res, err := Account(a, ms(at(600)))
			if err != nil {
				t.Fatal(err)
			}
			u := res.Usage
			aside := strings.Join(u.SetAside, "; ")
			if u.CPUFrom != tc.wantFrom || u.TaskCPUSeconds != tc.wantCPU || aside != tc.wantAside {
				t.Errorf("CPU from %q, %v s; set aside %q; want %q, %v s, %q", u.CPUFrom, u.TaskCPUSeconds, aside, tc.wantFrom, tc.wantCPU, tc.wantAside)
			}
		})
	}
}

// Where Spark lists no resident memory peak for the executor whose peak
// the usage reports, the usage says the figure is the stream's alone;
// where it lists one, it says nothing.
func TestPeakWitness(t *testing.T) {
	for _, tc := range []struct {
		name   string
		listed bool
		peak   int64 // the stream's, executor 1
		want   string
	}{
		{"Spark lists the peak", true, 3.5 * (1 << 30), ""},
		{"Spark lists none", false, 3.5 * (1 << 30), "peak resident memory 3.5 GiB from the metrics stream alone: Spark lists none for executor 1"},
		{"Spark's own well below", true, 5 << 30, "peak resident memory 5.0 GiB from the metrics stream alone: Spark's own for executor 1 is 3.0 GiB"},
	} {
		a := screenApp()
		if !tc.listed {
			a.Executors[0].PeakMemoryMetrics = nil
		}
		a.Stream, a.StreamRead = genuine(), true
		a.Stream["1"].Peak["ProcessTreeJVMRSSMemory"] = float64(tc.peak)
		res, err := Account(a, ms(at(600)))
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for _, n := range res.Usage.Notes {
			if strings.HasPrefix(n, "peak resident memory") {
				got = n
			}
		}
		if got != tc.want || res.Usage.PeakRSS != tc.peak {
			t.Errorf("%s: note %q, peak %d; want %q", tc.name, got, res.Usage.PeakRSS, tc.want)
		}
	}
}

// Spark 4 counts a task's spark.task.cpus in its run time, and not in the
// executors' totalDuration (wall time): a run time up to cpus times
// Spark's total is genuine there, and on 3.5 it is not. The cores still
// bound it: tasks of 2 cpus on 2 cores run one at a time. An executor of
// another resource profile counts its profile's task cpus, not
// spark.task.cpus (profile: executor 1 in a profile of 2 task cpus).
func TestScreenTaskCPUs(t *testing.T) {
	for _, tc := range []struct {
		version, cpus string
		profile       bool
		runMs         float64
		why           string // "" when kept
	}{
		{"4.0.1", "1", true, 780_000, ""},
		{"3.5.9", "1", true, 780_000, "run_time_ms 780000 > 400000, Spark's total"},
		{"4.0.1", "2", true, 780_000, ""},
		// A task-only profile of 2 cpus (no executor resources): its tasks
		// ran on the default executors (executor 1), at 2 cpus on 4.x.
		{"4.0.1", "1", false, 780_000, "task-only"},
		{"3.5.9", "1", false, 780_000, "task-only: run_time_ms 780000 > 400000, Spark's total"},
		{"4.0.1", "2", false, 780_000, ""},
		{"4.3.0", "2", false, 780_000, ""},
		{"3.5.9", "2", false, 780_000, "run_time_ms 780000 > 400000, Spark's total"},
		{"4.0.1", "1", false, 780_000, "run_time_ms 780000 > 400000, Spark's total"},
		{"4.0.1", "2", false, 1_400_000, "run_time_ms 1.4e+06 > 1.32e+06, 2 cores for 10m0s"},
	} {
		st, stream := screenApp(), genuine()
		st.Properties["spark.task.cpus"] = tc.cpus
		stream["1"].Sums["runTime.count"] = tc.runMs
		cpus, _ := strconv.Atoi(tc.cpus)
		var profiles []sparkapi.ResourceProfile
		why := tc.why
		if w, ok := strings.CutPrefix(why, "task-only"); ok {
			why = strings.TrimPrefix(w, ": ")
			var p sparkapi.ResourceProfile
			if err := json.Unmarshal([]byte(`{"id": 2, "executorResources": {}, "taskResources": {"cpus": {"amount": 2.0}}}`), &p); err != nil {
				t.Fatal(err)
			}
			profiles = append(profiles, p)
		}
		if tc.profile {
			for i := range st.Executors {
				if st.Executors[i].ID == "1" {
					st.Executors[i].ResourceProfileID = 1
				}
			}
			var p sparkapi.ResourceProfile
			if err := json.Unmarshal([]byte(`{"id": 1, "taskResources": {"cpus": {"amount": 2.0}}}`), &p); err != nil {
				t.Fatal(err)
			}
			profiles = append(profiles, p)
		}
		_, aside := Screen(st.Properties, RunCPUsOf(tc.version, cpus, profiles), st.Executors, stream, ms(at(600)), true)
		var aw []string
		for _, a := range aside {
			aw = append(aw, a.Why...)
		}
		switch got := strings.Join(aw, "; "); {
		case why == "" && got != "":
			t.Errorf("Spark %s, task.cpus %s (%s), run time %g: set aside (%s)", tc.version, tc.cpus, tc.why, tc.runMs, got)
		case why != "" && !strings.Contains(got, why):
			t.Errorf("Spark %s, task.cpus %s (%s), run time %g: set aside %q, want %q", tc.version, tc.cpus, tc.why, tc.runMs, got, why)
		}
	}
}
