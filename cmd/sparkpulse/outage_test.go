package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/influx"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
	"github.com/sparkpulse/sparkpulse/relay"
	"github.com/sparkpulse/sparkpulse/simulate"
)

// Spark-shaped traffic streams into sparkpulse while influxd is killed
// (SIGKILL) and restarted twice, and sparkpulse is stopped and started
// again during the second outage: every value sparkpulse accepted is in
// InfluxDB at the end, once. Reports sent while sparkpulse was down are
// refused at connect, as Spark then drops them too.
func TestOutagesLoseNothing(t *testing.T) {
	srv := influxtest.Start(t)
	outagesLoseNothing(t, srv, config.Config{InfluxDB: config.InfluxDBConfig{URL: srv.URL}, Graphite: []config.GraphiteConfig{{Database: "spark"}}})
}

// storedValues counts the metric values of the points of db that match
// where ("" for all): each field but the delta and rate fields the delta
// stage adds (delta, rate; <field>_delta, <field>_rate in the wide shape),
// as a wide point holds the values of many lines. A timer's
// <name>.mean_rate is a value: there is no <name>.mean_delta. The
// annotations (measurements spark_*) are not counted.
func storedValues(t *testing.T, srv influxtest.Influxd, db, where string) uint64 {
	t.Helper()
	return valuesIn(t, srv.Query(t, db, countValues(where)))
}

// countValues is the statement whose answer valuesIn adds up.
func countValues(where string) string {
	if where != "" {
		where = " WHERE " + where
	}
	return `SELECT count(*) FROM /.*/` + where
}

func valuesIn(t *testing.T, series []influxtest.Series) uint64 {
	t.Helper()
	var stored uint64
	for _, s := range series {
		if strings.HasPrefix(s.Name, "spark_") {
			continue
		}
		counted := map[string]bool{}
		for _, c := range s.Columns {
			counted[c] = true
		}
		derived := func(field string) bool {
			if base, ok := strings.CutSuffix(field, "_delta"); ok && counted["count_"+base] {
				return true
			}
			if base, ok := strings.CutSuffix(field, "_rate"); ok && counted["count_"+base] && counted["count_"+base+"_delta"] {
				return true
			}
			return field == "delta" || field == "rate"
		}
		for i, c := range s.Columns {
			if field, ok := strings.CutPrefix(c, "count_"); !ok || derived(field) {
				continue
			}
			for _, row := range s.Values {
				if row[i] != nil {
					stored += uint64(toFloat(t, row[i]))
				}
			}
		}
	}
	return stored
}

// acceptedValues is the values a block's relay handed on: a line each,
// but for the lines it dropped. (A full queue drops points, and only for
// UDP; the tests that count values send over TCP.)
func acceptedValues(st *relay.Stats) uint64 {
	n := st.Lines.Load()
	for i := range st.Dropped {
		n -= st.Dropped[i].Load()
	}
	return n
}

