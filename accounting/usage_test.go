package accounting

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/sizing"
	"github.com/sparkpulse/sparkpulse/sparkapi"
)

// An executor the driver released while the application ran is marked so
// for the idle-timeout rule; one removed otherwise, or at the end, is not.
func TestSizingExecutorsReleased(t *testing.T) {
	exec := func(id string, removed time.Time, reason string) sparkapi.Executor {
		return sparkapi.Executor{ID: id, AddTime: sparkapi.OptDate(at(0)), RemoveTime: sparkapi.OptDate(removed), RemoveReason: reason}
	}
	execs := []sparkapi.Executor{
		exec("1", at(100), "Executor killed by driver."),
		exec("2", at(100), "Container killed by YARN for exceeding physical memory limits."),
		exec("3", at(600), "Executor killed by driver."),
		exec("4", time.Time{}, ""),
		// Dynamic allocation with decommissioning releases this way; a
		// worker's decommissioning is no release.
		exec("5", at(100), "Executor decommission: spark scale down"),
		exec("6", at(100), "Executor decommission: worker decommissioned"),
	}
	got := map[string]bool{}
	for _, e := range SizingExecutors(execs, nil, ms(at(600))) {
		got[e.ID] = e.Released
	}
	if want := map[string]bool{"1": true, "2": false, "3": false, "4": false, "5": true, "6": false}; !maps.Equal(got, want) {
		t.Errorf("released %v, want %v", got, want)
	}
}

// An executor lives from its addition to its removal or the end, and
// one YARN started while the driver was stopping, registered after the
// application's end (seen on a real YARN), held nothing in Spark's view.
func TestSizingExecutorsAlive(t *testing.T) {
	exec := func(id string, added, removed time.Time) sparkapi.Executor {
		return sparkapi.Executor{ID: id, TotalCores: 1, AddTime: sparkapi.OptDate(added), RemoveTime: sparkapi.OptDate(removed)}
	}
	execs := []sparkapi.Executor{
		exec("1", at(10), at(100)),
		exec("2", at(10), time.Time{}),
		exec("3", at(10), at(700)),
		exec("4", at(601), time.Time{}),
		exec("5", at(602), at(603)),
	}
	got := map[string]int64{}
	for _, e := range SizingExecutors(execs, nil, ms(at(600))) {
		got[e.ID] = e.AliveMs
	}
	if want := map[string]int64{"1": 90_000, "2": 590_000, "3": 590_000, "4": 0, "5": 0}; !maps.Equal(got, want) {
		t.Errorf("alive %v, want %v", got, want)
	}
}

// The cores an application holds at a time: its executors added by then
// and not yet removed, the driver's left out.
func TestCoresHeld(t *testing.T) {
	var execs []sparkapi.Executor
	add := func(id string, cores int, added, removed int64) {
		x := sparkapi.Executor{ID: id, TotalCores: cores, AddTime: sparkapi.OptDate(time.UnixMilli(added))}
		if removed > 0 {
			x.RemoveTime = sparkapi.OptDate(time.UnixMilli(removed))
		}
		execs = append(execs, x)
	}
	add("driver", 2, 1, 0)
	add("1", 4, 1_000, 100_000)
	add("2", 2, 50_000, 0)
	add("3", 8, 200_000, 0)
	for ms, want := range map[int64]int{500: 0, 1_000: 4, 50_000: 6, 99_999: 6, 100_000: 2, 150_000: 2, 200_000: 10} {
		if got := CoresHeld(execs, ms); got != want {
			t.Errorf("at %d ms: %d cores, want %d", ms, got, want)
		}
	}
}

