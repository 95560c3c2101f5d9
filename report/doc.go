// Package report reads, computes and prints what `sparkpulse report`
// shows, as text or JSON, to an io.Writer.
//
// WriteApp is one application, read through package attempt as the
// annotator reads it: attempt.Assess's accounting and sizing advice (the
// same rules as spark_app_usage and spark_sizing, from Spark's REST API
// and the metrics stream its attempt.Config names), its
// executors' peaks against their limits, and where its time went
// (package timespent, on its slowest stages and failed tasks, a task lost
// with its executor classed with why the executor went).
//
// WriteRecorded is one application as the annotator recorded it in
// InfluxDB (its last application fact, the accounting, advice and
// reconciliation written at its end, its longest stages), for when no
// source shows it: a live UI gone with its driver, no History Server, or
// an application only its metrics showed.
//
// WriteFleet is every application that ended in a range, from the
// spark_app_usage facts the annotator writes (end and lost), ranked by
// idle core-hours (task slots no task ran in), then GiB-hours, then id,
// with their totals, plus the applications still running: the difference
// of their cumulative estimates over the range, outside the totals, and
// those seen only in their metrics (fact stream), outside them too. Every
// read is bounded in time; a read that fails names the database and the
// server, with its credentials redacted, never the statement.
//
// WriteJob is a recurring job, the applications of one name, run by
// run, each compared with the median of the successful runs before it
// (Judge): a regression past both a ratio and an absolute margin, named
// with the first figure that explains it (the Cause* rules, each tested
// where it must and must not fire), read where WriteFleet reads.
//
// The JSON of each has stable field names for scripts, and lists that are
// never null.
package report
