package annotate

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/influxdata/line-protocol/v2/lineprotocol"

	"github.com/sparkpulse/sparkpulse/sparkui"
)

// point is a decoded line.
type point struct {
	measurement string
	tags        map[string]string
	fields      map[string]any
	ns          int64
}

// memSink keeps what a Poller writes, decoded, by series and time. Facts
// are append-only: a series and time written twice is noted in again.
type memSink struct {
	mu      sync.Mutex
	written []point
	latest  map[string]point // measurement|tags|ns → the point
	again   []string         // keys written more than once
	notify  chan struct{}    // optional: signalled after every Append, unless a signal waits
}

func newMemSink() *memSink { return &memSink{latest: map[string]point{}} }

func (s *memSink) Append(lines []byte, _ bool) bool {
	dec := lineprotocol.NewDecoderWithBytes(bytes.Clone(lines))
	var got []point
	for dec.Next() {
		m, err := dec.Measurement()
		if err != nil {
			panic(err)
		}
		p := point{measurement: string(m), tags: map[string]string{}, fields: map[string]any{}}
		for {
			k, v, err := dec.NextTag()
			if err != nil {
				panic(err)
			}
			if k == nil {
				break
			}
			p.tags[string(k)] = string(v)
		}
		for {
			k, v, err := dec.NextField()
			if err != nil {
				panic(err)
			}
			if k == nil {
				break
			}
			p.fields[string(k)] = v.Interface()
		}
		t, err := dec.Time(lineprotocol.Nanosecond, time.Time{})
		if err != nil {
			panic(err)
		}
		p.ns = t.UnixNano()
		got = append(got, p)
	}
	s.mu.Lock()
	for _, p := range got {
		s.written = append(s.written, p)
		k := p.key()
		if _, ok := s.latest[k]; ok {
			s.again = append(s.again, k)
		}
		s.latest[k] = p
	}
	ch := s.notify
	s.mu.Unlock()
	if ch != nil {
		select { // a signal already waiting covers this one too
		case ch <- struct{}{}:
		default:
		}
	}
	return true
}

func (p point) key() string {
	var tags []string
	for k, v := range p.tags {
		tags = append(tags, k+"="+v)
	}
	sort.Strings(tags)
	return fmt.Sprintf("%s|%s|%d", p.measurement, strings.Join(tags, ","), p.ns)
}

// stored returns the stored points of a measurement, as "time fields…"
// lines built by format, sorted.
func (s *memSink) stored(measurement string, format func(p point) string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, p := range s.latest {
		if p.measurement == measurement {
			out = append(out, format(p))
		}
	}
	sort.Strings(out)
	return out
}

func (s *memSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.written)
}

// clock is a settable time source.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// serve starts an HTTP server for a fake Spark.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}

// appendOnly fails t if a series and time was written twice.
func (s *memSink) appendOnly(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.again) > 0 {
		t.Errorf("%d series and times written more than once, e.g. %s", len(s.again), s.again[0])
	}
}

// running runs p until stop, which ends Run and waits for it.
func running(p *Poller) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// listingUI is a live UI of one application that signals each listing
// of its applications on listed (a signal already waiting covers the
// next).
func listingUI(t *testing.T, id, name string) (base string, listed <-chan struct{}) {
	ui := sparkui.NewServer(sparkui.LiveUI, liveApp(id, name, time.Now().Add(-time.Minute)))
	c := make(chan struct{}, 1)
	return serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/applications" {
			select {
			case c <- struct{}{}:
			default:
			}
		}
		ui.ServeHTTP(w, r)
	})), c
}

func newPoller(t *testing.T, cfg Config) *Poller {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := cfg.Sink.(*memSink); ok {
		t.Cleanup(func() { s.appendOnly(t) })
	}
	return p
}

func equalLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\ngot\n  %s\nwant\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func ms(t time.Time) int64 { return t.UnixMilli() }

// liveApp is a running application for scripted tests.
func liveApp(id, name string, start time.Time) *sparkui.Model {
	return &sparkui.Model{Apps: []*sparkui.App{{ID: id, Name: name,
		Attempts: []*sparkui.Attempt{{Start: start, User: "etl", SparkVersion: "3.5.3"}}}}}
}