// Spark's answers, each within its bounds, are refused together where no
// cluster could hold them; the largest real shapes are not.
func TestAnyCluster(t *testing.T) {
	y2000 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	attempt := func(start time.Time, execs, cores int, memory string, endMs int64) *Attempt {
		a := &Attempt{StartMs: ms(start), Completed: true,
			Properties: map[string]string{"spark.executor.memory": memory, "spark.executor.cores": fmt.Sprint(cores)}}
		for i := range execs {
			a.Executors = append(a.Executors, sparkapi.Executor{ID: fmt.Sprint(i + 1), TotalCores: cores, AddTime: sparkapi.OptDate(start)})
		}
		return a
	}
	day := int64(86_400_000)
	for _, c := range []struct {
		name string
		a    *Attempt
		end  int64
		want bool // refused
	}{
		{"200 executors of 65 536 cores since 2000", attempt(y2000, 200, 65536, "4g", ms(t0)), ms(t0), true},
		{"200 executors of 65 536 cores for a day", attempt(t0, 200, 65536, "4g", 0), ms(t0) + day, true},
		{"200 executors of 1 PiB for an hour", attempt(t0, 200, 4, "1048576g", 0), ms(t0) + 3_600_000, true},
		{"a run since 2000", attempt(y2000, 2, 4, "4g", 0), ms(t0), true},
		{"10 000 executors of 8 cores and 64 GiB for a day", attempt(t0, 10_000, 8, "64g", 0), ms(t0) + day, false},
		{"a streaming application of 300 days", attempt(t0, 50, 4, "8g", 0), ms(t0) + 300*day, false},
	} {
		_, err := Account(c.a, c.end)
		if c.want && !errors.Is(err, ErrNoCluster) || !c.want && err != nil {
			t.Errorf("%s: %v, want refused %v", c.name, err, c.want)
		}
		if _, err := Estimate(c.a, nil, c.end); c.want && !errors.Is(err, ErrNoCluster) || !c.want && err != nil {
			t.Errorf("%s, running: %v, want refused %v", c.name, err, c.want)
		}
	}
}

// An executor's GPUs are the addresses Spark gave it, and its task slots
// Spark's maxTasks, as the REST API lists them (ExecutorSummary of
// Spark 3.x and 4.x, resources as ResourceInformation).
func TestExecutorSizingResources(t *testing.T) {
	var xs []sparkapi.Executor
	if err := json.Unmarshal([]byte(`[
	  {"id": "1", "totalCores": 4, "maxTasks": 2, "resourceProfileId": 1,
	   "resources": {"gpu": {"name": "gpu", "addresses": ["0", "1"]}}},
	  {"id": "2", "totalCores": 4, "maxTasks": 4, "resourceProfileId": 0, "resources": {}}
	]`), &xs); err != nil {
		t.Fatal(err)
	}
	got := []sizing.Executor{ExecutorSizing(&xs[0]), ExecutorSizing(&xs[1])}
	if g := got[0]; g.GPUs != 2 || g.Slots != 2 || g.ResourceProfile != 1 || g.Cores != 4 {
		t.Errorf("with GPUs: %+v", g)
	}
	if g := got[1]; g.GPUs != 0 || g.Slots != 4 || g.ResourceProfile != 0 {
		t.Errorf("without: %+v", g)
	}
}

// Executors of a resource profile other than the default are held at
// their profile's container, with its task cpus, as the environment's
// resourceProfiles (Spark 3.1+) list them; their memory is left out of
// the default profile's figures and rules.
func TestProfileLimits(t *testing.T) {
	var env sparkapi.Environment
	if err := json.Unmarshal([]byte(`{"resourceProfiles": [
	  {"id": 0, "executorResources": {"memory": {"resourceName": "memory", "amount": 4096}}, "taskResources": {"cpus": {"resourceName": "cpus", "amount": 1.0}}},
	  {"id": 1, "executorResources": {"cores": {"resourceName": "cores", "amount": 8}, "memory": {"resourceName": "memory", "amount": 16384},
	     "memoryOverhead": {"resourceName": "memoryOverhead", "amount": 2048}, "gpu": {"resourceName": "gpu", "amount": 1}},
	   "taskResources": {"cpus": {"resourceName": "cpus", "amount": 2.0}, "gpu": {"resourceName": "gpu", "amount": 1.0}}},
	  {"id": 2, "executorResources": {"memory": {"resourceName": "memory", "amount": 8192}}, "taskResources": {}}
	]}`), &env); err != nil {
		t.Fatal(err)
	}
	s, err := sizing.FromProperties(map[string]string{"spark.executor.memory": "4g"})
	if err != nil {
		t.Fatal(err)
	}
	execs := []sizing.Executor{{ID: "1", Cores: 4}, {ID: "2", Cores: 8, ResourceProfile: 1}, {ID: "3", Cores: 4, ResourceProfile: 2}, {ID: "4", Cores: 4, ResourceProfile: 3}}
	ProfileLimits(execs, env.ResourceProfiles, s, "4.0.1")
	got := []int64{execs[0].Container, execs[1].Container, execs[2].Container, execs[3].Container}
	// Profile 1: 16g + 2g set; profile 2: 8g + Spark's default 10 %
	// (819.2 MiB); profile 3 is not listed: the default's settings.
	if want := []int64{0, 18 << 30, 8<<30 + 858993459, 0}; !slices.Equal(got, want) || execs[1].TaskCPUs != 2 || execs[2].TaskCPUs != 0 {
		t.Errorf("containers %v, want %v; task cpus %d, %d", got, want, execs[1].TaskCPUs, execs[2].TaskCPUs)
	}
	// An hour of each: the byte-seconds count each container.
	for i := range execs {
		execs[i].AliveMs = 3_600_000
	}
	r, _ := sizing.ResourcesFromProperties(nil)
	u := sizing.Account(s, r, execs, 3_600_000)
	if want := float64(2*s.Container()+18<<30+8<<30+858993459) * 3600; u.ExecutorMemoryByteSeconds != want {
		t.Errorf("byte-seconds %v, want %v", u.ExecutorMemoryByteSeconds, want)
	}
}

