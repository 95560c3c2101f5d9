package annotate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/sparkpulse/sparkpulse/accounting"
	"github.com/sparkpulse/sparkpulse/sizing"
	"github.com/sparkpulse/sparkpulse/sparkapi"
)

// Assessment is what sparkpulse makes of one application attempt: the
// accounting of spark_app_usage, the advice of spark_sizing, and what the
// sizing rules read. The poller writes it when an attempt ends; Assess
// works it out on demand (sparkpulse report) with the same code, so that
// report, spark_sizing and the fleet give the same advice.
type Assessment struct {
	Application Application
	Advice      sizing.Advice
	Usage       sizing.Usage
	// Final: the attempt had ended, and this is what spark_sizing and
	// spark_app_usage say of it; otherwise a reading up to now.
	Final bool
}

// assess runs the accounting (package accounting: the stream's totals
// screened first, then the usage and, once it has completed, the
// reconciliation) and every sizing rule on what st holds of its attempt up
// to endMs. withStream says whether a stream was configured, for the
// reconciliation that lost task time may come from.
func assess(st *appState, endMs int64, withStream bool) (sizing.Advice, accounting.Result, error) {
	res, err := accounting.Account(st.attempt(withStream), endMs)
	if err != nil {
		return sizing.Advice{}, accounting.Result{}, err
	}
	a := sizing.Advise(res.Settings, res.Executors)
	sizing.RightSize(&a, res.Settings, res.Resources, res.Usage, res.Executors, res.FailureReasons)
	return a, res, nil
}

// attempt is what the accounting reads of st: Spark's answers as held,
// and the stream's totals read after the end (withStream: a stream is
// configured, so that one read without error is reconciled).
func (st *appState) attempt(withStream bool) *accounting.Attempt {
	a := &accounting.Attempt{StartMs: st.key.start, Completed: st.completed, SparkVersion: st.version, Properties: st.properties, Hadoop: st.hadoop, Profiles: st.profiles,
		Executors: executorList(st), StageTotals: st.stageTotals, Stream: st.stream, StreamRead: withStream && st.streamErr == ""}
	for _, id := range slices.SortedFunc(maps.Keys(st.jobs), cmp.Compare[int]) {
		a.Jobs = append(a.Jobs, st.jobs[id].Job)
	}
	for _, k := range slices.SortedFunc(maps.Keys(st.stages), compareStageKeys) {
		s := st.stages[k]
		x := accounting.Stage{Stage: s.Stage, DetailsRead: s.details != nil}
		if s.details != nil {
			x.FailedTasks, x.KilledTasks = s.details.failed, s.details.killed
		}
		a.Stages = append(a.Stages, x)
	}
	return a
}

// Assess reads application appID from the sources of cfg, in order, as
// the poller reads an attempt it syncs (jobs, stages, their details,
// executors, environment), reads its metrics from cfg.Stream, and returns
// the newest attempt's assessment from the first source that knows it.
// Templates are filled with appID. Points go nowhere.
func Assess(ctx context.Context, cfg Config, appID string) (Assessment, error) {
	if cfg.Sink == nil {
		cfg.Sink = discard{}
	}
	p, err := New(cfg)
	if err != nil {
		return Assessment{}, err
	}
	var errs []error
	shown := false // a source answered with something other than "not here"
	for _, s := range p.cfg.Sources {
		base := strings.TrimRight(strings.ReplaceAll(s, "{app_id}", url.PathEscape(appID)), "/")
		a, err := p.assess(ctx, newSource(s, base, appID), appID)
		if err == nil {
			return a, nil
		}
		errs = append(errs, err)
		shown = shown || !notShown(err)
	}
	if len(errs) == 0 {
		return Assessment{}, notShownError{errors.New("annotate: no Spark REST source")}
	}
	err = fmt.Errorf("application %s: %w", appID, errors.Join(errs...))
	if !shown {
		err = notShownError{err}
	}
	return Assessment{}, err
}

// ErrNotShown is what Assess's error is (errors.Is) when no source shows
// the application: each answered 404 (Spark knows no such application),
// did not answer, or lists no attempt of it. Any other failure (a 5xx, an
// answer no Spark sends) is not: a source that shows it failed.
var ErrNotShown = errors.New("no Spark REST source shows it")

type notShownError struct{ error }

func (e notShownError) Unwrap() error      { return e.error }
func (notShownError) Is(target error) bool { return target == ErrNotShown }

// errNoAttempts: a source lists the application with no attempt.
var errNoAttempts = errors.New("no attempts")

// notShown reports whether err says that a source does not show an
// application (see ErrNotShown).
func notShown(err error) bool {
	var fe *sparkapi.Error
	return errors.Is(err, errNoAttempts) || errors.As(err, &fe) && (fe.Kind == kindNetwork || sparkapi.IsNotFound(err))
}

func (p *Poller) assess(ctx context.Context, src *source, appID string) (Assessment, error) {
	var app sparkapi.Application
	if err := p.get(ctx, src.base+"/api/v1/applications/"+url.PathEscape(appID), &app); err != nil {
		return Assessment{}, err
	}
	if len(app.Attempts) == 0 {
		return Assessment{}, fmt.Errorf("%s: %w", src.base, errNoAttempts)
	}
	att := &app.Attempts[0] // Spark lists the newest first
	st := newAppState(appKey{app.ID, att.StartMs()})
	st.refresh(src, &app, att)
	if err := p.readAll(ctx, st, true); err != nil {
		return Assessment{}, err
	}
	now := p.cfg.Now()
	end := st.end
	if !st.completed || end <= 0 {
		end = now.UnixMilli()
	}
	if p.cfg.Stream != nil && st.properties != nil {
		if why := st.ambiguous(); why != "" {
			st.streamErr = why
		} else {
			// The accounting's window (account).
			totals, err := p.readStream(ctx, cmp.Or(st.metricsKey, st.key.app),
				time.UnixMilli(st.key.start).Add(-time.Minute), time.UnixMilli(end).Add(p.cfg.UsageDelay))
			if err != nil {
				st.streamErr = err.Error()
			}
			st.stream = totals
		}
	}
	a, res, err := assess(st, end, p.cfg.Stream != nil)
	u := res.Usage
	if err != nil {
		return Assessment{}, fmt.Errorf("application %s: %w", appID, err)
	}
	out := Application{ID: app.ID, Name: app.Name, AttemptID: att.AttemptID, Source: src.base,
		Properties: st.properties, MetricsKey: cmp.Or(st.metricsKey, st.key.app), Start: time.UnixMilli(st.key.start)}
	if st.completed && st.end > 0 {
		out.End = time.UnixMilli(st.end)
	}
	for _, id := range slices.SortedFunc(maps.Keys(st.executors), accounting.CompareExecutorIDs) {
		out.Executors = append(out.Executors, accounting.ExecutorSizing(&st.executors[id].Executor))
	}
	if st.streamErr != "" {
		u.Notes = append(u.Notes, "metrics stream not read: "+st.streamErr)
	}
	return Assessment{Application: out, Advice: a, Usage: u, Final: st.completed}, nil
}

// executorList is the attempt's executors as Spark lists them, the driver
// first.
func executorList(st *appState) []sparkapi.Executor {
	var execs []sparkapi.Executor
	for _, id := range slices.SortedFunc(maps.Keys(st.executors), accounting.CompareExecutorIDs) {
		execs = append(execs, st.executors[id].Executor)
	}
	return execs
}

// discard is the sink of an assessment: it writes no points.
type discard struct{}

func (discard) Append([]byte, bool) bool { return true }
