package spark

import "github.com/sparkpulse/sparkpulse/delta"

// DeltaRules are the built-in rules that say which Spark series are
// cumulative, so that sparkpulse adds delta and rate fields to them. They
// match the Graphite path, so they work with the built-in mapping and with
// templates alike. The first matching rule wins: the exceptions come first.
//
// Sources: Spark's ExecutorSource, ExecutorMetricsSource, JVMCPU source,
// DAGSchedulerSource, AppStatusSource, StreamingSource, JvmSource and
// ExternalShuffleServiceSource, and the CERN SparkPlugins' metrics (see
// docs/deltas.md).
func DeltaRules() []delta.Rule {
	const src = "built-in Spark rules"
	return []delta.Rule{
		// Gauges that end in ".count" but go up and down: JvmSource's buffer
		// pool counts, and the shuffle service's connection counters.
		{Source: src, Cumulative: false, Path: []string{
			"**.jvm.{direct,mapped}.count",
			"**.shuffleService.{numActiveConnections,numRegisteredConnections,deferredBlockBytes}.count",
		}},
		// ExecutorSource task counters, by unit.
		{Source: src, Cumulative: true, Unit: "ns", Path: []string{
			"**.executor.{cpuTime,deserializeCpuTime,shuffleWriteTime}.count",
		}},
		{Source: src, Cumulative: true, Unit: "ms", Path: []string{
			"**.executor.{runTime,deserializeTime,jvmGCTime,resultSerializationTime,shuffleFetchWaitTime,shuffleRemoteReqsDuration,shuffleMergedRemoteReqsDuration}.count",
		}},
		{Source: src, Cumulative: true, Unit: "bytes", Path: []string{
			"**.executor.{bytesRead,bytesWritten,resultSize,diskBytesSpilled,memoryBytesSpilled,shuffleBytesWritten,shuffleTotalBytesRead,shuffleRemoteBytesRead,shuffleLocalBytesRead,shuffleRemoteBytesReadToDisk,shuffleMergedRemoteBytesRead,shuffleMergedLocalBytesRead}.count",
			"**.executor.filesystem.*.{read_bytes,write_bytes}",
		}},
		// Every other Dropwizard counter, meter, timer and histogram count
		// (records, blocks, tasks, jobs, stages, events), and JvmSource's
		// per-collector GC counts.
		{Source: src, Cumulative: true, Unit: "count", Path: []string{"**.count"}},
		// Gauges that only grow while the JVM lives.
		{Source: src, Cumulative: true, Unit: "count", Path: []string{
			"**.executor.threadpool.{completeTasks,startedTasks}",
			"**.executor.filesystem.*.{read_ops,largeRead_ops,write_ops}",
			"**.ExecutorMetrics.{MinorGCCount,MajorGCCount,ConcurrentGCCount}",
			"**.DAGScheduler.job.allJobs",
			"**.StreamingMetrics.streaming.{totalCompletedBatches,totalReceivedRecords,totalProcessedRecords}",
		}},
		{Source: src, Cumulative: true, Unit: "ms", Path: []string{
			"**.ExecutorMetrics.{MinorGCTime,MajorGCTime,TotalGCTime,ConcurrentGCTime}",
			"**.jvm.*.time",
		}},
		{Source: src, Cumulative: true, Unit: "ns", Path: []string{"**.JVMCPU.jvmCpuTime"}},
		// CERN SparkPlugins (spark.plugins=ch.cern.CgroupMetrics, …): their
		// cumulative gauges, so that the CPU of a container — Python
		// workers' included — and its I/O add up like the task metrics.
		{Source: src, Cumulative: true, Unit: "ns", Path: []string{"**.plugin.ch.cern.CgroupMetrics.CPUTimeNanosec"}},
		{Source: src, Cumulative: true, Unit: "bytes", Path: []string{
			"**.plugin.ch.cern.CgroupMetrics.{NetworkBytesIn,NetworkBytesOut}",
			"**.plugin.ch.cern.{HDFSMetrics,CloudFSMetrics}.{bytesRead,bytesWritten,bytesReadLocalHost,bytesReadDistanceOfOneOrTwo,bytesReadDistanceOfThreeOrFour,bytesReadDistanceOfFiveOrLarger}",
			"**.plugin.ch.cern.experimental.S3ATimeInstrumentation.S3ABytesRead",
			"**.plugin.ch.cern.experimental.HDFSTimeInstrumentation.HDFSBytesRead",
			"**.plugin.ch.cern.experimental.ROOTTimeInstrumentation.ROOTBytesRead",
		}},
		{Source: src, Cumulative: true, Unit: "count", Path: []string{
			"**.plugin.ch.cern.{HDFSMetrics,CloudFSMetrics}.{readOps,writeOps,largeReadOps}",
		}},
		{Source: src, Cumulative: true, Unit: "us", Path: []string{
			"**.plugin.ch.cern.experimental.S3ATimeInstrumentation.{S3AReadTimeMuSec,S3ASeekTimeMuSec,S3AGetObjectMetadataMuSec}",
			"**.plugin.ch.cern.experimental.HDFSTimeInstrumentation.HDFSReadTimeMuSec",
			"**.plugin.ch.cern.experimental.ROOTTimeInstrumentation.ROOTReadTimeMuSec",
		}},
	}
}
