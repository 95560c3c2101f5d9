package annotate

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
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sparkpulse/sparkpulse/statefile"
)

// The journal makes the ledger crash-safe. A fact is never written twice
// with different values, and none is lost, even when sparkpulse is killed:
//
//   - Before a poll's points are handed to the sink, a record of them (the
//     facts and executor snapshots, and the points themselves) is
//     appended to the journal and synced to disk.
//   - At start ([Poller.Recover]), the last snapshot of the ledger and the
//     journal's records are read back into the ledger, so no fact is made
//     again; and the journal's points that InfluxDB does not hold
//     (Durability.Stored) are handed to the sink again, as the last run
//     may have died before they reached InfluxDB. Should InfluxDB not
//     answer, all of them are: the very same points, so where one did
//     arrive, InfluxDB holds it twice with the same values, which
//     InfluxDB 3 tolerates (it is different values at one series and time
//     that it may not keep in order).
//   - Once the sink holds nothing (everything handed to it was delivered,
//     or refused), a checkpoint ([Poller.Checkpoint]) saves the ledger as
//     the snapshot and empties the journal: points are re-sent at most
//     from the last checkpoint, a minute at most while InfluxDB keeps up.
//     After a start that sent points again, the first round checkpoints.
//
// A record cut short by the crash (the journal's last line, without its
// newline) was never handed to the sink: it is cut off. An append that
// fails (a full disk) is cut back to the last whole record, so the
// records after it are whole; a whole line that fails its checksum
// anyway (damaged on disk) is skipped, and the records after it are kept.

// Durability configures the journal; see above.
type Durability struct {
	Journal string // the journal file's path
	// Save replaces the ledger's snapshot atomically with what write
	// writes (the snapshot is what LoadFacts reads).
	Save func(write func(io.Writer) error) error
	// Stored, when set, says for each point of lines (line protocol)
	// whether InfluxDB holds a point at its series and time already: the
	// journal's points it holds are not sent again. On an error, all are.
	Stored func(ctx context.Context, lines []byte) ([]bool, error)
}

// checkpointEvery is how often the poller tries a checkpoint.
const checkpointEvery = time.Minute

