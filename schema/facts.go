package schema

// The facts the annotator writes from Spark's REST API: their
// measurements, tags and fields (docs/schema.md lists them; docs/sizing.md
// says how each figure of the accounting is worked out).

// Measurements of the facts.
const (
	MeasurementApp   = "spark_app"
	MeasurementJob   = "spark_job"
	MeasurementStage = "spark_stage"
	MeasurementSQL   = "spark_sql"
	// MeasurementExecutor has a point per driver and executor at the time
	// it was added: its host, cores, end and removal reason, and its peak
	// memory metrics.
	MeasurementExecutor = "spark_executor"
	// MeasurementExecutorRemoval has a point per executor removal at the
	// time of the removal, with the reason as text.
	MeasurementExecutorRemoval = "spark_executor_removal"
	// MeasurementSizing has, for a completed application, at its end: the
	// executors' memory limits (kind "limits"), then a point per finding
	// and per recommended setting of package sizing.
	MeasurementSizing = "spark_sizing"
	// MeasurementStageProgress has a point per read of a stage running
	// long: its finished tasks and its longest running.
	MeasurementStageProgress = "spark_stage_progress"
	// MeasurementTaskFailure has a point per failed task read of a stage
	// attempt, at the task's launch.
	MeasurementTaskFailure = "spark_task_failure"
	// MeasurementUsage has an application's accounting.
	MeasurementUsage = "spark_app_usage"
	// MeasurementReconcile compares the stream's totals with Spark's.
	MeasurementReconcile = "spark_reconcile"
	// MeasurementAppHistory is spark_app_usage's end, lost and stream
	// facts again, without the tag applicationid, written where
	// [annotate] history-* says: one point per application that ended,
	// in series per name, queue and user, so that they can be kept far
	// longer than the facts tagged by application (docs/retention.md).
	MeasurementAppHistory = "spark_app_history"
)

// Tags of the facts. TagApplicationID and TagAppName (metrics.go) are on
// every point, TagProcess on spark_executor's.
const (
	// TagUser is the user the application ran for, on spark_app_usage:
	// YARN's word where its ResourceManager's proxy serves the UI, else
	// Spark's (sparkUser).
	TagUser = "user"
	// TagQueue is where the application ran, on spark_app_usage: the YARN
	// queue as YARN's ResourceManager reports it (root.etl) where its
	// proxy serves the UI, else as spark.yarn.queue asked for it, or the
	// Kubernetes namespace.
	TagQueue = "queue"
)

// Fields the facts of several measurements have.
const (
	// FieldFact is the fact a point is: start, end, lost, or (for
	// spark_app_usage) estimate.
	FieldFact = "fact"
	// FieldAppID is the application's id, which the tag applicationid
	// may not be (spark.metrics.namespace).
	FieldAppID = "app_id"
	// FieldTitle is the fact's title, as a Grafana annotation shows it.
	FieldTitle = "title"
	// FieldText is the fact's text.
	FieldText = "text"
	// FieldAttemptID is the application attempt's id, where it has one.
	FieldAttemptID = "attempt_id"
	// FieldStatus is an item's status as Spark words it, or UNKNOWN.
	FieldStatus = "status"
	// FieldEndMs and FieldDurationMs are an ended item's end (epoch ms)
	// and run time, on the end, lost and stream facts of applications,
	// jobs, stages and SQL executions.
	FieldEndMs      = "end_ms"
	FieldDurationMs = "duration_ms"
)

// Fields of spark_job (besides those above): Spark's job as its REST API
// lists it.
const (
	FieldJobID             = "job_id"
	FieldName              = "name"
	FieldDescription       = "description"
	FieldJobGroup          = "job_group"
	FieldNumTasks          = "num_tasks"
	FieldNumStages         = "num_stages"
	FieldStageIDs          = "stage_ids"
	FieldNumCompletedTasks = "num_completed_tasks"
	FieldNumFailedTasks    = "num_failed_tasks"
	FieldNumKilledTasks    = "num_killed_tasks"
	FieldNumSkippedTasks   = "num_skipped_tasks"
	FieldNumFailedStages   = "num_failed_stages"
	FieldNumSkippedStages  = "num_skipped_stages"
	FieldSQLID             = "sql_id"
	FieldFailureReason     = "failure_reason"
)

