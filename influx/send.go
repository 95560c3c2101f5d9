package influx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/influxdata/line-protocol/v2/lineprotocol"
	"go.uber.org/zap"

	"github.com/sparkpulse/sparkpulse/queue"
)

// What to do after a failed request.
type action int

const (
	actRetry     action = iota // same request again after a backoff: the server's trouble
	actFix                     // likewise, but the request itself was refused: logged as something to fix
	actPartial                 // InfluxDB stored the rest: count the dropped points, done
	actSplit                   // refused as a whole over a line: resend each half
	actDropLines               // refused over lines it names: drop them, resend the rest
	actNewSeries               // 1.x max-series-per-database or max-values-per-tag: nothing was stored; resend without the new series
)

// failure is a classified write error.
type failure struct {
	act        action
	kind       string // WriteErrors key: network, 5xx, 429, 4xx
	status     int
	text       string        // the server's message or the network error
	retryAfter time.Duration // from a Retry-After header, 0 if none
	dropped    int           // actPartial: points InfluxDB did not store; actNewSeries: points of new series
	reason     string        // PointsDropped key
	rule       string        // the answerRule that decided
	lines      []int         // actDropLines: the refused lines, 1-based, ascending
}

const firstBackoff = time.Second

// deliver sends data (n lines of b), retrying until it is stored or
// refused, and splitting it when InfluxDB refuses it as a whole. It returns
// false when Close gave up, or when a write fails while the queue drains
// into its disk queue, which keeps b.
func (w *Writer) deliver(b *queue.Batch, lines queue.Lines) bool {
	if lines = w.withoutRefusedSeries(b, lines); lines.Len() == 0 {
		return true
	}
	n, data := lines.Len(), lines.Data
	for attempt := 0; ; attempt++ {
		start := time.Now()
		a, err := w.post(data)
		took := time.Since(start)
		if err == nil && a.status/100 == 2 {
			w.written(b, n, 0, "")
			w.observe(n, took, nil)
			if attempt > 0 {
				w.log.Info("write to InfluxDB succeeded after retrying", zap.Int("attempts", attempt+1), zap.Int("points", n))
			}
			return true
		}
		if w.ctx.Err() != nil {
			return false
		}
		f := classify(a, err, n)
		if f.status == http.StatusRequestEntityTooLarge && len(data) <= tooLargeFloor {
			// No server's limit is that low: it (or a proxy before it)
			// refuses every request for now. The points are kept.
			f.act, f.rule = actRetry, "413 for a small request"
		}
		w.statsMu.Lock()
		w.stats.WriteErrors[f.kind]++
		w.statsMu.Unlock()
		ferr := f.err()

		switch f.act {
		case actPartial:
			dropped := min(f.dropped, n)
			w.written(b, n, dropped, f.reason)
			w.dropLog.Warn("InfluxDB stored part of a batch and refused the rest",
				zap.String("reason", f.reason), zap.Int("dropped", dropped), zap.Int("points", n),
				zap.Int("status", f.status), zap.String("error", f.text))
			w.observe(n, took, ferr)
			return true
		case actNewSeries:
			w.observe(n, took, ferr)
			if n == 1 || f.dropped >= n {
				w.refuseSeries(b, lines, f) // all of them new
				return true
			}
			head, tail := lines.Cut(n / 2)
			return w.deliver(b, head) && w.deliver(b, tail)
		case actDropLines:
			w.observe(n, took, ferr)
			rest := w.withoutLines(b, lines, f)
			return rest.Len() == 0 || w.deliver(b, rest)
		case actSplit:
			w.observe(n, took, ferr)
			if n == 1 {
				if fields, ok := splitFields(lines.Line(0)); ok {
					// A point of many metrics (a wide one): only the field
					// the server will not take is to be lost, not the rest.
					b.Remaining.Add(int64(fields.Len() - 1))
					return w.deliver(b, fields)
				}
				w.refused(b, data, f)
				return true
			}
			head, tail := lines.Cut(n / 2)
			return w.deliver(b, head) && w.deliver(b, tail)
		}

		select {
		case <-w.q.Draining(): // never ready without a disk queue
			w.observe(n, took, ferr)
			return false
		default:
		}
		if f.status == http.StatusNotFound && w.createMissing() {
			w.observe(n, took, ferr)
			continue // created: retried at once
		}
		wait := f.retryAfter
		if wait == 0 {
			wait = backoff(attempt, w.cfg.MaxRetryBackoff)
		}
		w.statsMu.Lock()
		w.stats.Retries++
		w.statsMu.Unlock()
		w.logRetry(f, n, attempt, wait)
		w.observe(n, took, ferr)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-w.ctx.Done():
			t.Stop()
			return false
		case <-w.q.Draining():
			t.Stop()
			return false
		}
	}
}

