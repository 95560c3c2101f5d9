package graphite

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// Line is a parsed Graphite plaintext line.
type Line struct {
	Path  []byte  // sub-slice of the input line
	Value float64 // always finite
	Time  int64   // unix nanoseconds; meaningless when Now is true
	Now   bool    // no timestamp, or timestamp exactly -1: the caller stamps the receive time
}

// Reason says why Parse rejected a line. The zero value, OK, means accepted.
type Reason uint8

const (
	OK              Reason = iota
	ReasonFields           // not 2 or 3 tokens
	ReasonValue            // value is not a float64 (syntax or out of range)
	ReasonNaN              // value is NaN (InfluxDB drops these silently)
	ReasonInf              // value is +Inf or -Inf
	ReasonTime             // timestamp is not a float64
	ReasonTimeRange        // timestamp outside 1901-12-13 .. 2038-01-19 (or NaN/Inf)
)

var reasonNames = [...]string{
	OK:              "ok",
	ReasonFields:    "fields",
	ReasonValue:     "value",
	ReasonNaN:       "nan",
	ReasonInf:       "inf",
	ReasonTime:      "timestamp",
	ReasonTimeRange: "timestamp_range",
}

// reasonWhy says, for a person, where lines dropped for a reason come
// from when a genuine Spark sends them.
var reasonWhy = [...]string{
	ReasonNaN: "ratio gauges Spark sends with nothing to divide (NaN); InfluxDB cannot store NaN",
}

// Origin says where lines dropped under label (a Reason's String) come
// from, "" when there is nothing to say beyond the label.
func Origin(label string) string {
	for r, name := range reasonNames {
		if name == label && r < len(reasonWhy) {
			return reasonWhy[r]
		}
	}
	return ""
}

// String returns a short label that stays stable, for use in metrics.
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "unknown"
}

// Accepted timestamps in seconds: InfluxDB's MinDate 1901-12-13T00:00:00Z and
// MaxDate 2038-01-19T00:00:00Z, both inclusive.
const (
	minUnix = -2147558400
	maxUnix = 2147472000
)

// Parse parses line (without its terminator) into out. out is only written
// when the result is OK; out.Path then points into line. Parse does not
// allocate.
func Parse(line []byte, out *Line) Reason {
	var tok [3][]byte
	n := fields(line, &tok)
	if n != 2 && n != 3 {
		return ReasonFields
	}
	v, ok := parseFloat(tok[1])
	if !ok {
		return ReasonValue
	}
	if v != v {
		return ReasonNaN
	}
	if math.IsInf(v, 0) {
		return ReasonInf
	}
	var ts int64
	now := true
	if n == 3 {
		var r Reason
		ts, now, r = parseTime(tok[2])
		if r != OK {
			return r
		}
	}
	out.Path, out.Value, out.Time, out.Now = tok[0], v, ts, now
	return OK
}

// parseTime turns a timestamp token into unix nanoseconds.
func parseTime(b []byte) (ns int64, now bool, r Reason) {
	// Senders almost always write whole seconds: skip the float machinery.
	if sec, ok := smallInt(b); ok {
		if sec == -1 {
			return 0, true, OK
		}
		if sec < minUnix || sec > maxUnix {
			return 0, false, ReasonTimeRange
		}
		return sec * 1e9, false, OK
	}
	t, ok := parseFloat(b)
	if !ok {
		return 0, false, ReasonTime
	}
	if t == -1 {
		return 0, true, OK
	}
	// Rules out NaN, ±Inf and anything whose int64 conversion would be
	// implementation-defined, all of which InfluxDB (on amd64) rejects.
	if !(t >= minUnix-2 && t <= maxUnix+2) {
		return 0, false, ReasonTimeRange
	}
	// InfluxDB's arithmetic, quirks included: whole seconds truncate toward
	// zero while the fraction is taken from the floor, so -1.5 is -0.5 s.
	sec := int64(t)
	frac := int64((t - math.Floor(t)) * 1e9)
	ns = sec*1e9 + frac
	if ns < minUnix*1e9 || ns > maxUnix*1e9 {
		return 0, false, ReasonTimeRange
	}
	return ns, false, OK
}

