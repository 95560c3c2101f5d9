package relay

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

func TestAppendFloat(t *testing.T) {
	check := func(v float64) {
		t.Helper()
		if got, want := string(appendFloat(nil, v)), strconv.FormatFloat(v, 'g', -1, 64); got != want {
			t.Fatalf("appendFloat(%v) = %q, want %q", v, got, want)
		}
	}
	for _, v := range []float64{
		0, math.Copysign(0, -1), 1, -1, 7, 999999, -999999, 1e6, -1e6, 1000001, 1795300000, 81234,
		1 << 53, -(1 << 53), 1<<53 - 1, -(1<<53 - 1), 1 << 60, 1e21, 1e22, 9.5, 0.25, -0.001, 1e-300,
		math.MaxFloat64, math.SmallestNonzeroFloat64, 123456789012345, 100000000000000,
	} {
		check(v)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200_000 {
		// Whole numbers of every size, as Spark sends them, and others.
		n := rng.Int64N(1 << 54)
		check(float64(n >> rng.IntN(54)))
		check(-float64(n >> rng.IntN(54)))
		check(float64(n>>rng.IntN(54)) * math.Pow10(rng.IntN(30)-10))
	}
}

func FuzzAppendFloat(f *testing.F) {
	for _, v := range []float64{0, 1, 1e6, 1795300000, 1 << 53, 0.5, -3} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v float64) {
		if got, want := string(appendFloat(nil, v)), strconv.FormatFloat(v, 'g', -1, 64); got != want {
			t.Fatalf("appendFloat(%v) = %q, want %q", v, got, want)
		}
	})
}

func BenchmarkAppendFloat(b *testing.B) {
	for _, bc := range []struct {
		name string
		v    float64
	}{{"small", 81234}, {"large", 1795300000123}, {"fraction", 0.4375}} {
		b.Run(bc.name, func(b *testing.B) {
			var buf []byte
			for b.Loop() {
				buf = appendFloat(buf[:0], bc.v)
			}
		})
		b.Run(bc.name+"/strconv", func(b *testing.B) {
			var buf []byte
			for b.Loop() {
				buf = strconv.AppendFloat(buf[:0], bc.v, 'g', -1, 64)
			}
		})
	}
}
