// Package annotate polls Spark's monitoring REST API (live driver UIs,
// History Servers, YARN ResourceManager proxies) and turns applications,
// jobs, stages and SQL executions into InfluxDB points that Grafana draws
// as annotation regions on every graph.
//
// The package keeps discovery (which sources show which applications),
// scheduling (polls, backoff, budgets), hand-over between sources, and
// sync: package attempt reads an attempt into a snapshot and assesses it,
// and the encoder (points.go) turns the snapshot into line protocol,
// which package facts delivers once.
//
// # What is written
//
// Facts, written once each and never rewritten (package facts keeps the
// record; their times: facttime.go): InfluxDB 3 does not reliably keep
// the later of two points at one series and time.
//
// Application attempts, jobs, stage attempts and SQL executions, in the
// measurements spark_app, spark_job, spark_stage and spark_sql, get a start
// fact when seen running (status RUNNING or ACTIVE, what is known at the
// start, no end_ms) and an end fact once they have a final state (status,
// end_ms, duration_ms, task counts, failure_reason: the first line, stage
// and job links). An item still running when its source lost the
// application gets a lost fact instead, status UNKNOWN, ending when it was
// last seen. All facts of an item are at its start time, in milliseconds,
// with the item's id (modulo 250 000: the job id, the SQL execution id,
// stage id ×10 + attempt, 0 for the application) and the phase (start 0,
// end 1, lost 2) in the sub-millisecond digits, so two items of one
// application never share a time while all of them stay in one series per
// application: tags are only applicationid (the key the metrics use: the
// id, or what spark.metrics.namespace makes of it, namespace.go) and
// appname. Every fact has fact (start, end, lost), title and text for
// Grafana.
//
// The driver and every executor get a snapshot in spark_executor, in a
// series of its own (tag process, as in the metrics), whenever something
// of it changed, at the time it was read: host, cores, added_ms, status
// (ACTIVE, REMOVED, or ENDED with the application), end_ms once it ended,
// remove_reason, task and GC time, and peak_<name> for each value of
// Spark's peakMemoryMetrics. A removal also gets a fact in
// spark_executor_removal at the time of the removal, with the reason as
// its text. Each attempt's environment page is read on its first sync
// (the metrics' key, the settings); once it has completed, package
// sizing's advice on its executors' peaks is written in spark_sizing at
// its end: the limits, then each finding and recommended setting.
//
// An application that no source shows, whose metrics the stream names
// (SeeApp), gets stream facts in spark_app and spark_app_usage once its
// metrics have been quiet for CloseOutAfter: what its metrics say, marked
// as such (unseen.go).
//
// The poller's facts.Store (Poller.Facts) remembers which facts it
// wrote, journals them before they are handed to the sink, and keeps the
// record across restarts and crashes, so that neither a second source
// showing an application nor a restart writes a fact again.
//
// # How it polls
//
// Every Interval each source is asked for its applications that are
// running or ended recently (one request: applications?minEndDate=…,
// which Spark answers with running applications too); a History Server's
// older applications are read once, up to Lookback back, and never again.
// For each application attempt that is running or not yet written in its
// final state, package attempt reads what changed since the last poll
// (jobs, stages and their details, SQL executions, executors, the
// environment once; its doc says how), and a completed attempt once more
// in full. A History Server attempt whose lastUpdated has not moved is
// not asked at all. A fact is written once; a snapshot only when it
// changed.
//
// A source that fails is retried with exponential backoff (up to 5 min)
// and its failures are counted by kind; a refused connection (nothing
// listens, as at a driver's UI port between applications) and a driver's
// UI that says it is starting up are retried at the interval and count
// nothing towards the backoff; an application id the stream names for the first time
// has every failing configured source asked at the next round, so that no
// short application ends inside a backoff. One source never holds up another,
// nor the metrics path. An application that its source loses (a live UI
// that went away with its driver) is looked up on the other sources, so a
// History Server closes it out; without one, after CloseOutAfter (10
// minutes), its running items get lost facts, status UNKNOWN, ending when
// they were last seen, and the application its accounting up to then.
//
// Sources may be URL templates holding {app_id}, such as a YARN
// ResourceManager proxy (http://rm:8088/proxy/{app_id}); they are
// instantiated for every application id passed to [Poller.SeeApp], which
// the relay calls with the applicationid of the metrics it receives.
package annotate
