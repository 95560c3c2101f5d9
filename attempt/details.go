package attempt

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/sparkpulse/sparkpulse/sparkapi"
)

// Stage details: why a stage took as long as it did and why its tasks
// failed. When a stage attempt ends, and it ran StageDetailsMinDuration or
// had failed tasks, a read takes, within StageDetailsRequests
// (stages with failed tasks first, then the longest):
//
//   - taskSummary?quantiles=0.5,0.95,1.0: the median, p95 and largest task
//     of each metric over the successful tasks (multiples of 0.05, which
//     Spark caches); skew is the largest run time over the median;
//   - taskList?sortBy=-runtime&length=1: the slowest task, the straggler;
//   - taskList?status=failed&status=killed&length=FailedTasksPerStage,
//     when tasks failed or were killed (Spark before 3.0 ignores status:
//     its tasks are filtered here): the failed ones are written as task
//     failures, and both give the accounting their run time.
//
// A stage without details says why in task_details (short, budget,
// unavailable); an endpoint that fails costs the stage its details, never
// a retry loop.

const summaryQuantiles = "0.5,0.95,1.0"

// What became of a stage attempt's details (task_details).
const (
	DetailsRead        = "read"
	DetailsShort       = "short"       // ran less than StageDetailsMinDuration, no failed task
	DetailsBudget      = "budget"      // StageDetailsRequests were spent by this read
	DetailsUnavailable = "unavailable" // the source answered 404 or failed (Spark before 1.4, no task with metrics)
)

// Details are what was read of a stage attempt that ended.
type Details struct {
	Why     string
	Summary *sparkapi.TaskSummary
	Slowest *sparkapi.TaskData
	Failed  []sparkapi.TaskData
	Killed  []sparkapi.TaskData // a speculative copy that lost, a cancelled job's
	// listedFailed and listedKilled are the stage's counts when its failed
	// and killed tasks were last asked for: a task killed as its stage
	// finished may end after the stage's details were read, and the
	// counts growing has them read again.
	listedFailed, listedKilled int
}

// readStageDetails reads the details of stage attempts that ended since
// the last read.
func (r *Reader) readStageDetails(ctx context.Context, st *State) error {
	budget := r.StageDetailsRequests
	// Stages with failed tasks first, then the longest: when the budget
	// runs out, what is left without details matters least.
	keys := slices.SortedFunc(maps.Keys(st.Stages), CompareStageKeys)
	slices.SortStableFunc(keys, func(a, b StageKey) int {
		x, y := st.Stages[a], st.Stages[b]
		failed := func(s *Stage) int {
			if s.NumFailedTasks+s.NumKilledTasks > 0 {
				return 0
			}
			return 1
		}
		return cmp.Or(failed(x)-failed(y), cmp.Compare(stageMs(y.Stage), stageMs(x.Stage)))
	})
	for _, k := range keys {
		s := st.Stages[k]
		if s.Status != "COMPLETE" && s.Status != "FAILED" {
			continue
		}
		if d := s.Details; d != nil {
			if (d.Why == DetailsRead || d.Why == DetailsShort) && budget > 0 &&
				(s.NumFailedTasks > d.listedFailed || s.NumKilledTasks > d.listedKilled) {
				budget--
				base := st.URL + "/stages/" + strconv.Itoa(k.ID) + "/" + strconv.Itoa(k.Attempt)
				d.Failed, d.Killed = nil, nil
				if err := readFailed(ctx, r.Get, base, d, r.FailedTasksPerStage); err != nil {
					return err
				}
				d.listedFailed, d.listedKilled = s.NumFailedTasks, s.NumKilledTasks
			}
			continue
		}
		start, end := s.SubmissionTime.Ms(), s.CompletionTime.Ms()
		if start == 0 {
			continue // it never ran
		}
		if r.EndWritten != nil && r.EndWritten(st, k, start) {
			s.Details = &Details{Why: DetailsRead} // written before a restart
			continue
		}
		d := &Details{Why: DetailsRead}
		s.Details = d
		long := time.Duration(end-start)*time.Millisecond >= r.StageDetailsMinDuration || r.StageDetailsMinDuration < 0
		need := 0
		if long {
			need += 2
		}
		if s.NumFailedTasks+s.NumKilledTasks > 0 {
			need++
		}
		switch {
		case need == 0:
			d.Why = DetailsShort
		case need > budget:
			d.Why = DetailsBudget
		}
		r.countDetails(d.Why)
		if d.Why != DetailsRead {
			continue
		}
		budget -= need
		base := st.URL + "/stages/" + strconv.Itoa(k.ID) + "/" + strconv.Itoa(k.Attempt)
		if err := readDetails(ctx, r.Get, base, d, long, s.NumFailedTasks+s.NumKilledTasks > 0, r.FailedTasksPerStage); err != nil {
			return err
		}
		d.listedFailed, d.listedKilled = s.NumFailedTasks, s.NumKilledTasks
		if d.Why == DetailsUnavailable {
			r.countDetails(d.Why)
		}
	}
	// Stages running long: every progressEvery reads, their finished
	// tasks' distribution and the task running longest.
	if st.reads%progressEvery != 0 {
		return nil
	}
	now := r.Now()
	for _, k := range keys {
		s := st.Stages[k]
		start := s.SubmissionTime.Ms()
		if s.Status != "ACTIVE" || start == 0 || now.UnixMilli()-start < max(r.StageDetailsMinDuration, progressMin).Milliseconds() {
			continue
		}
		if budget < 2 {
			r.countDetails(DetailsBudget)
			continue
		}
		budget -= 2
		base := st.URL + "/stages/" + strconv.Itoa(k.ID) + "/" + strconv.Itoa(k.Attempt)
		pr := &Progress{At: now}
		var sum sparkapi.TaskSummary
		if err := r.Get(ctx, base+"/taskSummary?quantiles="+summaryQuantiles, &sum); err == nil && len(sum.ExecutorRunTime) == 3 {
			pr.Summary = &sum
		} else if ctx.Err() != nil {
			return ctx.Err()
		}
		var running []sparkapi.TaskData
		err := r.Get(ctx, base+"/taskList?status=running&length="+strconv.Itoa(progressRunningTasks), &running)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		for i := range running {
			t := &running[i]
			if err == nil && t.Status == "RUNNING" && t.LaunchTime != nil && (pr.Longest == nil || t.LaunchTime.Before(pr.Longest.LaunchTime.Time)) {
				pr.Longest = t
			}
		}
		s.Progress = pr
	}
	return nil
}

