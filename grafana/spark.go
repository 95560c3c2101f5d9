package grafana

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/table"

	"github.com/sparkpulse/sparkpulse/schema"
)

// Notes shared by panel descriptions.
const (
	deltaNoteText  = " Computed from sparkpulse's ingest-time deltas: exact for any interval, restarts and executors that have gone included."
	successOnly    = " Spark adds a task's metrics when it succeeds: a long task shows up in the interval in which it ends, failed tasks not at all."
	appStatusNote  = " From the driver's appStatus source: on by default in Spark 4.0; in 3.5 set spark.metrics.appStatusSource.enabled=true."
	processTree    = " Needs spark.executor.processTreeMetrics.enabled=true (Linux only); 0 otherwise."
	jvmSourceNote  = " From JvmSource: spark.metrics.conf.*.source.jvm.class=org.apache.spark.metrics.source.JvmSource."
	dynAllocNote   = " Only with dynamic allocation (spark.dynamicAllocation.enabled=true)."
	streamingNote  = " Only with spark.sql.streaming.metricsEnabled=true; one series per query name (or id)."
	heartbeatNote  = " ExecutorMetrics are refreshed at each executor heartbeat (10 s by default)."
	coresNote      = " Time per second of wall clock: 1 = one core busy all the time."
	usageNote      = " See docs/sizing.md, Where the slots and the time went."
	sparkDashboard = "sparkpulse-spark"
)

// Spark returns the Spark performance dashboard for the stream of schema
// sc: what the CERN Spark dashboard shows, computed from ingest-time
// deltas, with job, stage and SQL annotations and per-executor drill-down
// rows.
func Spark(sc schema.Shape) *dashboard.DashboardBuilder { return sparkDash(ingestDeltas(sc)) }

// SparkQueryTime returns the same dashboard for receivers whose
// ingest-time deltas are off (several receivers with no source affinity
// between them): every counter is differenced at query time instead.
func SparkQueryTime(sc schema.Shape) *dashboard.DashboardBuilder {
	return sparkDash(queryTimeRates(sc))
}

func sparkDash(v variant) *dashboard.DashboardBuilder {
	d := dashboard.NewDashboardBuilder(v.title("Spark performance (sparkpulse)")).
		Uid(v.uid(sparkDashboard)).
		Description(v.description("CPU, memory, I/O and time of Spark applications, from the metrics sparkpulse receives from Spark's GraphiteSink, with jobs, stages and SQL executions from Spark's REST API as annotations.")).
		Tags([]string{"spark", "sparkpulse"}).
		Editable().
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Time("now-30m", "now").
		Refresh("30s").
		Timezone(common.TimeZoneBrowser).
		// No GraphiteSink prefix filter: InfluxDB 3 takes any condition on a
		// tag a table lacks (username, without a prefix) as false (rule 1).
		// Natural order, newest first: standalone ids (app-<time>-<n>),
		// YARN's (application_<cluster start>_<n>, past _9999 too) and
		// local-<ms> sort by their numbers; Kubernetes' spark-<hex>
		// carry no time.
		WithVariable(queryVar("app", "Application",
			fmt.Sprintf(`SHOW TAG VALUES FROM %s WITH KEY = %s WHERE %s`, v.appMeasurements(), m(schema.TagApplicationID), timeFilter)).
			Sort(dashboard.VariableSortNaturalDesc).
			Description("Spark application id (spark.app.id, or spark.metrics.namespace) of the applications that reported in the time range, newest first (Kubernetes' spark-<hex> ids carry no time: pick by Name).")).
		WithVariable(queryVar("appname", "Name",
			fmt.Sprintf(`SHOW TAG VALUES FROM %s WITH KEY = %s WHERE %s AND %s`, m(schema.MeasurementApp), m(schema.TagAppName), byApp, factsRange)).
			Description("The application's name, as Spark's REST API reports it (needs [annotate]).")).
		WithVariable(all(queryVar("process", "Process",
			fmt.Sprintf(`SHOW TAG VALUES FROM %s WITH KEY = %s WHERE %s`, v.appMeasurements(), m(schema.TagProcess), where(byApp))), ".*").
			Sort(dashboard.VariableSortNumericalAsc).
			Description("The driver and executor ids the panels show.")).
		WithVariable(fileSystems()).
		WithVariable(drillProcesses(v)).
		WithVariable(reportingPeriod()).
		WithVariable(all(queryVar("query", "Streaming query",
			fmt.Sprintf(`SHOW TAG VALUES FROM %s WITH KEY = "id" WHERE %s`, v.of(schema.StreamInputRate).from, where(byApp))), ".*").
			Description("Structured streaming queries (their name, or id).")).
		Annotation(annotation("Jobs", "#5794F2", schema.MeasurementJob, true)).
		Annotation(annotation("SQL", "#B877D9", schema.MeasurementSQL, true)).
		Annotation(annotation("Stages", "#FF9830", schema.MeasurementStage, false)).
		Annotation(annotation("Application", "#73BF69", schema.MeasurementApp, false)).
		Annotation(annotation("Executor removals", "#F2495C", schema.MeasurementExecutorRemoval, true)).
		Annotation(annotation("Task failures", "#FF7383", schema.MeasurementTaskFailure, true))

	summary(d, v)
	workload(d, v)
	stages(d)
	io(d, v)
	memory(d, v)
	containers(d, v)
	executors(d)
	jvm(d, v)
	driver(d, v)
	streaming(d, v)
	drillDown(d, v)
	return d
}

