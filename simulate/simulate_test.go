package simulate

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/graphite"
	"github.com/sparkpulse/sparkpulse/sparkui"
)

// Every line the simulator writes is a valid Graphite line whose path has
// Spark's shape, and cumulative task counters never go down.
func TestReportShape(t *testing.T) {
	p := &process{ns: "app-20261122101500-0001", id: "3", rng: newRand(7)}
	d := &process{ns: "app-20261122101500-0001", id: "driver", rng: newRand(8)}
	last := map[string]float64{}
	start := time.Unix(1795300000, 0)
	for r := range 5 {
		var buf bytes.Buffer
		if err := p.report(&buf, "spark.prod", start.Add(time.Duration(r)*10*time.Second)); err != nil {
			t.Fatal(err)
		}
		if err := d.report(&buf, "", start.Add(time.Duration(r)*10*time.Second)); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(&buf)
		for sc.Scan() {
			var l graphite.Line
			reason := graphite.Parse(sc.Bytes(), &l)
			path := string(l.Path)
			switch {
			case reason == graphite.ReasonNaN:
				continue
			case reason != graphite.OK:
				t.Fatalf("%q: %v", sc.Text(), graphite.Explain(sc.Bytes(), reason))
			case l.Now || l.Time/1e9 != start.Unix()+int64(r)*10:
				t.Errorf("%q: timestamp %d, want report %d's", sc.Text(), l.Time, r)
			case !strings.HasPrefix(path, "spark.prod.app-20261122101500-0001.3.") && !strings.HasPrefix(path, "app-20261122101500-0001.driver."):
				t.Errorf("%q: not a Spark driver/executor path", path)
			}
			if strings.HasSuffix(path, ".count") || strings.HasSuffix(path, "jvmCpuTime") {
				if l.Value < last[path] {
					t.Errorf("%s went down: %v after %v", path, l.Value, last[path])
				}
				last[path] = l.Value
			}
		}
	}
	if _, ok := last["spark.prod.app-20261122101500-0001.3.executor.cpuTime.count"]; !ok {
		t.Error("no executor cpuTime.count sent")
	}
}

// Run opens one connection per process per report, as Spark's reporter does.
func TestRunConnectionPerReport(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	conns, lines := 0, 0
	accepted := make(chan struct{}, 100)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b, _ := io.ReadAll(c)
			c.Close()
			mu.Lock()
			conns++
			lines += bytes.Count(b, []byte("\n"))
			mu.Unlock()
			accepted <- struct{}{}
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	sent := 0
	rounds := 0
	done := make(chan error)
	go func() {
		done <- Run(ctx, Config{Addr: ln.Addr().String(), Apps: 2, Executors: 2, Period: 10 * time.Millisecond, Seed: 1},
			func(n, failed int) {
				if failed > 0 {
					t.Errorf("%d failed reports", failed)
				}
				sent += n
				rounds++
				if rounds == 2 {
					cancel()
				}
			})
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// 2 apps × (driver + 2 executors) × 2 rounds.
	for range 12 {
		<-accepted
	}
	mu.Lock()
	defer mu.Unlock()
	if conns != 12 || lines != sent {
		t.Errorf("%d connections and %d lines received, want 12 and %d", conns, lines, sent)
	}
}

func TestAppID(t *testing.T) {
	got := AppID(time.Date(2026, 11, 22, 10, 15, 0, 0, time.UTC), 1)
	if got != "app-20261122101500-0001" {
		t.Errorf("AppID = %q", got)
	}
	if _, err := strconv.Atoi(got[len(got)-4:]); err != nil {
		t.Error(err)
	}
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 1)) }

// The timeline runs jobs one after another, each with its SQL execution;
// one job in fifteen fails in its last stage; executors finish tasks only
// while a stage runs.
func TestTimeline(t *testing.T) {
	m := &sparkui.Model{}
	start := time.Unix(1795300000, 0)
	tl := newTimeline("app-20261122101500-0001", "nightly-sales", start, 10*time.Second, newRand(3), m)
	exec := &process{ns: tl.app, id: "1", rng: newRand(4), app: tl}
	busyReports, idleReports := 0, 0
	for r := 1; r <= 600; r++ {
		now := start.Add(time.Duration(r) * 10 * time.Second)
		tl.step(now)
		before := exec.tasks
		if err := exec.report(io.Discard, "", now); err != nil {
			t.Fatal(err)
		}
		switch {
		case tl.busy():
			busyReports++
		case exec.tasks != before:
			t.Fatalf("report %d: tasks finished while idle", r)
		default:
			idleReports++
		}
	}
	a := m.Apps[0].Attempts[0]
	if len(a.Jobs) < 50 || busyReports == 0 || idleReports == 0 {
		t.Fatalf("%d jobs, %d busy and %d idle reports", len(a.Jobs), busyReports, idleReports)
	}
	for _, j := range a.Jobs[:len(a.Jobs)-1] { // the last may still run
		x := a.Execution(j.SQLExecutionID)
		want := sparkui.JobSucceeded
		if j.ID%15 == 7 {
			want = sparkui.JobFailed
		}
		switch {
		case j.Status != want:
			t.Errorf("job %d: %s, want %s", j.ID, j.Status, want)
		case j.Completed.Before(j.Submitted) || len(j.StageIDs) != 2:
			t.Errorf("job %d: %+v", j.ID, j)
		case x == nil || x.Completed != j.Completed || (x.Status() == sparkui.SQLFailed) != (want == sparkui.JobFailed):
			t.Errorf("job %d: SQL execution %+v", j.ID, x)
		}
		for _, id := range j.StageIDs {
			if s := a.Stage(id, 0); s.Submitted.Before(j.Submitted) || s.Completed.After(j.Completed) {
				t.Errorf("stage %d outside job %d", id, j.ID)
			}
		}
	}
}

