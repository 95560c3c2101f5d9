package grafana

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"

	"github.com/sparkpulse/sparkpulse/schema"
)

const historyDashboard = "sparkpulse-fleet-history"

// HistoryDashboardFile is the history dashboard's file in Dir of the
// default schema: it reads no stream, so there is one for every schema.
const HistoryDashboardFile = "fleet-history.json"

// historyMeasurement is spark_app_history, quoted, and fromHistory the end
// of a query of the applications in it that ended in the range.
var (
	historyMeasurement = m(schema.MeasurementAppHistory)
	fromHistory        = " FROM " + historyMeasurement + " WHERE " + usageEnded
)

// FleetHistory returns the dashboard of the fleet over months: the fleet
// dashboard's accounting, read from spark_app_history, which keeps each
// ended application's usage for as long as its own retention does (a year
// or more) in one series per name, queue and user, where the facts and
// the metrics are kept for weeks (docs/retention.md). Its data source
// variable selects the history's database. It has no table of every
// application: a year of a large fleet is millions of rows, which
// `report --fleet` serves; its tables are by name.
func FleetHistory() *dashboard.DashboardBuilder {
	d := dashboard.NewDashboardBuilder("Spark fleet over the year (sparkpulse)").
		Uid(historyDashboard).
		Description("Every Spark application that ended in the time range, from spark_app_history: the accounting of the fleet dashboard, kept for a year or more where the metrics and facts are kept for weeks. Needs [annotate] history-database (1.x) or history-bucket (2.x, 3); choose that database's data source.").
		Tags([]string{"spark", "sparkpulse"}).
		Editable().
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Time("now-90d", "now").
		Refresh("1h").
		Timezone(common.TimeZoneBrowser)

	d.WithRow(dashboard.NewRowBuilder("Applications that ended, or were lost, in the range"))
	for _, p := range usageStats(historyMeasurement) {
		d.WithPanel(p)
	}

	d.WithPanel(groupTable("By application name",
		"The applications of each name (spark.app.name) that ended in the range, summed: a nightly job is one row, its runs counted. Lost task time: run time of failed and killed tasks; the savings are the sizing rules' (docs/sizing.md).",
		10, "Core-hours",
		fmt.Sprintf(`SELECT count(%s) AS "runs", mean(%s) AS "mean_duration", %s / 3600 AS "core_hours", %s / 3600 / %d AS "gib_hours", %s / 3600 AS "lost_task_hours", %s / 3600 AS "saving_core_hours", %s / 3600 / %d AS "saving_gib_hours"%s GROUP BY %s`,
			m(schema.UsageDurationMs), m(schema.UsageDurationMs), sumOf(schema.UsageExecutorCoreSeconds), sumOf(schema.UsageExecutorMemoryByteSeconds), gib,
			sumOf(schema.UsageLostTaskSeconds), sumOf(schema.UsageSavingCoreSeconds), sumOf(schema.UsageSavingByteSeconds), gib, fromHistory, m(schema.TagAppName)),
		[]column{{field: schema.TagAppName, name: "Name"}, {field: "runs", name: "Runs", unit: "none"},
			{field: "mean_duration", name: "Mean duration", unit: "ms"}, {field: "core_hours", name: "Core-hours", unit: "none"},
			{field: "gib_hours", name: "GiB-hours", unit: "none"}, {field: "lost_task_hours", name: "Lost task-hours", unit: "none"},
			{field: "saving_core_hours", name: "Saving, core-hours", unit: "none"}, {field: "saving_gib_hours", name: "Saving, GiB-hours", unit: "none"}}))

	d.WithRow(dashboard.NewRowBuilder("Held and used, day by day"))
	d.WithPanel(series("Core-hours held and used, by the day applications ended", "short", "The core-hours the applications that ended each day held, and the CPU-hours they used: the gap is what the cluster held idle.",
		query("", "SELECT "+sumOf(schema.UsageExecutorCoreSeconds)+" / 3600"+fromHistory+" GROUP BY time(1d) fill(0)", "held"),
		query("", "SELECT "+sumOf(schema.UsageCPUUsedSeconds)+" / 3600"+fromHistory+" GROUP BY time(1d) fill(0)", "used")).
		Interval("1d"))
	d.WithPanel(series("Applications a day", "short", "Applications that ended each day, and the core-hours the sizing rules' recommendations would have saved them.",
		query("", "SELECT count("+m(schema.UsageDurationMs)+")"+fromHistory+" GROUP BY time(1d) fill(0)", "applications"),
		query("", "SELECT "+sumOf(schema.UsageSavingCoreSeconds)+" / 3600"+fromHistory+" GROUP BY time(1d) fill(0)", "core-hours the advice would save")).
		Interval("1d"))

	return d
}