// Fields of spark_stage: a stage attempt, with FieldName, FieldDescription,
// FieldNumTasks, FieldNumFailedTasks, FieldNumKilledTasks and
// FieldFailureReason; the task statistics and the straggler where its tasks
// were read.
const (
	FieldStageID                  = "stage_id"
	FieldStageAttempt             = "stage_attempt"
	FieldNumCompleteTasks         = "num_complete_tasks"
	FieldJobIDs                   = "job_ids"
	FieldExecutorRunTimeMs        = "executor_run_time_ms"
	FieldExecutorCpuTimeNs        = "executor_cpu_time_ns"
	FieldInputBytes               = "input_bytes"
	FieldOutputBytes              = "output_bytes"
	FieldShuffleReadBytes         = "shuffle_read_bytes"
	FieldShuffleWriteBytes        = "shuffle_write_bytes"
	FieldMemoryBytesSpilled       = "memory_bytes_spilled"
	FieldDiskBytesSpilled         = "disk_bytes_spilled"
	FieldJVMGCTimeMs              = "jvm_gc_time_ms"
	FieldShuffleFetchWaitMs       = "shuffle_fetch_wait_ms"
	FieldPeakExecutionMemoryBytes = "peak_execution_memory_bytes"
	FieldTaskDetails              = "task_details"
	FieldTaskSkew                 = "task_skew"
	FieldStragglerExecutor        = "straggler_executor"
	FieldStragglerHost            = "straggler_host"
	FieldStragglerTaskIndex       = "straggler_task_index"
	FieldStragglerRunTimeMs       = "straggler_run_time_ms"
	FieldStragglerSpeculative     = "straggler_speculative"
	FieldFailedTasksRead          = "failed_tasks_read"
)

// Fields of spark_stage_progress: a stage running long, at a read, with
// FieldStageID, FieldStageAttempt, FieldName, FieldNumTasks,
// FieldNumCompleteTasks, FieldTaskSkew and the straggler's executor, host
// and index.
const (
	FieldRunningMs          = "running_ms"
	FieldNumActiveTasks     = "num_active_tasks"
	FieldTaskRunTimeMsP50   = "task_run_time_ms_p50"
	FieldTaskRunTimeMsP95   = "task_run_time_ms_p95"
	FieldTaskRunTimeMsMax   = "task_run_time_ms_max"
	FieldStragglerRunningMs = "straggler_running_ms"
	FieldStragglerVsMedian  = "straggler_vs_median"
)

// Fields of spark_sql: a SQL execution, with FieldDescription and
// FieldJobIDs.
const (
	FieldExecutionID  = "execution_id"
	FieldFailedJobIDs = "failed_job_ids"
)

// Fields of spark_app: the application attempt, with FieldAppID.
const (
	FieldSparkUser    = "spark_user"
	FieldSparkVersion = "spark_version"
)

// Fields of spark_executor (tag TagProcess) and spark_executor_removal: the
// driver or an executor, its removal, and (spark_executor) its peak memory
// metrics, FieldPeakPrefix and the metric's name.
const (
	FieldExecutorID     = "executor_id"
	FieldHost           = "host"
	FieldHostPort       = "host_port"
	FieldAddedMs        = "added_ms"
	FieldCores          = "cores"
	FieldMaxMemory      = "max_memory"
	FieldCompletedTasks = "completed_tasks"
	FieldFailedTasks    = "failed_tasks"
	FieldTaskTimeMs     = "task_time_ms"
	FieldGCTimeMs       = "gc_time_ms"
	FieldGCShare        = "gc_share"
	FieldRemoveReason   = "remove_reason"
	FieldRemoveKind     = "remove_kind"
	FieldPeakPrefix     = "peak_"
)

