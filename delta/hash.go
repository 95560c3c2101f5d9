package delta

import (
	"encoding/binary"
	"math/bits"
)

// ID identifies a series: the 128-bit [Hash] of its series key.
type ID [2]uint64

// Constants from xxHash64 (lane A) and MurmurHash3 (lane B). kA and kB each
// hold a 0xFF byte, which never occurs in UTF-8, so a word of a UTF-8 key
// can never cancel them and turn a multiplier into zero.
const (
	seedA = 0x165667B19E3779F9
	seedB = 0xFF51AFD7ED558CCD
	lenA  = 0x9E3779B185EBCA87
	lenB  = 0x87C37B91114253D5
	kA    = 0xC2B2AE3D27D4EBFF
	kB    = 0x4CF5AD432745FF7F
)

// Hash returns the ID of a series key. It is part of the saved state's
// format: it must return the same ID for the same key in every process and
// every version (TestHashGolden pins it; changing it needs a new state
// version). It is fast and well mixed, not collision resistant against
// someone choosing keys on purpose.
//
// Each 16-byte block (two 8-byte little-endian words) feeds both lanes
// through a 64×64→128-bit multiply folded to 64 bits, one word on each side
// (wyhash's mixing), so each half of the ID is a complete 64-bit hash of the
// key on its own; the lanes swap the words' roles so they stay independent.
// One multiply per lane per 16 bytes is what keeps a 100-byte key under
// 20 ns.
func Hash(key []byte) ID {
	n := len(key)
	a := seedA ^ uint64(n)*lenA
	b := seedB ^ uint64(n)*lenB
	i := 0
	for ; i+16 <= n; i += 16 {
		blk := key[i : i+16]
		w0 := binary.LittleEndian.Uint64(blk)
		w1 := binary.LittleEndian.Uint64(blk[8:])
		a, b = fold(a^w0, w1^kA), fold(b^w1, w0^kB)
	}
	// The last 0–15 bytes, zero-padded: the length, mixed in above, tells
	// the padding apart from zero bytes, so the overlapping loads of the
	// 1–7 byte tail are unambiguous too.
	var w0, w1 uint64
	if i+8 <= n {
		w0 = binary.LittleEndian.Uint64(key[i : i+8])
		i += 8
	}
	if r := n - i; r >= 4 {
		w1 = uint64(binary.LittleEndian.Uint32(key[i:i+4])) | uint64(binary.LittleEndian.Uint32(key[n-4:n]))<<32
	} else if r > 0 {
		w1 = uint64(key[i])<<16 | uint64(key[i+r>>1])<<8 | uint64(key[n-1])
	}
	a, b = fold(a^w0, w1^kA), fold(b^w1, w0^kB)
	return ID{finalA(a), finalB(b)}
}

func fold(x, y uint64) uint64 {
	hi, lo := bits.Mul64(x, y)
	return hi ^ lo
}

// finalA is xxHash64's avalanche.
func finalA(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xC2B2AE3D27D4EB4F
	h ^= h >> 29
	h *= 0x165667B19E3779F9
	h ^= h >> 32
	return h
}

// finalB is MurmurHash3's fmix64.
func finalB(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xFF51AFD7ED558CCD
	h ^= h >> 33
	h *= 0xC4CEB9FE1A85EC53
	h ^= h >> 33
	return h
}
