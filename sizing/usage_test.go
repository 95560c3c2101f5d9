package sizing

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// TestHeldAndSlots: what the cluster holds of an executor is not always
// what its task slots stand for. Kubernetes holds a pod's CPU request;
// a GPU per task limits an executor to as many tasks as it has GPUs.
func TestHeldAndSlots(t *testing.T) {
	s := eightGiB()
	ten := func(cores, slots, gpus int) []Executor {
		var xs []Executor
		for i := range 10 {
			x := execAlive(string(rune('a'+i)), hour, cores, 2<<30, 3<<30, 0, 0)
			x.Slots, x.GPUs = slots, gpus
			x.CPUNs, x.RunMs = 360e9, 720_000 // 12 min of task run time each
			xs = append(xs, x)
		}
		return xs
	}
	props := func(kv ...string) Resources {
		t.Helper()
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		r, err := ResourcesFromProperties(m)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-6*math.Max(1, math.Abs(b)) }

	t.Run("Kubernetes requests", func(t *testing.T) {
		// 10 executors of 4 cores whose pods requested 1 core, and a
		// driver pod of 2 cores that requested 500m, for an hour: the
		// cluster held 10 and 0.5 core-hours, not 40 and 2. The task
		// slots are still 4 per executor: 12 min of run time in each of
		// 4 slots for an hour is 5 % busy, and the held core-seconds
		// busy are 5 % of 36 000.
		r := props("spark.master", "k8s://https://api:6443", "spark.submit.deployMode", "cluster", "spark.executor.cores", "4",
			"spark.kubernetes.executor.request.cores", "1", "spark.driver.cores", "2", "spark.kubernetes.driver.request.cores", "500m")
		execs := append([]Executor{{ID: "driver", AliveMs: hour}}, ten(4, 4, 0)...)
		u := Account(s, r, execs, hour)
		if u.ExecutorCoreSeconds != 36_000 || u.DriverCoreSeconds != 1800 || u.SlotCoreSeconds != 144_000 ||
			u.SlotOccupancy == nil || !near(*u.SlotOccupancy, 0.05) || !near(u.BusySlotSeconds, 1800) || !near(u.CPUUtilisation, 0.1) {
			t.Errorf("requests: %+v", u)
		}
		// Executors of another resource profile get no request from
		// the properties (Spark's BasicExecutorFeatureStep): their
		// cores.
		other := ten(4, 4, 0)
		for i := range other {
			other[i].ResourceProfile = 1
		}
		if u := Account(s, r, other, hour); u.ExecutorCoreSeconds != 144_000 {
			t.Errorf("another profile: %v core-seconds, want 144000", u.ExecutorCoreSeconds)
		}
		// Elsewhere the property means nothing: YARN holds the cores.
		y := props("spark.master", "yarn", "spark.executor.cores", "4", "spark.kubernetes.executor.request.cores", "1")
		if u := Account(s, y, ten(4, 4, 0), hour); u.ExecutorCoreSeconds != 144_000 || !near(u.BusySlotSeconds, 7200) {
			t.Errorf("on YARN: %+v", u)
		}
		if _, err := ResourcesFromProperties(map[string]string{"spark.master": "k8s://x", "spark.kubernetes.executor.request.cores": "one"}); err == nil ||
			!strings.Contains(err.Error(), `spark.kubernetes.executor.request.cores = "one": not a Kubernetes CPU quantity`) {
			t.Errorf("a bad quantity: %v", err)
		}
		for v, want := range map[string]float64{"1": 1, "0.5": 0.5, "500m": 0.5, " 2 ": 2, "1500m": 1.5, ".5": 0.5, "250000u": 0.25, "1k": 1000, "1e1": 10, "2Ki": 2048} {
			if got, err := CPUQuantity(v); err != nil || got != want {
				t.Errorf("CPUQuantity(%q) = %v, %v; want %v", v, got, err, want)
			}
		}
		for _, v := range []string{"", "m", "-1", "0", "NaN", "Inf", "0x1p0", "1 core", "1q"} {
			if _, err := CPUQuantity(v); err == nil {
				t.Errorf("CPUQuantity(%q): no error", v)
			}
		}
	})

	t.Run("GPUs", func(t *testing.T) {
		// 10 executors of 4 cores and one GPU each, a task taking the
		// GPU: Spark's maxTasks is 1, so each executor runs one task at
		// a time. 12 min of run time in an hour is 20 % of its one slot,
		// not 5 % of 4 cores; 10 GPU-hours held.
		r := props("spark.master", "yarn", "spark.executor.cores", "4", "spark.executor.resource.gpu.amount", "1", "spark.task.resource.gpu.amount", "1")
		u := Account(s, r, ten(4, 1, 1), hour)
		if u.ExecutorGPUSeconds != 36_000 || u.SlotOccupancy == nil || !near(*u.SlotOccupancy, 0.2) || u.SlotCores != 4 || !near(u.BusySlotSeconds, 28_800) {
			t.Errorf("one GPU a task: %+v", u)
		}
		// A History Server lists maxTasks as cores ÷ task cpus (its
		// resource profiles never work out the limiting resource), and
		// older answers none: the properties' GPUs limit the slots.
		for _, slots := range []int{4, 0} {
			u = Account(s, r, ten(4, slots, 0), hour)
			if u.ExecutorGPUSeconds != 36_000 || u.SlotOccupancy == nil || !near(*u.SlotOccupancy, 0.2) {
				t.Errorf("maxTasks %d: %+v", slots, u)
			}
		}
		// A quarter of a GPU a task shares each GPU among 4 tasks: the
		// cores limit again.
		quarter := props("spark.executor.cores", "4", "spark.executor.resource.gpu.amount", "1", "spark.task.resource.gpu.amount", "0.25")
		if u := Account(s, quarter, ten(4, 4, 1), hour); u.SlotCores != 1 || !near(*u.SlotOccupancy, 0.05) {
			t.Errorf("a quarter GPU a task: %v cores a slot", u.SlotCores)
		}
		// Another resource profile's slots are its maxTasks.
		other := ten(4, 2, 2)
		for i := range other {
			other[i].ResourceProfile = 1
		}
		if u := Account(s, r, other, hour); u.SlotCores != 2 || u.ExecutorGPUSeconds != 72_000 {
			t.Errorf("another profile: %v cores a slot, %v GPU-seconds", u.SlotCores, u.ExecutorGPUSeconds)
		}
		for v, want := range map[string]string{"0.75": "not a whole number of GPUs", "0": "not a whole number", "x": "not a whole number"} {
			if _, err := ResourcesFromProperties(map[string]string{"spark.task.resource.gpu.amount": v}); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("task GPU amount %q: %v", v, err)
			}
		}
		// maxTasks past what the cores allow (task.cpus 2 of 4 cores)
		// is not believed.
		r2 := props("spark.executor.cores", "4", "spark.task.cpus", "2")
		if u := Account(s, r2, ten(4, 16, 0), hour); u.SlotCores != 2 {
			t.Errorf("maxTasks over the cores: %v cores a slot, want 2", u.SlotCores)
		}
		// No GPUs: none counted.
		if u := Account(s, props("spark.executor.cores", "4"), ten(4, 4, 0), hour); u.ExecutorGPUSeconds != 0 || u.SlotCores != 1 {
			t.Errorf("no GPUs: %+v", u)
		}
	})

	t.Run("idle with GPUs", func(t *testing.T) {
		// The GPU-limited executors above, 20 % busy over 10 hours of
		// slots: 10 × 0.2 / 0.6 = 3.33, so 4 executors keep them 60 %
		// busy (by cores, 5 % busy, the rule would have asked for 1).
		// The saving counts their GPUs too: 6 of 10 GPU-hours.
		r := props("spark.master", "yarn", "spark.executor.cores", "4", "spark.executor.instances", "10",
			"spark.executor.resource.gpu.amount", "1", "spark.task.resource.gpu.amount", "1")
		execs := ten(4, 1, 1)
		u := Account(s, r, execs, hour)
		a := Advise(s, execs)
		RightSize(&a, s, r, u, execs, nil)
		rec, ok := find(a.Recommendations, "spark.executor.instances")
		if !ok || rec.ValueString() != "4" || !near(rec.SavingGPUSeconds, 21_600) || !near(rec.SavingCoreSeconds, 86_400) {
			t.Fatalf("%+v", a.Recommendations)
		}
		if _, _, gpus := a.Savings(); !near(gpus, 21_600) {
			t.Errorf("Savings: %v GPU-seconds", gpus)
		}
	})
}