// drillProcesses chooses the processes that get a drill-down row: the
// driver by default, those picked more; no All, so that an application of
// 500 executors does not get 3 000 panels.
func drillProcesses(v variant) *dashboard.QueryVariableBuilder {
	return queryVar("drill", "Drill down",
		fmt.Sprintf(`SHOW TAG VALUES FROM %s WITH KEY = %s WHERE %s`, v.appMeasurements(), m(schema.TagProcess), where(byApp))).
		Multi(true).IncludeAll(false).
		Sort(dashboard.VariableSortNumericalAsc).
		Current(dashboard.VariableOption{
			Selected: cog.ToPtr(true),
			Text:     dashboard.StringOrArrayOfString{ArrayOfString: []string{"driver"}},
			Value:    dashboard.StringOrArrayOfString{ArrayOfString: []string{"driver"}},
		}).
		Description("Processes with a drill-down row at the bottom, one row each.")
}

// reportingPeriod is the GraphiteSink period, the panels' smallest
// interval: a finer one would show gaps between reports.
func reportingPeriod() *dashboard.CustomVariableBuilder {
	return period("Reporting period", "spark.metrics.conf.*.sink.graphite.period (Spark's default 10 s): the smallest interval of the panels.")
}

// period is the variable every series panel takes as its smallest
// interval (series), 10 s by default.
func period(label, desc string) *dashboard.CustomVariableBuilder {
	return dashboard.NewCustomVariableBuilder("period").
		Label(label).
		Values(dashboard.StringOrMap{String: cog.ToPtr("1s,5s,10s,15s,30s,1m")}).
		Current(dashboard.VariableOption{
			Selected: cog.ToPtr(true),
			Text:     dashboard.StringOrArrayOfString{String: cog.ToPtr("10s")},
			Value:    dashboard.StringOrArrayOfString{String: cog.ToPtr("10s")},
		}).
		Description(desc)
}

// stages is the row of the application's stages in the range, slowest
// first, with their skew and stragglers, and its failed tasks.
func stages(d *dashboard.DashboardBuilder) {
	d.WithRow(dashboard.NewRowBuilder("Stages (Spark REST API)"))
	cols := []column{
		{field: schema.FieldStageID, name: "Stage", unit: "none"}, {field: schema.FieldStageAttempt, name: "Attempt", unit: "none"}, {field: schema.FieldName, name: "Name"},
		{field: schema.FieldStatus, name: "Status"}, {field: schema.FieldDurationMs, name: "Duration", unit: "ms"}, {field: schema.FieldNumTasks, name: "Tasks", unit: "none"},
		{field: schema.FieldNumFailedTasks, name: "Failed", unit: "none"}, {field: schema.FieldTaskSkew, name: "Skew (max / median)", unit: "none"},
		{field: schema.FieldTaskRunTimeMsP50, name: "Task median", unit: "ms"}, {field: schema.FieldTaskRunTimeMsMax, name: "Task max", unit: "ms"},
		{field: schema.FieldGCShare, name: "GC share", unit: "percentunit", expr: m(schema.FieldJVMGCTimeMs) + " / " + m(schema.FieldExecutorRunTimeMs)},
		{field: schema.FieldDiskBytesSpilled, name: "Spilled to disk", unit: "bytes"}, {field: schema.FieldShuffleReadBytes, name: "Shuffle read", unit: "bytes"},
		{field: schema.FieldShuffleFetchWaitMs, name: "Fetch wait", unit: "ms"}, {field: schema.FieldStragglerExecutor, name: "Straggler executor"},
		{field: schema.FieldStragglerHost, name: "Straggler host"}, {field: schema.FieldTaskDetails, name: "Details"},
	}
	t := columnsTable("Stages in the range, slowest first",
		"Every stage attempt of the application that ran in the time range, from Spark's REST API (needs [annotate]): its duration and tasks, how uneven its tasks were (skew: the longest task over the median; the straggler is the longest task's executor and host), the share of task time in GC, spill, shuffle read and fetch wait. Task figures are read for stages that ran at least stage-details-min-duration (5 s) or had failed tasks; Details says why a stage has none (short, budget, unavailable).",
		10, cols, func(fields string) string {
			return fmt.Sprintf(`SELECT %s FROM %s WHERE %s AND %s = 'end' AND %s AND %s >= ${__from}`, fields, m(schema.MeasurementStage), byApp, m(schema.FieldFact), factsRange, m(schema.FieldEndMs))
		}, "Duration", "Submitted")
	d.WithPanel(t)

	failures := table.NewPanelBuilder().
		Title("Failed tasks").
		Description("Tasks that failed in the range (up to failed-tasks-per-stage per stage attempt), from Spark's REST API: where they ran, the error's class and kind (oom, fetch_failed, executor_lost, killed, exception) and its first line.").
		Datasource(datasource).
		Span(24).
		Height(8).
		Footer(common.NewTableFooterOptionsBuilder().Show(false).Reducer([]string{})).
		WithTarget(&influxQLBuilder{InfluxQL{RefID: "A", RawQuery: true, ResultFormat: "table",
			Query: fmt.Sprintf(`SELECT %s FROM %s WHERE %s AND %s AND %s >= ${__from}`,
				ms(schema.FieldStageID, schema.FieldStageAttempt, schema.FieldTaskIndex, schema.FieldTaskAttempt, schema.FieldExecutorID, schema.FieldHost, schema.FieldKind, schema.FieldErrorClass, schema.FieldError),
				m(schema.MeasurementTaskFailure), byApp, factsRange, m(schema.FieldEndMs))}}).
		OverrideByName("Time", []dashboard.DynamicConfigValue{{Id: "displayName", Value: "Launched"}})
	d.WithPanel(failures)
}