// Fields of spark_task_failure: a failed task, with FieldStageID,
// FieldStageAttempt, FieldExecutorID and FieldHost.
const (
	FieldTaskID             = "task_id"
	FieldTaskIndex          = "task_index"
	FieldTaskAttempt        = "task_attempt"
	FieldErrorClass         = "error_class"
	FieldKind               = "kind"
	FieldError              = "error"
	FieldExecutorRemoveKind = "executor_remove_kind"
	FieldSpeculative        = "speculative"
)

// Fields of spark_app_usage: what the application was given and used,
// each as docs/sizing.md defines it (package accounting works them out),
// and what the recommendations would save. Besides FieldFact (end,
// estimate, lost), FieldAppID, FieldTitle, FieldText and FieldAttemptID.
const (
	// UsageDurationMs is the application's run time.
	UsageDurationMs = "duration_ms"
	// UsageExecutors is the number of executors it had.
	UsageExecutors = "executors"
	// UsageExecutorCores is the cores of each executor.
	UsageExecutorCores = "executor_cores"
	// UsageContainerBytes is an executor's container: heap, overhead,
	// PySpark and off-heap memory.
	UsageContainerBytes = "container_bytes"
	// UsageExecutorCoreSeconds is executor cores × the time each executor
	// lived: what the cluster held for them (on Kubernetes the pods' CPU
	// requests, where set).
	UsageExecutorCoreSeconds = "executor_core_seconds"
	// UsageExecutorGPUSeconds is executor GPUs × the time each executor
	// lived; written only where executors held GPUs.
	UsageExecutorGPUSeconds = "executor_gpu_seconds"
	// UsageDriverGPUSeconds is likewise the driver's in cluster mode.
	UsageDriverGPUSeconds = "driver_gpu_seconds"
	// UsageExecutorMemoryByteSeconds is executor containers × the time
	// each executor lived.
	UsageExecutorMemoryByteSeconds = "executor_memory_byte_seconds"
	// UsageDriverCoreSeconds is what the cluster held for the driver, in
	// core-seconds (see UsageDriverHeld).
	UsageDriverCoreSeconds = "driver_core_seconds"
	// UsageDriverMemoryByteSeconds is likewise in byte-seconds.
	UsageDriverMemoryByteSeconds = "driver_memory_byte_seconds"
	// UsageDriverHeld is what the driver figures count: driver, the
	// driver's container in cluster mode; yarn_am, YARN's application
	// master in client mode; outside, a client-mode driver outside the
	// cluster, counted as nothing.
	UsageDriverHeld = "driver_held"
	// UsageYARNVcoreSeconds is, at the end of an application whose UI
	// YARN's ResourceManager proxies, what YARN says it held for the
	// application's containers (the application master's included), each
	// from its allocation to its end: YARN's vcoreSeconds.
	UsageYARNVcoreSeconds = "yarn_vcore_seconds"
	// UsageYARNMemoryByteSeconds is likewise YARN's memorySeconds, in
	// byte-seconds: each container at the size YARN rounded it up to.
	UsageYARNMemoryByteSeconds = "yarn_memory_byte_seconds"
	// UsageCoresHeld is, in an estimate, the cores of the application's
	// live executors at the read.
	UsageCoresHeld = "cores_held"
	// UsageTaskCPUSeconds is the CPU time of the executors' tasks.
	UsageTaskCPUSeconds = "task_cpu_seconds"
	// UsageTaskRunSeconds is the run time of the executors' tasks.
	UsageTaskRunSeconds = "task_run_seconds"
	// UsageBusySlotSeconds is the core-seconds held while tasks ran:
	// UsageExecutorCoreSeconds × UsageSlotOccupancy (Σ task run time ×
	// spark.task.cpus where cores limit the tasks and are all held).
	UsageBusySlotSeconds = "busy_slot_seconds"
	// UsageCPUUsedSeconds is the CPU time used: the containers' where the
	// cgroup plugin reports it, else the tasks'.
	UsageCPUUsedSeconds = "cpu_used_seconds"
	// UsageCPUUtilisation is UsageCPUUsedSeconds over the core-seconds
	// held.
	UsageCPUUtilisation = "cpu_utilisation"
	// UsageCPUFrom is where the CPU figures come from: container, tasks,
	// stages.
	UsageCPUFrom = "cpu_from"
	// UsageContainerCPUSeconds is the CPU time of the executors'
	// containers (cgroup plugin).
	UsageContainerCPUSeconds = "container_cpu_seconds"
	// UsageGCSeconds is the executors' GC time.
	UsageGCSeconds = "gc_seconds"
	// UsageGCShare is the GC time over the tasks' time.
	UsageGCShare = "gc_share"
	// UsagePeakRSSBytes is the executors' peak resident memory.
	UsagePeakRSSBytes = "peak_rss_bytes"
	// UsageMemoryUtilisation is UsagePeakRSSBytes over the container.
	UsageMemoryUtilisation = "memory_utilisation"
	// UsageMeanRSSBytes is the executors' mean resident memory.
	UsageMeanRSSBytes = "mean_rss_bytes"
	// UsageMeanMemoryUtilisation is UsageMeanRSSBytes over the container.
	UsageMeanMemoryUtilisation = "mean_memory_utilisation"
	// UsageMeanRSSByteSeconds is the mean resident memory × the time each
	// executor lived: what the containers would have needed.
	UsageMeanRSSByteSeconds = "mean_rss_byte_seconds"
	// UsagePeakPythonRSSBytes is the Python workers' peak resident memory.
	UsagePeakPythonRSSBytes = "peak_python_rss_bytes"
	// UsageMemorySpilledBytes is, at the end, the bytes spilled from
	// memory.
	UsageMemorySpilledBytes = "memory_spilled_bytes"
	// UsageDiskSpilledBytes is, at the end, the bytes spilled to disk.
	UsageDiskSpilledBytes = "disk_spilled_bytes"
	// UsageFailedTasks is, at the end, the failed tasks.
	UsageFailedTasks = "failed_tasks"
	// UsageKilledTasks is, at the end, the killed tasks.
	UsageKilledTasks = "killed_tasks"
	// UsageShuffleFetchWaitMs is, at the end, the time tasks waited for
	// shuffle fetches.
	UsageShuffleFetchWaitMs = "shuffle_fetch_wait_ms"
	// UsageSlotOccupancy is busy slot-seconds ÷ core-seconds held.
	UsageSlotOccupancy = "slot_occupancy"
	// UsageDriverOnlyMs is the wall clock with no stage attempt running
	// (when Spark lists every stage).
	UsageDriverOnlyMs = "driver_only_ms"
	// UsageFailedStageAttempts is the stage attempts that failed (when
	// Spark lists every stage).
	UsageFailedStageAttempts = "failed_stage_attempts"
	// UsageLostTaskSeconds is the run time of failed and killed tasks,
	// and of successful tasks run again for shuffle output lost with an
	// executor, when it can be told.
	UsageLostTaskSeconds = "lost_task_seconds"
	// UsageRecomputeTaskSeconds is the run time of successful tasks run
	// again for shuffle output lost with an executor (in lost_task_seconds
	// when that is known).
	UsageRecomputeTaskSeconds = "recompute_task_seconds"
	// UsageOutcome is how the application ended: succeeded, failed,
	// running, unknown, driver_lost.
	UsageOutcome = "outcome"
	// UsageOutcomeReason says why.
	UsageOutcomeReason = "outcome_reason"
	// UsageFindings is the number of the sizing rules' findings.
	UsageFindings = "findings"
	// UsageRecommendations is the number of settings recommended.
	UsageRecommendations = "recommendations"
	// UsageSavingCoreSeconds is what the recommendations would save, in
	// core-seconds.
	UsageSavingCoreSeconds = "saving_core_seconds"
	// UsageSavingByteSeconds is likewise in byte-seconds.
	UsageSavingByteSeconds = "saving_byte_seconds"
	// UsageSavingGPUSeconds is likewise in GPU-seconds; written only
	// where executors held GPUs.
	UsageSavingGPUSeconds = "saving_gpu_seconds"
	// UsageRecommended is the recommended --conf settings.
	UsageRecommended = "recommended"
	// UsageSetAsideCount is the number of the stream's figures that could
	// not be true and were not used.
	UsageSetAsideCount = "set_aside_count"
	// UsageSetAside names them.
	UsageSetAside = "set_aside"
	// UsageNotes is what else the accounting has to say.
	UsageNotes = "notes"
)

