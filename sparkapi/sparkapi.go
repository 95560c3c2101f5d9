// Package sparkapi is Apache Spark's monitoring REST API (/api/v1) on
// sparkpulse's side: its JSON, written once, and the client that reads it.
// Package sparkui, the fake Spark of the tests and demos, encodes its
// answers from these types; [Client] (client.go) GETs an answer and
// decodes it into them, for package annotate's poller and its on-demand
// reads (sparkpulse report).
//
// The client follows no redirect, bounds every answer
// (MaxResponseBytes) and decodes lists an element at a time, zeroes what
// no Spark writes ([Check], check.go) and says which values those were,
// and fails with an [*Error] whose Kind (network, http_status, decode) is
// the label sparkpulse counts failures under; an error quotes no more of
// an answer than a short snippet of printable ASCII. It counts its
// requests and the bytes it read; counting failures per source, logging
// and retrying are the caller's.
//
// Field names and types are Spark's (core/src/main/scala/org/apache/spark/
// status/api/v1/api.scala, Spark 3.x and 4.x). An optional field that Spark
// omits (an Option that is None) is a pointer or carries omitempty here; a
// client reads an absent field as its zero value, which is how older Spark
// versions without the field are handled. Dates are Spark's text form,
// "2015-02-03T16:43:06.296GMT" ([Date]).
package sparkapi

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// DateLayout is how Spark writes dates: UTC, milliseconds, and the literal
// zone name GMT.
const DateLayout = "2006-01-02T15:04:05.000GMT"

// Date is a time as Spark writes it. Empty text decodes to the zero time.
type Date struct{ time.Time }

// DateOf is t as a Date.
func DateOf(t time.Time) Date { return Date{t} }

// OptDate is t as an optional date: nil, so omitted, when t is zero.
func OptDate(t time.Time) *Date {
	if t.IsZero() {
		return nil
	}
	return &Date{t}
}

// MarshalJSON writes Spark's form.
func (d Date) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.UTC().Format(DateLayout))
}

// UnmarshalJSON reads Spark's form.
func (d *Date) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("date %s: %w", b, err)
	}
	if s == "" {
		d.Time = time.Time{}
		return nil
	}
	v, err := time.Parse(DateLayout, s)
	if err != nil {
		return fmt.Errorf("date %q is not Spark's yyyy-MM-dd'T'HH:mm:ss.SSS'GMT'", s)
	}
	d.Time = v
	return nil
}

// Ms is the date in epoch milliseconds; 0 for the zero time or nil.
func (d *Date) Ms() int64 {
	if d == nil || d.IsZero() {
		return 0
	}
	return d.UnixMilli()
}

// Application is an entry of /applications (ApplicationInfo).
type Application struct {
	ID       string    `json:"id"`
	Name     string    `json:"name"`
	Attempts []Attempt `json:"attempts"`
}

// Attempt is an application attempt (ApplicationAttemptInfo). A running
// attempt ends at epoch −1 ms. A live UI writes no attemptId.
type Attempt struct {
	AttemptID        string `json:"attemptId,omitempty"`
	StartTime        Date   `json:"startTime"`
	EndTime          Date   `json:"endTime"`
	LastUpdated      Date   `json:"lastUpdated"`
	Duration         int64  `json:"duration"`
	SparkUser        string `json:"sparkUser"`
	Completed        bool   `json:"completed"`
	AppSparkVersion  string `json:"appSparkVersion"`
	StartTimeEpoch   int64  `json:"startTimeEpoch"`
	EndTimeEpoch     int64  `json:"endTimeEpoch"`
	LastUpdatedEpoch int64  `json:"lastUpdatedEpoch"`
}

// StartMs, EndMs and LastUpdatedMs are in epoch ms and prefer the epoch
// fields (Spark 2.0+) to the dates. EndMs is −1 while the attempt runs.
func (a *Attempt) StartMs() int64 { return epochOr(a.StartTimeEpoch, a.StartTime) }
func (a *Attempt) EndMs() int64 {
	if !a.Completed {
		return -1
	}
	return epochOr(a.EndTimeEpoch, a.EndTime)
}
func (a *Attempt) LastUpdatedMs() int64 { return epochOr(a.LastUpdatedEpoch, a.LastUpdated) }