// fileSystems lists Hadoop file system schemes. A scheme is in the
// measurement's name, and InfluxDB 1.x's SHOW MEASUREMENTS takes no time
// range (rule 2), so the common schemes are listed rather than queried;
// All, the default, matches whatever executors report.
func fileSystems() *dashboard.CustomVariableBuilder {
	const schemes = "file,hdfs,s3a,gs,abfs,abfss,wasb,viewfs"
	return dashboard.NewCustomVariableBuilder("fs").
		Label("File system").
		Values(dashboard.StringOrMap{String: cog.ToPtr(schemes)}).
		Multi(true).IncludeAll(true).AllValue(".+").
		Current(dashboard.VariableOption{
			Selected: cog.ToPtr(true),
			Text:     dashboard.StringOrArrayOfString{ArrayOfString: []string{"All"}},
			Value:    dashboard.StringOrArrayOfString{ArrayOfString: []string{"$__all"}},
		}).
		Description("Hadoop file system schemes reported by executors (spark.executor.metrics.fileSystemSchemes, default file,hdfs).")
}

func summary(d *dashboard.DashboardBuilder, v variant) {
	d.WithRow(dashboard.NewRowBuilder("Summary of the selected time range"))
	app := []string{byApp, byProcess}
	for _, s := range []struct{ title, unit, desc, q string }{
		{"Task run time", "ms", "Wall-clock time of tasks that succeeded." + successOnly + v.note, v.totalOf(schema.RunTime, app...)},
		{"Task CPU time", "ns", "CPU time of tasks that succeeded." + successOnly + v.note, v.totalOf(schema.CPUTime, app...)},
		{"Executors' JVM CPU time", "ns", "CPU time of the executor JVMs, measured continuously (tasks, GC, shuffle service threads)." + v.note, v.totalOf(schema.JVMCPUTime, byApp, executorsOnly)},
		{"Task GC time", "ms", "JVM garbage collection time during tasks." + successOnly + v.note, v.totalOf(schema.JVMGCTime, app...)},
		{"Tasks succeeded", "none", "Tasks that finished successfully on the selected executors." + v.note, v.totalOf(schema.SucceededTasks, app...)},
		{"Tasks failed", "none", "Tasks that failed, from the driver." + appStatusNote + v.note, v.totalOf(schema.FailedTasks, byApp)},
		{"Jobs succeeded", "none", "From the driver." + appStatusNote + v.note, v.totalOf(schema.SucceededJobs, byApp)},
		{"Jobs failed", "none", "From the driver." + appStatusNote + v.note, v.totalOf(schema.FailedJobs, byApp)},
		{"Stages failed", "none", "From the driver." + appStatusNote + v.note, v.totalOf(schema.FailedStages, byApp)},
		{"Input read", "bytes", "Bytes tasks read from their input (files, tables)." + v.note, v.totalOf(schema.BytesRead, app...)},
		{"Output written", "bytes", "Bytes tasks wrote to their output." + v.note, v.totalOf(schema.BytesWritten, app...)},
		{"Shuffle written", "bytes", "Shuffle bytes written by map tasks." + v.note, v.totalOf(schema.ShuffleWritten, app...)},
		{"Shuffle read", "bytes", "Shuffle bytes read by reduce tasks, local and remote." + v.note, v.totalOf(schema.ShuffleRead, app...)},
		{"Spilled to disk", "bytes", "Bytes spilled from memory to disk: memory pressure in sorts, joins and aggregations." + v.note, v.totalOf(schema.DiskBytesSpilled, app...)},
		{"Active tasks (latest)", "none", "Tasks running at the end of the selected range, summed over the selected executors.",
			latestPerProcess("sum", v.of(schema.ActiveTasks), app...)},
		{"Executors reporting", "none", "Executors that reported within the selected range.",
			latestPerProcess("count", v.of(schema.JVMHeapMemory), byApp, executorsOnly)},
		{"Heap used (latest, mean of processes)", "percentunit", "JVM heap used over maximum at the end of the range, averaged over the selected processes." + jvmSourceNote,
			latestPerProcess("mean", v.of(schema.HeapUsage), app...)},
		{"Peak JVM heap", "bytes", "The largest JVM heap any selected process reported in the range." + heartbeatNote,
			fmt.Sprintf(`SELECT max(%s) FROM %s WHERE %s`, m(v.of(schema.JVMHeapMemory).field), v.of(schema.JVMHeapMemory).from, where(app...))},
		{"Task slots busy", "percentunit", "Slot occupancy: the executors' task run time over the core-seconds they held, as Sparklens measures it; not CPU, which leaves out Python workers, GC and I/O waits. From the accounting, at the application's end or in its latest estimate while it runs (needs [annotate] and the stream)." + usageNote,
			fmt.Sprintf(`SELECT last(%s) FROM %s WHERE %s`, m(schema.UsageSlotOccupancy), m(schema.MeasurementUsage), where(byApp))},
		{"Driver-only time", "ms", "Wall clock with no stage attempt running: the executors held could run nothing while the driver planned, listed files, collected results or ran the program's own code. From the accounting, at the application's end or in its latest estimate; absent when Spark no longer lists every stage (spark.ui.retainedStages)." + usageNote,
			fmt.Sprintf(`SELECT last(%s) FROM %s WHERE %s`, m(schema.UsageDriverOnlyMs), m(schema.MeasurementUsage), where(byApp))},
	} {
		d.WithPanel(single(s.title, s.unit, s.desc, s.q))
	}
}

