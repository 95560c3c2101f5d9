package sizing

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Accounting: what an application was given against what it used.
//
//   - Given: each executor's cores and container (Settings.Container)
//     for as long as it lived, from its addition to its removal or the
//     application's end, summed as core-seconds and byte-seconds; the
//     driver side likewise, for what the cluster holds for it
//     (Resources.DriverHeld: the driver's container in cluster mode, the
//     YARN application master's in client mode, else nothing). This is
//     Spark's view of what the cluster holds for the application: a
//     cluster manager holds a container from its allocation, before the
//     executor registers, and YARN rounds it up to its allocation
//     increment (annotate writes YARN's own figures beside these where
//     its ResourceManager is read).
//   - Used: the task CPU time, task run time and GC time of the
//     executors; where the CERN SparkPlugins' cgroup metrics report it
//     for every executor, the containers' CPU time, which counts Python
//     workers and other children too, unless it cannot be the
//     containers' own (cgroupDoubt); the peak and mean resident memory
//     of each executor.
//   - Utilisation: CPU used (the containers' where known, else the
//     tasks') over executor core-seconds; memory: the largest executor's
//     peak resident memory over the container, and the mean over the
//     executors of their mean resident memory over the container.

// Resources are an application's settings beyond executor memory: cores,
// the driver, dynamic allocation.
type Resources struct {
	ExecutorCores     int   // spark.executor.cores; 0 when not set (the cluster manager's default)
	DriverCores       int   // spark.driver.cores, default 1
	DriverHeap        int64 // spark.driver.memory, default 1g
	DriverOverhead    int64 // spark.driver.memoryOverhead, or its default
	MaxResultSize     int64 // spark.driver.maxResultSize, default 1g; 0: unlimited
	DynamicAllocation bool  // spark.dynamicAllocation.enabled
	IdleTimeout       time.Duration
	Instances         int // spark.executor.instances; 0 when not set
	MaxExecutors      int // spark.dynamicAllocation.maxExecutors; 0 when not set (unbounded)
	MinExecutors      int // spark.dynamicAllocation.minExecutors; 0 when not set
	TaskCPUs          int // spark.task.cpus, default 1: the cores each task holds
	// Standalone: spark.master is spark://. Its Master ignores
	// spark.executor.instances without dynamic allocation: an
	// application gets spark.cores.max cores (CoresMax; all the workers'
	// free cores when 0), in executors of spark.executor.cores each, or
	// one executor per worker when that is not set.
	Standalone bool
	CoresMax   int
	// RunTimeCPUs is how many of TaskCPUs Spark's task run time already
	// counts (RunTimeCPUs, by the application's Spark version): set by
	// the caller, as the properties do not say the version; 0 reads as 1.
	RunTimeCPUs int
	// ClusterMode: spark.submit.deployMode is cluster (not in local mode):
	// the driver runs in a container of the cluster.
	ClusterMode bool
	// The YARN application master of client mode (spark.yarn.am.*).
	AMCores              int
	AMMemory, AMOverhead int64
	// YARN: spark.master is yarn. The CERN cgroup plugin reads cgroup v1
	// files at fixed paths; in a YARN container, which has no cgroup
	// namespace of its own, those are the node's.
	YARN bool
	// On Kubernetes (spark.master k8s://) a pod's CPU request, which the
	// scheduler holds for it, is spark.kubernetes.executor.request.cores
	// (executors of the default resource profile only: Spark's
	// BasicExecutorFeatureStep) and spark.kubernetes.driver.request.cores
	// when set, else the cores; 0 when not set.
	ExecutorRequestCores, DriverRequestCores float64
	// YARNMinMemory and YARNMemoryStep are how YARN's scheduler rounds a
	// container's memory up (YARNAllocation): at least the minimum, in
	// steps; 0 when not known (then Spark's sizes are what is counted).
	// Set by the caller from the Hadoop properties.
	YARNMinMemory, YARNMemoryStep int64
	// GPUs: spark.executor.resource.gpu.amount and
	// spark.driver.resource.gpu.amount, 0 when not set. An executor's own
	// (its REST resources) wins over the property: resource profiles
	// give other amounts. TaskGPUs is spark.task.resource.gpu.amount
	// (a whole number, or a fraction up to 0.5 that shares a GPU).
	ExecutorGPUs, DriverGPUs int
	TaskGPUs                 float64
}