// YARN rounds a container's memory up: the capacity scheduler to a
// multiple of its minimum allocation, the fair scheduler to at least the
// minimum in steps of its increment. Spark's view counts what YARN holds.
func TestYARNAllocation(t *testing.T) {
	for _, c := range []struct {
		hadoop      map[string]string
		least, step int64
	}{
		{nil, 0, 0}, // YARN's configuration not read: unknown
		{map[string]string{"yarn.scheduler.minimum-allocation-mb": "1024"}, 1 << 30, 1 << 30}, // the capacity scheduler's defaults
		{map[string]string{"yarn.scheduler.minimum-allocation-mb": "512"}, 512 * mib, 512 * mib},
		{map[string]string{"yarn.resourcemanager.scheduler.class": "org.apache.hadoop.yarn.server.resourcemanager.scheduler.capacity.CapacityScheduler",
			"yarn.scheduler.minimum-allocation-mb": "256"}, 256 * mib, 256 * mib},
		{map[string]string{"yarn.resourcemanager.scheduler.class": "org.apache.hadoop.yarn.server.resourcemanager.scheduler.fair.FairScheduler",
			"yarn.scheduler.minimum-allocation-mb": "1024", "yarn.resource-types.memory-mb.increment-allocation": "128"}, 1 << 30, 128 * mib},
		{map[string]string{"yarn.resourcemanager.scheduler.class": "org.apache.hadoop.yarn.server.resourcemanager.scheduler.fair.FairScheduler",
			"yarn.scheduler.minimum-allocation-mb": "1024", "yarn.scheduler.increment-allocation-mb": "256"}, 1 << 30, 256 * mib},
		// Another scheduler, or a value that is no whole number of MiB:
		// Spark's sizes.
		{map[string]string{"yarn.resourcemanager.scheduler.class": "org.example.MyScheduler"}, 0, 0},
		{map[string]string{"yarn.scheduler.minimum-allocation-mb": "1g"}, 0, 0},
	} {
		if least, step := YARNAllocation(c.hadoop); least != c.least || step != c.step {
			t.Errorf("%v: %d, %d; want %d, %d", c.hadoop, least, step, c.least, c.step)
		}
	}
	// 512m of heap and 384 MiB of overhead: YARN holds 1 GiB under a
	// 512 MiB minimum; the AM of client mode (512m + 384m) likewise.
	r, err := ResourcesFromProperties(map[string]string{"spark.master": "yarn", "spark.executor.memory": "512m"})
	if err != nil {
		t.Fatal(err)
	}
	r.YARNMinMemory, r.YARNMemoryStep = YARNAllocation(map[string]string{"yarn.scheduler.minimum-allocation-mb": "512"})
	s, _ := FromProperties(map[string]string{"spark.executor.memory": "512m"})
	u := Account(s, r, []Executor{{ID: "driver", AliveMs: hour}, {ID: "1", Cores: 1, AliveMs: hour}}, hour)
	if u.ExecutorMemoryByteSeconds != float64(1<<30)*3600 || u.DriverMemoryByteSeconds != float64(1<<30)*3600 || u.Container != 896*mib {
		t.Errorf("rounded: %v executor byte-s, %v driver byte-s, container %d", u.ExecutorMemoryByteSeconds, u.DriverMemoryByteSeconds, u.Container)
	}
	// Not on YARN: Spark's sizes.
	k := r
	k.YARN = false
	if u := Account(s, k, []Executor{{ID: "1", Cores: 1, AliveMs: hour}}, hour); u.ExecutorMemoryByteSeconds != float64(896*mib)*3600 {
		t.Errorf("elsewhere: %v", u.ExecutorMemoryByteSeconds)
	}
}