func workload(d *dashboard.DashboardBuilder, v variant) {
	d.WithRow(dashboard.NewRowBuilder("Workload"))
	app := []string{byApp, byProcess}
	d.WithPanel(stacked(series("Active tasks", "short", "Tasks running on each executor (the executor thread pool), stacked.",
		query("", v.gaugeOf("mean", schema.ActiveTasks, app, `"process"`), "$tag_process"))))
	d.WithPanel(series("Task slots: busy and held", "short", "Busy: tasks running on the selected applications' executors, summed (their thread pools' activeTasks, sampled at each report: tasks of any outcome, failing ones too). Held: the cores of their live executors, at each of the accounting's estimates (at an application's first read, then every 30 polls: needs [annotate] and the stream), as no metric of the stream gives them (threadpool.maxPool_size is 2147483647, Spark's task pool being unbounded). The gap is task slots held idle; see also the stat Task slots busy (run time over the core-seconds held).",
		query("", fmt.Sprintf(`SELECT sum("a") FROM (SELECT mean(%s) AS "a" FROM %s WHERE %s GROUP BY time($__interval), "process") WHERE $timeFilter GROUP BY time($__interval) fill(null)`,
			m(v.of(schema.ActiveTasks).field), v.of(schema.ActiveTasks).from, where(byApp, executorsOnly)), "busy"),
		query("", fmt.Sprintf(`SELECT sum("h") FROM (SELECT last(%s) AS "h" FROM %s WHERE %s GROUP BY time($__interval), %s fill(previous)) WHERE $timeFilter GROUP BY time($__interval) fill(null)`,
			m(schema.UsageCoresHeld), m(schema.MeasurementUsage), where(byApp), m(schema.TagApplicationID)), "held")))
	d.WithPanel(stacked(series("Task CPU (cores)", "short", "CPU time of tasks per second of wall clock, per executor."+coresNote+successOnly+v.note,
		query("", v.rateOf(schema.CPUTime, nsCores, app, `"process"`), "$tag_process"))))
	d.WithPanel(stacked(series("Executor JVM CPU (cores)", "short", "CPU used by each executor JVM, measured continuously: smoother than task CPU, and includes GC and shuffle threads."+coresNote+v.note,
		query("", v.rateOf(schema.JVMCPUTime, nsCores, []string{byApp, executorsOnly}, `"process"`), "$tag_process"))))
	d.WithPanel(series("Driver JVM CPU (cores)", "short", "CPU used by the driver JVM (scheduling, planning, collecting results)."+coresNote+v.note,
		query("", v.rateOf(schema.JVMCPUTime, nsCores, []string{byApp, driverOnly}, ""), "driver")))
	components := []struct {
		metric schema.Metric
		s      scale // nanoseconds or milliseconds
		alias  string
	}{
		{schema.RunTime, msCores, "run time"}, {schema.CPUTime, nsCores, "CPU time"}, {schema.JVMGCTime, msCores, "GC time"},
		{schema.DeserializeTime, msCores, "deserialize time"}, {schema.DeserializeCPUTime, nsCores, "deserialize CPU time"},
		{schema.ResultSerializationTime, msCores, "result serialization time"}, {schema.ShuffleFetchWaitTime, msCores, "shuffle fetch wait time"},
		{schema.ShuffleWriteTime, nsCores, "shuffle write time"},
	}
	var comp []*influxQLBuilder
	for _, x := range components {
		comp = append(comp, query("", v.rateOf(x.metric, x.s, app, ""), x.alias))
	}
	d.WithPanel(series("Task time components (cores)", "short",
		"Where task time goes, summed over the selected executors: run time against its CPU, GC, (de)serialization and shuffle parts. Run time not covered by the parts is mostly I/O and waiting."+coresNote+successOnly+v.note,
		comp...).Span(24))
	d.WithPanel(stacked(series("Task run time (cores)", "short", "Wall-clock time of tasks per second, per executor: roughly the average number of busy task slots."+coresNote+successOnly+v.note,
		query("", v.rateOf(schema.RunTime, msCores, app, `"process"`), "$tag_process"))))
	d.WithPanel(series("Task GC time (cores)", "short", "Garbage collection time during tasks, per executor. High against run time means memory pressure."+coresNote+successOnly+v.note,
		query("", v.rateOf(schema.JVMGCTime, msCores, app, `"process"`), "$tag_process")))
	d.WithPanel(series("Shuffle write time (cores)", "short", "Time tasks spent writing shuffle files, per executor."+coresNote+successOnly+v.note,
		query("", v.rateOf(schema.ShuffleWriteTime, nsCores, app, `"process"`), "$tag_process")))
	d.WithPanel(stacked(series("Tasks completed per second", "short", "Tasks that succeeded per second, per executor."+v.note,
		query("", v.rateOf(schema.SucceededTasks, perSecond, app, `"process"`), "$tag_process"))))
}

