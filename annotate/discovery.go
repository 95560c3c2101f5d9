package annotate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/sparkpulse/sparkpulse/spark"
	"github.com/sparkpulse/sparkpulse/sparkapi"
)

// Discovery: which application ids fill the {app_id} templates.
//
// The ids come from the metrics stream, which anyone who can reach the
// Graphite port writes to (over UDP, from any address), so an id must not
// steer sparkpulse's requests, nor grow its memory or goroutines:
//
//   - Only an id of Spark's own shapes (spark.IsAppID) fills a template,
//     escaped for the part of the URL it lands in; in the host, the label
//     it completes must be a valid DNS label. Others are refused.
//   - Ids seen between two polls are nominated, counted by how often they
//     are seen (relay nominates at most a few per block of lines, so that
//     one connection cannot nominate thousands); the table keeps the most
//     seen ones (Space-Saving). At each poll the NewAppsPerPoll most seen
//     are admitted, while fewer than MaxApps are polled; the others are
//     refused for now and may be nominated again. A genuine application,
//     seen from each of its processes every period, outranks ids that are
//     sent once.
//   - An admitted application's first answer decides: a 404 (Spark knows
//     no such application) or two failed polls retire it, and a retired id
//     is not admitted again for giveUp.
//   - A bounded pool of workers polls every source: goroutines do not
//     grow with the number of sources (at most maxWorkers), and slow
//     sources do not take the fast ones' turns (startWorkers).
//
// Refusals are counted by reason (Stats.Refused), not logged per id.

// maxNominees bounds the ids nominated between two polls.
const maxNominees = 512

// Refusal reasons, the label of the counter.
const (
	refusedShape     = "shape"      // not a Spark application id
	refusedHostLabel = "host_label" // not a valid DNS label where {app_id} is in the host
	refusedRate      = "rate"       // more new applications than new-apps-per-poll
	refusedCap       = "cap"        // max-apps applications are polled already
	refusedRetired   = "retired"    // not found, or unanswered, less than giveUp ago
)

// template is a source URL with {app_id}, and where the id goes.
type template struct {
	raw string
	// In the host: the rest of the DNS label around the id, which the
	// label as a whole must satisfy.
	hostLabel                bool
	labelPrefix, labelSuffix string
}

// dnsLabel is a host name label (RFC 1123), lower case as Spark's ids are.
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// parseTemplate finds where {app_id} is in a checked source URL.
func parseTemplate(raw string) template {
	t := template{raw: raw}
	_, rest, _ := strings.Cut(raw, "://")
	host, _, _ := strings.Cut(rest, "/")
	if i := strings.Index(host, "{app_id}"); i >= 0 {
		t.hostLabel = true
		before, after := host[:i], host[i+len("{app_id}"):]
		t.labelPrefix = before[strings.LastIndexByte(before, '.')+1:]
		if j := strings.IndexAny(after, ".:"); j >= 0 {
			after = after[:j]
		}
		t.labelSuffix = after
	}
	return t
}

// fill makes the template's URL for an application, or says why it
// cannot.
func (t template) fill(id string) (string, error) {
	if t.hostLabel {
		if !dnsLabel.MatchString(t.labelPrefix + id + t.labelSuffix) {
			return "", errors.New(refusedHostLabel)
		}
		return strings.ReplaceAll(t.raw, "{app_id}", id), nil
	}
	return strings.ReplaceAll(t.raw, "{app_id}", url.PathEscape(id)), nil
}

// SeeApp tells the poller that metrics of application id arrive, so that
// the {app_id} templates may be polled for it (see Discovery above). It is
// cheap once an id is known.
func (p *Poller) SeeApp(id string) {
	if id == "" || len(p.templates) == 0 && len(p.static) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.wakeFor(id)
	p.seenInStream(id)
	p.streamNamedLocked(id, p.cfg.Now())
	if len(p.templates) == 0 {
		return
	}
	if _, ok := p.perApp[id]; ok {
		return
	}
	if _, ok := p.nominees[id]; ok {
		p.nominees[id]++
		return
	}
	if !spark.IsAppID([]byte(id)) {
		p.refused[refusedShape]++
		return
	}
	fits := 0
	for _, t := range p.templates {
		if _, err := t.fill(id); err != nil {
			p.refused[err.Error()]++
		} else {
			fits++
		}
	}
	if fits == 0 {
		return
	}
	if t, ok := p.retired[id]; ok && p.cfg.Now().Sub(t) < giveUp {
		p.refused[refusedRetired]++
		return
	}
	p.nominate(id)
}