// post sends one write request, bounded by RequestTimeout and by Close
// giving up.
func (w *Writer) post(data []byte) (answer, error) {
	ctx, cancel := context.WithTimeout(w.ctx, w.cfg.RequestTimeout)
	defer cancel()
	return w.client.write(ctx, w.writeURL, data)
}

// observe reports a finished request to Config.OnBatch, once its outcome
// is counted and logged.
func (w *Writer) observe(n int, took time.Duration, err error) {
	if w.cfg.OnBatch != nil {
		w.cfg.OnBatch(n, took, err)
	}
}

// written records a request InfluxDB accepted, of which dropped points
// were refused.
func (w *Writer) written(b *queue.Batch, n, dropped int, reason string) {
	b.Remaining.Add(-int64(n))
	w.statsMu.Lock()
	w.stats.BatchesWritten++
	w.stats.PointsWritten += uint64(n - dropped)
	if dropped > 0 {
		w.stats.PointsDropped[reason] += uint64(dropped)
	}
	w.statsMu.Unlock()
}

// refused records a single line InfluxDB will not take.
func (w *Writer) refused(b *queue.Batch, data []byte, f failure) {
	b.Remaining.Add(-1)
	w.statsMu.Lock()
	w.stats.PointsDropped[f.reason]++
	w.statsMu.Unlock()
	const maxShown = 256
	line := string(bytes.TrimSuffix(data[:min(len(data), maxShown+1)], []byte("\n")))
	if len(line) > maxShown {
		line = line[:maxShown] + "…"
	}
	w.dropLog.Warn("InfluxDB refused a line", zap.String("reason", f.reason),
		zap.Int("status", f.status), zap.String("error", f.text), zap.String("line", line))
}

// withoutLines returns lines (a request) without those f names, which
// are counted and logged as refused.
func (w *Writer) withoutLines(b *queue.Batch, lines queue.Lines, f failure) queue.Lines {
	var rest queue.Lines
	k := 0
	for i := range lines.Len() {
		if k < len(f.lines) && f.lines[k] == i+1 {
			k++
			if fields, ok := splitFields(lines.Line(i)); ok {
				// Sent again a field a point, as in deliver.
				b.Remaining.Add(int64(fields.Len() - 1))
				rest.AppendLines(fields)
				continue
			}
			w.refused(b, lines.Line(i), f)
		} else {
			rest.AppendLine(lines, i)
		}
	}
	return rest
}

// splitFields is a line of several fields as one point per field, with
// its series and time, or false for a line of one field (or one that does
// not parse). A refused line is split so that the server refuses the one
// field it will not take — a type it holds otherwise, a table's column
// limit — and stores the others.
func splitFields(line []byte) (queue.Lines, bool) {
	dec := lineprotocol.NewDecoderWithBytes(line)
	if !dec.Next() {
		return queue.Lines{}, false
	}
	m, err := dec.Measurement()
	if err != nil {
		return queue.Lines{}, false
	}
	type kv struct{ k, v []byte }
	var tags []kv
	for {
		k, v, err := dec.NextTag()
		if err != nil {
			return queue.Lines{}, false
		}
		if k == nil {
			break
		}
		tags = append(tags, kv{bytes.Clone(k), bytes.Clone(v)}) // the decoder may reuse its memory
	}
	type field struct {
		k []byte
		v lineprotocol.Value
	}
	var fields []field
	for {
		k, v, err := dec.NextField()
		if err != nil {
			return queue.Lines{}, false
		}
		if k == nil {
			break
		}
		fields = append(fields, field{bytes.Clone(k), lineprotocol.MustNewValue(v.Interface())})
	}
	ts, err := dec.Time(lineprotocol.Nanosecond, time.Time{})
	if err != nil || len(fields) < 2 {
		return queue.Lines{}, false
	}
	var out queue.Lines
	var enc lineprotocol.Encoder
	enc.SetPrecision(lineprotocol.Nanosecond)
	for _, f := range fields {
		enc.Reset()
		enc.StartLineRaw(m)
		for _, t := range tags {
			enc.AddTagRaw(t.k, t.v)
		}
		key := len(enc.Bytes())
		enc.AddFieldRaw(f.k, f.v)
		enc.EndLine(ts) // a zero time writes none
		if enc.Err() != nil {
			return queue.Lines{}, false
		}
		out.Append(enc.Bytes(), key)
	}
	return out, true
}

