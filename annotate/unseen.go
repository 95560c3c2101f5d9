package annotate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/influxdata/line-protocol/v2/lineprotocol"
	"go.uber.org/zap"

	"github.com/sparkpulse/sparkpulse/accounting"
	"github.com/sparkpulse/sparkpulse/attempt"
	"github.com/sparkpulse/sparkpulse/facts"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/sizing"
	"github.com/sparkpulse/sparkpulse/spark"
	"github.com/sparkpulse/sparkpulse/timespent"
)

// Applications only the stream shows. An application whose metrics arrive
// but that no source lists (its UI on a port no source names, no History
// Server, no event logs) would leave metrics and nothing else: no
// spark_app, no accounting, nothing in watch or report --fleet. So the
// poller keeps, for each metrics key the stream names (SeeApp), when it
// was first and last seen. Once a key has been quiet for CloseOutAfter,
// and no source has answered for it, it gets two facts, both fact
// stream:
//
//   - spark_app at its first report (+ phase), status UNKNOWN, ending at
//     its last report;
//   - spark_app_usage at its last report: what its metrics say
//     (accounting.StreamOnly), nothing held and no advice, as only
//     Spark's word gives cores and settings.
//
// A source answers for a key when it lists an attempt of the
// application (claim, by id; emit, by id and metrics key), or when an
// {app_id} template's instance answers 404 for the id: Spark's word that
// it runs no such application. Another failure (a template's instance
// that does not answer) is no answer: the id's polling is retired, and
// its stream still gets its facts. A key whose facts the ledger keeps
// (a source's, or the stream's before a restart) is answered for too.
//
// Anyone may write to the stream, so what it names is bounded: at most
// maxUnseen keys are kept (while the table is full, new keys are counted
// and not kept), and at most unseenPerRound are written per round, each
// with one read of the stream. A key answered for is not kept again for
// as long as the ledger keeps facts. The table is not kept across
// restarts: a key quiet when sparkpulse stops gets no facts. Facts the
// sink refuses as it closes are written at the next start from the
// journal, where there is a state directory (package facts), and are lost
// where there is none.

const (
	// maxUnseen bounds the metrics keys kept as seen only in the stream.
	maxUnseen = 4096
	// unseenPerRound bounds the keys written per round.
	unseenPerRound = 8
)

// unseenApp is a metrics key that no source has shown.
type unseenApp struct {
	first, last time.Time
	// A failed read of the stream is retried, with backoff, for
	// StreamRetry, as an ended application's accounting is.
	tries         int
	failed, retry time.Time
}

// seenInStream notes a metrics key the stream names. Called with mu held.
func (p *Poller) seenInStream(key string) {
	if _, ok := p.answered[key]; ok {
		return
	}
	now := p.cfg.Now()
	if u := p.unseen[key]; u != nil {
		u.last = now
		return
	}
	if len(p.unseen) >= maxUnseen {
		p.stats.unseenFull.Add(1)
		return
	}
	p.unseen[key] = &unseenApp{first: now, last: now}
}

// markShown notes that a source showed the attempt: neither its id nor
// its metrics key is written as seen only in the stream.
func (p *Poller) markShown(st *appState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answerLocked(st.Key.App)
	p.answerLocked(st.MetricsKey)
}

// answerLocked notes that a source answered for key (see above). Called
// with mu held.
func (p *Poller) answerLocked(key string) {
	if key != "" {
		p.answered[key] = p.cfg.Now()
		delete(p.unseen, key)
	}
}

// closeOutUnseen writes the keys quiet for CloseOutAfter, the longest
// quiet first, at most unseenPerRound of them, and forgets what the
// ledger no longer keeps.
func (p *Poller) closeOutUnseen(ctx context.Context, now time.Time) {
	type due struct {
		key string
		u   unseenApp
	}
	var list []due
	p.mu.Lock()
	for k, u := range p.unseen {
		if now.Sub(u.last) >= p.cfg.CloseOutAfter && !now.Before(u.retry) {
			list = append(list, due{k, *u})
		}
	}
	forget := now.Add(-p.factsKept()) // as long as the ledger keeps facts
	maps.DeleteFunc(p.answered, func(_ string, t time.Time) bool { return t.Before(forget) })
	p.mu.Unlock()
	list = slices.DeleteFunc(list, func(d due) bool {
		if !p.facts.Holds(d.key) {
			return false
		}
		p.mu.Lock()
		p.answerLocked(d.key)
		p.mu.Unlock()
		return true
	})
	slices.SortFunc(list, func(a, b due) int { return cmp.Or(a.u.last.Compare(b.u.last), strings.Compare(a.key, b.key)) })
	for _, d := range list[:min(len(list), unseenPerRound)] {
		u := d.u
		totals, streamErr := p.unseenStream(ctx, d.key, &u, now)
		if streamErr == errRetry {
			p.mu.Lock()
			if cur := p.unseen[d.key]; cur != nil && cur.last.Equal(d.u.last) {
				*cur = u
			}
			p.mu.Unlock()
			continue
		}
		p.mu.Lock()
		cur := p.unseen[d.key]
		if cur == nil || !cur.last.Equal(d.u.last) {
			p.mu.Unlock()
			continue // seen again, or shown, meanwhile
		}
		p.answerLocked(d.key)
		p.mu.Unlock()
		usage := accounting.StreamOnly(totals, u.first.UnixMilli(), u.last.UnixMilli())
		if streamErr != nil {
			usage.Notes = append(usage.Notes, "the metrics stream could not be read: "+streamErr.Error())
		}
		n, ok := p.emitUnseen(d.key, u, usage)
		if !ok {
			// The sink is closing: kept for a next round, if any.
			p.mu.Lock()
			delete(p.answered, d.key)
			if _, again := p.unseen[d.key]; !again {
				p.unseen[d.key] = &u
			}
			p.mu.Unlock()
			continue
		}
		p.stats.unseenWritten.Add(1)
		p.log.Warn("Spark application seen only in its metrics: no source showed it; written with what its metrics say",
			zap.String("metrics_key", d.key), zap.Time("first_report", u.first), zap.Time("last_report", u.last), zap.Int("points", n))
	}
}

