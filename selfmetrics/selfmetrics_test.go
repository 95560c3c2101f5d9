package selfmetrics

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type sink struct{ lines []string }

func (s *sink) Append(b []byte, _ bool) bool {
	s.lines = append(s.lines, strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")...)
	return true
}

func TestReport(t *testing.T) {
	reg := prometheus.NewRegistry()
	lines := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sparkpulse_lines_received_total"}, []string{"listener"})
	queue := prometheus.NewGauge(prometheus.GaugeOpts{Name: "sparkpulse_queue_bytes"})
	lat := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sparkpulse_write_duration_seconds", Buckets: []float64{1}})
	other := prometheus.NewGauge(prometheus.GaugeOpts{Name: "unrelated"})
	bad := prometheus.NewGauge(prometheus.GaugeOpts{Name: "sparkpulse_nan"})
	reg.MustRegister(lines, queue, lat, other, bad)
	s := &sink{}
	r := New(reg, s, "node-1", func(f string) bool { return strings.HasPrefix(f, "sparkpulse_") })
	t0 := time.Unix(1795300000, 0)

	lines.WithLabelValues("tcp://:2003").Add(100)
	lines.WithLabelValues("").Add(1) // an empty label is left out
	queue.Set(4096)
	lat.Observe(0.5)
	lat.Observe(1.5)
	bad.Set(math.NaN())
	n, err := r.Report(t0)
	if err == nil || !strings.Contains(err.Error(), "sparkpulse_nan: field value is NaN") {
		t.Errorf("err = %v", err)
	}
	lines.WithLabelValues("tcp://:2003").Add(50)
	lat.Observe(1)
	bad.Set(1)
	if _, err := r.Report(t0.Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"sparkpulse_lines_received_total,host=node-1 delta=1,value=1 1795300000000000000",
		"sparkpulse_lines_received_total,host=node-1,listener=tcp://:2003 delta=100,value=100 1795300000000000000",
		"sparkpulse_queue_bytes,host=node-1 value=4096 1795300000000000000",
		"sparkpulse_write_duration_seconds,host=node-1 count=2,count_delta=2,sum=2,sum_delta=2 1795300000000000000",
		"sparkpulse_lines_received_total,host=node-1 delta=0,value=1 1795300010000000000",
		"sparkpulse_lines_received_total,host=node-1,listener=tcp://:2003 delta=50,value=150 1795300010000000000",
		"sparkpulse_nan,host=node-1 value=1 1795300010000000000",
		"sparkpulse_queue_bytes,host=node-1 value=4096 1795300010000000000",
		"sparkpulse_write_duration_seconds,host=node-1 count=3,count_delta=1,sum=3,sum_delta=1 1795300010000000000",
	}
	if got := strings.Join(s.lines, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
	if n != 4 {
		t.Errorf("first report %d points, want 4", n)
	}
}

// A counter that goes down restarted from zero: its delta is its value.
func TestCounterReset(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "c"})
	reg.MustRegister(c)
	s := &sink{}
	r := New(reg, s, "", nil)
	c.Add(10)
	r.Report(time.Unix(1, 0))
	reg.Unregister(c)
	c2 := prometheus.NewCounter(prometheus.CounterOpts{Name: "c"})
	reg.MustRegister(c2)
	c2.Add(3)
	r.Report(time.Unix(2, 0))
	if got := s.lines[1]; got != "c delta=3,value=3 2000000000" {
		t.Errorf("after a reset: %s", got)
	}
}
