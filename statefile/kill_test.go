package statefile_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/statefile"
	"github.com/sparkpulse/sparkpulse/statefile/statefiletest"
)

// A file replaced over and over, by a process killed at random moments,
// is always one whole generation: its checksum holds and its body is that
// generation's. The next Replace removes what the killed one left.
func TestKilledDuringReplace(t *testing.T) {
	const size = 1 << 20 // written in many pieces
	statefiletest.KillDuring(t, "replace", 12, 20*time.Millisecond, func(dir string, ready func()) {
		for gen := uint64(1); ; gen++ {
			err := statefile.Replace(dir, "f", func(w io.Writer) error {
				body := bytes.Repeat([]byte{byte(gen)}, size)
				for i := 0; i < size; i += 4096 {
					if _, err := w.Write(body[i : i+4096]); err != nil {
						return err
					}
				}
				tail := binary.LittleEndian.AppendUint64(nil, gen)
				_, err := w.Write(binary.LittleEndian.AppendUint32(tail, statefile.Checksum(body, tail)))
				return err
			})
			if err != nil {
				panic(err)
			}
			if gen == 1 {
				ready()
			}
		}
	}, func(t *testing.T, dir string, round int) {
		var got []byte
		found, err := statefile.Read(dir, "f", func(r io.Reader) (err error) {
			got, err = io.ReadAll(r)
			return err
		})
		if !found || err != nil || len(got) != size+12 {
			t.Fatalf("round %d: found %v, %v, %d bytes", round, found, err, len(got))
		}
		body, tail := got[:size], got[size:size+8]
		gen := binary.LittleEndian.Uint64(tail)
		if statefile.Checksum(body, tail) != binary.LittleEndian.Uint32(got[size+8:]) || !bytes.Equal(body, bytes.Repeat([]byte{byte(gen)}, size)) {
			t.Fatalf("round %d: generation %d is not whole", round, gen)
		}
		if left, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(left) > 0 {
			t.Logf("round %d: killed mid-write, generation %d whole, %s left", round, gen, filepath.Base(left[0]))
		}
		if err := statefile.Replace(dir, "f", func(w io.Writer) error { _, err := w.Write(got); return err }); err != nil {
			t.Fatal(err)
		}
		if left, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(left) != 0 {
			t.Fatalf("round %d: left %q", round, left)
		}
	})
}
