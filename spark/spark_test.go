package spark

import (
	"bufio"
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/templates"
	"github.com/sparkpulse/sparkpulse/templates/templatestest"
)

var update = flag.Bool("update", false, "rewrite testdata/spark-paths.golden")

// mapPath maps the path of line (the text before the first space, so wire
// lines can be pasted verbatim).
func mapPath(t *testing.T, m *Mapper, line string) string {
	t.Helper()
	path, _, _ := strings.Cut(line, " ")
	var r templates.Result
	if err := m.Apply([]byte(path), &r); err != nil {
		t.Fatalf("Apply(%q): %v", path, err)
	}
	return templatestest.Format(&r)
}

type mapCase struct {
	line string // a wire line or a bare path
	want string // measurement|tags|field
}

// wireExamples are all example lines of spark-metrics.md §4, verbatim
// (YARN app, default namespace, no prefix).
var wireExamples = []mapCase{
	{"application_1717000000000_0042.driver.BlockManager.disk.diskSpaceUsed_MB 0 1717171717", "disk.diskSpaceUsed_MB|applicationid=application_1717000000000_0042,namespace=BlockManager,process=driver|value"},
	{"application_1717000000000_0042.driver.BlockManager.memory.maxMem_MB 10742 1717171717", "memory.maxMem_MB|applicationid=application_1717000000000_0042,namespace=BlockManager,process=driver|value"},
	{"application_1717000000000_0042.driver.BlockManager.memory.memUsed_MB 412 1717171717", "memory.memUsed_MB|applicationid=application_1717000000000_0042,namespace=BlockManager,process=driver|value"},
	{"application_1717000000000_0042.driver.DAGScheduler.job.activeJobs 1 1717171717", "job.activeJobs|applicationid=application_1717000000000_0042,namespace=DAGScheduler,process=driver|value"},
	{"application_1717000000000_0042.driver.DAGScheduler.job.allJobs 7 1717171717", "job.allJobs|applicationid=application_1717000000000_0042,namespace=DAGScheduler,process=driver|value"},
	{"application_1717000000000_0042.driver.DAGScheduler.stage.failedStages 0 1717171717", "stage.failedStages|applicationid=application_1717000000000_0042,namespace=DAGScheduler,process=driver|value"},
	{"application_1717000000000_0042.driver.DAGScheduler.stage.runningStages 2 1717171717", "stage.runningStages|applicationid=application_1717000000000_0042,namespace=DAGScheduler,process=driver|value"},
	{"application_1717000000000_0042.driver.DAGScheduler.stage.waitingStages 1 1717171717", "stage.waitingStages|applicationid=application_1717000000000_0042,namespace=DAGScheduler,process=driver|value"},
	{"application_1717000000000_0042.driver.ExecutorMetrics.JVMHeapMemory 734003200 1717171717", "JVMHeapMemory|applicationid=application_1717000000000_0042,namespace=ExecutorMetrics,process=driver|value"},
	{"application_1717000000000_0042.driver.ExecutorMetrics.MajorGCTime 144 1717171717", "MajorGCTime|applicationid=application_1717000000000_0042,namespace=ExecutorMetrics,process=driver|value"},
	{"application_1717000000000_0042.driver.ExecutorMetrics.MinorGCCount 7 1717171717", "MinorGCCount|applicationid=application_1717000000000_0042,namespace=ExecutorMetrics,process=driver|value"},
	{"application_1717000000000_0042.driver.JVMCPU.jvmCpuTime 183420000000 1717171717", "jvmCpuTime|applicationid=application_1717000000000_0042,namespace=JVMCPU,process=driver|value"},
	{"application_1717000000000_0042.driver.LiveListenerBus.queue.appStatus.size 0 1717171717", "queue.appStatus.size|applicationid=application_1717000000000_0042,namespace=LiveListenerBus,process=driver|value"},
	{"application_1717000000000_0042.driver.appStatus.jobDuration 48213 1717171717", "jobDuration|applicationid=application_1717000000000_0042,namespace=appStatus,process=driver|value"},
	{"application_1717000000000_0042.driver.spark.streaming.orders_agg.eventTime-watermark 1717171600000 1717171717", "eventTime-watermark|applicationid=application_1717000000000_0042,id=orders_agg,namespace=spark.streaming,process=driver|value"},
	{"application_1717000000000_0042.driver.spark.streaming.orders_agg.inputRate-total 1532.40 1717171717", "inputRate-total|applicationid=application_1717000000000_0042,id=orders_agg,namespace=spark.streaming,process=driver|value"},
	{"application_1717000000000_0042.driver.spark.streaming.orders_agg.latency 812 1717171717", "latency|applicationid=application_1717000000000_0042,id=orders_agg,namespace=spark.streaming,process=driver|value"},
	{"application_1717000000000_0042.driver.spark.streaming.orders_agg.processingRate-total 1611.07 1717171717", "processingRate-total|applicationid=application_1717000000000_0042,id=orders_agg,namespace=spark.streaming,process=driver|value"},
	{"application_1717000000000_0042.driver.spark.streaming.orders_agg.states-rowsTotal 125003 1717171717", "states-rowsTotal|applicationid=application_1717000000000_0042,id=orders_agg,namespace=spark.streaming,process=driver|value"},
	{"application_1717000000000_0042.driver.spark.streaming.orders_agg.states-usedBytes 48234496 1717171717", "states-usedBytes|applicationid=application_1717000000000_0042,id=orders_agg,namespace=spark.streaming,process=driver|value"},
	{"application_1717000000000_0042.driver.HiveExternalCatalog.filesDiscovered.count 1200 1717171717", "filesDiscovered.count|applicationid=application_1717000000000_0042,namespace=HiveExternalCatalog,process=driver|value"},
	{"application_1717000000000_0042.driver.LiveListenerBus.numEventsPosted.count 18234 1717171717", "numEventsPosted.count|applicationid=application_1717000000000_0042,namespace=LiveListenerBus,process=driver|value"},
	{"application_1717000000000_0042.driver.LiveListenerBus.queue.appStatus.numDroppedEvents.count 0 1717171717", "queue.appStatus.numDroppedEvents.count|applicationid=application_1717000000000_0042,namespace=LiveListenerBus,process=driver|value"},
	{"application_1717000000000_0042.driver.appStatus.jobs.succeededJobs.count 6 1717171717", "jobs.succeededJobs.count|applicationid=application_1717000000000_0042,namespace=appStatus,process=driver|value"},
	{"application_1717000000000_0042.driver.appStatus.stages.completedStages.count 14 1717171717", "stages.completedStages.count|applicationid=application_1717000000000_0042,namespace=appStatus,process=driver|value"},
	{"application_1717000000000_0042.driver.appStatus.tasks.failedTasks.count 3 1717171717", "tasks.failedTasks.count|applicationid=application_1717000000000_0042,namespace=appStatus,process=driver|value"},
	{"application_1717000000000_0042.driver.CodeGenerator.compilationTime.count 87 1717171717", "compilationTime.count|applicationid=application_1717000000000_0042,namespace=CodeGenerator,process=driver|value"},
	{"application_1717000000000_0042.driver.CodeGenerator.compilationTime.max 412 1717171717", "compilationTime.max|applicationid=application_1717000000000_0042,namespace=CodeGenerator,process=driver|value"},
	{"application_1717000000000_0042.driver.CodeGenerator.compilationTime.mean 23.51 1717171717", "compilationTime.mean|applicationid=application_1717000000000_0042,namespace=CodeGenerator,process=driver|value"},
	{"application_1717000000000_0042.driver.CodeGenerator.compilationTime.p99 201.00 1717171717", "compilationTime.p99|applicationid=application_1717000000000_0042,namespace=CodeGenerator,process=driver|value"},
	{"application_1717000000000_0042.driver.DAGScheduler.messageProcessingTime.max 31.87 1717171717", "messageProcessingTime.max|applicationid=application_1717000000000_0042,namespace=DAGScheduler,process=driver|value"},
	{"application_1717000000000_0042.driver.DAGScheduler.messageProcessingTime.p99 9.77 1717171717", "messageProcessingTime.p99|applicationid=application_1717000000000_0042,namespace=DAGScheduler,process=driver|value"},
	{"application_1717000000000_0042.driver.DAGScheduler.messageProcessingTime.count 4521 1717171717", "messageProcessingTime.count|applicationid=application_1717000000000_0042,namespace=DAGScheduler,process=driver|value"},
	{"application_1717000000000_0042.driver.DAGScheduler.messageProcessingTime.m1_rate 3.17 1717171717", "messageProcessingTime.m1_rate|applicationid=application_1717000000000_0042,namespace=DAGScheduler,process=driver|value"},
	{"application_1717000000000_0042.driver.DAGScheduler.messageProcessingTime.mean_rate 2.95 1717171717", "messageProcessingTime.mean_rate|applicationid=application_1717000000000_0042,namespace=DAGScheduler,process=driver|value"},
	{"application_1717000000000_0042.driver.LiveListenerBus.listenerProcessingTime.org.apache.spark.ExecutorAllocationManager$ExecutorAllocationListener.count 20411 1717171717", "listenerProcessingTime.org.apache.spark.ExecutorAllocationManager$ExecutorAllocationListener.count|applicationid=application_1717000000000_0042,namespace=LiveListenerBus,process=driver|value"},
	{"application_1717000000000_0042.driver.LiveListenerBus.listenerProcessingTime.org.apache.spark.status.AppStatusListener.p99 0.35 1717171717", "listenerProcessingTime.org.apache.spark.status.AppStatusListener.p99|applicationid=application_1717000000000_0042,namespace=LiveListenerBus,process=driver|value"},
	{"application_1717000000000_0042.3.ExecutorMetrics.ConcurrentGCTime 37 1717171721", "ConcurrentGCTime|applicationid=application_1717000000000_0042,namespace=ExecutorMetrics,process=3|value"},
	{"application_1717000000000_0042.3.ExecutorMetrics.JVMHeapMemory 2147483648 1717171721", "JVMHeapMemory|applicationid=application_1717000000000_0042,namespace=ExecutorMetrics,process=3|value"},
	{"application_1717000000000_0042.3.ExecutorMetrics.MinorGCCount 57 1717171721", "MinorGCCount|applicationid=application_1717000000000_0042,namespace=ExecutorMetrics,process=3|value"},
	{"application_1717000000000_0042.3.ExecutorMetrics.MinorGCTime 2310 1717171721", "MinorGCTime|applicationid=application_1717000000000_0042,namespace=ExecutorMetrics,process=3|value"},
	{"application_1717000000000_0042.3.ExecutorMetrics.OnHeapExecutionMemory 268435456 1717171721", "OnHeapExecutionMemory|applicationid=application_1717000000000_0042,namespace=ExecutorMetrics,process=3|value"},
	{"application_1717000000000_0042.3.ExecutorMetrics.ProcessTreePythonRSSMemory 0 1717171721", "ProcessTreePythonRSSMemory|applicationid=application_1717000000000_0042,namespace=ExecutorMetrics,process=3|value"},
	{"application_1717000000000_0042.3.ExecutorMetrics.TotalGCTime 2954 1717171721", "TotalGCTime|applicationid=application_1717000000000_0042,namespace=ExecutorMetrics,process=3|value"},
	{"application_1717000000000_0042.3.JVMCPU.jvmCpuTime 913244000000 1717171721", "jvmCpuTime|applicationid=application_1717000000000_0042,namespace=JVMCPU,process=3|value"},
	{"application_1717000000000_0042.3.NettyBlockTransfer.shuffle-client.usedDirectMemory 16777216 1717171721", "shuffle-client.usedDirectMemory|applicationid=application_1717000000000_0042,namespace=NettyBlockTransfer,process=3|value"},
	{"application_1717000000000_0042.3.executor.filesystem.hdfs.read_bytes 10737418240 1717171721", "filesystem.hdfs.read_bytes|applicationid=application_1717000000000_0042,namespace=executor,process=3|value"},
	{"application_1717000000000_0042.3.executor.threadpool.activeTasks 4 1717171721", "threadpool.activeTasks|applicationid=application_1717000000000_0042,namespace=executor,process=3|value"},
	{"application_1717000000000_0042.3.executor.threadpool.completeTasks 412 1717171721", "threadpool.completeTasks|applicationid=application_1717000000000_0042,namespace=executor,process=3|value"},
	{"application_1717000000000_0042.3.executor.threadpool.maxPool_size 2147483647 1717171721", "threadpool.maxPool_size|applicationid=application_1717000000000_0042,namespace=executor,process=3|value"},
	{"application_1717000000000_0042.3.jvm.G1-Young-Generation.count 57 1717171721", "G1-Young-Generation.count|applicationid=application_1717000000000_0042,namespace=jvm,process=3|value"},
	{"application_1717000000000_0042.3.jvm.heap.usage 0.31 1717171721", "heap.usage|applicationid=application_1717000000000_0042,namespace=jvm,process=3|value"},
	{"application_1717000000000_0042.3.jvm.pools.CodeHeap-'non-nmethods'.used 1398016 1717171721", "pools.used|applicationid=application_1717000000000_0042,namespace=jvm,pool=CodeHeap-'non-nmethods',process=3|value"},
	{"application_1717000000000_0042.3.jvm.pools.G1-Survivor-Space.usage NaN 1717171721", "pools.usage|applicationid=application_1717000000000_0042,namespace=jvm,pool=G1-Survivor-Space,process=3|value"},
	{"application_1717000000000_0042.3.executor.bytesRead.count 10737418240 1717171721", "bytesRead.count|applicationid=application_1717000000000_0042,namespace=executor,process=3|value"},
	{"application_1717000000000_0042.3.executor.cpuTime.count 512345678901 1717171721", "cpuTime.count|applicationid=application_1717000000000_0042,namespace=executor,process=3|value"},
	{"application_1717000000000_0042.3.executor.jvmGCTime.count 2140 1717171721", "jvmGCTime.count|applicationid=application_1717000000000_0042,namespace=executor,process=3|value"},
	{"application_1717000000000_0042.3.executor.runTime.count 620154 1717171721", "runTime.count|applicationid=application_1717000000000_0042,namespace=executor,process=3|value"},
	{"application_1717000000000_0042.3.executor.shuffleBytesWritten.count 73400320 1717171721", "shuffleBytesWritten.count|applicationid=application_1717000000000_0042,namespace=executor,process=3|value"},
	{"application_1717000000000_0042.3.executor.shuffleTotalBytesRead.count 104857600 1717171721", "shuffleTotalBytesRead.count|applicationid=application_1717000000000_0042,namespace=executor,process=3|value"},
	{"application_1717000000000_0042.3.executor.shuffleWriteTime.count 1834000000 1717171721", "shuffleWriteTime.count|applicationid=application_1717000000000_0042,namespace=executor,process=3|value"},
	{"application_1717000000000_0042.3.executor.succeededTasks.count 418 1717171721", "succeededTasks.count|applicationid=application_1717000000000_0042,namespace=executor,process=3|value"},
	{"spark-1f0c9a2b3c4d4e5f8a9b0c1d2e3f4a5b.driver.ExecutorMetrics.JVMOffHeapMemory 91926448 1717171717", "JVMOffHeapMemory|applicationid=spark-1f0c9a2b3c4d4e5f8a9b0c1d2e3f4a5b,namespace=ExecutorMetrics,process=driver|value"},
	{"spark-1f0c9a2b3c4d4e5f8a9b0c1d2e3f4a5b.2.executor.runTime.count 98213 1717171719", "runTime.count|applicationid=spark-1f0c9a2b3c4d4e5f8a9b0c1d2e3f4a5b,namespace=executor,process=2|value"},
	{"app-20240531160000-0003.0.executor.succeededTasks.count 96 1717171717", "succeededTasks.count|applicationid=app-20240531160000-0003,namespace=executor,process=0|value"},
	{"local-1717171000000.driver.executor.cpuTime.count 41234000000 1717171717", "cpuTime.count|applicationid=local-1717171000000,namespace=executor,process=driver|value"},
	{"spark.prod.Nightly-ETL.driver.DAGScheduler.job.activeJobs 1 1717171717", "job.activeJobs|applicationid=spark.prod.Nightly-ETL,namespace=DAGScheduler,process=driver|value"},
	{"spark.prod.Nightly-ETL.4.executor.cpuTime.count 9123400000 1717171717", "cpuTime.count|applicationid=spark.prod.Nightly-ETL,namespace=executor,process=4|value"},
	{"application_1717000000000_0042.driver.NightlyETL.StreamingMetrics.streaming.lastCompletedBatch_totalDelay 1532 1717171717", "streaming.lastCompletedBatch_totalDelay|applicationid=application_1717000000000_0042,id=NightlyETL,namespace=StreamingMetrics,process=driver|value"},
	{"application_1717000000000_0042.driver.NightlyETL.StreamingMetrics.streaming.totalProcessedRecords 9812733 1717171717", "streaming.totalProcessedRecords|applicationid=application_1717000000000_0042,id=NightlyETL,namespace=StreamingMetrics,process=driver|value"},
	{"application_1717000000000_0042.applicationMaster.numExecutorsRunning 10 1717171717", "numExecutorsRunning|applicationid=application_1717000000000_0042,namespace=applicationMaster|value"},
	{"master.aliveWorkers 3 1717171717", "aliveWorkers|namespace=master|value"},
	{"application.Nightly-ETL.1717170000123.cores 16 1717171717", "cores|appname=Nightly-ETL,appstart=1717170000123,namespace=application|value"},
	{"application.Nightly-ETL.1717170000123.runtime_ms 1717594 1717171717", "runtime_ms|appname=Nightly-ETL,appstart=1717170000123,namespace=application|value"},
	{"worker.coresUsed 8 1717171717", "coresUsed|namespace=worker|value"},
	{"worker.memFree_MB 30720 1717171717", "memFree_MB|namespace=worker|value"},
	{"jvm.heap.used 201326592 1717171717", "heap.used|namespace=jvm|value"},
	{"shuffleService.blockTransferRateBytes.m1_rate 1048576.00 1717171717", "blockTransferRateBytes.m1_rate|namespace=shuffleService|value"},
	{"shuffleService.openBlockRequestLatencyMillis.p99 3.20 1717171717", "openBlockRequestLatencyMillis.p99|namespace=shuffleService|value"},
	{"shuffleService.numActiveConnections.count 12 1717171717", "numActiveConnections.count|namespace=shuffleService|value"},
}