// Progress of a running stage.
const (
	progressEvery        = 6           // reads: a minute at the 10 s interval
	progressMin          = time.Minute // a stage running this long is followed
	progressRunningTasks = 200         // running tasks read to find the longest
)

// Progress is a running stage's finished tasks and its longest running
// task, as read at At.
type Progress struct {
	At      time.Time
	Summary *sparkapi.TaskSummary
	Longest *sparkapi.TaskData
}

// readDetails reads into d the task distribution and slowest task (with
// long) and the failed and killed tasks (with failed) of the stage
// attempt at base. A source that does not answer costs the stage its
// details; only the end of ctx is an error. At most maxFailed failed
// tasks, and as many killed ones, are kept.
func readDetails(ctx context.Context, get Getter, base string, d *Details, long, failed bool, maxFailed int) error {
	if long {
		var sum sparkapi.TaskSummary
		if err := get(ctx, base+"/taskSummary?quantiles="+summaryQuantiles, &sum); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			d.Why = DetailsUnavailable
		} else if len(sum.ExecutorRunTime) == 3 {
			d.Summary = &sum
		}
		var slowest []sparkapi.TaskData
		if err := get(ctx, base+"/taskList?sortBy=-runtime&length=1", &slowest); err == nil && len(slowest) == 1 {
			d.Slowest = &slowest[0]
		} else if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	if failed {
		return readFailed(ctx, get, base, d, maxFailed)
	}
	return nil
}

// readFailed reads into d the failed and killed tasks of the stage
// attempt at base, at most maxFailed of each.
func readFailed(ctx context.Context, get Getter, base string, d *Details, maxFailed int) error {
	var tasks []sparkapi.TaskData
	err := get(ctx, base+"/taskList?status=failed&status=killed&length="+strconv.Itoa(2*maxFailed), &tasks)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err == nil {
		for _, t := range tasks {
			switch {
			case t.Status == "KILLED" && len(d.Killed) < maxFailed:
				d.Killed = append(d.Killed, t)
			case t.Status != "SUCCESS" && t.Status != "RUNNING" && t.Status != "KILLED" && len(d.Failed) < maxFailed:
				d.Failed = append(d.Failed, t)
			}
		}
	}
	return nil
}
