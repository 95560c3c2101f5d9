package delta

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"testing"
	"time"
)

func saved(t testing.TB, tr *Tracker, now int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := tr.Save(&buf, now); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestSaveLoad: restored series keep their baseline, even within the new
// tracker's grace period (rule 5 does not apply to them).
func TestSaveLoad(t *testing.T) {
	old := New(Settings{FirstSampleGrace: NoGrace}, t0)
	for i, k := range []string{"a", "b", "c"} {
		old.Update(id(k), float64(100*(i+1)), at(0), at(0))
	}
	old.Update(id("a"), 150, at(10), at(10))
	file := saved(t, old, at(10))

	restart := t0.Add(60 * time.Second)
	tr := New(Settings{}, restart)
	n, err := tr.Load(bytes.NewReader(file), at(60))
	if err != nil || n != 3 || tr.Len() != 3 {
		t.Fatalf("Load = %d, %v; Len %d; want 3 series", n, err, tr.Len())
	}
	if got := tr.Update(id("a"), 160, at(70), at(70)); !sameSample(got, delta(10, 10.0/60)) {
		t.Errorf("a after restore: %+v", got)
	}
	if got := tr.Update(id("b"), 50, at(70), at(70)); !sameSample(got, reset(50, 50.0/70)) {
		t.Errorf("b after restore: %+v", got)
	}
	if got := tr.Update(id("d"), 5, at(70), at(70)); got.Outcome != FirstUnknown {
		t.Errorf("unsaved series within the grace: %+v", got)
	}
	if got := tr.Update(id("c"), 300, at(0), at(70)); got.Outcome != OutOfOrder {
		t.Errorf("c's saved timestamp again: %+v", got)
	}

	// An empty tracker saves and loads too.
	n, err = New(Settings{}, t0).Load(bytes.NewReader(saved(t, New(Settings{}, t0), at(0))), at(1))
	if n != 0 || err != nil {
		t.Errorf("empty state: %d, %v", n, err)
	}
}

// TestLoadFilters: series idle for longer than IdleTTL are skipped,
// series already tracked are kept as they are, MaxSeries is respected.
func TestLoadFilters(t *testing.T) {
	set := Settings{FirstSampleGrace: NoGrace, IdleTTL: 10 * time.Minute}
	old := New(set, t0)
	old.Update(id("old"), 1, at(0), at(0))
	old.Update(id("edge"), 1, at(0), at(100))
	old.Update(id("live"), 1, at(0), at(500))
	old.Update(id("future"), 1, at(0), at(5000)) // a clock that went back
	file := saved(t, old, at(550))
	now := at(700) // old idle 700s, edge exactly 600s

	tr := New(set, t0)
	if n, err := tr.Load(bytes.NewReader(file), now); n != 3 || err != nil {
		t.Fatalf("Load = %d, %v; want edge, live and future", n, err)
	}
	if got := tr.Update(id("old"), 5, at(710), at(710)); got.Outcome != FirstNew {
		t.Errorf("idle series restored: %+v", got)
	}
	// future's seen was clamped to now, so it goes when idle from now.
	if n := tr.Evict(now + int64(10*time.Minute) + 1); n != 3 {
		t.Errorf("Evict after IdleTTL removed %d of edge, live, future", n)
	}

	tr = New(set, t0)
	tr.Update(id("live"), 42, at(650), at(650))
	if n, err := tr.Load(bytes.NewReader(file), now); n != 2 || err != nil {
		t.Fatalf("Load over a live series = %d, %v; want 2", n, err)
	}
	if got := tr.Update(id("live"), 43, at(660), at(660)); !sameSample(got, delta(1, 0.1)) {
		t.Errorf("live series overwritten by the file: %+v", got)
	}

	tr = New(Settings{IdleTTL: 10 * time.Minute, MaxSeries: 2}, t0)
	if n, err := tr.Load(bytes.NewReader(file), now); n != 2 || err != nil || tr.Len() != 2 {
		t.Fatalf("Load at MaxSeries 2 = %d, %v, Len %d", n, err, tr.Len())
	}
}

func TestLoadStale(t *testing.T) {
	set := Settings{IdleTTL: 10 * time.Minute}
	old := New(set, t0)
	old.Update(id("a"), 1, at(0), at(0))
	file := saved(t, old, at(0))

	tr := New(set, t0)
	if n, err := tr.Load(bytes.NewReader(file), at(600)); n != 1 || err != nil {
		t.Fatalf("saved exactly IdleTTL ago: %d, %v", n, err)
	}
	tr = New(set, t0)
	n, err := tr.Load(bytes.NewReader(file), at(2*3600+1))
	if !errors.Is(err, ErrStale) || n != 0 || tr.Len() != 0 {
		t.Fatalf("Load = %d, %v, Len %d; want ErrStale and nothing", n, err, tr.Len())
	}
	for _, s := range []string{"stale", "2h0m1s ago", "2023-11-14T22:13:20Z", "IdleTTL 10m0s"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
	// A stale file that is also damaged is reported as damaged.
	file[len(file)-1] ^= 1
	if _, err := New(set, t0).Load(bytes.NewReader(file), at(2*3600+1)); errors.Is(err, ErrStale) || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("stale and damaged: %v", err)
	}
}

// withCRC replaces the checksum at the end of file by the right one.
func withCRC(file []byte) []byte {
	n := len(file) - 4
	binary.LittleEndian.PutUint32(file[n:], crc32.ChecksumIEEE(file[:n]))
	return file
}

func TestLoadCorrupt(t *testing.T) {
	old := New(Settings{FirstSampleGrace: NoGrace}, t0)
	for _, k := range []string{"a", "b", "c", "d"} {
		old.Update(id(k), 1, at(0), at(0))
	}
	good := saved(t, old, at(0))
	edit := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }

	for _, tc := range []struct {
		name string
		file []byte
		want string
	}{
		{"empty", nil, "truncated at byte 0, in the header"},
		{"not a state file", []byte("# sparkpulse config\n[delta]\nrules = 1\n"), `bad magic "# sparkp"`},
		{"version 2", edit(func(b []byte) []byte { b[8] = 2; return b }), "unsupported version 2 (want 1)"},
		{"flipped bit", edit(func(b []byte) []byte { b[headerSize+4+20] ^= 0x10; return b }), "checksum mismatch"},
		{"bad checksum", edit(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), "checksum mismatch"},
		{"trailing data", append(append([]byte(nil), good...), 0), "data after the checksum"},
		{"total disagrees", edit(func(b []byte) []byte { b[len(b)-12]++; return withCRC(b) }), "4 entries, total says 5"},
		{"entry cut", good[:headerSize+4+entrySize+7], "truncated at byte 71, in entry 1"},
		{"no checksum", good[:len(good)-4], "truncated at byte"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(Settings{}, t0)
			n, err := tr.Load(bytes.NewReader(tc.file), at(1))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "delta: load state: ") {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
			if n != 0 || tr.Len() != 0 {
				t.Errorf("restored %d (Len %d) from a bad file", n, tr.Len())
			}
		})
	}
	// Every truncation is an error and restores nothing.
	for i := range len(good) {
		tr := New(Settings{}, t0)
		if n, err := tr.Load(bytes.NewReader(good[:i]), at(1)); err == nil || n != 0 || tr.Len() != 0 {
			t.Fatalf("file cut at %d: %d, %v", i, n, err)
		}
	}
}

