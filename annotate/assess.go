package annotate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

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

// assess runs the accounting and every sizing rule on what st holds of
// its attempt up to endMs, with the stream's totals screened first
// (plausible.go). withStream says whether a stream was configured, for
// the reconciliation that lost task time may come from.
func assess(st *appState, endMs int64, withStream bool) (sizing.Advice, sizing.Usage, []setAside, error) {
	s, r, err := settingsOf(st.properties)
	if err != nil {
		return sizing.Advice{}, sizing.Usage{}, nil, err
	}
	stream, aside := screen(st, st.stream, endMs, st.completed)
	execs := sizingExecutors(st, stream, endMs)
	a := sizing.Advise(s, execs)
	u := sizing.Account(s, r, execs, endMs-st.key.start)
	setAsideIn(&u, aside, st.stageTotals)
	if st.stageTotals != nil {
		u.SpilledBytes = st.stageTotals.memSpill
	}
	if st.completed {
		st.stageTotals.figures(&u, st.key.start, endMs)
		var rec *Reconciliation
		if withStream && st.streamErr == "" && st.stageTotals != nil {
			r := reconcile(executorList(st), *st.stageTotals, st.stream, aside)
			rec = &r
		}
		lostTasks(&u, st.stageTotals, failedTaskRunMs(st, st.stageTotals), rec)
	} else {
		// Running: the stages held so far, as the estimate reads them.
		currentStages(st).figures(&u, st.key.start, endMs)
	}
	u.Outcome, u.OutcomeReason = outcome(st)
	sizing.RightSize(&a, s, r, u, execs, failureReasons(st))
	return a, u, aside, nil
}

// settingsOf reads from an application's Spark properties the executor
// and application settings the accounting and the rules take.
func settingsOf(props map[string]string) (sizing.Settings, sizing.Resources, error) {
	s, err := sizing.FromProperties(props)
	if err != nil {
		return s, sizing.Resources{}, err
	}
	r, err := sizing.ResourcesFromProperties(props)
	return s, r, err
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
	for _, s := range p.cfg.Sources {
		base := strings.TrimRight(strings.ReplaceAll(s, "{app_id}", url.PathEscape(appID)), "/")
		a, err := p.assess(ctx, newSource(s, base, appID), appID)
		if err == nil {
			return a, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return Assessment{}, errors.New("annotate: no Spark REST source")
	}
	return Assessment{}, fmt.Errorf("application %s: %w", appID, errors.Join(errs...))
}

func (p *Poller) assess(ctx context.Context, src *source, appID string) (Assessment, error) {
	var app sparkapi.Application
	if err := p.get(ctx, src.base+"/api/v1/applications/"+url.PathEscape(appID), &app); err != nil {
		return Assessment{}, err
	}
	if len(app.Attempts) == 0 {
		return Assessment{}, fmt.Errorf("%s: no attempts", src.base)
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
	a, u, _, err := assess(st, end, p.cfg.Stream != nil)
	if err != nil {
		return Assessment{}, fmt.Errorf("application %s: %w", appID, err)
	}
	out := Application{ID: app.ID, Name: app.Name, AttemptID: att.AttemptID, Source: src.base,
		Properties: st.properties, MetricsKey: cmp.Or(st.metricsKey, st.key.app), Start: time.UnixMilli(st.key.start)}
	if st.completed && st.end > 0 {
		out.End = time.UnixMilli(st.end)
	}
	for _, id := range sortedKeys(st.executors, compareExecutorIDs) {
		out.Executors = append(out.Executors, executorSizing(&st.executors[id].Executor))
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
	for _, id := range sortedKeys(st.executors, compareExecutorIDs) {
		execs = append(execs, st.executors[id].Executor)
	}
	return execs
}

// discard is the sink of an assessment: it writes no points.
type discard struct{}

func (discard) Append([]byte, int, bool) bool { return true }
