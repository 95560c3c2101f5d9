package simulate

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/sparkpulse/sparkpulse/sparkui"
)

// queries are what the simulated applications run, one SQL execution per
// job, as spark-sql or a notebook would.
var queries = []string{
	"INSERT OVERWRITE TABLE sales_daily SELECT store, sum(amount) FROM sales GROUP BY store",
	"SELECT customer_id, count(*) FROM orders JOIN customers USING (customer_id) GROUP BY customer_id",
	"CREATE TABLE features AS SELECT user_id, avg(session_length) FROM events GROUP BY user_id",
	"SELECT * FROM clicks WHERE day = current_date() ORDER BY ts DESC LIMIT 1000",
}

// timeline drives the jobs, stages and SQL executions of one simulated
// application in a sparkui model: a job of two stages runs for a few
// periods, then the application idles a little before the next one; one
// job in fifteen fails in its second stage. Its executors report more
// finished tasks while a stage runs. From lastJob on it starts no job, so
// that it ends idle, as most applications do: its last job decides its
// outcome.
type timeline struct {
	app    string
	att    *sparkui.Attempt
	rng    *rand.Rand
	period time.Duration

	job       *sparkui.Job
	x         *sparkui.Execution
	stages    []*sparkui.Stage
	cur       int       // index of the running stage
	stageEnd  time.Time // when it ends
	idleUntil time.Time
	lastJob   time.Time // no job starts from then on; zero: jobs until the end
	nextStage int
}

// jobPeriods bounds a job's length in periods: two stages of at most
// three, and a step to see each end.
const jobPeriods = 8

func newTimeline(app, name string, start time.Time, period time.Duration, rng *rand.Rand, m *sparkui.Model) *timeline {
	att := &sparkui.Attempt{Start: start, User: "spark", SparkVersion: "3.5.3", Properties: map[string]string{
		"spark.app.id": app, "spark.app.name": name, "spark.master": "yarn", "spark.submit.deployMode": "cluster",
		"spark.executor.memory": "4g", "spark.executor.cores": "4", "spark.driver.memory": "2g",
		"spark.executor.processTreeMetrics.enabled": "true", "spark.metrics.appStatusSource.enabled": "true",
	}}
	m.Apps = append(m.Apps, &sparkui.App{ID: app, Name: name, Attempts: []*sparkui.Attempt{att}})
	return &timeline{app: app, att: att, rng: rng, period: period, idleUntil: start.Add(period)}
}

// busy reports whether a stage is running.
func (tl *timeline) busy() bool { return tl.job != nil }

// step advances the application to now. The model must be locked.
func (tl *timeline) step(now time.Time) {
	if tl.job == nil {
		if now.Before(tl.idleUntil) || (!tl.lastJob.IsZero() && !now.Before(tl.lastJob) && len(tl.att.Jobs) > 0) {
			return
		}
		tl.startJob(now)
		return
	}
	if now.Before(tl.stageEnd) {
		st := tl.stages[tl.cur]
		st.CompleteTasks = min(st.CompleteTasks+st.Tasks/4, st.Tasks-st.ActiveTasks)
		return
	}
	st := tl.stages[tl.cur]
	st.Completed, st.ActiveTasks = now, 0
	if tl.cur == len(tl.stages)-1 && tl.job.ID%15 == 7 {
		st.Status, st.FailedTasks, st.CompleteTasks = sparkui.StageFailed, 4, st.Tasks-1
		tl.tasks(st, 4)
		st.FailureReason = fmt.Sprintf("Job aborted due to stage failure: Task 3 in stage %d.0 failed 4 times, most recent failure: "+
			"Lost task 3.3 in stage %d.0 (TID 812) (10.0.0.7 executor 2): java.lang.OutOfMemoryError: Java heap space\n"+
			"\tat java.base/java.util.Arrays.copyOf(Arrays.java:3537)", st.ID, st.ID)
		tl.finishJob(now, false)
		return
	}
	st.Status, st.CompleteTasks = sparkui.StageComplete, st.Tasks
	tl.tasks(st, 0)
	tl.job.CompletedTasks += st.Tasks
	tl.job.CompletedStages++
	if tl.cur++; tl.cur == len(tl.stages) {
		tl.finishJob(now, true)
		return
	}
	tl.runStage(now)
}

