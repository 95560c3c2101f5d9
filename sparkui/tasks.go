package sparkui

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/sparkpulse/sparkpulse/sparkapi"
)

// The task endpoints of a stage attempt, computed as Spark's AppStatusStore
// computes them: taskSummary over the successful tasks that reported
// metrics (failed ones are kept out, SPARK-26260), each metric sorted on
// its own and read at index min(⌊q × count⌋, count − 1); taskList by id
// or by run time, filtered by status.

// defaultQuantiles are Spark's for taskSummary.
const defaultQuantiles = "0.05,0.25,0.5,0.75,0.95"

func (s *Server) taskSummary(st *Stage, q []string) (any, error) {
	spec := defaultQuantiles
	if len(q) > 0 && q[0] != "" {
		spec = q[0]
	}
	var quantiles []float64
	for _, f := range strings.Split(spec, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return nil, badRequest("Bad value for parameter \"quantiles\".  Expected a double, got %q", f)
		}
		quantiles = append(quantiles, v)
	}
	slices.Sort(quantiles)
	var ok []*Task
	for _, t := range st.TaskList {
		if t.Status == TaskSuccess && t.HasMetrics {
			ok = append(ok, t)
		}
	}
	if len(ok) == 0 {
		return nil, notFound("No tasks reported metrics for %d / %d yet.", st.ID, st.Attempt)
	}
	n := len(ok)
	at := func(metric func(*Task) int64) []float64 {
		vs := make([]int64, n)
		for i, t := range ok {
			vs[i] = metric(t)
		}
		slices.Sort(vs)
		out := make([]float64, len(quantiles))
		for i, q := range quantiles {
			out[i] = float64(vs[min(int(math.Floor(q*float64(n))), n-1)])
		}
		return out
	}
	sum := sparkapi.TaskSummary{
		Quantiles:           quantiles,
		Duration:            at(func(t *Task) int64 { return t.Finished.Sub(t.Launched).Milliseconds() }),
		ExecutorRunTime:     at(func(t *Task) int64 { return t.RunTimeMs }),
		JVMGCTime:           at(func(t *Task) int64 { return t.GCTimeMs }),
		PeakExecutionMemory: at(func(t *Task) int64 { return t.PeakExecMemory }),
		MemoryBytesSpilled:  at(func(t *Task) int64 { return t.MemSpilled }),
		DiskBytesSpilled:    at(func(t *Task) int64 { return t.DiskSpill }),
	}
	sum.InputMetrics.BytesRead = at(func(t *Task) int64 { return t.InputBytes })
	sum.ShuffleReadMetrics.ReadBytes = at(func(t *Task) int64 { return t.ShuffleReadBytes })
	sum.ShuffleReadMetrics.FetchWaitTime = at(func(t *Task) int64 { return t.FetchWaitMs })
	return sum, nil
}

// taskList answers taskList?offset=&length=&sortBy=&status=.
func (s *Server) taskList(st *Stage, q map[string][]string) (any, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	offset, length := 0, 20
	if v := get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, badRequest("Bad value for parameter \"offset\": %q", v)
		}
		offset = n
	}
	if v := get("length"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, badRequest("Bad value for parameter \"length\": %q", v)
		}
		length = n
	}
	want := map[string]bool{}
	for _, v := range q["status"] {
		want[strings.ToUpper(v)] = true
	}
	tasks := slices.Clone(st.TaskList)
	slices.SortStableFunc(tasks, func(a, b *Task) int { return cmp.Compare(a.ID, b.ID) })
	switch get("sortBy") {
	case "", "ID":
	case "runtime", "INCREASING_RUNTIME":
		slices.SortStableFunc(tasks, func(a, b *Task) int { return cmp.Compare(runtimeKey(a), runtimeKey(b)) })
	case "-runtime", "DECREASING_RUNTIME":
		slices.SortStableFunc(tasks, func(a, b *Task) int { return cmp.Compare(runtimeKey(b), runtimeKey(a)) })
	default:
		return nil, badRequest("Bad value for parameter \"sortBy\": %q", get("sortBy"))
	}
	out := []sparkapi.TaskData{}
	for _, t := range tasks {
		if len(want) > 0 && !want[t.Status] {
			continue
		}
		if offset > 0 {
			offset--
			continue
		}
		if len(out) == length {
			break
		}
		out = append(out, toTaskJSON(t))
	}
	return out, nil
}

// runtimeKey orders tasks by run time as Spark's index does: tasks
// without metrics first (-1), failed ones below every successful one.
func runtimeKey(t *Task) int64 {
	switch {
	case !t.HasMetrics:
		return -1
	case t.Status != TaskSuccess:
		return -t.RunTimeMs - 2
	}
	return t.RunTimeMs
}

func toTaskJSON(t *Task) sparkapi.TaskData {
	d := sparkapi.TaskData{
		TaskID: t.ID, Index: t.Index, Attempt: t.Attempt, LaunchTime: sparkapi.OptDate(t.Launched),
		ExecutorID: t.Executor, Host: t.Host, Status: t.Status, TaskLocality: "PROCESS_LOCAL",
		Speculative: t.Speculative, ErrorMessage: t.Error,
	}
	if !t.Finished.IsZero() {
		d.Duration = t.Finished.Sub(t.Launched).Milliseconds()
	}
	if t.HasMetrics {
		// Spark's taskList gives the run time as a finished task's
		// duration (its expectation for local-1430917381534), while
		// taskSummary's duration is launch to finish.
		d.Duration = t.RunTimeMs
		m := &sparkapi.TaskMetrics{ExecutorRunTime: t.RunTimeMs, JVMGCTime: t.GCTimeMs, PeakExecutionMemory: t.PeakExecMemory,
			MemoryBytesSpilled: t.MemSpilled, DiskBytesSpilled: t.DiskSpill}
		m.InputMetrics.BytesRead = t.InputBytes
		m.ShuffleReadMetrics.FetchWaitTime = t.FetchWaitMs
		m.ShuffleReadMetrics.LocalBytesRead = t.ShuffleReadBytes // the split is not kept
		d.TaskMetrics = m
	}
	return d
}
