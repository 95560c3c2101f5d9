package relay

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/delta"
	"github.com/sparkpulse/sparkpulse/graphite"
	"github.com/sparkpulse/sparkpulse/ingestlog"
	"github.com/sparkpulse/sparkpulse/queue"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/simulate"
	"github.com/sparkpulse/sparkpulse/spark"
	"github.com/sparkpulse/sparkpulse/templates"
)

// sink records what a Conn hands on.
type sink struct {
	buf    bytes.Buffer
	points int
	calls  int
}

// AppendLines keeps the lines, once it has checked that their ends and
// series keys' ends are where the lines have them.
func (s *sink) AppendLines(l queue.Lines, _ bool) bool {
	if got := queue.Scan(l.Data); !slices.Equal(got.Ends, l.Ends) || len(got.Data) != len(l.Data) {
		panic(fmt.Sprintf("the relay's line ends %v are not those of its lines, %v", l.Ends, got.Ends))
	} else if !slices.Equal(got.Keys, l.Keys) {
		panic(fmt.Sprintf("the relay's key ends %v are not those of its lines, %v, in %q", l.Keys, got.Keys, l.Data))
	}
	s.buf.Write(l.Data)
	s.points += l.Len()
	s.calls++
	return true
}

// nullSink keeps nothing, for benchmarks.
type nullSink struct{ points int }

func (s *nullSink) AppendLines(l queue.Lines, _ bool) bool {
	s.points += l.Len()
	return true
}

// mapperFunc adapts a function to Mapper.
type mapperFunc func(path []byte, r *templates.Result) error

func (f mapperFunc) Apply(path []byte, r *templates.Result) error { return f(path, r) }

