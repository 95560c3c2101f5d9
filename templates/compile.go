package templates

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// partKind says what a template part does with the path part at its
// position.
type partKind uint8

const (
	partSkip partKind = iota // "": the path part is ignored
	partMeasurement
	partMeasurementStar
	partField
	partFieldStar
	partTag
)

func kindOf(p string) partKind {
	switch p {
	case "":
		return partSkip
	case "measurement":
		return partMeasurement
	case "measurement*":
		return partMeasurementStar
	case "field":
		return partField
	case "field*":
		return partFieldStar
	}
	return partTag
}

// slot is one tag key a template produces: from its own parts, from its
// per-template tags, or both (then the seed comes first, as in influxd).
type slot struct {
	key    []byte
	seed   []byte
	seeded bool
	pos    []int // template positions feeding this key, ascending, all before the star
}

// emit is one step of a template's tag output, in key order: a slot, a
// global tag, or a slot whose key a global tag fills when the slot is not
// produced. Walking it gives the same tags as Result.Finish without
// comparing keys per line.
type emit struct {
	slot   int // -1: none
	global int // -1: none
}

// template is one compiled entry. Everything Apply needs is precomputed;
// parts at or after the first "measurement*"/"field*" are never read.
type template struct {
	index   int // position in the list, from 0; -1 for the built-in default
	entry   string
	filter  string
	pattern string
	tags    []Tag // per-template tags, last one wins per key

	sep      []byte
	sepDot   bool
	n        int      // number of parts
	star     int      // position of the first "measurement*" or "field*", or n
	starKind partKind // partMeasurementStar, partFieldStar or partSkip (none)
	meas     []int    // positions of "measurement" before star
	fields   []int    // positions of "field" before star
	slots    []slot
	order    []emit
	bothErr  error // non-nil when the template has both "measurement*" and "field*"

	ignored []string // non-empty parts after the star, for Warnings
	notes   []string // other compile-time remarks, for Warnings
}

// ref names a template of the filter tree in warnings.
func (t *template) ref() string { return fmt.Sprintf("template %d %q", t.index+1, t.filter) }

func newTemplate(index int, entry, filter, pattern string, tags []Tag, sep string) *template {
	parts := strings.Split(pattern, ".")
	t := &template{
		index: index, entry: entry, filter: filter, pattern: pattern, tags: tags,
		sep: []byte(sep), sepDot: sep == ".", n: len(parts), star: len(parts),
	}
	hasMS, hasFS := false, false
	for i, p := range parts {
		k := kindOf(p)
		hasMS = hasMS || k == partMeasurementStar
		hasFS = hasFS || k == partFieldStar
		if i > t.star {
			if p != "" {
				t.ignored = append(t.ignored, p)
			}
			continue
		}
		switch k {
		case partMeasurementStar, partFieldStar:
			t.star, t.starKind = i, k
		case partMeasurement:
			t.meas = append(t.meas, i)
		case partField:
			t.fields = append(t.fields, i)
		case partTag:
			j := slices.IndexFunc(t.slots, func(s slot) bool { return string(s.key) == p })
			if j < 0 {
				t.slots = append(t.slots, slot{key: []byte(p)})
				j = len(t.slots) - 1
			}
			t.slots[j].pos = append(t.slots[j].pos, i)
		}
	}
	for _, tg := range tags {
		j := slices.IndexFunc(t.slots, func(s slot) bool { return string(s.key) == string(tg.Key) })
		if j < 0 {
			t.slots = append(t.slots, slot{key: tg.Key})
			j = len(t.slots) - 1
		}
		t.slots[j].seed, t.slots[j].seeded = tg.Value, true
	}
	if hasMS && hasFS {
		// influxd accepts such a template and fails every line it selects.
		t.bothErr = fmt.Errorf("either 'field*' or 'measurement*' can be used in each template (but not both together): %q",
			strings.Join(parts, sep))
	}
	return t
}

// Engine is a compiled template list. It is immutable and safe for
// concurrent use.
type Engine struct {
	tmpls  []*template // in config order
	def    *template   // used when the filter tree yields no template
	root   *node
	sep    string
	global []Tag
}

// Len returns the number of templates in the list.
func (e *Engine) Len() int { return len(e.tmpls) }

