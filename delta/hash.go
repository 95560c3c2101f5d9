package delta

import (
	"crypto/rand"
	"encoding/binary"

	"github.com/dchest/siphash"
	"github.com/zeebo/xxh3"
)

// ID identifies a series: the 128-bit keyed hash of its series key under a
// [Seed].
type ID [2]uint64

// Seed is the secret 128-bit key of the hash that turns series keys into
// IDs: SipHash-2-4 with 128-bit output, a pseudorandom function. Senders
// choose the keys (their metric paths), so a fast unkeyed or merely seeded
// hash would let them make two keys share an ID (xxh3's maintainers
// document collisions that hold for every seed): one application's line
// would take another's series and baseline. Without the key, finding such
// a pair is as hard as breaking SipHash. The state file keeps the key its
// IDs were made with, so that they stay the same across restarts.
type Seed struct{ k0, k1 uint64 }

// NewSeed returns a random key.
func NewSeed() Seed {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return Seed{binary.LittleEndian.Uint64(b[:]), binary.LittleEndian.Uint64(b[8:])}
}

// SeedOf returns the key k0, k1 (little-endian halves of SipHash's
// 16-byte key), for tests and for reading saved state.
func SeedOf(k0, k1 uint64) Seed { return Seed{k0, k1} }

// Hash returns the ID of a series key: SipHash-2-4-128 under s, its two
// little-endian halves. It is part of the saved state's format (with the
// key, which the state file holds): the same key and series key give the
// same ID in every process and every version (TestHashGolden pins it,
// with SipHash's reference vector; changing it needs a new state
// version). It allocates nothing.
func (s Seed) Hash(key []byte) ID {
	h0, h1 := siphash.Hash128(s.k0, s.k1, key)
	return ID{h0, h1}
}

// legacySeed is the seed of state versions 3 and 4, whose IDs are xxh3's
// 128-bit hash, high half first: read so that an upgrade keeps the
// baselines its last run saved (Tracker.Restore looks them up by it).
type legacySeed uint64

func (s legacySeed) hash(key []byte) ID {
	h := xxh3.Hash128Seed(key, uint64(s))
	return ID{h.Hi, h.Lo}
}