func io(d *dashboard.DashboardBuilder, v variant) {
	d.WithRow(dashboard.NewRowBuilder("I/O and shuffle"))
	app := []string{byApp, byProcess}
	d.WithPanel(stacked(series("Input read", "Bps", "Bytes per second tasks read from their input, per executor."+successOnly+v.note,
		query("", v.rateOf(schema.BytesRead, perSecond, app, `"process"`), "$tag_process"))))
	d.WithPanel(stacked(series("Output written", "Bps", "Bytes per second tasks wrote to their output, per executor."+successOnly+v.note,
		query("", v.rateOf(schema.BytesWritten, perSecond, app, `"process"`), "$tag_process"))))
	d.WithPanel(series("Records read and written", "short", "Records per second read from input and written to output, all selected executors."+v.note,
		query("", v.rateOf(schema.RecordsRead, perSecond, app, ""), "records read"),
		query("", v.rateOf(schema.RecordsWritten, perSecond, app, ""), "records written"),
		query("", v.rateOf(schema.ShuffleRecordsRead, perSecond, app, ""), "shuffle records read"),
		query("", v.rateOf(schema.ShuffleRecordsWritten, perSecond, app, ""), "shuffle records written")))
	fs := func(pattern string) family {
		return family{of: schema.BytesRead.Source, pattern: `filesystem\.$fs\.` + pattern}
	}
	d.WithPanel(v.fieldLegends(series("File system read ($fs)", "Bps", "Bytes per second read through Hadoop file systems (JVM-wide statistics, tasks of any outcome), per scheme and executor. Add schemes such as s3a with spark.executor.metrics.fileSystemSchemes."+v.note,
		v.familyRate(fs(`read_bytes`), perSecond, app, `"process"`, " $tag_process"))))
	d.WithPanel(v.fieldLegends(series("File system written ($fs)", "Bps", "Bytes per second written through Hadoop file systems, per scheme and executor."+v.note,
		v.familyRate(fs(`write_bytes`), perSecond, app, `"process"`, " $tag_process"))))
	d.WithPanel(v.fieldLegends(series("File system operations ($fs)", "ops", "Read, large read and write operations per second, per scheme, all selected executors."+v.note,
		v.familyRate(fs(`(read|largeRead|write)_ops`), perSecond, app, "", ""))))
	d.WithPanel(stacked(series("Shuffle read", "Bps", "Shuffle bytes per second read by reduce tasks, per executor."+successOnly+v.note,
		query("", v.rateOf(schema.ShuffleRead, perSecond, app, `"process"`), "$tag_process"))))
	d.WithPanel(stacked(series("Shuffle written", "Bps", "Shuffle bytes per second written by map tasks, per executor."+successOnly+v.note,
		query("", v.rateOf(schema.ShuffleWritten, perSecond, app, `"process"`), "$tag_process"))))
	d.WithPanel(series("Shuffle read: remote and local", "Bps", "Where shuffle data came from, all selected executors; remote reads spilled to disk when too large for memory."+v.note,
		query("", v.rateOf(schema.ShuffleRemoteBytesRead, perSecond, app, ""), "remote"),
		query("", v.rateOf(schema.ShuffleLocalBytesRead, perSecond, app, ""), "local"),
		query("", v.rateOf(schema.ShuffleRemoteBytesReadToDisk, perSecond, app, ""), "remote, to disk")))
	d.WithPanel(series("Shuffle fetch wait and remote requests (cores)", "short", "Time tasks waited for shuffle blocks, and time in remote shuffle requests, all selected executors."+coresNote+v.note,
		query("", v.rateOf(schema.ShuffleFetchWaitTime, msCores, app, ""), "fetch wait"),
		query("", v.rateOf(schema.ShuffleRemoteReqsDuration, msCores, app, ""), "remote requests")))
	d.WithPanel(series("Spill", "Bps", "Bytes per second spilled from memory (deserialized size) and to disk (serialized size), all selected executors."+v.note,
		query("", v.rateOf(schema.MemoryBytesSpilled, perSecond, app, ""), "memory"),
		query("", v.rateOf(schema.DiskBytesSpilled, perSecond, app, ""), "disk")).Span(24))
}

func memory(d *dashboard.DashboardBuilder, v variant) {
	d.WithRow(dashboard.NewRowBuilder("Memory (ExecutorMetrics, Spark 3+)"))
	app := []string{byApp, byProcess}
	gauge := func(title string, mt schema.Metric, desc string) {
		d.WithPanel(series(title, "bytes", desc+heartbeatNote, query("", v.gaugeOf("max", mt, app, `"process"`), "$tag_process")))
	}
	gauge("JVM heap", schema.JVMHeapMemory, "Heap used by each process's JVM.")
	gauge("JVM off-heap", schema.JVMOffHeapMemory, "Non-heap memory used by each JVM (metaspace, code cache, …).")
	gauge("Execution memory (on-heap)", schema.OnHeapExecutionMemory, "Memory used by shuffles, joins, sorts and aggregations.")
	gauge("Storage memory (on-heap)", schema.OnHeapStorageMemory, "Memory used by cached data and broadcast variables.")
	d.WithPanel(series("Off-heap execution and storage", "bytes", "Off-heap memory (spark.memory.offHeap.enabled) for execution and storage."+heartbeatNote,
		query("", v.gaugeOf("max", schema.OffHeapExecutionMemory, app, `"process"`), "execution $tag_process"),
		query("", v.gaugeOf("max", schema.OffHeapStorageMemory, app, `"process"`), "storage $tag_process")))
	d.WithPanel(series("Unified memory", "bytes", "Execution plus storage memory, on and off heap."+heartbeatNote,
		query("", v.gaugeOf("max", schema.OnHeapUnifiedMemory, app, `"process"`), "on-heap $tag_process"),
		query("", v.gaugeOf("max", schema.OffHeapUnifiedMemory, app, `"process"`), "off-heap $tag_process")))
	gauge("Resident memory: JVM", schema.JVMRSSMemory, "Resident set size of the JVM process: what a container memory limit counts."+processTree)
	gauge("Resident memory: Python workers", schema.PythonRSSMemory, "Resident set size of the PySpark worker processes (Python UDFs, pandas): outside the JVM heap, and a common cause of containers killed for memory."+processTree)
	gauge("Resident memory: other processes", schema.OtherRSSMemory, "Resident set size of other child processes (pipes, R)."+processTree)
	d.WithPanel(series("Direct and mapped buffers", "bytes", "JVM direct and memory-mapped buffer pools (Netty, shuffle)."+heartbeatNote,
		query("", v.gaugeOf("max", schema.DirectPoolMemory, app, `"process"`), "direct $tag_process"),
		query("", v.gaugeOf("max", schema.MappedPoolMemory, app, `"process"`), "mapped $tag_process")))
	d.WithPanel(series("GC time share", "percentunit", "Share of wall-clock time each JVM spent in garbage collection (minor and major)."+v.note,
		query("", v.rateOf(schema.TotalGCTime, msCores, app, `"process"`), "$tag_process")))
	d.WithPanel(series("Garbage collections per minute", "short", "Minor (young) and major (old) collections per minute, per process."+v.note,
		query("", v.rateOf(schema.MinorGCCount, perMinute, app, `"process"`), "minor $tag_process"),
		query("", v.rateOf(schema.MajorGCCount, perMinute, app, `"process"`), "major $tag_process")))
}

