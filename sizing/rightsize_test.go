package sizing

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

const hour = 3_600_000 // ms

// an executor alive for ms with the given peaks, task time and GC time.
func execAlive(id string, ms int64, cores int, heap, rss int64, taskMs, gcMs int64) Executor {
	return Executor{ID: id, AliveMs: ms, Cores: cores, TaskTimeMs: taskMs, GCTimeMs: gcMs,
		Peaks: map[string]int64{"JVMHeapMemory": heap, "ProcessTreeJVMRSSMemory": rss}}
}

func eightGiB() Settings {
	s, err := FromProperties(map[string]string{"spark.executor.memory": "8g"})
	if err != nil {
		panic(err)
	}
	return s // heap 8 GiB, overhead 858993459 (10 %), container 9448928051
}

func find(recs []Setting, prop string) (Setting, bool) {
	for _, r := range recs {
		if r.Property == prop {
			return r, true
		}
	}
	return Setting{}, false
}

func TestAccount(t *testing.T) {
	s := eightGiB()
	r, err := ResourcesFromProperties(map[string]string{"spark.driver.memory": "2g", "spark.driver.cores": "2", "spark.submit.deployMode": "cluster"})
	if err != nil {
		t.Fatal(err)
	}
	x1 := execAlive("1", hour, 4, 2<<30, 3<<30, 0, 0)
	x1.CPUNs, x1.RunMs, x1.MeanRSS = 3600e9, 4_000_000, 2<<30
	x2 := execAlive("2", hour/2, 4, 1<<30, 5<<30, 0, 0)
	x2.CPUNs, x2.RunMs, x2.GCTimeMs, x2.MeanRSS = 1800e9, 2_000_000, 100_000, 4<<30
	x2.Peaks["ProcessTreePythonRSSMemory"] = 1 << 30
	driver := Executor{ID: "driver", AliveMs: hour}
	u := Account(s, r, []Executor{driver, x1, x2}, hour)

	// Given: 4 cores × 3600 s + 4 × 1800 s; the container for 5400 s.
	// Used: 5400 s of task CPU of 21 600 core-seconds: 25 %. The largest
	// process tree: executor 2's 5 GiB JVM + 1 GiB Python.
	want := Usage{DurationMs: hour, Executors: 2, ExecutorCoreSeconds: 21600, ExecutorMemoryByteSeconds: 9448928051 * 5400.0,
		DriverCoreSeconds: 7200, DriverMemoryByteSeconds: float64(2<<30+384<<20) * 3600,
		TaskCPUSeconds: 5400, TaskRunSeconds: 6000, GCSeconds: 100, CPUUtilisation: 0.25, CPUFrom: "tasks",
		PeakRSS: 6 << 30, MeanRSS: 3 << 30, PeakPythonRSS: 1 << 30, MemoryUtilisation: float64(6<<30) / 9448928051,
		MeanMemoryUtilisation: float64(3<<30) / 9448928051, Container: 9448928051, Cores: 4}
	if u.DurationMs != want.DurationMs || u.Executors != want.Executors || u.ExecutorCoreSeconds != want.ExecutorCoreSeconds ||
		u.ExecutorMemoryByteSeconds != want.ExecutorMemoryByteSeconds || u.DriverCoreSeconds != want.DriverCoreSeconds ||
		u.DriverMemoryByteSeconds != want.DriverMemoryByteSeconds || u.TaskCPUSeconds != want.TaskCPUSeconds ||
		u.TaskRunSeconds != want.TaskRunSeconds || u.GCSeconds != want.GCSeconds || u.CPUUtilisation != want.CPUUtilisation ||
		u.CPUFrom != want.CPUFrom || u.PeakRSS != want.PeakRSS || u.MeanRSS != want.MeanRSS || u.PeakPythonRSS != want.PeakPythonRSS ||
		u.MemoryUtilisation != want.MemoryUtilisation || u.MeanMemoryUtilisation != want.MeanMemoryUtilisation ||
		u.Container != want.Container || u.Cores != want.Cores || len(u.Notes) != 0 ||
		u.CPUUsedSeconds != 5400 || u.MeanRSSByteSeconds != float64(2<<30)*3600+float64(4<<30)*1800 {
		t.Errorf("Account:\n got %+v\nwant %+v", u, want)
	}

	// The driver side by deploy mode: in client mode on YARN the
	// application master's container (1 core, 512 MiB + 384 MiB) is what
	// the cluster holds; in client mode elsewhere, and in local mode,
	// nothing.
	for _, c := range []struct {
		props      map[string]string
		cores, mem float64
		held       string
	}{
		{map[string]string{"spark.driver.memory": "2g", "spark.master": "yarn"}, 3600, float64(896<<20) * 3600, DriverYARNAM},
		{map[string]string{"spark.driver.memory": "2g", "spark.master": "yarn", "spark.yarn.am.memory": "1g", "spark.yarn.am.cores": "2"}, 7200, float64(1408<<20) * 3600, DriverYARNAM},
		{map[string]string{"spark.driver.memory": "2g", "spark.master": "spark://m:7077"}, 0, 0, DriverOutside},
		{map[string]string{"spark.driver.memory": "2g", "spark.master": "local[4]", "spark.submit.deployMode": "cluster"}, 0, 0, DriverOutside},
		{map[string]string{"spark.driver.memory": "2g", "spark.master": "k8s://https://k:443", "spark.submit.deployMode": "cluster"}, 3600, float64(2<<30+384<<20) * 3600, DriverInCluster},
	} {
		r, err := ResourcesFromProperties(c.props)
		if err != nil {
			t.Fatal(err)
		}
		u := Account(s, r, []Executor{driver, x1, x2}, hour)
		if u.DriverCoreSeconds != c.cores || u.DriverMemoryByteSeconds != c.mem || u.DriverHeld != c.held {
			t.Errorf("%v: driver %v core-s, %v byte-s, %s; want %v, %v, %s", c.props, u.DriverCoreSeconds, u.DriverMemoryByteSeconds, u.DriverHeld, c.cores, c.mem, c.held)
		}
	}

	// The cgroup plugin on every executor: its CPU (Python's included)
	// is the CPU used.
	x1.CgroupCPUNs, x2.CgroupCPUNs = 7200e9, 3600e9
	if u := Account(s, r, []Executor{driver, x1, x2}, hour); u.CPUFrom != "container" || u.CPUUtilisation != 0.5 || u.ContainerCPUSeconds != 10800 || u.CPUUsedSeconds != 10800 {
		t.Errorf("with the cgroup plugin: %s %v %v, want container 0.5 10800", u.CPUFrom, u.CPUUtilisation, u.ContainerCPUSeconds)
	}
	// On YARN the plugin reads the node's cgroup: the tasks', and a note
	// says why.
	ry := r
	ry.YARN = true
	if u := Account(s, ry, []Executor{driver, x1, x2}, hour); u.CPUFrom != "tasks" || u.CPUUtilisation != 0.25 ||
		len(u.Notes) != 1 || !strings.Contains(u.Notes[0], "YARN") {
		t.Errorf("on YARN: %s %v %q", u.CPUFrom, u.CPUUtilisation, u.Notes)
	}
	// More CPU than 4 cores give in an hour (a node's, or a container
	// with no CPU accounting of its own): the tasks'.
	x1.CgroupCPUNs = 4 * 3600e9 * 1.2
	if u := Account(s, r, []Executor{driver, x1, x2}, hour); u.CPUFrom != "tasks" || len(u.Notes) != 1 ||
		!strings.Contains(u.Notes[0], "executor 1: 17280 s of CPU in 14400 s of 4 cores") {
		t.Errorf("over the cores held: %s %q", u.CPUFrom, u.Notes)
	}
	// Less than the tasks' own CPU: not this container's either.
	x1.CgroupCPUNs = 1800e9
	if u := Account(s, r, []Executor{driver, x1, x2}, hour); u.CPUFrom != "tasks" || len(u.Notes) != 1 ||
		!strings.Contains(u.Notes[0], "less than its tasks' 3600 s") {
		t.Errorf("under the tasks' CPU: %s %q", u.CPUFrom, u.Notes)
	}
	// At the bound it is believed: 4 cores busy for the hour.
	x1.CgroupCPUNs = 4 * 3600e9
	if u := Account(s, r, []Executor{driver, x1, x2}, hour); u.CPUFrom != "container" || len(u.Notes) != 0 {
		t.Errorf("at the cores held: %s %q", u.CPUFrom, u.Notes)
	}
	x1.CgroupCPUNs = 7200e9
	// On one of two: the tasks', and a note says why.
	x2.CgroupCPUNs = 0
	if u := Account(s, r, []Executor{driver, x1, x2}, hour); u.CPUFrom != "tasks" || len(u.Notes) != 1 {
		t.Errorf("with the cgroup plugin on one executor: %s %q", u.CPUFrom, u.Notes)
	}
	// No stream: unknown, said.
	x1.CPUNs, x2.CPUNs, x1.CgroupCPUNs = 0, 0, 0
	if u := Account(s, r, []Executor{driver, x1, x2}, hour); u.CPUFrom != "" || u.CPUUtilisation != 0 || !strings.Contains(strings.Join(u.Notes, " "), "CPU utilisation unknown") {
		t.Errorf("without the stream: %q %v %q", u.CPUFrom, u.CPUUtilisation, u.Notes)
	}
}