// Explain returns the error InfluxDB 1.x reports for a line that Parse
// rejected with r, word for word. It returns nil for OK. Unlike Parse it
// allocates, so call it only for lines that are logged.
func Explain(line []byte, r Reason) error {
	if r == OK {
		return nil
	}
	var tok [3][]byte
	n := fields(line, &tok)
	switch {
	case r == ReasonFields:
		return fmt.Errorf("received %q which doesn't have required fields", line)
	case r == ReasonTimeRange:
		return errors.New("timestamp out of range")
	case n < 2:
		// r does not belong to this line; say what we can.
	case r == ReasonValue:
		if _, err := strconv.ParseFloat(string(tok[1]), 64); err != nil {
			return fmt.Errorf(`field "%s" value: %s`, tok[0], err)
		}
	case r == ReasonNaN || r == ReasonInf:
		v, _ := strconv.ParseFloat(string(tok[1]), 64)
		return fmt.Errorf(`field "%s" value: "%v" is unsupported`, tok[0], v)
	case r == ReasonTime && n == 3:
		if _, err := strconv.ParseFloat(string(tok[2]), 64); err != nil {
			return fmt.Errorf(`field "%s" time: %s`, tok[0], err)
		}
	}
	return fmt.Errorf("graphite: line rejected: %s", r)
}

// asciiSpace marks the ASCII bytes that unicode.IsSpace accepts.
var asciiSpace = [utf8.RuneSelf]bool{'\t': true, '\n': true, '\v': true, '\f': true, '\r': true, ' ': true}

// fields stores up to three white-space separated tokens of line in tok and
// returns how many there are, or 4 when there are more than three.
func fields(line []byte, tok *[3][]byte) int {
	n := 0
	for i := skipSpace(line, 0); i < len(line); i = skipSpace(line, i) {
		if n == len(tok) {
			return n + 1
		}
		j := tokenEnd(line, i)
		tok[n] = line[i:j]
		n++
		i = j
	}
	return n
}

// skipSpace returns the index of the first non-space rune at or after i.
// Separators are usually a single byte, so this stays scalar.
func skipSpace(b []byte, i int) int {
	for i < len(b) {
		if c := b[i]; c < utf8.RuneSelf {
			if !asciiSpace[c] {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if !unicode.IsSpace(r) {
			return i
		}
		i += size
	}
	return i
}

// tokenEnd returns the index of the first space rune at or after i. Paths are
// long, so it looks at eight bytes at a time for any byte that could start a
// space rune: every ASCII space is <= 0x20 and every other one is multi-byte.
func tokenEnd(b []byte, i int) int {
	const (
		ones = 0x0101010101010101
		high = 0x8080808080808080
	)
	for {
		// The high bit of a byte ends up set when the byte is < 0x21 or
		// >= 0x80. Borrows can only mark bytes above the first such byte,
		// so the lowest mark is exact. Sixteen bytes per round while
		// nothing is marked, then eight to locate the mark.
		for i+16 <= len(b) {
			x := binary.LittleEndian.Uint64(b[i:])
			y := binary.LittleEndian.Uint64(b[i+8:])
			if ((x-0x21*ones)|x|(y-0x21*ones)|y)&high != 0 {
				break
			}
			i += 16
		}
		for i+8 <= len(b) {
			x := binary.LittleEndian.Uint64(b[i:])
			if m := ((x - 0x21*ones) | x) & high; m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= len(b) {
			return len(b)
		}
		if c := b[i]; c < utf8.RuneSelf {
			if asciiSpace[c] {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if unicode.IsSpace(r) {
			return i
		}
		i += size
	}
}
