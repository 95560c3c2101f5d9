package facts

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sparkpulse/sparkpulse/statefile"
)

// Durability is where the store keeps its journal and checkpoint, and how
// it asks InfluxDB what it holds (doc.go).
type Durability struct {
	Journal string // the journal file's path
	// Save replaces the checkpoint atomically with what write writes (the
	// checkpoint is what Load reads).
	Save func(write func(io.Writer) error) error
	// Stored, when set, says for each point of lines (line protocol)
	// whether InfluxDB holds a point at its series and time already: the
	// journal's points it holds are not sent again. On an error, all are.
	Stored func(ctx context.Context, lines []byte) ([]bool, error)
	// StoredHistory is Stored for the history points, where the History
	// sink writes them.
	StoredHistory func(ctx context.Context, lines []byte) ([]bool, error)
}

// InDir keeps the journal and the checkpoint in the state directory dir,
// as its files journal and checkpoint, the checkpoint replaced atomically
// (statefile.Replace; statefile.Read reads it for Load). Stored is the
// caller's to set.
func InDir(dir, journal, checkpoint string) Durability {
	return Durability{
		Journal: filepath.Join(dir, journal),
		Save:    func(write func(io.Writer) error) error { return statefile.Replace(dir, checkpoint, write) },
	}
}

type journal struct {
	mu   sync.Mutex // held from a record's append until its facts are recorded (Write)
	cfg  Durability
	f    journalFile
	size int64 // the length of the whole records in f
	// pending: the last run's records, until Resend has handed their
	// points on; no checkpoint meanwhile.
	pending []record
	last    time.Time // of the last checkpoint
	buf     bytes.Buffer
}

// journalFile is the journal's file (an *os.File).
type journalFile interface {
	io.WriteSeeker
	io.Closer
	Sync() error
	Truncate(size int64) error
}

// record is one batch in the journal: one emit's facts of one
// application, with its points.
type record struct {
	App   string              `json:"a"`
	Facts []Key               `json:"f,omitempty"`
	Snaps map[string]Snapshot `json:"x,omitempty"`
	N     int                 `json:"n"`
	Lines string              `json:"l"`
	// The history points (Batch.History), when there are.
	HN      int    `json:"hn,omitempty"`
	History string `json:"h,omitempty"`
}

// journalVersion marks each record line of this format; a line of version
// 1 has no mark (doc.go).
const journalVersion = "2"

// append writes and syncs a record as a line: its version, its checksum,
// its JSON. Called with mu held.
func (j *journal) append(r record) error {
	payload, err := json.Marshal(r)
	if err != nil {
		return err
	}
	j.buf.Reset()
	fmt.Fprintf(&j.buf, "%s %08x ", journalVersion, statefile.Checksum(payload))
	j.buf.Write(payload)
	j.buf.WriteByte('\n')
	_, err = j.f.Write(j.buf.Bytes())
	if err == nil {
		err = j.f.Sync()
	}
	if err != nil {
		// Cut back to the last whole record (a full disk may have taken
		// part of this one), so that the next is appended after it.
		if terr := j.f.Truncate(j.size); terr == nil {
			j.f.Seek(j.size, io.SeekStart)
		}
		return err
	}
	j.size += int64(j.buf.Len())
	return nil
}

// parseRecord reads a line append wrote, or one of version 1 (an older
// sparkpulse's: no version, CRC-32 IEEE); false when it fails its
// checksum or does not decode.
func parseRecord(line []byte) (record, bool) {
	var r record
	line = bytes.TrimSuffix(line, []byte("\n"))
	checksum := statefile.Checksum
	if v2, ok := bytes.CutPrefix(line, []byte(journalVersion+" ")); ok {
		line = v2
	} else {
		checksum = func(b ...[]byte) uint32 { return crc32.ChecksumIEEE(b[0]) }
	}
	sum, payload, ok := bytes.Cut(line, []byte(" "))
	if !ok || len(sum) != 8 || fmt.Sprintf("%08x", checksum(payload)) != string(sum) {
		return r, false
	}
	return r, json.Unmarshal(payload, &r) == nil
}

// Recover reads the journal the last run left into the ledger, after
// Load, and opens the journal for this run. Call it before the first
// Write, and Resend beside polling: it reads a local file, so that a
// start opens its listeners at once. It returns the records read.
func (s *Store) Recover(d Durability) (int, error) {
	f, err := statefile.OpenFile(d.Journal, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return 0, fmt.Errorf("annotate: facts journal: %w", err)
	}
	var records []record
	good := int64(0) // the end of the last whole line
	br := bufio.NewReader(f)
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			break // io.EOF, or a record cut short: it was never handed on
		}
		r, ok := parseRecord(line)
		if !ok {
			s.damaged.Add(1)
			s.cfg.Log.Warn("facts journal: a damaged record is skipped, the records after it are kept", zap.String("file", d.Journal),
				zap.Int64("offset", good), zap.Int("bytes", len(line)))
		} else {
			records = append(records, r)
		}
		good += int64(len(line))
	}
	// A record cut short goes: the next record must not be appended to
	// it.
	if err := f.Truncate(good); err == nil {
		_, err = f.Seek(good, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return 0, fmt.Errorf("annotate: facts journal: %w", err)
	}
	now := s.cfg.Now()
	for _, r := range records {
		s.Record(r.App, r.Facts, r.Snaps, now)
	}
	s.journal = &journal{cfg: d, f: f, size: good}
	if len(records) == 0 {
		s.journal.last = s.cfg.Now()
	} else {
		// The first checkpoint after Resend comes as soon as the points
		// sent again are delivered: a second crash then sends none of
		// them again.
		s.journal.pending = records
	}
	return len(records), nil
}

