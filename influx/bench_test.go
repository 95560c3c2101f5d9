package influx

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sparkpulse/sparkpulse/queue"
)

// BenchmarkAppend measures the sustained cost of appending 100-line blocks,
// batching and sending them (5000-line batches, 2 in flight) to a server
// that accepts everything. The queue fills quickly, so this is throughput
// including the HTTP requests, not only the copy into the batch.
func BenchmarkAppend(b *testing.B) {
	for _, gz := range []bool{false, true} {
		name := "gzip=off"
		if gz {
			name = "gzip=on"
		}
		b.Run(name, func(b *testing.B) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.WriteHeader(http.StatusNoContent)
			}))
			defer srv.Close()
			g := GzipOff
			if gz {
				g = GzipOn
			}
			w, err := NewWriter(Config{URL: srv.URL, Gzip: g, Queue: queue.Config{MaxBytes: 8 << 20}}, Target{Bucket: "db"})
			if err != nil {
				b.Fatal(err)
			}
			block := lines(0, 100)
			b.SetBytes(int64(len(block)))
			b.ReportAllocs()
			for b.Loop() {
				w.Append(block, true)
			}
			if err := w.Close(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)*100/b.Elapsed().Seconds(), "lines/s")
		})
	}
}
