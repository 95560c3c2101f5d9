package delta

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/statefile"
)

func saved(t testing.TB, tr *Tracker, b book, now int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := tr.Save(&buf, now, b.states(tr)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// restore makes a book of the loaded states, as series seen after a
// restart claim them.
func restore(tr *Tracker, now int64, keys ...string) book {
	b := book{}
	for _, k := range keys {
		st := Unknown()
		if tr.Restore([]byte(k), "", &st, now) {
			b[k] = &st
		}
	}
	return b
}

// TestSaveLoad: restored series keep their baseline, even within the new
// tracker's grace period (rule 5 does not apply to them).
func TestSaveLoad(t *testing.T) {
	old, ob := New(Settings{FirstSampleGrace: NoGrace}, t0), book{}
	for i, k := range []string{"a", "b", "c"} {
		ob.update(old, k, float64(100*(i+1)), at(0), at(0))
	}
	ob.update(old, "a", 150, at(10), at(10))
	ob["unknown"] = new(State)
	*ob["unknown"] = Unknown() // no baseline: not saved
	file := saved(t, old, ob, at(10))

	restart := t0.Add(60 * time.Second)
	tr := New(Settings{}, restart)
	n, err := tr.Load(bytes.NewReader(file), at(60))
	if err != nil || n != 3 {
		t.Fatalf("Load = %d, %v; want 3 series", n, err)
	}
	b := restore(tr, at(70), "a", "b", "c", "unknown")
	if len(b) != 3 || tr.Len() != 3 {
		t.Fatalf("restored %d, Len %d; want a, b and c", len(b), tr.Len())
	}
	if got := b.update(tr, "a", 160, at(70), at(70)); !sameSample(got, delta(10, 10.0/60)) {
		t.Errorf("a after restore: %+v", got)
	}
	if got := b.update(tr, "b", 50, at(70), at(70)); !sameSample(got, reset(50, 50.0/70)) {
		t.Errorf("b after restore: %+v", got)
	}
	// The saved tracker's start holds: its grace is over, and a series it
	// never saw is new (the restart's own grace would lose its work).
	if got := b.update(tr, "d", 5, at(70), at(70)); got.Outcome != FirstNew || got.Delta != 5 {
		t.Errorf("unsaved series after the first run's grace: %+v", got)
	}
	if got := b.update(tr, "c", 300, at(0), at(70)); got.Outcome != OutOfOrder {
		t.Errorf("c's saved timestamp again: %+v", got)
	}
	st := Unknown()
	if tr.Restore([]byte("a"), "", &st, at(70)) {
		t.Error("a state restored twice")
	}

	// An empty tracker saves and loads too.
	n, err = New(Settings{}, t0).Load(bytes.NewReader(saved(t, New(Settings{}, t0), book{}, at(0))), at(1))
	if n != 0 || err != nil {
		t.Errorf("empty state: %d, %v", n, err)
	}
}

// TestLoadFilters: series idle for longer than IdleTTL are skipped,
// MaxSeries is respected, and what is not claimed within IdleTTL of the
// start is let go.
func TestLoadFilters(t *testing.T) {
	set := Settings{FirstSampleGrace: NoGrace, IdleTTL: 10 * time.Minute}
	old, ob := New(set, t0), book{}
	ob.update(old, "live", 1, at(0), at(0))
	file := saved(t, old, ob, at(550))
	// Entries carry the save time as their last sight: a file of one entry
	// seen at 99 s, edited from the one above.
	idle := bytes.Clone(file)
	binary.LittleEndian.PutUint64(idle[headerSize+seedSize+4+32:], uint64(at(99)))
	idle = withCRC(idle)

	tr := New(set, t0)
	if n, err := tr.Load(bytes.NewReader(idle), at(700)); n != 0 || err != nil {
		t.Fatalf("Load of a series idle 600s+ = %d, %v; want nothing", n, err)
	}
	if n, err := tr.Load(bytes.NewReader(file), at(700)); n != 1 || err != nil {
		t.Fatalf("Load = %d, %v", n, err)
	}
	st := Unknown()
	if tr.Restore([]byte("live"), "", &st, at(0)+int64(10*time.Minute)+1) || st.Known() {
		t.Error("restored IdleTTL after the start")
	}

	two := book{}
	for _, k := range []string{"a", "b", "c"} {
		two.update(old, k, 1, at(0), at(0))
	}
	tr = New(Settings{IdleTTL: 10 * time.Minute, MaxSeries: 2}, t0)
	if n, err := tr.Load(bytes.NewReader(saved(t, old, two, at(0))), at(1)); n != 2 || err != nil {
		t.Fatalf("Load at MaxSeries 2 = %d, %v", n, err)
	}
}

func TestLoadStale(t *testing.T) {
	set := Settings{IdleTTL: 10 * time.Minute}
	old, ob := New(set, t0), book{}
	ob.update(old, "a", 1, at(0), at(0))
	file := saved(t, old, ob, at(0))

	tr := New(set, t0)
	if n, err := tr.Load(bytes.NewReader(file), at(600)); n != 1 || err != nil {
		t.Fatalf("saved exactly IdleTTL ago: %d, %v", n, err)
	}
	tr = New(set, t0)
	n, err := tr.Load(bytes.NewReader(file), at(2*3600+1))
	if !errors.Is(err, ErrStale) || n != 0 || len(tr.restored) != 0 {
		t.Fatalf("Load = %d, %v, kept %d; want ErrStale and nothing", n, err, len(tr.restored))
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
	binary.LittleEndian.PutUint32(file[n:], statefile.Checksum(file[:n]))
	return file
}

func TestLoadCorrupt(t *testing.T) {
	old, ob := New(Settings{FirstSampleGrace: NoGrace}, t0), book{}
	for _, k := range []string{"a", "b", "c", "d"} {
		ob.update(old, k, 1, at(0), at(0))
	}
	good := saved(t, old, ob, at(0))
	edit := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }

	for _, tc := range []struct {
		name string
		file []byte
		want string
	}{
		{"empty", nil, "truncated at byte 0, in the header"},
		{"not a state file", []byte("# sparkpulse config\n[delta]\nrules = 1\n"), `bad magic "# sparkp"`},
		{"version 7", edit(func(b []byte) []byte { b[8] = 7; return b }), "unsupported version 7 (want 6)"},
		{"version 0", edit(func(b []byte) []byte { b[8] = 0; return b }), "unsupported version 0 (want 6)"},
		{"version 5", edit(func(b []byte) []byte { b[8] = 5; return withCRC(b) }), "checksum mismatch"}, // 5 is checked with CRC-32 (IEEE)
		{"flipped bit", edit(func(b []byte) []byte { b[headerSize+seedSize+4+20] ^= 0x10; return b }), "checksum mismatch"},
		{"flipped seed bit", edit(func(b []byte) []byte { b[headerSize+3] ^= 0x10; return b }), "checksum mismatch"},
		{"bad checksum", edit(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), "checksum mismatch"},
		{"trailing data", append(append([]byte(nil), good...), 0), "data after the checksum"},
		{"total disagrees", edit(func(b []byte) []byte { b[len(b)-12]++; return withCRC(b) }), "4 entries, total says 5"},
		{"no seed", good[:headerSize+5], "truncated at byte 25, in the seed"},
		{"entry cut", good[:headerSize+seedSize+4+entrySize+7], "truncated at byte 103, in entry 1"},
		{"no checksum", good[:len(good)-4], "truncated at byte"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(Settings{}, t0)
			n, err := tr.Load(bytes.NewReader(tc.file), at(1))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "delta: load state: ") {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
			if n != 0 || len(tr.restored) != 0 {
				t.Errorf("restored %d (kept %d) from a bad file", n, len(tr.restored))
			}
		})
	}
	// Every truncation is an error and restores nothing.
	for i := range len(good) {
		tr := New(Settings{}, t0)
		if n, err := tr.Load(bytes.NewReader(good[:i]), at(1)); err == nil || n != 0 || len(tr.restored) != 0 {
			t.Fatalf("file cut at %d: %d, %v", i, n, err)
		}
	}
}

// TestLoadOldFormat: a state an older version saved (testdata holds one
// of version 2, written by it) is refused as such, and keeps nothing.
func TestLoadOldFormat(t *testing.T) {
	v2, err := os.ReadFile("testdata/version2.state")
	if err != nil {
		t.Fatal(err)
	}
	v1 := bytes.Clone(v2)
	v1[8] = 1
	for _, file := range [][]byte{v2, v1} {
		tr := New(Settings{}, t0)
		seed := tr.seed
		n, err := tr.Load(bytes.NewReader(file), at(11))
		if !errors.Is(err, ErrOldFormat) || n != 0 || len(tr.restored) != 0 || tr.seed != seed {
			t.Errorf("version %d: Load = %d, %v, kept %d; want ErrOldFormat and nothing", file[8], n, err, len(tr.restored))
		}
		if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("version %d, this version reads %d", file[8], stateVersion)) {
			t.Errorf("error %q does not name the versions", err)
		}
	}
}

