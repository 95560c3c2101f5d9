package graphite

import (
	"strconv"
	"testing"
)

// BenchmarkParseFloat sets parseFloat beside strconv.ParseFloat, its
// baseline, on the three kinds of value a Graphite line has: the common
// short decimal (fastFloat), a value only strconv's exact paths can
// read (checkFloat, then strconv), and a value that is no number, as a
// broken or hostile sender repeats on every line. The hand-written parts
// pay where parseFloat beats strconv: time on the first, allocations on
// the last, which strconv spends on its error.
func BenchmarkParseFloat(b *testing.B) {
	for _, c := range []struct{ name, v string }{
		{"short", "41943040.5"},
		{"exact-path", "1.7976931348623157e308"},
		{"rejected", "12.5MB"},
	} {
		in := []byte(c.v)
		b.Run(c.name+"/parseFloat", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				parseFloat(in)
			}
		})
		b.Run(c.name+"/strconv", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = strconv.ParseFloat(string(in), 64)
			}
		})
	}
}