// YARNAllocationKeys are the Hadoop properties YARNAllocation reads.
var YARNAllocationKeys = []string{"yarn.resourcemanager.scheduler.class", "yarn.scheduler.minimum-allocation-mb",
	"yarn.resource-types.memory-mb.increment-allocation", "yarn.scheduler.increment-allocation-mb"}

// YARNAllocation is how YARN's scheduler rounds a container's memory,
// from the Hadoop configuration the application ran with (Spark's
// environment lists it): the capacity scheduler, YARN's default, to a
// multiple of yarn.scheduler.minimum-allocation-mb (1024); the fair
// scheduler to at least that, in steps of its increment (yarn.resource-
// types.memory-mb.increment-allocation, before Hadoop 3.1
// yarn.scheduler.increment-allocation-mb; 1024). Zeros when the minimum
// is not listed (YARN's configuration was not read), a value is not a
// whole number of MiB, or the scheduler is another's.
func YARNAllocation(hadoop map[string]string) (least, step int64) {
	mb := func(key string, def int64) int64 {
		v, ok := hadoop[key]
		if !ok {
			return def
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n <= 0 || n > 1<<30 {
			return -1
		}
		return n
	}
	if _, ok := hadoop["yarn.scheduler.minimum-allocation-mb"]; !ok {
		// YARN's defaults (yarn-default.xml) list it wherever its
		// configuration was read: without it, nothing is known.
		return 0, 0
	}
	least = mb("yarn.scheduler.minimum-allocation-mb", 1024)
	switch class := strings.TrimSpace(hadoop["yarn.resourcemanager.scheduler.class"]); {
	case class == "" || strings.HasSuffix(class, ".CapacityScheduler"):
		step = least
	case strings.HasSuffix(class, ".FairScheduler"):
		step = mb("yarn.resource-types.memory-mb.increment-allocation", mb("yarn.scheduler.increment-allocation-mb", 1024))
	default:
		return 0, 0
	}
	if least < 0 || step <= 0 {
		return 0, 0
	}
	return least * mib, step * mib
}

// YARNContainer is the memory YARN holds for a container Spark asks
// bytes for: rounded up as its scheduler does, where that is known.
func (r Resources) YARNContainer(bytes int64) int64 {
	if !r.YARN || r.YARNMemoryStep <= 0 {
		return bytes
	}
	return roundUp(max(bytes, r.YARNMinMemory), r.YARNMemoryStep)
}

// HeldCores is what the cluster holds of an executor's cores: its pod's
// CPU request on Kubernetes where one is set for its resource profile,
// else its cores.
func (r Resources) HeldCores(x Executor) float64 {
	if r.ExecutorRequestCores > 0 && x.ResourceProfile == 0 {
		return r.ExecutorRequestCores
	}
	return float64(r.cores(x))
}

// cores is an executor's cores: its own, else spark.executor.cores.
func (r Resources) cores(x Executor) int {
	if x.Cores > 0 {
		return x.Cores
	}
	return r.ExecutorCores
}

// gpus is an executor's GPUs: its own, else the property's for the
// default profile.
func (r Resources) gpus(x Executor) int {
	if x.GPUs > 0 || x.ResourceProfile != 0 {
		return x.GPUs
	}
	return r.ExecutorGPUs
}

// slots is an executor's task slots, the tasks it runs at once, by the
// resource that limits them (ResourceProfile.maxTasksPerExecutor): its
// cores ÷ spark.task.cpus, or fewer where each task takes a GPU (4
// cores and one GPU, a GPU a task: one slot), at least one. Spark's own
// maxTasks counts the limiting resource only where the live UI knew it:
// a History Server, and a standalone cluster without
// spark.executor.cores, list cores ÷ the profile's task cpus. For the
// default profile the properties say it; for another, its maxTasks.
func (r Resources) slots(x Executor) int {
	cpus := 1 // another profile's task cpus are in its maxTasks, when not known
	switch {
	case x.ResourceProfile == 0:
		cpus = max(r.TaskCPUs, 1)
	case x.TaskCPUs > 0:
		cpus = x.TaskCPUs
	}
	n := max(r.cores(x)/cpus, 1)
	if x.Slots > 0 {
		n = min(n, x.Slots)
	}
	if gpus := r.gpus(x); gpus > 0 && r.TaskGPUs > 0 && x.ResourceProfile == 0 {
		// ResourceUtils.calculateAmountAndPartsForFraction: a fraction
		// shares a GPU among 1/amount tasks, a whole number takes that
		// many GPUs.
		perTask, parts := int(math.Ceil(r.TaskGPUs)), 1
		if r.TaskGPUs <= 0.5 {
			parts = int(math.Floor(1 / r.TaskGPUs))
		}
		n = min(n, max(gpus*parts/perTask, 1))
	}
	return n
}

// DriverContainer is the memory the cluster manager grants the driver in
// cluster mode.
func (r Resources) DriverContainer() int64 { return r.DriverHeap + r.DriverOverhead }

// What the cluster holds for the driver side of an application, by
// spark.submit.deployMode (default client):
//   - cluster: the driver's own container, spark.driver.cores and
//     spark.driver.memory plus its overhead;
//   - client on YARN: the driver runs where it was submitted, outside the
//     cluster; YARN holds the application master's container instead,
//     spark.yarn.am.cores (1) and spark.yarn.am.memory (512m) plus its
//     overhead (spark.yarn.am.memoryOverhead, else 10 %, at least
//     384 MiB: Spark's Client.scala);
//   - client elsewhere, and local mode: nothing on the cluster.
const (
	DriverInCluster = "driver"  // cluster mode: the driver's container
	DriverYARNAM    = "yarn_am" // YARN client mode: the application master's
	DriverOutside   = "outside" // client mode: the driver is not on the cluster
)

// DriverHeld is what the cluster holds for the driver side, per second:
// cores (the pod's CPU request on Kubernetes), bytes and GPUs, with which
// of the cases above it is.
func (r Resources) DriverHeld() (cores float64, bytes int64, gpus int, what string) {
	switch {
	case r.ClusterMode && r.DriverRequestCores > 0:
		return r.DriverRequestCores, r.DriverContainer(), r.DriverGPUs, DriverInCluster
	case r.ClusterMode:
		return float64(r.DriverCores), r.YARNContainer(r.DriverContainer()), r.DriverGPUs, DriverInCluster
	case r.YARN:
		return float64(r.AMCores), r.YARNContainer(r.AMMemory + r.AMOverhead), 0, DriverYARNAM
	}
	return 0, 0, 0, DriverOutside
}

// ResourcesFromProperties reads Resources from Spark's properties, with
// Spark's defaults. An error names the property and its value.
func ResourcesFromProperties(props map[string]string) (Resources, error) {
	r := Resources{DriverCores: 1, IdleTimeout: time.Minute}
	var err error
	fail := func(key, v, why string) {
		if err == nil {
			err = fmt.Errorf("%s = %q: %s", key, v, why)
		}
	}
	count := func(key string, def, most int) int {
		v, ok := props[key]
		if !ok {
			return def
		}
		n, perr := strconv.Atoi(strings.TrimSpace(v))
		if perr != nil || n < 0 {
			fail(key, v, "not a whole number")
			return def
		}
		if n > most {
			fail(key, v, fmt.Sprintf("more than %d, which no cluster gives", most))
			return def
		}
		return n
	}
	size := func(key string, unit, def int64) int64 {
		v, ok := props[key]
		if !ok {
			return def
		}
		n, perr := ParseSize(v, unit)
		if perr != nil {
			fail(key, v, perr.Error())
			return def
		}
		return n
	}
	const maxCores, maxInstances = 1 << 16, 1 << 20
	r.ExecutorCores = count("spark.executor.cores", 0, maxCores)
	r.DriverCores = count("spark.driver.cores", 1, maxCores)
	r.Instances = count("spark.executor.instances", 0, maxInstances)
	r.CoresMax = count("spark.cores.max", 0, maxCores*maxInstances)
	r.MaxExecutors = count("spark.dynamicAllocation.maxExecutors", 0, maxInstances)
	r.MinExecutors = count("spark.dynamicAllocation.minExecutors", 0, maxInstances)
	r.TaskCPUs = max(count("spark.task.cpus", 1, maxCores), 1)
	r.DriverHeap = size("spark.driver.memory", mib, 1024*mib)
	// The driver's own factor, else Kubernetes' (0.4 for a non-JVM
	// application, as its submission client sets it), else Spark's 0.10.
	factor := 0.10
	for _, key := range []string{"spark.kubernetes.memoryOverheadFactor", "spark.driver.memoryOverheadFactor"} {
		v, ok := props[key]
		if !ok {
			continue
		}
		f, perr := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if perr != nil || f <= 0 || f > 1 || math.IsNaN(f) {
			fail(key, v, "not a fraction in (0, 1]")
		} else {
			factor = f
		}
	}
	minOverhead := size("spark.driver.minMemoryOverhead", mib, 384*mib)
	r.DriverOverhead = max(minOverhead, int64(factor*float64(r.DriverHeap)))
	if key := overheadKey(props, "spark.driver.memoryOverhead", "spark.yarn.driver.memoryOverhead"); key != "" {
		r.DriverOverhead = size(key, mib, r.DriverOverhead)
	}
	r.MaxResultSize = size("spark.driver.maxResultSize", 1, 1<<30)
	r.DynamicAllocation = strings.EqualFold(strings.TrimSpace(props["spark.dynamicAllocation.enabled"]), "true")
	master := strings.TrimSpace(props["spark.master"])
	r.YARN = strings.HasPrefix(master, "yarn")
	r.Standalone = strings.HasPrefix(master, "spark://")
	r.ClusterMode = strings.TrimSpace(props["spark.submit.deployMode"]) == "cluster" && !strings.HasPrefix(master, "local")
	r.AMCores = count("spark.yarn.am.cores", 1, maxCores)
	r.AMMemory = size("spark.yarn.am.memory", mib, 512*mib)
	r.AMOverhead = size("spark.yarn.am.memoryOverhead", mib, max(384*mib, r.AMMemory/10))
	if strings.HasPrefix(master, "k8s://") {
		for _, p := range []struct {
			key string
			to  *float64
		}{{"spark.kubernetes.executor.request.cores", &r.ExecutorRequestCores}, {"spark.kubernetes.driver.request.cores", &r.DriverRequestCores}} {
			key, to := p.key, p.to
			if v, ok := props[key]; ok {
				if c, perr := CPUQuantity(v); perr != nil || c > maxCores {
					fail(key, v, "not a Kubernetes CPU quantity such as 1, 0.5 or 500m")
				} else {
					*to = c
				}
			}
		}
	}
	r.ExecutorGPUs = count("spark.executor.resource.gpu.amount", 0, maxCores)
	r.DriverGPUs = count("spark.driver.resource.gpu.amount", 0, maxCores)
	if v, ok := props["spark.task.resource.gpu.amount"]; ok {
		f, perr := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if perr != nil || !(f > 0) || f > maxCores || f > 0.5 && f != math.Trunc(f) {
			fail("spark.task.resource.gpu.amount", v, "not a whole number of GPUs, or a fraction of one up to 0.5")
		} else {
			r.TaskGPUs = f
		}
	}
	if v, ok := props["spark.dynamicAllocation.executorIdleTimeout"]; ok {
		d, perr := parseSparkDuration(v)
		if perr != nil {
			fail("spark.dynamicAllocation.executorIdleTimeout", v, perr.Error())
		} else {
			r.IdleTimeout = d
		}
	}
	return r, err
}

// CPUQuantity reads a Kubernetes CPU quantity as Spark passes it to the
// pod (a string the API server parses): a decimal number of cores, with
// an optional exponent (1, 0.5, 1e3) or suffix, decimal (n, u, m, k, M,
// G, T, P, E) or binary (Ki … Ei): 500m is half a core.
func CPUQuantity(v string) (float64, error) {
	v = strings.TrimSpace(v)
	i := len(v)
	for i > 0 && (v[i-1] >= 'A' && v[i-1] <= 'Z' || v[i-1] >= 'a' && v[i-1] <= 'z') && v[i-1] != 'e' && v[i-1] != 'E' {
		i--
	}
	suffix := map[string]float64{"": 1, "n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
		"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60}
	scale, ok := suffix[v[i:]]
	num := v[:i]
	if !ok || num == "" || strings.ContainsAny(num, "xXpP_") || strings.HasPrefix(num, "-") {
		return 0, fmt.Errorf("not a CPU quantity")
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || !(f > 0) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("not a CPU quantity")
	}
	return f * scale, nil
}

// parseSparkDuration reads a time as Spark does (JavaUtils.timeStringAs)
// with seconds as the default unit: 60s, 2min, 500ms, 1h, 60.
func parseSparkDuration(v string) (time.Duration, error) {
	v = strings.ToLower(strings.TrimSpace(v))
	i := len(v)
	for i > 0 && (v[i-1] < '0' || v[i-1] > '9') {
		i--
	}
	n, err := strconv.ParseInt(v[:i], 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("not a time such as 60s or 2min")
	}
	units := map[string]time.Duration{"": time.Second, "us": time.Microsecond, "ms": time.Millisecond, "s": time.Second,
		"m": time.Minute, "min": time.Minute, "h": time.Hour, "d": 24 * time.Hour}
	u, ok := units[strings.TrimSpace(v[i:])]
	if !ok {
		return 0, fmt.Errorf("unknown unit %q", v[i:])
	}
	return time.Duration(n) * u, nil
}

// Usage is an application's accounting. The JSON names are those of
// `sparkpulse report --json` and, with the same names, the fields of the
// spark_app_usage measurement.
type Usage struct {
	DurationMs                int64   `json:"duration_ms"`
	Executors                 int     `json:"executors"` // that ever ran
	ExecutorCoreSeconds       float64 `json:"executor_core_seconds"`
	ExecutorMemoryByteSeconds float64 `json:"executor_memory_byte_seconds"`
	DriverCoreSeconds         float64 `json:"driver_core_seconds"`
	DriverMemoryByteSeconds   float64 `json:"driver_memory_byte_seconds"`
	DriverHeld                string  `json:"driver_held"` // what the driver seconds count: DriverInCluster, DriverYARNAM or DriverOutside
	// GPUs held, × seconds: each executor's for its life, the driver's in
	// cluster mode; 0 without GPUs.
	ExecutorGPUSeconds float64 `json:"executor_gpu_seconds,omitempty"`
	DriverGPUSeconds   float64 `json:"driver_gpu_seconds,omitempty"`
	// SlotCoreSeconds is the executors' own cores × their lives, what the
	// task slots stand for: ExecutorCoreSeconds but where a pod requested
	// fewer cores than it runs tasks on (Kubernetes). SlotCores is the
	// cores a task slot stands for, on average over those: the
	// executor's cores ÷ its task slots (Resources.slots), so
	// spark.task.cpus, or more where another resource (a GPU) limits the
	// tasks an executor runs.
	SlotCoreSeconds       float64 `json:"-"`
	SlotCores             float64 `json:"-"`
	TaskCPUSeconds        float64 `json:"task_cpu_seconds"`
	TaskRunSeconds        float64 `json:"task_run_seconds"`
	GCSeconds             float64 `json:"gc_seconds"`
	ContainerCPUSeconds   float64 `json:"container_cpu_seconds"` // cgroup plugin; 0 when not reported
	CPUUsedSeconds        float64 `json:"cpu_used_seconds"`      // the containers' CPU where known, else the tasks'
	CPUUtilisation        float64 `json:"cpu_utilisation"`       // CPU used / executor core-seconds
	CPUFrom               string  `json:"cpu_from"`              // container (cgroup plugin), tasks (executors' counters) or stages (Spark's stage list)
	PeakRSS               int64   `json:"peak_rss_bytes"`        // the largest executor's, process tree
	MeanRSS               int64   `json:"mean_rss_bytes"`        // mean over executors of their mean
	PeakPythonRSS         int64   `json:"peak_python_rss_bytes"`
	MemoryUtilisation     float64 `json:"memory_utilisation"`      // PeakRSS / container
	MeanMemoryUtilisation float64 `json:"mean_memory_utilisation"` // MeanRSS / container
	MeanRSSByteSeconds    float64 `json:"mean_rss_byte_seconds"`   // each executor's mean resident memory × its life
	Container             int64   `json:"container_bytes"`
	Cores                 int     `json:"executor_cores"` // per executor, as most had
	// SetAside names the processes' stream figures that could not be true
	// and were not used, and why.
	SetAside []string `json:"set_aside,omitempty"`
	// SpilledBytes is what the application's tasks spilled from memory
	// (Spark's stage list); the shrink rule is quiet after any spill.
	SpilledBytes int64 `json:"-"`
	// The figures below are nil (absent) when they cannot be known; the
	// notes say why (see figures.go).
	SlotOccupancy    *float64 `json:"slot_occupancy,omitempty"`    // Σ task run time ÷ executor core-seconds held
	DriverOnlyMs     *int64   `json:"driver_only_ms,omitempty"`    // wall clock with no stage attempt running
	DriverOnlyGapsMs []int64  `json:"-"`                           // the same, stretch by stretch (Gaps)
	LostTaskSeconds  *float64 `json:"lost_task_seconds,omitempty"` // run time of task attempts that failed or were killed, and of tasks run again
	// RecomputeTaskSeconds is the run time of successful tasks run again
	// for shuffle output lost with an executor, in LostTaskSeconds when
	// that is known (the failed tasks' time may not be): the stream's run
	// time counts it already.
	RecomputeTaskSeconds *float64 `json:"recompute_task_seconds,omitempty"`
	FailedStageAttempts  *int     `json:"failed_stage_attempts,omitempty"` // stage attempts Spark marked FAILED
	Outcome              string   `json:"outcome,omitempty"`               // succeeded, failed, running, unknown, driver_lost
	CoresHeld            int      `json:"cores_held,omitempty"`            // a running application's: its live executors' cores at the read
	TaskCPUs             int      `json:"task_cpus"`                       // spark.task.cpus: the cores each task holds
	RunTimeCPUs          int      `json:"-"`                               // of them, those Spark's task run time counts already (RunTimeCPUs)
	BusySlotSeconds      float64  `json:"busy_slot_seconds"`               // the core-seconds held while tasks ran: executor_core_seconds × slot occupancy
	OutcomeReason        string   `json:"outcome_reason,omitempty"`
	Notes                []string
}

// cgroupPartial begins Account's note when the cgroup plugin reported
// some executors only.
const cgroupPartial = "the cgroup plugin reported"

// noTaskCPU is Account's note when no executor's task CPU is known.
const noTaskCPU = "no task CPU time in the metrics stream: CPU utilisation unknown"

// TaskTimesFromStages replaces the executors' task CPU and run time with
// Spark's totals over every task of its stage list, for when the stream's
// figures of some executors were set aside. Failed tasks' time is in
// them too: it was used.
func (u *Usage) TaskTimesFromStages(cpuNs, runMs int64) {
	u.TaskCPUSeconds, u.TaskRunSeconds = float64(cpuNs)/1e9, float64(runMs)/1000
	u.CPUFrom, u.CPUUsedSeconds, u.CPUUtilisation = "stages", u.TaskCPUSeconds, 0
	if u.ExecutorCoreSeconds > 0 {
		u.CPUUtilisation = u.CPUUsedSeconds / u.ExecutorCoreSeconds
	}
	u.Notes = slices.DeleteFunc(u.Notes, func(n string) bool { return n == noTaskCPU || strings.HasPrefix(n, cgroupPartial) })
	u.Notes = append(u.Notes, "task CPU and run time from Spark's stage list: the stream's were set aside")
	u.occupancy()
}

// TaskTimesUnknown says that the executors' task CPU and run time are not
// known, for when the stream's figures of some were set aside and Spark's
// stage list cannot stand in.
func (u *Usage) TaskTimesUnknown(why string) {
	u.TaskCPUSeconds, u.TaskRunSeconds, u.CPUFrom, u.CPUUsedSeconds, u.CPUUtilisation = 0, 0, "", 0, 0
	u.Notes = slices.DeleteFunc(u.Notes, func(n string) bool { return n == noTaskCPU || strings.HasPrefix(n, cgroupPartial) })
	u.Notes = append(u.Notes, "CPU utilisation unknown: "+why)
	u.occupancy()
}

// cgroupDoubt says why the cgroup plugin's CPU cannot be an executor
// container's own, or "". The plugin reads cgroup v1 paths: on YARN they
// are the node's, and where they name a container without its own CPU
// accounting they count others too. A container's CPU holds its task
// threads' (so it is at least their CPU time), and with a CPU limit at
// the executor's cores it is at most cores × lifetime; past either bound
// (5 % margin for when the two are sampled) the figure is someone
// else's, and utilisation from it would hide idle executors.
func cgroupDoubt(r Resources, execs []Executor) string {
	if r.YARN {
		return "on YARN the plugin's cgroup v1 paths are the node's"
	}
	for _, x := range execs {
		if x.ID == "driver" || x.CgroupCPUNs <= 0 {
			continue
		}
		cores := x.Cores
		if cores == 0 {
			cores = r.ExecutorCores
		}
		held := float64(cores) * float64(max(x.AliveMs, 0)) * 1e6 // ns
		if cores > 0 && float64(x.CgroupCPUNs) > 1.05*held {
			return fmt.Sprintf("executor %s: %.0f s of CPU in %.0f s of %d cores", x.ID, float64(x.CgroupCPUNs)/1e9, held/1e9, cores)
		}
		if float64(x.CgroupCPUNs) < 0.95*float64(x.CPUNs) {
			return fmt.Sprintf("executor %s: %.0f s of CPU, less than its tasks' %.0f s", x.ID, float64(x.CgroupCPUNs)/1e9, float64(x.CPUNs)/1e9)
		}
	}
	return ""
}

// Account works out what the application was given and used. execs are
// its processes (the driver's ID is "driver"); durationMs its run time.
func Account(s Settings, r Resources, execs []Executor, durationMs int64) Usage {
	u := Usage{DurationMs: durationMs, Container: s.Container(), TaskCPUs: max(r.TaskCPUs, 1), RunTimeCPUs: max(r.RunTimeCPUs, 1)}
	var cpuNs, cgroupNs, runMs, gcMs, meanRSS int64
	var slotSeconds float64
	otherProfile := 0 // executors of another resource profile
	var cgroupExecs, rssExecs, withCPU int
	coreCount := map[int]int{}
	for _, x := range execs {
		alive := float64(max(x.AliveMs, 0)) / 1000
		if x.ID == "driver" {
			cores, bytes, gpus, what := r.DriverHeld()
			u.DriverCoreSeconds = cores * alive
			u.DriverMemoryByteSeconds = float64(bytes) * alive
			u.DriverGPUSeconds = float64(gpus) * alive
			u.DriverHeld = what
			continue
		}
		u.Executors++
		cores := r.cores(x)
		coreCount[cores]++
		u.ExecutorCoreSeconds += r.HeldCores(x) * alive
		u.SlotCoreSeconds += float64(cores) * alive
		slotSeconds += float64(r.slots(x)) * alive
		u.ExecutorGPUSeconds += float64(r.gpus(x)) * alive
		container := u.Container
		if x.Container > 0 {
			container = x.Container // its resource profile's
		}
		u.ExecutorMemoryByteSeconds += float64(r.YARNContainer(container)) * alive
		if x.CPUNs > 0 {
			withCPU++
		}
		cpuNs += x.CPUNs
		if c := x.RunTimeCPUs; c > 0 && c != u.RunTimeCPUs {
			// Another profile's run time counts its own task cpus (Spark
			// 4): in the application's count, so that one factor turns
			// the sum into slot time.
			runMs += x.RunMs * int64(u.RunTimeCPUs) / int64(c)
		} else {
			runMs += x.RunMs
		}
		gcMs += x.GCTimeMs
		if x.CgroupCPUNs > 0 {
			cgroupNs += x.CgroupCPUNs
			cgroupExecs++
		}
		if x.ResourceProfile != 0 {
			otherProfile++
			continue // its memory is against its own profile's container
		}
		rss := x.RSS()
		u.PeakRSS = max(u.PeakRSS, rss)
		u.PeakPythonRSS = max(u.PeakPythonRSS, x.Peaks["ProcessTreePythonRSSMemory"])
		if x.MeanRSS > 0 {
			meanRSS += x.MeanRSS
			rssExecs++
			u.MeanRSSByteSeconds += float64(x.MeanRSS) * alive
		}
	}
	for c, n := range coreCount {
		if n > coreCount[u.Cores] || n == coreCount[u.Cores] && c > u.Cores {
			u.Cores = c
		}
	}
	u.SlotCores = float64(u.TaskCPUs)
	if slotSeconds > 0 && u.SlotCoreSeconds > 0 {
		u.SlotCores = u.SlotCoreSeconds / slotSeconds
	}
	u.TaskCPUSeconds, u.TaskRunSeconds, u.GCSeconds = float64(cpuNs)/1e9, float64(runMs)/1000, float64(gcMs)/1000
	u.ContainerCPUSeconds = float64(cgroupNs) / 1e9
	used := u.TaskCPUSeconds
	u.CPUFrom = "tasks"
	switch why := cgroupDoubt(r, execs); {
	case cgroupExecs > 0 && why != "":
		u.Notes = append(u.Notes, cgroupPartial+" CPU that is not the executors' own ("+why+"): CPU from the tasks")
	case cgroupExecs > 0 && cgroupExecs == u.Executors:
		used, u.CPUFrom = u.ContainerCPUSeconds, "container"
	case cgroupExecs > 0:
		u.Notes = append(u.Notes, fmt.Sprintf(cgroupPartial+" %d of %d executors: CPU from the tasks", cgroupExecs, u.Executors))
	}
	u.CPUUsedSeconds = used
	if u.ExecutorCoreSeconds > 0 {
		u.CPUUtilisation = used / u.ExecutorCoreSeconds
	}
	if withCPU == 0 && u.Executors > 0 {
		u.Notes = append(u.Notes, noTaskCPU)
		u.CPUFrom, u.CPUUsedSeconds, u.CPUUtilisation = "", 0, 0
	}
	u.occupancy()
	if rssExecs > 0 {
		u.MeanRSS = meanRSS / int64(rssExecs)
	}
	u.MemoryUtilisation = ratio(u.PeakRSS, u.Container)
	u.MeanMemoryUtilisation = ratio(u.MeanRSS, u.Container)
	if otherProfile > 0 {
		u.Notes = append(u.Notes, fmt.Sprintf("%d executors of other resource profiles: held at their profiles' containers, their memory not set against the default profile's nor advised", otherProfile))
	}
	if u.PeakRSS == 0 && u.Executors > otherProfile {
		u.Notes = append(u.Notes, "no process-tree metrics: memory utilisation unknown (spark.executor.processTreeMetrics.enabled=true)")
	}
	return u
}
