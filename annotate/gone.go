package annotate

import (
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/sparkpulse/sparkpulse/attempt"
)

// A driver that dies (killed, crashed, its host lost) leaves its event log
// incomplete: a History Server lists the attempt as running for ever, and
// the application would stay running in every fact. Its live UI going is
// not enough to tell death from a network that no longer reaches it, nor
// is a quiet event log (an idle driver writes nothing). The attempt is
// closed out as lost (outcome driver_lost) when all three agree for
// LostDriverAfter:
//
//   - a live UI that showed it running stopped answering, or stopped
//     listing it, while it ran: the drop (whichever source syncs it: a
//     History Server often lists a new attempt first, and the live UI is
//     then its second source);
//   - the source that syncs it is a History Server whose listing of it has
//     not changed since: a History Server lists a running attempt's
//     lastUpdated as when it last read the event log, which it does again
//     only when the log changed, and a driver that lives writes its jobs'
//     and stages' events there. A change restarts the wait (a History
//     Server restarting reads every log again);
//   - for the last half of the wait, no metrics named it: a driver that
//     lives reports every period (spark.metrics.conf's period), and its
//     executors die with it.
//
// A live UI that lists it again forgets the drop. A metrics line naming it
// keeps it running (the stream is spoofable, so it may only veto: at
// worst an application stays running as before). It is closed out with
// what it held until the live UI last showed it.

// drop is when a live UI lost a running attempt, and when it last showed
// it; since is when the wait began (the drop, or the syncing source's
// listing changing: updated); keys are the stream keys watched for it.
type drop struct {
	at, seenUntil, since time.Time
	updated              int64
	keys                 []string
}

// liveSecond is a live UI that lists an attempt another source syncs, and
// when it last did.
type liveSecond struct {
	src *source
	at  time.Time
}

// watch is when the stream last named a watched key (zero: not since it
// was watched), and how many drops watch it.
type watch struct {
	last time.Time
	refs int
}

// maxWatched bounds the attempts watched (drops, and live UIs seconding
// another source).
const maxWatched = 2048

// isLive reports whether a listing's attempt is a running one as a live
// UI lists it: a live UI reports the start time as lastUpdated, where a
// History Server reports when it last read the event log.
func isLive(completed bool, startMs, updatedMs int64) bool {
	return !completed && updatedMs == startMs
}

// secondedLive notes that live UI s lists the running attempt key that
// another source syncs: it lives, whatever was dropped of it.
func (p *Poller) secondedLive(s *source, key attempt.Key, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drops[key] != nil {
		p.forgetLocked(key)
	}
	if _, ok := p.liveSeconds[key]; ok || len(p.liveSeconds) < maxWatched {
		p.liveSeconds[key] = liveSecond{s, now}
	}
}

// dropSecondsLocked drops the attempts live UI s seconded and no longer
// shows: all of them when it stopped answering (listed nil), else those
// it did not list. Called with mu held.
func (p *Poller) dropSecondsLocked(s *source, listed map[attempt.Key]bool, now time.Time) {
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
func (p *Poller) dropLocked(key attempt.Key, now, seenUntil time.Time) {
	if _, ok := p.drops[key]; ok || len(p.drops) >= maxWatched {
		return
	}
	d := &drop{at: now, seenUntil: seenUntil, since: now, updated: -1}
	p.drops[key] = d
	p.watchLocked(d, key.App)
}

func (p *Poller) watchLocked(d *drop, k string) {
	if k == "" || slices.Contains(d.keys, k) {
		return
	}
	w := p.watched[k]
	if w == nil {
		w = &watch{}
		p.watched[k] = w
	}
	w.refs++
	d.keys = append(d.keys, k)
}

// forgetLocked forgets what was noted of the attempt here. Called with mu
// held.
func (p *Poller) forgetLocked(key attempt.Key) {
	if d := p.drops[key]; d != nil {
		for _, k := range d.keys {
			if w := p.watched[k]; w != nil {
				if w.refs--; w.refs <= 0 {
					delete(p.watched, k)
				}
			}
		}
	}
	delete(p.drops, key)
	delete(p.liveSeconds, key)
}

// streamNamedLocked notes a metrics line naming key, if it is watched.
// Called with mu held.
func (p *Poller) streamNamedLocked(key string, now time.Time) {
	if w := p.watched[key]; w != nil {
		w.last = now
	}
}

// driverGone returns the drop of an attempt, as its syncing source lists
// it, whose driver is gone (see above); nil otherwise. It forgets the drop
// when the attempt completed or a live UI syncs it again, and restarts
// the wait when the listing changed.
func (p *Poller) driverGone(st *appState, now time.Time) *drop {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := p.drops[st.Key]
	switch {
	case d == nil:
		return nil
	case st.Completed || st.Updated == st.Key.Start:
		p.forgetLocked(st.Key)
		return nil
	case st.Updated != d.updated:
		if d.updated >= 0 {
			d.since = now // the event log was read again
		}
		d.updated = st.Updated
	}
	p.watchLocked(d, st.MetricsKey)
	if now.Sub(d.since) < p.cfg.LostDriverAfter {
		return nil
	}
	var last time.Time
	for _, k := range d.keys {
		if w := p.watched[k]; w != nil && w.last.After(last) {
			last = w.last
		}
	}
	if now.Sub(last) < p.cfg.LostDriverAfter/2 {
		return nil
	}
	return d
}

// closeOutGone writes the attempt's running items as lost, at when its
// live UI last showed it, with outcome driver_lost, and lets s forget it
// while s lists it unchanged.
func (p *Poller) closeOutGone(s *source, key attempt.Key, st *appState, d *drop, now time.Time) {
	st.goneWhy = fmt.Sprintf("its live UI stopped answering at %s while it ran, %s has not read its event log again since %s, and no metrics named it for %s: the driver was lost (crashed or killed)",
		d.at.UTC().Format(time.RFC3339), s.name, d.since.UTC().Format(time.RFC3339), (p.cfg.LostDriverAfter / 2).Round(time.Second))
	n := p.emit(st, d.seenUntil, true)
	p.stats.closedOut.Add(1)
	p.log.Warn("Spark application closed out: its live UI went while it ran, its event log stopped and its metrics stopped; its running items are written as UNKNOWN",
		zap.String("application", key.String()), zap.String("source", s.name), zap.Time("dropped", d.at), zap.Int("points", n))
	p.finish(s, key, st.End)
}
