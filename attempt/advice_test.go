package attempt

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sparkpulse/sparkpulse/accounting"
	"github.com/sparkpulse/sparkpulse/realspark/recorded"
	"github.com/sparkpulse/sparkpulse/sizing"
	"github.com/sparkpulse/sparkpulse/sparkapi"
)

// The advice for the real Spark runs (testdata/spark-real, see package
// realspark), as spark_sizing and report give it: where executors exited
// with code 52 (out of heap) the heap rule fires, naming them; the one
// killed with code 137 in standalone mode is not read as a memory kill (no
// container finding for it: only a cluster manager's OOMKilled or YARN's
// memory-limit words say memory); nothing is taken back after either; and
// the run that lost no executor gets no heap or container advice from
// them.
func TestAdviceOfRealSpark(t *testing.T) {
	eachRealApp(t, func(t *testing.T, name string, st *State, stream map[string]accounting.ProcessTotals, last int64) {
		st.Stream = stream
		if st.End <= 0 {
			// Recorded from the live UI before the end: its last report.
			st.End = last
		}
		a, res, err := Account(st, st.End, true)
		if err != nil {
			t.Fatal(err)
		}
		u := res.Usage
		heap := map[string]bool{}
		for _, fd := range a.Findings {
			switch fd.Rule {
			case "heap":
				heap[fd.Executor] = true
			case "container":
				if strings.Contains(fd.Text, "removed for exceeding its memory limit") {
					t.Errorf("%s: %s", name, fd.Text)
				}
			}
		}
		var oom []string
		for _, id := range slices.SortedFunc(maps.Keys(st.Executors), accounting.CompareExecutorIDs) {
			x := st.Executors[id].Executor
			if sizing.RemoveKind(x.RemoveReason) == sizing.RemovedHeapOOM {
				oom = append(oom, id)
			}
			if x.RemoveReason == "Command exited with code 137" && sizing.RemoveKind(x.RemoveReason) != sizing.RemovedKilled {
				t.Errorf("%s: executor %s (%q) read as %s", name, id, x.RemoveReason, sizing.RemoveKind(x.RemoveReason))
			}
		}
		rules := map[string]bool{}
		for _, r := range a.Recommendations {
			rules[r.Rule] = true
		}
		switch name {
		case "failures":
			if len(oom) == 0 || !rules["heap"] || rules["shrink"] {
				t.Errorf("%s: out of heap %v, findings %+v, recommended %+v", name, oom, a.Findings, a.Recommendations)
			}
			for _, id := range oom {
				if !heap[id] {
					t.Errorf("%s: executor %s exited out of heap; heap findings %v", name, id, heap)
				}
			}
		case "main":
			if len(oom) > 0 || rules["heap"] || rules["container"] {
				t.Errorf("%s: out of heap %v, recommended %+v", name, oom, a.Recommendations)
			}
		}
		if u.SlotOccupancy == nil {
			t.Fatalf("%s: slot occupancy unknown: %+v (stream of %d processes under %q)", name, u, len(st.Stream), st.MetricsKey)
		}
		// These PySpark runs kept their task slots busy (≥ 30 %)
		// while their tasks' CPU was low (Python workers, sleeps,
		// I/O): the idle rule reads the slots and stays quiet. At a
		// scale where it applies (an hour of core-seconds, every
		// ratio kept), it stays quiet; read by CPU, it would cut
		// the executors.
		if *u.SlotOccupancy < 0.3 || u.CPUUtilisation >= 0.3 {
			t.Fatalf("%s: slots %v, CPU %v: not the case this test is for", name, *u.SlotOccupancy, u.CPUUtilisation)
		}
		s, _ := sizing.FromProperties(st.Properties)
		r, _ := sizing.ResourcesFromProperties(st.Properties)
		// The runs use dynamic allocation, under which the rule is
		// quiet anyway; as with a fixed number of executors:
		r.DynamicAllocation = false
		k := 2 * 3600 / u.ExecutorCoreSeconds
		big := u
		big.ExecutorCoreSeconds, big.SlotCoreSeconds, big.TaskRunSeconds, big.TaskCPUSeconds, big.DurationMs = k*u.ExecutorCoreSeconds, k*u.SlotCoreSeconds, k*u.TaskRunSeconds, k*u.TaskCPUSeconds, int64(k*float64(u.DurationMs))
		occ := *u.SlotOccupancy
		big.SlotOccupancy = &occ
		var scaled sizing.Advice
		sizing.RightSize(&scaled, s, r, big, nil, nil)
		byCPU := big // the rule as it read CPU: task CPU for the slots' busy time
		cpu := u.CPUUtilisation
		byCPU.SlotOccupancy, byCPU.TaskRunSeconds = &cpu, big.TaskCPUSeconds
		var wrong sizing.Advice
		sizing.RightSize(&wrong, s, r, byCPU, nil, nil)
		if hasRule(scaled.Recommendations, "idle") || !hasRule(wrong.Recommendations, "idle") {
			t.Errorf("%s: at scale, by slots %+v; by CPU %+v", name, scaled.Recommendations, wrong.Recommendations)
		}
		t.Logf("%s: %d findings, recommended %v, slots %.0f %%, CPU %.0f %%", name, len(a.Findings),
			slices.Collect(func(yield func(string) bool) {
				for _, r := range a.Recommendations {
					if !yield(r.Property + "=" + r.ValueString()) {
						return
					}
				}
			}), 100**u.SlotOccupancy, 100*u.CPUUtilisation)
	})
}