func TestResourcesFromProperties(t *testing.T) {
	r, err := ResourcesFromProperties(nil)
	if err != nil || r != (Resources{DriverCores: 1, DriverHeap: 1 << 30, DriverOverhead: 384 << 20, MaxResultSize: 1 << 30, IdleTimeout: time.Minute,
		AMCores: 1, AMMemory: 512 << 20, AMOverhead: 384 << 20, TaskCPUs: 1}) {
		t.Errorf("defaults: %+v %v", r, err)
	}
	r, err = ResourcesFromProperties(map[string]string{"spark.executor.cores": "4", "spark.driver.memory": "8g",
		"spark.dynamicAllocation.enabled": "true", "spark.dynamicAllocation.executorIdleTimeout": "2min",
		"spark.executor.instances": "10", "spark.driver.maxResultSize": "0", "spark.master": "yarn"})
	if err != nil || r.ExecutorCores != 4 || r.DriverHeap != 8<<30 || r.DriverOverhead != 858993459 || !r.DynamicAllocation ||
		r.IdleTimeout != 2*time.Minute || r.Instances != 10 || r.MaxResultSize != 0 || !r.YARN {
		t.Errorf("set: %+v %v", r, err)
	}
	if r, err := ResourcesFromProperties(map[string]string{"spark.master": "spark://master:7077", "spark.cores.max": "8"}); err != nil ||
		!r.Standalone || r.CoresMax != 8 || r.YARN {
		t.Errorf("standalone: %+v %v", r, err)
	}
	// Kubernetes' factor for a non-JVM application holds for the driver's
	// pod too, unless the driver's own is given.
	if r, err := ResourcesFromProperties(map[string]string{"spark.driver.memory": "4g", "spark.kubernetes.memoryOverheadFactor": "0.4"}); err != nil ||
		r.DriverOverhead != 1717986918 /* 0.4 × 4 GiB */ {
		t.Errorf("Kubernetes' factor: %+v %v", r, err)
	}
	if r, err := ResourcesFromProperties(map[string]string{"spark.driver.memory": "4g", "spark.kubernetes.memoryOverheadFactor": "0.4",
		"spark.driver.memoryOverheadFactor": "0.2"}); err != nil || r.DriverOverhead != 858993459 /* 0.2 × 4 GiB */ {
		t.Errorf("the driver's own factor: %+v %v", r, err)
	}
	// The driver's overhead under its name before Spark 2.3.
	if r, err := ResourcesFromProperties(map[string]string{"spark.yarn.driver.memoryOverhead": "2g"}); err != nil || r.DriverOverhead != 2<<30 {
		t.Errorf("legacy driver overhead: %+v %v", r, err)
	}
	for props, want := range map[string]string{
		"spark.executor.cores=four":                        `spark.executor.cores = "four": not a whole number`,
		"spark.driver.cores=1000000000":                    `spark.driver.cores = "1000000000": more than 65536, which no cluster gives`,
		"spark.dynamicAllocation.executorIdleTimeout=60x":  `unknown unit "x"`,
		"spark.dynamicAllocation.executorIdleTimeout=soon": "not a time",
		"spark.driver.memoryOverheadFactor=2":              "not a fraction",
		"spark.driver.memory=lots":                         `spark.driver.memory = "lots"`,
	} {
		k, v, _ := strings.Cut(props, "=")
		if _, err := ResourcesFromProperties(map[string]string{k: v}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", props, err, want)
		}
	}
}

