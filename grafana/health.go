package grafana

import (
	"fmt"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/table"

	"github.com/sparkpulse/sparkpulse/schema"
)

const healthDashboard = "sparkpulse-health"

// byHost filters sparkpulse's own metrics ([internal]) by instance.
const byHost = `"host" =~ /^$host$/`

// Health returns the dashboard of sparkpulse itself, from the metrics it
// writes about itself ([internal]).
func Health() *dashboard.DashboardBuilder {
	d := dashboard.NewDashboardBuilder("sparkpulse health").
		Uid(healthDashboard).
		Description("sparkpulse's own metrics ([internal]): lines in, drops by reason, points written, InfluxDB errors and latency, delta state, annotation polling, process resources.").
		Tags([]string{"sparkpulse"}).
		Editable().
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Time("now-1h", "now").
		Refresh("30s").
		Timezone(common.TimeZoneBrowser).
		WithVariable(all(queryVar("host", "Instance",
			`SHOW TAG VALUES FROM "sparkpulse_lines_received_total" WITH KEY = "host" WHERE $timeFilter`), ".*")).
		WithVariable(period("Metrics interval", "[internal] interval (10 s by default): the smallest interval of the panels."))

	h := []string{byHost}
	// sparkpulse's own metrics are stored alike in every schema (own).
	v := ingestDeltas(schema.Default)
	counterRate := func(measurement string, s scale, groupBy string, conds ...string) string {
		return v.rate(own(measurement), s, append(h, conds...), groupBy)
	}
	d.WithRow(dashboard.NewRowBuilder("Overview"))
	for _, s := range []struct{ title, unit, desc, q string }{
		{"Lines received", "short", "Graphite lines received in the selected range, all listeners.", v.total(own("sparkpulse_lines_received_total"), h...)},
		{"Lines dropped", "short", "Lines that did not become points (see the reasons below).", v.total(own("sparkpulse_lines_dropped_total"), h...)},
		{"Points written", "short", "Points InfluxDB accepted, metrics, annotations and own metrics.", v.total(own("sparkpulse_influxdb_points_written_total"), h...)},
		{"Write errors", "short", "Failed write requests to InfluxDB (retried unless InfluxDB refused the points).", v.total(own("sparkpulse_influxdb_write_errors_total"), h...)},
		{"Oldest queued point", "s", "Age of the oldest point waiting to be written: grows while InfluxDB is down or slow.",
			fmt.Sprintf(`SELECT max("last") FROM (SELECT last("value") FROM "sparkpulse_influxdb_queue_oldest_age_seconds" WHERE %s GROUP BY "listener")`, where(h...))},
		{"Cumulative series tracked", "short", "Series whose last value the delta stage keeps.",
			fmt.Sprintf(`SELECT sum("last") FROM (SELECT last("value") FROM "sparkpulse_delta_series" WHERE %s GROUP BY "host")`, where(h...))},
	} {
		d.WithPanel(single(s.title, s.unit, s.desc, s.q))
	}

	d.WithRow(dashboard.NewRowBuilder("Ingest"))
	d.WithPanel(series("Lines received per second", "short", "Graphite lines received, per listener.",
		query("", counterRate("sparkpulse_lines_received_total", perSecond, `"listener"`), "$tag_listener")))
	d.WithPanel(series("Lines dropped per second, by reason", "short", "nan: Spark's NaN ratios (expected); fields, value, timestamp: malformed lines; too_long: over max-line-length; cut: a last line without its newline when the sender closed (a Spark process that died mid-report); mapping, time_key, key_too_long, encode: what the templates made of the path.",
		query("", counterRate("sparkpulse_lines_dropped_total", perSecond, `"reason"`), "$tag_reason")))
	d.WithPanel(series("TCP connections", "short", "Open connections, and connections accepted per second (Spark opens one per report and process).",
		query("", gauge("max", own("sparkpulse_graphite_connections_active"), h, `"listener"`), "open $tag_listener"),
		query("", counterRate("sparkpulse_graphite_connections_total", perSecond, `"listener"`), "accepted/s $tag_listener")))
	d.WithPanel(series("Bytes received per second", "Bps", "Graphite bytes received, per listener.",
		query("", counterRate("sparkpulse_graphite_bytes_received_total", perSecond, `"listener"`), "$tag_listener")))
	d.WithPanel(series("Connections paused or cut, per minute", "short", "accept paused: max-connections were open, new connections waited in the kernel's accept queue; dropped: closed because partial lines of all connections reached max-held-bytes; idle: no complete line for idle-timeout. Any of them steadily above zero is a sender misbehaving, or limits too low for the cluster (see docs/security.md).",
		query("", counterRate("sparkpulse_graphite_accept_paused_total", perMinute, `"listener"`), "accept paused $tag_listener"),
		query("", counterRate("sparkpulse_graphite_connections_dropped_total", perMinute, `"listener"`), "dropped $tag_listener"),
		query("", counterRate("sparkpulse_graphite_idle_timeouts_total", perMinute, `"listener"`), "idle $tag_listener")))

	d.WithRow(dashboard.NewRowBuilder("InfluxDB writes"))
	d.WithPanel(series("Points written per second", "short", "Points InfluxDB accepted, per listener (annotate and internal are sparkpulse's own writers).",
		query("", counterRate("sparkpulse_influxdb_points_written_total", perSecond, `"listener"`), "$tag_listener")))
	d.WithPanel(series("Points refused by InfluxDB, by reason", "short", "Points InfluxDB refused (field type conflict, unable to parse, …); the rest of their batch was stored.",
		query("", counterRate("sparkpulse_influxdb_points_rejected_total", perSecond, `"reason"`), "$tag_reason")))
	d.WithPanel(series("Write errors per second, by kind", "short", "Failed write requests: network, 5xx and 429 are retried; 4xx includes partial writes.",
		query("", counterRate("sparkpulse_influxdb_write_errors_total", perSecond, `"kind"`), "$tag_kind")))
	d.WithPanel(series("Write latency", "s", "Mean duration of write requests to InfluxDB, per listener.",
		query("", fmt.Sprintf(`SELECT sum("sum_delta") / sum("count_delta") FROM "sparkpulse_influxdb_write_duration_seconds" WHERE %s GROUP BY time($__interval), "listener" fill(null)`, where(h...)), "$tag_listener")))
	d.WithPanel(series("Write queue", "bytes", "Encoded points waiting to be written, per listener; when full, TCP reading slows down.",
		query("", gauge("max", own("sparkpulse_influxdb_queue_bytes"), h, `"listener"`), "$tag_listener")))
	d.WithPanel(series("Retries per second", "short", "Write requests repeated after an error.",
		query("", counterRate("sparkpulse_influxdb_write_retries_total", perSecond, `"listener"`), "$tag_listener")))
	d.WithPanel(series("Disk queue", "bytes", "Encoded points waiting in the disk queue under state-dir, per listener, and the largest backlog so far (memory plus disk). Grows while InfluxDB is down or slower than the senders; 0 without state-dir.",
		query("", gauge("max", own("sparkpulse_influxdb_disk_queue_bytes"), h, `"listener"`), "on disk $tag_listener"),
		query("", gauge("max", own("sparkpulse_influxdb_backlog_peak_bytes"), h, `"listener"`), "peak backlog $tag_listener")))
	d.WithPanel(series("Spilled to disk and damaged records", "short", "Batches moved to the disk queue because the memory queue was full, and damaged records skipped when the queue was read back, per minute.",
		query("", counterRate("sparkpulse_influxdb_disk_spilled_batches_total", perMinute, `"listener"`), "spilled $tag_listener"),
		query("", counterRate("sparkpulse_influxdb_disk_queue_damaged_total", perMinute, `"listener"`), "damaged $tag_listener")))

	d.WithRow(dashboard.NewRowBuilder("Deltas and annotations"))
	d.WithPanel(series("Cumulative series tracked", "short", "Series whose last value the delta stage keeps (bounded by [deltas] max-series).",
		query("", gauge("max", own("sparkpulse_delta_series"), h, ""), "series")))
	d.WithPanel(series("Samples without a plain delta, by outcome", "short", "reset: a counter restarted (delta = value); first_new: a new series (delta = value); first_unknown: first sample after start (no delta); out_of_order; refused (max-series reached); refused_app_quota (the application has max-series-per-app series: a flood of series under one application id).",
		query("", counterRate("sparkpulse_delta_samples_total", perSecond, `"outcome"`), "$tag_outcome")))
	d.WithPanel(series("Annotation polling", "short", "Polls of the Spark REST sources, requests, and annotation points written, per second.",
		query("", counterRate("sparkpulse_annotate_polls_total", perSecond, ""), "polls"),
		query("", counterRate("sparkpulse_annotate_requests_total", perSecond, ""), "requests"),
		query("", counterRate("sparkpulse_annotate_points_total", perSecond, ""), "points")))
	d.WithPanel(series("Annotation poll errors, by source and kind", "short", "Failed polls per second: network, http_status (404, 500, redirects, which are not followed), decode (not Spark's JSON, e.g. a proxy's HTML page, or larger than max-response-bytes).",
		query("", counterRate("sparkpulse_annotate_errors_total", perSecond, `"source", "kind"`), "$tag_kind $tag_source")))
	d.WithPanel(series("Application ids refused for {app_id}, by reason, per minute", "short", "Ids from the metrics not used to fill {app_id} templates: shape (not a Spark application id), host_label (not a valid DNS label there), rate (more new applications than new-apps-per-poll), cap (max-apps polled), retired (no source knew it, less than 10 min ago). A steady rate of shape or retired is someone sending made-up ids.",
		query("", counterRate("sparkpulse_annotate_apps_refused_total", perMinute, `"reason"`), "$tag_reason")))
	d.WithPanel(series("Stage details, per minute", "short", "Stage attempts that ended, by what became of their details (task distribution, straggler, failed tasks): read; short (ran less than stage-details-min-duration); budget (stage-details-requests spent that poll: raise it if this is steady); unavailable (read, but the source had no task summary).",
		query("", counterRate("sparkpulse_annotate_stage_details_total", perMinute, `"outcome"`), "$tag_outcome")))

	d.WithRow(dashboard.NewRowBuilder("Reconciliation: the stream against Spark's totals"))
	d.WithPanel(single("Tasks missing from the stream", "short", "Over the applications that ended in the range: the successful tasks Spark counts less those the executors' reports carried. Above 0, some executors' last reports never arrived (killed, lost, or sent while sparkpulse could not take them): the table names them.",
		fmt.Sprintf(`SELECT sum(%s) - sum(%s) FROM %s WHERE $timeFilter`,
			m(schema.ReconcileSpark(schema.TotalTasks)), m(schema.ReconcileStream(schema.TotalTasks)), m(schema.MeasurementReconcile))))
	// The table's columns, and the names it shows.
	recCols := []struct{ field, name string }{{schema.TagApplicationID, "Application"}, {schema.TagAppName, "Name"}, {schema.ReconcileVerdict, "Verdict"},
		{schema.ReconcileShortExecutors, "Executors short"}, {schema.ReconcileDiff(schema.TotalTasks), "Tasks"}, {schema.ReconcileDiff(schema.TotalCPUTimeNs), "CPU time"},
		{schema.ReconcileDiff(schema.TotalRunTimeMs), "Run time"}, {schema.ReconcileDiff(schema.TotalGCTimeMs), "GC time"}, {schema.ReconcileDiff(schema.TotalInputBytes), "Input"},
		{schema.ReconcileDiff(schema.TotalShuffleReadBytes), "Shuffle read"}, {schema.ReconcileDiff(schema.TotalShuffleWriteBytes), "Shuffle write"}, {schema.FieldText, "Why"}}
	var recFields []string
	for _, c := range recCols {
		recFields = append(recFields, c.field)
	}
	rec := table.NewPanelBuilder().
		Title("Applications that ended in the range: the stream against Spark").
		Description("For each application, the totals of its executors' reports as sparkpulse stored them (the sums of the ingest-time deltas) against Spark's own (its REST API's executor and stage lists), as (stream − Spark) / Spark. exact: every total matches; short: the executors named lost their last reports; failed_tasks: the tasks match, and the rest differ by the metrics of failed or killed tasks, which Spark counts and the executors' counters do not; differs: see the text; no_stream: InfluxDB could not be read.").
		Datasource(datasource).
		Span(24).
		Height(8).
		Footer(common.NewTableFooterOptionsBuilder().Show(false).Reducer([]string{})).
		WithTarget(&influxQLBuilder{InfluxQL{RefID: "A", RawQuery: true, ResultFormat: "table",
			Query: "SELECT " + fieldList(recFields...) + " FROM " + m(schema.MeasurementReconcile) + " WHERE $timeFilter"}}).
		OverrideByName("Time", []dashboard.DynamicConfigValue{{Id: "displayName", Value: "Ended"}})
	for _, c := range recCols {
		props := []dashboard.DynamicConfigValue{{Id: "displayName", Value: c.name}}
		if strings.HasPrefix(c.field, schema.ReconcileDiffPrefix) {
			props = append(props, dashboard.DynamicConfigValue{Id: "unit", Value: "percentunit"})
		}
		rec.OverrideByName(c.field, props)
	}
	d.WithPanel(rec)

	d.WithRow(dashboard.NewRowBuilder("Process"))
	d.WithPanel(series("CPU (cores)", "short", "CPU used by sparkpulse."+coresNote,
		query("", counterRate("process_cpu_seconds_total", perSecond, `"host"`), "$tag_host")))
	d.WithPanel(series("Resident memory", "bytes", "Resident set size of sparkpulse.",
		query("", gauge("max", own("process_resident_memory_bytes"), h, `"host"`), "$tag_host")))
	return d
}
