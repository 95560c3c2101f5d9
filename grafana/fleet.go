package grafana

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/stat"

	"github.com/sparkpulse/sparkpulse/schema"
)

const fleetDashboard = "sparkpulse-fleet"

// usageEnded selects the accounting of the applications that ended in the
// range, or were lost while they ran (a driver that crashed: package
// annotate closes it out with what it held until last seen); each once.
var usageEnded = fmt.Sprintf(`$timeFilter AND (%[1]s = 'end' OR %[1]s = 'lost')`, m(schema.FieldFact))

// usageMeasurement is spark_app_usage, quoted, and fromUsage the end of a
// query of the accounting of the applications that ended in the range.
var (
	usageMeasurement = m(schema.MeasurementUsage)
	fromUsage        = " FROM " + usageMeasurement + " WHERE " + usageEnded
)

// sumOf is the sum of a field of spark_app_usage.
func sumOf(field string) string { return "sum(" + m(field) + ")" }

// Fleet returns the dashboard of every application at once: what each was
// given against what it used, and what right-sizing would save. It reads
// the spark_app_usage facts package annotate writes when an application
// ends; no variable filters them (user and queue tags are not on every
// point, rule 1), they are columns. Its last panels read the stream of
// schema sc.
func Fleet(sc schema.Shape) *dashboard.DashboardBuilder {
	v := ingestDeltas(sc)
	d := dashboard.NewDashboardBuilder(v.title("Spark fleet (sparkpulse)")).
		Uid(v.uid(fleetDashboard)).
		Description(v.description("Every Spark application that ended in the time range: the cores and memory it held, what it used, and what the sizing rules' recommendations would save. From the accounting sparkpulse writes when an application ends (needs [annotate] and the metrics of [[graphite]]).")).
		Tags([]string{"spark", "sparkpulse"}).
		Editable().
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Time("now-2d", "now").
		Refresh("5m").
		Timezone(common.TimeZoneBrowser)

	d.WithRow(dashboard.NewRowBuilder("Applications that ended, or were lost, in the range"))
	for _, p := range usageStats(usageMeasurement) {
		d.WithPanel(p)
	}
	cols := usageColumns()
	apps := columnsTable("Applications, most idle core-hours first",
		"One row per application that ended in the range, or was lost while it ran (Outcome driver_lost: closed out with what it held until last seen). Metrics key: the applicationid its metrics carry, which the Spark dashboard's Application variable lists (its id, or its spark.metrics.namespace such as its name). Idle core-hours: the core-hours held in which no task ran (core-seconds less the tasks' run time × spark.task.cpus, as Sparklens counts task slots; not CPU, which leaves out Python workers, GC and I/O waits); unused GiB-hours: the GiB-hours held times the share of the container the executors' mean resident memory left free. Outcome: how it ended, from its last job (Spark records no exit status). Slots busy: task run time over core-seconds held; Driver-only: the share of its run time with no stage running; Lost task time: run time of failed and killed tasks (see docs/sizing.md). Recommended: the --conf settings of the sizing rules; the savings are theirs. `sparkpulse report --fleet` prints the same.",
		12, cols, func(fields string) string {
			return "SELECT " + fields + fromUsage
		}, "Idle core-hours", "Ended")
	d.WithPanel(apps)

	d.WithPanel(groupTable("By user", "The applications of each submitting user (sparkUser) that ended in the range, summed.", 8, "GiB-hours",
		fmt.Sprintf(`SELECT count(%s) AS "applications", %s / 3600 AS "core_hours", %s / 3600 / %d AS "gib_hours", %s / 3600 AS "saving_core_hours", %s / 3600 / %d AS "saving_gib_hours"%s GROUP BY %s`,
			m(schema.UsageDurationMs), sumOf(schema.UsageExecutorCoreSeconds), sumOf(schema.UsageExecutorMemoryByteSeconds), gib,
			sumOf(schema.UsageSavingCoreSeconds), sumOf(schema.UsageSavingByteSeconds), gib, fromUsage, m(schema.TagUser)),
		[]column{{field: schema.TagUser, name: "User"}, {field: "applications", name: "Applications"}, {field: "core_hours", name: "Core-hours"},
			{field: "gib_hours", name: "GiB-hours"}, {field: "saving_core_hours", name: "Saving, core-hours"}, {field: "saving_gib_hours", name: "Saving, GiB-hours"}}))

	// Applications that run for days (streaming queries) never end: their
	// estimates are cumulative, so what they held in the range is the
	// spread of each figure over the estimates in it.
	d.WithPanel(groupTable("Running applications, in the range",
		"Applications with accounting estimates in the range (at their first read, then every 30 polls): what each held and ran from its first estimate in the range to its latest — so a streaming query running for weeks counts the range, not its life — and the cores it held at the latest. Those that ended in the range are in the tables above too, with their whole run. `sparkpulse report --fleet` lists the running ones from the last estimate before the range.",
		8, "Core-hours",
		fmt.Sprintf(`SELECT spread(%[1]s) / 3600 AS "core_hours", spread(%[2]s) / 3600 / %[3]d AS "gib_hours", spread(%[4]s) / spread(%[1]s) AS %[5]s, last(%[6]s) AS %[6]s FROM %[7]s WHERE $timeFilter AND %[8]s = 'estimate' GROUP BY %[9]s`,
			m(schema.UsageExecutorCoreSeconds), m(schema.UsageExecutorMemoryByteSeconds), gib, m(schema.UsageBusySlotSeconds), m(schema.UsageSlotOccupancy),
			m(schema.UsageCoresHeld), usageMeasurement, m(schema.FieldFact), m(schema.TagApplicationID)),
		[]column{{field: schema.TagApplicationID, name: "Metrics key"}, {field: "core_hours", name: "Core-hours", unit: "none"},
			{field: "gib_hours", name: "GiB-hours", unit: "none"}, {field: schema.UsageSlotOccupancy, name: "Slots busy", unit: "percentunit"},
			{field: schema.UsageCoresHeld, name: "Cores held at the latest estimate", unit: "none"}}))

	d.WithRow(dashboard.NewRowBuilder("Held and used over time"))
	d.WithPanel(series("Core-hours held and used, by when applications ended", "short", "The core-hours the applications that ended in each interval held, and the CPU-hours they used: the gap is what the cluster held idle. Bucketed by the applications' end, so a long application counts where it ended.",
		query("", "SELECT "+sumOf(schema.UsageExecutorCoreSeconds)+" / 3600"+fromUsage+" GROUP BY time($__interval) fill(0)", "held"),
		query("", "SELECT "+sumOf(schema.UsageCPUUsedSeconds)+" / 3600"+fromUsage+" GROUP BY time($__interval) fill(0)", "used")))
	d.WithPanel(series("GiB-hours held and at the mean resident memory, by when applications ended", "short", "The GiB-hours of the containers held, and what the executors' mean resident memory would have needed.",
		query("", fmt.Sprintf(`SELECT %s / 3600 / %d%s GROUP BY time($__interval) fill(0)`, sumOf(schema.UsageExecutorMemoryByteSeconds), gib, fromUsage), "held"),
		query("", fmt.Sprintf(`SELECT %s / 3600 / %d%s GROUP BY time($__interval) fill(0)`, sumOf(schema.UsageMeanRSSByteSeconds), gib, fromUsage), "mean resident")))
	d.WithPanel(series("Task CPU across the cluster", "short", "CPU time of every executor's tasks per second of wall clock, all applications: the cores busy with tasks."+coresNote+deltaNoteText,
		query("", v.rateOf(schema.CPUTime, nsCores, nil, ""), "task CPU")))
	d.WithPanel(series("Container CPU across the cluster (cgroup plugin)", "short", "CPU time of the executors' containers, Python workers included, where the CERN SparkPlugins' CgroupMetrics is on (spark.plugins=ch.cern.CgroupMetrics)."+coresNote+deltaNoteText,
		query("", v.rateOf(schema.CgroupCPU, nsCores, nil, ""), "container CPU")))
	return d
}

