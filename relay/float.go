package relay

import (
	"math"
	"strconv"
)

// appendFloat appends v as line-protocol/v2 writes a float field:
// strconv's shortest 'g' form. Spark's values are mostly whole numbers
// (bytes, counts, nanoseconds), for which that form is their digits, or
// for 7 digits and more d.ddde+XX, and cheaper to build from an integer
// than through the general shortest-float search; everything else goes to
// strconv. TestAppendFloat and FuzzAppendFloat hold it to strconv's output.
func appendFloat(b []byte, v float64) []byte {
	const exact = 1 << 53 // below it, every whole float is an int64 with these digits
	if v != math.Trunc(v) || v >= exact || v <= -exact || v == 0 && math.Signbit(v) {
		return strconv.AppendFloat(b, v, 'g', -1, 64)
	}
	n := int64(v)
	if n > -1e6 && n < 1e6 {
		return strconv.AppendInt(b, n, 10) // 'g' writes exponents from 1e+06 on
	}
	if n < 0 {
		b = append(b, '-')
		n = -n
	}
	// The shortest digits of a whole number below 2^53 are its own, less
	// trailing zeros: floats there are at most 1 apart, so no shorter
	// decimal rounds back to it.
	var d [20]byte
	digits := strconv.AppendInt(d[:0], n, 10)
	exp := len(digits) - 1
	for digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
	}
	b = append(b, digits[0])
	if len(digits) > 1 {
		b = append(b, '.')
		b = append(b, digits[1:]...)
	}
	b = append(b, 'e', '+')
	if exp < 10 {
		b = append(b, '0')
	}
	return strconv.AppendInt(b, int64(exp), 10)
}
