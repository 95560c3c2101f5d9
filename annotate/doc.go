// Package annotate polls Spark's monitoring REST API (live driver UIs,
// History Servers, YARN ResourceManager proxies) and turns applications,
// jobs, stages and SQL executions into InfluxDB points that Grafana draws
// as annotation regions on every graph.
//
// # What is written
//
// One point per application attempt, job, stage attempt and SQL execution,
// in the measurements spark_app, spark_job, spark_stage and spark_sql. The
// point's time is the item's start, in milliseconds, with a small id in the
// sub-millisecond digits (the job id, the SQL execution id, stage id ×10 +
// stage attempt, the application attempt number, each modulo 10⁶), so two
// items of one application never share a timestamp while all of them stay
// in one series per application: tags are only applicationid (the key the
// metrics use) and appname. Writing an item again overwrites its point.
// Fields: status, end_ms (epoch ms; for a running item, the time it was
// last seen running), duration_ms, the ids, name and description (trimmed
// to MaxText characters), task counts, failure_reason (the first line),
// stage and job links, and text and title for Grafana.
//
// The driver and every executor get a point in spark_executor at the time
// they were added (executor id + 1 in the sub-millisecond digits, the
// driver 0): host, cores, status (ACTIVE, REMOVED, or ENDED with the
// application), end_ms, remove_reason, task and GC time, and peak_<name>
// for each value of Spark's peakMemoryMetrics. A removal also gets a point
// in spark_executor_removal at the time of the removal, with the reason as
// its text. Once an attempt has completed, its environment page is read
// and package sizing's advice on its executors' peaks is written in
// spark_sizing at its end: the limits, then each finding and recommended
// setting.
//
// Field names and types never change between writes of one item, so
// InfluxDB never refuses a rewrite.
//
// # How it polls
//
// Every Interval each source is asked for its applications that are
// running or ended recently (one request: applications?minEndDate=…,
// which Spark answers with running applications too); a History Server's
// older applications are read once, up to Lookback back, and never again.
// For each application attempt that is running or not yet written in its
// final state, jobs, stages and SQL executions are synchronised
// incrementally:
//
//   - jobs: the running ones (jobs?status=running), those that stopped
//     running since the last poll, and new ids found by asking for the next
//     id until Spark answers 404;
//   - stages: the active and pending ones (details=false), those that left
//     that list, and stage ids the jobs name that were never seen;
//   - SQL executions: the running ones one by one, and new ones by page
//     (details=false, planDescription=false), from the last id seen;
//   - executors: allexecutors, which Spark serves only whole, on the first
//     and last reads and every third sync in between.
//
// A burst of more than a few dozen individual requests is replaced by one
// full list. A History Server attempt whose lastUpdated has not moved is not
// asked at all. Points are written only when their content changed.
//
// A source that fails is retried with exponential backoff (up to 5 min)
// and its failures are counted by kind; one source never holds up another,
// nor the metrics path. An application that its source loses (a live UI
// that went away with its driver) is looked up on the other sources, so a
// History Server closes it out; without one, after 10 minutes, its running
// items are written with status UNKNOWN at the time they were last seen.
//
// Sources may be URL templates holding {app_id}, such as a YARN
// ResourceManager proxy (http://rm:8088/proxy/{app_id}); they are
// instantiated for every application id passed to [Poller.SeeApp], which
// the relay calls with the applicationid of the metrics it receives.
package annotate
