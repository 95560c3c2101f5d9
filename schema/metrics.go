package schema

import (
	"fmt"
	"strings"
)

// Shape is the shape the built-in mapping gives a block's points, as a
// [[graphite]] block's `schema` names it.
//
//   - Wide: one measurement per Spark source (the namespace of the
//     CERN shape: executor, jvm, ExecutorMetrics, LiveListenerBus, …), one
//     point per process, source and report, each metric a field. It costs
//     InfluxDB the least: with Spark 3.5's and 4.x's metrics, 16 tables
//     instead of about 400, a 27th of an executor's series (7 against
//     194) and a twentieth of the points (docs/schema.md; bench/README.md
//     measures InfluxDB's CPU).
//   - CERN: one measurement per metric with the field "value", the
//     schema of the CERN Spark dashboard, for its dashboards.
//
// The zero value is CERN, so that a library caller's zero spark.Options
// keep that package's original contract; the configuration's default is
// Default.
type Shape uint8

const (
	CERN Shape = iota
	Wide
)

// Default is the shape of a [[graphite]] block that names none.
const Default = Wide

// Shapes are the shapes' names, as the configuration spells them.
var Shapes = []string{Wide.String(), CERN.String()}

// String is the shape's name in the configuration.
func (s Shape) String() string {
	if s == Wide {
		return "wide"
	}
	return "cern"
}

// ParseShape reads a shape's name; "" is Default.
func ParseShape(name string) (Shape, error) {
	switch name {
	case "":
		return Default, nil
	case "wide":
		return Wide, nil
	case "cern":
		return CERN, nil
	}
	return 0, fmt.Errorf("unknown schema %q: want %s", name, strings.Join(Shapes, " or "))
}

// Tags of the metrics, as the built-in mapping gives them (package
// spark's documentation has the grammar). The facts carry TagApplicationID
// and TagAppName too.
const (
	// TagApplicationID is the application's key: NS, its id or what
	// spark.metrics.namespace makes of it.
	TagApplicationID = "applicationid"
	// TagProcess is the driver or an executor: EXECID, "driver" or the
	// executor's id.
	TagProcess = "process"
	// TagNamespace is a metric's source in the CERN shape (executor, jvm,
	// plugin, …); the wide shape has none, the source being the
	// measurement.
	TagNamespace = "namespace"
	// TagAppName is the application's name: of application.APPNAME
	// paths, and of the facts.
	TagAppName = "appname"
	// TagAppStart is the start (epoch ms) of application.APPNAME paths.
	TagAppStart = "appstart"
	// TagPool is the JVM memory pool of jvm.pools paths.
	TagPool = "pool"
	// TagID is a streaming query's name or a DStream application's.
	TagID = "id"
	// TagListener is a LiveListenerBus queue's listener.
	TagListener = "listener"
	// TagUsername is the GraphiteSink prefix, where a path has one.
	TagUsername = "username"
	// TagQueue (facts.go) is also a LiveListenerBus queue's name.
)

// Metric names a metric of a Spark source as its Graphite path does: the
// source (executor, jvm, ExecutorMetrics, plugin.ch.cern.CgroupMetrics,
// …) and the metric's name within it. It is the one place readers
// — accounting, reports, dashboards — learn where a metric is stored.
type Metric struct {
	Source, Name string
}

