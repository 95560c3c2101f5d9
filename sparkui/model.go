package sparkui

import (
	"slices"
	"time"
)

// Model is the set of applications a Server answers for. Change it only
// through Server.Update once a Server uses it.
type Model struct {
	Apps []*App
}

// App is one Spark application, with its attempts newest first (as Spark
// lists them).
type App struct {
	ID       string
	Name     string
	Attempts []*Attempt
}

// Attempt is one attempt of an application. Only YARN cluster mode gives
// attempts an ID; elsewhere it is "".
type Attempt struct {
	ID           string
	Start        time.Time
	End          time.Time // zero while running
	User         string
	SparkVersion string
	// Updated is what a History Server reports as lastUpdated for a
	// running attempt: its event log's modification time. Zero: the
	// server's current time.
	Updated time.Time

	Jobs       []*Job       // ascending ID
	Stages     []*Stage     // ascending (ID, Attempt)
	Executions []*Execution // ascending ID
	Executors  []*Executor  // in order of addition; "driver" first when known
	// Properties are the Spark properties the environment page lists.
	Properties map[string]string
}

// Running reports whether the attempt has not ended.
func (a *Attempt) Running() bool { return a.End.IsZero() }

// Job statuses, as Spark's JobExecutionStatus.
const (
	JobRunning   = "RUNNING"
	JobSucceeded = "SUCCEEDED"
	JobFailed    = "FAILED"
	JobUnknown   = "UNKNOWN"
)

// Stage statuses, as Spark's StageStatus.
const (
	StageActive   = "ACTIVE"
	StageComplete = "COMPLETE"
	StageFailed   = "FAILED"
	StagePending  = "PENDING"
	StageSkipped  = "SKIPPED"
)

// SQL execution statuses.
const (
	SQLRunning   = "RUNNING"
	SQLCompleted = "COMPLETED"
	SQLFailed    = "FAILED"
)

// Job is a Spark job as the REST API describes it (JobData).
type Job struct {
	ID          int
	Name        string // call site of the job's last stage
	Description string // spark.job.description, if set
	Group       string // spark.jobGroup.id, if set
	Tags        []string
	Submitted   time.Time // zero: absent (Spark 1.x logs)
	Completed   time.Time // zero: running, or absent
	StageIDs    []int
	Status      string

	Tasks, ActiveTasks, CompletedTasks, SkippedTasks, FailedTasks, KilledTasks int
	ActiveStages, CompletedStages, SkippedStages, FailedStages                 int

	// SQLExecutionID links the job to the SQL execution that ran it, -1 for
	// none. Spark's job JSON does not carry it; ExecutionData's job lists do.
	SQLExecutionID int64
}

// Stage is one attempt of a Spark stage (StageData without tasks).
type Stage struct {
	ID, Attempt   int
	Name          string // call site
	Description   string
	Details       string // call-site stack
	Status        string
	Submitted     time.Time // zero: pending
	FirstLaunched time.Time
	Completed     time.Time
	FailureReason string

	Tasks, ActiveTasks, CompleteTasks, FailedTasks, KilledTasks int

	RunTimeMs, CPUTimeNs                 int64
	InputBytes, InputRecords             int64
	OutputBytes, OutputRecords           int64
	ShuffleReadBytes, ShuffleReadRecords int64
	ShuffleWriteBytes, ShuffleWriteRecs  int64
	MemorySpilled, DiskSpilled           int64
	GCTimeMs, FetchWaitMs                int64
	PeakExecMemory                       int64 // the largest of a task

	TaskList []*Task // by task id; served by taskList and taskSummary
}

// Task is one task attempt (TaskData).
type Task struct {
	ID                    int64
	Index, Attempt        int
	Launched, Finished    time.Time // Finished zero while it runs
	Executor, Host        string
	Status                string // TaskRunning, TaskSuccess, TaskFailed, TaskKilled
	Speculative           bool
	Error                 string // errorMessage, as Spark words it for the end reason
	HasMetrics            bool
	RunTimeMs, GCTimeMs   int64
	PeakExecMemory        int64
	MemSpilled, DiskSpill int64
	InputBytes            int64
	ShuffleReadBytes      int64 // remote + local
	FetchWaitMs           int64
	CPUTimeNs             int64
	ShuffleWriteBytes     int64
}

