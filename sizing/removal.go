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
	// its memory limit (YARN "exceeding … memory limits", Kubernetes
	// OOMKilled or "possible container OOM"): a container problem, heap
	// plus overhead plus Python too small.
	RemovedContainerOOM = "container_oom"
	// RemovedKilled: killed by a signal (exit code 137, SIGKILL) with no
	// reason given; on Kubernetes and YARN usually the memory limit too.
	RemovedKilled = "killed"
	// RemovedPreempted: stopped by the scheduler (exit code 143, SIGTERM,
	// YARN preemption): not the application's fault.
	RemovedPreempted = "preempted"
	// RemovedDecommissioned: the node or executor was decommissioned.
	RemovedDecommissioned = "decommissioned"
	// RemovedReleased: the driver let it go (dynamic allocation, the end
	// of the application).
	RemovedReleased = "released"
	// RemovedHeartbeat: no heartbeat reached the driver in time.
	RemovedHeartbeat = "heartbeat_timeout"
	// RemovedLost: the connection was lost for another reason.
	RemovedLost = "lost"
	// RemovedOther: none of the above, or no reason.
	RemovedOther = "other"
)

var exitCodeRE = regexp.MustCompile(`(?i)exit (?:code|status)(?: is)?[: ]*(\d+)|exited with code (\d+)`)

// RemoveKind classifies a removal reason: by its words first (they are the
// more specific), then by the exit code it names.
func RemoveKind(reason string) string {
	r := strings.ToLower(reason)
	switch {
	case r == "":
		return RemovedOther
	case strings.Contains(r, "exceeding") && strings.Contains(r, "memory limit"),
		strings.Contains(r, "oomkilled"), strings.Contains(r, "possible container oom"):
		return RemovedContainerOOM
	case strings.Contains(r, "outofmemoryerror"), strings.Contains(r, "jvm oom"):
		return RemovedHeapOOM
	case strings.Contains(r, "preempted"):
		return RemovedPreempted
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
		case 137:
			return RemovedKilled
		case 143:
			return RemovedPreempted
		}
	}
	if strings.Contains(r, "disassociated") || strings.Contains(r, "lost") {
		return RemovedLost
	}
	return RemovedOther
}