// tooLargeFloor is the request size under which a 413 is not taken as
// the request being too large (see deliver): InfluxDB's own limits are
// MiBs (1.x max-body-size 25 MB, 2.x 10 MB of points).
const tooLargeFloor = 64 << 10

// createEvery bounds how often a write answered 404 creates what is
// missing (Config.CreateMissing).
const createEvery = time.Minute

// createMissing creates the target's database or retention policy, where
// Config.CreateMissing asks for it and none was tried within createEvery;
// it reports whether it created something.
func (w *Writer) createMissing() bool {
	if !w.cfg.CreateMissing {
		return false
	}
	w.createMu.Lock()
	defer w.createMu.Unlock()
	if !w.createdAt.IsZero() && time.Since(w.createdAt) < createEvery {
		return false
	}
	w.createdAt = time.Now()
	ctx, cancel := context.WithTimeout(w.ctx, w.cfg.RequestTimeout)
	defer cancel()
	res, err := Check(ctx, w.cfg, w.target, true)
	switch {
	case err != nil:
		w.log.Error("InfluxDB answered 404 to a write, and what is missing could not be created", zap.Error(err))
		return false
	case len(res.Created) == 0:
		return false
	}
	w.log.Warn("InfluxDB answered 404 to a write: created what was missing (create-database)", zap.Strings("created", res.Created))
	return true
}

// backoff is the wait before retry number attempt+1: 1s doubling up to max,
// minus up to a quarter of jitter so that writers do not retry in step.
func backoff(attempt int, maxWait time.Duration) time.Duration {
	d := maxWait
	if attempt < 30 {
		d = min(firstBackoff<<attempt, maxWait)
	}
	return d - rand.N(d/4+1)
}

func (w *Writer) logRetry(f failure, n, attempt int, wait time.Duration) {
	fields := []zap.Field{
		zap.Int("status", f.status), zap.String("error", f.text), zap.Int("points", n),
		zap.Int("attempt", attempt+1), zap.Duration("retry_in", wait),
	}
	switch f.status {
	case http.StatusUnauthorized:
		w.log.Error("InfluxDB refused the credentials; check the token (1.x: \"user:password\"); retrying", fields...)
	case http.StatusForbidden:
		w.log.Error("InfluxDB denied writing to the bucket; check the token's permissions; retrying", fields...)
	case http.StatusNotFound:
		w.log.Error("InfluxDB has no such bucket or database ("+f.text+"); create it; retrying", fields...)
	case http.StatusRequestEntityTooLarge:
		w.log.Error("InfluxDB, or a proxy before it, refuses even a small request as too large; the points are kept and retried: check its body size limit", fields...)
	default:
		if f.act == actFix {
			w.log.Error("InfluxDB refused the request itself, not a line of it; retrying until that is fixed", fields...)
			return
		}
		w.log.Warn("write to InfluxDB failed; retrying", fields...)
	}
}

// retryAfter reads Retry-After in seconds or as an HTTP date.
func retryAfter(h http.Header) time.Duration {
	v := h.Get("Retry-After")
	if secs, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// err is f as an error, for OnBatch.
func (f failure) err() error {
	if f.status == 0 {
		return errors.New(f.text)
	}
	return fmt.Errorf("%d: %s", f.status, f.text)
}
