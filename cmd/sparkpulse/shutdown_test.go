package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/influx"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
	"github.com/sparkpulse/sparkpulse/simulate"
)

// stopTestService is a pipeline started for the stop tests, with its logs.
type stopTestService struct {
	*testService
	logs *observer.ObservedLogs
}

// startForStop starts sparkpulse writing to influxURL: one TCP listener
// into database spark, its own metrics into database monitor, with
// stateDir ("" for none). Its log goes to the test as well.
func startForStop(t *testing.T, influxURL, stateDir string) *stopTestService {
	t.Helper()
	return startForStopQueue(t, influxURL, stateDir, 0)
}

// startForStopQueue is startForStop with max-queue-bytes queueBytes (0:
// the default).
func startForStopQueue(t *testing.T, influxURL, stateDir string, queueBytes int) *stopTestService {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	toTest := zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.AddSync(testWriter{t}), zapcore.InfoLevel)
	svc, err := startService(t, config.Config{
		StateDir: stateDir,
		InfluxDB: config.InfluxDBConfig{URL: influxURL, MaxQueueBytes: queueBytes},
		Internal: config.InternalConfig{Database: "monitor"},
		Graphite: []config.GraphiteConfig{{Protocol: "tcp", Database: "spark"}},
	}, zap.New(zapcore.NewTee(core, toTest)))
	if err != nil {
		t.Fatal(err)
	}
	return &stopTestService{svc, logs}
}

// testWriter sends log lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}

// send sends one round of two simulated applications and returns once
// sparkpulse has read every line; it returns the points sparkpulse has
// encoded so far, and the values they hold.
func (s *stopTestService) send(t *testing.T, seed uint64) (points, values uint64) {
	t.Helper()
	now := time.Now().Truncate(time.Second)
	c := simulate.NewCluster(simulate.Config{Addr: s.blocks[0].srv.Addr().String(), Apps: 2, Executors: 2, Period: 10 * time.Second, Seed: seed, Confirm: true}, now.Add(-time.Minute))
	if _, failed := c.SendRound(context.Background(), now); failed > 0 {
		t.Fatalf("%d reports failed", failed)
	}
	st := s.blocks[0].relay.Stats()
	return st.Points.Load(), acceptedValues(st)
}

// stop stops s as `sparkpulse run` does on Ctrl-C and returns its error
// and how long it took.
func (s *stopTestService) stop() (time.Duration, error) { return s.shutdown(shutdownTimeout) }

// logged returns the entries whose message contains snippet.
func (s *stopTestService) logged(snippet string) []observer.LoggedEntry {
	return s.logs.FilterMessageSnippet(snippet).All()
}