// An executor's process tree peaks at one moment: where the stream says
// that peak, it, not the sum of each part's peak at other moments, but
// never under a part's own peak nor over their sum.
func TestExecutorRSS(t *testing.T) {
	x := Executor{Peaks: map[string]int64{"ProcessTreeJVMRSSMemory": 4 << 30, "ProcessTreePythonRSSMemory": 256 * mib, "ProcessTreeOtherRSSMemory": 768 * mib}}
	for _, c := range []struct{ tree, want int64 }{
		{0, 5 << 30},             // unknown: the sum of the parts' peaks
		{4352 * mib, 4352 * mib}, // the stream's one-moment peak
		{3 << 30, 4 << 30},       // under the JVM's own peak (a heartbeat's): that
		{8 << 30, 5 << 30},       // never over the sum
	} {
		x.TreeRSS = c.tree
		if got := x.RSS(); got != c.want {
			t.Errorf("tree %d: RSS %d, want %d", c.tree, got, c.want)
		}
	}
	// The container's use, in Account and Advise, is that figure.
	s := Settings{Heap: 4 << 30, Overhead: 1 << 30, OverheadSet: true, MemoryFraction: 0.6, StorageFraction: 0.5}
	x.TreeRSS, x.ID = 4352*mib, "1" // 85 % of the 5 GiB container
	if a := Advise(s, []Executor{x}); a.Executors[0].RSS != 4352*mib || len(a.Findings) != 0 {
		t.Errorf("Advise: %+v, findings %+v", a.Executors[0], a.Findings)
	}
	x.TreeRSS = 0 // all of the 5 GiB container, summed
	if a := Advise(s, []Executor{x}); len(a.Findings) != 1 || a.Findings[0].Rule != "container" {
		t.Errorf("summed: findings %+v", a.Findings)
	}
}

