// Package schema names what sparkpulse stores in InfluxDB: the shapes of
// the Spark metrics (Shape), where each metric the readers use is stored
// (Metric, its measurement and fields in either shape), the metrics' tags,
// and the measurements, tags and fields of the facts the annotator writes
// from Spark's REST API.
//
// It is a leaf: it imports nothing of sparkpulse, so that the writers
// (packages spark and annotate) and every reader (accounting, report,
// live, streamread, grafana, the command's checks) take each name from
// here and from nowhere else. docs/schema.md lists the same names, and
// its test reads them from this package and from the encoder.
package schema