// ids returns the distinct "app.process" pairs a round of reports names.
func ids(t *testing.T, c *Cluster, now time.Time) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	for n := range c.Processes() {
		var buf bytes.Buffer
		if err := c.Report(n, &buf, now); err != nil {
			t.Fatal(err)
		}
		app, rest, _ := strings.Cut(buf.String(), ".")
		proc, _, _ := strings.Cut(rest, ".")
		seen[app+"."+proc] = true
	}
	return seen
}

// With churn, applications end and new ones (new ids) start in their
// place, spread out in time; executors are replaced by new ids; the REST
// API shows the ended applications as completed.
func TestChurn(t *testing.T) {
	start := time.Unix(1795300000, 0)
	c := NewCluster(Config{Apps: 3, Executors: 4, Period: 10 * time.Second, Seed: 1,
		AppLifetime: 3 * time.Minute, ExecutorLifetime: time.Minute}, start)
	first := ids(t, c, start)
	if len(first) != 3*5 {
		t.Fatalf("%d processes: %v", len(first), first)
	}
	apps := map[string]bool{}
	var maxExec int
	for r := 1; r <= 60; r++ { // 10 minutes
		now := start.Add(time.Duration(r) * 10 * time.Second)
		c.Step(now)
		seen := ids(t, c, now)
		if len(seen) != 15 {
			t.Fatalf("round %d: %d processes", r, len(seen))
		}
		for k := range seen {
			app, proc, _ := strings.Cut(k, ".")
			apps[app] = true
			if n, err := strconv.Atoi(proc); err == nil {
				maxExec = max(maxExec, n)
			}
		}
	}
	// 3 applications at a time, each living 3 minutes, over 10 minutes.
	if len(apps) < 10 || len(apps) > 14 {
		t.Errorf("%d applications over 10 minutes: %v", len(apps), apps)
	}
	if maxExec < 6 {
		t.Errorf("executor ids up to %d: executors were not replaced", maxExec)
	}
	// Most end after their last job, which decides how they went; the
	// fifth in five is stopped in the middle of one.
	var ended, succeeded, stopped int
	c.UI.Update(func(m *sparkui.Model) {
		for _, a := range m.Apps {
			att := a.Attempts[0]
			if att.End.IsZero() {
				continue
			}
			ended++
			last := att.Jobs[len(att.Jobs)-1]
			switch {
			case last.Status == sparkui.JobSucceeded:
				succeeded++
			case slices.ContainsFunc(att.Stages, func(s *sparkui.Stage) bool { return strings.Contains(s.FailureReason, "SparkContext was shut down") }):
				stopped++
			}
		}
	})
	if ended != len(apps)-3 {
		t.Errorf("%d applications ended in the REST model, want %d", ended, len(apps)-3)
	}
	if succeeded < ended*2/3 || stopped == 0 {
		t.Errorf("of %d applications ended, %d succeeded and %d were stopped in a job: want most to succeed and some stopped", ended, succeeded, stopped)
	}
	t.Logf("%d applications ended: %d succeeded, %d stopped in a job", ended, succeeded, stopped)
}

// With UDP every line is a datagram of its own.
func TestUDP(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	// Read while the round is sent: the socket's buffer holds only a few
	// hundred datagrams.
	type result struct{ lines, bad int }
	got := make(chan result, 1)
	stop := make(chan struct{})
	go func() {
		var r result
		buf := make([]byte, 2048)
		for {
			pc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				select {
				case <-stop:
					got <- r
					return
				default:
					continue
				}
			}
			if bytes.Count(buf[:n], []byte("\n")) != 1 || buf[n-1] != '\n' {
				r.bad++
			}
			r.lines++
		}
	}()
	c := NewCluster(Config{Addr: pc.LocalAddr().String(), Apps: 1, Executors: 1, Period: 10 * time.Second, Seed: 1, UDP: true}, time.Unix(1795300000, 0))
	sent, failed := c.SendRound(context.Background(), time.Unix(1795300010, 0))
	close(stop)
	r := <-got
	if failed != 0 || sent < 400 || r.bad != 0 || r.lines == 0 {
		t.Fatalf("sent %d lines (%d failed reports); received %d datagrams, %d not one line", sent, failed, r.lines, r.bad)
	}
}
