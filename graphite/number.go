package graphite

import (
	"encoding/binary"
	"math/bits"
	"strconv"
	"unsafe"
)

// parseFloat returns what strconv.ParseFloat(string(b), 64) returns, with ok
// reporting err == nil, without allocating. strconv allocates its error, so
// a token only reaches it once checkFloat has shown it will succeed.
// BenchmarkParseFloat sets both beside strconv: fastFloat reads Spark's
// values (GraphiteReporter writes "%2.2f") 3–4× faster, and checkFloat
// turns a rejected value's 2 allocations and ~100 ns into none and ~25
// ns, what a sender repeating a bad line costs; a value only strconv's
// exact paths read, which Spark does not send, costs twice strconv's time.
// On the service's path (relay's BenchmarkConnRejected: parse, refuse,
// count) a rejected line costs 61–63 ns and nothing allocated, against
// 151–190 ns and 2 allocations (56 B) with strconv answering instead of
// checkFloat (5 alternating runs each).
func parseFloat(b []byte) (float64, bool) {
	if v, ok := fastFloat(b); ok {
		return v, true
	}
	if checkFloat(b) != numOK {
		return 0, false
	}
	// strconv neither keeps nor modifies s, so it may alias b.
	v, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(b), len(b)), 64)
	return v, err == nil
}

// pow10 holds powers of ten that are exact in a float64.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// fastFloat handles the common shape [+-]digits[.digits] with at most 15
// digits. Both the digits and the power of ten are then exact, so one
// IEEE division gives the correctly rounded result strconv would.
func fastFloat(b []byte) (float64, bool) {
	i := 0
	neg := false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg = b[0] == '-'
		i = 1
	}
	if n := len(b) - i; n == 0 || n > 16 {
		return 0, false
	}
	var m uint64
	dot := -1
	for j := i; j < len(b); j++ {
		c := b[j]
		switch {
		case '0' <= c && c <= '9':
			m = m*10 + uint64(c-'0')
		case c == '.' && dot < 0:
			dot = j
		default:
			return 0, false
		}
	}
	digits := len(b) - i
	frac := 0
	if dot >= 0 {
		digits--
		frac = len(b) - 1 - dot
	}
	if digits == 0 || digits > 15 {
		return 0, false
	}
	f := float64(m)
	if neg {
		f = -f
	}
	if frac > 0 {
		f /= pow10[frac]
	}
	return f, true
}

// smallInt parses [+-]digits with at most 15 digits: integers that a float64
// holds exactly, so the result equals strconv.ParseFloat's.
func smallInt(b []byte) (int64, bool) {
	i := 0
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		i = 1
	}
	if n := len(b) - i; n == 0 || n > 15 {
		return 0, false
	}
	var v uint64
	// Unix seconds have ten digits: convert eight of them at once.
	if len(b)-i >= 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		d, ok := eightDigits(x)
		if !ok {
			return 0, false
		}
		v = d
		i += 8
	}
	for _, c := range b[i:] {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	if b[0] == '-' {
		return -int64(v), true
	}
	return int64(v), true
}

// eightDigits converts eight ASCII digits, the first in the low byte of x,
// using the well-known SWAR reduction: pairs, then quads, then the whole.
func eightDigits(x uint64) (uint64, bool) {
	const mask = 0xF0F0F0F0F0F0F0F0
	// Every byte must be 0x30..0x39: high nibble 3, and adding 6 must not
	// carry into the high nibble.
	if x&mask|(x+0x0606060606060606)&mask>>4 != 0x3333333333333333 {
		return 0, false
	}
	x -= 0x3030303030303030
	x = x*10 + x>>8
	x = ((x&0x000000FF000000FF)*(100+1000000<<32) + (x>>16&0x000000FF000000FF)*(1+10000<<32)) >> 32
	return x, true
}

type numStatus uint8

const (
	numOK     numStatus = iota
	numSyntax           // strconv.ErrSyntax
	numRange            // strconv.ErrRange
)