func TestWireExamples(t *testing.T) {
	m := NewMapper(Options{})
	for _, c := range wireExamples {
		if got := mapPath(t, m, c.line); got != c.want {
			t.Errorf("%s\n got %s\nwant %s", c.line, got, c.want)
		}
	}
}

// cernExamples are the v1 rows of the CERN dashboard's
// derived/template-mapping-examples.csv (prefix lucatest). want is what
// this package produces; cern, when set, is what CERN's templates produce
// instead. The csv's two rows without a prefix are the unprefixed variants
// of the first and the jvm.pools rows, which TestCERNExamples derives.
var cernExamples = []struct {
	path, want, cern string
}{
	{"lucatest.app-20240101120000-0001.1.executor.threadpool.activeTasks", "threadpool.activeTasks|applicationid=app-20240101120000-0001,namespace=executor,process=1,username=lucatest|value", ""},
	{"lucatest.app-20240101120000-0001.1.executor.cpuTime.count", "cpuTime.count|applicationid=app-20240101120000-0001,namespace=executor,process=1,username=lucatest|value", ""},
	{"lucatest.app-20240101120000-0001.1.executor.filesystem.hdfs.read_bytes", "filesystem.hdfs.read_bytes|applicationid=app-20240101120000-0001,namespace=executor,process=1,username=lucatest|value", ""},
	{"lucatest.app-20240101120000-0001.1.JVMCPU.jvmCpuTime", "jvmCpuTime|applicationid=app-20240101120000-0001,namespace=JVMCPU,process=1,username=lucatest|value", ""},
	{"lucatest.app-20240101120000-0001.1.ExecutorMetrics.JVMHeapMemory", "JVMHeapMemory|applicationid=app-20240101120000-0001,namespace=ExecutorMetrics,process=1,username=lucatest|value", ""},
	{"lucatest.app-20240101120000-0001.1.ExecutorMetrics.ProcessTreePythonRSSMemory", "ProcessTreePythonRSSMemory|applicationid=app-20240101120000-0001,namespace=ExecutorMetrics,process=1,username=lucatest|value", ""},
	{"lucatest.app-20240101120000-0001.driver.BlockManager.memory.onHeapMemUsed_MB", "memory.onHeapMemUsed_MB|applicationid=app-20240101120000-0001,namespace=BlockManager,process=driver,username=lucatest|value", ""},
	{"lucatest.app-20240101120000-0001.driver.DAGScheduler.stage.runningStages", "stage.runningStages|applicationid=app-20240101120000-0001,namespace=DAGScheduler,process=driver,username=lucatest|value", ""},
	{"lucatest.app-20240101120000-0001.driver.appStatus.tasks.failedTasks.count", "tasks.failedTasks.count|applicationid=app-20240101120000-0001,namespace=appStatus,process=driver,username=lucatest|value", ""},
	{"lucatest.app-20240101120000-0001.driver.appStatus.jobs.succeededJobs.count", "jobs.succeededJobs.count|applicationid=app-20240101120000-0001,namespace=appStatus,process=driver,username=lucatest|value", ""},
	{"lucatest.app-20240101120000-0001.driver.LiveListenerBus.queue.appStatus.listenerProcessingTime.p99", "queue.appStatus.listenerProcessingTime.p99|applicationid=app-20240101120000-0001,namespace=LiveListenerBus,process=driver,username=lucatest|value", ""},
	{"lucatest.app-20240101120000-0001.driver.CodeGenerator.compilationTime.mean", "compilationTime.mean|applicationid=app-20240101120000-0001,namespace=CodeGenerator,process=driver,username=lucatest|value", ""},
	{"lucatest.app-20240101120000-0001.driver.jvm.heap.used", "heap.used|applicationid=app-20240101120000-0001,namespace=jvm,process=driver,username=lucatest|value", ""},
	{"lucatest.app-20240101120000-0001.driver.jvm.pools.G1-Eden-Space.used", "pools.used|applicationid=app-20240101120000-0001,namespace=jvm,pool=G1-Eden-Space,process=driver,username=lucatest|value",
		"pools.G1-Eden-Space.used|applicationid=app-20240101120000-0001,namespace=jvm,process=driver,username=lucatest|value"},
	{"lucatest.app-20240101120000-0001.driver.jvm.G1-Young-Generation.time", "G1-Young-Generation.time|applicationid=app-20240101120000-0001,namespace=jvm,process=driver,username=lucatest|value", ""},
	{"lucatest.app-20240101120000-0001.1.plugin.ch.cern.CgroupMetrics.CPUTimeNanosec", "ch.cern.CgroupMetrics.CPUTimeNanosec|applicationid=app-20240101120000-0001,namespace=plugin,process=1,username=lucatest|value", ""},
	{"lucatest.app-20240101120000-0001.1.NettyBlockTransfer.shuffle-client.usedDirectMemory", "shuffle-client.usedDirectMemory|applicationid=app-20240101120000-0001,namespace=NettyBlockTransfer,process=1,username=lucatest|value", ""},
	{"lucatest.app-20240101120000-0001.driver.spark.streaming.myQuery.inputRate-total", "inputRate-total|applicationid=app-20240101120000-0001,id=myQuery,namespace=spark.streaming,process=driver,username=lucatest|value", ""},
	{"lucatest.app-20240101120000-0001.driver.MyApp.StreamingMetrics.streaming.lastCompletedBatch_processingDelay", "streaming.lastCompletedBatch_processingDelay|applicationid=app-20240101120000-0001,id=MyApp,namespace=StreamingMetrics,process=driver,username=lucatest|value",
		"StreamingMetrics.streaming.lastCompletedBatch_processingDelay|applicationid=app-20240101120000-0001,namespace=MyApp,process=driver,username=lucatest|value"},
	{"lucatest.application_1709816012523_4307.applicationMaster.numExecutorsRunning", "numExecutorsRunning|applicationid=application_1709816012523_4307,namespace=applicationMaster,username=lucatest|value", ""},
	{"lucatest.shuffleService.blockTransferRateBytes.m1_rate", "blockTransferRateBytes.m1_rate|namespace=shuffleService,username=lucatest|value", ""},
	{"lucatest.master.aliveWorkers", "aliveWorkers|namespace=master,username=lucatest|value",
		"lucatest.master.aliveWorkers|applicationid=master,process=aliveWorkers,username=lucatest|value"},
}

