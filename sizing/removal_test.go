package sizing

import "testing"

// Each wording is Spark's or its cluster manager's, as it lands in
// removeReason; the sources are named.
func TestRemoveKind(t *testing.T) {
	for _, tc := range []struct{ reason, want string }{
		// YARN (YarnAllocator): a memory kill, with Spark's advice.
		{"Container killed by YARN for exceeding physical memory limits. 5.5 GB of 5.5 GB physical memory used. Consider boosting spark.executor.memoryOverhead.", RemovedContainerOOM},
		{"Container killed by YARN for exceeding virtual memory limits. 9.1 GB of 8.4 GB virtual memory used.", RemovedContainerOOM},
		// YARN: the exit status of the container, 52 = SparkExitCode.OOM.
		{"Container marked as failed: container_1_0001_01_000002 on host: node-7. Exit status: 52. Diagnostics: Exception from container-launch.", RemovedHeapOOM},
		{"Container marked as failed: container_1_0001_01_000003 on host: node-7. Exit status: 137. Diagnostics: Container killed on request. Exit code is 137", RemovedKilled},
		{"Container marked as failed: container_1_0001_01_000004 on host: node-8. Exit status: 143. Diagnostics: Container killed on request. Exit code is 143", RemovedPreempted},
		{"Container container_1_0001_01_000005 on host: node-8 was preempted.", RemovedPreempted},
		// YARN, Spark's own fixture application_1628109047826_1317105.
		{"Container container_e18_1628109047826_1317105_01_000002 exited from explicit termination request.", RemovedReleased},
		// Kubernetes (ExecutorPodsLifecycleManager).
		{"The executor with id 3 exited with exit code 137(SIGKILL, possible container OOM).\nThe API gave the following brief reason: OOMKilled", RemovedContainerOOM},
		{"The executor with id 4 exited with exit code 52(JVM OOM).", RemovedHeapOOM},
		{"The executor with id 5 exited with exit code 143(unexpected).", RemovedPreempted},
		// Standalone (ExecutorRunner) and the driver.
		{"Command exited with code 52", RemovedHeapOOM},
		{"Executor heartbeat timed out after 134028 ms", RemovedHeartbeat},
		{"Remote RPC client disassociated. Likely due to containers exceeding thresholds, or network issues. Check driver logs for WARN messages.", RemovedLost},
		{"Executor decommission: worker decommissioned", RemovedDecommissioned},
		{"Executor killed by driver.", RemovedReleased},
		{"java.lang.OutOfMemoryError: Java heap space", RemovedHeapOOM},
		{"", RemovedOther},
		{"something else", RemovedOther},
	} {
		if got := RemoveKind(tc.reason); got != tc.want {
			t.Errorf("RemoveKind(%.60q) = %s, want %s", tc.reason, got, tc.want)
		}
	}
}