// TestSeedSaved: the state keeps the seed its IDs were made with, so that
// the next run makes the same IDs; a damaged or stale file leaves the
// tracker's own.
func TestSeedSaved(t *testing.T) {
	k := []byte("spark\x00executor,applicationid=app-1 cpuTime.count=")
	old := New(Settings{FirstSampleGrace: NoGrace}, t0)
	st := Unknown()
	old.Update(&st, "", 1, at(0), at(0))
	file := saved(t, old, book{}, at(0))
	var buf bytes.Buffer
	if err := old.Save(&buf, at(0), func(yield func(ID, State) bool) { yield(old.ID(k), st) }); err != nil {
		t.Fatal(err)
	}
	tr := New(Settings{}, t0)
	if tr.ID(k) == old.ID(k) {
		t.Fatal("two trackers share a seed")
	}
	if n, err := tr.Load(&buf, at(1)); n != 1 || err != nil {
		t.Fatalf("Load = %d, %v", n, err)
	}
	if tr.ID(k) != old.ID(k) {
		t.Error("the loaded tracker makes other IDs than the one that saved")
	}
	got := Unknown()
	if !tr.Restore(k, "", &got, at(1)) || got != st {
		t.Errorf("restored %v, want %v", got, st)
	}

	tr = New(Settings{IdleTTL: time.Minute}, t0)
	own := tr.seed
	if _, err := tr.Load(bytes.NewReader(file), at(3600)); !errors.Is(err, ErrStale) || tr.seed != own {
		t.Errorf("stale file: %v, seed %#x (own %#x)", err, tr.seed, own)
	}
	file[len(file)-1] ^= 1
	if _, err := tr.Load(bytes.NewReader(file), at(1)); err == nil || tr.seed != own {
		t.Errorf("damaged file: %v, seed %#x (own %#x)", err, tr.seed, own)
	}
}

