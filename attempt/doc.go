// Package attempt reads one Spark application attempt from Spark's
// monitoring REST API into a snapshot (State), and assesses it: the
// accounting of package accounting and the advice of package sizing.
//
// The contract: State holds only what Spark's REST API answered of the
// attempt (and the metrics stream's totals for its accounting), never
// what became of it elsewhere. Reader.Read brings a State up to date with
// as few requests as it can:
//
//   - jobs: the running ones (jobs?status=running), those that stopped
//     running since the last read, and new ids found by asking for the
//     next id until Spark answers 404;
//   - stages: the active and pending ones (details=false), those that
//     left that list, stage ids the jobs name that were never seen, and
//     those of jobs that ended with failed stages (retries);
//   - SQL executions: the running ones one by one, and new ones by page
//     (details=false, planDescription=false), from the last id seen;
//   - executors: allexecutors, which Spark serves only whole, on full
//     reads, at every read until Spark lists an executor, and every third
//     read in between;
//   - stage details (details.go): the task distribution, slowest task and
//     failed and killed tasks of the stages that ended, within a budget of
//     requests per read; the progress of stages running long;
//   - the environment, once: the properties, the metrics' key
//     (MetricsKey).
//
// A burst of more than a few dozen single requests is replaced by one full
// list; a full read (after the end, or from a new source) reads every
// list whole. A read that fails leaves the State as far as it got; the
// next read takes it up from there.
//
// Assess reads an application this way from the first source that shows
// it and runs Account on it, the accounting and every sizing rule: the
// same code the annotator writes spark_app_usage and spark_sizing with,
// so that `sparkpulse report` gives the same figures and advice without
// an annotator. ReadStages reads the slowest stages for where an
// application's time went; TaskError classes a failed task's error.
//
// The package makes no points and keeps no record: it reads and
// computes, through a Getter its caller may count requests with.
package attempt