// outagesLoseNothing is TestOutagesLoseNothing against srv, to which
// sparkpulse writes as cfg says, from its [[graphite]] block, with env.
func outagesLoseNothing(t *testing.T, srv influxtest.Influxd, cfg config.Config, env ...string) {
	t.Helper()
	// The block binds port 0: each start gets its own port, and the
	// cluster is pointed at it. Its disk queue is named after the
	// configured address, so the instance started again finds the queue
	// the stopped one left.
	cfg.StateDir = t.TempDir()
	// In memory, 4 MiB: outages spill to disk. Not less than the batches
	// in flight (max-in-flight, 2, of up to 1 MiB) and the one filling:
	// a queue those hold whole has nothing to spill, and a stop during
	// the outage would wait for InfluxDB.
	cfg.InfluxDB.MaxQueueBytes = 4 << 20
	svc := startSparkpulse(t, cfg, env...)

	const rounds = 600
	start := time.Now().Add(-rounds * 10 * time.Second).Truncate(time.Second)
	cluster := simulate.NewCluster(simulate.Config{Addr: svc.addr(0), Apps: 2, Executors: 3, Period: 10 * time.Second, Seed: 3}, start)
	var accepted, refusedReports uint64
	var peak int64
	var spilled uint64
	dropped, writeErrors := map[string]uint64{}, map[string]uint64{}
	collect := func(s *testService) {
		accepted += acceptedValues(s.blocks[0].relay.Stats())
		st := s.blocks[0].writer.Stats()
		peak = max(peak, st.PeakBacklog)
		spilled += st.DiskSpilled
		for k, v := range st.PointsDropped {
			dropped[k] += v
		}
		for k, v := range st.WriteErrors {
			writeErrors[k] += v
		}
	}
	pace := time.NewTicker(40 * time.Millisecond) // about 25 s of streaming
	defer pace.Stop()
	began := time.Now()
	for r := range rounds {
		switch r {
		case 100, 400:
			srv.Kill()
			t.Logf("round %d: influxd killed", r)
		case 220, 520:
			srv.Restart(t)
			t.Logf("round %d: influxd restarted", r)
		case 460: // during the second outage: sparkpulse keeps its queue on disk
			if _, err := svc.shutdown(2 * time.Second); err != nil {
				t.Fatalf("shutdown during the outage: %v", err)
			}
			collect(svc)
			svc = startSparkpulse(t, cfg, env...)
			cluster.SetAddr(svc.addr(0))
			t.Logf("round %d: sparkpulse restarted on %s", r, svc.addr(0))
		}
		_, failed := cluster.SendRound(context.Background(), start.Add(time.Duration(r)*10*time.Second))
		refusedReports += uint64(failed)
		<-pace.C
	}
	svc.flush() // the last instance delivers its backlog, disk queue included
	svc.stop()
	collect(svc)

	stored := storedValues(t, srv, "spark", "")
	t.Logf("%s: %d values accepted, %d stored; %d reports refused while sparkpulse restarted; peak backlog %d bytes, %d batches spilled to disk; write errors %v",
		time.Since(began).Round(time.Second), accepted, stored, refusedReports, peak, spilled, writeErrors)
	if stored != accepted || accepted < 500_000 || len(dropped) > 0 {
		t.Errorf("InfluxDB stores %d values, sparkpulse accepted %d; points dropped by reason: %v", stored, accepted, dropped)
	}
	if spilled == 0 || peak < 8<<20 {
		t.Errorf("the outages never went to disk: peak backlog %d bytes, %d batches spilled", peak, spilled)
	}
}

// A disk queue left by a listener the config no longer has is named at
// start, with its size, and left alone.
func TestOrphanDiskQueueWarned(t *testing.T) {
	srv := influxtest.Start(t)
	stateDir := t.TempDir()
	orphan := queueDir(stateDir, "tcp://10.0.0.1:2003", influx.Target{Bucket: "old"})
	if err := os.MkdirAll(orphan, 0o700); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(orphan, "0000001099511627776.seg")
	if err := os.WriteFile(seg, append([]byte("SPQSEG1\n"), make([]byte, 100)...), 0o600); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.WarnLevel)
	svc, err := startService(t, config.Config{StateDir: stateDir, InfluxDB: config.InfluxDBConfig{URL: srv.URL}, Graphite: []config.GraphiteConfig{{}}}, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	svc.stop()
	warned := logs.FilterMessageSnippet("no listener of this config uses").All()
	if len(warned) != 1 || warned[0].ContextMap()["dir"] != orphan || warned[0].ContextMap()["bytes"] != int64(100) {
		t.Errorf("warnings: %+v", logs.All())
	}
	if _, err := os.Stat(seg); err != nil {
		t.Errorf("the orphan queue was touched: %v", err)
	}
}

