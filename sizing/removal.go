package sizing

import (
	"regexp"
	"strconv"
	"strings"
)

// Why an executor was removed, from the reason Spark records, which is the
// cluster manager's words or Spark's own. The kinds, each with what it
// says about memory:
const (
	// RemovedHeapOOM: the JVM ran out of heap and exited (exit code 52,
	// SparkExitCode.OOM, or an OutOfMemoryError named): a heap problem.
	RemovedHeapOOM = "heap_oom"
	// RemovedContainerOOM: the cluster manager killed the container over
	// its memory limit (YARN "Container killed by YARN for exceeding
	// physical memory limits", exit -104; Kubernetes "termination reason:
	// OOMKilled" in the container statuses): a container problem, heap
	// plus overhead plus Python too small.
	RemovedContainerOOM = "container_oom"
	// RemovedContainerVMem: YARN's NodeManager killed the container for
	// its virtual memory ("… exceeding virtual memory limits", exit
	// -103). The check counts address space the JVM and its native
	// libraries reserve and never touch (YARN-4714): it says nothing of
	// resident memory, and the fix is the NodeManager's
	// yarn.nodemanager.vmem-pmem-ratio or vmem-check-enabled, not the
	// executor's memory.
	RemovedContainerVMem = "container_vmem"
	// RemovedKilled: killed by SIGKILL (exit code 137) with no memory
	// kill named. Kubernetes appends "possible container OOM" to every
	// 137 (ExecutorPodsLifecycleManager), evictions and spot reclaims
	// included: only OOMKilled says memory.
	RemovedKilled = "killed"
	// RemovedTerminated: ended by SIGTERM (exit code 143) with no
	// preemption named. On YARN, Spark starts executors with
	// -XX:OnOutOfMemoryError='kill %p' (YarnSparkHadoopUtil), so a heap
	// OutOfMemoryError usually ends this way; a node manager's or a
	// user's kill reads the same. Not to be taken for preemption.
	RemovedTerminated = "terminated"
	// RemovedPreempted: taken back by the scheduler (YARN "was
	// preempted", exit -102; a Kubernetes pod "deleted by a user or the
	// framework", or evicted): not the application's fault.
	RemovedPreempted = "preempted"
	// RemovedDecommissioned: the node, worker or executor was
	// decommissioned ("Executor decommission: worker decommissioned",
	// "… Decommissioning all executors on <host>.", a SIGPWR, a
	// Kubernetes roll).
	RemovedDecommissioned = "decommissioned"
	// RemovedReleased: the driver let it go (dynamic allocation, the end
	// of the application). With spark.decommission.enabled, dynamic
	// allocation releases an executor by decommissioning it, which Spark
	// records as "Executor decommission: spark scale down"
	// (ExecutorAllocationManager): a release, not a node's loss.
	RemovedReleased = "released"
	// RemovedHeartbeat: no heartbeat reached the driver in time, or the
	// executor gave up sending them (exit 56, HEARTBEAT_FAILURE).
	RemovedHeartbeat = "heartbeat_timeout"
	// RemovedCrashed: the JVM died of a signal of its own, SIGABRT (exit
	// 134) or SIGSEGV (139): a native crash (a native library, off-heap
	// code, the JVM itself). Memory is possible (an abort on a failed
	// native allocation), not shown: no advice from it, and no shrinking
	// after it.
	RemovedCrashed = "crashed"
	// RemovedLocalDir: the executor could not create its local directory
	// (exit 53, DISK_STORE_FAILED_TO_CREATE_DIR: a bad or full
	// spark.local.dir): the node's disk, not the application's memory.
	RemovedLocalDir = "local_dir"
	// RemovedLost: the connection was lost for another reason.
	RemovedLost = "lost"
	// RemovedOther: none of the above, or no reason.
	RemovedOther = "other"
)

var exitCodeRE = regexp.MustCompile(`(?i)exit (?:code|status)(?: is)?[: ]*(-?\d+)|exited with code (-?\d+)`)

