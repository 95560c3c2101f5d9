package accounting

import (
	"fmt"
	"math"

	"github.com/sparkpulse/sparkpulse/sizing"
	"github.com/sparkpulse/sparkpulse/sparkapi"
)

// StageTotals sums the stage list: Spark's totals over every task of
// every stage attempt it kept (spark.ui.retainedStages).
type StageTotals struct {
	Stages              int
	CPUNs, RunMs        int64
	Failed, Killed      int
	MemSpill, DiskSpill int64
	ShuffleFetchWaitMs  int64
	// Stage ids run from 0, one per stage the application made, skipped
	// ones listed too: fewer ids listed than the largest + 1 means Spark
	// dropped the oldest (spark.ui.retainedStages, 1 000 by default).
	ids   map[int]bool
	maxID int
	// runs are the attempts that were submitted, [submissionTime,
	// completionTime]; End 0 while one runs.
	runs           []sizing.Span
	failedAttempts int // status FAILED
}

// Dropped is how many of the application's stages Spark no longer lists.
func (t *StageTotals) Dropped() int {
	if len(t.ids) == 0 {
		return 0
	}
	return t.maxID + 1 - len(t.ids)
}

// Add adds a stage attempt as Spark lists it.
func (t *StageTotals) Add(s *sparkapi.Stage) {
	if t.ids == nil {
		t.ids = map[int]bool{}
	}
	t.ids[s.StageID] = true
	t.maxID = max(t.maxID, s.StageID)
	t.Stages++
	t.CPUNs = addSat(t.CPUNs, s.ExecutorCPUTime)
	t.RunMs = addSat(t.RunMs, s.ExecutorRunTime)
	t.Failed += s.NumFailedTasks
	t.Killed += s.NumKilledTasks
	t.MemSpill = addSat(t.MemSpill, s.MemoryBytesSpilled)
	t.DiskSpill = addSat(t.DiskSpill, s.DiskBytesSpilled)
	t.ShuffleFetchWaitMs = addSat(t.ShuffleFetchWaitMs, s.ShuffleFetchWaitTime)
	if sub := optMS(s.SubmissionTime); sub > 0 {
		t.runs = append(t.runs, sizing.Span{Start: sub, End: optMS(s.CompletionTime)})
	}
	if s.Status == "FAILED" {
		t.failedAttempts++
	}
}

// addSat adds two values of at least zero (sparkapi.Check holds each
// below 2^58), stopping at the largest int64 rather than wrapping round.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// Figures sets in u what the stage list tells over [startMs, readMs]:
// the driver-only time and the failed stage attempts (sizing's
// figures.go). A stage list that lacks stages the application made (Spark
// keeps spark.ui.retainedStages; sparkpulse, while an application runs,
// its last retain) would read their run as driver-only time: the figures
// are then left out, with a note.
func (t *StageTotals) Figures(u *sizing.Usage, startMs, readMs int64) {
	switch {
	case t == nil:
		u.Notes = append(u.Notes, "driver-only time unknown: Spark's stage list was not read")
		return
	case t.Dropped() > 0:
		u.Notes = append(u.Notes, fmt.Sprintf("driver-only time and failed stage attempts unknown: %d of the %d stages the application made are listed (spark.ui.retainedStages)",
			len(t.ids), t.maxID+1))
		return
	}
	spans := make([]sizing.Span, len(t.runs))
	for i, r := range t.runs {
		if r.End <= 0 {
			r.End = readMs // still running: up to the read
		}
		spans[i] = r
	}
	d, n := sizing.DriverOnly(spans, startMs, readMs), t.failedAttempts
	u.DriverOnlyMs, u.FailedStageAttempts = &d, &n
	u.DriverOnlyGapsMs = sizing.Gaps(spans, startMs, readMs)
}

// currentStages sums the stages the attempt holds, for a running
// application's estimate.
func currentStages(stages []Stage) *StageTotals {
	var t StageTotals
	for i := range stages {
		t.Add(&stages[i].Stage)
	}
	return &t
}

// StageFigures sets in u the driver-only time and failed stage attempts
// of an application's stage list over [startMs, readMs] (readMs: its end,
// or the time of the read while it runs), as the accounting does.
func StageFigures(u *sizing.Usage, stages []sparkapi.Stage, startMs, readMs int64) {
	var t StageTotals
	for i := range stages {
		t.Add(&stages[i])
	}
	t.Figures(u, startMs, readMs)
}