// checkFloat predicts the error strconv.ParseFloat(s, 64) returns. It
// follows the grammar strconv accepts (Go float literals with optional
// underscores, plus inf/infinity/nan), and decides overflow the way
// strconv's exact paths do. The fuzz and table tests compare the two.
func checkFloat(s []byte) numStatus {
	if len(s) == 0 {
		return numSyntax
	}
	if n := specialLen(s); n > 0 {
		if n == len(s) {
			return numOK
		}
		return numSyntax
	}
	i := 0
	if s[0] == '+' || s[0] == '-' {
		i++
	}
	if i+2 < len(s) && s[i] == '0' && lower(s[i+1]) == 'x' {
		return checkHex(s, i+2)
	}
	return checkDecimal(s, i)
}

func lower(c byte) byte { return c | 0x20 }

// specialLen returns the length of the inf, infinity or nan spelling that
// strconv recognises at the start of s, or 0. Only inf may carry a sign.
func specialLen(s []byte) int {
	sign := 0
	switch s[0] {
	case '+', '-':
		sign = 1
	case 'n', 'N':
		if foldPrefix(s, "nan") == 3 {
			return 3
		}
		return 0
	}
	switch n := foldPrefix(s[sign:], "infinity"); {
	case n == 8:
		return sign + 8
	case n >= 3:
		return sign + 3 // "inf" followed by a partial "inity"
	}
	return 0
}

// foldPrefix returns how many leading bytes of s match the lower-case word,
// ignoring ASCII case.
func foldPrefix(s []byte, word string) int {
	n := 0
	for n < len(s) && n < len(word) {
		c := s[n]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != word[n] {
			break
		}
		n++
	}
	return n
}

// maxDecimalDigits is how many significant digits strconv's slow decimal
// path keeps; beyond it, digits only make the value inexact, and the
// position of the decimal point is computed from the kept digits.
const maxDecimalDigits = 800

// overflowDigits is 2^1024 - 2^970, the smallest value that rounds to +Inf:
// halfway between MaxFloat64 and 2^1024, which rounds up to the even side.
const overflowDigits = "179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587207096330286416692887910946555547851940402630657488671505820681908902000708383676273854845817711531764475730270069855571366959622842914819860834936475292719074168444365510704342711559699508093042880177904174497792"

// checkDecimal checks a decimal float whose mantissa starts at s[i].
func checkDecimal(s []byte, i int) numStatus {
	underscores, sawDot, sawDigits := false, false, false
	nd := 0     // significant digits (leading zeros excluded)
	dp := 0     // decimal point position, in strconv's slow-path terms
	first := -1 // index of the first significant digit
mantissa:
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c == '_':
			underscores = true
		case c == '.':
			if sawDot {
				break mantissa
			}
			sawDot = true
			dp = min(nd, maxDecimalDigits)
		case '0' <= c && c <= '9':
			sawDigits = true
			if c == '0' && nd == 0 {
				dp--
				continue
			}
			if nd == 0 {
				first = i
			}
			nd++
		default:
			break mantissa
		}
	}
	if !sawDigits {
		return numSyntax
	}
	if !sawDot {
		dp = min(nd, maxDecimalDigits)
	}
	end := i
	if i < len(s) && lower(s[i]) == 'e' {
		var e int
		var ok bool
		if i, e, ok = readExponent(s, i+1, &underscores); !ok {
			return numSyntax
		}
		dp += e
	}
	if i != len(s) || underscores && !underscoresOK(s[:i]) {
		return numSyntax
	}
	// The value is 0.d1d2d3... × 10^dp; overflowDigits has 309 digits.
	switch {
	case nd == 0 || dp < len(overflowDigits):
		return numOK
	case dp > len(overflowDigits):
		return numRange
	}
	k := 0
	for j := first; j < end && k < len(overflowDigits); j++ {
		c := s[j]
		if c == '_' || c == '.' {
			continue
		}
		if c != overflowDigits[k] {
			if c > overflowDigits[k] {
				return numRange
			}
			return numOK
		}
		k++
	}
	if k < len(overflowDigits) {
		return numOK // a proper prefix: the threshold's last digit is not 0
	}
	return numRange
}

