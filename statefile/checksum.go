package statefile

import (
	"hash"
	"hash/crc32"
)

// Every file sparkpulse keeps in state-dir checks its content with one
// checksum, CRC-32C (Castagnoli): the delta baselines, the ingest log, the
// disk queue's segments and head, the facts journal and the facts
// written. CPUs compute it in hardware (SSE4.2, ARMv8 CRC), and it
// detects every burst error up to 32 bits, as a torn or flipped sector
// makes. Each file also starts with (or, for a text journal, carries in
// each record) its own format version, so that a reader tells an older
// format from damage; docs/operations.md lists the files.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum is the CRC-32C of the concatenation of parts.
func Checksum(parts ...[]byte) uint32 {
	var c uint32
	for _, p := range parts {
		c = crc32.Update(c, castagnoli, p)
	}
	return c
}

// NewChecksum returns a CRC-32C hash for content written or read in
// pieces.
func NewChecksum() hash.Hash32 { return crc32.New(castagnoli) }