func mustCompile(t testing.TB, tmpl ...string) *templates.Engine {
	t.Helper()
	e, err := templates.Compile(tmpl, ".", nil)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

var fixedNow = time.Unix(1795300000, 123)

func TestConnLinesAndDrops(t *testing.T) {
	s := &sink{}
	r := New(Config{Mapper: mustCompile(t, "t.* measurement.time", "f.* measurement.field", "measurement*"), Sink: s,
		Now: func() time.Time { return fixedNow }})
	c := r.NewConn(nil)
	for _, l := range []string{
		"a.b 1 1795300000",
		"no.timestamp 2",
		"a.b NaN 1795300000",       // nan
		"a.b Infinity 1795300000",  // inf
		"a.b x 1795300000",         // value
		"a.b",                      // fields
		"a.b 1 1e12",               // timestamp_range
		"a.b 1 soon",               // timestamp
		"t.x 1 1795300000",         // a tag named time: InfluxDB refuses it
		"f.time 1 1795300000",      // a field named time
		"bad\xffutf8 1 1795300000", // not valid line protocol
		strings.Repeat("k", 70000) + " 1 1795300000", // series key over 65535 bytes
		"c.d 3 1795300000",
	} {
		c.Line([]byte(l))
	}
	c.Flush()
	want := "a.b value=1 1795300000000000000\nno.timestamp value=2 1795300000000000123\nc.d value=3 1795300000000000000\n"
	if s.buf.String() != want || s.points != 3 || s.calls != 1 {
		t.Errorf("sink got %d points in %d calls:\n%s\nwant\n%s", s.points, s.calls, s.buf.String(), want)
	}
	st := r.Stats()
	if st.Lines.Load() != 13 || st.Points.Load() != 3 {
		t.Errorf("lines %d points %d, want 13 and 3", st.Lines.Load(), st.Points.Load())
	}
	wantDrops := map[string]uint64{"nan": 1, "inf": 1, "value": 1, "fields": 1, "timestamp_range": 1, "timestamp": 1,
		"time_key": 2, "encode": 1, "key_too_long": 1}
	for i := Reason(1); i < NumReasons; i++ {
		if got := st.Dropped[i].Load(); got != wantDrops[i.String()] {
			t.Errorf("dropped[%s] = %d, want %d", i, got, wantDrops[i.String()])
		}
	}
	// Nothing is handed on twice, and an empty block calls nobody.
	c.Flush()
	c.Close()
	if s.calls != 1 {
		t.Errorf("%d sink calls, want 1", s.calls)
	}
}

func TestConnMappingError(t *testing.T) {
	s := &sink{}
	boom := errors.New("no mapping for this path")
	r := New(Config{Sink: s, Mapper: mapperFunc(func(p []byte, res *templates.Result) error {
		if bytes.HasPrefix(p, []byte("bad")) {
			return boom
		}
		return mustCompile(t, "measurement*").Apply(p, res)
	})})
	c := r.NewConn(nil).(*Conn)
	c.Line([]byte("bad.path 1 1795300000"))
	c.Line([]byte("good.path 1 1795300000"))
	c.Flush()
	if r.Stats().Dropped[ReasonMapping].Load() != 1 || s.points != 1 {
		t.Errorf("mapping drops %d, points %d", r.Stats().Dropped[ReasonMapping].Load(), s.points)
	}
	// The mapper's message: a refusal is remembered as text, so that
	// dropping another line of the path costs no allocation.
	if _, err := c.Process([]byte("bad.path 1 1795300000")); err == nil || err.Error() != boom.Error() {
		t.Errorf("Process error %v, want the mapper's", err)
	}
}

// Process explains every drop with the InfluxDB 1.x text and leaves no
// trace of a failed line in the next result.
func TestProcess(t *testing.T) {
	c := New(Config{Mapper: spark.NewMapper(spark.Options{})}).NewConn(nil).(*Conn)
	lp, err := c.Process([]byte("app-20261122101500-0001.3.executor.cpuTime.count 81234 1795300000"))
	if err != nil || string(lp) != "cpuTime.count,applicationid=app-20261122101500-0001,namespace=executor,process=3 value=81234 1795300000000000000\n" {
		t.Errorf("Process: %q %v", lp, err)
	}
	if _, err := c.Process([]byte("x.y NaN 1795300000")); err == nil || err.Error() != `field "x.y" value: "NaN" is unsupported` {
		t.Errorf("NaN: %v", err)
	}
	if _, err := c.Process([]byte("x\xff.y 1 1795300000")); err == nil {
		t.Error("invalid UTF-8 accepted")
	}
	lp, err = c.Process([]byte("x.y 2 1795300000"))
	if err != nil || string(lp) != "x.y value=2 1795300000000000000\n" {
		t.Errorf("after a failed line: %q %v", lp, err)
	}
}

// corpus returns a Spark-shaped stream: every line of a simulated driver
// and executors report, as Spark's GraphiteSink sends it.
func corpus(tb testing.TB) [][]byte {
	tb.Helper()
	raw := `app-20261122101500-0001.3.ExecutorMetrics.JVMHeapMemory 2147483648 1795300000
app-20261122101500-0001.3.ExecutorMetrics.MinorGCCount 57 1795300000
app-20261122101500-0001.3.ExecutorMetrics.OnHeapExecutionMemory 268435456 1795300000
app-20261122101500-0001.3.ExecutorMetrics.TotalGCTime 2954 1795300000
app-20261122101500-0001.3.JVMCPU.jvmCpuTime 913244000000 1795300000
app-20261122101500-0001.3.NettyBlockTransfer.shuffle-client.usedDirectMemory 16777216 1795300000
app-20261122101500-0001.3.executor.filesystem.hdfs.read_bytes 10737418240 1795300000
app-20261122101500-0001.3.executor.threadpool.activeTasks 4 1795300000
app-20261122101500-0001.3.executor.threadpool.completeTasks 412 1795300000
app-20261122101500-0001.3.jvm.G1-Young-Generation.count 57 1795300000
app-20261122101500-0001.3.jvm.heap.usage 0.31 1795300000
app-20261122101500-0001.3.jvm.pools.G1-Eden-Space.used 1398016 1795300000
app-20261122101500-0001.3.executor.bytesRead.count 10737418240 1795300000
app-20261122101500-0001.3.executor.cpuTime.count 512345678901 1795300000
app-20261122101500-0001.3.executor.jvmGCTime.count 2140 1795300000
app-20261122101500-0001.3.executor.runTime.count 620154 1795300000
app-20261122101500-0001.3.executor.shuffleBytesWritten.count 73400320 1795300000
app-20261122101500-0001.3.executor.succeededTasks.count 418 1795300000
app-20261122101500-0001.driver.DAGScheduler.messageProcessingTime.p99 9.77 1795300000
app-20261122101500-0001.driver.DAGScheduler.job.activeJobs 1 1795300000
app-20261122101500-0001.driver.LiveListenerBus.queue.appStatus.size 0 1795300000
app-20261122101500-0001.driver.spark.streaming.orders_agg.inputRate-total 1532.40 1795300000`
	var lines [][]byte
	for _, l := range strings.Split(raw, "\n") {
		lines = append(lines, []byte(l))
	}
	return lines
}

// simulated returns rounds reports (10 s apart) of every process of a
// simulated Spark cluster of 2 applications with 20 executors each, in the
// reporter's order and format: about 8 300 lines per round, whole numbers,
// fractions and NaN as Spark sends them.
func simulated(tb testing.TB, prefix string, rounds int) [][]byte {
	tb.Helper()
	start := time.Unix(1795300000, 0)
	c := simulate.NewCluster(simulate.Config{Apps: 2, Executors: 20, Period: 10 * time.Second, Seed: 1, Prefix: prefix}, start)
	var buf bytes.Buffer
	for r := range rounds {
		now := start.Add(time.Duration(r) * 10 * time.Second)
		c.Step(now)
		for p := range c.Processes() {
			if err := c.Report(p, &buf, now); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), []byte("\n"))
}

// BenchmarkConn measures the per-line work of the service in its steady
// state (every series seen before): parse, map, delta, encode into the
// connection's block, with a Flush every 1000 lines (a 64 KiB read holds
// about that many Spark lines). The lines are 20 rounds of a simulated
// cluster's reports; the first round is sent before timing.
//
// spark+deltas+admission adds what guards against hostile senders, as
// the service runs with [annotate] urls: each application id nominated to
// the REST poller (OnApp, a few per block) and the per-application delta
// quota; on known series it must cost what spark+deltas costs. +peer adds
// check-peer on a TCP connection: each line's application and process
// compared with the last one's, as text, and the listing's version read.
func BenchmarkConn(b *testing.B) {
	for _, bc := range []struct {
		name      string
		mapper    Mapper
		prefix    string
		deltas    bool
		admission bool
		peer      bool
	}{
		{"spark", spark.NewMapper(spark.Options{}), "", false, false, false},
		{"spark+deltas", spark.NewMapper(spark.Options{}), "", true, false, false},
		{"spark+deltas+admission", spark.NewMapper(spark.Options{}), "", true, true, false},
		{"spark+deltas+admission+peer", spark.NewMapper(spark.Options{}), "", true, true, true},
		{"cern-templates", mustCompile(b, simulate.CERNTemplates...), "spark.prod", false, false, false},
		{"wide+deltas", spark.NewMapper(spark.Options{Schema: schema.Wide}), "", true, false, false},
		// With state-dir: every block's lines appended to the ingest log.
		{"wide+deltas+ingestlog", spark.NewMapper(spark.Options{Schema: schema.Wide}), "", true, false, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			lines := simulated(b, bc.prefix, 20)
			var bytesTotal int
			for _, l := range lines {
				bytesTotal += len(l) + 1
			}
			ns := &nullSink{}
			cfg := Config{Mapper: bc.mapper, Sink: ns, JoinReports: strings.HasPrefix(bc.name, "wide")}
			if bc.deltas {
				cfg.Deltas = newDeltas(b, "spark")
				cfg.Deltas.MatchField = strings.HasPrefix(bc.name, "wide")
			}
			nominated := 0
			if bc.admission {
				cfg.AppTag, cfg.OnApp = "applicationid", func(string) { nominated++ }
			} else if bc.deltas {
				cfg.AppTag = "-" // no tag of that name: no application, no quota
			}
			if strings.HasSuffix(bc.name, "+ingestlog") {
				l, err := ingestlog.Open(b.TempDir(), "bench", 0, nil)
				if err == nil {
					_, err = l.Rotate(nil)
				}
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				cfg.Ingest = l
			}
			var remote net.Addr
			if bc.peer {
				var version atomic.Uint64
				cfg.PeerCheck = func(string, string, netip.Addr) bool { return true }
				cfg.PeerVersion = version.Load
				remote = &net.TCPAddr{IP: net.ParseIP("10.0.0.1"), Port: 40000}
			}
			c := New(cfg).NewConn(remote)
			perRound := len(lines) / 20
			for _, l := range lines[:perRound] {
				c.Line(l)
			}
			c.Flush()
			ns.points = 0
			b.ReportAllocs()
			b.SetBytes(int64(bytesTotal / len(lines)))
			i := 0
			for b.Loop() {
				c.Line(lines[perRound+i%(len(lines)-perRound)])
				if i++; i%1000 == 0 {
					c.Flush()
				}
			}
			c.Flush()
			b.ReportMetric(float64(i)/b.Elapsed().Seconds(), "lines/s")
			if bc.admission && nominated == 0 {
				b.Fatal("no application id was nominated: the admission path did not run")
			}
		})
	}
}

