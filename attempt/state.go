package attempt

import (
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/sparkpulse/sparkpulse/accounting"
	"github.com/sparkpulse/sparkpulse/sparkapi"
)

// Key identifies an application attempt across sources: a live UI shows
// no attempt id, but the attempt's start time is the same everywhere.
type Key struct {
	App   string
	Start int64 // epoch ms
}

func (k Key) String() string {
	return fmt.Sprintf("%s (attempt started %s)", k.App, time.UnixMilli(k.Start).UTC().Format(sparkapi.DateLayout))
}

// StageKey identifies a stage attempt within its application attempt.
type StageKey struct{ ID, Attempt int }

// CompareStageKeys orders stage attempts by stage id, then attempt.
func CompareStageKeys(a, b StageKey) int {
	if a.ID != b.ID {
		return a.ID - b.ID
	}
	return a.Attempt - b.Attempt
}

// The items of an attempt, held by pointer so that a read updates them in
// place.
type (
	Job      struct{ sparkapi.Job }
	SQL      struct{ sparkapi.SQLExecution }
	Executor struct{ sparkapi.Executor }
	Stage    struct {
		sparkapi.Stage
		Details  *Details  // nil until it ended and its details were tried
		Progress *Progress // read by the last read while it runs; taken by whoever writes it
	}
)

// State is what Spark's REST API said of one application attempt, as of
// the last read (Reader.Read), and the metrics stream's totals for its
// accounting. Reads update it in place: only what changed is asked for.
type State struct {
	Key       Key
	Name      string
	AttemptID string
	User      string
	Version   string
	URL       string // …/api/v1/applications/{app}[/{attempt}] on the source read
	Completed bool
	End       int64 // epoch ms; -1 while running
	Updated   int64 // lastUpdated as last listed

	Jobs        map[int]*Job
	Stages      map[StageKey]*Stage
	SQL         map[int64]*SQL
	Executors   map[string]*Executor
	Properties  map[string]string // the environment's Spark properties; nil until read
	Hadoop      map[string]string // of its Hadoop properties, sizing.YARNAllocationKeys
	Profiles    []sparkapi.ResourceProfile
	MetricsKey  string                  // the applicationid its metrics carry (MetricsKey), once properties are read
	StageTotals *accounting.StageTotals // over every stage attempt, from the full read after the end

	// The stream's totals for the accounting, once read, and why the
	// accounting went without them ("" when it did not).
	Stream    map[string]accounting.ProcessTotals
	StreamErr string

	// Where incremental reads resume.
	reads           int // successful reads
	maxJob          int
	goneStages      map[int]bool // stage ids Spark no longer knows
	recheck         []int        // stage ids to read again: their job ended with failed stages
	maxSQL          int64
	sqlNext         int // offset just past maxSQL in Spark's list, as last seen
	sqlAbsent       bool
	executorsAbsent bool // allexecutors answered 404 (Spark before 1.6)
}

// NewState is the state of an attempt not read yet.
func NewState(key Key) *State {
	return &State{Key: key, End: -1, maxJob: -1, maxSQL: -1,
		Jobs: map[int]*Job{}, Stages: map[StageKey]*Stage{}, goneStages: map[int]bool{}, SQL: map[int64]*SQL{},
		Executors: map[string]*Executor{}}
}

// Refresh takes what a listing of the source at base says of the attempt.
func (st *State) Refresh(base string, app *sparkapi.Application, att *sparkapi.Attempt) {
	st.Name, st.AttemptID = app.Name, att.AttemptID
	st.User, st.Version = att.SparkUser, att.AppSparkVersion
	st.Completed, st.End, st.Updated = att.Completed, att.EndMs(), att.LastUpdatedMs()
	st.URL = base + "/api/v1/applications/" + url.PathEscape(app.ID)
	if att.AttemptID != "" {
		st.URL += "/" + url.PathEscape(att.AttemptID)
	}
}

// putJob takes a job as Spark answered it; a job with failed stages that
// stopped running has its stages read again.
func (st *State) putJob(j sparkapi.Job) {
	it := st.Jobs[j.JobID]
	if it == nil {
		it = &Job{}
		st.Jobs[j.JobID] = it
	}
	finished := it.Status == "RUNNING" && j.Status != "RUNNING"
	it.Job = j
	st.maxJob = max(st.maxJob, j.JobID)
	if finished && j.NumFailedStages > 0 {
		st.recheck = append(st.recheck, j.StageIDs...)
	}
}

// putStage takes a stage attempt as Spark answered it.
func (st *State) putStage(s sparkapi.Stage) {
	k := StageKey{s.StageID, s.AttemptID}
	it := st.Stages[k]
	if it == nil {
		it = &Stage{}
		st.Stages[k] = it
	}
	it.Stage = s
}

func (st *State) putSQL(x sparkapi.SQLExecution) {
	it := st.SQL[x.ID]
	if it == nil {
		it = &SQL{}
		st.SQL[x.ID] = it
	}
	it.SQLExecution = x
	st.maxSQL = max(st.maxSQL, x.ID)
}

// retain bounds the finished items kept per attempt, like Spark's own
// spark.ui.retainedJobs/Stages and spark.sql.ui.retainedExecutions.
const retain = 1000

// Prune keeps at most retain finished jobs, stages and executions, the
// newest; Spark itself forgets older ones.
func (st *State) Prune() {
	pruneMap(st.Jobs, func(j *Job) bool { return j.Status != "RUNNING" }, func(id int) int { return id })
	pruneMap(st.Stages, func(s *Stage) bool { return s.Status != "ACTIVE" && s.Status != "PENDING" },
		func(k StageKey) int { return k.ID })
	pruneMap(st.SQL, func(x *SQL) bool { return x.Status != "RUNNING" }, func(id int64) int { return int(id) })
	if len(st.goneStages) > retain {
		clear(st.goneStages)
	}
}

func pruneMap[K comparable, V any](m map[K]V, done func(V) bool, order func(K) int) {
	if len(m) <= retain {
		return
	}
	var finished []K
	for k, v := range m {
		if done(v) {
			finished = append(finished, k)
		}
	}
	slices.SortFunc(finished, func(a, b K) int { return order(a) - order(b) })
	for _, k := range finished[:min(len(finished), len(m)-retain)] {
		delete(m, k)
	}
}

// hasExecutor reports whether Spark has listed an executor of the
// attempt, the driver aside.
func (st *State) hasExecutor() bool {
	for id := range st.Executors {
		if id != "driver" {
			return true
		}
	}
	return false
}