func epochOr(epoch int64, d Date) int64 {
	if epoch > 0 {
		return epoch
	}
	return d.Ms()
}

// Job is an entry of /jobs (JobData).
type Job struct {
	JobID               int            `json:"jobId"`
	Name                string         `json:"name"`
	Description         string         `json:"description,omitempty"`
	SubmissionTime      *Date          `json:"submissionTime,omitempty"`
	CompletionTime      *Date          `json:"completionTime,omitempty"`
	StageIDs            []int          `json:"stageIds"`
	JobGroup            string         `json:"jobGroup,omitempty"`
	JobTags             []string       `json:"jobTags"`
	Status              string         `json:"status"`
	NumTasks            int            `json:"numTasks"`
	NumActiveTasks      int            `json:"numActiveTasks"`
	NumCompletedTasks   int            `json:"numCompletedTasks"`
	NumSkippedTasks     int            `json:"numSkippedTasks"`
	NumFailedTasks      int            `json:"numFailedTasks"`
	NumKilledTasks      int            `json:"numKilledTasks"`
	NumCompletedIndices int            `json:"numCompletedIndices"`
	NumActiveStages     int            `json:"numActiveStages"`
	NumCompletedStages  int            `json:"numCompletedStages"`
	NumSkippedStages    int            `json:"numSkippedStages"`
	NumFailedStages     int            `json:"numFailedStages"`
	KilledTasksSummary  map[string]int `json:"killedTasksSummary"`
}

// Stage is an entry of /stages (StageData), without its tasks.
type Stage struct {
	Status                string         `json:"status"`
	StageID               int            `json:"stageId"`
	AttemptID             int            `json:"attemptId"`
	NumTasks              int            `json:"numTasks"`
	NumActiveTasks        int            `json:"numActiveTasks"`
	NumCompleteTasks      int            `json:"numCompleteTasks"`
	NumFailedTasks        int            `json:"numFailedTasks"`
	NumKilledTasks        int            `json:"numKilledTasks"`
	NumCompletedIndices   int            `json:"numCompletedIndices"`
	SubmissionTime        *Date          `json:"submissionTime,omitempty"`
	FirstTaskLaunchedTime *Date          `json:"firstTaskLaunchedTime,omitempty"`
	CompletionTime        *Date          `json:"completionTime,omitempty"`
	FailureReason         string         `json:"failureReason,omitempty"`
	ExecutorRunTime       int64          `json:"executorRunTime"` // ms
	ExecutorCPUTime       int64          `json:"executorCpuTime"` // ns
	JVMGCTime             int64          `json:"jvmGcTime"`       // ms
	MemoryBytesSpilled    int64          `json:"memoryBytesSpilled"`
	DiskBytesSpilled      int64          `json:"diskBytesSpilled"`
	InputBytes            int64          `json:"inputBytes"`
	InputRecords          int64          `json:"inputRecords"`
	OutputBytes           int64          `json:"outputBytes"`
	OutputRecords         int64          `json:"outputRecords"`
	ShuffleReadBytes      int64          `json:"shuffleReadBytes"`
	ShuffleReadRecords    int64          `json:"shuffleReadRecords"`
	ShuffleWriteBytes     int64          `json:"shuffleWriteBytes"`
	ShuffleWriteRecords   int64          `json:"shuffleWriteRecords"`
	Name                  string         `json:"name"`
	Description           string         `json:"description,omitempty"`
	Details               string         `json:"details"`
	SchedulingPool        string         `json:"schedulingPool"`
	RDDIDs                []int          `json:"rddIds"`
	AccumulatorUpdates    []any          `json:"accumulatorUpdates"`
	KilledTasksSummary    map[string]int `json:"killedTasksSummary"`
	ResourceProfileID     int            `json:"resourceProfileId"`
	// Spark 3.x.
	ShuffleFetchWaitTime int64            `json:"shuffleFetchWaitTime"` // ms
	PeakExecutionMemory  int64            `json:"peakExecutionMemory"`  // bytes, the largest of a task
	PeakExecutorMetrics  map[string]int64 `json:"peakExecutorMetrics,omitempty"`
}

