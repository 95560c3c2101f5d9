package sparkui

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ReplayFile adds the application attempt recorded in a Spark event log
// (one JSON event per line) to m. Attempts of one application come from
// separate logs and are merged by application id.
func (m *Model) ReplayFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := m.Replay(f); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// ReplayDir replays every event log in dir as a History Server finds them:
// plain files at the top (Spark's single-file logs) and the events_* files
// of rolling eventlog_v2_* folders, one level down in any sub-folder. It
// returns how many logs it replayed.
func (m *Model) ReplayDir(dir string) (int, error) {
	var logs []string
	top, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	for _, e := range top {
		if !e.IsDir() {
			logs = append(logs, filepath.Join(dir, e.Name()))
		}
	}
	rolling, err := filepath.Glob(filepath.Join(dir, "*", "eventlog_v2_*", "events_*"))
	if err != nil {
		return 0, err
	}
	for _, f := range append(logs, rolling...) {
		if err := m.ReplayFile(f); err != nil {
			return 0, err
		}
	}
	return len(logs) + len(rolling), nil
}

// Replay is ReplayFile for a reader. It derives what the REST API reports
// the way Spark's AppStatusListener does: job and stage task counts from
// task ends, stages a finished job never ran as skipped, SQL job lists from
// the jobs' spark.sql.execution.id property.
func (m *Model) Replay(r io.Reader) error {
	rp := replayer{m: m, stageJobs: map[int][]*Job{}, jobStages: map[*Job]map[int]bool{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		var e event
		if err := json.Unmarshal(line, &e); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		if err := rp.apply(&e); err != nil {
			return fmt.Errorf("line %d (%s): %w", n, e.Event, err)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if rp.att == nil {
		return fmt.Errorf("no SparkListenerApplicationStart event")
	}
	return nil
}

// event holds the fields of the events replayed; names are Spark's
// JsonProtocol names.
type event struct {
	Event string `json:"Event"`

	SparkVersion string `json:"Spark Version"`
	AppName      string `json:"App Name"`
	AppID        string `json:"App ID"`
	AttemptID    string `json:"App Attempt ID"`
	User         string `json:"User"`
	Timestamp    int64  `json:"Timestamp"`

	JobID          *int              `json:"Job ID"`
	SubmissionTime int64             `json:"Submission Time"`
	CompletionTime int64             `json:"Completion Time"`
	StageInfos     []stageInfo       `json:"Stage Infos"`
	StageIDs       []int             `json:"Stage IDs"`
	Properties     map[string]string `json:"Properties"`
	SparkProps     map[string]string `json:"Spark Properties"`
	JobResult      struct {
		Result string `json:"Result"`
	} `json:"Job Result"`

	StageInfo      *stageInfo `json:"Stage Info"`
	StageID        int        `json:"Stage ID"`
	StageAttemptID int        `json:"Stage Attempt ID"`
	TaskEndReason  endReason  `json:"Task End Reason"`
	TaskInfo       struct {
		ID          int64  `json:"Task ID"`
		Index       int    `json:"Index"`
		Attempt     int    `json:"Attempt"`
		LaunchTime  int64  `json:"Launch Time"`
		FinishTime  int64  `json:"Finish Time"`
		ExecutorID  string `json:"Executor ID"`
		Host        string `json:"Host"`
		Speculative bool   `json:"Speculative"`
	} `json:"Task Info"`
	TaskMetrics *taskMetrics `json:"Task Metrics"`

	ExecutionID  *int64  `json:"executionId"`
	Description  string  `json:"description"`
	Plan         string  `json:"physicalPlanDescription"`
	Time         int64   `json:"time"`
	ErrorMessage *string `json:"errorMessage"`

	ExecutorID   string `json:"Executor ID"`
	ExecutorInfo struct {
		Host       string `json:"Host"`
		TotalCores int    `json:"Total Cores"`
	} `json:"Executor Info"`
	RemovedReason  string `json:"Removed Reason"`
	BlockManagerID struct {
		ExecutorID string `json:"Executor ID"`
		Host       string `json:"Host"`
		Port       int    `json:"Port"`
	} `json:"Block Manager ID"`
	MaxMemory       int64            `json:"Maximum Memory"`
	ExecutorMetrics map[string]int64 `json:"Executor Metrics"`
}

type stageInfo struct {
	ID             int    `json:"Stage ID"`
	Attempt        int    `json:"Stage Attempt ID"`
	Name           string `json:"Stage Name"`
	Tasks          int    `json:"Number of Tasks"`
	Details        string `json:"Details"`
	SubmissionTime int64  `json:"Submission Time"`
	CompletionTime int64  `json:"Completion Time"`
	FailureReason  string `json:"Failure Reason"`
}

// endReason is a task's end reason (TaskEndReason in Spark's JsonProtocol).
type endReason struct {
	Reason string `json:"Reason"`
	// ExceptionFailure
	ClassName       string `json:"Class Name"`
	Description     string `json:"Description"`
	FullStackTrace  string `json:"Full Stack Trace"`
	StackTraceLines []struct {
		Class  string `json:"Declaring Class"`
		Method string `json:"Method Name"`
		File   string `json:"File Name"`
		Line   int    `json:"Line Number"`
	} `json:"Stack Trace"`
	// ExecutorLostFailure
	ExecutorID       string `json:"Executor ID"`
	ExitCausedByApp  *bool  `json:"Exit Caused By App"`
	LossReason       string `json:"Loss Reason"`
	KillReason       string `json:"Kill Reason"`
	Message          string `json:"Message"` // FetchFailed
	ShuffleID        int    `json:"Shuffle ID"`
	MapID            int64  `json:"Map ID"`
	MapIndex         int    `json:"Map Index"`
	ReduceID         int    `json:"Reduce ID"`
	BlockManagerAddr struct {
		ExecutorID string `json:"Executor ID"`
		Host       string `json:"Host"`
		Port       int    `json:"Port"`
	} `json:"Block Manager Address"`
}

// errorString is the errorMessage Spark shows for a failed or killed task
// (TaskEndReason.toErrorString).
func (r *endReason) errorString() string {
	switch r.Reason {
	case "ExceptionFailure":
		if r.FullStackTrace != "" {
			return r.FullStackTrace
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s: %s\n", r.ClassName, r.Description)
		for _, l := range r.StackTraceLines {
			fmt.Fprintf(&b, "\tat %s.%s(%s:%d)\n", l.Class, l.Method, l.File, l.Line)
		}
		return b.String()
	case "ExecutorLostFailure":
		behaviour := "caused by one of the running tasks"
		if r.ExitCausedByApp != nil && !*r.ExitCausedByApp {
			behaviour = "unrelated to the running tasks"
		}
		return fmt.Sprintf("ExecutorLostFailure (executor %s exited %s) Reason: %s", r.ExecutorID, behaviour, r.LossReason)
	case "FetchFailed":
		a := r.BlockManagerAddr
		return fmt.Sprintf("FetchFailed(BlockManagerId(%s, %s, %d, None), shuffleId=%d, mapIndex=%d, mapId=%d, reduceId=%d, message=\n%s\n)",
			a.ExecutorID, a.Host, a.Port, r.ShuffleID, r.MapIndex, r.MapID, r.ReduceID, r.Message)
	case "TaskKilled":
		return fmt.Sprintf("TaskKilled (%s)", r.KillReason)
	case "TaskCommitDenied":
		return "TaskCommitDenied (Driver denied task commit)"
	case "TaskResultLost":
		return "TaskResultLost (result lost from block manager)"
	case "Resubmitted":
		return "Resubmitted (resubmitted due to lost executor)"
	}
	return "UnknownReason"
}

type taskMetrics struct {
	RunTime       int64 `json:"Executor Run Time"`
	CPUTime       int64 `json:"Executor CPU Time"`
	GCTime        int64 `json:"JVM GC Time"`
	PeakExecMem   int64 `json:"Peak Execution Memory"`
	MemorySpilled int64 `json:"Memory Bytes Spilled"`
	DiskSpilled   int64 `json:"Disk Bytes Spilled"`
	Input         struct {
		Bytes   int64 `json:"Bytes Read"`
		Records int64 `json:"Records Read"`
	} `json:"Input Metrics"`
	Output struct {
		Bytes   int64 `json:"Bytes Written"`
		Records int64 `json:"Records Written"`
	} `json:"Output Metrics"`
	ShuffleRead struct {
		Remote    int64 `json:"Remote Bytes Read"`
		Local     int64 `json:"Local Bytes Read"`
		Records   int64 `json:"Total Records Read"`
		FetchWait int64 `json:"Fetch Wait Time"`
	} `json:"Shuffle Read Metrics"`
	ShuffleWrite struct {
		Bytes   int64 `json:"Shuffle Bytes Written"`
		Records int64 `json:"Shuffle Records Written"`
	} `json:"Shuffle Write Metrics"`
}

type replayer struct {
	m       *Model
	app     *App
	att     *Attempt
	version string
	// Jobs by stage id, and the stages each job has completed (a retried
	// stage counts once, as in Spark).
	stageJobs map[int][]*Job
	jobStages map[*Job]map[int]bool
	early     []*Executor       // registered before the application started
	props     map[string]string // the environment, logged before the start
}

func ms(t int64) time.Time {
	if t <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(t).UTC()
}

func (rp *replayer) apply(e *event) error {
	kind := e.Event[strings.LastIndexByte(e.Event, '.')+1:]
	if rp.att == nil && kind != "SparkListenerLogStart" && kind != "SparkListenerApplicationStart" {
		// Executors and block managers may register before the
		// application starts; the History Server keeps them too.
		switch kind {
		case "SparkListenerExecutorAdded", "SparkListenerBlockManagerAdded", "SparkListenerEnvironmentUpdate":
		default:
			return nil
		}
	}
	switch kind {
	case "SparkListenerLogStart":
		rp.version = e.SparkVersion
	case "SparkListenerEnvironmentUpdate":
		// Logged before the application starts.
		if rp.att != nil {
			rp.att.Properties = e.SparkProps
		} else {
			rp.props = e.SparkProps
		}
	case "SparkListenerApplicationStart":
		return rp.appStart(e)
	case "SparkListenerApplicationEnd":
		rp.att.End = ms(e.Timestamp)
	case "SparkListenerJobStart":
		rp.jobStart(e)
	case "SparkListenerJobEnd":
		rp.jobEnd(e)
	case "SparkListenerStageSubmitted":
		rp.stageSubmitted(e)
	case "SparkListenerStageCompleted":
		rp.stageCompleted(e)
	case "SparkListenerTaskStart":
		rp.taskStart(e)
	case "SparkListenerTaskEnd":
		rp.taskEnd(e)
	case "SparkListenerSQLExecutionStart":
		if e.ExecutionID != nil {
			rp.att.Executions = append(rp.att.Executions, &Execution{
				ID: *e.ExecutionID, Description: e.Description, Plan: e.Plan, Submitted: ms(e.Time),
			})
		}
	case "SparkListenerSQLExecutionEnd":
		if e.ExecutionID != nil {
			if x := rp.att.Execution(*e.ExecutionID); x != nil {
				x.Completed = ms(e.Time)
				if e.ErrorMessage != nil {
					x.Error = *e.ErrorMessage
				}
			}
		}
	case "SparkListenerExecutorAdded":
		x := rp.executor(e.ExecutorID)
		x.HostPort = e.ExecutorInfo.Host
		x.Cores = e.ExecutorInfo.TotalCores
		x.Added = ms(e.Timestamp)
	case "SparkListenerExecutorRemoved":
		x := rp.executor(e.ExecutorID)
		x.Removed = ms(e.Timestamp)
		x.RemoveReason = e.RemovedReason
	case "SparkListenerBlockManagerAdded":
		b := e.BlockManagerID
		x := rp.executor(b.ExecutorID)
		x.HostPort = b.Host + ":" + strconv.Itoa(b.Port)
		x.MaxMemory = e.MaxMemory
		if x.Added.IsZero() {
			x.Added = ms(e.Timestamp)
		}
	case "SparkListenerStageExecutorMetrics":
		x := rp.executor(e.ExecutorID)
		if x.Peak == nil {
			x.Peak = map[string]int64{}
		}
		for k, v := range e.ExecutorMetrics {
			x.Peak[k] = max(x.Peak[k], v)
		}
	}
	return nil
}

func (rp *replayer) executor(id string) *Executor {
	list := &rp.early
	if rp.att != nil {
		list = &rp.att.Executors
	}
	for _, x := range *list {
		if x.ID == id {
			return x
		}
	}
	x := &Executor{ID: id}
	*list = append(*list, x)
	return x
}

func (rp *replayer) appStart(e *event) error {
	if rp.att != nil {
		return fmt.Errorf("a second application start in one log")
	}
	app := rp.m.App(e.AppID)
	if app == nil {
		app = &App{ID: e.AppID, Name: e.AppName}
		rp.m.Apps = append(rp.m.Apps, app)
	}
	for _, a := range app.Attempts {
		if a.ID == e.AttemptID {
			return fmt.Errorf("application %s attempt %q replayed twice", e.AppID, e.AttemptID)
		}
	}
	att := &Attempt{ID: e.AttemptID, Start: ms(e.Timestamp), User: e.User, SparkVersion: rp.version}
	att.Executors, rp.early = rp.early, nil
	att.Properties, rp.props = rp.props, nil
	app.Attempts = append(app.Attempts, att)
	slices.SortFunc(app.Attempts, func(a, b *Attempt) int { return b.Start.Compare(a.Start) })
	rp.app, rp.att = app, att
	return nil
}

func (rp *replayer) jobStart(e *event) {
	if e.JobID == nil {
		return
	}
	j := &Job{ID: *e.JobID, Submitted: ms(e.SubmissionTime), StageIDs: e.StageIDs, Status: JobRunning, SQLExecutionID: -1}
	last := -1
	for _, si := range e.StageInfos {
		j.Tasks += si.Tasks
		if si.ID > last {
			last, j.Name = si.ID, si.Name
		}
		if rp.att.Stage(si.ID, si.Attempt) == nil {
			rp.att.AddStage(&Stage{ID: si.ID, Attempt: si.Attempt, Name: si.Name, Details: si.Details,
				Tasks: si.Tasks, Status: StagePending})
		}
	}
	if p := e.Properties; p != nil {
		j.Description = p["spark.job.description"]
		j.Group = p["spark.jobGroup.id"]
		if t := p["spark.job.tags"]; t != "" {
			j.Tags = strings.Split(t, ",")
		}
		if s, ok := p["spark.sql.execution.id"]; ok {
			if id, err := strconv.ParseInt(s, 10, 64); err == nil {
				j.SQLExecutionID = id
				if x := rp.att.Execution(id); x != nil {
					x.RunningJobs = append(x.RunningJobs, j.ID)
				}
			}
		}
	}
	for _, s := range j.StageIDs {
		rp.stageJobs[s] = append(rp.stageJobs[s], j)
	}
	rp.jobStages[j] = map[int]bool{}
	rp.att.AddJob(j)
}

func (rp *replayer) jobEnd(e *event) {
	if e.JobID == nil {
		return
	}
	j := rp.att.Job(*e.JobID)
	if j == nil {
		return
	}
	j.Completed = ms(e.CompletionTime)
	j.Status = JobFailed
	if e.JobResult.Result == "JobSucceeded" {
		j.Status = JobSucceeded
	}
	// Stages of the job that never ran are skipped.
	for _, s := range rp.att.Stages {
		if s.Status == StagePending && slices.Contains(j.StageIDs, s.ID) {
			s.Status = StageSkipped
			j.SkippedStages++
			j.SkippedTasks += s.Tasks
		}
	}
	j.ActiveStages, j.ActiveTasks = 0, 0
	if j.SQLExecutionID >= 0 {
		if x := rp.att.Execution(j.SQLExecutionID); x != nil {
			x.RunningJobs = slices.DeleteFunc(x.RunningJobs, func(id int) bool { return id == j.ID })
			if j.Status == JobSucceeded {
				x.SucceededJobs = append(x.SucceededJobs, j.ID)
			} else {
				x.FailedJobs = append(x.FailedJobs, j.ID)
			}
		}
	}
}

func (rp *replayer) stageSubmitted(e *event) {
	si := e.StageInfo
	if si == nil {
		return
	}
	s := rp.att.Stage(si.ID, si.Attempt)
	if s == nil {
		s = rp.att.AddStage(&Stage{ID: si.ID, Attempt: si.Attempt})
	}
	s.Name, s.Details, s.Tasks = si.Name, si.Details, si.Tasks
	s.Status = StageActive
	s.Submitted = ms(si.SubmissionTime)
	if e.Properties != nil {
		s.Description = e.Properties["spark.job.description"]
	}
	for _, j := range rp.stageJobs[si.ID] {
		if j.Status == JobRunning {
			j.ActiveStages++
		}
	}
}

func (rp *replayer) stageCompleted(e *event) {
	si := e.StageInfo
	if si == nil {
		return
	}
	s := rp.att.Stage(si.ID, si.Attempt)
	if s == nil {
		return
	}
	s.Completed = ms(si.CompletionTime)
	if s.Submitted.IsZero() {
		s.Submitted = ms(si.SubmissionTime)
	}
	s.Status = StageComplete
	if si.FailureReason != "" {
		s.Status, s.FailureReason = StageFailed, si.FailureReason
	}
	s.ActiveTasks = 0
	for _, j := range rp.stageJobs[si.ID] {
		if j.Status != JobRunning {
			continue
		}
		j.ActiveStages = max(j.ActiveStages-1, 0)
		if s.Status == StageFailed {
			j.FailedStages++
		} else if !rp.jobStages[j][s.ID] {
			rp.jobStages[j][s.ID] = true
			j.CompletedStages++
		}
	}
}

func (rp *replayer) taskStart(e *event) {
	s := rp.att.Stage(e.StageID, e.StageAttemptID)
	if s == nil {
		return
	}
	s.ActiveTasks++
	if s.FirstLaunched.IsZero() {
		s.FirstLaunched = ms(e.TaskInfo.LaunchTime)
	}
	ti := e.TaskInfo
	s.TaskList = append(s.TaskList, &Task{ID: ti.ID, Index: ti.Index, Attempt: ti.Attempt, Launched: ms(ti.LaunchTime),
		Executor: ti.ExecutorID, Host: ti.Host, Status: TaskRunning, Speculative: ti.Speculative})
	for _, j := range rp.stageJobs[e.StageID] {
		if j.Status == JobRunning {
			j.ActiveTasks++
		}
	}
}

func (rp *replayer) taskEnd(e *event) {
	s := rp.att.Stage(e.StageID, e.StageAttemptID)
	if s == nil {
		return
	}
	var done, failed, killed int
	status := TaskFailed
	switch e.TaskEndReason.Reason {
	case "Success":
		done, status = 1, TaskSuccess
	case "TaskKilled", "TaskCommitDenied":
		killed, status = 1, TaskKilled
	default:
		failed = 1
	}
	rp.endTask(s, e, status)
	rp.executorTaskEnd(e, done, failed, killed)
	s.ActiveTasks = max(s.ActiveTasks-1, 0)
	s.CompleteTasks += done
	s.FailedTasks += failed
	s.KilledTasks += killed
	if m := e.TaskMetrics; m != nil {
		s.RunTimeMs += m.RunTime
		s.CPUTimeNs += m.CPUTime
		s.GCTimeMs += m.GCTime
		s.MemorySpilled += m.MemorySpilled
		s.DiskSpilled += m.DiskSpilled
		s.InputBytes += m.Input.Bytes
		s.InputRecords += m.Input.Records
		s.OutputBytes += m.Output.Bytes
		s.OutputRecords += m.Output.Records
		s.ShuffleReadBytes += m.ShuffleRead.Remote + m.ShuffleRead.Local
		s.ShuffleReadRecords += m.ShuffleRead.Records
		s.FetchWaitMs += m.ShuffleRead.FetchWait
		s.PeakExecMemory = max(s.PeakExecMemory, m.PeakExecMem)
		s.ShuffleWriteBytes += m.ShuffleWrite.Bytes
		s.ShuffleWriteRecs += m.ShuffleWrite.Records
	}
	for _, j := range rp.stageJobs[e.StageID] {
		if j.Status != JobRunning {
			continue
		}
		j.ActiveTasks = max(j.ActiveTasks-1, 0)
		j.CompletedTasks += done
		j.FailedTasks += failed
		j.KilledTasks += killed
	}
}

// executorTaskEnd adds a task that ended to its executor's totals, as
// AppStatusListener does: only while the executor is live, task time from
// launch to finish, and the metrics of every task that has them but a
// resubmitted one (whose first attempt's metrics Spark already counted).
func (rp *replayer) executorTaskEnd(e *event, done, failed, killed int) {
	x := rp.executor(e.TaskInfo.ExecutorID)
	if !x.Removed.IsZero() {
		return
	}
	x.CompletedTasks += done
	x.FailedTasks += failed
	x.KilledTasks += killed
	if e.TaskInfo.FinishTime > 0 {
		x.TaskTimeMs += e.TaskInfo.FinishTime - e.TaskInfo.LaunchTime
	}
	if m := e.TaskMetrics; m != nil && e.TaskEndReason.Reason != "Resubmitted" {
		x.GCTimeMs += m.GCTime
		x.InputBytes += m.Input.Bytes
		x.ShuffleRead += m.ShuffleRead.Remote + m.ShuffleRead.Local
		x.ShuffleWrite += m.ShuffleWrite.Bytes
	}
}

// endTask records how a task ended, on the task its start added (or a new
// one, for a log that lacks the start).
func (rp *replayer) endTask(s *Stage, e *event, status string) {
	ti := e.TaskInfo
	var t *Task
	for i := len(s.TaskList) - 1; i >= 0; i-- {
		if s.TaskList[i].ID == ti.ID {
			t = s.TaskList[i]
			break
		}
	}
	if t == nil {
		t = &Task{ID: ti.ID, Index: ti.Index, Attempt: ti.Attempt, Launched: ms(ti.LaunchTime),
			Executor: ti.ExecutorID, Host: ti.Host, Speculative: ti.Speculative}
		s.TaskList = append(s.TaskList, t)
	}
	t.Status, t.Finished = status, ms(ti.FinishTime)
	if status != TaskSuccess {
		t.Error = e.TaskEndReason.errorString()
	}
	if m := e.TaskMetrics; m != nil {
		t.HasMetrics = true
		t.RunTimeMs, t.GCTimeMs, t.PeakExecMemory = m.RunTime, m.GCTime, m.PeakExecMem
		t.MemSpilled, t.DiskSpill, t.InputBytes = m.MemorySpilled, m.DiskSpilled, m.Input.Bytes
		t.ShuffleReadBytes, t.FetchWaitMs = m.ShuffleRead.Remote+m.ShuffleRead.Local, m.ShuffleRead.FetchWait
		t.CPUTimeNs, t.ShuffleWriteBytes = m.CPUTime, m.ShuffleWrite.Bytes
	}
}