// A version 5 file, checked with CRC-32 (IEEE) where version 6 has the
// CRC-32C of every state file, is read with its key; the next save is
// version 6 and reads back; a version 6 file with an IEEE checksum is
// damage.
func TestLoadVersion5(t *testing.T) {
	k := []byte("spark\x00executor,applicationid=app-1 cpuTime.count=")
	old := New(Settings{FirstSampleGrace: NoGrace}, t0)
	st := Unknown()
	old.Update(&st, "", 1, at(0), at(0))
	var buf bytes.Buffer
	if err := old.Save(&buf, at(0), func(yield func(ID, State) bool) { yield(old.ID(k), st) }); err != nil {
		t.Fatal(err)
	}
	v6 := buf.Bytes()
	if binary.LittleEndian.Uint32(v6[8:]) != 6 {
		t.Fatalf("saved as version %d", binary.LittleEndian.Uint32(v6[8:]))
	}
	v5 := bytes.Clone(v6)
	binary.LittleEndian.PutUint32(v5[8:], 5)
	n := len(v5) - 4
	binary.LittleEndian.PutUint32(v5[n:], crc32.ChecksumIEEE(v5[:n]))

	tr := New(Settings{}, t0)
	if n, err := tr.Load(bytes.NewReader(v5), at(1)); n != 1 || err != nil || tr.ID(k) != old.ID(k) {
		t.Fatalf("version 5: Load = %d, %v; key kept %v", n, err, tr.ID(k) == old.ID(k))
	}
	got := Unknown()
	if !tr.Restore(k, "", &got, at(1)) || got != st {
		t.Errorf("version 5: restored %v, want %v", got, st)
	}
	next := saved(t, tr, book{string(k): &got}, at(2))
	if n, err := New(Settings{}, t0).Load(bytes.NewReader(next), at(3)); n != 1 || err != nil || binary.LittleEndian.Uint32(next[8:]) != 6 {
		t.Errorf("saved again: version %d, Load = %d, %v", binary.LittleEndian.Uint32(next[8:]), n, err)
	}
	ieee6 := bytes.Clone(v5)
	binary.LittleEndian.PutUint32(ieee6[8:], 6)
	binary.LittleEndian.PutUint32(ieee6[n:], crc32.ChecksumIEEE(ieee6[:n]))
	if _, err := New(Settings{}, t0).Load(bytes.NewReader(ieee6), at(1)); err == nil || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Errorf("version 6 with an IEEE checksum: %v", err)
	}
}