// Compile validates and compiles a template list (the `templates` of one
// [[graphite]] block), the block's separator ("" means ".") and its global
// tags ("k=v" strings, the block's `tags`).
//
// It applies influxd's start-up validation (empty entry, more than three
// fields, no "measurement" or "measurement*" part, duplicate filter, blank
// or partial-wildcard filter sections, malformed tags); a list that passes
// it also passes influxd's parser construction, whose check is weaker.
// Every problem is reported, joined with errors.Join, each prefixed with
// the entry's position (from 1) and text, for example
//
//	template 3 "spark.* .app.measurement*": filter contains blank section: spark.*
func Compile(templates []string, separator string, globalTags []string) (*Engine, error) {
	if separator == "" {
		separator = "."
	}
	var errs []error
	// The built-in default always joins with ".", as in influxd.
	e := &Engine{root: &node{tmpl: -1, creator: -1}, sep: separator,
		def: newTemplate(-1, "measurement*", "", "measurement*", nil, ".")}
	seen := make(map[string]bool)
	for i, entry := range templates {
		t, problems := compileEntry(i, entry, separator, seen)
		for _, p := range problems {
			errs = append(errs, fmt.Errorf("template %d %q: %w", i+1, entry, p))
		}
		if t != nil {
			e.tmpls = append(e.tmpls, t)
		}
	}
	for i, kv := range globalTags {
		if _, _, err := splitTag(kv); err != nil {
			errs = append(errs, fmt.Errorf("tags entry %d %q: %w", i+1, kv, err))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	global, err := ParseTags(globalTags)
	if err != nil { // unreachable: every entry was checked above
		return nil, err
	}
	e.global = global
	for _, t := range e.tmpls {
		if t.filter == "" {
			e.def = t
		} else {
			e.root.insert(strings.Split(t.filter, "."), t.index)
		}
		t.order = emitOrder(t.slots, global)
	}
	if e.def.index < 0 {
		e.def.order = emitOrder(nil, global)
	}
	return e, nil
}

// emitOrder merges a template's slots and the global tags by key.
func emitOrder(slots []slot, global []Tag) []emit {
	byKey := make(map[string]emit)
	for i, s := range slots {
		byKey[string(s.key)] = emit{slot: i, global: -1}
	}
	for j, g := range global {
		x, ok := byKey[string(g.Key)]
		if !ok {
			x.slot = -1
		}
		x.global = j
		byKey[string(g.Key)] = x
	}
	keys := slices.Sorted(maps.Keys(byKey))
	order := make([]emit, len(keys))
	for i, k := range keys {
		order[i] = byKey[k]
	}
	return order
}

// compileEntry checks one entry the way influxd's Config.Validate does and
// compiles it the way its parser does. seen records filters for the
// duplicate check.
func compileEntry(i int, entry, sep string, seen map[string]bool) (*template, []error) {
	fields := strings.Fields(entry)
	switch {
	case len(fields) == 0:
		return nil, []error{fmt.Errorf("missing template at position: %d", i)}
	case len(fields) > 3:
		return nil, []error{fmt.Errorf("invalid template format: '%s'", entry)}
	}
	// influxd keeps a single-field entry untrimmed, so surrounding white
	// space ends up inside the first and last template parts.
	pattern, filter, tagsText := entry, "", ""
	if len(fields) >= 2 {
		if strings.Contains(fields[1], "=") {
			pattern, tagsText = fields[0], fields[1]
		} else {
			filter, pattern = fields[0], fields[1]
		}
	}
	var notes []string
	if len(fields) == 3 {
		if tagsText != "" {
			notes = append(notes, fmt.Sprintf("its second field %q is ignored: influxd reads it as neither filter nor tags", tagsText))
		}
		tagsText = fields[2]
	}

	var problems []error
	if !slices.ContainsFunc(strings.Split(pattern, "."), func(p string) bool {
		return p == "measurement" || p == "measurement*"
	}) {
		problems = append(problems, fmt.Errorf("no measurement in template `%s`", pattern))
	}
	if seen[filter] {
		problems = append(problems, fmt.Errorf("duplicate filter '%s' found at position: %d", filter, i))
	}
	seen[filter] = true
	if filter != "" {
		var blank, wild bool
		for _, s := range strings.Split(filter, ".") {
			blank = blank || s == ""
			wild = wild || (s != "*" && strings.Contains(s, "*"))
		}
		if blank {
			problems = append(problems, fmt.Errorf("filter contains blank section: %s", filter))
		}
		if wild {
			problems = append(problems, fmt.Errorf("invalid filter wildcard section: %s", filter))
		}
	}
	var tags []Tag
	if tagsText != "" {
		for _, kv := range strings.Split(tagsText, ",") {
			k, v, err := splitTag(kv)
			if err != nil {
				problems = append(problems, err)
				continue
			}
			tags = setTag(tags, k, v)
		}
	} else if len(fields) == 1 && strings.Contains(fields[0], "=") {
		// influxd's parser takes tags from the last field whenever it holds
		// "=", even when that field is the template itself, and validation
		// never looks at them.
		var err error
		if tags, err = templateTags(fields[0]); err != nil {
			problems = append(problems, err)
		}
		notes = append(notes, fmt.Sprintf("it has no white space, yet influxd also reads it as per-template tags: %s", fields[0]))
	}
	if len(problems) > 0 {
		return nil, problems
	}
	t := newTemplate(i, entry, filter, pattern, tags, sep)
	t.notes = notes
	return t, nil
}

// templateTags reads tags out of a single-field entry the way influxd's
// parser does: for each ","-element, the text before the first "=" is the
// key and the text up to the next "=" the value. influxd panics on an
// element without "=" and writes an empty key as is; both are refused.
func templateTags(s string) ([]Tag, error) {
	var tags []Tag
	for _, kv := range strings.Split(s, ",") {
		parts := strings.Split(kv, "=")
		if len(parts) < 2 || parts[0] == "" {
			return nil, fmt.Errorf("tag element %q read from the template is malformed (influxd crashes on it or writes an empty tag key)", kv)
		}
		tags = setTag(tags, parts[0], parts[1])
	}
	return tags, nil
}

func setTag(tags []Tag, k, v string) []Tag {
	for i := range tags {
		if string(tags[i].Key) == k {
			tags[i].Value = []byte(v)
			return tags
		}
	}
	return append(tags, Tag{Key: []byte(k), Value: []byte(v)})
}

// splitTag splits a "key=value" tag with influxd's rules and messages
// (including the unbalanced quote of the second one).
func splitTag(kv string) (k, v string, err error) {
	if strings.Count(kv, "=") != 1 {
		return "", "", fmt.Errorf("invalid template tags: '%s'", kv)
	}
	k, v, _ = strings.Cut(kv, "=")
	if k == "" || v == "" {
		return "", "", fmt.Errorf("invalid template tags: %s'", kv)
	}
	return k, v, nil
}
