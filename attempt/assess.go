package attempt

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
// sizing rules read. The annotator writes it when an attempt ends; Assess
// works it out on demand (sparkpulse report) with the same code
// (Account), so that report, spark_sizing and the fleet give the same
// advice.
type Assessment struct {
	Application Application
	Advice      sizing.Advice
	Usage       sizing.Usage
	// Final: the attempt had ended, and this is what spark_sizing and
	// spark_app_usage say of it; otherwise a reading up to now.
	Final bool
}

// Account runs the accounting (package accounting: the stream's totals
// screened first, then the usage and, once it has completed, the
// reconciliation) and every sizing rule on what st holds of its attempt up
// to endMs. withStream says whether a stream was configured, for the
// reconciliation that lost task time may come from.
func Account(st *State, endMs int64, withStream bool) (sizing.Advice, accounting.Result, error) {
	res, err := accounting.Account(st.Accounting(withStream), endMs)
	if err != nil {
		return sizing.Advice{}, accounting.Result{}, err
	}
	a := sizing.Advise(res.Settings, res.Executors)
	sizing.RightSize(&a, res.Settings, res.Resources, res.Usage, res.Executors, res.FailureReasons)
	return a, res, nil
}

// Accounting is what the accounting reads of st: Spark's answers as
// held, and the stream's totals read after the end (withStream: a stream
// is configured, so that one read without error is reconciled).
func (st *State) Accounting(withStream bool) *accounting.Attempt {
	a := &accounting.Attempt{StartMs: st.Key.Start, Completed: st.Completed, SparkVersion: st.Version, Properties: st.Properties, Hadoop: st.Hadoop, Profiles: st.Profiles,
		Executors: executorList(st), StageTotals: st.StageTotals, Stream: st.Stream, StreamRead: withStream && st.StreamErr == ""}
	for _, id := range slices.SortedFunc(maps.Keys(st.Jobs), cmp.Compare[int]) {
		a.Jobs = append(a.Jobs, st.Jobs[id].Job)
	}
	for _, k := range slices.SortedFunc(maps.Keys(st.Stages), CompareStageKeys) {
		s := st.Stages[k]
		x := accounting.Stage{Stage: s.Stage, DetailsRead: s.Details != nil}
		if s.Details != nil {
			x.FailedTasks, x.KilledTasks = s.Details.Failed, s.Details.Killed
		}
		a.Stages = append(a.Stages, x)
	}
	return a
}

// Assess reads application appID from the sources of cfg, in order, as
// the annotator reads an attempt it syncs (jobs, stages, their details,
// executors, environment), reads its metrics from cfg.Stream, and returns
// the newest attempt's assessment from the first source that knows it.
// Templates are filled with appID.
func Assess(ctx context.Context, cfg Config, appID string) (Assessment, error) {
	cfg = cfg.WithDefaults()
	r := NewReader(cfg)
	var errs []error
	shown := false // a source answered with something other than "not here"
	for _, s := range cfg.Sources {
		base := strings.TrimRight(strings.ReplaceAll(s, "{app_id}", url.PathEscape(appID)), "/")
		a, err := assess(ctx, cfg, r, base, appID)
		if err == nil {
			return a, nil
		}
		errs = append(errs, err)
		shown = shown || !notShown(err)
	}
	if len(errs) == 0 {
		// The sources are the annotator's: its section names them.
		return Assessment{}, notShownError{errors.New("annotate: no Spark REST source")}
	}
	err := fmt.Errorf("application %s: %w", appID, errors.Join(errs...))
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
	return errors.Is(err, errNoAttempts) || errors.As(err, &fe) && (fe.Kind == sparkapi.KindNetwork || sparkapi.IsNotFound(err))
}

// assess reads appID's newest attempt from the source at base and
// assesses it.
func assess(ctx context.Context, cfg Config, r *Reader, base, appID string) (Assessment, error) {
	var app sparkapi.Application
	if err := r.Get(ctx, base+"/api/v1/applications/"+url.PathEscape(appID), &app); err != nil {
		return Assessment{}, err
	}
	if len(app.Attempts) == 0 {
		return Assessment{}, fmt.Errorf("%s: %w", base, errNoAttempts)
	}
	att := &app.Attempts[0] // Spark lists the newest first
	st := NewState(Key{app.ID, att.StartMs()})
	st.Refresh(base, &app, att)
	if err := r.Read(ctx, st, true); err != nil {
		return Assessment{}, err
	}
	now := cfg.Now()
	end := st.End
	if !st.Completed || end <= 0 {
		end = now.UnixMilli()
	}
	if cfg.Stream != nil && st.Properties != nil {
		// The annotator's window for the accounting.
		totals, err := ReadStream(ctx, cfg.Stream, cmp.Or(st.MetricsKey, st.Key.App),
			time.UnixMilli(st.Key.Start).Add(-time.Minute), time.UnixMilli(end).Add(cfg.UsageDelay))
		if err != nil {
			st.StreamErr = err.Error()
		}
		st.Stream = totals
	}
	a, res, err := Account(st, end, cfg.Stream != nil)
	u := res.Usage
	if err != nil {
		return Assessment{}, fmt.Errorf("application %s: %w", appID, err)
	}
	out := Application{ID: app.ID, Name: app.Name, AttemptID: att.AttemptID, Source: base,
		Properties: st.Properties, MetricsKey: cmp.Or(st.MetricsKey, st.Key.App), Start: time.UnixMilli(st.Key.Start)}
	if st.Completed && st.End > 0 {
		out.End = time.UnixMilli(st.End)
	}
	for _, id := range slices.SortedFunc(maps.Keys(st.Executors), accounting.CompareExecutorIDs) {
		out.Executors = append(out.Executors, accounting.ExecutorSizing(&st.Executors[id].Executor))
	}
	if st.StreamErr != "" {
		u.Notes = append(u.Notes, "metrics stream not read: "+st.StreamErr)
	}
	return Assessment{Application: out, Advice: a, Usage: u, Final: st.Completed}, nil
}

// executorList is the attempt's executors as Spark lists them, the driver
// first.
func executorList(st *State) []sparkapi.Executor {
	var execs []sparkapi.Executor
	for _, id := range slices.SortedFunc(maps.Keys(st.Executors), accounting.CompareExecutorIDs) {
		execs = append(execs, st.Executors[id].Executor)
	}
	return execs
}