type failWriter struct{ after int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.after -= len(p); w.after < 0 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

// many returns n series with a baseline.
func many(tr *Tracker, n int) book {
	b := book{}
	for i := range n {
		b.update(tr, fmt.Sprint("spark\x00cpuTime.count,applicationid=app-", i/1000, ",process=", i%1000, " value="), 1, at(0), at(0))
	}
	return b
}

func TestSaveError(t *testing.T) {
	tr := New(Settings{FirstSampleGrace: NoGrace}, t0)
	b := many(tr, 5000)
	for _, after := range []int{0, 100 << 10} {
		if err := tr.Save(&failWriter{after: after}, at(0), b.states(tr)); err == nil || !strings.Contains(err.Error(), "disk full") {
			t.Errorf("Save to a failing writer: %v", err)
		}
	}
}

// BenchmarkSaveLoad: 1e5 series.
func BenchmarkSaveLoad(b *testing.B) {
	tr := New(Settings{FirstSampleGrace: NoGrace}, t0)
	bk := many(tr, 100_000)
	file := saved(b, tr, bk, at(0))
	b.Run("save", func(b *testing.B) {
		b.SetBytes(int64(len(file)))
		for b.Loop() {
			tr.Save(discard{}, at(0), bk.states(tr))
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
	tr, b := New(Settings{FirstSampleGrace: NoGrace}, t0), book{}
	f.Add([]byte{})
	f.Add(saved(f, tr, b, at(0)))
	for _, k := range []string{"a", "b", "c"} {
		b.update(tr, k, 1, at(0), at(0))
	}
	f.Add(saved(f, tr, b, at(0)))
	f.Add([]byte(stateMagic + "\x03\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, file []byte) {
		tr := New(Settings{IdleTTL: time.Hour, MaxSeries: 2}, t0)
		n, err := tr.Load(bytes.NewReader(file), at(0))
		if err != nil && (n != 0 || len(tr.restored) != 0) {
			t.Fatalf("error %v but %d restored", err, n)
		}
		if n != len(tr.restored) || n > 2 {
			t.Fatalf("restored %d, kept %d, MaxSeries 2", n, len(tr.restored))
		}
		if err == nil && len(file) > 0 {
			// What loaded saves and loads again.
			var buf bytes.Buffer
			if err := tr.Save(&buf, at(0), maps.All(tr.restored)); err != nil {
				t.Fatal(err)
			}
			if m, err := New(Settings{IdleTTL: time.Hour}, t0).Load(&buf, at(0)); m != n || err != nil {
				t.Fatalf("reload: %d, %v; want %d", m, err, n)
			}
		}
	})
}

// legacyState is a state file of version 4 or 3 (3: no start nor mark),
// as those versions wrote it: one baseline, under xxh3's ID of key with
// seed.
func legacyState(version uint32, seed legacySeed, key string, st State, saved, start int64, mark uint64) []byte {
	le := binary.LittleEndian
	b := le.AppendUint32([]byte(stateMagic), version)
	b = le.AppendUint64(b, uint64(saved))
	b = le.AppendUint64(b, uint64(seed))
	if version == 4 {
		b = le.AppendUint64(le.AppendUint64(b, uint64(start)), mark)
	}
	id := seed.hash([]byte(key))
	b = le.AppendUint32(b, 1)
	b = le.AppendUint64(le.AppendUint64(b, id[0]), id[1])
	b = le.AppendUint64(b, math.Float64bits(st.value))
	b = le.AppendUint64(le.AppendUint64(b, uint64(st.ts)), uint64(saved))
	b = le.AppendUint32(b, 0)
	b = le.AppendUint64(b, 1)
	return le.AppendUint32(b, crc32.ChecksumIEEE(b))
}

// A file of version 4 or 3 (xxh3's IDs; 3 before the ingest log too) is
// read: its baselines go to the series whose keys hash to them under its
// seed, the tracker keeps a key of its own for what it saves next, and
// version 3 gives no mark and this run's start.
func TestLoadLegacyVersions(t *testing.T) {
	st := State{value: 100, ts: at(0)}
	for _, v := range []uint32{4, 3} {
		restart := t0.Add(60 * time.Second)
		tr := New(Settings{}, restart)
		own := tr.seed
		file := legacyState(v, 0x5eed, "spark\x00executor,applicationid=app-1 cpuTime=", st, at(10), at(0), 9)
		if n, err := tr.Load(bytes.NewReader(file), at(60)); n != 1 || err != nil {
			t.Fatalf("version %d: Load = %d, %v", v, n, err)
		}
		if tr.seed != own {
			t.Errorf("version %d: the tracker took the file's seed as its key", v)
		}
		got := Unknown()
		if !tr.Restore([]byte("spark\x00executor,applicationid=app-1 cpuTime="), "app-1", &got, at(61)) || got != st {
			t.Errorf("version %d: restored %v, want %v", v, got, st)
		}
		wantMark, wantStart := uint64(9), at(0)
		if v == 3 {
			wantMark, wantStart = 0, restart.UnixNano()
		}
		if tr.Mark() != wantMark || tr.start != wantStart {
			t.Errorf("version %d: mark %d, start %d; want %d, %d", v, tr.Mark(), tr.start, wantMark, wantStart)
		}
		// What it saves next is this version's, under its own key.
		b := book{"spark\x00executor,applicationid=app-1 cpuTime=": &got}
		next := saved(t, tr, b, at(70))
		if binary.LittleEndian.Uint32(next[8:]) != stateVersion {
			t.Errorf("version %d: saved as version %d", v, binary.LittleEndian.Uint32(next[8:]))
		}
		again := New(Settings{}, restart)
		if n, err := again.Load(bytes.NewReader(next), at(80)); n != 1 || err != nil || again.seed != own {
			t.Errorf("version %d, saved again: Load = %d, %v; key kept %v", v, n, err, again.seed == own)
		}
	}
}