// BenchmarkConnRejected measures a line whose value is no number, as a
// broken or hostile sender repeats it on every line: parsed, refused and
// counted, nothing encoded. It is what graphite's checkFloat is for (it
// answers strconv's error without strconv allocating it), measured here
// on the service's path rather than on the parser alone.
func BenchmarkConnRejected(b *testing.B) {
	var lines [][]byte
	for _, l := range simulated(b, "", 2) {
		f := bytes.Fields(l)
		lines = append(lines, fmt.Appendf(nil, "%s %s %s", f[0], "12.5MB", f[2]))
	}
	c := New(Config{Mapper: spark.NewMapper(spark.Options{}), Sink: &nullSink{}}).NewConn(nil)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		c.Line(lines[i%len(lines)])
		if i++; i%1000 == 0 {
			c.Flush()
		}
	}
	c.Flush()
	if st := c.(*Conn).relay.Stats(); st.Dropped[graphite.ReasonValue].Load() == 0 {
		b.Fatal("no line was refused")
	}
}

func newDeltas(t testing.TB, bucket string, rules ...delta.Rule) *Deltas {
	t.Helper()
	if rules == nil {
		rules = spark.DeltaRules()
	}
	r, err := delta.CompileRules(rules)
	if err != nil {
		t.Fatal(err)
	}
	return &Deltas{Rules: r, Tracker: delta.New(delta.Settings{FirstSampleGrace: delta.NoGrace}, fixedNow), Bucket: bucket}
}

