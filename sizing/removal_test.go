package sizing

import "testing"

// Each wording is Spark's or its cluster manager's, as it lands in
// removeReason; the sources are named.
func TestRemoveKind(t *testing.T) {
	for _, tc := range []struct{ reason, want string }{
		// YARN (YarnAllocator.processCompletedContainers): a memory kill,
		// with Spark's advice; -104 physical, -103 virtual.
		{"Container killed by YARN for exceeding physical memory limits. 5.5 GB of 5.5 GB physical memory used. Consider boosting spark.executor.memoryOverhead.", RemovedContainerOOM},
		{"Container killed by YARN for exceeding virtual memory limits. 9.1 GB of 8.4 GB virtual memory used. Consider boosting spark.executor.memoryOverhead or boosting yarn.nodemanager.vmem-pmem-ratio or disabling yarn.nodemanager.vmem-check-enabled because of YARN-4714.", RemovedContainerVMem},
		// YARN: any other exit is "from a bad node" with its status (Spark
		// 4 adds ExecutorExitCode.explainExitCode's "Possible causes").
		{"Container from a bad node: container_1_0001_01_000002 on host: node-7. Exit status: 52. Diagnostics: Exception from container-launch.", RemovedHeapOOM},
		{"Container from a bad node: container_1_0001_01_000002 on host: node-7. Exit status: 52. Possible causes: OutOfMemoryError Diagnostics: Exception from container-launch.", RemovedHeapOOM},
		{"Container from a bad node: container_1_0001_01_000003 on host: node-7. Exit status: 137. Diagnostics: Container killed on request. Exit code is 137", RemovedKilled},
		// A heap OutOfMemoryError on YARN: -XX:OnOutOfMemoryError='kill %p'
		// sends SIGTERM, 143 — not a preemption.
		{"Container from a bad node: container_1_0001_01_000004 on host: node-8. Exit status: 143. Diagnostics: Container killed on request. Exit code is 143", RemovedTerminated},
		{"Container from a bad node: container_1_0001_01_000004 on host: node-8. Exit status: 143. Possible causes: Unknown executor exit code (143) (died from signal 15?) Diagnostics: [2026-11-20 10:00:00.000]Container killed on request. Exit code is 143", RemovedTerminated},
		{"Container container_1_0001_01_000005 on host: node-8 was preempted.", RemovedPreempted},
		{"Container marked as failed: container_1_0001_01_000006 on host: node-9. Exit status: -100. Diagnostics: Container released on a *lost* node.", RemovedLost},
		// YARN, Spark's own fixture application_1628109047826_1317105.
		{"Container container_e18_1628109047826_1317105_01_000002 exited from explicit termination request.", RemovedReleased},
		// Kubernetes (ExecutorPodsLifecycleManager.exitReasonMessage):
		// "possible container OOM" follows every 137; only the container
		// status's OOMKilled says memory.
		{"\nThe executor with id 3 exited with exit code 137(SIGKILL, possible container OOM).\n\n\n\nThe API gave the following container statuses:\n\n\t container name: spark-kubernetes-executor\n\t container image: spark:4.0.1\n\t container state: terminated\n\t container started at: 2026-11-20T10:00:00Z\n\t container finished at: 2026-11-20T10:05:00Z\n\t exit code: 137\n\t termination reason: OOMKilled\n", RemovedContainerOOM},
		{"\nThe executor with id 3 exited with exit code 137(SIGKILL, possible container OOM).\n\n\n\nThe API gave the following container statuses:\n\n\t container name: spark-kubernetes-executor\n\t exit code: 137\n\t termination reason: Error\n", RemovedKilled},
		{"\nThe executor with id 6 exited with exit code 137(SIGKILL, possible container OOM).\nThe API gave the following brief reason: Evicted\nThe API gave the following message: The node was low on resource: ephemeral-storage.\n", RemovedPreempted},
		{"The executor with id 7 was deleted by a user or the framework.", RemovedPreempted},
		{"The executor with id 4 exited with exit code 52(JVM OOM).", RemovedHeapOOM},
		{"The executor with id 5 exited with exit code 143(SIGTERM).", RemovedTerminated},
		// Standalone and local-cluster (ExecutorRunner), as the real-Spark
		// suite sees them, and the driver.
		{"Command exited with code 52", RemovedHeapOOM},
		{"Command exited with code 137", RemovedKilled},
		// Spark's own exit codes (ExecutorExitCode) and a JVM killed by
		// its own signal, as standalone, YARN 4.x and Kubernetes word them.
		{"Command exited with code 53", RemovedLocalDir},
		{"Command exited with code 56", RemovedHeartbeat},
		{"Command exited with code 134", RemovedCrashed},
		{"Container from a bad node: container_e01_0001_01_000002 on host: node-1. Exit status: 139. Possible causes: Unknown executor exit code (139) (died from signal 11?) Diagnostics: Container exited with a non-zero exit code 139.", RemovedCrashed},
		{"The executor with id 3 exited with exit code 134(unexpected).", RemovedCrashed},
		{"Command exited with code 50", RemovedOther},
		{"Executor heartbeat timed out after 134028 ms", RemovedHeartbeat},
		{"Remote RPC client disassociated. Likely due to containers exceeding thresholds, or network issues. Check driver logs for WARN messages.", RemovedLost},
		{"Executor decommission: worker decommissioned", RemovedDecommissioned},
		{"Executor decommission: Decommissioning all executors on node-3.example.", RemovedDecommissioned},
		{"Executor decommission: Executor 7 is decommissioned.", RemovedDecommissioned},
		// Dynamic allocation with spark.decommission.enabled releases an
		// idle executor by decommissioning it.
		{"Executor decommission: spark scale down", RemovedReleased},
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

// Where Spark ends executors out of heap with SIGTERM (YARN), an exit
// 143 is an executor out of heap; the cluster manager's own kills keep
// their kinds.
func TestSettingsRemoveKind(t *testing.T) {
	yarn, k8s := Settings{KillOnOOM: true}, Settings{}
	for _, tc := range []struct {
		s            Settings
		reason, want string
	}{
		{yarn, "Container from a bad node: container_1_0001_01_000004 on host: node-8. Exit status: 143. Possible causes: Unknown executor exit code (143) (died from signal 15?) Diagnostics: [2026-11-20 10:00:00.000]Container killed on request. Exit code is 143", RemovedHeapOOM},
		{k8s, "The executor with id 5 exited with exit code 143(SIGTERM).", RemovedTerminated},
		{yarn, "Container container_1_0001_01_000005 on host: node-8 was preempted.", RemovedPreempted},
		{yarn, "Container marked as failed: container_1_0001_01_000006 on host: node-9. Exit status: -100. Diagnostics: Container released on a *lost* node.", RemovedLost},
		{yarn, "Container killed by YARN for exceeding physical memory limits. 1.3 GB of 1 GB physical memory used. Consider boosting spark.executor.memoryOverhead.", RemovedContainerOOM},
		{yarn, "Executor killed by driver.", RemovedReleased},
		{yarn, "Container from a bad node: container_1_0001_01_000003 on host: node-7. Exit status: 137. Diagnostics: Container killed on request. Exit code is 137", RemovedKilled},
	} {
		if got := tc.s.RemoveKind(tc.reason); got != tc.want {
			t.Errorf("KillOnOOM %v: RemoveKind(%.60q) = %s, want %s", tc.s.KillOnOOM, tc.reason, got, tc.want)
		}
	}
}

func TestYARNLimit(t *testing.T) {
	for reason, want := range map[string]int64{
		"Container killed by YARN for exceeding physical memory limits. 5.5 GB of 5.5 GB physical memory used.":  5632 << 20,
		"Container killed by YARN for exceeding physical memory limits. 7.1 GB of 7 GB physical memory used":     7 << 30,
		"Container killed by YARN for exceeding physical memory limits. 900.2 MB of 896 MB physical memory used": 896 << 20,
		// Virtual memory is not the container's size; no limit stated.
		"Container killed by YARN for exceeding virtual memory limits. 9.1 GB of 8.4 GB virtual memory used": 0,
		"Command exited with code 137": 0,
		"":                             0,
	} {
		if got := YARNLimit(reason); got != want {
			t.Errorf("YARNLimit(%q) = %d, want %d", reason, got, want)
		}
	}
}