// RemoveKind classifies a removal reason: by its words first (they are the
// more specific), then by the exit code it names.
func RemoveKind(reason string) string {
	r := strings.ToLower(reason)
	switch {
	case r == "":
		return RemovedOther
	case strings.Contains(r, "exceeding virtual memory limit"):
		return RemovedContainerVMem
	case strings.Contains(r, "exceeding") && strings.Contains(r, "memory limit"),
		strings.Contains(r, "oomkilled"):
		return RemovedContainerOOM
	case strings.Contains(r, "outofmemoryerror"), strings.Contains(r, "jvm oom"):
		return RemovedHeapOOM
	case strings.Contains(r, "preempted"), strings.Contains(r, "deleted by a user or the framework"),
		strings.Contains(r, "brief reason: evicted"):
		return RemovedPreempted
	case strings.Contains(r, "decommission: spark scale down"):
		return RemovedReleased
	case strings.Contains(r, "decommission"):
		return RemovedDecommissioned
	case strings.Contains(r, "explicit termination request"), strings.Contains(r, "killed by driver"),
		strings.Contains(r, "released by driver"):
		return RemovedReleased
	case strings.Contains(r, "heartbeat timed out"):
		return RemovedHeartbeat
	}
	if m := exitCodeRE.FindStringSubmatch(r); m != nil {
		code, _ := strconv.Atoi(m[1] + m[2])
		switch code {
		case 52:
			return RemovedHeapOOM
		case 53:
			return RemovedLocalDir
		case 56:
			return RemovedHeartbeat
		case 134, 139:
			return RemovedCrashed
		case 137:
			return RemovedKilled
		case 143:
			return RemovedTerminated
		}
	}
	if strings.Contains(r, "disassociated") || strings.Contains(r, "lost") {
		return RemovedLost
	}
	return RemovedOther
}

// yarnKillRE reads the use and the limit out of YARN's kill message, as
// Spark's YarnAllocator quotes it: "1.4 GB of 1 GB physical memory used"
// (TraditionalBinaryPrefix, at most one decimal).
var yarnKillRE = regexp.MustCompile(`([0-9.]+) ?([KMGT]?)B of ([0-9.]+) ?([KMGT]?)B physical memory used`)

// YARNLimit is the physical-memory limit a YARN kill message states, in
// bytes; 0 when the reason states none. YARN rounds each container up to
// a multiple of yarn.scheduler.minimum-allocation-mb, which Spark does
// not know: the stated limit is the container the executor really had.
func YARNLimit(reason string) int64 {
	m := yarnKillRE.FindStringSubmatch(reason)
	if m == nil {
		return 0
	}
	return yarnBytes(m[3], m[4])
}

// YARNUsed is the resident memory of the process tree a YARN kill
// message states the NodeManager measured when it killed the container,
// in bytes; 0 when the reason states none. It is a peak no heartbeat may
// have seen: a lower bound of the true one.
func YARNUsed(reason string) int64 {
	m := yarnKillRE.FindStringSubmatch(reason)
	if m == nil {
		return 0
	}
	return yarnBytes(m[1], m[2])
}

// yarnBytes reads YARN's "1.4" "G": one decimal of a binary unit.
func yarnBytes(num, unit string) int64 {
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f <= 0 || f > 1<<20 {
		return 0
	}
	return int64(f * map[string]float64{"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[unit])
}

// PythonMemoryError reports whether a task's or stage's failure is a
// Python worker's MemoryError: Python's traceback, whose last line names
// the type, in PySpark's PythonException, or on Spark 4 a stage's
// "[PYTHON_EXCEPTION] An exception was thrown from the Python worker".
func PythonMemoryError(msg string) bool {
	return (strings.Contains(msg, "PythonException") || strings.Contains(msg, "[PYTHON_EXCEPTION]")) && strings.Contains(msg, "\nMemoryError")
}

// PythonWorkerCrashed reports whether a task's or stage's failure is a
// Python worker that ended without a Python error: Spark's PythonRunner
// says "Python worker exited unexpectedly (crashed)" (3.5 and 4.x) when
// the worker's socket closes under it. Python's fault handler, where it
// is on, reports a crash of the worker's own ("Fatal Python error: …"),
// which is not this: no handler runs on SIGKILL, the kernel OOM killer's
// signal.
func PythonWorkerCrashed(msg string) bool {
	return strings.Contains(msg, "Python worker exited unexpectedly (crashed)") && !strings.Contains(msg, "Fatal Python error")
}
