// Package sizing turns an application's settings, the peaks its executors
// reached and what they used into headroom per memory area, accounting
// (usage.go) and advice, both ways (rightsize.go).
//
// The limits follow Spark's memory model (Spark 3.x on YARN and
// Kubernetes):
//
//   - heap: spark.executor.memory (-Xmx);
//   - unified region (execution and storage): (heap − 300 MiB reserved) ×
//     spark.memory.fraction (0.6);
//   - overhead: spark.executor.memoryOverhead (or, when it is not set,
//     spark.yarn.executor.memoryOverhead, its name before Spark 2.3,
//     which Spark still reads), else max(minimum overhead
//     (spark.executor.minMemoryOverhead, 384 MiB), overhead factor
//     (spark.executor.memoryOverheadFactor, 0.10) × heap);
//   - container: heap + overhead + spark.executor.pyspark.memory (when
//     set) + spark.memory.offHeap.size (when off-heap is enabled): what
//     YARN or Kubernetes enforces on the executor's process tree.
//
// The rules, each with its reason, are applied to every executor (the
// driver's are in RightSize, with the rules that take memory and cores
// back; Account says what an application held and used):
//
//   - container: the process tree's peak resident memory (JVM, Python
//     workers and other children) at 90 % of the container or more is
//     reported, since the cluster manager kills the container above it
//     (and heartbeats sample, so the true peak was higher). The advice
//     raises spark.executor.memoryOverhead until the largest peak is 90 %
//     of the container (a 10 % margin), in steps of 64 MiB; without
//     spark.executor.pyspark.memory, where the python rule fired or a
//     container was killed, until the whole heap, the JVM's native memory
//     (Spark's default overhead, or what the JVM reports outside the heap
//     if more) and the Python workers fit with a tenth of the last two to
//     spare. It is checked with the heap the heap rule gives, and an
//     overhead Spark's default gives the new heap is not asked for. An
//     executor removed for exceeding memory limits (RemoveKind
//     container_oom) counts as over 100 %. The peak is the process
//     tree's at one moment where the stream says it (Executor.RSS).
//   - python: Python workers' resident memory comes out of the overhead
//     unless spark.executor.pyspark.memory sets it apart. Spark enforces
//     that setting as an address-space limit (RLIMIT_AS) on each Python
//     worker, its share of the setting; pandas and Arrow workers map far
//     more than they keep resident. So without the setting a peak at half
//     the overhead is reported and the container rule sizes the overhead
//     for it, but the setting is not advised; with it, a resident peak at
//     90 % of it is reported, and the setting is raised so that the
//     workers' peak virtual memory (ProcessTreePythonVMemory) is 90 % of
//     it, in steps of 64 MiB, or not advised when that is not reported.
//     The peaks are of all workers together: one task with far more data
//     than the others can still fail. A stage failed with Python's
//     MemoryError under the setting is a finding too, with at least twice
//     the setting (RightSize, which reads the failures).
//   - heap: a heap used to its limit is normal for a JVM, which collects
//     only when it fills; it is reported only together with garbage
//     collection taking 10 % of task time or more (where Spark's UI turns
//     it red), or when an executor exited out of heap (Settings.RemoveKind
//     heap_oom: exit code 52, an OutOfMemoryError named, or on YARN an
//     exit 143, SIGTERM, which is how Spark's -XX:OnOutOfMemoryError='kill
//     %p' ends a YARN executor out of heap); the advice is 25 % more
//     heap, in steps of 256 MiB, up to 31 GiB (compressedOops; past it,
//     RightSize's cores rule instead).
//   - unified: execution and storage memory at 90 % of the unified region
//     or more means spills to disk and cached blocks evicted; it is
//     reported without a number, as the fix (more heap, a larger
//     spark.memory.fraction, fewer cores per executor) depends on the job.
//
// Peaks are Spark's peakMemoryMetrics, sampled at executor heartbeats:
// short spikes between two heartbeats are not in them, which the margins
// are for.
package sizing