// Cumulative series get delta and rate fields named after their field;
// gauges get none; a line the encoder refuses does not move a baseline.
func TestDeltaFields(t *testing.T) {
	s := &sink{}
	eng := mustCompile(t, "f.* measurement.field", "measurement*")
	d := newDeltas(t, "db", delta.Rule{Source: "test", Cumulative: true, Path: []string{"**.count", "f.*.*"}})
	c := New(Config{Mapper: eng, Sink: s, Deltas: d, Now: func() time.Time { return fixedNow }}).NewConn(nil)
	for _, l := range []string{
		"a.count 10 1795300000",
		"a.gauge 5 1795300000",
		"f.cpu.ticks 100 1795300000",
		"a.count 25 1795300010",
		"f.cpu.ticks 160 1795300020",
		"bad\xff.count 1 1795300020", // refused by the encoder
		"a.count 3 1795300020",       // a restart from zero
	} {
		c.Line([]byte(l))
	}
	c.Flush()
	want := `a.count value=10,delta=10 1795300000000000000
a.gauge value=5 1795300000000000000
f cpu=100,cpu_delta=100 1795300000000000000
a.count value=25,delta=15,rate=1.5 1795300010000000000
f cpu=160,cpu_delta=60,cpu_rate=3 1795300020000000000
a.count value=3,delta=3,rate=0.3 1795300020000000000
`
	if s.buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", s.buf.String(), want)
	}
	if d.Tracker.Len() != 2 {
		t.Errorf("%d series tracked, want 2 (the refused line must not create one)", d.Tracker.Len())
	}
	// The same series in another bucket is another series.
	s2 := &sink{}
	d2 := *d
	d2.Bucket = "other"
	c2 := New(Config{Mapper: eng, Sink: s2, Deltas: &d2}).NewConn(nil)
	c2.Line([]byte("a.count 30 1795300030"))
	c2.Flush()
	if got := s2.buf.String(); got != "a.count value=30,delta=30 1795300030000000000\n" {
		t.Errorf("other bucket: %q", got)
	}
}