type journal struct {
	mu   sync.Mutex // held from a record's append until its points are handed on
	cfg  Durability
	f    journalFile
	size int64 // the length of the whole records in f
	// pending: the last run's records, until Resend has handed their
	// points on; no checkpoint meanwhile.
	pending []journalRecord
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

// journalRecord is one poll's facts of one application.
type journalRecord struct {
	App   string              `json:"a"`
	Facts []factKey           `json:"f,omitempty"`
	Snaps map[string]snapshot `json:"x,omitempty"`
	N     int                 `json:"n"`
	Lines string              `json:"l"`
}

// append writes and syncs a record. Called with mu held.
func (j *journal) append(r journalRecord) error {
	payload, err := json.Marshal(r)
	if err != nil {
		return err
	}
	j.buf.Reset()
	fmt.Fprintf(&j.buf, "%08x ", crc32.ChecksumIEEE(payload))
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

// Recover reads the journal left by the last run into the ledger, after
// LoadFacts, and opens the journal for this run. Call it before Run, and
// Resend beside Run: it reads a local file, so that a start opens its
// listeners at once. It returns the records read.
func (p *Poller) Recover(d Durability) (int, error) {
	f, err := statefile.OpenFile(d.Journal, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return 0, fmt.Errorf("annotate: facts journal: %w", err)
	}
	var records []journalRecord
	good := int64(0) // the end of the last whole line
	br := bufio.NewReader(f)
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			break // io.EOF, or a record cut short: it was never handed on
		}
		r, ok := parseRecord(line)
		if !ok {
			p.stats.journalDamaged.Add(1)
			p.log.Warn("facts journal: a damaged record is skipped, the records after it are kept", zap.String("file", d.Journal),
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
	now := p.cfg.Now()
	for _, r := range records {
		p.facts.record(r.App, r.Facts, r.Snaps, now)
	}
	p.journal = &journal{cfg: d, f: f, size: good}
	if len(records) == 0 {
		p.journal.last = p.cfg.Now()
	} else {
		// The first round after Resend checkpoints as soon as the points
		// sent again are delivered: a second crash then sends none of
		// them again.
		p.journal.pending = records
	}
	return len(records), nil
}

// Resend hands the points of the records Recover read to the sink again:
// those InfluxDB does not hold (Durability.Stored), all of them where it
// cannot tell. It runs beside ingest and polling: the ledger holds the
// records' facts already, so none is made again, and the journal is not
// emptied (Checkpoint) until Resend is done. Stopped by ctx, it leaves
// the journal as it is, and the next start sends them again. It returns
// the points sent again.
func (p *Poller) Resend(ctx context.Context) (int, error) {
	j := p.journal
	if j == nil {
		return 0, nil
	}
	j.mu.Lock()
	records := j.pending
	j.mu.Unlock()
	if len(records) == 0 {
		return 0, nil
	}
	type part struct {
		lines  []byte
		n      int
		stored []bool // nil: not known
	}
	parts := make([]part, len(records))
	total := 0
	ask, missing, failed := j.cfg.Stored != nil, false, 0
	for i, r := range records {
		parts[i] = part{lines: []byte(r.Lines), n: r.N}
		total += r.N
		if !ask || r.N == 0 {
			continue
		}
		stored, err := p.askStored(ctx, parts[i].lines, r.N, askTries)
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if err != nil {
			// A busy InfluxDB may fail one record's questions: only
			// its points are sent again. One that fails several
			// records in a row is down, and is not asked for the rest.
			failed++
			ask = failed < askGiveUp
			p.log.Warn("could not tell which of a journal record's points InfluxDB holds: they are sent again, with the same values",
				zap.String("app", r.App), zap.Bool("asking_for_the_rest", ask), zap.Error(err))
			continue
		}
		failed = 0
		parts[i].stored = stored
		missing = missing || slices.Contains(stored, false)
	}
	// A request the last run had sent when it was killed may be taken
	// after this start first looks: those InfluxDB seemed not to hold are
	// looked for once more, a moment later, before they are sent again.
	if ask && missing {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(settleDelay):
		}
		for i := range parts {
			if pt := &parts[i]; pt.stored != nil && slices.Contains(pt.stored, false) {
				if again, err := p.askStored(ctx, pt.lines, pt.n, 1); err == nil {
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
		if n > 0 && !p.cfg.Sink.Append(lines, true) {
			return sent, errors.New("annotate: the sink closed while the journal's points were handed to it again")
		}
		sent += n
	}
	j.mu.Lock()
	j.pending = nil
	j.mu.Unlock()
	if total > 0 {
		p.log.Info("the journal's points InfluxDB did not hold are sent again", zap.Int("records", len(records)),
			zap.Int("points", total), zap.Int("sent_again", sent))
	}
	return sent, nil
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

// askStored asks InfluxDB which of the n points of lines it holds, up to
// tries times (it may still be taking the last run's cut requests).
func (p *Poller) askStored(ctx context.Context, lines []byte, n, tries int) ([]bool, error) {
	var stored []bool
	var err error
	for try := range tries {
		if try > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Duration(try) * askBackoff):
			}
		}
		qctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
		stored, err = p.journal.cfg.Stored(qctx, lines)
		cancel()
		if err == nil && len(stored) != n {
			err = fmt.Errorf("%d answers for %d points", len(stored), n)
		}
		if err == nil {
			return stored, nil
		}
	}
	return nil, err
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

func parseRecord(line []byte) (journalRecord, bool) {
	var r journalRecord
	sum, payload, ok := bytes.Cut(bytes.TrimSuffix(line, []byte("\n")), []byte(" "))
	if !ok || len(sum) != 8 || fmt.Sprintf("%08x", crc32.ChecksumIEEE(payload)) != string(sum) {
		return r, false
	}
	return r, json.Unmarshal(payload, &r) == nil
}

// idler is a sink that can tell whether it holds nothing (influx.Writer).
type idler interface {
	Idle(ctx context.Context) error
}

// Checkpoint saves the ledger as the snapshot and empties the journal,
// when the sink holds nothing: every point recorded in the journal was
// delivered or refused. With force, it does so whatever the sink holds,
// for a shutdown after the sink was closed (what it held went to its disk
// queue). It returns whether it did.
func (p *Poller) Checkpoint(force bool) (bool, error) {
	return p.checkpoint(context.Background(), force)
}

// checkpoint is Checkpoint, whose wait for the sink also ends with ctx.
func (p *Poller) checkpoint(ctx context.Context, force bool) (bool, error) {
	j := p.journal
	if j == nil {
		return false, nil
	}
	if !force {
		idle, ok := p.cfg.Sink.(idler)
		if !ok {
			return false, nil
		}
		// Drain without the lock, then check, under it, that nothing came
		// in meanwhile.
		ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
		err := idle.Idle(ctx)
		cancel()
		if err != nil {
			return false, nil
		}
		if !j.mu.TryLock() {
			return false, nil // a poll is handing points on
		}
		defer j.mu.Unlock()
		done, cancel := context.WithCancel(context.Background())
		cancel()
		if idle.Idle(done) != nil {
			return false, nil
		}
	} else {
		j.mu.Lock()
		defer j.mu.Unlock()
	}
	if j.pending != nil {
		return false, nil // the last run's points are not handed on yet (Resend)
	}
	if err := j.cfg.Save(p.facts.Save); err != nil {
		return false, err
	}
	if err := j.f.Truncate(0); err != nil {
		return false, fmt.Errorf("annotate: emptying the facts journal: %w", err)
	}
	if _, err := j.f.Seek(0, io.SeekStart); err != nil {
		return false, err
	}
	j.size = 0
	j.last = p.cfg.Now()
	return true, nil
}

// CloseJournal closes the journal file.
func (p *Poller) CloseJournal() error {
	if p.journal == nil {
		return nil
	}
	return p.journal.f.Close()
}
