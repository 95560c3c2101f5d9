// Package timespent says where an application's time went: its slowest
// stages, each with the verdicts of a few rules, and its failed tasks by
// error class. It reads nothing itself: it takes what Spark's REST API
// gives (the stage list, taskSummary, the slowest task, failed tasks), so
// that the rules can be worked by hand and tested alone.
//
// The rules, each with its reason:
//
//   - skewed: the longest task ran at least 4 times the median task and
//     at least a quarter of the stage's duration, and the task that read
//     the most (input or shuffle, taskSummary's largest) read at least 4
//     times the median task's bytes. Below 4× the tasks are merely
//     uneven; below a quarter of the stage the straggler did not hold it
//     up much (other tasks or waves took the time). The cure is in the
//     data: a key with too many rows (repartition, salt it, or let
//     adaptive execution split skewed joins:
//     spark.sql.adaptive.skewJoin.enabled).
//   - straggler: the same run-time skew while no task read 4 times the
//     median's bytes: one task was slow, not big. Salting a key would not
//     help; the host, the executor's garbage collection (given) or a
//     slow source is the cause, and spark.speculation re-runs such tasks
//     elsewhere. When the tasks read nothing (data made in the stage),
//     bytes cannot tell the two apart: neither is said.
//   - gc: garbage collection took 10 % of task run time or more, the
//     share at which Spark's UI turns GC time red: more heap per task
//     (more memory, or fewer cores per executor). Quiet, with a note,
//     under ZGC or Shenandoah, whose GC time is concurrent cycles.
//   - spill: tasks spilled to disk at least half as many bytes as they
//     read (input and shuffle), and at least 100 MiB: the data did not fit
//     in execution memory, so it was written out and read back (more
//     memory per task, more partitions).
//   - fetch_wait: tasks waited for shuffle data for 20 % of their run time
//     or more: the network, the shuffle service, or executors lost under
//     load.
//
// A stage with none of these figures (no task details read) gets no
// verdict and says so.
package timespent

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sparkpulse/sparkpulse/sizing"
)

// Stage is what the REST API says of a stage attempt.
type Stage struct {
	ID, Attempt int
	Name        string
	Status      string
	DurationMs  int64
	Tasks       int
	FailedTasks int
	// Totals over its tasks (stage list).
	RunTimeMs, GCTimeMs, FetchWaitMs     int64
	InputBytes, ShuffleReadBytes         int64
	MemorySpilledBytes, DiskSpilledBytes int64
	// ConcurrentGC names the executors' collector when it collects
	// concurrently (ZGC, Shenandoah: sizing.Settings): their GC time is
	// then that of whole cycles, not of pauses, and the gc rule is quiet.
	ConcurrentGC string
	// From taskSummary and the slowest task; Detailed false when not read.
	Detailed                         bool
	TaskMedianMs, TaskMaxMs          int64
	TaskMedianBytes, TaskMaxBytes    int64 // read by a task: of input or shuffle, whichever has the larger largest
	StragglerExecutor, StragglerHost string
	StragglerGCMs                    int64 // the slowest task's garbage collection
}

// Failure is a failed task.
type Failure struct {
	Stage    int
	Class    string // exception class, or Spark's name for the end reason
	Kind     string // oom, fetch_failed, executor_lost, killed, exception
	Executor string
}

// Verdict is a rule's finding on a stage.
type Verdict struct {
	Rule string `json:"rule"` // skewed, straggler, gc, spill, fetch_wait
	Text string `json:"text"`
}

// StageReport is one of the slowest stages and the rules' verdicts.
type StageReport struct {
	Stage    Stage     `json:"-"`
	ID       string    `json:"stage"` // "3.0"
	Name     string    `json:"name"`
	Duration string    `json:"duration"`
	Verdicts []Verdict `json:"verdicts"`
	Note     string    `json:"note,omitempty"`
}

// FailureClass counts the failed tasks of one error class.
type FailureClass struct {
	Class     string   `json:"class"`
	Kind      string   `json:"kind"`
	Tasks     int      `json:"tasks"`
	Stages    []int    `json:"stages"`
	Executors []string `json:"executors"`
}

// Report is where the time went.
type Report struct {
	Stages       int            `json:"stages"`        // stage attempts considered
	StageTimeMs  int64          `json:"stage_time_ms"` // their durations, summed
	Slowest      []StageReport  `json:"slowest"`
	Failures     []FailureClass `json:"failed_tasks"`
	FailuresRead int            `json:"failed_tasks_read"`
}

// Thresholds of the rules.
const (
	SkewRatio      = 4.0
	SkewShare      = 0.25
	GCShare        = 0.10
	SpillShare     = 0.5
	SpillMinBytes  = 100 << 20
	FetchWaitShare = 0.20
)

// Judge applies the rules to the top slowest stages and sums the failed
// tasks by class.
func Judge(stages []Stage, failures []Failure, top int) Report {
	r := Report{Stages: len(stages), FailuresRead: len(failures), Slowest: []StageReport{}, Failures: []FailureClass{}}
	for _, s := range stages {
		r.StageTimeMs += s.DurationMs
	}
	sorted := slices.Clone(stages)
	slices.SortStableFunc(sorted, func(a, b Stage) int {
		return cmp.Or(cmp.Compare(b.DurationMs, a.DurationMs), cmp.Compare(a.ID, b.ID), cmp.Compare(a.Attempt, b.Attempt))
	})
	for _, s := range sorted[:min(top, len(sorted))] {
		r.Slowest = append(r.Slowest, judgeStage(s))
	}
	byClass := map[string]*FailureClass{}
	var order []string
	for _, f := range failures {
		fc := byClass[f.Class]
		if fc == nil {
			fc = &FailureClass{Class: f.Class, Kind: f.Kind}
			byClass[f.Class] = fc
			order = append(order, f.Class)
		}
		fc.Tasks++
		if !slices.Contains(fc.Stages, f.Stage) {
			fc.Stages = append(fc.Stages, f.Stage)
		}
		if f.Executor != "" && !slices.Contains(fc.Executors, f.Executor) {
			fc.Executors = append(fc.Executors, f.Executor)
		}
	}
	for _, c := range order {
		fc := byClass[c]
		slices.Sort(fc.Stages)
		r.Failures = append(r.Failures, *fc)
	}
	slices.SortStableFunc(r.Failures, func(a, b FailureClass) int { return cmp.Compare(b.Tasks, a.Tasks) })
	return r
}

