package annotate

import (
	"fmt"
	"time"

	"go.uber.org/zap"
)

// A driver that dies (killed, crashed, its host lost) leaves its event log
// incomplete: a History Server lists the attempt as running for ever, and
// the application would stay running in every fact. Its live UI going is
// not enough to tell death from a network that no longer reaches it, nor
// is a quiet event log (an idle driver writes nothing). The attempt is
// closed out as lost (outcome driver_lost) when all three agree:
//
//   - a live UI that showed it running stopped answering, or stopped
//     listing it, while it ran: the drop (whichever source syncs it: a
//     History Server often lists a new attempt first, and the live UI is
//     then its second source);
//   - the source that syncs it is a History Server whose event log of it
//     has not changed since (lastUpdated at most the drop): a driver that
//     lives writes its jobs' and stages' events there;
//   - for CloseOutAfter since the drop, and for the last half of it, no
//     metrics named it: a driver that lives reports every period
//     (spark.metrics.conf's period), and its executors die with it.
//
// A metrics line naming it keeps it running (the stream is spoofable, so
// it may only veto: at worst an application stays running as before). It
// is closed out with what it held until the live UI last showed it.

// drop is when a live UI lost a running attempt, and when it last showed
// it; keys are the stream keys watched for it.
type drop struct {
	at, seenUntil time.Time
	keys          []string
}

// liveSecond is a live UI that lists an attempt another source syncs, and
// when it last did.
type liveSecond struct {
	src *source
	at  time.Time
}

// maxWatched bounds the attempts watched (drops, and live UIs seconding
// another source).
const maxWatched = 2048

// isLive reports whether a listing's attempt is a running one as a live
// UI lists it: a live UI reports the start time as lastUpdated, where a
// History Server reports its event log's modification time.
func isLive(completed bool, startMs, updatedMs int64) bool {
	return !completed && updatedMs == startMs
}

// secondedLive notes that live UI s lists the running attempt key that
// another source syncs.
func (p *Poller) secondedLive(s *source, key appKey, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.liveSeconds[key]; ok || len(p.liveSeconds) < maxWatched {
		p.liveSeconds[key] = liveSecond{s, now}
	}
}

// dropSecondsLocked drops the attempts live UI s seconded and no longer
// shows: all of them when it stopped answering (listed nil), else those
// it did not list. Called with mu held.
func (p *Poller) dropSecondsLocked(s *source, listed map[appKey]bool, now time.Time) {
	for key, ls := range p.liveSeconds {
		if ls.src == s && !listed[key] {
			delete(p.liveSeconds, key)
			p.dropLocked(key, now, ls.at)
		}
	}
}

// dropLocked notes that a live UI lost the running attempt key at now,
// having last shown it at seenUntil, and watches the stream for its id.
// A full watch list leaves it running, as without the rule. Called with
// mu held.
func (p *Poller) dropLocked(key appKey, now, seenUntil time.Time) {
	if _, ok := p.drops[key]; ok || len(p.drops) >= maxWatched {
		return
	}
	p.drops[key] = &drop{at: now, seenUntil: seenUntil}
	p.watchLocked(p.drops[key], key.app)
}

func (p *Poller) watchLocked(d *drop, k string) {
	if k == "" {
		return
	}
	if _, ok := p.watched[k]; !ok {
		p.watched[k] = time.Time{}
		d.keys = append(d.keys, k)
	}
}

// forgetLocked forgets what was noted of the attempt here. Called with mu
// held.
func (p *Poller) forgetLocked(key appKey) {
	if d := p.drops[key]; d != nil {
		for _, k := range d.keys {
			delete(p.watched, k)
		}
	}
	delete(p.drops, key)
	delete(p.liveSeconds, key)
}

// streamNamedLocked notes a metrics line naming key, if it is watched.
// Called with mu held.
func (p *Poller) streamNamedLocked(key string, now time.Time) {
	if _, ok := p.watched[key]; ok {
		p.watched[key] = now
	}
}

// driverGone returns the drop of an attempt, as its syncing source lists
// it, whose driver is gone (see above); nil otherwise. It forgets the drop
// when the attempt completed, or the driver shows it lives: a live UI
// syncs it again, or its event log moved.
func (p *Poller) driverGone(st *appState, now time.Time) *drop {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := p.drops[st.key]
	switch {
	case d == nil:
		return nil
	case st.completed || st.updated == st.key.start || st.updated > d.at.UnixMilli():
		p.forgetLocked(st.key)
		return nil
	}
	p.watchLocked(d, st.metricsKey)
	if now.Sub(d.at) < p.cfg.CloseOutAfter {
		return nil
	}
	var last time.Time
	for _, k := range d.keys {
		if t := p.watched[k]; t.After(last) {
			last = t
		}
	}
	if now.Sub(last) < p.cfg.CloseOutAfter/2 {
		return nil
	}
	return d
}

// closeOutGone writes the attempt's running items as lost, at when its
// live UI last showed it, with outcome driver_lost, and lets s forget it
// while s lists it unchanged.
func (p *Poller) closeOutGone(s *source, key appKey, st *appState, d *drop, now time.Time) {
	st.goneWhy = fmt.Sprintf("its live UI stopped answering at %s while it ran, its event log (as %s lists it) has not changed since, and no metrics named it for %s: the driver was lost (crashed or killed)",
		d.at.UTC().Format(time.RFC3339), s.name, now.Sub(d.at).Round(time.Second))
	n := p.emit(st, d.seenUntil, true)
	p.stats.closedOut.Add(1)
	p.log.Warn("Spark application closed out: its live UI went while it ran, its event log stopped and its metrics stopped; its running items are written as UNKNOWN",
		zap.String("application", key.String()), zap.String("source", s.name), zap.Time("dropped", d.at), zap.Int("points", n))
	p.finish(s, key, st.end)
}