// Fields of spark_reconcile: the stream's totals against Spark's own.
// Besides FieldAppID, FieldTitle, FieldText and FieldAttemptID, a
// ReconcileStream, ReconcileSpark and ReconcileDiff field for each total
// compared.
const (
	// ReconcileVerdict is the verdict: above_spark, exact, short,
	// no_delta, failed_tasks, differs, no_stream (package accounting's
	// Reconcile… constants).
	ReconcileVerdict = "verdict"
	// ReconcileAboveCount is the number of executors whose counters exceed
	// Spark's.
	ReconcileAboveCount = "above_count"
	// ReconcileAboveExecutors names them.
	ReconcileAboveExecutors = "above_executors"
	// ReconcileShortCount is the number of executors whose last reports
	// fell short.
	ReconcileShortCount = "short_count"
	// ReconcileShortExecutors names them.
	ReconcileShortExecutors = "short_executors"
	// ReconcileUnlistedProcesses is the number of processes in the stream
	// that Spark does not list.
	ReconcileUnlistedProcesses = "unlisted_processes"
	// ReconcileStagesDropped is the number of stages Spark no longer lists.
	ReconcileStagesDropped = "stages_dropped"
	// ReconcileFailedTasks is the failed tasks, whose metrics Spark counts
	// and the executors' counters do not.
	ReconcileFailedTasks = "failed_tasks"

	// ReconcileStreamPrefix, ReconcileSparkPrefix and ReconcileDiffPrefix
	// start the fields of a total compared: the stream's, Spark's, and
	// (stream − Spark) / Spark.
	ReconcileStreamPrefix = "stream_"
	ReconcileSparkPrefix  = "spark_"
	ReconcileDiffPrefix   = "diff_"
)