// OnApp hears each application id a connection carries, once per change,
// and only for points that were encoded.
func TestOnApp(t *testing.T) {
	var seen []string
	r := New(Config{Mapper: spark.NewMapper(spark.Options{}), Sink: &sink{}, AppTag: "applicationid",
		OnApp: func(app string) { seen = append(seen, app) }})
	c := r.NewConn(nil)
	for _, l := range []string{
		"app-20261122101500-0001.3.executor.cpuTime.count 1 1795300000",
		"app-20261122101500-0001.3.executor.runTime.count 1 1795300000",
		"app-20261122101500-0002.driver.jvm.heap.used NaN 1795300000", // dropped: not heard
		"master.aliveWorkers 3 1795300000",                            // no application
		"app-20261122101500-0002.driver.jvm.heap.used 5 1795300000",
		"app-20261122101500-0002.1.executor.runTime.count 1 1795300000",
	} {
		c.Line([]byte(l))
	}
	c.Close()
	if got := strings.Join(seen, " "); got != "app-20261122101500-0001 app-20261122101500-0002" {
		t.Errorf("OnApp heard %q", got)
	}
}

// fullSink has no room: it waits forever, or refuses.
type fullSink struct{ calls int }

func (s *fullSink) AppendLines(_ queue.Lines, wait bool) bool {
	if wait {
		panic("a non-blocking relay waited")
	}
	s.calls++
	return false
}

// A non-blocking relay (UDP) counts what the sink has no room for, and
// goes on.
func TestNonBlockingQueueFull(t *testing.T) {
	s := &fullSink{}
	r := New(Config{Mapper: mustCompile(t, "measurement*"), Sink: s, NonBlocking: true})
	c := r.NewConn(nil)
	c.Line([]byte("a.b 1 1795300000"))
	c.Line([]byte("a.c 2 1795300000"))
	c.Flush()
	st := r.Stats()
	if st.Dropped[ReasonQueueFull].Load() != 2 || st.Points.Load() != 0 || s.calls != 1 {
		t.Errorf("queue_full %d, points %d, appends %d", st.Dropped[ReasonQueueFull].Load(), st.Points.Load(), s.calls)
	}
	if ReasonQueueFull.String() != "queue_full" {
		t.Error(ReasonQueueFull.String())
	}
}

// A block carrying many applications calls OnApp at most maxAppsPerBlock
// times: a flood on one connection nominates a few ids, not thousands.
func TestOnAppBoundedPerBlock(t *testing.T) {
	calls := 0
	r := New(Config{Mapper: spark.NewMapper(spark.Options{}), Sink: &sink{}, AppTag: "applicationid",
		OnApp: func(string) { calls++ }})
	c := r.NewConn(nil)
	for i := range 1000 {
		c.Line([]byte(fmt.Sprintf("application_1700000000000_%d.driver.jvm.heap.used 1 1795300000", i)))
	}
	c.Flush()
	if calls != maxAppsPerBlock {
		t.Errorf("%d OnApp calls for a block of 1000 applications, want %d", calls, maxAppsPerBlock)
	}
	c.Line([]byte("app-20261122101500-0001.driver.jvm.heap.used 1 1795300000"))
	c.Close()
	if calls != maxAppsPerBlock+1 {
		t.Errorf("the next block's application was not heard: %d calls", calls)
	}
}

