package main

import (
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
	"github.com/sparkpulse/sparkpulse/simulate"
)

// splitter stands in for a Kubernetes Service with ClientIP affinity: a
// client's first connection goes to a backend chosen by a hash of its
// address among the backends up, and its later ones to the same backend
// while that is up.
type splitter struct {
	ln       net.Listener
	mu       sync.Mutex
	backends []string
	up       []bool
	sticky   map[string]int // client address → backend
	routed   []int          // connections sent to each backend
	errs     []error
	finished int        // connections proxied to their end
	done     *sync.Cond // signalled when finished grows
	wg       sync.WaitGroup
}

func newSplitter(t *testing.T, backends []string) *splitter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &splitter{ln: ln, backends: backends, up: make([]bool, len(backends)), routed: make([]int, len(backends)), sticky: map[string]int{}}
	s.done = sync.NewCond(&s.mu)
	for i := range s.up {
		s.up[i] = true
	}
	accepting := make(chan struct{})
	t.Cleanup(func() {
		ln.Close()
		<-accepting
		s.wg.Wait()
	})
	go func() {
		defer close(accepting)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go s.proxy(c)
		}
	}()
	return s
}

// pick is the backend of a client: the one it had while that is up, else
// a hash of its address over the backends up.
func (s *splitter) pick(ip string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.sticky[ip]; ok && s.up[b] {
		s.routed[b]++
		return b
	}
	var live []int
	for i, u := range s.up {
		if u {
			live = append(live, i)
		}
	}
	h := fnv.New32a()
	h.Write([]byte(ip))
	b := live[int(h.Sum32())%len(live)]
	s.sticky[ip] = b
	s.routed[b]++
	return b
}

func (s *splitter) proxy(c net.Conn) {
	defer s.wg.Done()
	defer c.Close()
	ip, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	b, err := net.Dial("tcp", s.backends[s.pick(ip)])
	if err == nil {
		// Copied and half-closed, the backend closes its side once it has
		// taken every line: then the connection is done.
		_, err = io.Copy(b, c)
		if err == nil {
			err = b.(*net.TCPConn).CloseWrite()
		}
		if err == nil {
			_, err = io.Copy(io.Discard, b)
		}
		if cerr := b.Close(); err == nil {
			err = cerr
		}
	}
	s.mu.Lock()
	if err != nil {
		s.errs = append(s.errs, err)
	}
	s.finished++
	s.done.Broadcast()
	s.mu.Unlock()
}

// wait returns when n connections have been proxied to their end and
// their replicas have taken every line.
func (s *splitter) wait(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.finished < n {
		s.done.Wait()
	}
}

func (s *splitter) remove(i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.up[i] = false
}

// Three replicas behind a client-address splitter, as in the Helm chart:
// each executor, reporting from its own address, stays on one replica; when
// a replica goes mid-run, its executors move. With the chart's
// first-sample-grace, a moved executor's first sample on its new replica
// gives no delta: it loses that one interval and never gets a wrong
// delta, and every other delta is exact.
func TestReplicasWithAffinity(t *testing.T) {
	srv := influxtest.Start(t)
	cfg := config.Config{
		InfluxDB: config.InfluxDBConfig{URL: srv.URL},
		Deltas:   config.DeltaSettings{FirstSampleGrace: new(config.Duration(8760 * time.Hour))},
		Graphite: []config.GraphiteConfig{{Database: "spark"}},
	}
	var replicas []*testService
	var addrs []string
	for range 3 {
		r := startSparkpulse(t, cfg)
		replicas = append(replicas, r)
		addrs = append(addrs, r.addr(0))
	}
	sp := newSplitter(t, addrs)
	const (
		rounds   = 10
		removeAt = 5 // replica 1 goes before this round
	)
	start := time.Unix(1795300000, 0)
	c := simulate.NewCluster(simulate.Config{Apps: 1, Executors: 12, Period: 10 * time.Second, Seed: 3}, start)
	leaving := map[string]bool{} // addresses of the executors replica 1 had
	dialed := 0
	for r := range rounds {
		if r == removeAt {
			sp.mu.Lock()
			for ip, b := range sp.sticky {
				leaving[ip] = b == 1
			}
			sp.mu.Unlock()
			sp.remove(1)
		}
		now := start.Add(time.Duration(r) * 10 * time.Second)
		c.Step(now)
		for p := range c.Processes() {
			// Each process from its own loopback address, as each pod has its own IP.
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 1, byte(10+p))}}
			conn, err := d.Dial("tcp", sp.ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Report(p, conn, now); err != nil {
				t.Fatal(err)
			}
			conn.Close()
			dialed++
		}
		// A round is read in full before the next starts, as 10 s apart:
		// every routed connection accepted and ended by its replica.
		sp.wait(dialed)
		sp.mu.Lock()
		errs := sp.errs
		sp.mu.Unlock()
		if len(errs) > 0 {
			t.Fatalf("round %d: splitter: %v", r, errs)
		}
		if r == removeAt-1 {
			replicas[1].stop() // after its last round: it delivers what it has
		}
	}
	for _, r := range replicas {
		r.stop()
	}

	// The executors replica 1 had moved; the others stayed.
	moved := map[string]bool{}
	for p := 1; p < c.Processes(); p++ {
		if leaving[net.IPv4(127, 0, 1, byte(10+p)).String()] {
			moved[fmt.Sprint(p)] = true
		}
	}
	if len(moved) == 0 || len(moved) == c.Processes()-1 {
		t.Fatalf("moved executors %v: the test needs some to move and some to stay", moved)
	}

	// Every delta is value − the previous value of the series; a point
	// without one is the series' first, or a moved executor's first after
	// the move.
	res := srv.Query(t, "spark", `SELECT "cpuTime.count", "cpuTime.count_delta" FROM "executor" WHERE "process" != 'driver' GROUP BY "process"`)
	if len(res) != c.Processes()-1 {
		t.Fatalf("%d executors in InfluxDB, want %d", len(res), c.Processes()-1)
	}
	for _, s := range res {
		p := s.Tags["process"]
		if len(s.Values) != rounds {
			t.Errorf("executor %s: %d points, want %d", p, len(s.Values), rounds)
			continue
		}
		var missing []int
		var prev float64
		for i, row := range s.Values {
			v := toFloat(t, row[1])
			if row[2] == nil {
				missing = append(missing, i)
			} else if d := toFloat(t, row[2]); i == 0 || d != v-prev {
				t.Errorf("executor %s round %d: delta %.0f, want %.0f", p, i, d, v-prev)
			}
			prev = v
		}
		want := []int{0}
		if moved[p] {
			want = []int{0, removeAt}
		}
		if !slices.Equal(missing, want) {
			t.Errorf("executor %s (moved %v): no delta in rounds %v, want %v", p, moved[p], missing, want)
		}
	}
	t.Logf("%d of %d executors moved when replica 1 went", len(moved), c.Processes()-1)
}