// Executors of another resource profile have their own limits: their
// memory is neither set against the default profile's container nor
// advised on, and notes say so.
func TestOtherProfiles(t *testing.T) {
	s := Settings{Heap: 4 << 30, Overhead: 1 << 30, OverheadSet: true, MemoryFraction: 0.6, StorageFraction: 0.5}
	r, _ := ResourcesFromProperties(nil)
	peaks := map[string]int64{"ProcessTreeJVMRSSMemory": 14 << 30, "JVMHeapMemory": 12 << 30}
	execs := []Executor{
		{ID: "1", Cores: 4, AliveMs: hour, Peaks: map[string]int64{"ProcessTreeJVMRSSMemory": 3 << 30, "JVMHeapMemory": 2 << 30}},
		{ID: "2", Cores: 8, AliveMs: hour, ResourceProfile: 1, Container: 18 << 30, Peaks: peaks},
	}
	u := Account(s, r, execs, hour)
	if u.PeakRSS != 3<<30 || !slices.ContainsFunc(u.Notes, func(n string) bool { return strings.HasPrefix(n, "1 executors of other resource profiles") }) {
		t.Errorf("Account: peak %d, notes %q", u.PeakRSS, u.Notes)
	}
	a := Advise(s, execs)
	if len(a.Findings) != 0 || len(a.Executors) != 1 || !slices.ContainsFunc(a.Notes, func(n string) bool { return strings.Contains(n, "left out of the memory rules") }) {
		t.Errorf("Advise: findings %+v, executors %d, notes %q", a.Findings, len(a.Executors), a.Notes)
	}
	// Must fire: the same peaks on a default-profile executor.
	execs[1].ResourceProfile, execs[1].Container = 0, 0
	if a := Advise(s, execs); len(a.Findings) == 0 {
		t.Errorf("default profile: no finding for 14 GiB resident in a 5 GiB container")
	}
}
