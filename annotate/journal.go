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
// A record cut short by the crash fails its checksum and is ignored, with
// what follows it: it was never handed to the sink.

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
	f    *os.File
	last time.Time // of the last checkpoint
	buf  bytes.Buffer
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
	if _, err := j.f.Write(j.buf.Bytes()); err != nil {
		return err
	}
	return j.f.Sync()
}

// Recover reads the journal left by the last run into the ledger, after
// LoadFacts, hands its points to the sink again, and opens the journal
// for this run. Call it before Run. It returns the records replayed.
func (p *Poller) Recover(d Durability) (int, error) {
	f, err := os.OpenFile(d.Journal, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return 0, fmt.Errorf("annotate: facts journal: %w", err)
	}
	var records []journalRecord
	good := int64(0)
	br := bufio.NewReader(f)
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			break // io.EOF, or a record cut short: it was never handed on
		}
		r, ok := parseRecord(line)
		if !ok {
			p.log.Warn("facts journal damaged: the records from here on are ignored", zap.String("file", d.Journal), zap.Int64("offset", good))
			break
		}
		records = append(records, r)
		good += int64(len(line))
	}
	// What follows the last good record goes: the next record must not
	// be appended to a torn one.
	if err := f.Truncate(good); err == nil {
		_, err = f.Seek(good, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return 0, fmt.Errorf("annotate: facts journal: %w", err)
	}
	nowMs := p.cfg.Now().UnixMilli()
	for _, r := range records {
		p.facts.record(r.App, r.Facts, r.Snaps, nowMs)
	}
	// The first round checkpoints as soon as the points sent again are
	// delivered: a second crash then sends none of them again.
	p.journal = &journal{cfg: d, f: f}
	if len(records) == 0 {
		p.journal.last = p.cfg.Now()
	}
	total, again := 0, 0
	defer func() {
		if total > 0 {
			p.log.Info("the journal's points InfluxDB did not hold are sent again", zap.Int("points", total), zap.Int("sent_again", again))
		}
	}()
	ask := d.Stored != nil
	for _, r := range records {
		lines, n := []byte(r.Lines), r.N
		total += n
		if ask && n > 0 {
			// InfluxDB not answering for one record is not asked for the
			// rest: a start must not wait on it record after record.
			lines, n, ask = p.unstored(d, lines, n)
		}
		again += n
		if n > 0 && !p.cfg.Sink.Append(lines, true) {
			return len(records), errors.New("annotate: the sink closed while the journal's points were handed to it again")
		}
	}
	return len(records), nil
}

// settleDelay is how long a start waits before it looks again for the
// journal's points InfluxDB did not seem to hold.
const settleDelay = time.Second

// unstored keeps the n points of lines that InfluxDB does not hold; all of
// them when it cannot tell, and then false.
func (p *Poller) unstored(d Durability, lines []byte, n int) ([]byte, int, bool) {
	var stored []bool
	var err error
	for try := range 3 { // InfluxDB may still be taking the last run's cut requests
		if try > 0 {
			time.Sleep(time.Duration(try) * 200 * time.Millisecond)
		}
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.Timeout)
		stored, err = d.Stored(ctx, lines)
		cancel()
		if err == nil {
			break
		}
	}
	if err != nil || len(stored) != n {
		p.log.Warn("could not tell which of the journal's points InfluxDB holds: all are sent again, with the same values", zap.Error(err))
		return lines, n, false
	}
	// A request the last run had sent when it was killed may be taken
	// after this start first looks: those InfluxDB seemed not to hold are
	// looked for once more, a moment later, before they are sent again.
	if slices.Contains(stored, false) {
		time.Sleep(settleDelay)
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.Timeout)
		again, err := d.Stored(ctx, lines)
		cancel()
		if err == nil && len(again) == n {
			for i := range stored {
				stored[i] = stored[i] || again[i]
			}
		}
	}
	parts := bytes.SplitAfter(lines, []byte("\n"))
	if len(parts) != n+1 { // texts are collapsed to one line: a point per line
		return lines, n, true
	}
	var out []byte
	kept := 0
	for i, line := range parts[:n] {
		if !stored[i] {
			out = append(out, line...)
			kept++
		}
	}
	return out, kept, true
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
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.Timeout)
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
	if err := j.cfg.Save(p.facts.Save); err != nil {
		return false, err
	}
	if err := j.f.Truncate(0); err != nil {
		return false, fmt.Errorf("annotate: emptying the facts journal: %w", err)
	}
	if _, err := j.f.Seek(0, io.SeekStart); err != nil {
		return false, err
	}
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