func judgeStage(s Stage) StageReport {
	out := StageReport{Stage: s, ID: fmt.Sprintf("%d.%d", s.ID, s.Attempt), Name: s.Name, Duration: Duration(s.DurationMs), Verdicts: []Verdict{}}
	add := func(rule, format string, args ...any) {
		out.Verdicts = append(out.Verdicts, Verdict{Rule: rule, Text: fmt.Sprintf(format, args...)})
	}
	if s.Detailed && s.TaskMedianMs > 0 && s.DurationMs > 0 {
		ratio := float64(s.TaskMaxMs) / float64(s.TaskMedianMs)
		share := float64(s.TaskMaxMs) / float64(s.DurationMs)
		if ratio >= SkewRatio && share >= SkewShare {
			where := ""
			if s.StragglerHost != "" {
				where = fmt.Sprintf(", on %s (executor %s)", s.StragglerHost, s.StragglerExecutor)
			}
			took := fmt.Sprintf("the longest task took %s, %.0f× the median %s and %.0f %% of the stage",
				Duration(s.TaskMaxMs), ratio, Duration(s.TaskMedianMs), 100*share)
			switch {
			case s.TaskMaxBytes == 0:
				out.Note = took + "; its tasks read no input or shuffle data, so a big key cannot be told from a slow task"
			case float64(s.TaskMaxBytes) >= SkewRatio*float64(max(s.TaskMedianBytes, 1)):
				add("skewed", "%s; the largest task read %s, the median %s%s", took,
					sizing.Bytes(s.TaskMaxBytes), sizing.Bytes(s.TaskMedianBytes), where)
			default:
				gc := ""
				if s.StragglerGCMs > 0 {
					gc = fmt.Sprintf(", %s of it in GC", Duration(s.StragglerGCMs))
				}
				add("straggler", "%s, though no task read 4× the median's %s: a slow task, not a big one%s%s", took,
					sizing.Bytes(s.TaskMedianBytes), where, gc)
			}
		}
	}
	if s.RunTimeMs > 0 {
		if share := float64(s.GCTimeMs) / float64(s.RunTimeMs); share >= GCShare && s.ConcurrentGC == "" {
			add("gc", "garbage collection took %.0f %% of task time (%s of %s)", 100*share, Duration(s.GCTimeMs), Duration(s.RunTimeMs))
		} else if share >= GCShare {
			out.Note = joinNote(out.Note, fmt.Sprintf("GC time %.0f %% of task time under %s is its concurrent cycles', not pauses: not judged", 100*share, s.ConcurrentGC))
		}
		if share := float64(s.FetchWaitMs) / float64(s.RunTimeMs); share >= FetchWaitShare {
			add("fetch_wait", "tasks waited for shuffle data %.0f %% of their run time (%s)", 100*share, Duration(s.FetchWaitMs))
		}
	}
	read := s.InputBytes + s.ShuffleReadBytes
	if s.DiskSpilledBytes >= SpillMinBytes && float64(s.DiskSpilledBytes) >= SpillShare*float64(read) {
		add("spill", "tasks spilled %s to disk, reading %s", sizing.Bytes(s.DiskSpilledBytes), sizing.Bytes(read))
	}
	if !s.Detailed {
		out.Note = joinNote("no task details (short, over the request budget, or not offered by this Spark): skew not judged", out.Note)
	}
	return out
}

// Duration writes milliseconds for people: 1m40s, 3.2s, 450ms.
func Duration(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d < time.Second:
		return d.String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// Text writes the report for people.
func (r Report) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "where the time went: the %d slowest of %d stage attempts (%s of stage time in all)\n", len(r.Slowest), r.Stages, Duration(r.StageTimeMs))
	for _, s := range r.Slowest {
		fmt.Fprintf(&b, "  stage %s %q: %s, %d tasks", s.ID, s.Name, s.Duration, s.Stage.Tasks)
		if s.Stage.FailedTasks > 0 {
			fmt.Fprintf(&b, ", %d failed", s.Stage.FailedTasks)
		}
		b.WriteString("\n")
		for _, v := range s.Verdicts {
			fmt.Fprintf(&b, "    [%s] %s\n", v.Rule, v.Text)
		}
		if len(s.Verdicts) == 0 && s.Note == "" {
			b.WriteString("    no rule applies\n")
		}
		if s.Note != "" {
			fmt.Fprintf(&b, "    note: %s\n", s.Note)
		}
	}
	if len(r.Failures) == 0 {
		b.WriteString("failed tasks: none read\n")
		return b.String()
	}
	fmt.Fprintf(&b, "failed tasks (%d read):\n", r.FailuresRead)
	for _, f := range r.Failures {
		fmt.Fprintf(&b, "  %d × %s (%s) in stages %s on executors %s\n", f.Tasks, f.Class, f.Kind, ints(f.Stages), strings.Join(f.Executors, ", "))
	}
	return b.String()
}

func ints(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ", ")
}

// joinNote adds a note to a stage's note.
func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
