package delta

import (
	"fmt"
	"math/bits"
	"strings"
	"testing"
)

// TestHashGolden pins Hash: IDs are saved, so any change here breaks every
// saved state and needs a new state version.
func TestHashGolden(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want ID
	}{
		{"", ID{0x69f77b35a5ce7f1d, 0x69b95f68391e8bc}},
		{"a", ID{0xc8201e23297344f1, 0xfd3ffc4ed34e13e7}},
		{"abc", ID{0xc81e772d71849226, 0x8a145f15f2c0daf5}},
		{"abcdefg", ID{0xf8492b6715ad7878, 0xc07d601d3cee80af}},
		{"abcdefgh", ID{0xaf83a23d7323c443, 0x265daf70e09e6853}},
		{"abcdefghijklmno", ID{0xc20eadc529b5f29d, 0x5a75ab59c1627b0f}},
		{"abcdefghijklmnop", ID{0xa03bbce4347cb843, 0xbb21173344862274}},
		{"spark\x00spark_executor,app_id=app-20240101120000-0001,executor_id=17\x00cpuTime", ID{0x6166f571a35f280d, 0x362315a5925c8813}},
	} {
		if got := Hash([]byte(tc.key)); got != tc.want {
			t.Errorf("Hash(%q) = %#x, want %#x", tc.key, got, tc.want)
		}
	}
}

// TestHashAvalanche: flipping any input bit flips about half of the 128
// output bits, for every length class (blocks, 8-byte word, 1–7 byte tail).
func TestHashAvalanche(t *testing.T) {
	base := []byte(strings.Repeat("spark.app-20240101-0001.17.executor.cpuTime.count;", 3))
	for n := 1; n <= 100; n++ {
		key := base[:n]
		h0 := Hash(key)
		total := 0
		for bit := range n * 8 {
			c := append([]byte(nil), key...)
			c[bit/8] ^= 1 << (bit % 8)
			h := Hash(c)
			d := bits.OnesCount64(h[0]^h0[0]) + bits.OnesCount64(h[1]^h0[1])
			if d < 24 {
				t.Errorf("len %d bit %d: only %d output bits changed", n, bit, d)
			}
			total += d
		}
		if avg := float64(total) / float64(n*8); avg < 60 || avg > 68 {
			t.Errorf("len %d: %.1f output bits change on average, want ≈64", n, avg)
		}
	}
}

// TestHashNoCollisions hashes a million Spark-like keys that differ in
// little (executor id, metric name, a zero byte vs the padding) and checks
// that not even a 64-bit half collides.
func TestHashNoCollisions(t *testing.T) {
	if testing.Short() {
		t.Skip("1e6 keys")
	}
	metrics := []string{"cpuTime", "runTime", "jvmGCTime", "bytesRead", "bytesWritten", "recordsRead", "shuffleFetchWaitTime", "succeededTasks", "a", ""}
	seen0 := make(map[uint64]string, 1<<20)
	seen1 := make(map[uint64]string, 1<<20)
	var key []byte
	for app := range 1000 {
		for exec := range 100 {
			for _, m := range metrics {
				key = fmt.Appendf(key[:0], "spark\x00spark_executor,app_id=app-%04d,executor_id=%d\x00%s", app, exec, m)
				h := Hash(key)
				if k, ok := seen0[h[0]]; ok {
					t.Fatalf("Hash(%q)[0] == Hash(%q)[0]", key, k)
				}
				if k, ok := seen1[h[1]]; ok {
					t.Fatalf("Hash(%q)[1] == Hash(%q)[1]", key, k)
				}
				seen0[h[0]], seen1[h[1]] = string(key), string(key)
			}
		}
	}
	// Zero bytes and padding are told apart by the length.
	ids := map[ID]int{}
	for n := range 40 {
		ids[Hash(make([]byte, n))] = n
	}
	if len(ids) != 40 {
		t.Errorf("all-zero keys of 40 lengths gave %d IDs", len(ids))
	}
}

func BenchmarkHash(b *testing.B) {
	for _, n := range []int{16, 50, 100, 200} {
		key := []byte(strings.Repeat("spark_executor,app_id=app-20240101-0001,executor_id=17,", 4)[:n])
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			var sink ID
			for b.Loop() {
				sink = Hash(key)
			}
			_ = sink
		})
	}
}