// TestForgedLines: a line dated too far ahead is dropped whatever its
// series, and a cumulative series' value no counter can have is dropped
// too; neither moves the series' baseline, so the next genuine report's
// delta is exact.
func TestForgedLines(t *testing.T) {
	s := &sink{}
	d := newDeltas(t, "db", delta.Rule{Source: "test", Cumulative: true, Path: []string{"**.count"}})
	r := New(Config{Mapper: mustCompile(t, "measurement*"), Sink: s, Deltas: d, Now: func() time.Time { return fixedNow }})
	c := r.NewConn(nil)
	for _, l := range []string{
		"a.count 10 1795299990",
		"a.count 0 2145916800",      // 2038: future
		"a.gauge 5 1795300121",      // 2 min 1 s ahead: future, gauges too
		"a.count 1e13 1795300121",   // future
		"a.count -4 1795299995",     // not_counter
		"a.count 9.3e18 1795299996", // not_counter
		"a.count 1e300 1795299997",  // not_counter
		"a.gauge -5 1795300000",     // a gauge may be negative
		"a.count 25 1795300000",
	} {
		c.Line([]byte(l))
	}
	c.Flush()
	want := `a.count value=10,delta=10 1795299990000000000
a.gauge value=-5 1795300000000000000
a.count value=25,delta=15,rate=1.5 1795300000000000000
`
	if s.buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", s.buf.String(), want)
	}
	st := r.Stats()
	if f, n := st.Dropped[ReasonFuture].Load(), st.Dropped[ReasonNotCounter].Load(); f != 3 || n != 3 {
		t.Errorf("dropped future %d, not_counter %d; want 3 and 3", f, n)
	}
	if _, err := r.NewConn(nil).(*Conn).Process([]byte("a.count 0 2145916800")); err == nil || !strings.Contains(err.Error(), "2038-01-01T00:00:00Z is more than 2m0s after") {
		t.Errorf("a future line's error: %v", err)
	}
	if _, err := r.NewConn(nil).(*Conn).Process([]byte("a.count -4 1795300001")); err == nil || !strings.Contains(err.Error(), "value -4 of a cumulative series is no counter's") {
		t.Errorf("a negative counter's error: %v", err)
	}
}

// TestMaxFuture: the bound is a setting.
func TestMaxFuture(t *testing.T) {
	s := &sink{}
	c := New(Config{Mapper: mustCompile(t, "measurement*"), Sink: s, MaxFuture: time.Hour, Now: func() time.Time { return fixedNow }}).NewConn(nil)
	c.Line([]byte("a.gauge 1 1795303599"))
	c.Line([]byte("a.gauge 2 1795303601"))
	c.Flush()
	if got := s.buf.String(); got != "a.gauge value=1 1795303599000000000\n" {
		t.Errorf("got %q", got)
	}
}