// containers is the CERN SparkPlugins' cgroup metrics: what each
// executor's container used, Python workers and other children included.
// The row is collapsed: it has data only where the plugin runs.
func containers(d *dashboard.DashboardBuilder, v variant) {
	app := []string{byApp, byProcess}
	const needs = " Needs spark.plugins=ch.cern.CgroupMetrics (CERN SparkPlugins; containers with cgroups, e.g. on Kubernetes)."
	row := dashboard.NewRowBuilder("Containers (CERN SparkPlugins cgroup metrics)").Collapsed(true)
	for _, b := range []panel{
		stacked(series("Container CPU (cores)", "short", "CPU time of each executor's container per second of wall clock: the JVM and its children, Python workers included."+coresNote+needs+v.note,
			query("", v.rateOf(schema.CgroupCPU, nsCores, app, `"process"`), "$tag_process"))),
		series("Container, JVM and task CPU (cores)", "short", "The containers' CPU against the executor JVMs' and the tasks', all selected executors: what the containers use above the JVMs is Python workers and other children, which task CPU never counts."+coresNote+needs+v.note,
			query("", v.rateOf(schema.CgroupCPU, nsCores, app, ""), "containers"),
			query("", v.rateOf(schema.JVMCPUTime, nsCores, []string{byApp, executorsOnly}, ""), "executor JVMs"),
			query("", v.rateOf(schema.CPUTime, nsCores, app, ""), "tasks")),
		series("Container memory", "bytes", "Resident and page-cache memory of each executor's container, as its cgroup counts them (the limit counts both)."+needs,
			query("", v.gaugeOf("max", schema.CgroupMemoryRSS, app, `"process"`), "RSS $tag_process"),
			query("", v.gaugeOf("max", schema.CgroupMemoryCache, app, `"process"`), "cache $tag_process")),
		series("Container network", "Bps", "Bytes per second the containers received and sent, all selected executors."+needs+v.note,
			query("", v.rateOf(schema.CgroupNetworkIn, perSecond, app, ""), "received"),
			query("", v.rateOf(schema.CgroupNetworkOut, perSecond, app, ""), "sent")),
	} {
		row.WithPanel(b)
	}
	d.WithRow(row)
}

// executors is the table of the application's driver and executors from
// the REST API: where each ran, how it ended and the peaks of its memory
// areas, the largest resident memory first.
func executors(d *dashboard.DashboardBuilder) {
	d.WithRow(dashboard.NewRowBuilder("Executors (Spark REST API)"))
	cols := []column{
		{field: schema.FieldExecutorID, name: "Executor"}, {field: schema.FieldHost, name: "Host"}, {field: schema.FieldStatus, name: "Status"}, {field: schema.FieldCores, name: "Cores", unit: "none"},
		{field: schema.FieldAddedMs, name: "Added", unit: "dateTimeAsIso"}, {field: schema.FieldDurationMs, name: "Lifetime", unit: "ms"},
		{field: schema.FieldPeakPrefix + "ProcessTreeJVMRSSMemory", name: "Peak JVM RSS", unit: "bytes"}, {field: schema.FieldPeakPrefix + "ProcessTreePythonRSSMemory", name: "Peak Python RSS", unit: "bytes"},
		{field: schema.FieldPeakPrefix + "JVMHeapMemory", name: "Peak heap", unit: "bytes"}, {field: schema.FieldPeakPrefix + "JVMOffHeapMemory", name: "Peak off-heap", unit: "bytes"},
		{field: schema.FieldPeakPrefix + "OnHeapExecutionMemory", name: "Peak execution memory", unit: "bytes"}, {field: schema.FieldPeakPrefix + "OnHeapStorageMemory", name: "Peak storage memory", unit: "bytes"},
		{field: schema.FieldGCShare, name: "GC share of task time", unit: "percentunit"}, {field: schema.FieldRemoveKind, name: "Removed as"}, {field: schema.FieldRemoveReason, name: "Removed because"},
	}
	// Each executor's latest snapshot (its series is tagged with process),
	// of those seen from a day before the range to its end: an executor
	// gets a snapshot whenever something of it changed.
	for i := range cols {
		cols[i].expr = "last(" + m(cols[i].field) + ")"
	}
	t := columnsTable("Executors: lifetime, removal and peak memory",
		"One row per driver and executor of the application seen in the time range (or the day before it), from Spark's REST API (needs [annotate]), as last seen: the host it ran on, how it ended (REMOVED, with Spark's or the cluster manager's reason, e.g. a container killed over its memory limit; ENDED with the application; ACTIVE), and the peak of each memory area over its life (peakMemoryMetrics, Spark 3+, with spark.executor.processTreeMetrics.enabled for the RSS columns). Sorted by peak JVM RSS, what a container memory limit counts.",
		10, cols, func(fields string) string {
			return fmt.Sprintf(`SELECT %s FROM %s WHERE %s AND %s GROUP BY %s`, fields, m(schema.MeasurementExecutor), byApp, factsRange, m(schema.TagProcess))
		}, "Peak JVM RSS", "Last seen")
	d.WithPanel(t)

	advice := table.NewPanelBuilder().
		Title("Sizing advice (applications that ended in the range)").
		Description("What sparkpulse's sizing rules make of the executors' peak memory and the application's memory settings (spark.executor.memory, memoryOverhead, pyspark.memory, off-heap), written when the application ends: the limits, the executors near one, and the --conf settings to change with their reasons. `sparkpulse report APP_ID` prints the same with a row per executor; the rules are in docs/sizing.md.").
		Datasource(datasource).
		Span(24).
		Height(8).
		Footer(common.NewTableFooterOptionsBuilder().Show(false).Reducer([]string{})).
		WithTarget(&influxQLBuilder{InfluxQL{RefID: "A", RawQuery: true, ResultFormat: "table",
			Query: fmt.Sprintf(`SELECT %s FROM %s WHERE %s AND %s`, fieldList(schema.SizingKind, schema.SizingRule, schema.SizingExecutor, schema.FieldText, schema.SizingReason),
				m(schema.MeasurementSizing), byApp, factsRange)}}).
		OverrideByName("Time", []dashboard.DynamicConfigValue{{Id: "custom.hidden", Value: true}})
	d.WithPanel(advice)
}