// Without a state-dir, while InfluxDB is down and the memory queue is full,
// sparkpulse takes no new TCP connection: Spark's reports wait in the
// kernel's accept queue (and their senders block once it is full) instead
// of each holding a goroutine and buffers. When InfluxDB is back, every
// report is read and every point stored.
func TestBackpressureHoldsConnectionsInTheKernel(t *testing.T) {
	srv := influxtest.Start(t)
	svc := startSparkpulse(t, config.Config{
		InfluxDB: config.InfluxDBConfig{URL: srv.URL, MaxQueueBytes: 1 << 20},
		Graphite: []config.GraphiteConfig{{Database: "spark"}},
	})
	srv.Kill()
	const rounds = 40 // 2 apps × (driver + 3 executors) × 40: 320 reports, about 4 MiB of points
	start := time.Now().Add(-rounds * 10 * time.Second).Truncate(time.Second)
	cluster := simulate.NewCluster(simulate.Config{Addr: svc.addr(0), Apps: 2, Executors: 3, Period: 10 * time.Second, Seed: 5}, start)
	sent := 0
	for r := range rounds {
		n, failed := cluster.SendRound(context.Background(), start.Add(time.Duration(r)*10*time.Second))
		if failed > 0 {
			t.Fatalf("round %d: %d reports failed", r, failed)
		}
		sent += n
	}
	// Every report is written (into the kernel); sparkpulse stops taking
	// them once its queue is full.
	w, tcp := svc.blocks[0].writer, svc.blocks[0].srv.Stats()
	var taken, active uint64
	deadline := time.Now().Add(30 * time.Second)
	for tick := time.NewTicker(20 * time.Millisecond); ; <-tick.C {
		before := tcp.ConnsHandled.Load()
		<-tick.C
		taken, active = tcp.ConnsHandled.Load(), tcp.ConnsActive.Load()
		if taken == before && w.Stats().QueuedBytes > 3<<18 {
			break // settled, with the queue over three quarters full
		}
		if time.Now().After(deadline) {
			t.Fatalf("never settled: %d connections taken, queue %+v", taken, w.Stats())
		}
	}
	t.Logf("InfluxDB down, queue full: %d of %d reports taken, %d connections open", taken, 8*rounds, active)
	if taken > 8*rounds/2 || active > 50 {
		t.Errorf("%d connections taken and %d open while the queue was full", taken, active)
	}

	srv.Restart(t)
	deadline = time.Now().Add(2 * time.Minute)
	for tick := time.NewTicker(20 * time.Millisecond); tcp.ConnsHandled.Load() < 8*rounds; <-tick.C {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d reports taken after InfluxDB came back", tcp.ConnsHandled.Load(), 8*rounds)
		}
	}
	svc.stop()
	encoded := acceptedValues(svc.blocks[0].relay.Stats())
	stored := storedValues(t, srv, "spark", "")
	if stored != encoded || int(svc.blocks[0].relay.Stats().Lines.Load()) != sent {
		t.Errorf("%d lines sent, %d read, %d values encoded, %d stored", sent, svc.blocks[0].relay.Stats().Lines.Load(), encoded, stored)
	}
}

// With create-database, InfluxDB down when sparkpulse starts is no lasting
// fault: once InfluxDB is up, the first write it answers 404 ("database
// not found") creates the database, and every line arrives. The same
// holds for a database dropped while sparkpulse runs.
func TestDatabaseCreatedAfterAStartWithoutInfluxDB(t *testing.T) {
	srv := influxtest.Start(t)
	srv.Kill()
	svc := startSparkpulse(t, config.Config{InfluxDB: config.InfluxDBConfig{URL: srv.URL}, Graphite: []config.GraphiteConfig{{Database: "late"}}})
	srv.Restart(t)
	now := time.Now().Unix()
	sendTCP(t, svc.addr(0), fmt.Sprintf("app-20261122101500-0001.driver.jvm.heap.used 42 %d\n", now))
	svc.flush()
	if got := storedValues(t, srv, "late", ""); got != 1 {
		t.Errorf("%d values stored after InfluxDB came up, want 1", got)
	}
}
