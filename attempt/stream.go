package attempt

import (
	"context"
	"time"

	"github.com/sparkpulse/sparkpulse/accounting"
)

// Stream reads the metrics stream of an application's processes.
type Stream interface {
	// Totals returns, by process ("driver", "1", …), the sums of the
	// deltas of the counters in accounting.StreamCounters and the peak, mean and
	// number of samples of the gauges in accounting.StreamGauges, over [from, to):
	// windows that meet count each point once.
	Totals(ctx context.Context, app string, from, to time.Time) (map[string]accounting.ProcessTotals, error)
}

// StreamChunk bounds the time range of each read of the stream: an
// application that runs for days (a streaming query) is read a day at a
// time, as InfluxDB 3 Core answers a query over at most 72 hours of data
// and each answer stays small.
const StreamChunk = 24 * time.Hour

// ReadStream reads the stream of app over [from, to) in chunks of at most
// StreamChunk, and adds them up.
func ReadStream(ctx context.Context, s Stream, app string, from, to time.Time) (map[string]accounting.ProcessTotals, error) {
	out := map[string]accounting.ProcessTotals{}
	for lo := from; lo.Before(to); {
		hi := lo.Add(StreamChunk)
		if !hi.Before(to) {
			hi = to
		}
		t, err := s.Totals(ctx, app, lo, hi)
		if err != nil {
			return nil, err
		}
		accounting.MergeTotals(out, t)
		lo = hi
	}
	return out, nil
}
