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

// refuseSeries counts data's n lines (all of new series) as refused and
// remembers their series.
func (w *Writer) refuseSeries(b *queue.Batch, data []byte, n int, f failure) {
	w.full.mu.Lock()
	if w.full.keys == nil || time.Since(w.full.since) > fullSeriesTTL {
		w.full.keys, w.full.since = map[uint64]struct{}{}, time.Now()
	}
	for rest := data; len(rest) > 0 && len(w.full.keys) < fullSeriesMax; {
		end := lineEnd(rest, 1)
		w.full.keys[seriesHash(rest[:end])] = struct{}{}
		rest = rest[end:]
	}
	w.full.mu.Unlock()
	b.Remaining.Add(-int64(n))
	w.drop(f.reason, n)
	w.dropLog.Warn("InfluxDB's max-series-per-database is reached: points of new series are refused, the others sent again",
		zap.Int("refused", n), zap.String("error", f.text))
}

// withoutFullSeries returns data (n lines of b) without the lines of series
// InfluxDB refused as new at max-series-per-database, counting those as
// refused.
func (w *Writer) withoutFullSeries(b *queue.Batch, data []byte, n int) ([]byte, int) {
	w.full.mu.Lock()
	defer w.full.mu.Unlock()
	if len(w.full.keys) == 0 {
		return data, n
	}
	if time.Since(w.full.since) > fullSeriesTTL {
		w.full.keys = nil
		return data, n
	}
	var kept []byte
	keptN, dropped := 0, 0
	for rest := data; len(rest) > 0; {
		end := lineEnd(rest, 1)
		line := rest[:end]
		rest = rest[end:]
		if _, ok := w.full.keys[seriesHash(line)]; ok {
			dropped++
			continue
		}
		kept = append(kept, line...)
		keptN++
	}
	if dropped == 0 {
		return data, n
	}
	b.Remaining.Add(-int64(dropped))
	w.drop(DropMaxSeries, dropped)
	return kept, keptN
}
