package delta

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// Rule says whether the series whose Graphite path or measurement matches
// one of its patterns are cumulative. See the package documentation for the
// pattern syntax.
type Rule struct {
	Path        []string // patterns on the Graphite path
	Measurement []string // patterns on the measurement (a rule matches when any Path or any Measurement pattern matches)
	Cumulative  bool     // false makes the rule an exception
	Unit        string   // informative, e.g. "ns", "ms", "bytes"
	Source      string   // where the rule came from, for error messages, e.g. `[[delta]] #2` or "built-in Spark rules"
}

// Rules are compiled rules; see [CompileRules]. They are read-only, so safe
// for concurrent use.
type Rules struct {
	cumulative []bool // by rule
	path, meas patternIndex
}

type segKind uint8

const (
	segLit segKind = iota // the literal lit
	segAny                // *
	segAlt                // one of alts
)

type segment struct {
	kind segKind
	lit  string
	alts []string
}

func (s *segment) match(b []byte) bool {
	switch s.kind {
	case segLit:
		return string(b) == s.lit
	case segAny:
		return true
	}
	for _, a := range s.alts {
		if string(b) == a {
			return true
		}
	}
	return false
}

type pattern struct {
	rule   int
	suffix bool      // led by **
	segs   []segment // without the **
}

// match matches the pattern's segments right to left against the input's.
func (p *pattern) match(in []byte) bool {
	end := len(in) // in[:end] is what is left; -1 when nothing is
	for j := len(p.segs) - 1; j >= 0; j-- {
		if end < 0 {
			return false
		}
		start := bytes.LastIndexByte(in[:end], '.') + 1
		if !p.segs[j].match(in[start:end]) {
			return false
		}
		end = start - 1
	}
	return p.suffix || end < 0
}

// patternIndex finds the patterns that may match an input by its last
// segment. Pattern numbers grow with the rule number, so going through the
// candidates in ascending number finds the first rule.
type patternIndex struct {
	pats   []pattern
	byLast map[string][]int32 // patterns ending in a literal or {…}
	wild   []int32            // patterns ending in *
}

func (x *patternIndex) add(p pattern) {
	i := int32(len(x.pats))
	x.pats = append(x.pats, p)
	last := &p.segs[len(p.segs)-1]
	switch last.kind {
	case segAny:
		x.wild = append(x.wild, i)
	case segLit:
		x.byLast[last.lit] = append(x.byLast[last.lit], i)
	case segAlt:
		for _, a := range last.alts {
			if l := x.byLast[a]; len(l) == 0 || l[len(l)-1] != i { // {a,a}
				x.byLast[a] = append(l, i)
			}
		}
	}
}

// first returns the first rule below limit with a pattern matching in, or
// -1.
func (x *patternIndex) first(in []byte, limit int) int {
	lits := x.byLast[string(in[bytes.LastIndexByte(in, '.')+1:])]
	wild := x.wild
	for len(lits) > 0 || len(wild) > 0 {
		var i int32
		if len(wild) == 0 || len(lits) > 0 && lits[0] < wild[0] {
			i, lits = lits[0], lits[1:]
		} else {
			i, wild = wild[0], wild[1:]
		}
		p := &x.pats[i]
		if p.rule >= limit {
			return -1
		}
		if p.match(in) {
			return p.rule
		}
	}
	return -1
}