const (
	// settleDelay is how long a start waits before it looks again for
	// the journal's points InfluxDB did not seem to hold.
	settleDelay = time.Second
	// askTries is how often a record's points are asked for, askBackoff,
	// twice it, … apart: 1 s in all (Resend runs beside ingest: it can
	// be patient).
	askTries   = 5
	askBackoff = 100 * time.Millisecond
	// askGiveUp is how many records in a row InfluxDB fails to answer
	// for before the rest are sent again without asking.
	askGiveUp = 3
)

// Resend hands the points of the records Recover read to the sink again:
// those InfluxDB does not hold (Durability.Stored), all of them where it
// cannot tell. It runs beside ingest and polling: the ledger holds the
// records' facts already, so none is made again, and the journal is not
// emptied (Checkpoint) until Resend is done. Stopped by ctx, which bounds
// every wait, it leaves the journal as it is, and the next start sends
// them again. It returns the points sent again.
func (s *Store) Resend(ctx context.Context) (int, error) {
	j := s.journal
	if j == nil {
		return 0, nil
	}
	j.mu.Lock()
	records := j.pending
	j.mu.Unlock()
	if len(records) == 0 {
		return 0, nil
	}
	// A record's points, and its history points: each part asked for
	// where its sink writes, and sent there again.
	type part struct {
		app    string
		lines  []byte
		n      int
		sink   Sink
		asker  func(ctx context.Context, lines []byte) ([]bool, error)
		stored []bool // nil: not known
	}
	var parts []part
	total := 0
	for _, r := range records {
		if r.N > 0 {
			parts = append(parts, part{app: r.App, lines: []byte(r.Lines), n: r.N, sink: s.cfg.Sink, asker: j.cfg.Stored})
		}
		if r.HN > 0 && s.cfg.History != nil {
			parts = append(parts, part{app: r.App, lines: []byte(r.History), n: r.HN, sink: s.cfg.History, asker: j.cfg.StoredHistory})
		}
		total += r.N + r.HN
	}
	ask, missing, failed := true, false, 0
	for i := range parts {
		pt := &parts[i]
		if !ask || pt.asker == nil {
			continue
		}
		stored, err := s.askStored(ctx, pt.asker, pt.lines, pt.n, askTries)
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if err != nil {
			// A busy InfluxDB may fail one record's questions: only
			// its points are sent again. One that fails several
			// records in a row is down, and is not asked for the rest.
			failed++
			ask = failed < askGiveUp
			s.cfg.Log.Warn("could not tell which of a journal record's points InfluxDB holds: they are sent again, with the same values",
				zap.String("app", pt.app), zap.Bool("asking_for_the_rest", ask), zap.Error(err))
			continue
		}
		failed = 0
		pt.stored = stored
		missing = missing || slices.Contains(stored, false)
	}
	// A request the last run had sent when it was killed may be taken
	// after this start first looks: those InfluxDB seemed not to hold are
	// looked for once more, a moment later, before they are sent again.
	if ask && missing {
		if !sleep(ctx, settleDelay) {
			return 0, ctx.Err()
		}
		for i := range parts {
			if pt := &parts[i]; pt.stored != nil && slices.Contains(pt.stored, false) {
				if again, err := s.askStored(ctx, pt.asker, pt.lines, pt.n, 1); err == nil {
					for k := range pt.stored {
						pt.stored[k] = pt.stored[k] || again[k]
					}
				}
			}
		}
	}
	sent := 0
	for _, pt := range parts {
		if ctx.Err() != nil {
			return sent, ctx.Err()
		}
		lines, n := unstoredLines(pt.lines, pt.n, pt.stored)
		if n > 0 && !pt.sink.Append(lines, true) {
			return sent, errors.New("annotate: the sink closed while the journal's points were handed to it again")
		}
		sent += n
	}
	j.mu.Lock()
	j.pending = nil
	j.mu.Unlock()
	if total > 0 {
		s.cfg.Log.Info("the journal's points InfluxDB did not hold are sent again", zap.Int("records", len(records)),
			zap.Int("points", total), zap.Int("sent_again", sent))
	}
	return sent, nil
}

// askStored asks InfluxDB (stored) which of the n points of lines it
// holds, up to tries times (it may still be taking the last run's cut
// requests), each question bounded by Timeout.
func (s *Store) askStored(ctx context.Context, stored func(context.Context, []byte) ([]bool, error), lines []byte, n, tries int) ([]bool, error) {
	var held []bool
	var err error
	for try := range tries {
		if try > 0 && !sleep(ctx, time.Duration(try)*askBackoff) {
			return nil, ctx.Err()
		}
		qctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		held, err = stored(qctx, lines)
		cancel()
		if err == nil && len(held) != n {
			err = fmt.Errorf("%d answers for %d points", len(held), n)
		}
		if err == nil {
			return held, nil
		}
	}
	return nil, err
}

// sleep waits d, and reports false when ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// unstoredLines keeps the n points of lines that stored says InfluxDB
// does not hold; all of them when stored is nil.
func unstoredLines(lines []byte, n int, stored []bool) ([]byte, int) {
	if stored == nil {
		return lines, n
	}
	parts := bytes.SplitAfter(lines, []byte("\n"))
	if len(parts) != n+1 { // texts are collapsed to one line: a point per line
		return lines, n
	}
	var out []byte
	kept := 0
	for i, line := range parts[:n] {
		if !stored[i] {
			out = append(out, line...)
			kept++
		}
	}
	return out, kept
}