// maxWoken bounds the application ids remembered as having woken the
// configured sources; past it they are forgotten and may wake them again.
const maxWoken = 4096

// wakeFor has the next round poll the failing configured sources when id
// is new: a source backing off from failures (up to maxBackoff) would
// miss an application that starts and ends inside the wait. Any id may
// wake them, as the stream may name applications by their name
// (spark.metrics.namespace), which is not a Spark id: a flood of ids
// costs at most one poll of each failing source per round, as polling
// them at the interval would. Called with mu held.
func (p *Poller) wakeFor(id string) {
	if len(p.static) == 0 {
		return
	}
	if _, ok := p.woken[id]; ok {
		return
	}
	if len(p.woken) >= maxWoken {
		clear(p.woken)
	}
	p.woken[id] = struct{}{}
	p.wake = true
}

// nominate counts id as seen, keeping the most seen ones: when the table
// is full, the least seen is replaced, and the newcomer takes its count
// plus one (Space-Saving), so that an id seen often enough is never lost.
// Called with mu held.
func (p *Poller) nominate(id string) {
	if len(p.nominees) < maxNominees {
		p.nominees[id] = 1
		return
	}
	least, n := "", 0
	for k, c := range p.nominees {
		if least == "" || c < n {
			least, n = k, c
		}
	}
	delete(p.nominees, least)
	p.nominees[id] = n + 1
}

// admit starts polling the templates for the most seen nominees, within
// NewAppsPerPoll and MaxApps, and forgets the rest until they are seen
// again. Called with mu held, once per poll.
func (p *Poller) admit() {
	ids := make([]string, 0, len(p.nominees))
	for id := range p.nominees {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int {
		return cmp.Or(cmp.Compare(p.nominees[b], p.nominees[a]), strings.Compare(a, b))
	})
	for i, id := range ids {
		switch {
		case len(p.perApp) >= p.cfg.MaxApps:
			p.refused[refusedCap]++
		case i >= p.cfg.NewAppsPerPoll:
			p.refused[refusedRate]++
		default:
			var list []*source
			for _, t := range p.templates {
				if base, err := t.fill(id); err == nil { // a template the id does not fit is left out
					list = append(list, newSource(t.raw, base, id))
				}
			}
			p.perApp[id] = list
		}
	}
	clear(p.nominees)
	now := p.cfg.Now()
	for id, t := range p.retired {
		if now.Sub(t) >= giveUp {
			delete(p.retired, id)
		}
	}
}

// unproven reports whether a failure of a template instance that never
// answered should retire its application: Spark answers 404 for an
// application it does not know, and an answer about another application
// is no answer about this one; anything else is given a second poll.
func unproven(s *source, err error) bool {
	wrong := errorKind(err) == kindWrongApp
	return s.appID != "" && !s.listed && (sparkapi.IsNotFound(err) || wrong || s.failures >= 2)
}

// yarnVouches reports whether the ResourceManager behind a YARN proxy
// template's instance that never answered says it runs the application,
// or is about to. Its proxy answers such an application's requests with
// a redirect to YARN's own page while it waits for a container
// (ACCEPTED), and with the driver UI's 404 or a long wait while that UI
// comes up; neither is a sign of an id that no one runs, which YARN does
// not know (404).
func (p *Poller) yarnVouches(ctx context.Context, s *source) bool {
	if s.rm == "" || s.appID == "" {
		return false
	}
	var a sparkapi.YARNApplication
	if err := p.get(ctx, s.rm+"/ws/v1/cluster/apps/"+url.PathEscape(s.appID), &a); err != nil {
		return false
	}
	return a.App.ID == s.appID && a.Starting()
}

// checkTemplate validates the {app_id} placement of a source URL.
func checkTemplate(s string) error {
	t := parseTemplate(s)
	if !t.hostLabel {
		return nil
	}
	if !dnsLabel.MatchString(t.labelPrefix + "spark-0123456789abcdef0123456789abcdef" + t.labelSuffix) {
		return fmt.Errorf("{app_id} in the host makes the DNS label %q, invalid even for a Kubernetes application id",
			t.labelPrefix+"{app_id}"+t.labelSuffix)
	}
	return nil
}