// A stop while InfluxDB is hung (stopped: connections open, nothing
// answers) or down (connections refused) takes at most a few seconds and
// keeps what was not delivered in the disk queue, says so, and is not an
// error; the next start delivers all of it.
func TestStopWithInfluxDBDownKeepsPointsOnDisk(t *testing.T) {
	srv := influxtest.Start(t)
	stateDir := t.TempDir()
	const bound = shutdownStall + 2*time.Second

	// Hung: every write request waits longer than the stall bound.
	first := startForStop(t, srv.URL, stateDir)
	if err := syscall.Kill(srv.PID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	cont := func() { _ = syscall.Kill(srv.PID(), syscall.SIGCONT) }
	t.Cleanup(cont)
	_, want := first.send(t, 1)
	took, err := first.stop()
	cont()
	t.Logf("stop with InfluxDB hung: %s, %d values received", took, want)
	if err != nil || took > bound {
		t.Errorf("stop with InfluxDB hung took %s (bound %s): %v", took, bound, err)
	}
	if len(first.logged("InfluxDB has taken nothing for")) != 1 {
		t.Errorf("no stall logged: %v", first.logs.All())
	}
	checkKeptLogged(t, first, stateDir)

	// Down: connections refused; the first run's disk queue cannot be
	// delivered either.
	srv.Kill()
	second := startForStop(t, srv.URL, stateDir)
	_, values := second.send(t, 2)
	want += values
	took, err = second.stop()
	t.Logf("stop with InfluxDB down: %s", took)
	if err != nil || took > bound {
		t.Errorf("stop with InfluxDB down took %s (bound %s): %v", took, bound, err)
	}
	checkKeptLogged(t, second, stateDir)

	// Up again: the next start delivers both runs' points.
	srv.Restart(t)
	third := startForStop(t, srv.URL, stateDir)
	deadline := time.Now().Add(30 * time.Second)
	stored := uint64(0)
	for tick := time.NewTicker(50 * time.Millisecond); ; <-tick.C {
		if stored = countStored(t, srv); stored >= want || time.Now().After(deadline) {
			break
		}
	}
	if _, err := third.stop(); err != nil {
		t.Errorf("stop with InfluxDB up: %v", err)
	}
	if stored = countStored(t, srv); stored != want {
		t.Errorf("InfluxDB holds %d values of the %d received before the two stops", stored, want)
	}
	if got := third.logged("kept in the disk queue"); len(got) != 0 {
		t.Errorf("a stop with everything delivered says %v", got)
	}
}

// checkKeptLogged checks that s's stop said what went to the disk queue,
// and where.
func checkKeptLogged(t *testing.T, s *stopTestService, stateDir string) {
	t.Helper()
	kept := s.logged("undelivered points are kept in the disk queue and sent at the next start")
	if len(kept) != 1 {
		t.Fatalf("no disk queue message: %v", s.logs.All())
	}
	f := kept[0].ContextMap()
	if f["dir"] != filepath.Join(stateDir, "queue") || f["bytes"].(int64) <= 0 {
		t.Errorf("disk queue message: %v", f)
	}
	if lost := s.logged("lost"); len(lost) != 0 {
		t.Errorf("points said lost: %v", lost)
	}
}

// countStored counts the values of database spark as storedValues does,
// 0 while InfluxDB does not answer.
func countStored(t *testing.T, srv influxtest.Influxd) uint64 {
	t.Helper()
	series, err := srv.TryQuery("spark", countValues(""))
	if err != nil {
		return 0
	}
	return valuesIn(t, series)
}

// Without state-dir there is no disk queue: a stop with InfluxDB down
// still ends within the bound, and fails naming the points lost. Its own
// metrics alone going undelivered is not a failure.
func TestStopWithInfluxDBDownWithoutStateDir(t *testing.T) {
	url := refusedURL(t)
	const bound = shutdownStall + 2*time.Second

	idle := startForStop(t, url, "")
	took, err := idle.stop()
	if err != nil || took > bound {
		t.Errorf("stop with only its own metrics undelivered took %s: %v", took, err)
	}
	if len(idle.logged("own metrics were not all delivered")) != 1 {
		t.Errorf("undelivered own metrics not logged: %v", idle.logs.All())
	}

	busy := startForStop(t, url, "")
	points, _ := busy.send(t, 1)
	took, err = busy.stop()
	t.Logf("stop without state-dir: %s: %v", took, err)
	if took > bound {
		t.Errorf("stop took %s, bound %s", took, bound)
	}
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%d points", points)) || strings.Contains(err.Error(), "own metrics") {
		t.Errorf("stop losing %d points returned %v", points, err)
	}
	if len(busy.logged("points lost")) != 1 {
		t.Errorf("loss not logged: %v", busy.logs.All())
	}
}

// reports are simulated Spark reports, at least size bytes of them.
func reports(size int) []byte {
	start := time.Now().Truncate(time.Second).Add(-time.Hour)
	c := simulate.NewCluster(simulate.Config{Apps: 4, Executors: 8, Period: 10 * time.Second, Seed: 7}, start)
	var b bytes.Buffer
	for now := start; b.Len() < size; now = now.Add(10 * time.Second) {
		c.Step(now)
		for i := range c.Processes() {
			_ = c.Report(i, &b, now)
		}
	}
	return b.Bytes()
}

// sendAll writes data over one connection to s's listener and closes it,
// as a sender that ends; the error, if any, goes to sent.
func sendAll(s *stopTestService, data []byte, sent chan<- error) {
	c, err := net.Dial("tcp", s.blocks[0].srv.Addr().String())
	if err == nil {
		_, err = c.Write(data)
		c.Close()
	}
	sent <- err
}