// TestCERNExamples checks every CERN row with the prefix inferred, with the
// prefix configured, and without a prefix.
func TestCERNExamples(t *testing.T) {
	inferred := NewMapper(Options{})
	configured := NewMapper(Options{Prefixes: []string{"lucatest"}})
	for _, c := range cernExamples {
		if got := mapPath(t, inferred, c.path); got != c.want {
			t.Errorf("inferred prefix: %s\n got %s\nwant %s", c.path, got, c.want)
		}
		if got := mapPath(t, configured, c.path); got != c.want {
			t.Errorf("configured prefix: %s\n got %s\nwant %s", c.path, got, c.want)
		}
		bare := strings.TrimPrefix(c.path, "lucatest.")
		want := strings.Replace(c.want, ",username=lucatest", "", 1)
		if got := mapPath(t, inferred, bare); got != want {
			t.Errorf("no prefix: %s\n got %s\nwant %s", bare, got, want)
		}
	}
}

const yarnID = "application_1717000000000_0042"

func TestMapping(t *testing.T) {
	global := []templates.Tag{
		{Key: []byte("cluster"), Value: []byte("prod")},
		{Key: []byte("username"), Value: []byte("fallback")},
	}
	cases := []struct {
		name string
		opts Options
		path string
		want string
	}{
		// Prefix and namespace.
		{"custom namespace with configured prefix, driver", Options{Prefixes: []string{"spark.prod"}},
			"spark.prod.Nightly-ETL.driver.DAGScheduler.job.activeJobs",
			"job.activeJobs|applicationid=Nightly-ETL,namespace=DAGScheduler,process=driver,username=spark.prod|value"},
		{"custom namespace with configured prefix, executor", Options{Prefixes: []string{"spark.prod"}},
			"spark.prod.Nightly-ETL.4.executor.cpuTime.count",
			"cpuTime.count|applicationid=Nightly-ETL,namespace=executor,process=4,username=spark.prod|value"},
		{"longest configured prefix wins", Options{Prefixes: []string{"spark", "spark.prod"}},
			"spark.prod.Nightly-ETL.4.executor.cpuTime.count",
			"cpuTime.count|applicationid=Nightly-ETL,namespace=executor,process=4,username=spark.prod|value"},
		{"configured prefix with dots around", Options{Prefixes: []string{".spark.prod."}},
			"spark.prod.Nightly-ETL.4.executor.cpuTime.count",
			"cpuTime.count|applicationid=Nightly-ETL,namespace=executor,process=4,username=spark.prod|value"},
		{"configured prefix, app name with dots", Options{Prefixes: []string{"team.a"}},
			"team.a.etl.nightly.driver.appStatus.jobDuration",
			"jobDuration|applicationid=etl.nightly,namespace=appStatus,process=driver,username=team.a|value"},
		{"configured prefix that does not match", Options{Prefixes: []string{"team.a"}},
			"team.b.app-20240531160000-0003.0.executor.succeededTasks.count",
			"succeededTasks.count|applicationid=app-20240531160000-0003,namespace=executor,process=0,username=team.b|value"},
		{"app name with dots", Options{},
			"my.etl.app.12.executor.cpuTime.count",
			"cpuTime.count|applicationid=my.etl.app,namespace=executor,process=12|value"},
		{"digits inside the app name", Options{},
			"etl.2.nightly.driver.executor.cpuTime.count",
			"cpuTime.count|applicationid=etl.2.nightly,namespace=executor,process=driver|value"},
		{"inferred prefix with dots before an app id", Options{},
			"a.b.c.spark-application-1717171717000.driver.JVMCPU.jvmCpuTime",
			"jvmCpuTime|applicationid=spark-application-1717171717000,namespace=JVMCPU,process=driver,username=a.b.c|value"},
		{"not an app id", Options{},
			"prod.app-2024-1.driver.executor.runTime.count",
			"runTime.count|applicationid=prod.app-2024-1,namespace=executor,process=driver|value"},
		{"upper-case hex is not a K8s app id", Options{},
			"x.spark-1F0C9A2B3C4D4E5F8A9B0C1D2E3F4A5B.2.executor.runTime.count",
			"runTime.count|applicationid=x.spark-1F0C9A2B3C4D4E5F8A9B0C1D2E3F4A5B,namespace=executor,process=2|value"},
		{"executor id of several digits", Options{},
			yarnID + ".1234.executor.runTime.count",
			"runTime.count|applicationid=" + yarnID + ",namespace=executor,process=1234|value"},
		{"daemon word in the prefix does not hide the driver form", Options{},
			"master.app-20240101120000-0001.driver.executor.cpuTime.count",
			"cpuTime.count|applicationid=app-20240101120000-0001,namespace=executor,process=driver,username=master|value"},

		// Sources.
		{"listener class with $", Options{},
			yarnID + ".driver.LiveListenerBus.listenerProcessingTime.org.apache.spark.ExecutorAllocationManager$ExecutorAllocationListener.count",
			"listenerProcessingTime.org.apache.spark.ExecutorAllocationManager$ExecutorAllocationListener.count|applicationid=" + yarnID + ",namespace=LiveListenerBus,process=driver|value"},
		{"plugin", Options{},
			yarnID + ".3.plugin.ch.cern.CgroupMetrics.CPUTimeNanosec",
			"ch.cern.CgroupMetrics.CPUTimeNanosec|applicationid=" + yarnID + ",namespace=plugin,process=3|value"},
		{"accumulator", Options{},
			yarnID + ".driver.AccumulatorSource.rowsSeen",
			"rowsSeen|applicationid=" + yarnID + ",namespace=AccumulatorSource,process=driver|value"},
		{"dynamic allocation", Options{},
			yarnID + ".driver.ExecutorAllocationManager.executors.numberAllExecutors",
			"executors.numberAllExecutors|applicationid=" + yarnID + ",namespace=ExecutorAllocationManager,process=driver|value"},
		{"external shuffle", Options{},
			yarnID + ".7.ExternalShuffle.shuffle-client.usedHeapMemory",
			"shuffle-client.usedHeapMemory|applicationid=" + yarnID + ",namespace=ExternalShuffle,process=7|value"},
		{"hive catalog", Options{},
			yarnID + ".7.HiveExternalCatalog.fileCacheHits.count",
			"fileCacheHits.count|applicationid=" + yarnID + ",namespace=HiveExternalCatalog,process=7|value"},
		{"pool used-after-gc", Options{},
			yarnID + ".7.jvm.pools.G1-Old-Gen.used-after-gc",
			"pools.used-after-gc|applicationid=" + yarnID + ",namespace=jvm,pool=G1-Old-Gen,process=7|value"},
		{"pool init", Options{}, yarnID + ".7.jvm.pools.Metaspace.init",
			"pools.init|applicationid=" + yarnID + ",namespace=jvm,pool=Metaspace,process=7|value"},
		{"pool max", Options{}, yarnID + ".7.jvm.pools.Metaspace.max",
			"pools.max|applicationid=" + yarnID + ",namespace=jvm,pool=Metaspace,process=7|value"},
		{"pool committed", Options{}, yarnID + ".7.jvm.pools.Compressed-Class-Space.committed",
			"pools.committed|applicationid=" + yarnID + ",namespace=jvm,pool=Compressed-Class-Space,process=7|value"},
		{"pool name with a dot", Options{}, yarnID + ".7.jvm.pools.Some.Pool.used",
			"pools.used|applicationid=" + yarnID + ",namespace=jvm,pool=Some.Pool,process=7|value"},
		{"unknown pool attribute", Options{}, yarnID + ".7.jvm.pools.Metaspace.peak",
			"pools.Metaspace.peak|applicationid=" + yarnID + ",namespace=jvm,process=7|value"},
		{"pool without attribute", Options{}, yarnID + ".7.jvm.pools.Metaspace",
			"pools.Metaspace|applicationid=" + yarnID + ",namespace=jvm,process=7|value"},
		{"streaming query name with dots", Options{},
			yarnID + ".driver.spark.streaming.team.orders.v2.latency",
			"latency|applicationid=" + yarnID + ",id=team.orders.v2,namespace=spark.streaming,process=driver|value"},
		{"streaming query id", Options{},
			yarnID + ".driver.spark.streaming.6e0b3a0a-5c7e-4d6f-9d5b-0a1b2c3d4e5f.states-usedBytes",
			"states-usedBytes|applicationid=" + yarnID + ",id=6e0b3a0a-5c7e-4d6f-9d5b-0a1b2c3d4e5f,namespace=spark.streaming,process=driver|value"},
		{"DStreams app name with dots", Options{},
			yarnID + ".driver.my.app.StreamingMetrics.streaming.receivers",
			"streaming.receivers|applicationid=" + yarnID + ",id=my.app,namespace=StreamingMetrics,process=driver|value"},
		{"DStreams app named spark.streaming.x", Options{},
			yarnID + ".driver.spark.streaming.etl.StreamingMetrics.streaming.receivers",
			"streaming.receivers|applicationid=" + yarnID + ",id=spark.streaming.etl,namespace=StreamingMetrics,process=driver|value"},
		{"DStreams with custom namespace and configured prefix", Options{Prefixes: []string{"spark.prod"}},
			"spark.prod.NightlyETL.driver.NightlyETL.StreamingMetrics.streaming.waitingBatches",
			"streaming.waitingBatches|applicationid=NightlyETL,id=NightlyETL,namespace=StreamingMetrics,process=driver,username=spark.prod|value"},

		// ApplicationMaster, applications, daemons.
		{"AM with inferred prefix", Options{},
			"lucatest." + yarnID + ".applicationMaster.numContainersPendingAllocate",
			"numContainersPendingAllocate|applicationid=" + yarnID + ",namespace=applicationMaster,username=lucatest|value"},
		{"AM with custom namespace", Options{},
			"yarn.etl.applicationMaster.numExecutorsFailed",
			"numExecutorsFailed|applicationid=yarn.etl,namespace=applicationMaster|value"},
		{"AM with custom namespace and configured prefix", Options{Prefixes: []string{"yarn"}},
			"yarn.etl.applicationMaster.numExecutorsFailed",
			"numExecutorsFailed|applicationid=etl,namespace=applicationMaster,username=yarn|value"},
		{"applications, app name with dots, prefix", Options{},
			"host1.application.etl.v2.1717170000123.runtime_ms",
			"runtime_ms|appname=etl.v2,appstart=1717170000123,namespace=application,username=host1|value"},
		{"applications, app named worker", Options{},
			"application.worker.1717170000123.cores",
			"cores|appname=worker,appstart=1717170000123,namespace=application|value"},
		{"daemon with prefix", Options{},
			"spark.host-1.worker.coresFree",
			"coresFree|namespace=worker,username=spark.host-1|value"},
		{"daemon after a configured prefix and more parts", Options{Prefixes: []string{"spark"}},
			"spark.host-1.worker.coresFree",
			"coresFree|namespace=worker,username=spark.host-1|value"},
		{"daemon jvm pool", Options{},
			"jvm.pools.G1-Eden-Space.used-after-gc",
			"pools.used-after-gc|namespace=jvm,pool=G1-Eden-Space|value"},
		{"daemon jvm pool with prefix", Options{},
			"spark.jvm.pools.CodeHeap-'profiled-nmethods'.committed",
			"pools.committed|namespace=jvm,pool=CodeHeap-'profiled-nmethods',username=spark|value"},
		{"daemon static source", Options{},
			"CodeGenerator.sourceCodeSize.p75",
			"sourceCodeSize.p75|namespace=CodeGenerator|value"},
		{"shuffle service arena", Options{},
			"shuffleService.shuffle-server.usedDirectMemory",
			"shuffle-server.usedDirectMemory|namespace=shuffleService|value"},

		// Unclassified: the whole path, no tags.
		{"unknown", Options{}, "servers.host1.cpu.load", "servers.host1.cpu.load||value"},
		{"no namespace", Options{}, "1.executor.cpuTime.count", "1.executor.cpuTime.count||value"},
		{"unknown source", Options{}, yarnID + ".driver.Unknown.metric", yarnID + ".driver.Unknown.metric||value"},
		{"no metric after the source", Options{}, yarnID + ".driver.executor", yarnID + ".driver.executor||value"},
		{"empty metric after the source", Options{}, yarnID + ".driver.executor.", yarnID + ".driver.executor.||value"},
		{"streaming without query", Options{}, yarnID + ".driver.spark.streaming.latency", yarnID + ".driver.spark.streaming.latency||value"},
		{"daemon word alone", Options{}, "master", "master||value"},
		{"daemon word and a dot", Options{}, "master.", "master.||value"},
		{"configured prefix, rest unknown", Options{Prefixes: []string{"lucatest"}}, "lucatest.foo.bar", "lucatest.foo.bar||value"},
		{"the prefix alone", Options{Prefixes: []string{"lucatest"}}, "lucatest.", "lucatest.||value"},

		// Global tags: added unless produced.
		{"global tags", Options{GlobalTags: global},
			yarnID + ".3.executor.cpuTime.count",
			"cpuTime.count|applicationid=" + yarnID + ",cluster=prod,namespace=executor,process=3,username=fallback|value"},
		{"produced tag wins over global", Options{GlobalTags: global},
			"lucatest." + yarnID + ".3.executor.cpuTime.count",
			"cpuTime.count|applicationid=" + yarnID + ",cluster=prod,namespace=executor,process=3,username=lucatest|value"},
		{"global tags on an unclassified path", Options{GlobalTags: global},
			"foo.bar", "foo.bar|cluster=prod,username=fallback|value"},
	}
	var r templates.Result // reused on purpose: Reset must clear the previous case
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := NewMapper(c.opts).Apply([]byte(c.path), &r); err != nil {
				t.Fatalf("Apply(%q): %v", c.path, err)
			}
			if got := templatestest.Format(&r); got != c.want {
				t.Errorf("%s\n got %s\nwant %s", c.path, got, c.want)
			}
		})
	}
}

