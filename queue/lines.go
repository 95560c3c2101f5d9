package queue

import (
	"bytes"
	"sort"
)

// Lines is a run of complete lines of line protocol, each ending in '\n',
// with where each ends and where its series key (measurement and tags)
// ends: the encoder that writes them records both, so that the stages
// after it cut batches and requests, pick out refused lines and know a
// line's series without reading line protocol again.
//
// Ends and Keys are offsets in the coordinates of the run Lines was cut
// from: line i is Data[Ends[i-1]-Base : Ends[i]-Base] (from 0 for the
// first), its series key runs from its start to Keys[i]-Base, so cutting
// a run shares its memory and renumbers nothing.
type Lines struct {
	Data []byte
	Ends []int32
	Keys []int32
	Base int32
}

// Scan is the Lines of data, complete lines: for bytes that come without
// their ends, such as a disk queue record or a few annotation points. A
// last line without its '\n' is left out. A line's series key ends at its
// first space that no backslash escapes (line protocol escapes spaces in
// measurements, tag keys and tag values).
func Scan(data []byte) Lines {
	l := Lines{Data: data}
	for off := 0; ; {
		i := bytes.IndexByte(data[off:], '\n')
		if i < 0 {
			break
		}
		l.Keys = append(l.Keys, int32(off+keyLen(data[off:off+i])))
		off += i + 1
		l.Ends = append(l.Ends, int32(off))
	}
	l.Data = data[:l.Size()]
	return l
}

// keyLen is the length of line's series key: up to its first unescaped
// space, or all of it.
func keyLen(line []byte) int {
	for i := 0; i < len(line); i++ {
		switch line[i] {
		case '\\':
			i++
		case ' ':
			return i
		}
	}
	return len(line)
}

// Len is the number of lines.
func (l Lines) Len() int { return len(l.Ends) }

// Size is the bytes of the lines: what a copy of them takes.
func (l Lines) Size() int {
	if len(l.Ends) == 0 {
		return 0
	}
	return int(l.Ends[len(l.Ends)-1] - l.Base)
}

// start is where line i starts in Data.
func (l Lines) start(i int) int {
	if i == 0 {
		return 0
	}
	return int(l.Ends[i-1] - l.Base)
}

// Line is line i, with its '\n'.
func (l Lines) Line(i int) []byte { return l.Data[l.start(i):int(l.Ends[i]-l.Base)] }

// Key is line i's series key: its measurement and tags.
func (l Lines) Key(i int) []byte { return l.Data[l.start(i):int(l.Keys[i]-l.Base)] }

// Within is how many of the first lines fit in n bytes.
func (l Lines) Within(n int) int {
	return sort.Search(len(l.Ends), func(i int) bool { return int(l.Ends[i]-l.Base) > n })
}

// Cut returns the first k lines and the rest, sharing l's memory.
func (l Lines) Cut(k int) (head, tail Lines) {
	if k <= 0 {
		return Lines{Base: l.Base}, l
	}
	end := l.Ends[k-1]
	cut := int(end - l.Base)
	return Lines{Data: l.Data[:cut:cut], Ends: l.Ends[:k:k], Keys: l.Keys[:k:k], Base: l.Base},
		Lines{Data: l.Data[cut:], Ends: l.Ends[k:], Keys: l.Keys[k:], Base: end}
}

// Append adds a copy of line, which ends in '\n' and whose series key is
// its first keyLen bytes, to l, which must own its memory (not be the
// head of a Cut).
func (l *Lines) Append(line []byte, keyLen int) {
	at := int32(len(l.Data)) + l.Base
	l.Data = append(l.Data, line...)
	l.Ends = append(l.Ends, int32(len(l.Data))+l.Base)
	l.Keys = append(l.Keys, at+int32(keyLen))
}

// AppendLine adds a copy of m's line i to l, as Append does.
func (l *Lines) AppendLine(m Lines, i int) {
	start := m.start(i)
	l.Append(m.Data[start:int(m.Ends[i]-m.Base)], int(m.Keys[i]-m.Base)-start)
}

// AppendLines adds a copy of m's lines to l, as Append does.
func (l *Lines) AppendLines(m Lines) {
	shift := int32(len(l.Data)) + l.Base - m.Base
	l.Data = append(l.Data, m.Data[:m.Size()]...)
	for i, e := range m.Ends {
		l.Ends = append(l.Ends, e+shift)
		l.Keys = append(l.Keys, m.Keys[i]+shift)
	}
}