// TaskData is an entry of /stages/{id}/{attempt}/taskList.
type TaskData struct {
	TaskID       int64        `json:"taskId"`
	Index        int          `json:"index"`
	Attempt      int          `json:"attempt"`
	LaunchTime   *Date        `json:"launchTime,omitempty"`
	Duration     int64        `json:"duration,omitempty"` // ms, once it ended
	ExecutorID   string       `json:"executorId"`
	Host         string       `json:"host"`
	Status       string       `json:"status"` // RUNNING, SUCCESS, FAILED, KILLED
	TaskLocality string       `json:"taskLocality"`
	Speculative  bool         `json:"speculative"`
	ErrorMessage string       `json:"errorMessage,omitempty"`
	TaskMetrics  *TaskMetrics `json:"taskMetrics,omitempty"`
}

// TaskMetrics are a task's metrics, as taskList gives them.
type TaskMetrics struct {
	ExecutorRunTime     int64 `json:"executorRunTime"` // ms
	JVMGCTime           int64 `json:"jvmGcTime"`       // ms
	PeakExecutionMemory int64 `json:"peakExecutionMemory"`
	MemoryBytesSpilled  int64 `json:"memoryBytesSpilled"`
	DiskBytesSpilled    int64 `json:"diskBytesSpilled"`
	InputMetrics        struct {
		BytesRead int64 `json:"bytesRead"`
	} `json:"inputMetrics"`
	ShuffleReadMetrics struct {
		FetchWaitTime   int64 `json:"fetchWaitTime"`
		RemoteBytesRead int64 `json:"remoteBytesRead"`
		LocalBytesRead  int64 `json:"localBytesRead"`
	} `json:"shuffleReadMetrics"`
}

// TaskSummary is the answer of /stages/{id}/{attempt}/taskSummary
// (TaskMetricDistributions): each metric at each of the quantiles, over
// the stage attempt's successful tasks. Only the metrics sparkpulse uses.
type TaskSummary struct {
	Quantiles           []float64 `json:"quantiles"`
	Duration            []float64 `json:"duration,omitempty"` // Spark 3.1+
	ExecutorRunTime     []float64 `json:"executorRunTime"`
	JVMGCTime           []float64 `json:"jvmGcTime"`
	PeakExecutionMemory []float64 `json:"peakExecutionMemory,omitempty"` // Spark 2.3+
	MemoryBytesSpilled  []float64 `json:"memoryBytesSpilled"`
	DiskBytesSpilled    []float64 `json:"diskBytesSpilled"`
	InputMetrics        struct {
		BytesRead []float64 `json:"bytesRead"`
	} `json:"inputMetrics"`
	ShuffleReadMetrics struct {
		ReadBytes     []float64 `json:"readBytes"`
		FetchWaitTime []float64 `json:"fetchWaitTime"`
	} `json:"shuffleReadMetrics"`
}

// SQLExecution is an entry of /sql (ExecutionData), without its plan
// graph.
type SQLExecution struct {
	ID              int64  `json:"id"`
	Status          string `json:"status"`
	Description     string `json:"description"`
	PlanDescription string `json:"planDescription"`
	SubmissionTime  *Date  `json:"submissionTime,omitempty"`
	Duration        int64  `json:"duration"` // ms
	RunningJobIDs   []int  `json:"runningJobIds"`
	SuccessJobIDs   []int  `json:"successJobIds"`
	FailedJobIDs    []int  `json:"failedJobIds"`
	Nodes           []any  `json:"nodes"`
	Edges           []any  `json:"edges"`
}

