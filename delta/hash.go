package delta

import (
	"crypto/rand"
	"encoding/binary"

	"github.com/zeebo/xxh3"
)

// ID identifies a series: the 128-bit hash of its series key under a
// [Seed].
type ID [2]uint64

// Seed keys the hash that turns series keys into IDs. A random seed makes
// the IDs unpredictable, so that a sender cannot craft paths whose IDs
// collide with another application's series; the state file keeps the
// seed its IDs were made with, so that they stay the same across restarts.
type Seed uint64

// NewSeed returns a random seed.
func NewSeed() Seed {
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return Seed(binary.LittleEndian.Uint64(b[:]))
}

// Hash returns the ID of a series key: xxh3's 128-bit hash seeded with s.
// It is part of the saved state's format (with the seed, which the state
// file holds): the same seed and key give the same ID in every process
// and every version (TestHashGolden pins it; changing it needs a new
// state version). It allocates nothing.
func (s Seed) Hash(key []byte) ID {
	h := xxh3.Hash128Seed(key, uint64(s))
	return ID{h.Hi, h.Lo}
}
