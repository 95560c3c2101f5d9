package queue

import (
	"bytes"
	"sort"
)

// Lines is a run of complete lines of line protocol, each ending in '\n',
// with where each ends: the encoder that writes them records their ends,
// so that the stages after it cut batches and requests, and pick out
// refused lines, without looking for a line's end again.
//
// Ends are offsets in the coordinates of the run Lines was cut from: line
// i is Data[Ends[i-1]-Base : Ends[i]-Base] (from 0 for the first), so
// cutting a run shares its memory and renumbers nothing.
type Lines struct {
	Data []byte
	Ends []int32
	Base int32
}

// Scan is the Lines of data, complete lines: for bytes that come without
// their ends, such as a disk queue record or a few annotation points. A
// last line without its '\n' is left out.
func Scan(data []byte) Lines {
	l := Lines{Data: data}
	for off := 0; ; {
		i := bytes.IndexByte(data[off:], '\n')
		if i < 0 {
			break
		}
		off += i + 1
		l.Ends = append(l.Ends, int32(off))
	}
	l.Data = data[:l.size()]
	return l
}

// Len is the number of lines.
func (l Lines) Len() int { return len(l.Ends) }

// size is the bytes of the lines.
func (l Lines) size() int {
	if len(l.Ends) == 0 {
		return 0
	}
	return int(l.Ends[len(l.Ends)-1] - l.Base)
}

// Line is line i, with its '\n'.
func (l Lines) Line(i int) []byte {
	start := 0
	if i > 0 {
		start = int(l.Ends[i-1] - l.Base)
	}
	return l.Data[start:int(l.Ends[i]-l.Base)]
}

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
	return Lines{Data: l.Data[:cut:cut], Ends: l.Ends[:k:k], Base: l.Base}, Lines{Data: l.Data[cut:], Ends: l.Ends[k:], Base: end}
}

// Append adds a copy of line, which ends in '\n', to l, which must own
// its memory (not be the head of a Cut).
func (l *Lines) Append(line []byte) {
	l.Data = append(l.Data, line...)
	l.Ends = append(l.Ends, int32(len(l.Data))+l.Base)
}

// AppendLines adds a copy of m's lines to l, as Append does.
func (l *Lines) AppendLines(m Lines) {
	shift := int32(len(l.Data)) + l.Base - m.Base
	l.Data = append(l.Data, m.Data[:m.size()]...)
	for _, e := range m.Ends {
		l.Ends = append(l.Ends, e+shift)
	}
}