type failWriter struct{ after int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.after -= len(p); w.after < 0 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

func TestSaveError(t *testing.T) {
	tr := New(Settings{FirstSampleGrace: NoGrace}, t0)
	for _, i := range seriesIDs(5000) {
		tr.Update(i, 1, at(0), at(0))
	}
	for _, after := range []int{0, 100 << 10} {
		if err := tr.Save(&failWriter{after: after}, at(0)); err == nil || !strings.Contains(err.Error(), "disk full") {
			t.Errorf("Save to a failing writer: %v", err)
		}
	}
}

// BenchmarkSaveLoad: 1e5 series.
func BenchmarkSaveLoad(b *testing.B) {
	tr := New(Settings{FirstSampleGrace: NoGrace}, t0)
	for _, i := range seriesIDs(100_000) {
		tr.Update(i, 1, at(0), at(0))
	}
	file := saved(b, tr, at(0))
	b.Run("save", func(b *testing.B) {
		b.SetBytes(int64(len(file)))
		for b.Loop() {
			tr.Save(discard{}, at(0))
		}
	})
	b.Run("load", func(b *testing.B) {
		b.SetBytes(int64(len(file)))
		for b.Loop() {
			New(Settings{}, t0).Load(bytes.NewReader(file), at(0))
		}
	})
}

func FuzzLoad(f *testing.F) {
	tr := New(Settings{FirstSampleGrace: NoGrace}, t0)
	f.Add([]byte{})
	f.Add(saved(f, tr, at(0)))
	for _, k := range []string{"a", "b", "c"} {
		tr.Update(id(k), 1, at(0), at(0))
	}
	f.Add(saved(f, tr, at(0)))
	f.Add([]byte(stateMagic + "\x01\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, file []byte) {
		tr := New(Settings{IdleTTL: time.Hour, MaxSeries: 2}, t0)
		n, err := tr.Load(bytes.NewReader(file), at(0))
		if err != nil && (n != 0 || tr.Len() != 0) {
			t.Fatalf("error %v but %d restored", err, n)
		}
		if n != tr.Len() || n > 2 {
			t.Fatalf("restored %d, Len %d, MaxSeries 2", n, tr.Len())
		}
		if err == nil && len(file) > 0 {
			// What loaded saves and loads again.
			var buf bytes.Buffer
			if err := tr.Save(&buf, at(0)); err != nil {
				t.Fatal(err)
			}
			if m, err := New(Settings{IdleTTL: time.Hour}, t0).Load(&buf, at(0)); m != n || err != nil {
				t.Fatalf("reload: %d, %v; want %d", m, err, n)
			}
		}
	})
}
