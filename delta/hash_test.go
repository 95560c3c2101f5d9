package delta

import (
	"fmt"
	"strings"
	"testing"
)

var (
	key200 = strings.Repeat("spark.app-20240101-0001.17.executor.cpuTime.count;", 4)
	key300 = strings.Repeat("spark.app-20240101-0001.17.executor.cpuTime.count;", 6)
)

// TestHashGolden pins Hash: IDs are saved with their key, so any change
// here breaks every saved state and needs a new state version. SipHash's
// reference vectors first (key 00 01 … 0f, messages 00 01 … of 0 and 15
// bytes: vectors_sip128 of its reference implementation, little-endian
// halves), then keys of the lengths Spark's series take.
func TestHashGolden(t *testing.T) {
	msg := make([]byte, 15)
	for i := range msg {
		msg[i] = byte(i)
	}
	ref := SeedOf(0x0706050403020100, 0x0f0e0d0c0b0a0908)
	for _, tc := range []struct {
		seed Seed
		key  string
		want ID
	}{
		{ref, "", ID{0xe6a825ba047f81a3, 0x930255c71472f66d}},
		{ref, string(msg), ID{0x11a8b03399e99354, 0xd9c3cf970fec087e}},
		{SeedOf(0, 0), "", ID{0x7de0a38047d74950, 0xf4f2ced447ab0242}},
		{SeedOf(0, 0), "abcdefghijklmnop", ID{0x9bc5c551090a8900, 0xaf5a6191ed2c530e}},
		{SeedOf(0, 0), "spark\x00spark_executor,app_id=app-20240101120000-0001,executor_id=17\x00cpuTime", ID{0xa2c7de73494d23f2, 0xc46af682e26451d8}},
		{SeedOf(0, 0), key300, ID{0x6468a2a5ab8347a9, 0x1d030a981370a7f8}},
		{SeedOf(0x5eed5eed5eed5eed, 0x0123456789abcdef), "a", ID{0xa9de60cc467be283, 0x2b4846904516f005}},
		{SeedOf(0x5eed5eed5eed5eed, 0x0123456789abcdef), "spark\x00spark_executor,app_id=app-20240101120000-0001,executor_id=17\x00cpuTime", ID{0x2ef3162679f54e70, 0xd88a03a4e14abe7a}},
		{SeedOf(0x5eed5eed5eed5eed, 0x0123456789abcdef), key200, ID{0x15dd74d61e03741b, 0x8c8a0c61f42b058}},
	} {
		if got := tc.seed.Hash([]byte(tc.key)); got != tc.want {
			t.Errorf("%v.Hash(%.20q) = %#x, want %#x", tc.seed, tc.key, got, tc.want)
		}
	}
}

// TestLegacyHashGolden pins the hash of state versions 3 and 4, which
// Restore looks their baselines up by: xxh3's 128-bit hash seeded with a
// uint64, high half first (seed 0 gives XXH3_128bits' reference values).
func TestLegacyHashGolden(t *testing.T) {
	for _, tc := range []struct {
		seed legacySeed
		key  string
		want ID
	}{
		{0, "", ID{0x99aa06d3014798d8, 0x6001c324468d497f}},
		{0, "a", ID{0xa96faf705af16834, 0xe6c632b61e964e1f}},
		{0, "abc", ID{0x6b05ab6733a6185, 0x78af5f94892f3950}},
		{0, "abcdefg", ID{0x2aafd83869a59c31, 0x3fe798c0edaa6dc6}},
		{0, "abcdefghijklmnop", ID{0x1f58fc809b1b8c4b, 0x3e8e153ff12f6330}},
		{0, "spark\x00spark_executor,app_id=app-20240101120000-0001,executor_id=17\x00cpuTime", ID{0xba9e16ed168e85a2, 0x11fe1a4544af7984}},
		{0, key200, ID{0x29ae776ee728b36, 0x4579d471d109aa6f}},
		{0, key300, ID{0xa85fd23891baf773, 0xf842f414ec187ea9}},
		{0x5eed5eed5eed5eed, "", ID{0x327a5d49219ede82, 0xffe32a3e48b706a4}},
		{0x5eed5eed5eed5eed, "a", ID{0x485aaba98fde9f7c, 0x6802732163c8830b}},
		{0x5eed5eed5eed5eed, "abc", ID{0x38190e0f807c7dc1, 0x6c90bbf5dedb23ed}},
		{0x5eed5eed5eed5eed, "abcdefg", ID{0x69d8f61a15018dbd, 0xb6dd3f4a223a8873}},
		{0x5eed5eed5eed5eed, "abcdefghijklmnop", ID{0x186cc854f76958e9, 0xaee49b6a72c0d870}},
		{0x5eed5eed5eed5eed, "spark\x00spark_executor,app_id=app-20240101120000-0001,executor_id=17\x00cpuTime", ID{0xa4a2a971d251fde5, 0x5963a2d175f447e8}},
		{0x5eed5eed5eed5eed, key200, ID{0x1c79782fa2d9d0f9, 0x13ae72227aff489}},
		{0x5eed5eed5eed5eed, key300, ID{0xf4cc19232dfa12f1, 0xeceae5f86c3b77ef}},
	} {
		if got := tc.seed.hash([]byte(tc.key)); got != tc.want {
			t.Errorf("legacySeed(%#x).hash(%.20q) = %#x, want %#x", uint64(tc.seed), tc.key, got, tc.want)
		}
	}
}

// TestSeeds: another seed gives other IDs, and New picks a new seed.
func TestSeeds(t *testing.T) {
	k := []byte("spark\x00executor,applicationid=app-1 cpuTime.count=")
	a, b := New(Settings{}, t0), New(Settings{}, t0)
	if a.ID(k) == b.ID(k) || SeedOf(1, 0).Hash(k) == SeedOf(2, 0).Hash(k) {
		t.Errorf("two seeds gave the same ID")
	}
	if a.ID(k) != a.seed.Hash(k) {
		t.Errorf("Tracker.ID is not its seed's hash")
	}
}

// Hashing allocates nothing, whatever the key's length.
func TestHashAllocs(t *testing.T) {
	for _, k := range []string{"a", key200, key300, strings.Repeat(key300, 10)} {
		key := []byte(k)
		if n := testing.AllocsPerRun(100, func() { _ = SeedOf(0x5eed, 0).Hash(key) }); n != 0 {
			t.Errorf("%d-byte key: %.0f allocations", len(key), n)
		}
	}
}

// BenchmarkHash: SipHash-2-4-128 (Seed.Hash, what IDs are now) beside
// seeded xxh3-128 (the hash of state versions 3 and 4), by key length:
// Spark's paths run 60 to 120 bytes.
func BenchmarkHash(b *testing.B) {
	for _, n := range []int{16, 50, 100, 200, 300} {
		key := []byte(key300[:n])
		b.Run(fmt.Sprintf("siphash/%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			var sink ID
			for b.Loop() {
				sink = SeedOf(0x5eed, 1).Hash(key)
			}
			_ = sink
		})
		b.Run(fmt.Sprintf("xxh3/%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			var sink ID
			for b.Loop() {
				sink = legacySeed(0x5eed).hash(key)
			}
			_ = sink
		})
	}
}