func jvm(d *dashboard.DashboardBuilder, v variant) {
	d.WithRow(dashboard.NewRowBuilder("JVM (JvmSource)"))
	app := []string{byApp, byProcess}
	d.WithPanel(series("Heap used", "bytes", "JVM heap used per process."+jvmSourceNote,
		query("", v.gaugeOf("max", schema.HeapUsed, app, `"process"`), "$tag_process")))
	d.WithPanel(series("Non-heap used", "bytes", "JVM non-heap memory used per process."+jvmSourceNote,
		query("", v.gaugeOf("max", schema.NonHeapUsed, app, `"process"`), "$tag_process")))
	d.WithPanel(series("Total JVM memory used, executors", "bytes", "Heap plus non-heap per executor."+jvmSourceNote,
		query("", v.gaugeOf("max", schema.TotalUsed, []string{byApp, executorsOnly}, `"process"`), "$tag_process")))
	d.WithPanel(series("Total JVM memory used, driver", "bytes", "Heap plus non-heap of the driver: watch it when results are collected to the driver."+jvmSourceNote,
		query("", v.gaugeOf("max", schema.TotalUsed, []string{byApp, driverOnly}, ""), "driver")))
	d.WithPanel(v.poolLegends("max", schema.PoolUsed, series("Memory pools", "bytes", "Memory used per JVM pool, the largest among the selected processes."+jvmSourceNote,
		v.pools("max", schema.PoolUsed, app))))
	// A collector's name is in its metrics' names ([^.]+.time). Its time in
	// ms per second is a share of the wall clock only where the query can
	// divide it: not over the wide shape's regular expression of fields.
	collectors := family{of: schema.HeapUsed.Source, pattern: `[^.]+\.time`, namespaced: true}
	if v.sc == schema.Wide {
		d.WithPanel(v.fieldLegends(series("GC time per collector", "ms", "Milliseconds each garbage collector ran per second of wall clock (1000: all the time), per process."+jvmSourceNote+v.note,
			v.familyRate(collectors, perSecond, app, `"process"`, " $tag_process"))))
	} else {
		d.WithPanel(series("GC time share per collector", "percentunit", "Share of wall-clock time in each garbage collector, per process."+jvmSourceNote+v.note,
			v.familyRate(collectors, msCores, app, `"process"`, " $tag_process")))
	}
}

func driver(d *dashboard.DashboardBuilder, v variant) {
	d.WithRow(dashboard.NewRowBuilder("Driver and scheduler"))
	a := []string{byApp}
	d.WithPanel(series("Jobs and stages now", "short", "Active jobs and running, waiting and failed stages, from the driver's DAGScheduler.",
		query("", v.gaugeOf("max", schema.SchedulerActiveJobs, a, ""), "active jobs"),
		query("", v.gaugeOf("max", schema.SchedulerRunningStages, a, ""), "running stages"),
		query("", v.gaugeOf("max", schema.SchedulerWaitingStages, a, ""), "waiting stages"),
		query("", v.gaugeOf("max", schema.SchedulerFailedStages, a, ""), "failed stages")))
	d.WithPanel(series("Jobs submitted per minute", "short", "Jobs submitted to the DAGScheduler per minute."+v.note,
		query("", v.rateOf(schema.SchedulerAllJobs, perMinute, a, ""), "jobs")))
	d.WithPanel(series("Tasks per second: completed, failed, killed", "short", "All tasks of the application as the driver counts them."+appStatusNote+v.note,
		query("", v.rateOf(schema.CompletedTasks, perSecond, a, ""), "completed"),
		query("", v.rateOf(schema.FailedTasks, perSecond, a, ""), "failed"),
		query("", v.rateOf(schema.KilledTasks, perSecond, a, ""), "killed")))
	d.WithPanel(series("Jobs and stages per minute: finished", "short", "Jobs and stages that ended per minute."+appStatusNote+v.note,
		query("", v.rateOf(schema.SucceededJobs, perMinute, a, ""), "jobs succeeded"),
		query("", v.rateOf(schema.FailedJobs, perMinute, a, ""), "jobs failed"),
		query("", v.rateOf(schema.CompletedStages, perMinute, a, ""), "stages completed"),
		query("", v.rateOf(schema.FailedStages, perMinute, a, ""), "stages failed"),
		query("", v.rateOf(schema.SkippedStages, perMinute, a, ""), "stages skipped")))
	d.WithPanel(series("Listener bus: events posted and dropped", "short", "Events per second posted to the driver's listener bus, and events dropped by each queue: dropped events mean the UI, event log or dynamic allocation miss information."+v.note,
		append([]*influxQLBuilder{query("", v.rateOf(schema.EventsPosted, perSecond, a, ""), "posted")},
			v.listenerBus(func(c col, by, alias string) *influxQLBuilder {
				return query("", v.rate(c, perSecond, a, by), "dropped: "+alias)
			}, queueDropped)...)...))
	d.WithPanel(series("Listener bus queue sizes", "short", "Events waiting in each listener bus queue (capacity spark.scheduler.listenerbus.eventqueue.capacity, 10000).",
		v.listenerBus(func(c col, by, alias string) *influxQLBuilder {
			return query("", gauge("max", c, a, by), alias)
		}, queueSize)...))
	d.WithPanel(series("Listener processing time, p99", "ms", "99th percentile of the time each listener and queue takes per event (Dropwizard timers, exponentially decaying reservoir).",
		v.listenerBus(func(c col, by, alias string) *influxQLBuilder {
			return query("", gauge("max", c, a, by), alias)
		}, listenerTimeP99, queueListenerTimeP99)...))
	d.WithPanel(series("DAGScheduler event processing time", "ms", "Time the DAGScheduler takes per event: mean and 99th percentile.",
		query("", v.gaugeOf("max", schema.SchedulerEventTimeMean, a, ""), "mean"),
		query("", v.gaugeOf("max", schema.SchedulerEventTimeP99, a, ""), "p99")))
	d.WithPanel(series("Block manager memory", "mbytes", "Storage memory and disk used by all block managers of the application, as the driver sums them.",
		query("", v.gaugeOf("max", schema.BlockMemoryUsed, a, ""), "memory used"),
		query("", v.gaugeOf("max", schema.BlockMemoryRemaining, a, ""), "memory remaining"),
		query("", v.gaugeOf("max", schema.BlockDiskUsed, a, ""), "disk used")))
	d.WithPanel(series("Dynamic allocation", "short", "Executors the application has, wants, and is adding or removing."+dynAllocNote,
		query("", v.gaugeOf("max", schema.AllExecutors, a, ""), "executors"),
		query("", v.gaugeOf("max", schema.TargetExecutors, a, ""), "target"),
		query("", v.gaugeOf("max", schema.ExecutorsToAdd, a, ""), "to add"),
		query("", v.gaugeOf("max", schema.ExecutorsPendingToRemove, a, ""), "pending removal")))
	d.WithPanel(series("Duration of the last finished job", "ms", "How long the latest job took, as the driver reports it."+appStatusNote,
		query("", v.gaugeOf("max", schema.JobDuration, a, ""), "job duration")))
	d.WithPanel(series("Code generation time", "ms", "Whole-stage code generation compile time (mean and p99), driver and executors.",
		query("", v.gaugeOf("max", schema.CompilationTimeMean, []string{byApp, byProcess}, ""), "mean"),
		query("", v.gaugeOf("max", schema.CompilationTimeP99, []string{byApp, byProcess}, ""), "p99")))
}