// A stop while InfluxDB takes nothing and the memory queue is full, with
// a connection whose reader waits for room: without state-dir it drops
// what that connection still sends, counted, and ends; with state-dir the
// reader does not wait (what memory cannot hold goes to disk; the queue's
// tests cover batches in flight holding all of it), and everything read
// is kept on disk and delivered at the next start.
func TestStopWithFullQueue(t *testing.T) {
	data := reports(6 << 20) // past two batches in flight and the queue
	const queueBytes = 1 << 20

	t.Run("without state-dir", func(t *testing.T) {
		s := startForStopQueue(t, refusedURL(t), "", queueBytes)
		sent := make(chan error, 1)
		go sendAll(s, data, sent)
		w := s.blocks[0].writer
		for tick := time.NewTicker(10 * time.Millisecond); !w.Blocked(); <-tick.C {
			select {
			case err := <-sent:
				t.Fatalf("sent %d bytes without the reader waiting for room in a %d-byte queue: %v", len(data), queueBytes, err)
			default:
			}
		}
		stopped := make(chan error, 1)
		go func() { _, err := s.stop(); stopped <- err }()
		var err error
		select {
		case err = <-stopped:
		case <-time.After(2 * shutdownTimeout):
			t.Fatalf("the stop has not ended after %s", 2*shutdownTimeout)
		}
		if err == nil || !strings.Contains(err.Error(), "points") {
			t.Errorf("a stop that lost points returned %v", err)
		}
		if err := <-sent; err != nil {
			t.Errorf("the sender: %v", err)
		}
		if len(s.logged("the memory queue is full: dropping what the listener's connections still send")) != 1 {
			t.Errorf("the drop at the stop is not logged: %v", s.logs.All())
		}
		if got := w.Stats().PointsDropped[influx.DropWriterClosed]; got == 0 {
			t.Errorf("no point counted as dropped: %v", w.Stats().PointsDropped)
		}
	})

	t.Run("with state-dir", func(t *testing.T) {
		// Hung once sparkpulse has started: requests wait.
		srv := influxtest.Start(t)
		stateDir := t.TempDir()
		s := startForStopQueue(t, srv.URL, stateDir, queueBytes)
		if err := syscall.Kill(srv.PID(), syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		cont := func() { _ = syscall.Kill(srv.PID(), syscall.SIGCONT) }
		t.Cleanup(cont)
		sent := make(chan error, 1)
		go sendAll(s, data, sent)
		// A reader that waits for room holds the sender up for good: the
		// bound only tells that from slowness.
		select {
		case err := <-sent:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(2 * time.Minute):
			t.Fatalf("%d bytes not taken in 2 minutes: the reader waits for room, with a disk queue", len(data))
		}
		st := s.blocks[0].relay.Stats()
		deadline := time.Now().Add(2 * time.Minute)
		for tick := time.NewTicker(10 * time.Millisecond); s.blocks[0].srv.Stats().ConnsActive.Load() > 0; <-tick.C {
			if time.Now().After(deadline) {
				t.Fatal("the connection is still read after 2 minutes")
			}
		}
		want := acceptedValues(st)
		if _, err := s.stop(); err != nil {
			t.Fatalf("stop: %v", err)
		}
		checkKeptLogged(t, s, stateDir)
		if lines := st.Lines.Load(); lines < uint64(bytes.Count(data, []byte("\n"))) {
			t.Fatalf("read %d lines of %d", lines, bytes.Count(data, []byte("\n")))
		}

		cont()
		next := startForStop(t, srv.URL, stateDir)
		deadline = time.Now().Add(time.Minute)
		for tick := time.NewTicker(50 * time.Millisecond); countStored(t, srv) < want && time.Now().Before(deadline); <-tick.C {
		}
		if _, err := next.stop(); err != nil {
			t.Errorf("stop with InfluxDB up: %v", err)
		}
		if got := countStored(t, srv); got != want {
			t.Errorf("InfluxDB holds %d values of the %d read while it was down", got, want)
		}
	})
}