// checkHex checks a hexadecimal float whose mantissa starts at s[i], after
// the 0x prefix. Its exponent (p) is mandatory.
func checkHex(s []byte, i int) numStatus {
	underscores, sawDot, sawDigits := false, false, false
	nd, kept := 0, 0 // significant hex digits seen, and kept in mant
	dp := 0          // hex point position
	var mant uint64
mantissa:
	for ; i < len(s); i++ {
		c := s[i]
		var d byte
		switch {
		case c == '_':
			underscores = true
			continue
		case c == '.':
			if sawDot {
				break mantissa
			}
			sawDot = true
			dp = nd
			continue
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= lower(c) && lower(c) <= 'f':
			d = lower(c) - 'a' + 10
		default:
			break mantissa
		}
		sawDigits = true
		if d == 0 && nd == 0 {
			dp--
			continue
		}
		nd++
		// Digits past the 16th lie below the 54 bits that decide overflow.
		if kept < 16 {
			mant = mant<<4 | uint64(d)
			kept++
		}
	}
	if !sawDigits {
		return numSyntax
	}
	if !sawDot {
		dp = nd
	}
	if i >= len(s) || lower(s[i]) != 'p' {
		return numSyntax
	}
	i, e, ok := readExponent(s, i+1, &underscores)
	if !ok || i != len(s) || underscores && !underscoresOK(s[:i]) {
		return numSyntax
	}
	if mant == 0 {
		return numOK
	}
	// value = mant × 2^exp; the top bit of mant sits at 2^top.
	exp := dp*4 + e - kept*4
	l := bits.Len64(mant)
	top := exp + l - 1
	switch {
	case top < 1023:
		return numOK
	case top > 1023:
		return numRange
	}
	// In the top binade the value overflows when its first 54 bits are all
	// ones: 53 that round to MaxFloat64 plus a set rounding bit, which
	// rounds up because MaxFloat64's last bit is odd.
	if l >= 54 && mant>>(l-54) == 1<<54-1 {
		return numRange
	}
	return numOK
}

// readExponent reads [+-]digits starting at s[i] (underscores allowed, and
// noted) and returns the index after it and the signed exponent. Like
// strconv it stops accumulating past 10000, which is already out of range.
func readExponent(s []byte, i int, underscores *bool) (int, int, bool) {
	if i >= len(s) {
		return i, 0, false
	}
	neg := false
	switch s[i] {
	case '+':
		i++
	case '-':
		neg = true
		i++
	}
	if i >= len(s) || s[i] < '0' || s[i] > '9' {
		return i, 0, false
	}
	e := 0
	for ; i < len(s); i++ {
		c := s[i]
		if c == '_' {
			*underscores = true
			continue
		}
		if c < '0' || c > '9' {
			break
		}
		if e < 10000 {
			e = e*10 + int(c-'0')
		}
	}
	if neg {
		e = -e
	}
	return i, e, true
}

// underscoresOK applies Go's rule for digit separators to a whole number
// literal: every '_' must sit between two digits, or between the base
// prefix and a digit.
func underscoresOK(s []byte) bool {
	if len(s) > 0 && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	// prev classifies the previous byte: 'd' digit or base prefix,
	// '_' underscore, 'x' anything else, '^' nothing yet.
	prev := byte('^')
	hex := false
	i := 0
	if len(s) >= 2 && s[0] == '0' {
		switch lower(s[1]) {
		case 'x':
			hex = true
			fallthrough
		case 'b', 'o':
			prev, i = 'd', 2
		}
	}
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case '0' <= c && c <= '9' || hex && 'a' <= lower(c) && lower(c) <= 'f':
			prev = 'd'
		case c == '_':
			if prev != 'd' {
				return false
			}
			prev = '_'
		default:
			if prev == '_' {
				return false
			}
			prev = 'x'
		}
	}
	return prev != '_'
}