// A total spark_reconcile compares (the names of package accounting's
// reconciliation metrics).
const (
	TotalTasks             = "tasks"
	TotalCPUTimeNs         = "cpu_time_ns"
	TotalRunTimeMs         = "run_time_ms"
	TotalGCTimeMs          = "gc_time_ms"
	TotalInputBytes        = "input_bytes"
	TotalShuffleReadBytes  = "shuffle_read_bytes"
	TotalShuffleWriteBytes = "shuffle_write_bytes"
)

// ReconcileStream is the field of the stream's figure of a total.
func ReconcileStream(total string) string { return ReconcileStreamPrefix + total }

// ReconcileSpark is the field of Spark's figure of a total.
func ReconcileSpark(total string) string { return ReconcileSparkPrefix + total }

// ReconcileDiff is the field of a total's difference, (stream − Spark) /
// Spark.
func ReconcileDiff(total string) string { return ReconcileDiffPrefix + total }

// Fields of spark_sizing (MeasurementSizing): a point of kind limits, then
// one per finding and one per recommended setting, each with FieldText
// and FieldAttemptID.
const (
	// SizingKind is limits, finding or setting.
	SizingKind = "kind"

	// Limits: the executors' memory settings and container.
	SizingHeapBytes      = "heap_bytes"
	SizingUnifiedBytes   = "unified_bytes"
	SizingOverheadBytes  = "overhead_bytes"
	SizingPySparkBytes   = "pyspark_bytes"
	SizingOffHeapBytes   = "off_heap_bytes"
	SizingContainerBytes = "container_bytes"
	SizingExecutors      = "executors"

	// SizingRule is the rule of a finding or setting (docs/sizing.md).
	SizingRule = "rule"
	// SizingExecutor is the executor a finding is about; none for all.
	SizingExecutor = "executor"

	// Settings: the property, its recommended and current values, why,
	// the risk, and what it would save.
	SizingProperty          = "property"
	SizingValue             = "value"
	SizingCurrent           = "current"
	SizingReason            = "reason"
	SizingRisk              = "risk"
	SizingSavingCoreSeconds = "saving_core_seconds"
	SizingSavingGPUSeconds  = "saving_gpu_seconds" // only where it saves or costs GPUs
	SizingSavingByteSeconds = "saving_byte_seconds"
)