// Task statuses, as Spark's TaskData.status.
const (
	TaskRunning = "RUNNING"
	TaskSuccess = "SUCCESS"
	TaskFailed  = "FAILED"
	TaskKilled  = "KILLED"
)

// Execution is a Spark SQL execution (ExecutionData).
type Execution struct {
	ID          int64
	Description string
	Plan        string // physical plan description
	Submitted   time.Time
	Completed   time.Time // zero while running
	Error       string    // set when the execution failed
	// Jobs the execution ran, by status, ascending.
	RunningJobs, SucceededJobs, FailedJobs []int
}

// Status returns the execution's status as Spark derives it.
func (e *Execution) Status() string {
	switch {
	case e.Completed.IsZero():
		return SQLRunning
	case e.Error != "" || len(e.FailedJobs) > 0:
		return SQLFailed
	}
	return SQLCompleted
}

// Executor is an executor, or the driver, of an attempt (ExecutorSummary).
type Executor struct {
	ID           string // "driver" or the executor id
	HostPort     string
	Cores        int
	MaxMemory    int64 // bytes for storage (the block manager's maximum)
	Added        time.Time
	Removed      time.Time // zero while active
	RemoveReason string
	// Task time and the GC time within it, ms, as totalDuration and
	// totalGCTime report them.
	TaskTimeMs, GCTimeMs int64
	// Tasks ended on it (completedTasks: successful ones) and the input
	// and shuffle bytes of every task that ended with metrics, as
	// AppStatusListener counts them for the executor list.
	CompletedTasks, FailedTasks, KilledTasks int
	InputBytes, ShuffleRead, ShuffleWrite    int64
	// Peak of each ExecutorMetrics value (JVMHeapMemory, ProcessTreePythonRSSMemory,
	// MinorGCTime, …) over the executor's life, as peakMemoryMetrics reports.
	Peak map[string]int64
}

// Active reports whether the executor has not been removed.
func (e *Executor) Active() bool { return e.Removed.IsZero() }

// App returns the application with this id, or nil.
func (m *Model) App(id string) *App {
	for _, a := range m.Apps {
		if a.ID == id {
			return a
		}
	}
	return nil
}

// Job returns the job with this id, or nil.
func (a *Attempt) Job(id int) *Job {
	i, ok := slices.BinarySearchFunc(a.Jobs, id, func(j *Job, id int) int { return j.ID - id })
	if !ok {
		return nil
	}
	return a.Jobs[i]
}

// Stage returns the stage attempt, or nil.
func (a *Attempt) Stage(id, attempt int) *Stage {
	for _, s := range a.Stages {
		if s.ID == id && s.Attempt == attempt {
			return s
		}
	}
	return nil
}

// Execution returns the SQL execution with this id, or nil.
func (a *Attempt) Execution(id int64) *Execution {
	for _, e := range a.Executions {
		if e.ID == id {
			return e
		}
	}
	return nil
}

// Executor returns the executor with this id, or nil.
func (a *Attempt) Executor(id string) *Executor {
	for _, e := range a.Executors {
		if e.ID == id {
			return e
		}
	}
	return nil
}

// AddJob inserts j in ID order and returns it.
func (a *Attempt) AddJob(j *Job) *Job {
	i, _ := slices.BinarySearchFunc(a.Jobs, j.ID, func(x *Job, id int) int { return x.ID - id })
	a.Jobs = slices.Insert(a.Jobs, i, j)
	return j
}

// AddStage inserts s in (ID, Attempt) order and returns it.
func (a *Attempt) AddStage(s *Stage) *Stage {
	i, _ := slices.BinarySearchFunc(a.Stages, s, func(x, s *Stage) int {
		if x.ID != s.ID {
			return x.ID - s.ID
		}
		return x.Attempt - s.Attempt
	})
	a.Stages = slices.Insert(a.Stages, i, s)
	return s
}
