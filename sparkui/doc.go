// Package sparkui serves the monitoring REST API of Apache Spark
// (/api/v1/...) from an in-memory model of applications, so that clients of
// that API can be tested, and demonstrated, without a running Spark.
//
// A [Model] is filled by replaying real Spark event logs ([ReplayFile]),
// as Spark's History Server does, or built and changed step by step by a
// test ([Server.Update]) to script an application whose jobs and stages
// start and finish between two polls.
//
// The [Server] answers as Spark 3.x/4.x does, in one of two modes:
//
//   - [HistoryServer]: every application of the model; application
//     attempts that carry an attempt id (YARN cluster mode) must be named
//     in sub-resource paths (/applications/{app}/{attempt}/jobs), and a path
//     without it is answered 404, as Spark's FsHistoryProvider does.
//   - [LiveUI]: a driver's UI on port 4040: exactly one application, no
//     attempt id in its JSON, and an attempt segment is accepted and ignored.
//
// Endpoints: applications (status, minDate, maxDate, minEndDate,
// maxEndDate, limit), applications/{app}, jobs (status), jobs/{id}, stages
// (status, details), stages/{id}, stages/{id}/{attempt}, sql (offset,
// length, details, planDescription), sql/{id}, executors, allexecutors and
// version. JSON field names, omitted optional fields and date formats
// follow Spark's (package sparkapi holds the types). Job, stage and SQL lists
// keep Spark's order: jobs and stages newest first, SQL executions oldest
// first. Task-level detail (details=true) is not modelled: a stage is always
// answered without tasks, and [Server.Requests] lets a test check that a
// client never asked for them.
package sparkui