// The peer check of a connection is asked again for another application
// even when its id has the same checksum as the last one's (an attacker
// can find one in under a second), and again once the listing changed: a
// connection allowed while the victim's executor was not listed yet is
// held to where Spark then lists it.
func TestPeerCheckBypasses(t *testing.T) {
	// Two application ids of Spark's shape with one FNV-1a checksum.
	seen := map[uint32]string{}
	var victim, twin string
	for i := 0; twin == ""; i++ {
		id := fmt.Sprintf("app-2026112210%04d-%04d", i/10000, i%10000)
		h := appChecksum([]byte(id))
		if other, ok := seen[h]; ok {
			victim, twin = other, id
		}
		seen[h] = id
	}
	exec1 := netip.MustParseAddr("10.0.0.1")
	listed := map[string]netip.Addr{}
	var version atomic.Uint64
	check := func(app, process string, peer netip.Addr) bool {
		want, ok := listed[app+"/"+process]
		return !ok || want == peer
	}
	r := New(Config{Mapper: spark.NewMapper(spark.Options{}), Sink: &sink{}, PeerCheck: check, PeerVersion: version.Load,
		AppTag: "applicationid", Now: func() time.Time { return fixedNow }})
	attacker := r.NewConn(&net.TCPAddr{IP: net.ParseIP("10.0.0.9"), Port: 40000}).(*Conn)
	allowed := func(app string) bool {
		_, err := attacker.Process([]byte(app + ".1.executor.cpuTime.count 5 1795300000"))
		return err == nil
	}

	listed[victim+"/1"] = exec1
	if !allowed(twin) { // its own, unlisted application
		t.Errorf("%s, listed nowhere: refused", twin)
	}
	if allowed(victim) {
		t.Errorf("%s after %s (one checksum), from 10.0.0.9: allowed, but Spark lists its executor at %s", victim, twin, exec1)
	}

	delete(listed, victim+"/1")
	version.Add(1)
	if !allowed(victim) {
		t.Errorf("%s, its executor not listed yet: refused", victim)
	}
	listed[victim+"/1"] = exec1
	version.Add(1)
	if allowed(victim) {
		t.Errorf("%s once its executor is listed at %s: still allowed from 10.0.0.9", victim, exec1)
	}
	attacker.Close()
}

// TestPeerCheck: a TCP connection's points of an application's process
// pass only where PeerCheck allows their sender, asked once per
// (application, process) of the connection; points without both tags,
// and connections without a TCP peer (UDP), are not checked.
func TestPeerCheck(t *testing.T) {
	s := &sink{}
	var asked []string
	check := func(app, process string, peer netip.Addr) bool {
		asked = append(asked, app+"/"+process+"@"+peer.String())
		return process != "1" || peer == netip.MustParseAddr("10.0.0.1")
	}
	r := New(Config{Mapper: spark.NewMapper(spark.Options{}), Sink: s, PeerCheck: check, AppTag: "applicationid",
		Now: func() time.Time { return fixedNow }})
	lines := []string{
		"app-20261122101500-0001.1.executor.cpuTime.count 5 1795300000",
		"app-20261122101500-0001.1.executor.runTime.count 7 1795300000",
		"app-20261122101500-0001.2.executor.cpuTime.count 5 1795300000",
		"app-20261122101500-0001.driver.jvm.heap.used 9 1795300000",
	}
	send := func(remote net.Addr) {
		c := r.NewConn(remote)
		for _, l := range lines {
			c.Line([]byte(l))
		}
		c.Close()
	}
	send(&net.TCPAddr{IP: net.ParseIP("10.0.0.1"), Port: 40000}) // executor 1's host
	send(&net.TCPAddr{IP: net.ParseIP("10.0.0.9"), Port: 40000}) // elsewhere
	send(nil)                                                    // UDP
	if got := r.Stats().Dropped[ReasonPeer].Load(); got != 2 {
		t.Errorf("dropped %d for their sender, want executor 1's 2 lines from 10.0.0.9", got)
	}
	if s.points != 3*len(lines)-2 {
		t.Errorf("%d points handed on, want %d", s.points, 3*len(lines)-2)
	}
	want := []string{
		"app-20261122101500-0001/1@10.0.0.1", "app-20261122101500-0001/2@10.0.0.1", "app-20261122101500-0001/driver@10.0.0.1",
		"app-20261122101500-0001/1@10.0.0.9", "app-20261122101500-0001/2@10.0.0.9", "app-20261122101500-0001/driver@10.0.0.9",
	}
	if strings.Join(asked, " ") != strings.Join(want, " ") {
		t.Errorf("asked %q, want %q", asked, want)
	}
	if _, err := r.NewConn(&net.TCPAddr{IP: net.ParseIP("10.0.0.9"), Port: 1}).(*Conn).Process([]byte(lines[0])); err == nil ||
		!strings.Contains(err.Error(), "sent from 10.0.0.9, not from the address Spark's REST API lists") {
		t.Errorf("a refused point's error: %v", err)
	}
}
