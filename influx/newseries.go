package influx

import (
	"hash/maphash"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sparkpulse/sparkpulse/queue"
)

// InfluxDB 1.x refuses points that would create a series beyond one of
// two limits, and stores none of the request (TestMaxSeriesPerDatabase,
// TestMaxValuesPerTagLosesTheBatch):
//
//   - max-series-per-database (a million by default, inmem index only):
//     "partial write: max-series-per-database limit exceeded: (N)
//     dropped=K", K being the request's points of new series;
//   - max-values-per-tag (100 000 by default): "partial write:
//     max-values-per-tag limit exceeded … dropped=K", K being its points
//     that would add a value to a tag that has the limit.
//
// Either way the refused points are those of series InfluxDB does not
// have, so points of existing series, genuine data, are kept by halving
// the request, and a half whose points are all refused (K equal to its
// lines) is refused whole without halving further. The series refused
// are remembered (up to refusedSeriesMax, for refusedSeriesTTL) by the
// hash of their keys, which the encoder marked in each line, and their
// later points are refused before they are sent: a full database costs
// requests once per new series, not at every report. Nothing is read
// from InfluxDB to decide.

const (
	refusedSeriesMax = 1 << 18         // series remembered, as 8-byte hashes
	refusedSeriesTTL = 5 * time.Minute // then forgotten, so a raised limit is seen
)

type refusedSeries struct {
	mu    sync.Mutex
	since time.Time
	keys  map[uint64]string // the reason each was refused for
}

var seriesSeed = maphash.MakeSeed()

// refuseSeries counts lines (all of them of series InfluxDB refuses as
// new) as refused and remembers their series.
func (w *Writer) refuseSeries(b *queue.Batch, lines queue.Lines, f failure) {
	n := lines.Len()
	r := &w.refusedSeries
	r.mu.Lock()
	if r.keys == nil || time.Since(r.since) > refusedSeriesTTL {
		r.keys, r.since = map[uint64]string{}, time.Now()
	}
	for i := 0; i < n && len(r.keys) < refusedSeriesMax; i++ {
		r.keys[maphash.Bytes(seriesSeed, lines.Key(i))] = f.reason
	}
	r.mu.Unlock()
	b.Remaining.Add(-int64(n))
	w.drop(f.reason, n)
	w.dropLog.Warn("InfluxDB refuses new series ("+f.reason+" reached): points of new series are refused, the others sent again",
		zap.Int("refused", n), zap.String("error", f.text))
}

// withoutRefusedSeries returns lines (of b) without those of series
// InfluxDB refused as new, counting those as refused for the reason they
// were.
func (w *Writer) withoutRefusedSeries(b *queue.Batch, lines queue.Lines) queue.Lines {
	r := &w.refusedSeries
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.keys) == 0 {
		return lines
	}
	if time.Since(r.since) > refusedSeriesTTL {
		r.keys = nil
		return lines
	}
	var kept queue.Lines
	dropped := 0
	for i := range lines.Len() {
		if reason, ok := r.keys[maphash.Bytes(seriesSeed, lines.Key(i))]; ok {
			dropped++
			w.drop(reason, 1)
			continue
		}
		kept.AppendLine(lines, i)
	}
	if dropped == 0 {
		return lines
	}
	b.Remaining.Add(-int64(dropped))
	return kept
}