// TestRightSize works each rule by hand.
func TestRightSize(t *testing.T) {
	s := eightGiB()
	const container = 9448928051
	r := Resources{DriverCores: 1, DriverHeap: 1 << 30, DriverOverhead: 384 << 20, MaxResultSize: 1 << 30, IdleTimeout: time.Minute}
	four := func(heap, rss, taskMs, gcMs int64) []Executor {
		var xs []Executor
		for _, id := range []string{"1", "2", "3", "4"} {
			xs = append(xs, execAlive(id, hour, 4, heap, rss, taskMs, gcMs))
		}
		return xs
	}
	run := func(s Settings, r Resources, execs []Executor, u Usage, failures []string) Advice {
		a := Advise(s, execs)
		RightSize(&a, s, r, u, execs, failures)
		return a
	}

	t.Run("shrink", func(t *testing.T) {
		// Heap peaks 2 GiB (25 %), RSS 3 GiB (34 %), GC 1 %. Heap
		// 2 GiB / 0.7 → 3 GiB in 256 MiB steps; with 384 MiB of
		// overhead the container is 3.375 GiB and 3 GiB is 89 % of it,
		// over 80 %: 3.25 GiB (84 %), then 3.5 GiB, a 3.875 GiB
		// container (4 160 749 568 B, 77 %). Saving: 9 448 928 051 −
		// 4 160 749 568 bytes for 4 × 3600 s.
		execs := four(2<<30, 3<<30, 1_000_000, 10_000)
		a := run(s, r, execs, Account(s, r, execs, hour), nil)
		rec, ok := find(a.Recommendations, "spark.executor.memory")
		if !ok || rec.Rule != "shrink" || rec.Value != 3758096384 || rec.SavingByteSeconds != float64(container-4160749568)*14400 {
			t.Fatalf("%+v", a.Recommendations)
		}
		if rec.ValueString() != "3584m" || rec.CurrentString() != "8g" {
			t.Errorf("as Spark takes them: %s, %s", rec.ValueString(), rec.CurrentString())
		}
		// Not with GC at 5 % of task time, nor without an executor's
		// process-tree memory, nor under ten executor-minutes, nor after
		// a removal that memory may explain (a native crash, a YARN
		// virtual-memory kill); a lost local directory is no such one.
		removed := func(reason string) []Executor {
			execs := four(2<<30, 3<<30, 1_000_000, 10_000)
			execs[0].RemoveReason = reason
			return execs
		}
		if a := run(s, r, removed("Command exited with code 53"), Account(s, r, removed("Command exited with code 53"), hour), nil); len(a.Recommendations) == 0 {
			t.Errorf("after a local-dir failure: no shrink")
		}
		// Local dirs in memory (Kubernetes' tmpfs): the pod held its
		// shuffle files too, which no resident memory shows: no shrink,
		// and a note says why.
		tmpfs := s
		tmpfs.LocalDirsInMemory = true
		shuffled := four(2<<30, 3<<30, 1_000_000, 10_000)
		shuffled[2].ShuffleWrite = 3 << 30
		if a := run(tmpfs, r, shuffled, Account(tmpfs, r, shuffled, hour), nil); len(a.Recommendations) != 0 ||
			!slices.ContainsFunc(a.Notes, func(n string) bool {
				return strings.Contains(n, "(the largest executor wrote 3.0 GiB) and spills count against the pod's memory limit")
			}) {
			t.Errorf("local dirs in memory: %+v %q", a.Recommendations, a.Notes)
		}
		for name, execs := range map[string][]Executor{
			"crashed": removed("Command exited with code 134"),
			"vmem":    removed("Container killed by YARN for exceeding virtual memory limits. 10.6 GB of 10.5 GB virtual memory used."),
			"gc":      four(2<<30, 3<<30, 1_000_000, 50_000),
			"short":   {execAlive("1", 500_000, 4, 2<<30, 3<<30, 100_000, 0)},
			"rss": append(four(2<<30, 3<<30, 1_000_000, 10_000),
				Executor{ID: "5", AliveMs: hour, Cores: 4, Peaks: map[string]int64{"JVMHeapMemory": 1 << 30}}),
		} {
			a := run(s, r, execs, Account(s, r, execs, hour), nil)
			if _, ok := find(a.Recommendations, "spark.executor.memory"); ok {
				t.Errorf("%s: %+v", name, a.Recommendations)
			}
		}
	})

	t.Run("shrink on Kubernetes with a non-JVM application's factor", func(t *testing.T) {
		// Spark on Kubernetes gives a PySpark application 0.4 of the heap
		// as overhead: 8g + 3.2 GiB. The smaller heap keeps that factor:
		// 3 GiB + 1.2 GiB, where 3 GiB resident is 71 % (no step up, as
		// with 10 %); the saving is against that container, not one of
		// 3 GiB + 384 MiB.
		k8s, err := FromProperties(map[string]string{"spark.executor.memory": "8g", "spark.kubernetes.memoryOverheadFactor": "0.4",
			"spark.master": "k8s://https://10.0.0.1:6443"})
		if err != nil {
			t.Fatal(err)
		}
		execs := four(2<<30, 3<<30, 1_000_000, 10_000)
		a := run(k8s, r, execs, Account(k8s, r, execs, hour), nil)
		rec, ok := find(a.Recommendations, "spark.executor.memory")
		heap := int64(3 << 30)
		newContainer := heap + int64(0.4*float64(heap))
		if !ok || rec.Value != heap || rec.SavingByteSeconds != float64(k8s.Container()-newContainer)*14400 {
			t.Fatalf("%+v (container %d)", a.Recommendations, k8s.Container())
		}
	})

	t.Run("shrink keeps the unified region", func(t *testing.T) {
		// 16g with Spark's default overhead (1.6 GiB): heap peaks 9 GiB
		// (56 %), resident memory 10 GiB (57 %), GC 1 %. The heap's peak
		// alone gives 9 GiB / 0.7 → 13 GiB. Execution + storage peaked
		// at 7 GiB: 92 % of 13g's unified region, (13 312 − 300) MiB ×
		// 0.6 = 7 807 MiB; 70 % of it needs a heap of 17 401 MiB or
		// more, over today's: no shrink.
		s, err := FromProperties(map[string]string{"spark.executor.memory": "16g"})
		if err != nil {
			t.Fatal(err)
		}
		execs := four(9<<30, 10<<30, 1_000_000, 10_000)
		for i := range execs {
			execs[i].Peaks["OnHeapExecutionMemory"] = 7 << 30
		}
		a := run(s, r, execs, Account(s, r, execs, hour), nil)
		if _, ok := find(a.Recommendations, "spark.executor.memory"); ok {
			t.Errorf("unified region: %+v", a.Recommendations)
		}
		// With 2 GiB of execution memory, 13g: 2 GiB is 38 % of its
		// unified region, 10 GiB resident 70 % of a 14.3 GiB container
		// (81 % of today's).
		for i := range execs {
			execs[i].Peaks["OnHeapExecutionMemory"] = 2 << 30
		}
		a = run(s, r, execs, Account(s, r, execs, hour), nil)
		if rec, ok := find(a.Recommendations, "spark.executor.memory"); !ok || rec.ValueString() != "13g" {
			t.Errorf("2 GiB of execution memory: %+v", a.Recommendations)
		}
		// Any spill: execution memory ran short, no shrink.
		u := Account(s, r, execs, hour)
		u.SpilledBytes = 1 << 20
		if _, ok := find(run(s, r, execs, u, nil).Recommendations, "spark.executor.memory"); ok {
			t.Errorf("after a spill: %+v", a.Recommendations)
		}
		// A 3-minute application on four executors (12 executor-minutes)
		// whose tasks ran 20 s each: no evidence of what work needs.
		short := four(9<<30, 10<<30, 20_000, 100)
		for i := range short {
			short[i].AliveMs = 180_000
		}
		if _, ok := find(run(s, r, short, Account(s, r, short, 180_000), nil).Recommendations, "spark.executor.memory"); ok {
			t.Errorf("idle run: %+v", a.Recommendations)
		}
	})

	t.Run("idle", func(t *testing.T) {
		// 10 executors of 4 cores for 2 h: 288 000 core-seconds, of
		// which 34 560 s of task run time: slots 12 % busy (CPU 10 %).
		// Executors for 60 %: ⌈34 560 / (0.6 × 7 200 × 4)⌉ = 2; keep
		// 2/10: 80 % of the cores and of the container-seconds (10 ×
		// 7200 s) saved.
		var execs []Executor
		for i := range 10 {
			x := execAlive(string(rune('a'+i)), 2*hour, 4, 0, 0, 0, 0)
			x.CPUNs, x.RunMs = 2880e9, 3456e3
			execs = append(execs, x)
		}
		r := r
		r.Instances = 10
		u := Account(s, r, execs, 2*hour)
		if u.CPUUtilisation != 0.1 || u.ExecutorCoreSeconds != 288000 {
			t.Fatalf("usage %+v", u)
		}
		a := run(s, r, execs, u, nil)
		rec, ok := find(a.Recommendations, "spark.executor.instances")
		if !ok || rec.ValueString() != "2" || rec.CurrentString() != "10" || rec.SavingCoreSeconds != 230400 ||
			math.Abs(rec.SavingByteSeconds-container*72000*0.8) > 1 {
			t.Fatalf("%+v", a.Recommendations)
		}
		// Failed and killed tasks held their slots too: 20 000 s more of
		// run time need ⌈54 560 / 17 280⌉ = 4 executors.
		lost := u
		lostSeconds := 20000.0
		lost.LostTaskSeconds = &lostSeconds
		if rec, ok := find(run(s, r, execs, lost, nil).Recommendations, "spark.executor.instances"); !ok || rec.ValueString() != "4" {
			t.Errorf("with lost task time: %+v", rec)
		}
		// A standalone Master ignores spark.executor.instances: the
		// same finding asks for 2 executors' cores through
		// spark.cores.max, and for their size where it was not set.
		sa := r
		sa.Standalone, sa.Instances, sa.CoresMax, sa.ExecutorCores = true, 0, 40, 4
		a = run(s, sa, execs, u, nil)
		if _, ok := find(a.Recommendations, "spark.executor.instances"); ok {
			t.Errorf("standalone: spark.executor.instances recommended: %+v", a.Recommendations)
		}
		if rec, ok := find(a.Recommendations, "spark.cores.max"); !ok || rec.ValueString() != "8" || rec.CurrentString() != "40" ||
			rec.SavingCoreSeconds != 230400 || len(a.Recommendations) != 1 {
			t.Errorf("standalone: %+v", a.Recommendations)
		}
		sa.CoresMax, sa.ExecutorCores = 0, 0
		a = run(s, sa, execs, u, nil)
		if rec, ok := find(a.Recommendations, "spark.executor.cores"); !ok || rec.ValueString() != "4" || len(a.Recommendations) != 2 {
			t.Errorf("standalone without spark.executor.cores: %+v", a.Recommendations)
		}
		// With spark.task.cpus = 4 each task held all 4 cores of its
		// executor: the same run time kept 48 % of the slots busy, and
		// the rule is quiet.
		r4 := r
		r4.TaskCPUs = 4
		u4 := Account(s, r4, execs, 2*hour)
		if a := run(s, r4, execs, u4, nil); len(a.Recommendations) != 0 || *u4.SlotOccupancy != 0.48 || u4.BusySlotSeconds != 138240 {
			t.Errorf("with spark.task.cpus=4: occupancy %v, %+v", *u4.SlotOccupancy, a.Recommendations)
		}
		// With dynamic allocation the average held says nothing of the
		// widest stage: quiet.
		da := r
		da.DynamicAllocation = true
		if a := run(s, da, execs, u, nil); len(a.Recommendations) != 0 {
			t.Errorf("with dynamic allocation: %+v", a.Recommendations)
		}
		// Unless it is pinned at minExecutors = maxExecutors: a fixed
		// number, cut as a static one's, both bounds together.
		da.MinExecutors, da.MaxExecutors = 10, 10
		a = run(s, da, execs, u, nil)
		if rec, ok := find(a.Recommendations, "spark.dynamicAllocation.maxExecutors"); !ok || rec.ValueString() != "2" || rec.CurrentString() != "10" || rec.SavingCoreSeconds != 230400 {
			t.Errorf("pinned dynamic allocation: %+v", a.Recommendations)
		}
		if rec, ok := find(a.Recommendations, "spark.dynamicAllocation.minExecutors"); !ok || rec.ValueString() != "2" || len(a.Recommendations) != 2 {
			t.Errorf("pinned dynamic allocation: %+v", a.Recommendations)
		}
		// On standalone too: its Master honours dynamic allocation's
		// bounds.
		da.Standalone = true
		if rec, ok := find(run(s, da, execs, u, nil).Recommendations, "spark.dynamicAllocation.maxExecutors"); !ok || rec.ValueString() != "2" {
			t.Errorf("pinned dynamic allocation on standalone: %+v", rec)
		}
		da.Standalone = false
		da.MinExecutors = 2 // free to scale: quiet
		if a := run(s, da, execs, u, nil); len(a.Recommendations) != 0 {
			t.Errorf("with dynamic allocation from 2 to 10: %+v", a.Recommendations)
		}
		// Under a core-hour: not worth a word.
		short := u
		short.ExecutorCoreSeconds = 3000
		if a := run(s, r, execs, short, nil); len(a.Recommendations) != 0 {
			t.Errorf("under a core-hour: %+v", a.Recommendations)
		}
	})

	t.Run("idle by CPU, busy slots", func(t *testing.T) {
		// A PySpark UDF job: 20 executors of 4 cores for an hour, task
		// slots 90 % busy (259 200 s of run time) while the task threads'
		// CPU is 9 % (the work is in the Python workers). By CPU it would
		// be cut to 3 executors and run ~6 h: the rule must be quiet. So
		// must it for an I/O-bound scan: CPU 20 %, slots 85 % busy.
		for name, c := range map[string]struct{ cpuNs, runMs float64 }{
			"pyspark udf": {0.09 * 14400e9, 0.90 * 14400e3},
			"io-bound":    {0.20 * 14400e9, 0.85 * 14400e3},
		} {
			var execs []Executor
			for i := range 20 {
				x := execAlive(fmt.Sprint(i), hour, 4, 0, 0, 0, 0)
				x.CPUNs, x.RunMs = int64(c.cpuNs), int64(c.runMs)
				execs = append(execs, x)
			}
			r := r
			r.Instances = 20
			u := Account(s, r, execs, hour)
			if a := run(s, r, execs, u, nil); len(a.Recommendations) != 0 {
				t.Errorf("%s (CPU %.0f %%): %+v", name, 100*u.CPUUtilisation, a.Recommendations)
			}
		}
	})

	t.Run("idle with the driver alone", func(t *testing.T) {
		// 10 executors of 4 cores for an hour: 40 minutes with no stage,
		// then 20 minutes of stages with the slots 80 % busy (38 400
		// slot-seconds): 27 % over the whole run, but fewer executors
		// would stretch the stages (⌈38 400 / (0.6 × 1 200 × 4)⌉ = 14).
		// No cut; a note says dynamic allocation would release them.
		var execs []Executor
		for i := range 10 {
			x := execAlive(string(rune('a'+i)), hour, 4, 0, 0, 0, 0)
			x.CPUNs, x.RunMs = 3000e9, 3840e3
			execs = append(execs, x)
		}
		r := r
		r.Instances = 10
		u := Account(s, r, execs, hour)
		driverOnly := int64(40 * 60 * 1000)
		u.DriverOnlyMs = &driverOnly
		a := run(s, r, execs, u, nil)
		if len(a.Recommendations) != 0 || !strings.Contains(strings.Join(a.Notes, ";"), "no stage ran for 67 %") {
			t.Errorf("recommended %+v, notes %q", a.Recommendations, a.Notes)
		}
		// What releasing them would save at most: the 40 minutes less
		// the 60 s idle timeout, 2 340 s of 40 cores (26.0 core-hours)
		// and of 10 containers of 8.8 GiB (57.2 GiB-hours). Two stretches
		// of 20 minutes each wait the timeout twice: 2 280 s, 25.3.
		u.DriverOnlyGapsMs = []int64{40 * 60 * 1000}
		if n := strings.Join(run(s, r, execs, u, nil).Notes, ";"); !strings.Contains(n, "up to 26.0 core-hours and 57.2 GiB-hours less, the stretches with no stage after spark.dynamicAllocation.executorIdleTimeout (60s)") {
			t.Errorf("one stretch: %q", n)
		}
		u.DriverOnlyGapsMs = []int64{20 * 60 * 1000, 30_000, 20 * 60 * 1000}
		if n := strings.Join(run(s, r, execs, u, nil).Notes, ";"); !strings.Contains(n, "up to 25.3 core-hours") {
			t.Errorf("two stretches and a short one: %q", n)
		}
		// Must fire: the same slots with the stages running all along.
		driverOnly = 0
		if rec, ok := find(run(s, r, execs, u, nil).Recommendations, "spark.executor.instances"); !ok || rec.ValueString() != "5" {
			t.Errorf("without driver-only time: %+v", rec)
		}
	})

	t.Run("idle-timeout", func(t *testing.T) {
		// Dynamic allocation with a 120 s idle timeout: 10 executors of
		// 4 cores for 30 min (72 000 core-seconds), half their CPU used
		// (the idle rule stays quiet), 8 released while the application
		// ran, each after 120 s idle: 3 840 core-seconds, 5.3 %. At 30 s
		// each holds 90 s less: 8 × 4 × 90 = 2 880 core-seconds and
		// 8 × 90 container-seconds.
		var execs []Executor
		for i := range 10 {
			x := execAlive(string(rune('a'+i)), hour/2, 4, 0, 0, 0, 0)
			x.CPUNs, x.RunMs, x.Released = 3600e9, 4000e3, i < 8
			execs = append(execs, x)
		}
		r := r
		r.DynamicAllocation, r.IdleTimeout = true, 2*time.Minute
		u := Account(s, r, execs, hour/2)
		if u.CPUUtilisation != 0.5 || u.ExecutorCoreSeconds != 72000 {
			t.Fatalf("usage %+v", u)
		}
		a := run(s, r, execs, u, nil)
		rec, ok := find(a.Recommendations, "spark.dynamicAllocation.executorIdleTimeout")
		if !ok || len(a.Recommendations) != 1 || rec.ValueString() != "30s" || rec.CurrentString() != "120s" ||
			rec.SavingCoreSeconds != 2880 || rec.SavingByteSeconds != container*720.0 {
			t.Fatalf("%+v", a.Recommendations)
		}
		// At the 60 s default the idle time is 2.7 % of what was held;
		// without dynamic allocation nothing is released for idleness.
		r.IdleTimeout = time.Minute
		if a := run(s, r, execs, u, nil); len(a.Recommendations) != 0 {
			t.Errorf("at 60 s: %+v", a.Recommendations)
		}
		r.IdleTimeout, r.DynamicAllocation = 2*time.Minute, false
		if a := run(s, r, execs, u, nil); len(a.Recommendations) != 0 {
			t.Errorf("without dynamic allocation: %+v", a.Recommendations)
		}
	})

	t.Run("cores", func(t *testing.T) {
		// GC 12 % with the heap at 95 %: the heap rule fires. With 8
		// cores, fewer per executor would also give each task more heap;
		// the plan takes the cheaper: a quarter more heap, 10 GiB, with
		// Spark's default overhead for it (1 GiB), 2 GiB + 204.8 MiB
		// (2 362 232 013 B) more per container for 4 × 3600 s. Half the
		// cores instead, at today's heap, would take 4 more containers of
		// 8.8 GiB: 35.2 GiB-hours, a note.
		execs := four(8<<30*95/100, 7<<30, 1_000_000, 120_000)
		for i := range execs {
			execs[i].Cores = 8
		}
		r := r
		r.Instances = 4
		a := run(s, r, execs, Account(s, r, execs, hour), nil)
		heap, ok := find(a.Recommendations, "spark.executor.memory")
		if !ok || heap.ValueString() != "10g" || heap.SavingByteSeconds != -2362232013*14400.0 || len(a.Recommendations) != 1 {
			t.Fatalf("%+v", a.Recommendations)
		}
		if !slices.ContainsFunc(a.Notes, func(n string) bool {
			return strings.Contains(n, "alternatively spark.executor.cores=4 with twice the executors gives each task twice the heap, at 35.2 GiB-hours more held than this run, where a quarter more heap costs 8.8")
		}) {
			t.Errorf("no alternative: %q", a.Notes)
		}

		// A 28 GiB heap: a quarter more (35 GiB) would pass 31 GiB,
		// past which the JVM's object pointers are no longer compressed.
		// Half the cores instead: 4 more containers of 28 GiB + 2.8 GiB
		// (33 071 248 179 B) for 3600 s each.
		big := Settings{Heap: 28 << 30, Overhead: 3006477107, MemoryFraction: 0.6, StorageFraction: 0.5}
		bigExecs := four(28<<30*95/100, 20<<30, 1_000_000, 120_000)
		for i := range bigExecs {
			bigExecs[i].Cores = 8
		}
		a = run(big, r, bigExecs, Account(big, r, bigExecs, hour), nil)
		rec, ok := find(a.Recommendations, "spark.executor.cores")
		if _, raised := find(a.Recommendations, "spark.executor.memory"); !ok || raised || rec.ValueString() != "4" || rec.CurrentString() != "8" ||
			rec.SavingByteSeconds != -33071248179*14400.0 {
			t.Fatalf("28 GiB: %+v", a.Recommendations)
		}
		if n, ok := find(a.Recommendations, "spark.executor.instances"); !ok || n.ValueString() != "8" || n.SavingByteSeconds != 0 {
			t.Errorf("instances: %+v", n)
		}
		if !slices.ContainsFunc(a.Notes, func(n string) bool { return strings.Contains(n, "a quarter more heap (35.0 GiB) would pass 31.0 GiB") }) {
			t.Errorf("no compressed-pointers note: %q", a.Notes)
		}
		// On standalone spark.cores.max keeps the slots: halving the
		// cores makes twice the executors, and no executor count is
		// asked for (its Master reads none).
		sa := r
		sa.Standalone = true
		a = run(big, sa, bigExecs, Account(big, sa, bigExecs, hour), nil)
		if _, ok := find(a.Recommendations, "spark.executor.instances"); ok {
			t.Errorf("standalone: %+v", a.Recommendations)
		}
		if _, ok := find(a.Recommendations, "spark.executor.cores"); !ok {
			t.Errorf("standalone: no spark.executor.cores: %+v", a.Recommendations)
		}
		// Executors holding GPUs would take as many more GPUs: quiet,
		// with a note.
		gr := r
		gr.ExecutorGPUs = 2
		a = run(big, gr, bigExecs, Account(big, gr, bigExecs, hour), nil)
		if _, ok := find(a.Recommendations, "spark.executor.cores"); ok || !slices.ContainsFunc(a.Notes, func(n string) bool {
			return strings.Contains(n, "the executors hold GPUs: 4 cores instead of 8 would take twice the executors, and their GPUs")
		}) {
			t.Errorf("GPUs: %+v %q", a.Recommendations, a.Notes)
		}
		// 5 cores become 2: 2.5 times the executors, 1.5 containers more
		// per executor.
		for i := range bigExecs {
			bigExecs[i].Cores = 5
		}
		a = run(big, r, bigExecs, Account(big, r, bigExecs, hour), nil)
		rec, ok = find(a.Recommendations, "spark.executor.cores")
		if n, _ := find(a.Recommendations, "spark.executor.instances"); !ok || rec.ValueString() != "2" ||
			rec.SavingByteSeconds != -1.5*33071248179*14400 || n.ValueString() != "10" {
			t.Errorf("5 cores: %+v", a.Recommendations)
		}
		// With dynamic allocation the instances are not set; its cap,
		// when there is one, grows as much: 2.5 × 8.
		r.DynamicAllocation = true
		a = run(big, r, bigExecs, Account(big, r, bigExecs, hour), nil)
		if _, ok := find(a.Recommendations, "spark.executor.instances"); ok {
			t.Errorf("dynamic allocation: %+v", a.Recommendations)
		}
		if _, ok := find(a.Recommendations, "spark.dynamicAllocation.maxExecutors"); ok {
			t.Errorf("dynamic allocation, no cap: %+v", a.Recommendations)
		}
		r.MaxExecutors = 8
		a = run(big, r, bigExecs, Account(big, r, bigExecs, hour), nil)
		if m, ok := find(a.Recommendations, "spark.dynamicAllocation.maxExecutors"); !ok || m.ValueString() != "20" || m.CurrentString() != "8" {
			t.Errorf("dynamic allocation, capped at 8: %+v", a.Recommendations)
		}
		// Under 4 cores the rule is quiet.
		for i := range bigExecs {
			bigExecs[i].Cores = 3
		}
		if _, ok := find(run(big, r, bigExecs, Account(big, r, bigExecs, hour), nil).Recommendations, "spark.executor.cores"); ok {
			t.Error("3 cores: the rule fired")
		}
	})

	t.Run("driver", func(t *testing.T) {
		// An 8g driver whose heap peaked at 2 GiB (25 %): 2 GiB / 0.6 →
		// 3.5 GiB in 256 MiB steps, 4.5 GiB less for the 2 h it ran, in
		// cluster mode; in client mode the same advice saves the cluster
		// nothing.
		r := r
		r.DriverHeap = 8 << 30
		execs0 := []Executor{{ID: "driver", AliveMs: 2 * hour, Peaks: map[string]int64{"JVMHeapMemory": 2 << 30}}}
		if rec, ok := find(run(s, r, execs0, Account(s, r, execs0, 2*hour), nil).Recommendations, "spark.driver.memory"); !ok || rec.SavingByteSeconds != 0 {
			t.Errorf("client mode: %+v", rec)
		}
		r.ClusterMode = true
		execs := []Executor{{ID: "driver", AliveMs: 2 * hour, Peaks: map[string]int64{"JVMHeapMemory": 2 << 30}}}
		a := run(s, r, execs, Account(s, r, execs, 2*hour), nil)
		rec, ok := find(a.Recommendations, "spark.driver.memory")
		if !ok || rec.Value != 3758096384 || rec.SavingByteSeconds != float64(8<<30-3758096384)*7200 {
			t.Fatalf("%+v", a.Recommendations)
		}
		// A job over spark.driver.maxResultSize (1g): 2g, and a 4g
		// driver to hold it, 3 GiB more for 2 h.
		r.DriverHeap = 1 << 30
		fail := []string{"Job aborted due to stage failure: Total size of serialized results of 20 tasks (1030.4 MiB) is bigger than spark.driver.maxResultSize (1024.0 MiB)"}
		a = run(s, r, execs, Account(s, r, execs, 2*hour), fail)
		limit, ok1 := find(a.Recommendations, "spark.driver.maxResultSize")
		heap, ok2 := find(a.Recommendations, "spark.driver.memory")
		if !ok1 || !ok2 || limit.ValueString() != "2g" || heap.ValueString() != "4g" || heap.SavingByteSeconds != -float64(3<<30)*7200 {
			t.Fatalf("%+v", a.Recommendations)
		}
	})

	t.Run("Python workers crashed", func(t *testing.T) {
		// The shrink case's executors, but a stage failed as Python
		// workers ended without a Python error: possibly the kernel's
		// OOM killer, so no shrinking, and a note says so. A crash the
		// fault handler reported is the worker's own: the shrink stands.
		execs := four(2<<30, 3<<30, 1_000_000, 10_000)
		crashed := []string{"Job aborted due to stage failure: Task 3 in stage 2.0 failed 4 times, most recent failure: Lost task 3.3 in stage 2.0 (TID 14) (node-2 executor 2): org.apache.spark.SparkException: Python worker exited unexpectedly (crashed)"}
		a := run(s, r, execs, Account(s, r, execs, hour), crashed)
		if _, ok := find(a.Recommendations, "spark.executor.memory"); ok ||
			!slices.ContainsFunc(a.Notes, func(n string) bool { return strings.Contains(n, "usually the kernel's OOM killer") }) {
			t.Errorf("crashed: %+v %q", a.Recommendations, a.Notes)
		}
		own := []string{crashed[0] + ": Fatal Python error: Segmentation fault"}
		a = run(s, r, execs, Account(s, r, execs, hour), own)
		if _, ok := find(a.Recommendations, "spark.executor.memory"); !ok || slices.ContainsFunc(a.Notes, func(n string) bool { return strings.Contains(n, "OOM killer") }) {
			t.Errorf("the worker's own crash: %+v %q", a.Recommendations, a.Notes)
		}
	})

	t.Run("Python MemoryError", func(t *testing.T) {
		// A stage failed as a Python worker hit its share of
		// spark.executor.pyspark.memory (1g over 4 cores: 256 MiB):
		// twice the setting, its cost the gigabyte more for the four
		// executors' hour.
		py := s
		py.PySpark = 1 << 30
		r := r
		r.ExecutorCores = 4
		execs := four(2<<30, 3<<30, 1_000_000, 10_000)
		failed := []string{"Job aborted due to stage failure: Task 0 in stage 3.0 failed 4 times, most recent failure: Lost task 0.3 in stage 3.0 (TID 9) (127.0.0.1 executor 1): org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n  File \"/job.py\", line 7, in grab\n    block = bytearray(1 << 30)\nMemoryError\n\n\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:572)"}
		a := run(py, r, execs, Account(py, r, execs, hour), failed)
		rec, ok := find(a.Recommendations, "spark.executor.pyspark.memory")
		if !ok || rec.ValueString() != "2g" || rec.SavingByteSeconds != -float64(1<<30)*14400 || !slices.ContainsFunc(a.Findings, func(f Finding) bool {
			return f.Rule == "python" && strings.Contains(f.Text, "(1.0 GiB: 256 MiB per worker of an executor of 4 cores)")
		}) {
			t.Errorf("MemoryError: %+v %+v", a.Recommendations, a.Findings)
		}
		if _, ok := find(a.Recommendations, "spark.executor.memory"); ok {
			t.Errorf("shrunk after a MemoryError: %+v", a.Recommendations)
		}
		// Spark 4's wording of the stage's failure.
		spark4 := []string{"[PYTHON_EXCEPTION] An exception was thrown from the Python worker: Traceback (most recent call last):\n  File \"/job.py\", line 7, in grab\n    block = bytearray(1 << 30)\nMemoryError\n SQLSTATE: 38000"}
		if rec, ok := find(run(py, r, execs, Account(py, r, execs, hour), spark4).Recommendations, "spark.executor.pyspark.memory"); !ok || rec.ValueString() != "2g" {
			t.Errorf("Spark 4's wording: %+v", rec)
		}
		// Must not: no setting (the machine's memory, not the worker's
		// share), or another Python error.
		if a := run(s, r, execs, Account(s, r, execs, hour), failed); slices.ContainsFunc(a.Findings, func(f Finding) bool { return f.Rule == "python" }) {
			t.Errorf("without the setting: %+v", a.Findings)
		}
		other := []string{strings.Replace(failed[0], "\nMemoryError", "\nValueError: bad row", 1)}
		if a := run(py, r, execs, Account(py, r, execs, hour), other); slices.ContainsFunc(a.Findings, func(f Finding) bool { return f.Rule == "python" }) {
			t.Errorf("a ValueError: %+v", a.Findings)
		}
	})

	t.Run("savings add up", func(t *testing.T) {
		// Shrink and idle together: the idle rule's bytes are against
		// the shrunk container, so the sum is what the run would hold
		// less: C·E − keep·C′·E.
		var execs []Executor
		for i := range 10 {
			x := execAlive(string(rune('a'+i)), 2*hour, 4, 2<<30, 3<<30, 1_000_000, 10_000)
			x.CPUNs, x.RunMs = 2880e9, 3456e3
			execs = append(execs, x)
		}
		a := run(s, r, execs, Account(s, r, execs, 2*hour), nil)
		cores, bytes, _ := a.Savings()
		want := float64(container)*72000 - 0.2*4160749568*72000
		if cores != 230400 || math.Abs(bytes-want) > 1 {
			t.Errorf("savings %v core-s, %v byte-s; want 230400, %v (%+v)", cores, bytes, want, a.Recommendations)
		}
	})
}
