package relay

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/delta"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/spark"
)

func wideConn(t testing.TB, s Sink) *Conn {
	d := newDeltas(t, "db")
	d.MatchField = true
	return New(Config{Mapper: spark.NewMapper(spark.Options{Schema: schema.Wide}), Sink: s, Deltas: d,
		JoinReports: true, Now: func() time.Time { return fixedNow }}).NewConn(nil).(*Conn)
}

// A report's lines of one process and source, with one time, are one
// point; anything that tells them apart starts another.
func TestWidePoints(t *testing.T) {
	const app = "app-20261122101500-0001"
	for _, c := range []struct {
		name  string
		lines []string
		flush []int // Flush after these lines
		want  string
	}{
		{"one source, one time: one point, deltas beside their fields", []string{
			app + ".3.executor.cpuTime.count 100 1795300000",
			app + ".3.executor.threadpool.activeTasks 4 1795300000",
			app + ".3.executor.runTime.count 7 1795300000",
		}, nil, "executor,applicationid=" + app + ",process=3 cpuTime.count=100,cpuTime.count_delta=100,threadpool.activeTasks=4,runTime.count=7,runTime.count_delta=7 1795300000000000000\n"},
		{"another source", []string{
			app + ".3.executor.cpuTime.count 100 1795300000",
			app + ".3.ExecutorMetrics.JVMHeapMemory 5 1795300000",
		}, nil, "executor,applicationid=" + app + ",process=3 cpuTime.count=100,cpuTime.count_delta=100 1795300000000000000\n" +
			"ExecutorMetrics,applicationid=" + app + ",process=3 JVMHeapMemory=5 1795300000000000000\n"},
		{"another process", []string{
			app + ".3.executor.threadpool.activeTasks 1 1795300000",
			app + ".4.executor.threadpool.activeTasks 2 1795300000",
		}, nil, "executor,applicationid=" + app + ",process=3 threadpool.activeTasks=1 1795300000000000000\n" +
			"executor,applicationid=" + app + ",process=4 threadpool.activeTasks=2 1795300000000000000\n"},
		{"another time", []string{
			app + ".3.executor.threadpool.activeTasks 1 1795300000",
			app + ".3.executor.threadpool.startedTasks 2 1795300001",
		}, nil, "executor,applicationid=" + app + ",process=3 threadpool.activeTasks=1 1795300000000000000\n" +
			"executor,applicationid=" + app + ",process=3 threadpool.startedTasks=2,threadpool.startedTasks_delta=2 1795300001000000000\n"},
		{"the JVM's pools, fields of its one point", []string{
			app + ".3.jvm.heap.used 9 1795300000",
			app + ".3.jvm.pools.G1-Eden-Space.used 1 1795300000",
			app + ".3.jvm.pools.G1-Eden-Space.max 2 1795300000",
			app + ".3.jvm.pools.Metaspace.used 3 1795300000",
		}, nil, "jvm,applicationid=" + app + ",process=3 heap.used=9,pools.G1-Eden-Space.used=1,pools.G1-Eden-Space.max=2,pools.Metaspace.used=3 1795300000000000000\n"},
		{"another listener", []string{
			app + ".driver.LiveListenerBus.listenerProcessingTime.org.apache.spark.HeartbeatReceiver.count 1 1795300000",
			app + ".driver.LiveListenerBus.listenerProcessingTime.org.apache.spark.HeartbeatReceiver.max 2 1795300000",
			app + ".driver.LiveListenerBus.listenerProcessingTime.org.apache.spark.status.AppStatusListener.count 3 1795300000",
		}, nil, "LiveListenerBus,applicationid=" + app + ",listener=org.apache.spark.HeartbeatReceiver,process=driver listenerProcessingTime.count=1,listenerProcessingTime.count_delta=1,listenerProcessingTime.max=2 1795300000000000000\n" +
			"LiveListenerBus,applicationid=" + app + ",listener=org.apache.spark.status.AppStatusListener,process=driver listenerProcessingTime.count=3,listenerProcessingTime.count_delta=3 1795300000000000000\n"},
		{"a source's gauges and counters, runs apart: one point", []string{
			app + ".3.JVMCPU.jvmCpuTime 5 1795300000",
			app + ".3.executor.threadpool.activeTasks 4 1795300000",
			app + ".3.jvm.heap.used 9 1795300000",
			app + ".3.executor.cpuTime.count 100 1795300000",
			app + ".3.executor.runTime.count 7 1795300000",
		}, nil, "JVMCPU,applicationid=" + app + ",process=3 jvmCpuTime=5,jvmCpuTime_delta=5 1795300000000000000\n" +
			"executor,applicationid=" + app + ",process=3 threadpool.activeTasks=4,cpuTime.count=100,cpuTime.count_delta=100,runTime.count=7,runTime.count_delta=7 1795300000000000000\n" +
			"jvm,applicationid=" + app + ",process=3 heap.used=9 1795300000000000000\n"},
		{"runs apart at another time: kept apart", []string{
			app + ".3.executor.threadpool.activeTasks 4 1795300000",
			app + ".3.jvm.heap.used 9 1795300000",
			app + ".3.executor.cpuTime.count 100 1795300001",
		}, nil, "executor,applicationid=" + app + ",process=3 threadpool.activeTasks=4 1795300000000000000\n" +
			"jvm,applicationid=" + app + ",process=3 heap.used=9 1795300000000000000\n" +
			"executor,applicationid=" + app + ",process=3 cpuTime.count=100,cpuTime.count_delta=100 1795300001000000000\n"},
		{"runs apart that repeat a series: kept apart", []string{
			app + ".3.executor.threadpool.activeTasks 4 1795300000",
			app + ".3.jvm.heap.used 9 1795300000",
			app + ".3.executor.threadpool.activeTasks 5 1795300000",
		}, nil, "executor,applicationid=" + app + ",process=3 threadpool.activeTasks=4 1795300000000000000\n" +
			"jvm,applicationid=" + app + ",process=3 heap.used=9 1795300000000000000\n" +
			"executor,applicationid=" + app + ",process=3 threadpool.activeTasks=5 1795300000000000000\n"},
		{"a series repeated within the report", []string{
			app + ".3.executor.threadpool.activeTasks 1 1795300000",
			app + ".3.executor.threadpool.maxPool_size 8 1795300000",
			app + ".3.executor.threadpool.activeTasks 2 1795300000",
			app + ".3.executor.threadpool.currentPool_size 3 1795300000",
		}, nil, "executor,applicationid=" + app + ",process=3 threadpool.activeTasks=1,threadpool.maxPool_size=8 1795300000000000000\n" +
			"executor,applicationid=" + app + ",process=3 threadpool.activeTasks=2,threadpool.currentPool_size=3 1795300000000000000\n"},
		{"a dropped line between two", []string{
			app + ".3.executor.threadpool.activeTasks 1 1795300000",
			app + ".3.executor.cpuTime.count -5 1795300000", // no counter's value
			app + ".3.executor.threadpool.maxPool_size 8 1795300000",
		}, nil, "executor,applicationid=" + app + ",process=3 threadpool.activeTasks=1,threadpool.maxPool_size=8 1795300000000000000\n"},
		{"a block handed on between two", []string{
			app + ".3.executor.threadpool.activeTasks 1 1795300000",
			app + ".3.executor.threadpool.maxPool_size 8 1795300000",
		}, []int{0}, "executor,applicationid=" + app + ",process=3 threadpool.activeTasks=1 1795300000000000000\n" +
			"executor,applicationid=" + app + ",process=3 threadpool.maxPool_size=8 1795300000000000000\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &sink{}
			conn := wideConn(t, s)
			for i, l := range c.lines {
				conn.Line([]byte(l))
				for _, f := range c.flush {
					if f == i {
						conn.Flush()
					}
				}
			}
			conn.Flush()
			if got := s.buf.String(); got != c.want {
				t.Errorf("got\n%s\nwant\n%s", got, c.want)
			}
		})
	}
}

