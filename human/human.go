// Package human writes counts, sizes, hours and lists of ids as a person
// reads them, for the text sparkpulse prints and writes: "1 application",
// "2 applications", "64 MiB", "1.5 GiB", "0.031" (hours), "3,4,7". One source, so that
// `check`, `report`, the annotator and the other commands word them alike.
package human

import (
	"math"
	"strconv"
	"strings"
)

// Count writes a count with its noun: "1 application", "2 applications".
// The noun's plural is the noun and "s" unless given.
func Count(n int, noun string, plural ...string) string {
	word := noun
	if n != 1 {
		word = noun + "s"
		if len(plural) > 0 {
			word = plural[0]
		}
	}
	return strconv.Itoa(n) + " " + word
}

// Hours writes a number of hours (core-hours, GiB-hours): one decimal,
// or two significant digits under one, so that a test-sized job's
// 0.031 core-hours does not read as 0.0.
func Hours(h float64) string {
	if h != 0 && math.Abs(h) < 1 {
		return strconv.FormatFloat(h, 'g', 2, 64)
	}
	return strconv.FormatFloat(h, 'f', 1, 64)
}

// Bytes writes a size in binary units, exactly when it is a whole number
// of them ("64 MiB"), else with one decimal ("1.5 GiB").
func Bytes(n int64) string {
	if n < 0 {
		return "-" + Bytes(-n)
	}
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i, f := 0, float64(n)
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if i == 0 {
		return strconv.FormatInt(n, 10) + " B"
	}
	s := strconv.FormatFloat(f, 'f', 1, 64)
	s = strings.TrimSuffix(s, ".0")
	return s + " " + units[i]
}

// IDs writes ids as Spark's UI lists jobs and stages: "3,4,7".
func IDs(ids []int) string {
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(id))
	}
	return b.String()
}
