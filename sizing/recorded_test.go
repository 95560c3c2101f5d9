package sizing_test

import (
	"path/filepath"
	"testing"

	"github.com/sparkpulse/sparkpulse/accounting"
	"github.com/sparkpulse/sparkpulse/realspark/recorded"
	"github.com/sparkpulse/sparkpulse/sizing"
	"github.com/sparkpulse/sparkpulse/sparkapi"
)

// Every executor that real YARN and a real standalone cluster removed
// while the real-Spark suite ran (testdata/spark-real/<version>/yarn,
// …/standalone) reads as the kind its cause gives: the cause is what the
// test did (a Python worker over its container, executors out of heap, a
// NodeManager stopped, a second application's preemption, dynamic
// allocation's release, a worker killed), and the reason is Spark's and
// the cluster manager's own words.
func TestRecordedRemovals(t *testing.T) {
	apps, err := recorded.ClusterApps(filepath.Join("..", "testdata", "spark-real"), 8)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, a := range apps {
		var env sparkapi.Environment
		if err := a.Read("environment", &env); err != nil {
			t.Fatal(err)
		}
		s, err := sizing.FromProperties(env.Properties())
		if err != nil {
			t.Fatalf("%s: %v", a.Dir, err)
		}
		var execs []sparkapi.Executor
		if err := a.Read("allexecutors", &execs); err != nil {
			t.Fatal(err)
		}
		for _, x := range execs {
			want := a.Removed[x.ID]
			if x.RemoveReason == "" {
				if want != "" {
					t.Errorf("%s: executor %s caused to go (%s) and not removed", a.Dir, x.ID, want)
				}
				continue
			}
			if got := s.RemoveKind(x.RemoveReason); got != want {
				t.Errorf("%s: executor %s: %q reads as %s, the test caused %s", a.Dir, x.ID, x.RemoveReason, got, want)
			}
			kinds[a.Manager+" "+want]++
		}
	}
	t.Logf("removals by cluster manager and kind: %v", kinds)
	for _, k := range []string{"yarn " + sizing.RemovedContainerOOM, "yarn " + sizing.RemovedHeapOOM, "yarn " + sizing.RemovedLost,
		"yarn " + sizing.RemovedPreempted, "yarn " + sizing.RemovedReleased, "standalone " + sizing.RemovedLost} {
		if kinds[k] == 0 {
			t.Errorf("no recorded removal of %s", k)
		}
	}
}

// The advice on the recorded YARN application whose Python worker YARN
// killed, from Spark's answers alone: a container whose 90 % holds what
// YARN measured as it killed it, however little of it a heartbeat saw;
// and more heap, after the executors that ran out of it.
func TestRecordedYARNAdvice(t *testing.T) {
	apps, err := recorded.ClusterApps(filepath.Join("..", "testdata", "spark-real"), 8)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, a := range apps {
		if a.Manager != "yarn" || filepath.Base(a.Dir) != "yarn" {
			continue
		}
		seen++
		var env sparkapi.Environment
		var execs []sparkapi.Executor
		if err := a.Read("environment", &env); err != nil {
			t.Fatal(err)
		}
		if err := a.Read("allexecutors", &execs); err != nil {
			t.Fatal(err)
		}
		s, err := sizing.FromProperties(env.Properties())
		if err != nil {
			t.Fatal(err)
		}
		var used int64
		var xs []sizing.Executor
		for i := range execs {
			xs = append(xs, accounting.ExecutorSizing(&execs[i]))
			if a.Removed[execs[i].ID] == sizing.RemovedContainerOOM {
				used = max(used, sizing.YARNUsed(execs[i].RemoveReason))
			}
		}
		if used == 0 {
			t.Fatalf("%s: no YARN kill stating what it measured", a.Dir)
		}
		adv := sizing.Advise(s, xs)
		got := map[string]int64{}
		for _, r := range adv.Recommendations {
			got[r.Property] = r.Value
		}
		if c := s.Heap + got["spark.executor.memoryOverhead"] + s.PySpark + s.OffHeap; float64(used) > 0.9*float64(c) {
			t.Errorf("%s: advised container %d bytes; YARN measured %d at the kill, over 90 %% of it: %+v", a.Dir, c, used, adv.Recommendations)
		}
		if got["spark.executor.memory"] <= s.Heap {
			t.Errorf("%s: no more heap advised after executors out of it: %+v", a.Dir, adv.Recommendations)
		}
	}
	if seen < 2 {
		t.Errorf("%d recorded YARN client applications, want one per Spark version", seen)
	}
}
