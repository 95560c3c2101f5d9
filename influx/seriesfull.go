package influx

import (
	"hash/maphash"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sparkpulse/sparkpulse/queue"
)

// When a database holds InfluxDB 1.x's max-series-per-database series (a
// million by default, inmem index only), a request with points of new
// series is answered "partial write: max-series-per-database limit
// exceeded: (N) dropped=K", K being its points of new series, and InfluxDB
// 1.8 stores none of its points (TestMaxSeriesPerDatabase). Points of
// existing series, genuine data, are kept by halving the request, and a
// half whose points are all new (K equal to its lines) is refused whole
// without halving further. The series refused are remembered (up to
// fullSeriesMax, for fullSeriesTTL) and their later points are refused
// before they are sent: a full database costs requests once per new
// series, not at every report.

const (
	fullSeriesMax = 1 << 18         // series remembered, as 8-byte hashes
	fullSeriesTTL = 5 * time.Minute // then forgotten, so a raised limit is seen
)

type fullSeries struct {
	mu    sync.Mutex
	since time.Time
	keys  map[uint64]struct{}
}

var seriesSeed = maphash.MakeSeed()

// seriesKey is a line's measurement and tags: up to its first unescaped
// space.
func seriesKey(line []byte) []byte {
	for i := 0; i < len(line); i++ {
		switch line[i] {
		case '\\':
			i++
		case ' ':
			return line[:i]
		}
	}
	return line
}

func seriesHash(line []byte) uint64 { return maphash.Bytes(seriesSeed, seriesKey(line)) }

// refuseSeries counts lines (all of new series) as refused and remembers
// their series.
func (w *Writer) refuseSeries(b *queue.Batch, lines queue.Lines, f failure) {
	n := lines.Len()
	w.full.mu.Lock()
	if w.full.keys == nil || time.Since(w.full.since) > fullSeriesTTL {
		w.full.keys, w.full.since = map[uint64]struct{}{}, time.Now()
	}
	for i := 0; i < n && len(w.full.keys) < fullSeriesMax; i++ {
		w.full.keys[seriesHash(lines.Line(i))] = struct{}{}
	}
	w.full.mu.Unlock()
	b.Remaining.Add(-int64(n))
	w.drop(f.reason, n)
	w.dropLog.Warn("InfluxDB's max-series-per-database is reached: points of new series are refused, the others sent again",
		zap.Int("refused", n), zap.String("error", f.text))
}

// withoutFullSeries returns lines (of b) without those of series InfluxDB
// refused as new at max-series-per-database, counting those as refused.
func (w *Writer) withoutFullSeries(b *queue.Batch, lines queue.Lines) queue.Lines {
	w.full.mu.Lock()
	defer w.full.mu.Unlock()
	if len(w.full.keys) == 0 {
		return lines
	}
	if time.Since(w.full.since) > fullSeriesTTL {
		w.full.keys = nil
		return lines
	}
	var kept queue.Lines
	dropped := 0
	for i := range lines.Len() {
		line := lines.Line(i)
		if _, ok := w.full.keys[seriesHash(line)]; ok {
			dropped++
			continue
		}
		kept.Append(line)
	}
	if dropped == 0 {
		return lines
	}
	b.Remaining.Add(-int64(dropped))
	w.drop(DropMaxSeries, dropped)
	return kept
}