// gib is a GiB, in the accounting's byte-seconds.
const gib = 1 << 30

// usageStats are the stat panels of the applications that ended in the
// range, read from measurement: spark_app_usage or spark_app_history,
// which hold the same fields.
func usageStats(measurement string) []*stat.PanelBuilder {
	from := " FROM " + measurement + " WHERE " + usageEnded
	var out []*stat.PanelBuilder
	for _, s := range []struct{ title, unit, desc, q string }{
		{"Applications", "short", "Applications that ended in the range, with their accounting, and those lost while they ran (a crashed or killed driver: closed out with what they held until last seen, Outcome driver_lost).",
			"SELECT count(" + m(schema.UsageDurationMs) + ")" + from},
		{"Core-hours held", "short", "Executor cores × the time each executor lived, summed: what the cluster held for them.",
			"SELECT " + sumOf(schema.UsageExecutorCoreSeconds) + " / 3600" + from},
		{"GiB-hours held", "short", "Executor containers (heap, overhead, PySpark and off-heap memory) × the time each executor lived.",
			fmt.Sprintf(`SELECT %s / 3600 / %d%s`, sumOf(schema.UsageExecutorMemoryByteSeconds), gib, from)},
		{"Driver core-hours held", "short", "What the cluster held for the drivers: the driver's cores in cluster mode, YARN's application master's in client mode, nothing for a client-mode driver outside the cluster (driver_held).",
			"SELECT " + sumOf(schema.UsageDriverCoreSeconds) + " / 3600" + from},
		{"CPU used of the cores held", "percentunit", "CPU time used (the containers' where the CERN cgroup plugin reports it, else the tasks') over the core-seconds held, of the applications whose CPU is known.",
			fmt.Sprintf(`SELECT %s / %s FROM %s WHERE %s >= 0 AND %s`, sumOf(schema.UsageCPUUsedSeconds), sumOf(schema.UsageExecutorCoreSeconds), measurement, m(schema.UsageCPUUsedSeconds), usageEnded)},
		{"Core-hours the advice would save", "short", "What the sizing rules' recommendations would have saved, had the applications run with them: fewer executors where cores sat idle (see docs/sizing.md).",
			"SELECT " + sumOf(schema.UsageSavingCoreSeconds) + " / 3600" + from},
		{"GiB-hours the advice would save", "short", "Likewise for memory: smaller containers where memory went unused, less the cost of the recommendations that add memory.",
			fmt.Sprintf(`SELECT %s / 3600 / %d%s`, sumOf(schema.UsageSavingByteSeconds), gib, from)},
		{"Task slots busy of those held", "percentunit", "Slot occupancy of the applications whose task run time is known: Σ task run time × spark.task.cpus over Σ executor core-seconds held, as Sparklens measures it (not CPU, which leaves out Python workers, GC and I/O waits).",
			fmt.Sprintf(`SELECT %s / %s FROM %s WHERE %s >= 0 AND %s`, sumOf(schema.UsageBusySlotSeconds), sumOf(schema.UsageExecutorCoreSeconds), measurement, m(schema.UsageSlotOccupancy), usageEnded)},
		{"Driver-only share of the run time", "percentunit", "The wall clock in which no stage ran, over the applications' run time, of those whose stage list Spark kept whole: executors held while only the driver worked.",
			fmt.Sprintf(`SELECT %s / %s FROM %s WHERE %s >= 0 AND %s`, sumOf(schema.UsageDriverOnlyMs), sumOf(schema.UsageDurationMs), measurement, m(schema.UsageDriverOnlyMs), usageEnded)},
		{"Task-hours lost to failures", "short", "Run time of task attempts that failed or were killed (speculative copies that lost included), of the applications where it could be told: a lower bound (see docs/sizing.md).",
			"SELECT " + sumOf(schema.UsageLostTaskSeconds) + " / 3600" + from},
	} {
		out = append(out, single(s.title, s.unit, s.desc, s.q))
	}
	return out
}