// Spark 4 multiplies a task's run time by its profile's task cpus: an
// executor of a profile of 2 task cpus reports twice its wall time there,
// once on 3.5. Both read the same slot occupancy.
func TestProfileRunTime(t *testing.T) {
	var env sparkapi.Environment
	if err := json.Unmarshal([]byte(`{"resourceProfiles": [{"id": 1, "executorResources": {"cores": {"amount": 8}},
	   "taskResources": {"cpus": {"amount": 2.0}}}]}`), &env); err != nil {
		t.Fatal(err)
	}
	s, err := sizing.FromProperties(nil)
	if err != nil {
		t.Fatal(err)
	}
	occupancy := map[string]float64{}
	for _, tc := range []struct {
		version string
		factor  int64 // what Spark's run time counts of the profile's 2 cpus
	}{{"3.5.9", 1}, {"4.0.1", 2}} {
		// An hour each: 4 cores of the default profile, one task all the
		// time; 8 cores of profile 1 (4 slots of 2), one task all the time.
		execs := []sizing.Executor{{ID: "1", Cores: 4, AliveMs: 3_600_000, RunMs: 3_600_000, CPUNs: 3e12},
			{ID: "2", Cores: 8, ResourceProfile: 1, AliveMs: 3_600_000, RunMs: 3_600_000 * tc.factor, CPUNs: 3e12}}
		ProfileLimits(execs, env.ResourceProfiles, s, tc.version)
		r, _ := sizing.ResourcesFromProperties(nil)
		r.RunTimeCPUs = sizing.RunTimeCPUs(tc.version, r.TaskCPUs)
		u := sizing.Account(s, r, execs, 3_600_000)
		if u.SlotOccupancy == nil {
			t.Fatalf("Spark %s: no occupancy", tc.version)
		}
		occupancy[tc.version] = *u.SlotOccupancy
	}
	if occupancy["3.5.9"] != occupancy["4.0.1"] || occupancy["3.5.9"] <= 0 {
		t.Errorf("slot occupancy %v: the versions must agree", occupancy)
	}
}

// A task-only profile's tasks run on the default executors; on 4.x their
// run time counts their own cpus, which the occupancy cannot tell apart:
// a note says so, and only then.
func TestTaskOnlyNote(t *testing.T) {
	var env sparkapi.Environment
	if err := json.Unmarshal([]byte(`{"resourceProfiles": [{"id": 1, "executorResources": {"cores": {"amount": 8}}, "taskResources": {"cpus": {"amount": 4.0}}},
	   {"id": 2, "executorResources": {}, "taskResources": {"cpus": {"amount": 2.0}}}]}`), &env); err != nil {
		t.Fatal(err)
	}
	if n := TaskOnlyNote("4.0.1", 1, env.ResourceProfiles); !strings.Contains(n, "task-only resource profile 2's tasks (2 cpus each)") || !strings.Contains(n, "up to 2×") {
		t.Errorf("4.0.1: %q", n)
	}
	for _, tc := range []struct {
		version string
		cpus    int
	}{{"3.5.9", 1}, {"4.0.1", 2}} {
		if n := TaskOnlyNote(tc.version, tc.cpus, env.ResourceProfiles); n != "" {
			t.Errorf("Spark %s, spark.task.cpus %d: %q", tc.version, tc.cpus, n)
		}
	}
	if n := TaskOnlyNote("4.0.1", 1, env.ResourceProfiles[:1]); n != "" {
		t.Errorf("no task-only profile: %q", n)
	}
}
