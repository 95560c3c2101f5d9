package templates

import (
	"bytes"
	"errors"
	"fmt"
)

// span is one path part: path[start:end].
type span struct{ start, end int }

var errEmptyPath = errors.New("empty metric path")

// Apply maps one Graphite path into r, which it resets first, exactly as
// InfluxDB 1.8.10's graphite parser does with the same template list:
// template selection through the filter tree, the walk of the template over
// the path parts, the whole path as measurement when none was extracted,
// then the global tags, the "value" field default, empty tag values
// dropped and tags sorted, as r.Finish(global tags) does (the order is
// worked out at Compile, so no keys are compared per line).
//
// The per-line errors are influxd's: a template holding both
// "measurement*" and "field*", and a second "field" reached while a field
// name is already set. An empty path is refused too (influxd never sees
// one). Slices in r may point into path and into the Engine, which callers
// must not modify. With r reused, Apply does not allocate once r's storage
// has grown to fit.
func (e *Engine) Apply(path []byte, r *Result) error {
	r.Reset()
	if len(path) == 0 {
		return errEmptyPath
	}
	// The path is cut into parts once, as far as the tree and then the
	// template read it. off is where the next part starts, past len(path)
	// once all parts are cut.
	spans := r.spans[:0]
	off := 0
	n := e.root
	for !n.leaf() && off <= len(path) {
		spans, off = cut(path, spans, off)
		c := n.step(path[spans[len(spans)-1].start:spans[len(spans)-1].end])
		if c == nil {
			break // no backtracking: n's template, if any, is the answer
		}
		n = c
	}
	t := e.def
	if n.tmpl >= 0 {
		t = e.tmpls[n.tmpl]
	}
	if t.bothErr != nil {
		return t.bothErr
	}
	for len(spans) < t.star && off <= len(path) {
		spans, off = cut(path, spans, off)
	}
	r.spans = spans
	lim := min(len(spans), t.star) // parts the walk reaches
	tail := -1                     // start of the part at the star, when the path reaches it
	if t.star < t.n {
		if len(spans) > t.star {
			tail = spans[t.star].start
		} else if off <= len(path) {
			tail = off
		}
	}

	var field []byte
	for _, p := range t.fields {
		if p >= lim {
			break
		}
		if len(field) > 0 {
			return fmt.Errorf("'field' can only be used once in each template: %q", path)
		}
		field = path[spans[p].start:spans[p].end]
	}
	if tail >= 0 && t.starKind == partFieldStar {
		field = r.join(path, t, nil, false, nil, tail)
	}
	if len(field) == 0 {
		field = fieldValue
	}
	r.Field = field

	mtail := -1
	if t.starKind == partMeasurementStar {
		mtail = tail
	}
	r.Measurement = r.join(path, t, nil, false, t.meas, mtail)
	if len(r.Measurement) == 0 {
		r.Measurement = path
	}

	tags := r.Tags
	for _, o := range t.order {
		if o.slot >= 0 {
			s := &t.slots[o.slot]
			reached := len(s.pos) > 0 && s.pos[0] < lim
			if s.seeded || reached {
				// Produced: it blocks the global tag even when empty.
				var v []byte
				if !s.seeded && (len(s.pos) == 1 || s.pos[1] >= lim) {
					v = path[spans[s.pos[0]].start:spans[s.pos[0]].end]
				} else {
					v = r.join(path, t, s.seed, s.seeded, s.pos, -1)
				}
				if len(v) > 0 {
					tags = append(tags, Tag{Key: s.key, Value: v})
				}
				continue
			}
		}
		if o.global >= 0 {
			tags = append(tags, e.global[o.global])
		}
	}
	r.Tags = tags
	return nil
}

// cut appends the part of path starting at off to spans and returns the
// start of the next part.
func cut(path []byte, spans []span, off int) ([]span, int) {
	// Parts are short: a plain scan beats bytes.IndexByte's set-up.
	end := off
	for end < len(path) && path[end] != '.' {
		end++
	}
	return append(spans, span{off, end}), end + 1
}

// join joins, with t's separator, an optional leading value, the parts at
// positions pos that the walk reached (those cut into r.spans) and, when
// tail >= 0, everything from path[tail:] on. It returns a sub-slice of path
// when that already reads the same, and copies into r's storage otherwise.
func (r *Result) join(path []byte, t *template, lead []byte, hasLead bool, pos []int, tail int) []byte {
	spans := r.spans
	k := 0 // how many of pos were reached; pos is ascending
	for k < len(pos) && pos[k] < len(spans) {
		k++
	}
	pos = pos[:k]
	if !hasLead {
		switch {
		case k == 0 && tail < 0:
			return nil
		case k == 0:
			if t.sepDot || bytes.IndexByte(path[tail:], '.') < 0 {
				return path[tail:]
			}
		case tail < 0 && k == 1:
			return path[spans[pos[0]].start:spans[pos[0]].end]
		case t.sepDot && pos[k-1]-pos[0] == k-1 && (tail < 0 || pos[k-1]+1 == t.star):
			// Consecutive parts joined with "." are the path itself.
			end := len(path)
			if tail < 0 {
				end = spans[pos[k-1]].end
			}
			return path[spans[pos[0]].start:end]
		}
	} else if k == 0 && tail < 0 {
		return lead
	}

	a := r.arena
	start := len(a)
	if hasLead {
		a = append(a, lead...)
	}
	for i, p := range pos {
		if i > 0 || hasLead {
			a = append(a, t.sep...)
		}
		a = append(a, path[spans[p].start:spans[p].end]...)
	}
	if tail >= 0 {
		if hasLead || len(pos) > 0 {
			a = append(a, t.sep...)
		}
		if len(t.sep) == 1 {
			// Copy, then swap the dots in place.
			from := len(a)
			a = append(a, path[tail:]...)
			for i := from; i < len(a); i++ {
				if a[i] == '.' {
					a[i] = t.sep[0]
				}
			}
			r.arena = a
			return a[start:len(a):len(a)]
		}
		for rest := path[tail:]; ; {
			i := bytes.IndexByte(rest, '.')
			if i < 0 {
				a = append(a, rest...)
				break
			}
			a = append(a, rest[:i]...)
			a = append(a, t.sep...)
			rest = rest[i+1:]
		}
	}
	r.arena = a
	return a[start:len(a):len(a)]
}
