// Package grafana generates sparkpulse's Grafana dashboards from Go code
// with Grafana's foundation SDK, and lists their queries.
//
// The generated JSON is committed in dashboards/, where Grafana's file
// provisioning (provisioning/) loads it; a test fails when the committed
// files differ from what the code generates (go test ./grafana -update
// rewrites them). Every query is InfluxQL, so the dashboards work on
// InfluxDB 1.8, on 2.x through its DBRP mappings and on 3.x through its
// InfluxQL API.
//
// # Schemas
//
// The dashboards that read Spark's metrics are generated for each schema
// of the built-in mapping (schema.Shape), as its [[graphite]] block wrote
// them: dashboards/ holds the default schema's set, the one provisioned,
// with the health dashboard (sparkpulse's own metrics, stored alike in
// both); dashboards-cern/ the CERN schema's, with their own uids and
// titles (Dir). Every stream metric is read where schema.Shape says for a
// metric of its catalogue. Metrics whose name carries a scheme or a
// collector are one measurement each in the CERN shape and one field each
// in the wide one, matched by a regular expression, and so are the JVM's
// memory pools in the wide shape (the CERN shape's tag pool); InfluxQL
// takes no arithmetic on a regular expression of fields, so the wide
// panels read their ingest-time rate fields (<metric>_rate), per second,
// and name their series with Grafana's renameByRegex transformation.
//
// # Data source
//
// Every panel, target, query variable and annotation reads the data source
// variable (DatasourceVariable), the first variable of every dashboard,
// never a fixed uid. Each file is also written as Grafana exports a
// dashboard for sharing: __inputs asks an import for an InfluxDB data
// source (DatasourceInput), which becomes the variable's value; loaded as
// it is (file provisioning, a sidecar, /api/dashboards/db) the variable
// selects the data source named DatasourceName, which the provisioning
// files create with uid DatasourceUID, else the first InfluxDB data
// source. datasource.go says which Grafana code this relies on.
//
// # Portable queries
//
// InfluxDB 3 answers some InfluxQL differently from 1.x. Every generated
// query keeps these rules, which TestPortableQueries checks on every
// committed dashboard (sources are in influxdata/influxdb at v3.10.1):
//
//  1. No condition on a tag a measurement may lack (username, the
//     GraphiteSink prefix; appname and appstart). 3.x takes a regular
//     expression on a column a table lacks as false, and a comparison with
//     it as NULL (core/iox_query_influxql/src/plan/
//     planner_rewrite_expression.rs), where 1.x reads the tag as "": the
//     application list would be empty without a prefix.
//  2. SHOW TAG VALUES only, always with FROM and the dashboard's time range.
//     Without a time condition 3.x answers from the last day only
//     (influxql_metadata_cutoff, core/iox_query/src/config.rs) and without
//     FROM it reads every table; 1.x's SHOW MEASUREMENTS takes no time
//     range at all, so file system schemes are a list, not a query.
//  3. Every SELECT is bounded in time: the dashboard's range, or for
//     annotation facts (which sit at their item's start) from a day before
//     it. InfluxDB 3 Core refuses a query that would read more than 432
//     Parquet files, about 72 hours of a table
//     (influxdb3_write/src/write_buffer/mod.rs).
//  4. Nothing relies on a point being written again: 3.x does not reliably
//     keep the later of two points at one series and time. Annotations are
//     facts written once (package annotate); the executors table reads each
//     executor's latest snapshot, last() per process.
//
// Counter panels use the ingest-time delta field (delta, or
// <metric>_delta in the wide shape): its sum per $__interval, divided by
// the interval, is an exact rate for any interval and any number of
// executors, restarts included, and its sum over the time range is an
// exact total, executors that have gone included.
package grafana
