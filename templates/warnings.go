package templates

import (
	"fmt"
	"strings"
)

// Warnings lists what in the template list will not do what it seems to,
// in template order:
//
//   - paths that a filter matches, and that no more specific filter
//     matches, but that the filter tree sends elsewhere, because InfluxDB
//     1.x does not backtrack out of a literal branch or because a "*" node
//     took its template before this filter was added;
//   - templates that fail on every line ("measurement*" with "field*"),
//     template parts after "measurement*" or "field*", and entries whose
//     fields influxd reads in a surprising way.
//
// "More specific" compares filters section by section: a literal beats
// "*", which beats a filter that has ended. The tree check probes one path
// per branch of the tree that a filter's paths can take, so it finds every
// such path.
func (e *Engine) Warnings() []string {
	var out []string
	fresh := e.freshToken()
	for _, t := range e.tmpls {
		head := fmt.Sprintf("template %d %q: ", t.index+1, t.entry)
		for _, n := range t.notes {
			out = append(out, head+n)
		}
		if t.bothErr != nil {
			out = append(out, head+"every line it selects fails: "+t.bothErr.Error())
		} else if len(t.ignored) > 0 {
			out = append(out, head+fmt.Sprintf("parts after %q are never used: %s",
				strings.Split(t.pattern, ".")[t.star], strings.Join(t.ignored, ", ")))
		}
		if t.filter == "" {
			continue
		}
		p := prober{e: e, t: t, own: strings.Split(t.filter, "."), fresh: fresh, seen: map[string]bool{}}
		p.walk(e.root, -1, 0, nil, nil)
		for _, w := range p.out {
			out = append(out, head+w)
		}
	}
	return out
}

// freshToken returns a path part equal to no filter section, to stand for
// "any other value".
func (e *Engine) freshToken() string {
	tok := "\x00"
	for {
		clash := false
		for _, t := range e.tmpls {
			for _, s := range strings.Split(t.filter, ".") {
				clash = clash || s == tok
			}
		}
		if !clash {
			return tok
		}
		tok += "\x00"
	}
}

// divergence is where a probe path leaves the nodes of the filter under
// test.
type divergence struct {
	what    string // `"foo" at part 3` or `more than 4 parts`
	creator int    // template whose filter created the node it went to
	literal bool   // the search stepped into a literal node at or after it
}

type prober struct {
	e     *Engine
	t     *template
	own   []string
	fresh string
	seen  map[string]bool
	out   []string
}

// walk extends a probe path that t's filter matches by one part, for every
// branch of the tree the next part can lead to. n is the search's node, or
// nil once the search has ended with template end. div is nil while the
// search is still on t's own nodes.
func (p *prober) walk(n *node, end, depth int, parts []string, div *divergence) {
	if n != nil && n.leaf() {
		n, end = nil, n.tmpl
	}
	if depth >= len(p.own) {
		got := end
		if n != nil {
			got = n.tmpl
		}
		p.check(parts, got, div)
		if n == nil {
			return // longer paths end the same way
		}
	}
	var choices []string
	switch {
	case depth < len(p.own) && p.own[depth] != "*":
		choices = []string{p.own[depth]}
	case n != nil:
		for _, c := range n.lits {
			choices = append(choices, c.label)
		}
		choices = append(choices, p.fresh)
	default:
		choices = []string{p.fresh}
	}
	for _, x := range choices {
		next, nend, ndiv := n, end, div
		if n != nil {
			next = n.step([]byte(x))
			if next == nil {
				nend = n.tmpl
			}
			if ndiv == nil && next != nil && (depth >= len(p.own) || next.label != p.own[depth]) {
				what := fmt.Sprintf("%q at part %d", x, depth+1)
				if x == p.fresh {
					what = fmt.Sprintf("more than %d parts", depth)
				}
				ndiv = &divergence{what: what, creator: next.creator}
			}
			if ndiv != nil && next != nil && next.label != "*" && !ndiv.literal {
				d := *ndiv
				d.literal = true
				ndiv = &d
			}
		}
		if depth >= len(p.own) && next == nil {
			continue // the same as ending here, checked above
		}
		p.walk(next, nend, depth+1, append(parts[:len(parts):len(parts)], x), ndiv)
	}
}

// check records a warning when the path should get t (its most specific
// matching filter is t's) but the tree gives it template got.
func (p *prober) check(parts []string, got int, div *divergence) {
	if got == p.t.index || div == nil || p.e.mostSpecific(parts) != p.t.index {
		return
	}
	instead := "the default template"
	if got >= 0 {
		instead = p.e.tmpls[got].ref()
	}
	reason := "InfluxDB 1.x does not backtrack"
	if !div.literal {
		reason = fmt.Sprintf("a `*` node copies its parent's template only when created, and template %d created this branch first; list this template before it", div.creator+1)
	}
	w := fmt.Sprintf("paths with %s go to the branch of %s and get %s instead (%s)",
		div.what, p.e.tmpls[div.creator].ref(), instead, reason)
	if !p.seen[w] {
		p.seen[w] = true
		p.out = append(p.out, w)
	}
}

// mostSpecific returns the template whose filter best matches parts, -1 if
// none does. Filters are compared section by section: literal beats "*"
// beats ended. Two different valid filters cannot tie on a path they both
// match.
func (e *Engine) mostSpecific(parts []string) int {
	best, bestSecs := -1, []string(nil)
	rank := func(secs []string, i int) int {
		switch {
		case i >= len(secs):
			return 0
		case secs[i] == "*":
			return 1
		}
		return 2
	}
	for _, t := range e.tmpls {
		if t.filter == "" {
			continue
		}
		secs := strings.Split(t.filter, ".")
		if len(secs) > len(parts) {
			continue
		}
		ok := true
		for i, s := range secs {
			ok = ok && (s == "*" || s == parts[i])
		}
		if !ok {
			continue
		}
		better := best < 0
		for i := 0; !better && i < len(parts); i++ {
			if a, b := rank(secs, i), rank(bestSecs, i); a != b {
				better = a > b
				break
			}
		}
		if better {
			best, bestSecs = t.index, secs
		}
	}
	return best
}

// Describe returns one line per template, then the separator, the default
// template in effect and the global tags, for humans checking a config.
func (e *Engine) Describe() []string {
	var out []string
	for _, t := range e.tmpls {
		line := fmt.Sprintf("template %d: ", t.index+1)
		if t.filter == "" {
			line += "default (no filter)"
		} else {
			line += fmt.Sprintf("filter %q", t.filter)
		}
		line += fmt.Sprintf(", template %q", t.pattern)
		if len(t.tags) > 0 {
			line += ", tags " + formatTags(t.tags)
		}
		out = append(out, line)
	}
	out = append(out, fmt.Sprintf("separator %q", e.sep))
	if e.def.index < 0 {
		out = append(out, `default template in effect: built-in "measurement*" (joins with "." whatever the separator)`)
	} else {
		out = append(out, fmt.Sprintf("default template in effect: template %d %q", e.def.index+1, e.def.pattern))
	}
	if len(e.global) > 0 {
		out = append(out, "global tags (for keys a template does not produce): "+formatTags(e.global))
	}
	return out
}

func formatTags(tags []Tag) string {
	var b strings.Builder
	for i, t := range tags {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%s", t.Key, t.Value)
	}
	return b.String()
}
