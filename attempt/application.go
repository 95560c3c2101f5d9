package attempt

import (
	"cmp"
	"context"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/sparkpulse/sparkpulse/sizing"
	"github.com/sparkpulse/sparkpulse/sparkapi"
)

// Application is what Spark's REST API says of one application attempt's
// executors and settings, as Assess read it.
type Application struct {
	ID, Name, AttemptID string
	Source              string            // the base URL that answered
	Properties          map[string]string // the environment's sparkProperties
	Executors           []sizing.Executor // the driver and every executor, removed ones too
	// MetricsKey is the applicationid its metrics carry: its id, or what
	// spark.metrics.namespace makes of it (e.g. its name).
	MetricsKey string
	Start, End time.Time // the attempt's run; End is zero while it runs
}

// StageRead is a stage attempt as ReadStages reads it, with its details
// when they were read.
type StageRead struct {
	sparkapi.Stage
	Summary *sparkapi.TaskSummary // taskSummary at 0.5, 0.95, 1.0
	Slowest *sparkapi.TaskData
	Failed  []sparkapi.TaskData
}

// ReadStages reads the stage attempts of app (as Assess found it) and the details of the top slowest that ended and of every one with
// failed tasks: at most 3 requests each, FailedTasksPerStage failed tasks.
func ReadStages(ctx context.Context, cfg Config, app Application, top int) ([]StageRead, error) {
	r := NewReader(cfg)
	root := app.Source + "/api/v1/applications/" + url.PathEscape(app.ID)
	if app.AttemptID != "" {
		root += "/" + url.PathEscape(app.AttemptID)
	}
	var list []sparkapi.Stage
	if err := r.Get(ctx, root+"/stages?details=false", &list); err != nil {
		return nil, err
	}
	out := make([]StageRead, len(list))
	for i, s := range list {
		out[i] = StageRead{Stage: s}
	}
	byDuration := make([]int, len(out))
	for i := range byDuration {
		byDuration[i] = i
	}
	slices.SortStableFunc(byDuration, func(a, b int) int { return cmp.Compare(stageMs(out[b].Stage), stageMs(out[a].Stage)) })
	long := map[int]bool{}
	for _, i := range byDuration[:min(top, len(byDuration))] {
		long[i] = stageMs(out[i].Stage) > 0
	}
	for i := range out {
		s := &out[i]
		failed := s.NumFailedTasks > 0
		if !long[i] && !failed {
			continue
		}
		d := &Details{Why: DetailsRead}
		base := root + "/stages/" + strconv.Itoa(s.StageID) + "/" + strconv.Itoa(s.AttemptID)
		if err := readDetails(ctx, r.Get, base, d, long[i], failed, r.FailedTasksPerStage); err != nil {
			return nil, err
		}
		s.Summary, s.Slowest, s.Failed = d.Summary, d.Slowest, d.Failed
	}
	return out, nil
}

// stageMs is how long a stage attempt ran; 0 if it did not end.
func stageMs(s sparkapi.Stage) int64 {
	start, end := s.SubmissionTime.Ms(), s.CompletionTime.Ms()
	if start == 0 || end < start {
		return 0
	}
	return end - start
}