// usageColumns are the columns of the table of applications that ended.
func usageColumns() []column {
	return []column{
		{field: schema.FieldAppID, name: "Application"},
		{field: schema.TagApplicationID, name: "Metrics key"},
		{field: schema.TagAppName, name: "Name"},
		{field: schema.TagUser, name: "User"},
		{field: schema.TagQueue, name: "Queue or namespace"},
		{field: schema.UsageOutcome, name: "Outcome"},
		{field: schema.UsageDurationMs, name: "Duration", unit: "ms"},
		{field: schema.UsageExecutors, name: "Executors", unit: "none"},
		{field: "core_hours", name: "Core-hours", unit: "none", expr: m(schema.UsageExecutorCoreSeconds) + " / 3600"},
		{field: "gib_hours", name: "GiB-hours", unit: "none", expr: fmt.Sprintf(`%s / 3600 / %d`, m(schema.UsageExecutorMemoryByteSeconds), gib)},
		{field: "driver_core_hours", name: "Driver core-hours", unit: "none", expr: m(schema.UsageDriverCoreSeconds) + " / 3600"},
		{field: "idle_core_hours", name: "Idle core-hours", unit: "none", expr: fmt.Sprintf(`(%s - %s) / 3600`, m(schema.UsageExecutorCoreSeconds), m(schema.UsageBusySlotSeconds))},
		{field: "unused_gib_hours", name: "Unused GiB-hours", unit: "none", expr: fmt.Sprintf(`%s * (1 - %s) / 3600 / %d`, m(schema.UsageExecutorMemoryByteSeconds), m(schema.UsageMeanMemoryUtilisation), gib)},
		{field: schema.UsageSlotOccupancy, name: "Slots busy", unit: "percentunit"},
		{field: "driver_only_share", name: "Driver-only", unit: "percentunit", expr: m(schema.UsageDriverOnlyMs) + " / " + m(schema.UsageDurationMs)},
		{field: schema.UsageLostTaskSeconds, name: "Lost task time", unit: "s"},
		{field: schema.UsageCPUUtilisation, name: "CPU used", unit: "percentunit"},
		{field: schema.UsageMemoryUtilisation, name: "Peak memory", unit: "percentunit"},
		{field: schema.UsageGCShare, name: "GC share", unit: "percentunit"},
		{field: schema.UsageDiskSpilledBytes, name: "Spilled to disk", unit: "bytes"},
		{field: schema.UsageFailedTasks, name: "Failed tasks", unit: "none"},
		{field: "saving_core_hours", name: "Saving, core-hours", unit: "none", expr: m(schema.UsageSavingCoreSeconds) + " / 3600"},
		{field: "saving_gib_hours", name: "Saving, GiB-hours", unit: "none", expr: fmt.Sprintf(`%s / 3600 / %d`, m(schema.UsageSavingByteSeconds), gib)},
		{field: schema.UsageRecommended, name: "Recommended"},
	}
}