// recordedApp is a recorded application's state as the annotator holds it
// once it has ended and been read in full (its end, when the live UI was
// recorded before it, is the caller's to set).
func recordedApp(t *testing.T, dir string) *State {
	t.Helper()
	var app sparkapi.Application
	recorded.ReadFile(t, filepath.Join(dir, "application.json"), &app)
	att := app.Attempts[0]
	st := NewState(Key{app.ID, att.StartMs()})
	st.Completed, st.End = true, att.EndMs()
	var env sparkapi.Environment
	recorded.ReadFile(t, filepath.Join(dir, "environment.json"), &env)
	st.Properties = env.Properties()
	st.Hadoop = env.HadoopSubset(sizing.YARNAllocationKeys)
	st.Profiles = env.ResourceProfiles
	st.MetricsKey = MetricsKey(app.ID, st.Properties)
	var execs []sparkapi.Executor
	recorded.ReadFile(t, filepath.Join(dir, "allexecutors.json"), &execs)
	for _, x := range execs {
		st.Executors[x.ID] = &Executor{x}
	}
	var stages []sparkapi.Stage
	recorded.ReadFile(t, filepath.Join(dir, "stages.json"), &stages)
	var totals accounting.StageTotals
	for _, s := range stages {
		st.putStage(s)
		totals.Add(&s)
	}
	st.StageTotals = &totals
	var jobs []sparkapi.Job
	recorded.ReadFile(t, filepath.Join(dir, "jobs.json"), &jobs)
	for _, j := range jobs {
		st.putJob(j)
	}
	return st
}

func hasRule(recs []sizing.Setting, rule string) bool {
	return slices.ContainsFunc(recs, func(r sizing.Setting) bool { return r.Rule == rule })
}

// TestRecordedYARNHeld: on the suite's real YARN, what YARN says it held
// for each application's containers (its memorySeconds, from each
// container's allocation) is never less than Spark's view, which counts
// each container as YARN's scheduler rounded it (512 MiB minimum
// allocation there: the 896 MiB executor is a 1 GiB container) from the
// executor's registration.
func TestRecordedYARNHeld(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join("..", "testdata", "spark-real", "*", "yarn", "*", "app.json"))
	if len(dirs) < 4 {
		t.Fatalf("recorded YARN applications: %v", dirs)
	}
	for _, f := range dirs {
		dir := filepath.Dir(f)
		var meta struct {
			YARN struct{ MemorySeconds, FinishedTime int64 } `json:"yarn"`
		}
		recorded.ReadFile(t, f, &meta)
		st := recordedApp(t, dir)
		if st.End <= 0 {
			// Recorded from the live UI before its end: YARN's end,
			// the latest Spark's view could count to.
			st.End = meta.YARN.FinishedTime
		}
		_, res, err := Account(st, st.End, false)
		if err != nil {
			t.Fatal(err)
		}
		u, r := res.Usage, res.Resources
		spark := u.ExecutorMemoryByteSeconds + u.DriverMemoryByteSeconds
		yarn := float64(meta.YARN.MemorySeconds) * (1 << 20)
		if r.YARNMemoryStep != 512<<20 || yarn < 0.999*spark-(1<<20) {
			t.Errorf("%s: YARN held %.0f MB-s, Spark's view (rounded to %d MiB) %.0f", dir, yarn/(1<<20), r.YARNMemoryStep>>20, spark/(1<<20))
		}
		t.Logf("%s: YARN held %.2f × the memory Spark's view counts", dir, yarn/spark)
	}
}