// Executor is an entry of /executors and /allexecutors (ExecutorSummary):
// the driver ("driver") or an executor, active or removed.
type Executor struct {
	ID                string            `json:"id"`
	HostPort          string            `json:"hostPort"`
	IsActive          bool              `json:"isActive"`
	RDDBlocks         int               `json:"rddBlocks"`
	MemoryUsed        int64             `json:"memoryUsed"`
	DiskUsed          int64             `json:"diskUsed"`
	TotalCores        int               `json:"totalCores"`
	MaxTasks          int               `json:"maxTasks"`
	ActiveTasks       int               `json:"activeTasks"`
	FailedTasks       int               `json:"failedTasks"`
	CompletedTasks    int               `json:"completedTasks"`
	TotalTasks        int               `json:"totalTasks"`
	TotalDuration     int64             `json:"totalDuration"` // ms of task time
	TotalGCTime       int64             `json:"totalGCTime"`   // ms
	TotalInputBytes   int64             `json:"totalInputBytes"`
	TotalShuffleRead  int64             `json:"totalShuffleRead"`
	TotalShuffleWrite int64             `json:"totalShuffleWrite"`
	IsBlacklisted     bool              `json:"isBlacklisted"`
	MaxMemory         int64             `json:"maxMemory"`
	AddTime           *Date             `json:"addTime,omitempty"`
	RemoveTime        *Date             `json:"removeTime,omitempty"`
	RemoveReason      string            `json:"removeReason,omitempty"`
	ExecutorLogs      map[string]string `json:"executorLogs"`
	PeakMemoryMetrics map[string]int64  `json:"peakMemoryMetrics,omitempty"`
	Attributes        map[string]string `json:"attributes"`
	Resources         map[string]any    `json:"resources"`
	ResourceProfileID int               `json:"resourceProfileId"`
	IsExcluded        bool              `json:"isExcluded"`
	ExcludedInStages  []int             `json:"excludedInStages"`
}

// Environment is the answer of /environment
// (ApplicationEnvironmentInfo), as pairs of name and value.
type Environment struct {
	Runtime          map[string]string `json:"runtime"`
	SparkProperties  [][2]string       `json:"sparkProperties"`
	HadoopProperties [][2]string       `json:"hadoopProperties"`
	SystemProperties [][2]string       `json:"systemProperties"`
	ClasspathEntries [][2]string       `json:"classpathEntries"`
	// ResourceProfiles are the application's (Spark 3.1+): the default
	// (id 0) and those of stage-level scheduling.
	ResourceProfiles []ResourceProfile `json:"resourceProfiles"`
}

// ResourceProfile is an entry of the environment's resourceProfiles
// (ResourceProfileInfo): what each executor of the profile asks for —
// "cores"; "memory", "memoryOverhead", "pyspark.memory" and "offHeap"
// in MiB; a resource such as "gpu" in units — and what each task takes
// ("cpus", "gpu", fractions allowed).
type ResourceProfile struct {
	ID                int `json:"id"`
	ExecutorResources map[string]struct {
		Amount int64 `json:"amount"`
	} `json:"executorResources"`
	TaskResources map[string]struct {
		Amount float64 `json:"amount"`
	} `json:"taskResources"`
}

// HadoopSubset returns the Hadoop properties named in keys that are set.
func (e *Environment) HadoopSubset(keys []string) map[string]string {
	m := map[string]string{}
	for _, kv := range e.HadoopProperties {
		if slices.Contains(keys, kv[0]) {
			m[kv[0]] = kv[1]
		}
	}
	return m
}

// Properties returns the Spark properties as a map, never nil.
func (e *Environment) Properties() map[string]string {
	m := make(map[string]string, len(e.SparkProperties))
	for _, kv := range e.SparkProperties {
		m[kv[0]] = kv[1]
	}
	return m
}

// YARNApplication is the one answer of YARN's ResourceManager REST API
// that sparkpulse reads, /ws/v1/cluster/apps/{id} (Hadoop's AppInfo), for
// an application whose UI it reads through the ResourceManager's proxy:
// where YARN ran it and for whom.
type YARNApplication struct {
	App struct {
		ID    string `json:"id"`
		User  string `json:"user"`
		Queue string `json:"queue"` // the leaf queue's full path, root.etl
		// State is YARN's: NEW, NEW_SAVING, SUBMITTED, ACCEPTED, RUNNING,
		// FINISHED, FAILED, KILLED.
		State string `json:"state"`
		// What YARN held for the application's containers, each from its
		// allocation to its end, at the size YARN rounded it up to:
		// MB-seconds (YARN's MB is 2^20 bytes) and vcore-seconds.
		MemorySeconds int64 `json:"memorySeconds"`
		VcoreSeconds  int64 `json:"vcoreSeconds"`
	} `json:"app"`
}

// Ended reports whether YARN has the application's final figures.
func (a *YARNApplication) Ended() bool {
	switch a.App.State {
	case "FINISHED", "FAILED", "KILLED":
		return true
	}
	return false
}

// Starting reports whether YARN is running the application or about to:
// its UI may not answer yet.
func (a *YARNApplication) Starting() bool {
	switch a.App.State {
	case "NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED", "RUNNING":
		return true
	}
	return false
}
