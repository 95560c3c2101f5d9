package sizing

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

const gib = 1 << 30

func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		unit int64
		want int64
		err  string
	}{
		{"4g", mib, 4 * gib, ""},
		{"4G", 1, 4 * gib, ""},
		{" 2gb ", 1, 2 * gib, ""},
		{"512m", 1, 512 * mib, ""},
		{"512MB", 1, 512 * mib, ""},
		{"1024k", 1, mib, ""},
		{"1t", 1, 1 << 40, ""},
		{"100b", mib, 100, ""},
		{"100", mib, 100 * mib, ""},       // spark.executor.memory: MiB without a unit
		{"1073741824", 1, gib, ""},        // spark.memory.offHeap.size: bytes
		{"4.5g", mib, 0, "whole numbers"}, // Spark refuses fractions
		{"-1g", mib, 0, "not a size"},
		{"4x", mib, 0, `unknown unit "x"`},
		{"", mib, 0, "not a size"},
		{"99999999999999p", 1, 0, "more memory than any machine has"},
		{"1p", 1, 1 << 50, ""},
		{"1025t", 1, 0, "more memory than any machine has"},
	} {
		got, err := ParseSize(c.in, c.unit)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseSize(%q) = %d, %v; want an error with %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseSize(%q, %d) = %d, %v; want %d", c.in, c.unit, got, err, c.want)
		}
	}
}

