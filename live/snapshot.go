// Package live is the live view of `sparkpulse watch` (and of `make run`):
// one screen, redrawn in place, of what the Spark applications are doing
// and what sparkpulse is doing with their metrics.
//
// A Querier reads a Snapshot: the applications from the annotations in
// InfluxDB (spark_app, spark_job, spark_executor), their busy cores and
// heap peaks from the metrics stream (runTime.count's deltas,
// JVMHeapMemory against heap.max, as the built-in Spark mapping names
// them, in the shapes Config.Schemas says it holds), the accounting and reconciliation of those that ended
// (spark_app_usage, spark_reconcile), and sparkpulse's own figures from
// its admin endpoint's /metrics. Only data dated from Since on is read, so
// that rows of an earlier run do not show. Render draws a Snapshot as at
// most MaxLines lines of at most the given width, a pure function; Run
// reads and draws every interval until its context ends.
package live

import "time"

// Snapshot is what one frame shows.
type Snapshot struct {
	At       time.Time // when it was read
	Since    time.Time // data dated from then on
	Database string    // where the applications were read
	Interval time.Duration

	Apps     []App     // newest first
	Verdicts []Verdict // ended applications' accounting, newest first
	// QueryErr says why InfluxDB could not be read ("" when it was).
	QueryErr string

	Self    *Self  // nil when there is no admin endpoint to read
	SelfErr string // why the admin endpoint could not be read

	Notes []string // Config.Notes
}

// App is one Spark application.
type App struct {
	ID, Name string
	Started  time.Time
	Status   string // StatusRunning, StatusEnded, StatusLost or StatusStream
	// Executors and Cores are the executors alive (not the driver) and
	// their cores, from spark_executor; -1 when unknown.
	Executors, Cores int
	// Busy is the cores busy with tasks: the executors' task run time
	// (runTime.count's deltas) over BusyWindow, divided by it; -1 when
	// unknown.
	Busy       float64
	BusyWindow time.Duration
	// HeapPeak is the largest heap peak of an executor (JVMHeapMemory)
	// and HeapMax that executor's heap limit (heap.max, -Xmx); 0 when
	// unknown.
	HeapPeak, HeapMax float64
	Job               *Job // the latest job; nil before the first
	FailedJobs        int
}

// Application statuses.
const (
	StatusRunning = "running"
	StatusEnded   = "ended"
	StatusLost    = "lost"    // its source lost it while it ran (status UNKNOWN)
	StatusStream  = "metrics" // no source showed it: seen only in its metrics (fact stream)
)

// Job is an application's latest job.
type Job struct {
	ID     int
	Status string // as Spark says: RUNNING, SUCCEEDED, FAILED, UNKNOWN
}

// Verdict is the accounting and reconciliation of an ended application,
// from spark_app_usage (fact end) and spark_reconcile.
type Verdict struct {
	Ended     time.Time
	App       string // its id
	Name      string
	Executors int
	// CoreHours and GiBHours are what its executors held.
	CoreHours, GiBHours float64
	// CPUUsed is the share of the held cores' time used (cpu_utilisation),
	// MemoryPeak the peak RSS against the container (memory_utilisation);
	// -1 when unknown.
	CPUUsed, MemoryPeak float64
	Verdict             string // spark_reconcile's verdict; "" until written
	Detail              string // spark_reconcile's text
}

// Self is sparkpulse's own figures, from its /metrics.
type Self struct {
	Up          time.Duration
	Lines       float64            // received, all listeners
	LinesPerSec float64            // over the last minute of reads; -1 until they span 10 s
	Written     float64            // points InfluxDB accepted (all writers)
	Dropped     map[string]float64 // lines dropped, by reason (non-zero only)
	Rejected    map[string]float64 // points InfluxDB refused, by reason (non-zero only)
	WriteErrors float64            // failed write requests
	QueueBytes  float64            // waiting in memory
	DiskBytes   float64            // waiting in the disk queue
	// NoDelta counts counters' first samples that got no delta because
	// they came within the first-sample grace after sparkpulse started.
	NoDelta float64
	// The Spark REST sources: how many are polled, each one's failed
	// polls (by source, as configured; totals), those of the last minute
	// (set by the Querier, nil until it has two reads), and the
	// applications lost by their source, waiting for another.
	Sources       float64
	SourceErrors  map[string]float64
	SourceFailing map[string]float64
	LostApps      float64
}