func (tl *timeline) startJob(now time.Time) {
	id := len(tl.att.Jobs)
	q := queries[tl.rng.IntN(len(queries))]
	tl.x = &sparkui.Execution{ID: int64(len(tl.att.Executions)), Description: q, Submitted: now, RunningJobs: []int{id}}
	tl.att.Executions = append(tl.att.Executions, tl.x)
	tl.stages = nil
	var ids []int
	tasks := 0
	for i, name := range []string{"scan and aggregate at NativeMethodAccessorImpl.java:0", "save at NativeMethodAccessorImpl.java:0"} {
		st := &sparkui.Stage{ID: tl.nextStage, Name: name, Description: q, Status: sparkui.StagePending, Tasks: 40 + 40*(1-i)}
		tl.nextStage++
		tl.att.AddStage(st)
		tl.stages = append(tl.stages, st)
		ids = append(ids, st.ID)
		tasks += st.Tasks
	}
	tl.job = tl.att.AddJob(&sparkui.Job{ID: id, Name: tl.stages[1].Name, Description: q, Submitted: now, StageIDs: ids,
		Status: sparkui.JobRunning, Tasks: tasks, SQLExecutionID: tl.x.ID})
	tl.cur = 0
	tl.runStage(now)
}

func (tl *timeline) runStage(now time.Time) {
	st := tl.stages[tl.cur]
	st.Status, st.Submitted, st.FirstLaunched, st.ActiveTasks = sparkui.StageActive, now, now, 8
	tl.job.ActiveStages, tl.job.ActiveTasks = 1, 8
	tl.stageEnd = now.Add(time.Duration(1+tl.rng.IntN(3)) * tl.period)
}

// tasks gives an ended stage its task list: its tasks in waves over the
// executors, most near a median run time and every second stage with a
// straggler several times longer (the skew the Stages row shows); with
// failed, that many attempts of task 3 failing out of heap on one
// executor, as the stage's failure reason says.
func (tl *timeline) tasks(st *sparkui.Stage, failed int) {
	var execs []*sparkui.Executor
	for _, x := range tl.att.Executors {
		if x.ID != "driver" && x.Removed.IsZero() {
			execs = append(execs, x)
		}
	}
	if len(execs) == 0 {
		return
	}
	span := st.Completed.Sub(st.Submitted)
	median := max(span/time.Duration(max(st.Tasks/(4*len(execs)), 1))/2, 100*time.Millisecond)
	id := int64(st.ID) * 1000
	add := func(index, attempt int, x *sparkui.Executor, run time.Duration, status, err string) {
		launch := st.Submitted.Add(time.Duration(tl.rng.Int64N(int64(max(span-run, 1)))))
		host, _, _ := strings.Cut(x.HostPort, ":")
		st.TaskList = append(st.TaskList, &sparkui.Task{ID: id, Index: index, Attempt: attempt, Launched: launch, Finished: launch.Add(run),
			Executor: x.ID, Host: host, Status: status, Error: err, HasMetrics: true, RunTimeMs: run.Milliseconds(),
			GCTimeMs: run.Milliseconds() / 20, InputBytes: 64 << 20, ShuffleReadBytes: 8 << 20, FetchWaitMs: run.Milliseconds() / 50})
		id++
	}
	for i := range st.Tasks {
		if failed > 0 && i == 3 {
			continue // it never succeeded
		}
		run := median + time.Duration(tl.rng.Int64N(int64(median/2))) - median/4
		if i == st.Tasks/2 && st.ID%2 == 1 {
			run = min(6*median, span) // the straggler
		}
		add(i, 0, execs[i%len(execs)], run, sparkui.TaskSuccess, "")
	}
	for a := range failed {
		x := execs[1%len(execs)]
		add(3, a+1, x, median, sparkui.TaskFailed, "java.lang.OutOfMemoryError: Java heap space\n\tat java.base/java.util.Arrays.copyOf(Arrays.java:3537)\n")
	}
}

func (tl *timeline) finishJob(now time.Time, ok bool) {
	j := tl.job
	j.Completed, j.ActiveTasks, j.ActiveStages = now, 0, 0
	tl.x.Completed, tl.x.RunningJobs = now, nil
	if ok {
		j.Status = sparkui.JobSucceeded
		tl.x.SucceededJobs = append(tl.x.SucceededJobs, j.ID)
	} else {
		j.Status, j.FailedStages, j.FailedTasks = sparkui.JobFailed, 1, 4
		tl.x.FailedJobs = append(tl.x.FailedJobs, j.ID)
	}
	tl.job, tl.x = nil, nil
	tl.idleUntil = now.Add(time.Duration(tl.rng.IntN(3)) * tl.period)
}

// end ends the application at now: a running job and its stages fail, as
// when the driver exits in the middle of a job.
func (tl *timeline) end(now time.Time) {
	if tl.job != nil {
		st := tl.stages[tl.cur]
		st.Status, st.Completed, st.ActiveTasks = sparkui.StageFailed, now, 0
		st.FailureReason = "Job " + fmt.Sprint(tl.job.ID) + " cancelled because SparkContext was shut down"
		tl.finishJob(now, false)
	}
	for _, s := range tl.att.Stages {
		if s.Status == sparkui.StagePending {
			s.Status = sparkui.StageSkipped
		}
	}
	tl.att.End = now
	tl.idleUntil = now.Add(100 * 365 * 24 * time.Hour)
}