func TestEmptyPath(t *testing.T) {
	var r templates.Result
	if err := NewMapper(Options{}).Apply(nil, &r); err == nil {
		t.Fatal("Apply(empty) returned no error")
	}
}

func TestIsAppID(t *testing.T) {
	for id, want := range map[string]bool{
		"local-1717171000000":                    true,
		"app-20240531160000-0003":                true,
		"app-20240531160000-12345":               true,
		"application_1717000000000_0042":         true,
		"spark-1f0c9a2b3c4d4e5f8a9b0c1d2e3f4a5b": true,
		"spark-application-1717171717000":        true,
		"local-":                                 false,
		"local-12a":                              false,
		"app-20240531160000-003":                 false,
		"app-2024053116000-0003":                 false,
		"app-20240531160000_0003":                false,
		"application_1717000000000":              false,
		"application__0042":                      false,
		"application_1_":                         false,
		"spark-1f0c9a2b3c4d4e5f8a9b0c1d2e3f4a5":  false,
		"spark-1f0c9a2b3c4d4e5f8a9b0c1d2e3f4a5g": false,
		"spark-application-":                     false,
		"Nightly-ETL":                            false,
		"":                                       false,
	} {
		if got := isAppID([]byte(id)); got != want {
			t.Errorf("isAppID(%q) = %v, want %v", id, got, want)
		}
	}
}

