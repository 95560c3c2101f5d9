package relay

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/graphite"
	"github.com/sparkpulse/sparkpulse/queue"
	"github.com/sparkpulse/sparkpulse/spark"
)

// countingSink counts what concurrent connections hand on.
type countingSink struct{ points atomic.Int64 }

func (s *countingSink) AppendLines(l queue.Lines, _ bool) bool {
	s.points.Add(int64(l.Len()))
	return true
}

// closing signals each connection whose handler has finished.
type closing struct {
	*Relay
	closed chan struct{}
}

func (h closing) NewConn(a net.Addr) graphite.ConnHandler {
	return closingConn{h.Relay.NewConn(a), h.closed}
}

type closingConn struct {
	graphite.ConnHandler
	closed chan struct{}
}

func (c closingConn) Close() {
	c.ConnHandler.Close()
	c.closed <- struct{}{}
}

// BenchmarkTCP is the service's ingest path on loopback: simulated Spark
// reports written as fast as possible over 1 or 8 TCP connections into a
// TCP listener, each connection parsed, mapped, delta'd and encoded into
// blocks handed to a sink that only counts. An op is one line. The series
// are seen once before timing, as in the steady state.
func BenchmarkTCP(b *testing.B) {
	lines := simulated(b, "", 20)
	var payload []byte
	for _, l := range lines {
		payload = append(append(payload, l...), '\n')
	}
	perRound := len(lines) / 20
	warm := bytes.Join(lines[:perRound], []byte("\n"))
	for _, conns := range []int{1, 8} {
		b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) {
			sink := &countingSink{}
			r := New(Config{Mapper: spark.NewMapper(spark.Options{}), Sink: sink, Deltas: newDeltas(b, "spark")})
			closed := make(chan struct{}, conns+1)
			srv, err := graphite.ListenTCP(graphite.TCPConfig{Addr: "127.0.0.1:0"}, closing{r, closed})
			if err != nil {
				b.Fatal(err)
			}
			go srv.Serve()
			defer srv.Shutdown(context.Background())
			send := func(data []byte, times int) {
				c, err := net.Dial("tcp", srv.Addr().String())
				if err != nil {
					b.Error(err)
					return
				}
				defer c.Close()
				for range times {
					if _, err := c.Write(data); err != nil {
						b.Error(err)
						return
					}
				}
			}
			send(append(warm, '\n'), 1)
			<-closed
			base := r.Stats().Lines.Load()

			// Each connection sends whole copies of the payload; b.N lines
			// are rounded up to whole copies.
			copies := max(1, (b.N+len(lines)*conns-1)/(len(lines)*conns))
			want := base + uint64(copies*conns*len(lines))
			b.SetBytes(int64(len(payload) / len(lines)))
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for range conns {
				wg.Go(func() { send(payload, copies) })
			}
			wg.Wait()
			for range conns {
				<-closed
			}
			elapsed := time.Since(start)
			if got := r.Stats().Lines.Load(); got != want {
				b.Fatalf("%d lines read, want %d", got, want)
			}
			b.StopTimer()
			b.ReportMetric(float64(want-base)/elapsed.Seconds(), "lines/s")
			b.ReportMetric(float64(elapsed.Nanoseconds())/float64(want-base), "ns/line")
		})
	}
}