// A point holds at most maxPointFields fields.
func TestWidePointBound(t *testing.T) {
	s := &sink{}
	conn := wideConn(t, s)
	for i := range maxPointFields + 1 {
		conn.Line(fmt.Appendf(nil, "app-20261122101500-0001.3.executor.m%d 1 1795300000", i))
	}
	conn.Flush()
	lines := strings.Split(strings.TrimSuffix(s.buf.String(), "\n"), "\n")
	if len(lines) != 2 || strings.Count(lines[0], "=") != maxPointFields+2 || !strings.Contains(lines[1], fmt.Sprintf(" m%d=1 ", maxPointFields)) {
		t.Errorf("%d points: %.200q", len(lines), lines)
	}
}

// Merging costs no allocation once the buffers have grown.
func TestWideDoesNotAllocate(t *testing.T) {
	lines := simulatedWide(t)
	conn := wideConn(t, &nullSink{})
	for _, l := range lines {
		conn.Line(l)
	}
	conn.Flush()
	allocs := testing.AllocsPerRun(5, func() {
		for i, l := range lines {
			conn.Line(l)
			if i%1000 == 999 {
				conn.Flush()
			}
		}
		conn.Flush()
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per %d lines", allocs, len(lines))
	}
}

func simulatedWide(t testing.TB) [][]byte { return simulated(t, "", 2) }

// In the wide schema a [[delta]] rule's measurement pattern matches the
// metric's name, the field, so that one rule serves both schemas.
func TestWideDeltaRuleOnField(t *testing.T) {
	const line = "app-20261122101500-0001.3.plugin.com.example.Rows.written 40 1795300000"
	for _, shape := range []schema.Shape{schema.CERN, schema.Wide} {
		d := newDeltas(t, "db", delta.Rule{Source: "test", Cumulative: true, Measurement: []string{"written", "com.example.Rows.written"}})
		d.MatchField = shape == schema.Wide
		s := &sink{}
		c := New(Config{Mapper: spark.NewMapper(spark.Options{Schema: shape}), Sink: s, Deltas: d}).NewConn(nil)
		c.Line([]byte(line))
		c.Flush()
		if !strings.Contains(s.buf.String(), "delta=40") {
			t.Errorf("%s: %q has no delta", shape, s.buf.String())
		}
	}
	// A path that is not Spark's is a measurement with a value in both
	// schemas: its measurement is what the pattern matches.
	d0 := newDeltas(t, "db", delta.Rule{Source: "test", Cumulative: true, Measurement: []string{"servers.*.rows"}})
	d0.MatchField = true
	s0 := &sink{}
	c0 := New(Config{Mapper: spark.NewMapper(spark.Options{Schema: schema.Wide}), Sink: s0, Deltas: d0}).NewConn(nil)
	c0.Line([]byte("servers.host1.rows 40 1795300000"))
	c0.Flush()
	if got := s0.buf.String(); got != "servers.host1.rows value=40,delta=40 1795300000000000000\n" {
		t.Errorf("a path that is not Spark's: %q", got)
	}
	// And a measurement pattern does not match the wide shape's
	// measurement, the source.
	d := newDeltas(t, "db", delta.Rule{Source: "test", Cumulative: true, Measurement: []string{"plugin.com.example.Rows"}})
	d.MatchField = true
	s := &sink{}
	c := New(Config{Mapper: spark.NewMapper(spark.Options{Schema: schema.Wide}), Sink: s, Deltas: d}).NewConn(nil)
	c.Line([]byte(line))
	c.Flush()
	if strings.Contains(s.buf.String(), "delta") {
		t.Errorf("the source matched: %q", s.buf.String())
	}
}

// FuzzWideBlock: a block of lines encoded in the wide schema, with the
// runs of one series and time joined, is valid line protocol and stores
// what the same lines encoded one point each store: the same values under
// the same series, fields and times, a repeated line's last value kept.
func FuzzWideBlock(f *testing.F) {
	const app = "app-20261122101500-0001"
	f.Add(app+".3.executor.threadpool.activeTasks 4 1795300000\n"+app+".3.jvm.heap.used 9 1795300000\n"+app+".3.executor.cpuTime.count 100 1795300000", uint8(0))
	f.Add(app+".3.executor.a 1 1795300000\n"+app+".3.jvm.b 2 1795300000\n"+app+".3.executor.a 3 1795300000\n"+app+".3.executor.c 4 1795300000", uint8(1))
	f.Add(app+".driver.LiveListenerBus.queue.x.size 1 1795300000\nnot.spark 2 1795300000\n"+app+".driver.LiveListenerBus.queue.y.size 3 1795300000", uint8(2))
	mapper := spark.NewMapper(spark.Options{Schema: schema.Wide})
	f.Fuzz(func(t *testing.T, block string, flushAt uint8) {
		lines := strings.Split(block, "\n")
		s := &sink{}
		c := New(Config{Mapper: mapper, Sink: s, JoinReports: true, Now: func() time.Time { return fixedNow }}).NewConn(nil)
		one := New(Config{Mapper: mapper, Now: func() time.Time { return fixedNow }}).NewConn(nil).(*Conn)
		var each []byte
		for i, l := range lines {
			c.Line([]byte(l))
			if i == int(flushAt) {
				c.Flush()
			}
			if lp, err := one.Process([]byte(l)); err == nil {
				each = append(each, lp...)
			}
		}
		c.Flush()
		got, want := storedValues(t, s.buf.Bytes()), storedValues(t, each)
		if len(got) != len(want) {
			t.Fatalf("%d values stored from the block, %d from the lines one by one:\n%s\n%s", len(got), len(want), s.buf.Bytes(), each)
		}
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v && !(g != g && v != v) {
				t.Fatalf("%s: %v from the block, %v from the lines:\n%s\n%s", k, g, v, s.buf.Bytes(), each)
			}
		}
	})
}

// storedValues decodes line protocol into what InfluxDB would keep: for
// each series, field and time, the last value written.
func storedValues(t *testing.T, lp []byte) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, p := range decodePoints(t, lp) {
		for _, f := range p.fields {
			out[fmt.Sprintf("%s %s %d", p.series(), f.key, p.time)] = f.value.FloatV()
		}
	}
	return out
}