// goldenOptions are the options of the golden test: one configured prefix,
// so both the configured and the inferred prefix paths appear.
var goldenOptions = Options{Prefixes: []string{"spark.prod"}}

// TestGolden maps testdata/spark-paths.txt (one path per line) and compares
// with testdata/spark-paths.golden (one line per path). Regenerate with
// go test ./spark -update.
func TestGolden(t *testing.T) {
	paths := readLines(t, filepath.Join("testdata", "spark-paths.txt"))
	m := NewMapper(goldenOptions)
	var out bytes.Buffer
	for _, p := range paths {
		out.WriteString(mapPath(t, m, p))
		out.WriteByte('\n')
	}
	golden := filepath.Join("testdata", "spark-paths.golden")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := readLines(t, golden)
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(want) != len(paths) {
		t.Fatalf("%s has %d lines for %d paths; run go test ./spark -update", golden, len(want), len(paths))
	}
	for i, p := range paths {
		if got[i] != want[i] {
			t.Errorf("%s\n got %s\nwant %s", p, got[i], want[i])
		}
	}
}

func readLines(t *testing.T, name string) []string {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		lines = append(lines, s.Text())
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// FuzzApply checks that Apply never panics and that every result is a
// valid point whose parts come from the path.
func FuzzApply(f *testing.F) {
	for _, c := range wireExamples {
		path, _, _ := strings.Cut(c.line, " ")
		f.Add(path)
	}
	for _, c := range cernExamples {
		f.Add(c.path)
	}
	for _, p := range []string{"", ".", "..", "a..driver.executor.x", ".app-20240101120000-0001.driver.jvm.pools..used",
		"spark.prod.", "application..1717170000123.cores", "x.applicationMaster."} {
		f.Add(p)
	}
	for _, c := range wideExamples {
		f.Add(c.path)
	}
	m := NewMapper(Options{Prefixes: []string{"spark.prod", "lucatest"}})
	wide := NewMapper(Options{Prefixes: []string{"spark.prod", "lucatest"}, Schema: schema.Wide})
	var r, w templates.Result
	f.Fuzz(func(t *testing.T, s string) {
		if err := wide.Apply([]byte(s), &w); err == nil {
			checkWide(t, s, &w)
		}
		path := []byte(s)
		err := m.Apply(path, &r)
		if len(path) == 0 {
			if err == nil {
				t.Fatal("no error for an empty path")
			}
			return
		}
		if err != nil {
			t.Fatalf("Apply(%q): %v", s, err)
		}
		if len(r.Measurement) == 0 {
			t.Fatalf("%q: empty measurement", s)
		}
		if !bytes.Contains(path, r.Measurement) && !isPoolsMeasurement(r.Measurement) {
			t.Fatalf("%q: measurement %q is not in the path", s, r.Measurement)
		}
		if string(r.Field) != "value" {
			t.Fatalf("%q: field %q", s, r.Field)
		}
		for i, tag := range r.Tags {
			if len(tag.Value) == 0 {
				t.Fatalf("%q: empty value for %s", s, tag.Key)
			}
			if !bytes.Contains(path, tag.Value) {
				t.Fatalf("%q: tag %s=%q is not in the path", s, tag.Key, tag.Value)
			}
			if i > 0 && bytes.Compare(r.Tags[i-1].Key, tag.Key) >= 0 {
				t.Fatalf("%q: tags not sorted and unique: %s", s, templatestest.Format(&r))
			}
		}
	})
}

// checkWide checks a wide result: a measurement and tags from the path,
// and a field from the path or one of the mapping's own names.
func checkWide(t *testing.T, s string, w *templates.Result) {
	t.Helper()
	path := []byte(s)
	if len(w.Measurement) == 0 || !bytes.Contains(path, w.Measurement) {
		t.Fatalf("%q: wide measurement %q", s, w.Measurement)
	}
	own := string(w.Field) == "value"
	for _, f := range busFields {
		own = own || bytes.Equal(f, w.Field)
	}
	for _, f := range queueFields {
		own = own || bytes.Equal(f, w.Field)
	}
	if len(w.Field) == 0 || !bytes.Contains(path, w.Field) && !own {
		t.Fatalf("%q: wide field %q", s, w.Field)
	}
	for i, tag := range w.Tags {
		if len(tag.Value) == 0 || !bytes.Contains(path, tag.Value) || string(tag.Key) == "namespace" {
			t.Fatalf("%q: wide tag %s=%q", s, tag.Key, tag.Value)
		}
		if i > 0 && bytes.Compare(w.Tags[i-1].Key, tag.Key) >= 0 {
			t.Fatalf("%q: wide tags not sorted and unique: %s", s, templatestest.Format(w))
		}
	}
}

func isPoolsMeasurement(b []byte) bool {
	for _, c := range [][]byte{poolsInit, poolsUsed, poolsMax, poolsCommitted, poolsUsage, poolsUsedAfterGC} {
		if bytes.Equal(b, c) {
			return true
		}
	}
	return false
}

// benchPaths is a Spark-shaped mix: mostly executor and driver metrics,
// some JVM pools and streaming, a few daemon lines.
var benchPaths = [][]byte{
	[]byte(yarnID + ".3.executor.cpuTime.count"),
	[]byte(yarnID + ".3.executor.threadpool.activeTasks"),
	[]byte(yarnID + ".3.executor.filesystem.hdfs.read_bytes"),
	[]byte(yarnID + ".3.ExecutorMetrics.JVMHeapMemory"),
	[]byte(yarnID + ".3.JVMCPU.jvmCpuTime"),
	[]byte(yarnID + ".3.jvm.pools.G1-Eden-Space.used"),
	[]byte(yarnID + ".driver.DAGScheduler.messageProcessingTime.p99"),
	[]byte(yarnID + ".driver.LiveListenerBus.listenerProcessingTime.org.apache.spark.status.AppStatusListener.p99"),
	[]byte(yarnID + ".driver.spark.streaming.orders_agg.inputRate-total"),
	[]byte("lucatest.app-20240101120000-0001.12.executor.runTime.count"),
	[]byte("spark.prod.Nightly-ETL.4.executor.cpuTime.count"),
	[]byte("shuffleService.blockTransferRateBytes.m1_rate"),
}

func BenchmarkApply(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts Options
	}{
		{"default", Options{Prefixes: []string{"spark.prod"}}},
		{"global-tag", Options{Prefixes: []string{"spark.prod"}, GlobalTags: []templates.Tag{{Key: []byte("cluster"), Value: []byte("prod")}}}},
		{"wide", Options{Prefixes: []string{"spark.prod"}, Schema: schema.Wide}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			m := NewMapper(bc.opts)
			var r templates.Result
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := m.Apply(benchPaths[i%len(benchPaths)], &r); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

func TestApplyDoesNotAllocate(t *testing.T) {
	for _, s := range []schema.Shape{schema.CERN, schema.Wide} {
		m := NewMapper(Options{Prefixes: []string{"spark.prod"}, Schema: s})
		var r templates.Result
		allocs := testing.AllocsPerRun(100, func() {
			for _, p := range benchPaths {
				_ = m.Apply(p, &r)
			}
		})
		if allocs != 0 {
			t.Fatalf("%s: Apply allocates %.1f times per mix", s, allocs)
		}
	}
}