// errRetry: the read of the stream failed and is retried later.
var errRetry = errors.New("retry")

// unseenStream reads the stream of a key over its reports: nil without a
// Stream; errRetry (u updated) while a failing read is retried; the error
// once StreamRetry has passed.
func (p *Poller) unseenStream(ctx context.Context, key string, u *unseenApp, now time.Time) (map[string]ProcessTotals, error) {
	if p.cfg.Stream == nil {
		return nil, nil
	}
	var totals map[string]ProcessTotals
	var err error
	if d, ok := p.cfg.Stream.(deliverer); ok && !d.Delivered(u.last) {
		err = errNotDelivered
	} else {
		totals, err = p.readStream(ctx, key, u.first.Add(-time.Minute), u.last.Add(time.Minute))
	}
	if err == nil {
		return totals, nil
	}
	if u.tries == 0 {
		u.failed = now
	}
	u.tries++
	if now.Sub(u.failed) >= p.cfg.StreamRetry {
		return nil, fmt.Errorf("%w (failing for %s)", err, now.Sub(u.failed).Round(time.Second))
	}
	u.retry = now.Add(min(p.cfg.Interval<<min(u.tries-1, 16), maxBackoff))
	p.log.Warn("metrics stream not read for an application seen only in its metrics", zap.String("metrics_key", key),
		zap.Int("tries", u.tries), zap.Error(err))
	return nil, errRetry
}

// emitUnseen writes a key's stream facts (see above) and returns the
// number of points written; false when the sink, closing, took none.
func (p *Poller) emitUnseen(key string, u unseenApp, usage sizing.Usage) (int, bool) {
	lock := &p.emitLocks[maphash.String(p.emitSeed, key)%emitStripes]
	lock.Lock()
	defer lock.Unlock()
	first, last := u.first.UnixMilli(), u.last.UnixMilli()
	st := newAppState(attempt.Key{App: key, Start: first})
	w := &points{p: p, st: st, now: p.cfg.Now(), snaps: map[string]facts.Snapshot{}}
	w.enc.SetPrecision(lineprotocol.Nanosecond)
	id := ""
	if spark.IsAppID([]byte(key)) {
		id = key
	}
	if w.begin(schema.MeasurementApp, factTime(first, 0, phaseStream)) {
		w.str(schema.FieldStatus, statusUnknown)
		w.str(schema.FieldAppID, id)
		w.int(schema.FieldEndMs, last)
		w.int(schema.FieldDurationMs, last-first)
		w.common(phaseStream, key+" seen only in its metrics",
			joinText(timespent.Duration(last-first)+" of reports", "no Spark REST source showed it"))
		w.end()
	}
	if w.begin(schema.MeasurementUsage, last*1_000_000+phaseStream) {
		w.str(schema.FieldFact, phaseNames[phaseStream])
		w.str(schema.FieldAppID, id)
		w.int(schema.UsageDurationMs, usage.DurationMs)
		w.int(schema.UsageExecutors, int64(usage.Executors))
		if usage.CPUFrom != "" {
			w.float(schema.UsageTaskCPUSeconds, usage.TaskCPUSeconds)
			w.float(schema.UsageTaskRunSeconds, usage.TaskRunSeconds)
			w.float(schema.UsageCPUUsedSeconds, usage.CPUUsedSeconds)
			w.str(schema.UsageCPUFrom, usage.CPUFrom)
		}
		w.float(schema.UsageGCSeconds, usage.GCSeconds)
		if usage.TaskRunSeconds > 0 {
			w.float(schema.UsageGCShare, usage.GCSeconds/usage.TaskRunSeconds)
		}
		if usage.PeakRSS > 0 {
			w.int(schema.UsagePeakRSSBytes, usage.PeakRSS)
		}
		if usage.MeanRSS > 0 {
			w.int(schema.UsageMeanRSSBytes, usage.MeanRSS)
		}
		if usage.PeakPythonRSS > 0 {
			w.int(schema.UsagePeakPythonRSSBytes, usage.PeakPythonRSS)
		}
		w.str(schema.UsageOutcome, usage.Outcome)
		w.str(schema.UsageOutcomeReason, usage.OutcomeReason)
		w.str(schema.UsageNotes, w.reason(strings.Join(usage.Notes, "; ")))
		w.str(schema.FieldTitle, w.text("Usage of "+key+", seen only in its metrics"))
		w.str(schema.FieldText, w.reason(streamOnlyText(usage)))
		if w.end() {
			w.history()
		}
	}
	return p.deliver(st, w)
}

// streamOnlyText is the usage fact's text.
func streamOnlyText(u sizing.Usage) string {
	parts := []string{fmt.Sprintf("%d executors reported for %s", u.Executors, timespent.Duration(u.DurationMs))}
	if u.CPUFrom != "" {
		parts = append(parts, fmt.Sprintf("task CPU %.1f s of %.1f s run", u.TaskCPUSeconds, u.TaskRunSeconds))
	}
	if u.PeakRSS > 0 {
		parts = append(parts, "peak resident "+sizing.Bytes(u.PeakRSS))
	}
	return joinText(append(parts, "what its metrics say; no source vouches for it")...)
}