// Executor-source, ExecutorMetrics and JVM metrics that the accounting,
// the reports, the live view and the dashboards read.
var (
	SucceededTasks  = Metric{"executor", "succeededTasks.count"}
	CPUTime         = Metric{"executor", "cpuTime.count"}
	RunTime         = Metric{"executor", "runTime.count"}
	JVMGCTime       = Metric{"executor", "jvmGCTime.count"}
	BytesRead       = Metric{"executor", "bytesRead.count"}
	ShuffleRead     = Metric{"executor", "shuffleTotalBytesRead.count"}
	ShuffleWritten  = Metric{"executor", "shuffleBytesWritten.count"}
	ActiveTasks     = Metric{"executor", "threadpool.activeTasks"}
	CgroupCPU       = Metric{"plugin.ch.cern.CgroupMetrics", "CPUTimeNanosec"}
	JVMHeapMemory   = Metric{"ExecutorMetrics", "JVMHeapMemory"}
	JVMRSSMemory    = Metric{"ExecutorMetrics", "ProcessTreeJVMRSSMemory"}
	PythonRSSMemory = Metric{"ExecutorMetrics", "ProcessTreePythonRSSMemory"}
	OtherRSSMemory  = Metric{"ExecutorMetrics", "ProcessTreeOtherRSSMemory"}
	HeapMax         = Metric{"jvm", "heap.max"}

	// The dashboards' other metrics, by source.
	BytesWritten                 = Metric{"executor", "bytesWritten.count"}
	RecordsRead                  = Metric{"executor", "recordsRead.count"}
	RecordsWritten               = Metric{"executor", "recordsWritten.count"}
	ShuffleRecordsRead           = Metric{"executor", "shuffleRecordsRead.count"}
	ShuffleRecordsWritten        = Metric{"executor", "shuffleRecordsWritten.count"}
	ShuffleRemoteBytesRead       = Metric{"executor", "shuffleRemoteBytesRead.count"}
	ShuffleLocalBytesRead        = Metric{"executor", "shuffleLocalBytesRead.count"}
	ShuffleRemoteBytesReadToDisk = Metric{"executor", "shuffleRemoteBytesReadToDisk.count"}
	ShuffleRemoteReqsDuration    = Metric{"executor", "shuffleRemoteReqsDuration.count"}
	ShuffleFetchWaitTime         = Metric{"executor", "shuffleFetchWaitTime.count"}
	ShuffleWriteTime             = Metric{"executor", "shuffleWriteTime.count"}
	DiskBytesSpilled             = Metric{"executor", "diskBytesSpilled.count"}
	MemoryBytesSpilled           = Metric{"executor", "memoryBytesSpilled.count"}
	DeserializeTime              = Metric{"executor", "deserializeTime.count"}
	DeserializeCPUTime           = Metric{"executor", "deserializeCpuTime.count"}
	ResultSerializationTime      = Metric{"executor", "resultSerializationTime.count"}
	JVMCPUTime                   = Metric{"JVMCPU", "jvmCpuTime"}
	JVMOffHeapMemory             = Metric{"ExecutorMetrics", "JVMOffHeapMemory"}
	OnHeapExecutionMemory        = Metric{"ExecutorMetrics", "OnHeapExecutionMemory"}
	OnHeapStorageMemory          = Metric{"ExecutorMetrics", "OnHeapStorageMemory"}
	OnHeapUnifiedMemory          = Metric{"ExecutorMetrics", "OnHeapUnifiedMemory"}
	OffHeapExecutionMemory       = Metric{"ExecutorMetrics", "OffHeapExecutionMemory"}
	OffHeapStorageMemory         = Metric{"ExecutorMetrics", "OffHeapStorageMemory"}
	OffHeapUnifiedMemory         = Metric{"ExecutorMetrics", "OffHeapUnifiedMemory"}
	DirectPoolMemory             = Metric{"ExecutorMetrics", "DirectPoolMemory"}
	MappedPoolMemory             = Metric{"ExecutorMetrics", "MappedPoolMemory"}
	TotalGCTime                  = Metric{"ExecutorMetrics", "TotalGCTime"}
	MinorGCCount                 = Metric{"ExecutorMetrics", "MinorGCCount"}
	MajorGCCount                 = Metric{"ExecutorMetrics", "MajorGCCount"}
	HeapUsage                    = Metric{"jvm", "heap.usage"}
	HeapUsed                     = Metric{"jvm", "heap.used"}
	NonHeapUsed                  = Metric{"jvm", "non-heap.used"}
	TotalUsed                    = Metric{"jvm", "total.used"}
	CgroupMemoryRSS              = Metric{"plugin.ch.cern.CgroupMetrics", "MemoryRss"}
	CgroupMemoryCache            = Metric{"plugin.ch.cern.CgroupMetrics", "MemoryCache"}
	CgroupNetworkIn              = Metric{"plugin.ch.cern.CgroupMetrics", "NetworkBytesIn"}
	CgroupNetworkOut             = Metric{"plugin.ch.cern.CgroupMetrics", "NetworkBytesOut"}
	CompletedTasks               = Metric{"appStatus", "tasks.completedTasks.count"}
	FailedTasks                  = Metric{"appStatus", "tasks.failedTasks.count"}
	KilledTasks                  = Metric{"appStatus", "tasks.killedTasks.count"}
	SucceededJobs                = Metric{"appStatus", "jobs.succeededJobs.count"}
	FailedJobs                   = Metric{"appStatus", "jobs.failedJobs.count"}
	CompletedStages              = Metric{"appStatus", "stages.completedStages.count"}
	FailedStages                 = Metric{"appStatus", "stages.failedStages.count"}
	SkippedStages                = Metric{"appStatus", "stages.skippedStages.count"}
	JobDuration                  = Metric{"appStatus", "jobDuration"}
	SchedulerActiveJobs          = Metric{"DAGScheduler", "job.activeJobs"}
	SchedulerAllJobs             = Metric{"DAGScheduler", "job.allJobs"}
	SchedulerRunningStages       = Metric{"DAGScheduler", "stage.runningStages"}
	SchedulerWaitingStages       = Metric{"DAGScheduler", "stage.waitingStages"}
	SchedulerFailedStages        = Metric{"DAGScheduler", "stage.failedStages"}
	SchedulerEventTimeMean       = Metric{"DAGScheduler", "messageProcessingTime.mean"}
	SchedulerEventTimeP99        = Metric{"DAGScheduler", "messageProcessingTime.p99"}
	EventsPosted                 = Metric{"LiveListenerBus", "numEventsPosted.count"}
	BlockMemoryMax               = Metric{"BlockManager", "memory.maxMem_MB"}
	BlockMemoryUsed              = Metric{"BlockManager", "memory.memUsed_MB"}
	BlockMemoryRemaining         = Metric{"BlockManager", "memory.remainingMem_MB"}
	BlockDiskUsed                = Metric{"BlockManager", "disk.diskSpaceUsed_MB"}
	AllExecutors                 = Metric{"ExecutorAllocationManager", "executors.numberAllExecutors"}
	TargetExecutors              = Metric{"ExecutorAllocationManager", "executors.numberTargetExecutors"}
	ExecutorsToAdd               = Metric{"ExecutorAllocationManager", "executors.numberExecutorsToAdd"}
	ExecutorsPendingToRemove     = Metric{"ExecutorAllocationManager", "executors.numberExecutorsPendingToRemove"}
	CompilationTimeMean          = Metric{"CodeGenerator", "compilationTime.mean"}
	CompilationTimeP99           = Metric{"CodeGenerator", "compilationTime.p99"}
	StreamInputRate              = Metric{"spark.streaming", "inputRate-total"}
	StreamProcessingRate         = Metric{"spark.streaming", "processingRate-total"}
	StreamLatency                = Metric{"spark.streaming", "latency"}
	StreamStateRows              = Metric{"spark.streaming", "states-rowsTotal"}
	StreamStateBytes             = Metric{"spark.streaming", "states-usedBytes"}

	// The memory pools' use: in the CERN shape the measurement pools.used
	// with the tag pool; in the wide shape a field per pool of the jvm
	// point, pools.<pool>.used, which Field does not name.
	PoolUsed = Metric{"jvm", "pools.used"}
)

// Measurement is where s stores m.
func (s Shape) Measurement(m Metric) string {
	if s == Wide {
		return m.Source
	}
	if class, ok := strings.CutPrefix(m.Source, "plugin."); ok {
		return class + "." + m.Name
	}
	return m.Name
}

// Field is the field that holds m's value in s.
func (s Shape) Field(m Metric) string {
	if s == Wide {
		return m.Name
	}
	return "value"
}

// DeltaField is the field that holds the increase of a cumulative m since
// its previous sample, and RateField that increase per second.
func (s Shape) DeltaField(m Metric) string {
	if s == Wide {
		return m.Name + "_delta"
	}
	return "delta"
}

// RateField: see DeltaField.
func (s Shape) RateField(m Metric) string {
	if s == Wide {
		return m.Name + "_rate"
	}
	return "rate"
}

// Namespace is the value of the namespace tag that tells m's source in
// the CERN shape, "" in the wide one, where the measurement is the source.
func (s Shape) Namespace(m Metric) string {
	if s == Wide {
		return ""
	}
	if strings.HasPrefix(m.Source, "plugin.") {
		return "plugin"
	}
	return m.Source
}
