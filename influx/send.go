package influx

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	http2 "github.com/influxdata/influxdb-client-go/v2/api/http"
	"go.uber.org/zap"
)

// What to do after a failed request.
type action int

const (
	actRetry   action = iota // same request again after a backoff
	actPartial               // InfluxDB stored the rest: count the dropped points, done
	actSplit                 // refused as a whole: resend each half
)

// failure is a classified write error.
type failure struct {
	act        action
	kind       string // WriteErrors key: network, 5xx, 429, 4xx
	status     int
	text       string        // the server's message or the network error
	retryAfter time.Duration // from a Retry-After header, 0 if none
	dropped    int           // actPartial: points InfluxDB did not store
	reason     string        // PointsDropped key
}

const firstBackoff = time.Second

// send delivers data (n lines of b), retrying until it is stored or refused,
// and splitting it when InfluxDB refuses it as a whole. It returns false
// when Close gave up, or when a write fails after Close began and the disk
// queue is to keep the batch.
func (w *Writer) send(b *batch, data string, n int) bool {
	for attempt := 0; ; attempt++ {
		took, err := w.post(data)
		if err == nil {
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
		f := classify(err)
		w.statsMu.Lock()
		w.stats.WriteErrors[f.kind]++
		w.statsMu.Unlock()

		switch f.act {
		case actPartial:
			dropped := min(f.dropped, n)
			w.written(b, n, dropped, f.reason)
			w.dropLog.Warn("InfluxDB stored part of a batch and refused the rest",
				zap.String("reason", f.reason), zap.Int("dropped", dropped), zap.Int("points", n),
				zap.Int("status", f.status), zap.String("error", f.text))
			w.observe(n, took, err)
			return true
		case actSplit:
			w.observe(n, took, err)
			if n == 1 {
				w.refused(b, data, f)
				return true
			}
			cut := lineEndString(data, n/2)
			if cut >= len(data) { // fewer lines than counted: nothing left to split
				w.refused(b, data, f)
				return true
			}
			return w.send(b, data[:cut], n/2) && w.send(b, data[cut:], n-n/2)
		}

		select {
		case <-w.stopRetry: // nil without a disk queue
			w.observe(n, took, err)
			return false
		default:
		}
		wait := f.retryAfter
		if wait == 0 {
			wait = backoff(attempt, w.cfg.MaxRetryBackoff)
		}
		w.statsMu.Lock()
		w.stats.Retries++
		w.statsMu.Unlock()
		w.logRetry(f, n, attempt, wait)
		w.observe(n, took, err)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-w.ctx.Done():
			t.Stop()
			return false
		case <-w.stopRetry:
			t.Stop()
			return false
		}
	}
}

// post sends one request, bounded by RequestTimeout and by Close giving up.
func (w *Writer) post(data string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(w.ctx, w.cfg.RequestTimeout)
	defer cancel()
	start := time.Now()
	err := w.api.WriteRecord(ctx, data)
	return time.Since(start), err
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
func (w *Writer) written(b *batch, n, dropped int, reason string) {
	b.remaining.Add(-int64(n))
	w.statsMu.Lock()
	w.stats.BatchesWritten++
	w.stats.PointsWritten += uint64(n - dropped)
	if dropped > 0 {
		w.stats.PointsDropped[reason] += uint64(dropped)
	}
	w.statsMu.Unlock()
}

// refused records a single line InfluxDB will not take.
func (w *Writer) refused(b *batch, line string, f failure) {
	b.remaining.Add(-1)
	w.statsMu.Lock()
	w.stats.PointsDropped[f.reason]++
	w.statsMu.Unlock()
	const maxShown = 256
	line = strings.TrimSuffix(line, "\n")
	if len(line) > maxShown {
		line = line[:maxShown] + "…"
	} else {
		line = strings.Clone(line) // the batch's memory is reused
	}
	w.dropLog.Warn("InfluxDB refused a line", zap.String("reason", f.reason),
		zap.Int("status", f.status), zap.String("error", f.text), zap.String("line", line))
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
	default:
		w.log.Warn("write to InfluxDB failed; retrying", fields...)
	}
}

// classify decides what a write error means.
func classify(err error) failure {
	var he *http2.Error
	if !errors.As(err, &he) || he.StatusCode == 0 {
		return failure{act: actRetry, kind: "network", text: err.Error()}
	}
	f := failure{act: actRetry, status: he.StatusCode, text: he.Message}
	lines := -1
	if body := he.Header.Get(bodyHeader); body != "" {
		f.text, lines = parseErrorBody(body)
	}
	if f.text == "" || strings.HasPrefix(f.text, "Unexpected status code") {
		f.text = strconv.Itoa(he.StatusCode) + " " + http.StatusText(he.StatusCode)
	}
	switch s := he.StatusCode; {
	case s == http.StatusTooManyRequests:
		f.kind = "429"
	case s >= 500:
		f.kind = "5xx"
	default:
		f.kind = "4xx"
	}
	if f.kind != "4xx" {
		f.retryAfter = retryAfter(he)
	}
	switch he.StatusCode {
	case http.StatusBadRequest, http.StatusUnprocessableEntity, http.StatusRequestEntityTooLarge:
		f.reason = reasonOf(f.text, he.StatusCode)
		if i := strings.Index(f.text, "partial write"); i >= 0 && he.StatusCode != http.StatusRequestEntityTooLarge {
			f.act = actPartial
			f.dropped = droppedCount(f.text[i:], lines)
			f.reason = reasonOf(f.text[i:], he.StatusCode)
		} else {
			f.act = actSplit
		}
	}
	return f
}

// retryAfter reads Retry-After in seconds (as the client parses it) or as
// an HTTP date.
func retryAfter(he *http2.Error) time.Duration {
	if he.RetryAfter > 0 {
		return time.Duration(he.RetryAfter) * time.Second
	}
	if t, err := http.ParseTime(he.Header.Get("Retry-After")); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// droppedCount reads how many points a partial write lost: 1.x and 2.x end
// the message with "dropped=N", but 1.x counts lines it could not parse
// only as "unable to parse '…'" entries, one per line; 3.x lists the failed
// lines (lines ≥ 0).
func droppedCount(msg string, lines int) int {
	if lines >= 0 {
		return lines
	}
	n := 0
	if i := strings.LastIndex(msg, "dropped="); i >= 0 {
		j := i + len("dropped=")
		k := j
		for k < len(msg) && msg[k] >= '0' && msg[k] <= '9' {
			k++
		}
		n, _ = strconv.Atoi(msg[j:k])
	}
	if strings.HasPrefix(strings.TrimPrefix(msg, "partial write: "), "unable to parse") {
		n += strings.Count(msg, "unable to parse '")
	}
	return n
}

// reasonOf maps InfluxDB's message to one of a few reasons, so that they
// can be metric labels.
func reasonOf(msg string, status int) string {
	m := strings.ToLower(msg)
	for _, r := range []struct{ sub, reason string }{
		{"field type conflict", "field type conflict"},
		{"invalid column type", "field type conflict"}, // 3.x
		{"unable to parse", "unable to parse"},
		{"invalid field name", "invalid field name"},
		{"beyond retention policy", "beyond retention policy"},
		{"max-values-per-tag", "max values per tag"},
		{"max-series-per-database", "max series per database"},
	} {
		if strings.Contains(m, r.sub) {
			return r.reason
		}
	}
	if status == http.StatusRequestEntityTooLarge {
		return "too large"
	}
	return "refused"
}