import (
	"cmp"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

const (
	mib = int64(1) << 20
	// reserved is the heap Spark keeps out of the unified region.
	reserved = 300 * mib
)

// Settings are an application's executor memory settings, in bytes.
type Settings struct {
	Heap            int64   // spark.executor.memory
	Overhead        int64   // spark.executor.memoryOverhead, or its default
	OverheadSet     bool    // spark.executor.memoryOverhead was given
	PySpark         int64   // spark.executor.pyspark.memory; 0 when not set
	OffHeap         int64   // spark.memory.offHeap.size when enabled, else 0
	MemoryFraction  float64 // spark.memory.fraction
	StorageFraction float64 // spark.memory.storageFraction
	// ConcurrentGC names the executors' collector when their Java
	// options select one that collects concurrently (ZGC, Shenandoah);
	// "" otherwise.
	ConcurrentGC string
	// KillOnOOM: the executors end with SIGTERM (exit 143) on an
	// OutOfMemoryError. Spark starts YARN's executors with
	// -XX:OnOutOfMemoryError='kill %p' unless their Java options name a
	// handler of their own (YarnSparkHadoopUtil.addOutOfMemoryErrorArgument).
	KillOnOOM bool
	// OverheadFactor and MinOverhead make the overhead Spark gives a heap
	// when spark.executor.memoryOverhead is not set (DefaultOverhead):
	// spark.executor.memoryOverheadFactor (on Kubernetes
	// spark.kubernetes.memoryOverheadFactor, which Spark sets to 0.4 for
	// non-JVM applications), and spark.executor.minMemoryOverhead. Zero
	// reads as Spark's defaults, 0.10 and 384 MiB.
	OverheadFactor float64
	MinOverhead    int64
	// LocalDirsInMemory: spark.kubernetes.local.dirs.tmpfs=true on
	// Kubernetes, whose emptyDir in memory counts the local dirs' files
	// (shuffle output, spills) against the pod's memory limit, where no
	// resident memory shows them.
	LocalDirsInMemory bool
}

// DefaultOverhead is the overhead Spark gives heap when
// spark.executor.memoryOverhead is not set.
func (s Settings) DefaultOverhead(heap int64) int64 {
	factor, least := s.OverheadFactor, s.MinOverhead
	if factor == 0 {
		factor = 0.10
	}
	if least == 0 {
		least = 384 * mib
	}
	return max(least, int64(factor*float64(heap)))
}

// OverheadFor is the overhead the executors get with heap: the one set,
// else Spark's default for heap.
func (s Settings) OverheadFor(heap int64) int64 {
	if s.OverheadSet {
		return s.Overhead
	}
	return s.DefaultOverhead(heap)
}

// KillOnOOM reports whether an application's executors end with SIGTERM
// on an OutOfMemoryError (Settings.KillOnOOM), from its properties.
func KillOnOOM(props map[string]string) bool {
	opts := props["spark.executor.defaultJavaOptions"] + " " + props["spark.executor.extraJavaOptions"]
	return strings.HasPrefix(strings.TrimSpace(props["spark.master"]), "yarn") && !strings.Contains(opts, "OnOutOfMemoryError")
}

// RemoveKind classifies a removal reason of these executors: as the
// package's RemoveKind, except that a SIGTERM is an executor out of heap
// where that is how they end out of heap (KillOnOOM). On YARN, the
// cluster manager's own kills (preemption, a lost node, the driver's
// release, a container over its memory) come with their own words or
// exit statuses: an exit 143 of the container's process is the JVM's
// own handler, or a kill by hand, which the reason cannot tell apart
// and which is far rarer.
func (s Settings) RemoveKind(reason string) string {
	k := RemoveKind(reason)
	if k == RemovedTerminated && s.KillOnOOM {
		return RemovedHeapOOM
	}
	return k
}

// Unified is the size of the execution and storage region of the heap.
func (s Settings) Unified() int64 {
	return int64(float64(max(s.Heap-reserved, 0)) * s.MemoryFraction)
}

// ProfileContainer is the container of an executor of a resource
// profile that asks for heap, overhead (0: Spark's default for the
// heap), PySpark and off-heap memory, in bytes.
func (s Settings) ProfileContainer(heap, overhead, pyspark, offHeap int64) int64 {
	if overhead <= 0 {
		overhead = s.DefaultOverhead(heap)
	}
	return heap + overhead + pyspark + offHeap
}

// Container is the memory the cluster manager grants the executor.
func (s Settings) Container() int64 { return s.Heap + s.Overhead + s.PySpark + s.OffHeap }

// FromProperties reads the settings from Spark's properties (the
// environment's sparkProperties), with Spark's defaults. An error names
// the property and its value.
func FromProperties(props map[string]string) (Settings, error) {
	s := Settings{MemoryFraction: 0.6, StorageFraction: 0.5}
	var err error
	size := func(key string, unit int64, def int64) int64 {
		v, ok := props[key]
		if !ok || err != nil {
			return def
		}
		n, perr := ParseSize(v, unit)
		if perr != nil {
			err = fmt.Errorf("%s = %q: %w", key, v, perr)
		}
		return n
	}
	frac := func(key string, def float64) float64 {
		v, ok := props[key]
		if !ok || err != nil {
			return def
		}
		f, perr := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if perr != nil || f <= 0 || f > 1 || math.IsNaN(f) {
			err = fmt.Errorf("%s = %q: not a fraction in (0, 1]", key, v)
		}
		return f
	}
	s.Heap = size("spark.executor.memory", mib, 1024*mib)
	factor := frac("spark.executor.memoryOverheadFactor", 0)
	if factor == 0 {
		factor = frac("spark.kubernetes.memoryOverheadFactor", 0.10)
	}
	s.OverheadFactor = factor
	s.MinOverhead = size("spark.executor.minMemoryOverhead", mib, 384*mib)
	if key := overheadKey(props, "spark.executor.memoryOverhead", "spark.yarn.executor.memoryOverhead"); key != "" {
		s.Overhead, s.OverheadSet = size(key, mib, 0), true
	} else {
		s.Overhead = s.DefaultOverhead(s.Heap)
	}
	s.PySpark = size("spark.executor.pyspark.memory", mib, 0)
	if strings.EqualFold(strings.TrimSpace(props["spark.memory.offHeap.enabled"]), "true") {
		s.OffHeap = size("spark.memory.offHeap.size", 1, 0)
	}
	s.MemoryFraction = frac("spark.memory.fraction", s.MemoryFraction)
	s.StorageFraction = frac("spark.memory.storageFraction", s.StorageFraction)
	opts := props["spark.executor.defaultJavaOptions"] + " " + props["spark.executor.extraJavaOptions"]
	s.ConcurrentGC = concurrentCollector(opts)
	s.KillOnOOM = KillOnOOM(props)
	s.LocalDirsInMemory = strings.HasPrefix(strings.TrimSpace(props["spark.master"]), "k8s://") &&
		strings.EqualFold(strings.TrimSpace(props["spark.kubernetes.local.dirs.tmpfs"]), "true")
	return s, err
}

// concurrentCollector names the collector that Java options select when
// it collects concurrently with the application. A task's GC time
// (totalGCTime) is what Executor.computeTotalGcTime sums over every
// GarbageCollectorMXBean; under ZGC and Shenandoah those include the
// "… Cycles" beans, whose time is that of whole concurrent cycles, not
// of pauses, so it says nothing of how long tasks were stopped.
func concurrentCollector(opts string) string {
	name := ""
	for _, f := range strings.Fields(opts) {
		switch f {
		case "-XX:+UseZGC":
			name = "ZGC"
		case "-XX:+UseShenandoahGC":
			name = "Shenandoah"
		case "-XX:+UseG1GC", "-XX:+UseParallelGC", "-XX:+UseSerialGC", "-XX:-UseZGC", "-XX:-UseShenandoahGC":
			name = ""
		}
	}
	return name
}

// overheadKey is the key that sets an overhead: key, else its name
// before Spark 2.3, which Spark still reads when key is not set
// (SparkConf.configsWithAlternatives); "" when neither is set.
func overheadKey(props map[string]string, key, legacy string) string {
	if _, ok := props[key]; ok {
		return key
	}
	if _, ok := props[legacy]; ok {
		return legacy
	}
	return ""
}

var sizeRE = regexp.MustCompile(`^([0-9]+)\s*([a-z]*)$`)

// ParseSize reads a size as Spark does (JavaUtils.byteStringAs): a whole
// number with an optional unit b, k, kb, m, mb, g, gb, t, tb, p or pb
// (binary multiples, any case); without one, unit bytes each.
func ParseSize(s string, unit int64) (int64, error) {
	const maxMemory = 1 << 50
	m := sizeRE.FindStringSubmatch(strings.ToLower(strings.TrimSpace(s)))
	if m == nil {
		return 0, fmt.Errorf("not a size such as 4g or 512m (Spark takes whole numbers only)")
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s is too large", m[1])
	}
	mult := unit
	switch m[2] {
	case "":
	case "b":
		mult = 1
	case "k", "kb":
		mult = 1 << 10
	case "m", "mb":
		mult = 1 << 20
	case "g", "gb":
		mult = 1 << 30
	case "t", "tb":
		mult = 1 << 40
	case "p", "pb":
		mult = 1 << 50
	default:
		return 0, fmt.Errorf("unknown unit %q", m[2])
	}
	if n > maxMemory/mult {
		return 0, fmt.Errorf("%s is more memory than any machine has (over 1 PiB)", s)
	}
	return n * mult, nil
}

// Executor is what an executor (or the driver, ID "driver") was given and
// reached, from Spark's REST API and, where said, the metrics stream.
type Executor struct {
	ID           string
	Peaks        map[string]int64 // peakMemoryMetrics
	TaskTimeMs   int64            // totalDuration
	ShuffleWrite int64            // totalShuffleWrite: bytes of shuffle files it wrote
	GCTimeMs     int64            // totalGCTime
	RemoveReason string
	Cores        int // totalCores
	// Slots is Spark's maxTasks: the tasks it runs at once, by the
	// limiting resource of its profile; 0 when not reported. GPUs are
	// the GPU addresses Spark gave it (its resources); ResourceProfile
	// its resource profile's id (0: the default, of the properties).
	Slots, GPUs, ResourceProfile int
	// Of an executor of another resource profile than the default, what
	// its profile says (ProfileContainer; the profile's task cpus): 0
	// where it is not known, or for the default profile, whose are the
	// Settings' and Resources'.
	Container int64
	TaskCPUs  int
	// RunTimeCPUs is how many of its profile's task cpus Spark's run time
	// of its tasks counts (RunTimeCPUs by Spark version): 0 where it is
	// the application's (Resources.RunTimeCPUs).
	RunTimeCPUs int
	AliveMs     int64 // from its addition to its removal, or the application's end
	// Released: the driver let it go while the application ran (dynamic
	// allocation, after spark.dynamicAllocation.executorIdleTimeout idle).
	Released bool
	// From the metrics stream (0 when not known): the sums of the deltas
	// of executor.cpuTime, executor.runTime and the cgroup plugin's
	// CPUTimeNanosec, and the mean of its process-tree resident memory.
	CPUNs, RunMs, CgroupCPUNs int64
	MeanRSS                   int64
	// TreeRSS is the peak of the process tree's resident memory at one
	// moment (the stream's reports, JVM, Python and other summed report
	// by report); 0 when not known.
	TreeRSS int64
}

// RSS is the peak of an executor's process tree's resident memory: the
// sum of its JVM's, its Python workers' and its other processes' peaks,
// which may be moments apart and so overstate it, unless the stream
// says the peak of their sum at one moment; that, then, but never less
// than any one part's peak (Spark's heartbeats sample other moments).
func (x Executor) RSS() int64 {
	jvm, py, other := x.Peaks["ProcessTreeJVMRSSMemory"], x.Peaks["ProcessTreePythonRSSMemory"], x.Peaks["ProcessTreeOtherRSSMemory"]
	sum := jvm + py + other
	if x.TreeRSS <= 0 {
		return sum
	}
	return min(sum, max(x.TreeRSS, jvm, py, other))
}

// Headroom is one executor's peaks against the limits. The JSON names are
// those of `sparkpulse report --json`.
type Headroom struct {
	ID                string  `json:"id"`
	RSS               int64   `json:"peak_rss_bytes"` // JVM + Python + other processes, peak of each
	ContainerUse      float64 `json:"container_use"`  // RSS / container
	Heap              int64   `json:"peak_heap_bytes"`
	HeapUse           float64 `json:"heap_use"`
	Unified           int64   `json:"peak_execution_storage_bytes"` // execution + storage, on heap
	UnifiedUse        float64 `json:"unified_use"`
	Python            int64   `json:"peak_python_rss_bytes"`
	GCShare           float64 `json:"gc_share"`    // GC time / task time; 0 when unknown
	RemoveKind        string  `json:"remove_kind"` // RemoveKind of its removal reason; "" while it runs
	KilledForMemory   bool    `json:"killed_for_memory"`
	ProcessTreeMetric bool    `json:"process_tree_metrics"` // the RSS peaks were reported
}

// Finding is a rule's verdict on an executor ("" for all of them).
type Finding struct {
	Rule     string `json:"rule"` // container, python, heap, unified
	Executor string `json:"executor,omitempty"`
	Text     string `json:"text"`
}

// Setting is a recommended value for a Spark property, with what it
// would save.
type Setting struct {
	Property string
	Current  int64 // bytes; 0 when not set
	Value    int64 // bytes
	Reason   string
	// For a setting that is not a size (cores, a number of executors):
	// the values as Spark takes them.
	CurrentText, ValueText string
	Rule                   string // the rule that recommends it
	// What the cluster would have held less of, had the application run
	// with it (negative: more), in the units of Usage; and what could go
	// wrong.
	SavingCoreSeconds, SavingByteSeconds float64
	SavingGPUSeconds                     float64 // GPUs × seconds
	Risk                                 string
}

// ValueString is the recommended value as Spark takes it: 5g, 2.
func (s Setting) ValueString() string {
	if s.ValueText != "" {
		return s.ValueText
	}
	return SparkSize(s.Value)
}

// CurrentString is the current value as Spark takes it, "" when not set.
// A default Spark works out (10 % of the heap) need not be a whole
// number of MiB; it is then written in MiB with a decimal, since no
// setting could say it.
func (s Setting) CurrentString() string {
	switch {
	case s.CurrentText != "":
		return s.CurrentText
	case s.Current > 0 && s.Current%mib != 0 && s.Current > mib:
		return strconv.FormatFloat(float64(s.Current)/float64(mib), 'f', 1, 64) + " MiB"
	case s.Current > 0:
		return SparkSize(s.Current)
	}
	return ""
}

// Advice is the outcome for an application.
type Advice struct {
	Settings        Settings
	Executors       []Headroom // the highest container use first
	Findings        []Finding
	Recommendations []Setting
	Notes           []string
}

// Advise applies the rules to the executors' peaks.
func Advise(s Settings, execs []Executor) Advice {
	a := Advice{Settings: s}
	container, unified := s.Container(), s.Unified()
	var maxRSS, maxPython, maxPythonV, maxNative int64
	anyRSS, killed, heapPressure := false, false, false
	var limit int64 // the largest limit a YARN kill message stated
	var vmemKilled []string
	others := 0
	for _, x := range execs {
		if x.ID == "driver" {
			continue
		}
		if x.ResourceProfile != 0 {
			// Another resource profile's limits are not these
			// settings': its executors are left out of the rules.
			others++
			continue
		}
		p := func(k string) int64 { return x.Peaks[k] }
		h := Headroom{ID: x.ID, ProcessTreeMetric: p("ProcessTreeJVMRSSMemory") > 0,
			RSS:  x.RSS(),
			Heap: p("JVMHeapMemory"), Unified: p("OnHeapExecutionMemory") + p("OnHeapStorageMemory"),
			Python: p("ProcessTreePythonRSSMemory")}
		if x.RemoveReason != "" {
			h.RemoveKind = s.RemoveKind(x.RemoveReason)
			h.KilledForMemory = h.RemoveKind == RemovedContainerOOM
			if h.KilledForMemory {
				limit = max(limit, YARNLimit(x.RemoveReason))
				// What YARN measured as it killed the container is a
				// peak of the process tree too.
				if used := YARNUsed(x.RemoveReason); used > h.RSS {
					h.RSS, h.ProcessTreeMetric = used, true
				}
			}
		}
		h.ContainerUse = ratio(h.RSS, container)
		h.HeapUse, h.UnifiedUse = ratio(h.Heap, s.Heap), ratio(h.Unified, unified)
		if x.TaskTimeMs > 0 {
			h.GCShare = float64(x.GCTimeMs) / float64(x.TaskTimeMs)
		}
		anyRSS = anyRSS || h.ProcessTreeMetric
		killed = killed || h.KilledForMemory
		if h.RemoveKind == RemovedContainerVMem {
			vmemKilled = append(vmemKilled, x.ID)
		}

		switch {
		case h.KilledForMemory:
			a.find("container", x.ID, "removed for exceeding its memory limit: %s", oneLine(x.RemoveReason))
		case h.ProcessTreeMetric && h.ContainerUse >= 0.9:
			a.find("container", x.ID, "resident memory peaked at %s, %.0f %% of the %s container", Bytes(h.RSS), 100*h.ContainerUse, Bytes(container))
		}
		if h.ProcessTreeMetric {
			maxRSS = max(maxRSS, h.RSS)
		}
		// The JVM's memory outside the heap that it reports: metaspace
		// and code cache (non-heap), direct and mapped buffers.
		maxNative = max(maxNative, p("JVMOffHeapMemory")+p("DirectPoolMemory")+p("MappedPoolMemory"))
		if h.Python > 0 {
			maxPython = max(maxPython, h.Python)
			maxPythonV = max(maxPythonV, x.Peaks["ProcessTreePythonVMemory"])
		}
		switch {
		case h.RemoveKind == RemovedHeapOOM && RemoveKind(x.RemoveReason) == RemovedTerminated:
			a.find("heap", x.ID, "the executor was terminated (SIGTERM, exit 143), which on YARN is the JVM's -XX:OnOutOfMemoryError='kill %%p' that Spark sets: it ran out of heap (%s): %s",
				Bytes(s.Heap), oneLine(x.RemoveReason))
			heapPressure = true
		case h.RemoveKind == RemovedHeapOOM:
			a.find("heap", x.ID, "the JVM ran out of heap (%s) and the executor exited: %s", Bytes(s.Heap), oneLine(x.RemoveReason))
			heapPressure = true
		case h.GCShare >= 0.10 && h.HeapUse >= 0.9 && s.ConcurrentGC == "":
			a.find("heap", x.ID, "heap used to %.0f %% of %s while GC took %.0f %% of task time", 100*h.HeapUse, Bytes(s.Heap), 100*h.GCShare)
			heapPressure = true
		}
		if h.UnifiedUse >= 0.9 {
			a.find("unified", x.ID, "execution and storage memory peaked at %s, %.0f %% of the %s unified region: expect spills and evicted cache blocks",
				Bytes(h.Unified), 100*h.UnifiedUse, Bytes(unified))
		}
		a.Executors = append(a.Executors, h)
	}
	// Killed executors first, then by container use, highest first.
	slices.SortStableFunc(a.Executors, func(x, y Headroom) int {
		killed := func(h Headroom) int {
			if h.KilledForMemory {
				return 0
			}
			return 1
		}
		return cmp.Or(killed(x)-killed(y), cmp.Compare(y.ContainerUse, x.ContainerUse))
	})
	if len(vmemKilled) > 0 {
		a.Notes = append(a.Notes, fmt.Sprintf("executor %s killed by YARN's virtual-memory check, which counts address space the JVM reserves and never uses (YARN-4714): "+
			"no sign of too little memory, and no memory advice from it; the fix is the NodeManager's yarn.nodemanager.vmem-pmem-ratio, or yarn.nodemanager.vmem-check-enabled=false",
			strings.Join(vmemKilled, ", ")))
	}
	if others > 0 {
		a.Notes = append(a.Notes, fmt.Sprintf("%d executors of other resource profiles (stage-level scheduling) are left out of the memory rules: their limits are their profiles'", others))
	}
	if s.ConcurrentGC != "" {
		a.Notes = append(a.Notes, "the executors run "+s.ConcurrentGC+", whose GC time is that of its concurrent cycles, not of pauses: the GC-pressure part of the heap rule is quiet")
	}
	if !anyRSS {
		a.Notes = append(a.Notes, "no process-tree metrics: the container and Python rules need spark.executor.processTreeMetrics.enabled=true (Linux)")
	}
	if s.LocalDirsInMemory {
		var shuffle int64
		for _, x := range execs {
			if x.ID != "driver" {
				shuffle = max(shuffle, x.ShuffleWrite)
			}
		}
		a.Notes = append(a.Notes, fmt.Sprintf("the local dirs are in memory (spark.kubernetes.local.dirs.tmpfs=true): their shuffle files (the largest executor wrote %s) and spills count against the pod's memory limit, "+
			"and no resident memory shows them, so the container figures understate what the pod held, and nothing is shrunk", Bytes(shuffle)))
	}

	// python first: raising spark.executor.pyspark.memory enlarges the
	// container the container rule then checks against.
	pyspark := s.PySpark
	if maxPython > 0 {
		if s.PySpark == 0 {
			// Without the setting the container rule sizes the overhead
			// for the workers: setting it from resident memory would put
			// an address-space limit on each worker (below).
			if use := ratio(maxPython, s.Overhead); use >= 0.5 {
				a.find("python", "", "Python workers peaked at %s, %.0f %% of the memory overhead, which Python workers share with the JVM's off-heap memory without spark.executor.pyspark.memory (%s)",
					Bytes(maxPython), 100*use, Bytes(s.Overhead))
			}
		} else if use := ratio(maxPython, s.PySpark); use >= 0.9 {
			a.find("python", "", "Python workers peaked at %s, %.0f %% of spark.executor.pyspark.memory (%s)", Bytes(maxPython), 100*use, Bytes(s.PySpark))
			// Spark enforces the setting on each worker as an
			// address-space limit (RLIMIT_AS, its share of the setting):
			// what the workers map, not what is resident, must fit.
			if maxPythonV > 0 {
				if v := roundUp(maxPythonV+maxPythonV/9, 64*mib); v > s.PySpark {
					pyspark = v
					a.Recommendations = append(a.Recommendations, Setting{Property: "spark.executor.pyspark.memory", Current: s.PySpark, Value: pyspark,
						Reason: fmt.Sprintf("the Python workers' peak address space %s is then 90 %% of it: Spark limits each worker's address space to its share", Bytes(maxPythonV)), Rule: "python",
						Risk: "Python workers over their share fail their tasks with MemoryError instead of growing the container"})
				}
			} else {
				a.Notes = append(a.Notes, "the Python workers' virtual memory (ProcessTreePythonVMemory) was not reported: spark.executor.pyspark.memory, an address-space limit per worker, is not advised from resident memory")
			}
		}
	}
	// The plan: the heap the heap rule gives, so that the container is
	// checked with it (a JVM's resident memory grows with its heap).
	heap := s.Heap
	if heapPressure {
		if h := roundUp(s.Heap+s.Heap/4, 256*mib); h <= compressedOops {
			heap = h
		} else {
			a.Notes = append(a.Notes, fmt.Sprintf("a quarter more heap (%s) would pass %s, past which the JVM no longer compresses its object pointers and needs more heap for the same objects: fewer tasks per heap instead",
				Bytes(h), Bytes(compressedOops)))
		}
	}
	grow := heap - s.Heap
	// Without spark.executor.pyspark.memory the Python workers live in
	// the overhead beside the JVM's own native memory: where they take
	// half of it or more (the python finding), or a container was
	// killed, the container holds the whole heap, that and them, even
	// where the JVM's resident memory is not reported. The JVM's native
	// memory is what Spark's default overhead gives it, or what it
	// reported outside the heap (non-heap, direct and mapped buffers) if
	// more: that report is a floor, without thread stacks, the
	// collector's structures, malloc's arenas, and on Spark 4 netty's
	// buffers.
	pythonNeed, native := int64(0), max(maxNative, s.DefaultOverhead(heap))
	pythonFinding := slices.ContainsFunc(a.Findings, func(f Finding) bool { return f.Rule == "python" })
	if s.PySpark == 0 && maxPython > 0 && (pythonFinding || killed) {
		pythonNeed = heap + s.OffHeap + native + maxPython + (native+maxPython)/9
	}
	if maxRSS > 0 || killed || pythonNeed > 0 {
		need := maxRSS + maxRSS/9 + grow // the peak is then 90 % of the container, with the heap's growth
		why := fmt.Sprintf("the largest resident memory, %s, is then at most 90 %% of the container", Bytes(maxRSS))
		if grow > 0 {
			why = fmt.Sprintf("the largest resident memory, %s, with the %s more heap, is then at most 90 %% of the container", Bytes(maxRSS), Bytes(grow))
		}
		if pythonNeed > need {
			need = pythonNeed
			why = fmt.Sprintf("the whole %s heap, the JVM's %s of native memory and the Python workers' peak %s then fit the container, with a tenth of the last two to spare",
				Bytes(heap), Bytes(native), Bytes(maxPython))
		}
		// YARN's message states the limit it enforced, which its
		// rounding to the minimum allocation may put above Spark's sum.
		had := max(container, limit)
		if k := max(maxRSS+maxRSS/4, had+had/4) + grow; killed && k > need {
			// The peak that got it killed was not sampled: keep a
			// quarter more than the largest seen.
			need = k
			why = "an executor was killed over its memory limit at a peak no heartbeat saw: the container plus a quarter"
			if limit > container {
				why = fmt.Sprintf("an executor was killed over its memory limit at a peak no heartbeat saw: the %s limit YARN stated (its rounding of the %s Spark asked for) plus a quarter",
					Bytes(limit), Bytes(container))
			}
		}
		// With the heap and spark.executor.pyspark.memory of the plan,
		// the container holds them too; an overhead Spark's default
		// for the new heap already gives is not asked for.
		if overhead := roundUp(need-heap-pyspark-s.OffHeap, 64*mib); overhead > s.OverheadFor(heap) {
			a.Recommendations = append(a.Recommendations, Setting{Property: "spark.executor.memoryOverhead", Current: s.Overhead, Value: overhead, Reason: why,
				Rule: "container", Risk: "executors killed over their memory limit, and their tasks run again"})
		}
	}
	if grow > 0 {
		a.Recommendations = append(a.Recommendations, Setting{Property: "spark.executor.memory", Current: s.Heap, Value: heap,
			Reason: "a quarter more heap, the usual first step against GC pressure", Rule: "heap",
			Risk: "time lost to garbage collection, and executors out of heap"})
	}
	return a
}

// compressedOops is the largest heap the plan gives: past about 32 GiB
// the JVM stops compressing its object pointers (-XX:+UseCompressedOops
// needs the heap within 32 GiB at its default 8-byte alignment), and the
// same objects then take more of it.
const compressedOops = 31 << 30

// Planned is the container with every memory setting of recs applied:
// the overhead Spark gives the new heap where none is set or
// recommended.
func (s Settings) Planned(recs []Setting) (heap, overhead, pyspark, container int64) {
	heap, pyspark = s.Heap, s.PySpark
	o := int64(-1) // recommended; else the heap's (OverheadFor)
	for _, r := range recs {
		switch r.Property {
		case "spark.executor.memory":
			heap = r.Value
		case "spark.executor.memoryOverhead":
			o = r.Value
		case "spark.executor.pyspark.memory":
			pyspark = r.Value
		}
	}
	if o < 0 {
		o = s.OverheadFor(heap)
	}
	return heap, o, pyspark, heap + o + pyspark + s.OffHeap
}

// oneLine writes a cluster manager's reason, which may run over lines
// (Kubernetes' container statuses), on one.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func (a *Advice) find(rule, exec, format string, args ...any) {
	a.Findings = append(a.Findings, Finding{Rule: rule, Executor: exec, Text: fmt.Sprintf(format, args...)})
}

func ratio(n, d int64) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / float64(d)
}

func roundUp(n, step int64) int64 { return (n + step - 1) / step * step }

// Bytes writes a size for people: 2.7 GiB, 512 MiB, 3 KiB.
func Bytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// SparkSize writes a size as a Spark setting takes it: 5g, 1408m.
func SparkSize(n int64) string {
	switch {
	case n > 0 && n%(1<<30) == 0:
		return fmt.Sprintf("%dg", n>>30)
	case n%(1<<20) == 0:
		return fmt.Sprintf("%dm", n>>20)
	}
	return fmt.Sprintf("%db", n)
}
