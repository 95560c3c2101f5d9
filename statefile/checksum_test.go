package statefile

import (
	"hash/crc32"
	"testing"
)

// The state files' checksum is CRC-32C: its check value (RFC 3720, B.4:
// "123456789" → e3069283) whole, in parts, and through the hash.
func TestChecksum(t *testing.T) {
	const check = 0xe3069283
	if got := Checksum([]byte("123456789")); got != check {
		t.Errorf("Checksum = %08x, want %08x", got, check)
	}
	if got := Checksum([]byte("1234"), nil, []byte("56789")); got != check {
		t.Errorf("Checksum in parts = %08x", got)
	}
	h := NewChecksum()
	h.Write([]byte("12345"))
	h.Write([]byte("6789"))
	if got := h.Sum32(); got != check {
		t.Errorf("NewChecksum = %08x", got)
	}
	if crc32.ChecksumIEEE([]byte("123456789")) == check {
		t.Error("IEEE and Castagnoli agree: the test cannot tell them apart")
	}
}