func TestFromProperties(t *testing.T) {
	for _, c := range []struct {
		props map[string]string
		want  Settings
	}{
		// Spark's defaults: 1g of heap, the 384 MiB minimum overhead.
		{nil, Settings{Heap: gib, Overhead: 384 * mib, MemoryFraction: 0.6, StorageFraction: 0.5}},
		// 10 % of 4g is more than the minimum.
		{map[string]string{"spark.executor.memory": "4g"},
			Settings{Heap: 4 * gib, Overhead: 429496729, MemoryFraction: 0.6, StorageFraction: 0.5}},
		{map[string]string{"spark.executor.memory": "8192", "spark.executor.memoryOverhead": "1g"},
			Settings{Heap: 8 * gib, Overhead: gib, OverheadSet: true, MemoryFraction: 0.6, StorageFraction: 0.5}},
		{map[string]string{"spark.executor.memory": "4g", "spark.executor.memoryOverheadFactor": "0.2"},
			Settings{Heap: 4 * gib, Overhead: 858993459, MemoryFraction: 0.6, StorageFraction: 0.5, OverheadFactor: 0.2}},
		{map[string]string{"spark.kubernetes.memoryOverheadFactor": "0.4", "spark.executor.minMemoryOverhead": "256m"},
			Settings{Heap: gib, Overhead: 429496729, MemoryFraction: 0.6, StorageFraction: 0.5, OverheadFactor: 0.4, MinOverhead: 256 * mib}},
		{map[string]string{"spark.executor.pyspark.memory": "2g", "spark.memory.fraction": "0.75", "spark.memory.storageFraction": "0.3"},
			Settings{Heap: gib, Overhead: 384 * mib, PySpark: 2 * gib, MemoryFraction: 0.75, StorageFraction: 0.3}},
		// ZGC or Shenandoah from the executors' Java options; G1 (or a
		// collector switched off) is not concurrent in this sense.
		{map[string]string{"spark.executor.extraJavaOptions": "-Xss4m -XX:+UseZGC -XX:+ZGenerational"},
			Settings{Heap: gib, Overhead: 384 * mib, MemoryFraction: 0.6, StorageFraction: 0.5, ConcurrentGC: "ZGC"}},
		{map[string]string{"spark.executor.defaultJavaOptions": "-XX:+UseShenandoahGC"},
			Settings{Heap: gib, Overhead: 384 * mib, MemoryFraction: 0.6, StorageFraction: 0.5, ConcurrentGC: "Shenandoah"}},
		{map[string]string{"spark.executor.defaultJavaOptions": "-XX:+UseZGC", "spark.executor.extraJavaOptions": "-XX:+UseG1GC"},
			Settings{Heap: gib, Overhead: 384 * mib, MemoryFraction: 0.6, StorageFraction: 0.5}},
		{map[string]string{"spark.driver.extraJavaOptions": "-XX:+UseZGC", "spark.executor.extraJavaOptions": "-XX:+UseG1GC -XX:MaxGCPauseMillis=100"},
			Settings{Heap: gib, Overhead: 384 * mib, MemoryFraction: 0.6, StorageFraction: 0.5}},
		// On YARN Spark ends executors out of heap with SIGTERM, unless
		// their Java options name a handler of their own.
		{map[string]string{"spark.master": "yarn"},
			Settings{Heap: gib, Overhead: 384 * mib, MemoryFraction: 0.6, StorageFraction: 0.5, KillOnOOM: true}},
		{map[string]string{"spark.master": "yarn", "spark.executor.extraJavaOptions": "-XX:OnOutOfMemoryError='/opt/dump.sh %p'"},
			Settings{Heap: gib, Overhead: 384 * mib, MemoryFraction: 0.6, StorageFraction: 0.5}},
		{map[string]string{"spark.master": "k8s://https://10.0.0.1:6443"},
			Settings{Heap: gib, Overhead: 384 * mib, MemoryFraction: 0.6, StorageFraction: 0.5}},
		{map[string]string{"spark.master": "spark://127.0.0.1:7077"},
			Settings{Heap: gib, Overhead: 384 * mib, MemoryFraction: 0.6, StorageFraction: 0.5}},
		{map[string]string{"spark.memory.offHeap.enabled": "true", "spark.memory.offHeap.size": "1073741824"},
			Settings{Heap: gib, Overhead: 384 * mib, OffHeap: gib, MemoryFraction: 0.6, StorageFraction: 0.5}},
		{map[string]string{"spark.memory.offHeap.enabled": "false", "spark.memory.offHeap.size": "1g"},
			Settings{Heap: gib, Overhead: 384 * mib, MemoryFraction: 0.6, StorageFraction: 0.5}},
		// The name before Spark 2.3, which Spark still reads: heap 4g
		// with 3072 MiB of overhead is a 7 GiB container, not 4.4 GiB.
		{map[string]string{"spark.executor.memory": "4g", "spark.yarn.executor.memoryOverhead": "3072"},
			Settings{Heap: 4 * gib, Overhead: 3 * gib, OverheadSet: true, MemoryFraction: 0.6, StorageFraction: 0.5}},
		// Local dirs in memory on Kubernetes only (the setting means
		// nothing elsewhere).
		{map[string]string{"spark.master": "k8s://https://api:6443", "spark.kubernetes.local.dirs.tmpfs": "true"},
			Settings{Heap: gib, Overhead: 384 * mib, MemoryFraction: 0.6, StorageFraction: 0.5, LocalDirsInMemory: true}},
		{map[string]string{"spark.master": "yarn", "spark.kubernetes.local.dirs.tmpfs": "true"},
			Settings{Heap: gib, Overhead: 384 * mib, MemoryFraction: 0.6, StorageFraction: 0.5, KillOnOOM: true}},
		// Both set: the current name wins, as in Spark.
		{map[string]string{"spark.executor.memoryOverhead": "1g", "spark.yarn.executor.memoryOverhead": "3072"},
			Settings{Heap: gib, Overhead: gib, OverheadSet: true, MemoryFraction: 0.6, StorageFraction: 0.5}},
	} {
		want := c.want // Spark's defaults where a row leaves them out
		if want.OverheadFactor == 0 {
			want.OverheadFactor = 0.10
		}
		if want.MinOverhead == 0 {
			want.MinOverhead = 384 * mib
		}
		got, err := FromProperties(c.props)
		if err != nil || got != want {
			t.Errorf("FromProperties(%v) = %+v, %v; want %+v", c.props, got, err, want)
		}
	}
	for props, want := range map[string]string{
		"spark.executor.memory=4.5g": `spark.executor.memory = "4.5g": `,
		"spark.memory.fraction=1.5":  `spark.memory.fraction = "1.5": not a fraction`,
	} {
		k, v, _ := strings.Cut(props, "=")
		if _, err := FromProperties(map[string]string{k: v}); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("FromProperties(%s): %v, want an error starting %q", props, err, want)
		}
	}
	s := Settings{Heap: 4 * gib, Overhead: 409 * mib, PySpark: 512 * mib, OffHeap: gib, MemoryFraction: 0.6}
	if got, want := s.Container(), int64(4*gib+409*mib+512*mib+gib); got != want {
		t.Errorf("Container = %d, want %d", got, want)
	}
	if got, want := s.Unified(), int64(2388236697); got != want { // (4096 - 300) MiB × 0.6, rounded down
		t.Errorf("Unified = %d, want %d", got, want)
	}
}

