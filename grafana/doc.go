// Package grafana generates sparkpulse's Grafana dashboards from Go code
// with Grafana's foundation SDK, and lists their queries.
//
// The generated JSON is committed in dashboards/, where Grafana's file
// provisioning (provisioning/) loads it; a test fails when the committed
// files differ from what the code generates (go test ./grafana -update
// rewrites them). Every query is InfluxQL on the data source with uid
// DatasourceUID, so the dashboards work on InfluxDB 1.8, on 2.x through
// its DBRP mappings and on 3.x through its InfluxQL API.
//
// Counter panels use the ingest-time delta field: sum("delta") per
// $__interval, divided by the interval, is an exact rate for any interval
// and any number of executors, restarts included, and sum("delta") over
// the time range is an exact total, executors that have gone included.
package grafana
