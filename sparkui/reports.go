package sparkui

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// ExecutorReports writes the reports Spark's GraphiteSink would have sent
// of each executor's ExecutorSource task counters, replayed from the
// attempt's tasks: every period from the executor's addition, and once
// more when it goes (removed, or with the application), in time order.
// As Spark's executors count them, a task's metrics are added when it
// succeeds, and only then (Executor.TaskRunner increments the counters on
// success); Spark's REST totals count failed tasks' metrics too. Lines
// are "<ns>.<executor>.executor.<counter>.count <value> <unix seconds>".
func (a *Attempt) ExecutorReports(ns string, period time.Duration, line func(string)) {
	type report struct {
		at   time.Time
		exec *Executor
	}
	end := a.End
	if end.IsZero() {
		return
	}
	tasks := map[string][]*Task{}
	for _, s := range a.Stages {
		for _, t := range s.TaskList {
			if t.Status == TaskSuccess && t.HasMetrics {
				tasks[t.Executor] = append(tasks[t.Executor], t)
			}
		}
	}
	var reports []report
	for _, x := range a.Executors {
		if x.Added.IsZero() {
			continue
		}
		gone := end
		if !x.Removed.IsZero() && x.Removed.Before(end) {
			gone = x.Removed
		}
		// Graphite times are whole seconds: a tick in the second of the
		// last report would be a duplicate.
		for t := x.Added.Add(period); t.Unix() < gone.Unix(); t = t.Add(period) {
			reports = append(reports, report{t, x})
		}
		reports = append(reports, report{gone, x})
	}
	slices.SortStableFunc(reports, func(p, q report) int { return cmp.Compare(p.at.UnixMilli(), q.at.UnixMilli()) })
	for _, r := range reports {
		var n, cpu, run, gc, in, shRead, shWrite int64
		for _, t := range tasks[r.exec.ID] {
			if t.Finished.After(r.at) {
				continue
			}
			n++
			cpu += t.CPUTimeNs
			run += t.RunTimeMs
			gc += t.GCTimeMs
			in += t.InputBytes
			shRead += t.ShuffleReadBytes
			shWrite += t.ShuffleWriteBytes
		}
		for _, c := range []struct {
			name string
			v    int64
		}{{"succeededTasks", n}, {"cpuTime", cpu}, {"runTime", run}, {"jvmGCTime", gc}, {"bytesRead", in},
			{"shuffleTotalBytesRead", shRead}, {"shuffleBytesWritten", shWrite}} {
			line(fmt.Sprintf("%s.%s.executor.%s.count %d %d", ns, r.exec.ID, c.name, c.v, r.at.Unix()))
		}
	}
}