func peaks(kv ...int64) map[string]int64 {
	names := []string{"JVMHeapMemory", "OnHeapExecutionMemory", "OnHeapStorageMemory", "ProcessTreeJVMRSSMemory", "ProcessTreePythonRSSMemory", "ProcessTreeOtherRSSMemory"}
	m := map[string]int64{}
	for i, v := range kv {
		m[names[i]] = v
	}
	return m
}

// withNative adds the JVM's memory outside the heap to peaks.
func withNative(m map[string]int64, nonHeap, direct int64) map[string]int64 {
	m["JVMOffHeapMemory"], m["DirectPoolMemory"] = nonHeap, direct
	return m
}

func summary(a Advice) []string {
	var out []string
	for _, f := range a.Findings {
		out = append(out, fmt.Sprintf("finding %s %s: %s", f.Rule, f.Executor, f.Text))
	}
	for _, r := range a.Recommendations {
		now := "not set"
		if r.Current > 0 {
			now = r.CurrentString()
		}
		out = append(out, fmt.Sprintf("set %s = %s (now %s)", r.Property, SparkSize(r.Value), now))
	}
	out = append(out, a.Notes...)
	return out
}

// Cases with known answers, worked out by hand in the comments.
func TestAdvise(t *testing.T) {
	heap4 := Settings{Heap: 4 * gib, Overhead: gib, OverheadSet: true, MemoryFraction: 0.6, StorageFraction: 0.5}
	yarnHeap4 := heap4
	yarnHeap4.KillOnOOM = true
	// Spark's defaults for a 4g and an 8g heap: a tenth of it as overhead.
	default4 := Settings{Heap: 4 * gib, Overhead: 429496729, MemoryFraction: 0.6, StorageFraction: 0.5}
	default8 := Settings{Heap: 8 * gib, Overhead: 858993459, MemoryFraction: 0.6, StorageFraction: 0.5}
	pyspark1g := Settings{Heap: 4 * gib, Overhead: gib, PySpark: gib, MemoryFraction: 0.6}
	const (
		python900 = "finding python : Python workers peaked at 900 MiB, 220 % of the memory overhead, which Python workers share with the JVM's off-heap memory without spark.executor.pyspark.memory (409 MiB)"
		python950 = "finding python : Python workers peaked at 950 MiB, 93 % of spark.executor.pyspark.memory (1.0 GiB)"
		heapGC8   = "finding heap 1: heap used to 95 % of 8.0 GiB while GC took 12 % of task time"
		noTree    = "no process-tree metrics: the container and Python rules need spark.executor.processTreeMetrics.enabled=true (Linux)"
	)
	for _, c := range []struct {
		name  string
		s     Settings
		execs []Executor
		want  []string
		order []string
	}{{
		// Container 5 GiB; 4813 MiB resident is 94 %. Needed: 4813 + 4813/9
		// = 5347.8 MiB, overhead 5347.8 - 4096 = 1251.8, up to 1280 MiB.
		name: "container near its limit",
		s:    heap4,
		execs: []Executor{
			{ID: "2", Peaks: peaks(2*gib, 0, 0, 3*gib, 0, 0)},
			{ID: "1", Peaks: peaks(3*gib, 0, 0, 4813*mib, 0, 0)},
			{ID: "driver", Peaks: peaks(3*gib, 0, 0, 9*gib, 0, 0)}, // its own settings: left out
		},
		want:  []string{"finding container 1: resident memory peaked at 4.7 GiB, 94 % of the 5.0 GiB container", "set spark.executor.memoryOverhead = 1280m (now 1g)"},
		order: []string{"1", "2"},
	}, {
		// Default overhead of 4g: 409.6 MiB. Python's 300 MiB is 73 % of
		// it: reported, but spark.executor.pyspark.memory, an address-space
		// limit per worker, is not set from resident memory. Resident 4300
		// + 300 = 4600 MiB of a 4505.6 MiB container (102 %). Needed 4600
		// + 511.1 = 5111.1 MiB; overhead 5111.1 - 4096 = 1015.1, up to
		// 1024 MiB: container 5120, 4600 is 89.8 %.
		name: "Python workers in the overhead",
		s:    default4,
		execs: []Executor{
			{ID: "1", Peaks: peaks(3*gib, 0, 0, 4300*mib, 300*mib, 0)},
		},
		want: []string{
			"finding container 1: resident memory peaked at 4.5 GiB, 102 % of the 4.4 GiB container",
			"finding python : Python workers peaked at 300 MiB, 73 % of the memory overhead, which Python workers share with the JVM's off-heap memory without spark.executor.pyspark.memory (409 MiB)",
			"set spark.executor.memoryOverhead = 1g (now 409.6 MiB)",
		},
	}, {
		// A 4g heap, Spark's default overhead (409.6 MiB), Python
		// workers at 900 MiB (220 % of the overhead), the JVM's resident
		// memory sampled before its heap filled (3 GiB; 3996 MiB in all,
		// 89 % of the container). The container must hold the whole
		// heap, the JVM's native memory — Spark's default overhead, more
		// than the 200 MiB it reported outside the heap, which leaves out
		// thread stacks and more — and Python, a tenth to spare on the
		// last two: 4096 + 409.6 + 900 + 145.5 = 5551.1 MiB; overhead
		// 1455.1, up to 1472 MiB. Heap + Python alone (1g) left the JVM
		// 124 MiB.
		name: "Python workers beside the JVM's native memory",
		s:    default4,
		execs: []Executor{
			{ID: "1", Peaks: withNative(peaks(2*gib, 0, 0, 3*gib, 900*mib, 0), 150*mib, 50*mib)},
		},
		want: []string{
			python900,
			"set spark.executor.memoryOverhead = 1472m (now 409.6 MiB)",
		},
	}, {
		// Where the JVM reported more outside the heap (600 MiB: Arrow's
		// direct buffers), that: 4096 + 600 + 900 + 166.7 = 5762.7;
		// overhead 1666.7, up to 1728 MiB.
		name: "Python workers beside large direct buffers",
		s:    default4,
		execs: []Executor{
			{ID: "1", Peaks: withNative(peaks(2*gib, 0, 0, 3*gib, 900*mib, 0), 150*mib, 450*mib)},
		},
		want: []string{
			python900,
			"set spark.executor.memoryOverhead = 1728m (now 409.6 MiB)",
		},
	}, {
		// Python at 150 MiB, 37 % of the overhead: no python finding,
		// and the heap, the JVM and Python are not sized together —
		// every PySpark application would otherwise be told to grow its
		// overhead. The measured resident memory (3.1 GiB) is far from
		// the limit: nothing.
		name: "small Python workers: nothing",
		s:    default4,
		execs: []Executor{
			{ID: "1", Peaks: withNative(peaks(2*gib, 0, 0, 3*gib, 150*mib, 0), 150*mib, 50*mib)},
		},
	}, {
		// GC pressure on an 8g heap with Spark's default overhead (819.2
		// MiB), 7.9 GiB resident (89.8 %). The plan's heap is 10g, whose
		// default overhead is 1 GiB. Resident memory grows with the
		// heap: 7.9 GiB × 10/9 + 2 GiB = 10.78 GiB, an overhead of 0.78
		// GiB (832 MiB), which is under the new default: no explicit
		// overhead (the old advice set 832m, below Spark's 1 GiB).
		name: "more heap: the overhead is checked with it",
		s:    default8,
		execs: []Executor{
			{ID: "1", Peaks: peaks(8*gib*95/100, 0, 0, 8089*mib, 0, 0), TaskTimeMs: 100_000, GCTimeMs: 12_000},
		},
		want: []string{
			heapGC8,
			"set spark.executor.memory = 10g (now 8g)",
		},
	}, {
		// The same at 8.5 GiB resident (97 %): 9.44 + 2 = 11.44 GiB, an
		// overhead of 1.44 GiB (1479.1 MiB, up to 1536), over the new
		// default: set, with the heap it is sized for.
		name: "more heap and a container near its limit",
		s:    default8,
		execs: []Executor{
			{ID: "1", Peaks: peaks(8*gib*95/100, 0, 0, 8704*mib, 0, 0), TaskTimeMs: 100_000, GCTimeMs: 12_000},
		},
		want: []string{
			"finding container 1: resident memory peaked at 8.5 GiB, 97 % of the 8.8 GiB container",
			heapGC8,
			"set spark.executor.memoryOverhead = 1536m (now 819.2 MiB)",
			"set spark.executor.memory = 10g (now 8g)",
		},
	}, {
		// pyspark memory 1g, Python resident at 950 MiB (93 %) while the
		// workers map 2 GiB: Spark limits each worker's address space to
		// its share, so the setting must hold what they map: 2048 + 227.6
		// = 2275.6, up to 2304 MiB. The container grows by 1280 MiB.
		name: "Python at its own limit: sized by address space",
		s:    pyspark1g,
		execs: []Executor{
			{ID: "1", Peaks: map[string]int64{"JVMHeapMemory": 3 * gib, "ProcessTreeJVMRSSMemory": 3 * gib,
				"ProcessTreePythonRSSMemory": 950 * mib, "ProcessTreePythonVMemory": 2 * gib}},
		},
		want: []string{
			python950,
			"set spark.executor.pyspark.memory = 2304m (now 1g)",
		},
	}, {
		// The same without the workers' virtual memory: no number can be
		// given for an address-space limit, and the note says why.
		name: "Python at its own limit, address space unknown",
		s:    pyspark1g,
		execs: []Executor{
			{ID: "1", Peaks: peaks(3*gib, 0, 0, 3*gib, 950*mib, 0)},
		},
		want: []string{
			python950,
			"the Python workers' virtual memory (ProcessTreePythonVMemory) was not reported: spark.executor.pyspark.memory, an address-space limit per worker, is not advised from resident memory",
		},
	}, {
		// With pyspark memory 1g, 700 MiB of Python is 68 %: nothing.
		name: "Python within its own setting",
		s:    pyspark1g,
		execs: []Executor{
			{ID: "1", Peaks: peaks(3*gib, 0, 0, 4*gib, 700*mib, 0)},
		},
		want: nil,
	}, {
		// Killed at 5.5 GiB: needed the larger of 4.9 GiB + 1/9, + 1/4 and
		// the container 5632 MiB + 1/4 = 7040 MiB; overhead 7040 - 4096 =
		// 2944 MiB.
		name: "killed by YARN",
		s:    Settings{Heap: 4 * gib, Overhead: 1536 * mib, OverheadSet: true, MemoryFraction: 0.6},
		execs: []Executor{
			{ID: "1", Peaks: peaks(3*gib, 0, 0, 3*gib, 0, 0)},
			{ID: "2", Peaks: peaks(3*gib, 0, 0, 5018*mib, 0, 0),
				RemoveReason: "Container killed by YARN for exceeding physical memory limits. 5.5 GB of 5.5 GB physical memory used."},
		},
		want: []string{
			"finding container 2: removed for exceeding its memory limit: Container killed by YARN for exceeding physical memory limits. 5.5 GB of 5.5 GB physical memory used.",
			"set spark.executor.memoryOverhead = 2944m (now 1536m)",
		},
		order: []string{"2", "1"},
	}, {
		// A PySpark worker over its container, as real YARN killed one
		// (512m heap, Spark's 384 MiB overhead, rounded up to 1 GiB): no
		// heartbeat saw the peak, YARN measured 1.4 GB of the tree as it
		// killed it. Needed: 1.4 GiB + a quarter = 1792 MiB; overhead
		// 1792 - 512 = 1280 MiB. The limit alone would give 1280 MiB of
		// container, below what YARN measured.
		name: "a Python worker killed by YARN, unseen by Spark",
		s:    Settings{Heap: 512 * mib, Overhead: 384 * mib, MemoryFraction: 0.6},
		execs: []Executor{
			{ID: "1", Peaks: peaks(200*mib, 0, 0, 260*mib, 70*mib, 0),
				RemoveReason: "Container killed by YARN for exceeding physical memory limits. 1.4 GB of 1 GB physical memory used. Consider boosting spark.executor.memoryOverhead."},
			{ID: "2", Peaks: peaks(200*mib, 0, 0, 260*mib, 70*mib, 0)},
		},
		want: []string{
			"finding container 1: removed for exceeding its memory limit: Container killed by YARN for exceeding physical memory limits. 1.4 GB of 1 GB physical memory used. Consider boosting spark.executor.memoryOverhead.",
			"set spark.executor.memoryOverhead = 1280m (now 384m)",
		},
	}, {
		// Spark asked for 4g + 409.6 MiB; YARN, rounding to a 1 GiB
		// minimum allocation, gave 5 GiB and says so when it kills at
		// it. The container plus a quarter is then 6.25 GiB, not 5.5:
		// overhead 6400 - 4096 = 2304 MiB.
		name: "killed by YARN above what Spark asked",
		s:    Settings{Heap: 4 * gib, Overhead: 429496729, MemoryFraction: 0.6},
		execs: []Executor{
			{ID: "2", Peaks: peaks(3*gib, 0, 0, 4600*mib, 0, 0),
				RemoveReason: "Container killed by YARN for exceeding physical memory limits. 5.0 GB of 5 GB physical memory used. Consider boosting spark.executor.memoryOverhead."},
		},
		want: []string{
			"finding container 2: removed for exceeding its memory limit: Container killed by YARN for exceeding physical memory limits. 5.0 GB of 5 GB physical memory used. Consider boosting spark.executor.memoryOverhead.",
			"set spark.executor.memoryOverhead = 2304m (now 409.6 MiB)",
		},
	}, {
		// YARN's virtual-memory check killed one, at 2.4 GiB resident of
		// a 5 GiB container: no container finding, no memory advice, a
		// note naming the NodeManager's settings (the physical kill's
		// must-fire cases are above).
		name: "killed by YARN's virtual-memory check",
		s:    heap4,
		execs: []Executor{
			{ID: "1", Peaks: peaks(2*gib, 0, 0, 2400*mib, 0, 0),
				RemoveReason: "Container killed by YARN for exceeding virtual memory limits. 10.6 GB of 10.5 GB virtual memory used. Consider boosting spark.executor.memoryOverhead or boosting yarn.nodemanager.vmem-pmem-ratio or disabling yarn.nodemanager.vmem-check-enabled because of YARN-4714."},
			{ID: "2", Peaks: peaks(2*gib, 0, 0, 2400*mib, 0, 0)},
		},
		want: []string{
			"executor 1 killed by YARN's virtual-memory check, which counts address space the JVM reserves and never uses (YARN-4714): no sign of too little memory, and no memory advice from it; the fix is the NodeManager's yarn.nodemanager.vmem-pmem-ratio, or yarn.nodemanager.vmem-check-enabled=false",
		},
	}, {
		// 3.8 of 4 GiB of heap with GC at 12 % of task time: 5g. The
		// other executor's full heap with 5 % GC is normal.
		name: "GC pressure",
		s:    heap4,
		execs: []Executor{
			{ID: "1", Peaks: peaks(3891*mib, 0, 0, 4*gib, 0, 0), TaskTimeMs: 100_000, GCTimeMs: 12_000},
			{ID: "2", Peaks: peaks(3994*mib, 0, 0, 4*gib, 0, 0), TaskTimeMs: 100_000, GCTimeMs: 5_000},
		},
		want: []string{
			"finding heap 1: heap used to 95 % of 4.0 GiB while GC took 12 % of task time",
			"set spark.executor.memory = 5g (now 4g)",
		},
	}, {
		// The same executors under ZGC: its GC time counts concurrent
		// cycles, not pauses, so the GC share is no evidence and the
		// rule is quiet, saying why.
		name: "GC share under ZGC",
		s:    Settings{Heap: 4 * gib, Overhead: gib, OverheadSet: true, MemoryFraction: 0.6, StorageFraction: 0.5, ConcurrentGC: "ZGC"},
		execs: []Executor{
			{ID: "1", Peaks: peaks(3891*mib, 0, 0, 4*gib, 0, 0), TaskTimeMs: 100_000, GCTimeMs: 12_000},
		},
		want: []string{
			"the executors run ZGC, whose GC time is that of its concurrent cycles, not of pauses: the GC-pressure part of the heap rule is quiet",
		},
	}, {
		// Executor 3 exited with code 52 (Kubernetes' wording), its heap
		// sampled at only half of 4g: the exit, not the sample, says heap.
		// 4g + a quarter = 5g. Its removal is not a container kill: no
		// overhead advice (no process-tree metrics either).
		name: "out of heap (exit code 52)",
		s:    heap4,
		execs: []Executor{
			{ID: "3", Peaks: peaks(2 * gib), RemoveReason: "The executor with id 3 exited with exit code 52(JVM OOM)."},
		},
		want: []string{
			"finding heap 3: the JVM ran out of heap (4.0 GiB) and the executor exited: The executor with id 3 exited with exit code 52(JVM OOM).",
			"set spark.executor.memory = 5g (now 4g)",
			noTree,
		},
	}, {
		// YARN 143: Spark's -XX:OnOutOfMemoryError='kill %p' ends the
		// JVM with SIGTERM when it runs out of heap, whatever the heap
		// sampled last (a single huge allocation fails with the heap at
		// 40 %): the heap rule fires, 4g + a quarter = 5g.
		name: "terminated on YARN",
		s:    yarnHeap4,
		execs: []Executor{
			{ID: "4", Peaks: peaks(1638 * mib), RemoveReason: "Container from a bad node: container_1_0001_01_000004 on host: node-8. Exit status: 143. Diagnostics: Container killed on request. Exit code is 143"},
		},
		want: []string{
			"finding heap 4: the executor was terminated (SIGTERM, exit 143), which on YARN is the JVM's -XX:OnOutOfMemoryError='kill %p' that Spark sets: it ran out of heap (4.0 GiB): Container from a bad node: container_1_0001_01_000004 on host: node-8. Exit status: 143. Diagnostics: Container killed on request. Exit code is 143",
			"set spark.executor.memory = 5g (now 4g)",
			noTree,
		},
	}, {
		// A SIGTERM where Spark sets no such handler (Kubernetes: a pod
		// deleted) says nothing of memory, even with the heap full, and
		// it is not a preemption either: no heap advice.
		name: "terminated elsewhere with a full heap",
		s:    heap4,
		execs: []Executor{
			{ID: "4", Peaks: peaks(3891 * mib), RemoveReason: "The executor with id 4 exited with exit code 143(SIGTERM)."},
		},
		want: []string{
			noTree,
		},
	}, {
		// Kubernetes appends "possible container OOM" to every 137: an
		// evicted or reclaimed pod is no memory kill, so no overhead.
		name: "Kubernetes 137 without OOMKilled",
		s:    heap4,
		execs: []Executor{
			{ID: "5", Peaks: peaks(2*gib, 0, 0, 3*gib, 0, 0), RemoveReason: "\nThe executor with id 5 exited with exit code 137(SIGKILL, possible container OOM).\n\n\n\nThe API gave the following container statuses:\n\n\t container name: spark-kubernetes-executor\n\t exit code: 137\n\t termination reason: Error\n"},
		},
		want: nil,
	}, {
		// Unified region of 4g: (4096 - 300) × 0.6 = 2277.6 MiB; 2100 MiB is 92 %.
		name: "unified region full",
		s:    heap4,
		execs: []Executor{
			{ID: "1", Peaks: peaks(3*gib, 1500*mib, 600*mib, 4*gib, 0, 0)},
		},
		want: []string{"finding unified 1: execution and storage memory peaked at 2.1 GiB, 92 % of the 2.2 GiB unified region: expect spills and evicted cache blocks"},
	}, {
		name: "no process-tree metrics",
		s:    heap4,
		execs: []Executor{
			{ID: "1", Peaks: peaks(3 * gib)},
		},
		want: []string{noTree},
	}} {
		t.Run(c.name, func(t *testing.T) {
			a := Advise(c.s, c.execs)
			got := summary(a)
			if !slices.Equal(got, c.want) {
				t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(c.want, "\n  "))
			}
			if c.order != nil {
				var ids []string
				for _, h := range a.Executors {
					ids = append(ids, h.ID)
				}
				if !slices.Equal(ids, c.order) {
					t.Errorf("executors in order %q, want %q", ids, c.order)
				}
			}
		})
	}
}
