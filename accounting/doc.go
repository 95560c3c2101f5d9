// Package accounting works out, from what Spark's REST API says of an
// application attempt (its executors, stages, jobs and environment
// properties, as package sparkapi reads them) and the metrics stream's
// totals of its processes (ProcessTotals), what the attempt used and how
// the two sources agree:
//
//   - the usage, the figures of spark_app_usage (package sizing's
//     Account, with the driver-only time, failed stage attempts, lost
//     task time and outcome read from the stage and job lists): Account
//     for an attempt up to its end, Estimate for a running one so far,
//     Lost for one whose end was never seen;
//   - the reconciliation, the verdict and per-metric totals of
//     spark_reconcile: the stream's totals against Spark's (Reconcile);
//   - the screen of implausible numbers (Screen): a process's stream
//     figures that could not be true, set aside before anything uses them;
//   - the outcome (Outcome): how the attempt ended;
//   - what package sizing's advisor reads: the settings, and the
//     executors with their peaks, CPU and time alive (Result).
//
// It is pure: every function computes from its arguments alone. It makes
// no requests, reads no clock (times are parameters, epoch ms), writes and
// logs nothing, and does not change what it is given: the stream's maps
// and Spark's answers stay as read. The same inputs give the same
// figures, so the points package annotate writes and `sparkpulse report`
// agree.
//
// The stream's totals are keyed by StreamKey, over the counters in
// StreamCounters and the gauges in StreamGauges; whoever reads the stream
// (cmd/sparkpulse from InfluxDB) fills them in, MergeTotals adding up reads
// of windows that do not overlap.
package accounting
