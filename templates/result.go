package templates

import (
	"bytes"
	"slices"
)

// Tag is one tag of a mapped point.
type Tag struct {
	Key   []byte
	Value []byte
}

// Result is what a mapper makes of one Graphite path: the measurement, the
// field key and the tags of the point.
//
// A Result is meant to be reused: Reset keeps its storage, so mapping a path
// into a reused Result does not allocate. The byte slices in a Result may
// point into the mapped path or into the Result's own storage; they are valid
// until the next Reset or until the path's buffer is reused, whichever comes
// first.
type Result struct {
	Measurement []byte
	Field       []byte // never empty after Finish: "value" when the mapping named no field
	Tags        []Tag  // after Finish: sorted by key, unique keys, no empty values

	arena []byte
	spans []span // scratch for Engine.Apply: offsets of the path parts it reads
}

var fieldValue = []byte("value")

// Reset empties r and keeps its storage for reuse.
func (r *Result) Reset() {
	r.Measurement = r.Measurement[:0:0]
	r.Field = nil
	r.Tags = r.Tags[:0]
	r.arena = r.arena[:0]
}

// store copies the concatenation of parts, separated by sep, into r's own
// storage and returns it. Earlier slices returned by store stay valid even
// when the storage grows, because growth allocates a new array and leaves the
// old one to them.
func (r *Result) store(sep []byte, parts ...[]byte) []byte {
	start := len(r.arena)
	for i, p := range parts {
		if i > 0 {
			r.arena = append(r.arena, sep...)
		}
		r.arena = append(r.arena, p...)
	}
	return r.arena[start:len(r.arena):len(r.arena)]
}

// Finish completes a Result the way InfluxDB 1.x builds a point: the field
// key defaults to "value"; each global tag is added only when the mapping did
// not produce that key at all (a produced key with an empty value still
// blocks it); then tags with empty values are dropped and the rest sorted by
// key. Mappers call it last.
func (r *Result) Finish(global []Tag) {
	if len(r.Field) == 0 {
		r.Field = fieldValue
	}
	produced := len(r.Tags)
	for _, g := range global {
		found := false
		for _, t := range r.Tags[:produced] {
			if bytes.Equal(t.Key, g.Key) {
				found = true
				break
			}
		}
		if !found {
			r.Tags = append(r.Tags, g)
		}
	}
	r.Tags = slices.DeleteFunc(r.Tags, func(t Tag) bool { return len(t.Value) == 0 })
	// Few tags: insertion sort keeps this allocation-free and fast.
	for i := 1; i < len(r.Tags); i++ {
		for j := i; j > 0 && bytes.Compare(r.Tags[j].Key, r.Tags[j-1].Key) < 0; j-- {
			r.Tags[j], r.Tags[j-1] = r.Tags[j-1], r.Tags[j]
		}
	}
}

// ParseTags parses global tags given as "key=value" strings (the `tags` key
// of a [[graphite]] block). For a repeated key the last one wins, as in
// InfluxDB 1.x. Each element needs exactly one "=" with a non-empty key and
// value.
func ParseTags(kvs []string) ([]Tag, error) {
	var tags []Tag
	for _, kv := range kvs {
		k, v, err := splitTag(kv)
		if err != nil {
			return nil, err
		}
		i := slices.IndexFunc(tags, func(t Tag) bool { return string(t.Key) == k })
		if i >= 0 {
			tags[i].Value = []byte(v)
			continue
		}
		tags = append(tags, Tag{Key: []byte(k), Value: []byte(v)})
	}
	return tags, nil
}