// CompileRules checks and indexes rules, whose order matters: the first
// matching rule wins. The error lists every problem found.
func CompileRules(rules []Rule) (*Rules, error) {
	r := &Rules{
		cumulative: make([]bool, len(rules)),
		path:       patternIndex{byLast: map[string][]int32{}},
		meas:       patternIndex{byLast: map[string][]int32{}},
	}
	var errs []error
	for i, rule := range rules {
		r.cumulative[i] = rule.Cumulative
		src := rule.Source
		if src == "" {
			src = fmt.Sprintf("rule #%d", i+1)
		}
		if len(rule.Path) == 0 && len(rule.Measurement) == 0 {
			errs = append(errs, fmt.Errorf("%s: no Path or Measurement pattern", src))
		}
		for _, s := range rule.Path {
			p, err := compilePattern(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: path pattern %q: %v", src, s, err))
				continue
			}
			p.rule = i
			r.path.add(p)
		}
		for _, s := range rule.Measurement {
			p, err := compilePattern(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: measurement pattern %q: %v", src, s, err))
				continue
			}
			p.rule = i
			r.meas.add(p)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return r, nil
}

func compilePattern(s string) (pattern, error) {
	var p pattern
	if s == "" {
		return p, errors.New("empty pattern")
	}
	depth := 0
	for _, c := range s {
		switch {
		case c <= ' ' || c == 0x7f:
			return p, errors.New("contains white space or a control character")
		case c == '?' || c == '[' || c == ']':
			return p, fmt.Errorf("%q is not supported: only *, a leading ** and {a,b} are", c)
		case c == '{':
			if depth > 0 {
				return p, errors.New("nested '{'")
			}
			depth++
		case c == '}':
			if depth == 0 {
				return p, errors.New("'}' without '{'")
			}
			depth--
		case c == '.' && depth > 0:
			return p, errors.New("'.' inside {…}: alternatives are single segments")
		case c == ',' && depth == 0:
			return p, errors.New("',' outside {…}")
		}
	}
	if depth > 0 {
		return p, errors.New("'{' without '}'")
	}
	parts := strings.Split(s, ".")
	if parts[0] == "**" {
		p.suffix = true
		parts = parts[1:]
		if len(parts) == 0 {
			return p, errors.New("'**' must be followed by a segment (`**.*` matches every path)")
		}
	}
	for _, part := range parts {
		seg, err := compileSegment(part)
		if err != nil {
			return p, err
		}
		p.segs = append(p.segs, seg)
	}
	return p, nil
}

func compileSegment(s string) (segment, error) {
	switch {
	case s == "":
		return segment{}, errors.New("empty segment (leading, trailing or doubled '.')")
	case s == "*":
		return segment{kind: segAny}, nil
	case s == "**":
		return segment{}, errors.New("'**' is only allowed as the first segment")
	case strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}"):
		alts := strings.Split(s[1:len(s)-1], ",")
		for _, a := range alts {
			if a == "" {
				return segment{}, fmt.Errorf("empty alternative in %q", s)
			}
			if strings.Contains(a, "*") {
				return segment{}, fmt.Errorf("wildcard in alternative %q of %q: alternatives are literals", a, s)
			}
		}
		return segment{kind: segAlt, alts: alts}, nil
	case strings.ContainsAny(s, "{}"):
		return segment{}, fmt.Errorf("{…} must be a whole segment, not part of %q", s)
	case strings.Contains(s, "*"):
		return segment{}, fmt.Errorf("partial wildcard in segment %q: '*' must be a whole segment", s)
	}
	return segment{kind: segLit, lit: s}, nil
}

// Match returns whether the series with this Graphite path and measurement
// is cumulative, and by which rule (its index in the slice given to
// CompileRules): the first rule with a matching pattern wins. It returns
// (false, -1) when no rule matches. An empty path or measurement matches
// nothing. Match does not allocate.
func (r *Rules) Match(path, measurement []byte) (cumulative bool, rule int) {
	best := -1
	limit := len(r.cumulative)
	if len(path) > 0 {
		if best = r.path.first(path, limit); best >= 0 {
			limit = best
		}
	}
	if len(measurement) > 0 {
		if m := r.meas.first(measurement, limit); m >= 0 {
			best = m
		}
	}
	if best < 0 {
		return false, -1
	}
	return r.cumulative[best], best
}

// Len returns the number of rules.
func (r *Rules) Len() int { return len(r.cumulative) }
