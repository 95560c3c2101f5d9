package spark

import (
	"testing"

	"github.com/sparkpulse/sparkpulse/delta"
)

func TestDeltaRules(t *testing.T) {
	rules, err := delta.CompileRules(DeltaRules())
	if err != nil {
		t.Fatal(err)
	}
	const app = "app-20261122101500-0001"
	for path, want := range map[string]bool{
		// Cumulative per spark-metrics §3.
		app + ".3.executor.cpuTime.count":                                              true,
		app + ".3.executor.runTime.count":                                              true,
		app + ".3.executor.succeededTasks.count":                                       true,
		app + ".3.executor.shuffleTotalBytesRead.count":                                true,
		app + ".3.executor.filesystem.hdfs.read_bytes":                                 true,
		app + ".3.executor.filesystem.s3a.largeRead_ops":                               true,
		app + ".3.executor.threadpool.completeTasks":                                   true,
		app + ".3.ExecutorMetrics.TotalGCTime":                                         true,
		app + ".3.ExecutorMetrics.MinorGCCount":                                        true,
		app + ".3.JVMCPU.jvmCpuTime":                                                   true,
		app + ".3.jvm.G1-Young-Generation.count":                                       true,
		app + ".3.jvm.G1-Young-Generation.time":                                        true,
		app + ".driver.DAGScheduler.job.allJobs":                                       true,
		app + ".driver.DAGScheduler.messageProcessingTime.count":                       true,
		app + ".driver.appStatus.jobs.succeededJobs.count":                             true,
		app + ".driver.LiveListenerBus.numEventsPosted.count":                          true,
		app + ".driver.HiveExternalCatalog.filesDiscovered.count":                      true,
		app + ".driver.App.StreamingMetrics.streaming.totalProcessedRecords":           true,
		"spark.prod." + app + ".1.executor.cpuTime.count":                              true,
		"shuffleService.numCaughtExceptions.count":                                     true,
		app + ".3.plugin.ch.cern.CgroupMetrics.CPUTimeNanosec":                         true,
		app + ".3.plugin.ch.cern.CgroupMetrics.NetworkBytesOut":                        true,
		app + ".3.plugin.ch.cern.HDFSMetrics.bytesReadDistanceOfOneOrTwo":              true,
		app + ".3.plugin.ch.cern.CloudFSMetrics.writeOps":                              true,
		app + ".3.plugin.ch.cern.experimental.S3ATimeInstrumentation.S3AReadTimeMuSec": true,
		// Not cumulative, although some end in ".count".
		app + ".3.jvm.direct.count":                                false,
		app + ".3.jvm.mapped.count":                                false,
		"shuffleService.numActiveConnections.count":                false,
		"host1.shuffleService.numRegisteredConnections.count":      false,
		app + ".3.executor.threadpool.activeTasks":                 false,
		app + ".3.ExecutorMetrics.JVMHeapMemory":                   false,
		app + ".driver.DAGScheduler.messageProcessingTime.p99":     false,
		app + ".driver.DAGScheduler.messageProcessingTime.m1_rate": false,
		app + ".driver.DAGScheduler.job.activeJobs":                false,
		app + ".3.jvm.heap.used":                                   false,
		app + ".3.jvm.pools.G1-Eden-Space.used":                    false,
		app + ".driver.spark.streaming.q.inputRate-total":          false,
		app + ".3.plugin.ch.cern.CgroupMetrics.MemoryRss":          false,
		app + ".3.plugin.ch.cern.CgroupMetrics.MemorySwap":         false,
	} {
		if got, _ := rules.Match([]byte(path), nil); got != want {
			t.Errorf("%s: cumulative = %v, want %v", path, got, want)
		}
	}
}
