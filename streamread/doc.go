// Package streamread reads the metrics stream back from InfluxDB: what
// the [[graphite]] blocks wrote, for the annotator's accounting and
// reconciliation (annotate.Stream), for `sparkpulse report` and for the
// live view's choice of shapes.
//
// A Stream reads each of its databases in every shape the blocks writing
// it may have written (Databases: a block with templates the CERN shape, a
// block naming its schema that one, a block naming none both), one
// InfluxQL statement per database and shape, through one influx.Querier.
// Totals gives, per process, the sums of the counters' deltas in
// accounting.StreamCounters (and how many samples had no delta) and the
// peak and mean of the gauges in accounting.StreamGauges over a time range:
// the shapes of a database add up, their means weighed by their samples;
// databases holding the same application add their sums and take the
// larger peak. A read that fails names the database and the server, with
// its credentials redacted, never the statement.
//
// Delivered says whether the blocks' writers still hold points received
// before a time (a backlog after an outage), so that the accounting waits
// for them.
package streamread