func streaming(d *dashboard.DashboardBuilder, v variant) {
	d.WithRow(dashboard.NewRowBuilder("Structured streaming"))
	q := []string{byApp, `"id" =~ /^$query$/`}
	d.WithPanel(series("Input and processing rate", "short", "Rows per second received and processed by each query in its last trigger: processing lower than input means the query falls behind."+streamingNote,
		query("", v.gaugeOf("mean", schema.StreamInputRate, q, `"id"`), "input $tag_id"),
		query("", v.gaugeOf("mean", schema.StreamProcessingRate, q, `"id"`), "processed $tag_id")))
	d.WithPanel(series("Trigger latency", "ms", "Duration of each query's last trigger."+streamingNote,
		query("", v.gaugeOf("max", schema.StreamLatency, q, `"id"`), "$tag_id")))
	d.WithPanel(series("State rows", "short", "Rows kept in each query's state store."+streamingNote,
		query("", v.gaugeOf("max", schema.StreamStateRows, q, `"id"`), "$tag_id")))
	d.WithPanel(series("State memory", "bytes", "Memory used by each query's state store."+streamingNote,
		query("", v.gaugeOf("max", schema.StreamStateBytes, q, `"id"`), "$tag_id")))
}

// drillDown is a row repeated for every process of the drill variable.
func drillDown(d *dashboard.DashboardBuilder, v variant) {
	one := []string{byApp, `"process" =~ /^$drill$/`}
	p := func(b panel) panel { return b }
	row := dashboard.NewRowBuilder("Process $drill").Repeat("drill").Collapsed(true)
	for _, b := range []panel{
		p(series("Active tasks", "short", "Tasks running on this executor.",
			query("", v.gaugeOf("mean", schema.ActiveTasks, one, ""), "active tasks")).Span(8)),
		p(series("CPU (cores): tasks and JVM", "short", "Task CPU (success-only, at task end) against the JVM's CPU (continuous)."+coresNote+v.note,
			query("", v.rateOf(schema.CPUTime, nsCores, one, ""), "task CPU"),
			query("", v.rateOf(schema.JVMCPUTime, nsCores, one, ""), "JVM CPU")).Span(8)),
		p(series("Memory: heap, execution, resident", "bytes", "The JVM heap against execution memory and the resident size of the JVM and its Python workers."+heartbeatNote+processTree,
			query("", v.gaugeOf("max", schema.JVMHeapMemory, one, ""), "JVM heap"),
			query("", v.gaugeOf("max", schema.OnHeapExecutionMemory, one, ""), "execution"),
			query("", v.gaugeOf("max", schema.JVMRSSMemory, one, ""), "JVM RSS"),
			query("", v.gaugeOf("max", schema.PythonRSSMemory, one, ""), "Python RSS")).Span(8)),
		p(series("GC time share", "percentunit", "Share of wall-clock time in garbage collection."+v.note,
			query("", v.rateOf(schema.TotalGCTime, msCores, one, ""), "GC")).Span(8)),
		p(series("Shuffle read and written", "Bps", "Shuffle bytes per second."+v.note,
			query("", v.rateOf(schema.ShuffleRead, perSecond, one, ""), "read"),
			query("", v.rateOf(schema.ShuffleWritten, perSecond, one, ""), "written")).Span(8)),
		p(series("Input and output", "Bps", "Bytes per second tasks read and wrote."+v.note,
			query("", v.rateOf(schema.BytesRead, perSecond, one, ""), "input"),
			query("", v.rateOf(schema.BytesWritten, perSecond, one, ""), "output")).Span(8)),
	} {
		row.WithPanel(b)
	}
	d.WithRow(row)
}
