package simulate

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sparkpulse/sparkpulse/sparkui"
)

// Dropwizard metric types, in the order GraphiteReporter writes them.
type kind uint8

const (
	gauge kind = iota
	counter
	histogram
	meter
	timer
)

// metric is one registered metric of a process, as the reporter sees it:
// a relative name (after "ns.id.") and its current value(s).
type metric struct {
	name string
	kind kind
	val  string // gauge: the formatted value; counter/meter: the count
	snap *snapshot
	rate float64 // meters and timers: events per second
}

// snapshot is a histogram's or timer's reservoir summary.
type snapshot struct {
	count          int64
	min, max       float64
	mean, stddev   float64
	p50, p75, p95  float64
	p98, p99, p999 float64
}

// quantiles writes the snapshot's quantiles of the metric name with line.
func (s snapshot) quantiles(line func(name, v string), name string) {
	for _, q := range [...]struct {
		k string
		v float64
	}{{"p50", s.p50}, {"p75", s.p75}, {"p95", s.p95}, {"p98", s.p98}, {"p99", s.p99}, {"p999", s.p999}} {
		line(name+"."+q.k, f(q.v))
	}
}

// jvmPools are the memory pools of a G1 JVM as JvmSource names them.
var jvmPools = []string{
	"CodeHeap-'non-nmethods'", "CodeHeap-'non-profiled-nmethods'", "CodeHeap-'profiled-nmethods'",
	"Compressed-Class-Space", "G1-Eden-Space", "G1-Old-Gen", "G1-Survivor-Space", "Metaspace",
}

var listenerQueues = []string{"appStatus", "eventLog", "executorManagement", "shared", "streams"}

// listenerClasses are the listeners of a driver with dynamic allocation
// (ExecutorAllocationListener, ExecutorMonitor), as Spark 4 names them.
var listenerClasses = []string{
	"org.apache.spark.ExecutorAllocationManager$ExecutorAllocationListener",
	"org.apache.spark.HeartbeatReceiver",
	"org.apache.spark.scheduler.EventLoggingListener",
	"org.apache.spark.scheduler.dynalloc.ExecutorMonitor",
	"org.apache.spark.sql.execution.ui.SQLAppStatusListener",
	"org.apache.spark.status.AppStatusListener",
}

// streamingListener is the listener a driver with a streaming query adds
// (Spark 3.x: org.apache.spark.sql.execution.streaming.StreamingQueryListenerBus).
const streamingListener = "org.apache.spark.sql.execution.streaming.runtime.StreamingQueryListenerBus"

// process is one Spark JVM: the driver or an executor of an application.
type process struct {
	ns      string // spark.metrics.namespace: the app id, or its name (Config.ByName)
	id      string // "driver" or the executor id
	offset  time.Duration
	rng     *rand.Rand
	app     *timeline         // its application's jobs; nil: always busy
	pyspark bool              // a PySpark application: Python workers next to the JVM
	idle    bool              // its application uses few of its executors' cores
	hungry  bool              // its application's executors come near their memory limit
	stream  string            // driver of an application with a streaming query: its name
	rest    *sparkui.Executor // the process in the REST model

	// ExecutorSource task counters (cumulative, success-only).
	tasks, cpuNs, runMs, gcMs, deserMs, deserCPUNs, serMs, resultSize int64
	readBytes, readRecords, writeBytes, writeRecords                  int64
	shuffleWrite, shuffleWriteRecs, shuffleWriteNs                    int64
	shuffleRemote, shuffleLocal, shuffleReadRecs, remoteToDisk        int64
	remoteBlocks, localBlocks, fetchWaitMs, remoteReqsMs              int64
	memSpill, diskSpill                                               int64
	started                                                           int64
	// Hadoop file system statistics (JVM-wide, monotonic).
	hdfsRead, hdfsWrite, hdfsReadOps, hdfsWriteOps, fileRead, fileWrite int64
	// JVM.
	jvmCPU, youngCount, youngMs, oldCount, oldMs int64
	// The CERN SparkPlugins' CgroupMetrics (PySpark applications).
	cgroupCPU, netIn, netOut                  int64
	heap, offHeap, execMem, storageMem, pyRSS int64
	// Driver.
	events, codegen int64
	streamRows      int64
	watermark       int64
}

// report writes one report of p at time t, as Dropwizard's GraphiteReporter
// writes it: gauges, counters, histograms, meters, timers, each group in
// name order, integers as integers and doubles with two decimals.
func (p *process) report(w interface{ Write([]byte) (int, error) }, prefix string, t time.Time) error {
	base := p.ns + "." + p.id + "."
	if prefix != "" {
		base = prefix + "." + base
	}
	ts := strconv.FormatInt(t.Add(p.offset).Unix(), 10)
	ms := p.metrics()
	slices.SortStableFunc(ms, func(a, b metric) int {
		if a.kind != b.kind {
			return int(a.kind) - int(b.kind)
		}
		return strings.Compare(a.name, b.name)
	})
	var buf []byte
	line := func(name, v string) {
		buf = append(buf, base...)
		buf = append(buf, name...)
		buf = append(buf, ' ')
		buf = append(buf, v...)
		buf = append(buf, ' ')
		buf = append(buf, ts...)
		buf = append(buf, '\n')
	}
	for _, m := range ms {
		switch m.kind {
		case gauge:
			line(m.name, m.val)
		case counter:
			line(m.name+".count", m.val)
		case histogram:
			s := m.snap
			line(m.name+".count", i(s.count))
			line(m.name+".max", i(int64(s.max)))
			line(m.name+".mean", f(s.mean))
			line(m.name+".min", i(int64(s.min)))
			line(m.name+".stddev", f(s.stddev))
			s.quantiles(line, m.name)
		case meter:
			line(m.name+".count", m.val)
			p.rates(line, m)
		case timer:
			s := m.snap
			line(m.name+".max", f(s.max))
			line(m.name+".mean", f(s.mean))
			line(m.name+".min", f(s.min))
			line(m.name+".stddev", f(s.stddev))
			s.quantiles(line, m.name)
			line(m.name+".count", i(s.count))
			p.rates(line, m)
		}
	}
	_, err := w.Write(buf)
	return err
}

func (p *process) rates(line func(name, v string), m metric) {
	line(m.name+".m1_rate", f(m.rate))
	line(m.name+".m5_rate", f(m.rate*0.9))
	line(m.name+".m15_rate", f(m.rate*0.8))
	line(m.name+".mean_rate", f(m.rate*0.7))
}

func i(v int64) string { return strconv.FormatInt(v, 10) }

// f formats a double as Dropwizard does (String.format("%2.2f")), NaN
// included.
func f(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "Infinity"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// busy reports whether the application is running a stage, and which.
func (p *process) busy() (bool, int) {
	if p.app == nil {
		return true, 0
	}
	return p.app.busy(), p.app.cur
}

// advance moves the counters by one reporting period: executors finish
// tasks only while a stage runs; the first stage of a job reads input and
// writes shuffle data, the second reads shuffle data and writes output.
// The tasks' metrics are added to the running stage too, so that Spark's
// totals and the executors' counters agree as they do in Spark. The model
// must be locked.
func (p *process) advance() {
	r := p.rng
	busy, stage := p.busy()
	var done int64
	if busy && p.id != "driver" {
		// Four cores kept about two-thirds busy by tasks of 0.4 to 2 s.
		done = 24 + r.Int64N(16)
		if p.idle {
			done = r.Int64N(2) // an application given far more executors than it uses
		}
	}
	before := *p
	defer func() {
		if done > 0 && p.app != nil && p.app.job != nil {
			st := p.app.stages[p.app.cur]
			st.RunTimeMs += p.runMs - before.runMs
			st.CPUTimeNs += p.cpuNs - before.cpuNs
			st.GCTimeMs += p.gcMs - before.gcMs
			st.InputBytes += p.readBytes - before.readBytes
			st.OutputBytes += p.writeBytes - before.writeBytes
			st.ShuffleReadBytes += (p.shuffleRemote + p.shuffleLocal) - (before.shuffleRemote + before.shuffleLocal)
			st.ShuffleWriteBytes += p.shuffleWrite - before.shuffleWrite
			st.MemorySpilled += p.memSpill - before.memSpill
			st.DiskSpilled += p.diskSpill - before.diskSpill
			st.FetchWaitMs += p.fetchWaitMs - before.fetchWaitMs
		}
	}()
	p.started += done
	p.tasks += done
	for range done {
		run := 400 + r.Int64N(1600)
		p.runMs += run
		p.cpuNs += run * (500_000 + r.Int64N(400_000))
		p.gcMs += r.Int64N(run / 20)
		p.deserMs += 2 + r.Int64N(20)
		p.deserCPUNs += 1_000_000 + r.Int64N(10_000_000)
		p.serMs += r.Int64N(3)
		p.resultSize += 1500 + r.Int64N(3000)
		if stage == 0 {
			b := 32<<20 + r.Int64N(96<<20)
			p.readBytes += b
			p.hdfsRead += b
			p.hdfsReadOps += 2 + r.Int64N(4)
			p.readRecords += b / 120
			sw := b / 6
			p.shuffleWrite += sw
			p.shuffleWriteRecs += sw / 40
			p.shuffleWriteNs += sw * 8
			if r.IntN(6) == 0 {
				p.memSpill += 64 << 20
				p.diskSpill += 20 << 20
			}
		} else {
			rd := 8<<20 + r.Int64N(24<<20)
			local := rd / 5
			p.shuffleLocal += local
			p.shuffleRemote += rd - local
			p.shuffleReadRecs += rd / 40
			p.remoteBlocks += 40
			p.localBlocks += 10
			p.fetchWaitMs += r.Int64N(80)
			p.remoteReqsMs += 20 + r.Int64N(100)
			if r.IntN(20) == 0 {
				p.remoteToDisk += rd / 10
			}
			wb := rd / 2
			p.writeBytes += wb
			p.hdfsWrite += wb
			p.hdfsWriteOps += 1 + r.Int64N(3)
			p.writeRecords += wb / 100
		}
	}
	p.fileRead += r.Int64N(64 << 10)
	p.fileWrite += r.Int64N(16 << 10)
	load := 0.15
	if busy {
		load = 2 + r.Float64()*2
	}
	if p.id == "driver" {
		load = 0.3 + r.Float64()*0.5
		p.events += 50 + r.Int64N(300)
		p.codegen += r.Int64N(3)
	}
	p.jvmCPU += int64(load * 10e9)
	if p.pyspark && p.id != "driver" {
		// The CERN cgroup plugin sees the container's CPU: the JVM's and
		// the Python workers', which do a PySpark task's work.
		// At most the executor's four cores (its cgroup's quota).
		p.cgroupCPU += min(int64(load*10e9)+(p.cpuNs-before.cpuNs)/2, 4*10e9)
		p.netIn += (p.shuffleRemote - before.shuffleRemote) + (p.readBytes - before.readBytes)
		p.netOut += p.shuffleWrite - before.shuffleWrite + 4096
	}
	yc := r.Int64N(3)
	if busy {
		yc += 2
	}
	p.youngCount += yc
	p.youngMs += yc * (5 + r.Int64N(40))
	if r.IntN(25) == 0 {
		p.oldCount++
		p.oldMs += 200 + r.Int64N(800)
	}
	p.heap = 512<<20 + r.Int64N(1<<30)
	p.execMem = 0
	if busy && p.id != "driver" && !p.idle {
		p.heap += 1 << 30
		p.execMem = 256<<20 + r.Int64N(512<<20)
		if p.hungry {
			p.heap += 1400 << 20 // near the container: the sizing advice's container rule
		}
	}
	p.storageMem = 64<<20 + r.Int64N(64<<20)
	p.offHeap = 96<<20 + r.Int64N(32<<20)
	if p.pyspark {
		p.pyRSS = 300<<20 + r.Int64N(600<<20)
		if busy {
			p.pyRSS += 1 << 30
		}
	}
	if p.stream != "" {
		p.streamRows += 1000 + r.Int64N(5000)
		p.watermark = time.Now().Add(-90 * time.Second).UnixMilli()
	}
}

// executorMetric is one value of Spark's ExecutorMetrics.
type executorMetric struct {
	k string
	v int64
}

// executorMetrics is the process's ExecutorMetrics snapshot, as the
// heartbeat reports it, with Spark 4's names (ConcurrentGC*: G1's
// concurrent cycles, which heaps of a few GiB seldom start).
func (p *process) executorMetrics() []executorMetric {
	rss := p.heap + p.offHeap + 200<<20
	return []executorMetric{
		{"ConcurrentGCCount", 0}, {"ConcurrentGCTime", 0},
		{"DirectPoolMemory", 18 << 20}, {"JVMHeapMemory", p.heap}, {"JVMOffHeapMemory", p.offHeap},
		{"MajorGCCount", p.oldCount}, {"MajorGCTime", p.oldMs}, {"MappedPoolMemory", 0},
		{"MinorGCCount", p.youngCount}, {"MinorGCTime", p.youngMs},
		{"OffHeapExecutionMemory", 0}, {"OffHeapStorageMemory", 0}, {"OffHeapUnifiedMemory", 0},
		{"OnHeapExecutionMemory", p.execMem}, {"OnHeapStorageMemory", p.storageMem}, {"OnHeapUnifiedMemory", p.execMem + p.storageMem},
		{"ProcessTreeJVMRSSMemory", rss}, {"ProcessTreeJVMVMemory", rss * 3},
		{"ProcessTreeOtherRSSMemory", 0}, {"ProcessTreeOtherVMemory", 0},
		{"ProcessTreePythonRSSMemory", p.pyRSS}, {"ProcessTreePythonVMemory", p.pyRSS * 2},
		{"TotalGCTime", p.youngMs + p.oldMs},
	}
}

// record brings the process's entry in the REST model up to date: its
// task time and the peaks of its ExecutorMetrics. The model must be
// locked.
func (p *process) record() {
	x := p.rest
	x.TaskTimeMs, x.GCTimeMs, x.CompletedTasks = p.runMs, p.gcMs, int(p.tasks)
	x.InputBytes, x.ShuffleRead, x.ShuffleWrite = p.readBytes, p.shuffleRemote+p.shuffleLocal, p.shuffleWrite
	if x.Peak == nil {
		x.Peak = map[string]int64{}
	}
	for _, e := range p.executorMetrics() {
		x.Peak[e.k] = max(x.Peak[e.k], e.v)
	}
}

// metrics lists the process's metrics as Spark 3.5 registers them with
// JvmSource on, process-tree metrics on, dynamic allocation and the
// appStatus source enabled.
func (p *process) metrics() []metric {
	r := p.rng
	var ms []metric
	g := func(name string, v int64) { ms = append(ms, metric{name: name, kind: gauge, val: i(v)}) }
	gf := func(name string, v float64) { ms = append(ms, metric{name: name, kind: gauge, val: f(v)}) }
	c := func(name string, v int64) { ms = append(ms, metric{name: name, kind: counter, val: i(v)}) }
	busy, stage := p.busy()
	b2i := func(b bool) int64 {
		if b {
			return 1
		}
		return 0
	}

	// ExecutorMetrics: the heartbeat's snapshot of the JVM.
	heapMax := int64(4 << 30)
	for _, e := range p.executorMetrics() {
		g("ExecutorMetrics."+e.k, e.v)
	}
	g("JVMCPU.jvmCpuTime", p.jvmCPU)
	if p.pyspark && p.id != "driver" {
		const cg = "plugin.ch.cern.CgroupMetrics."
		g(cg+"CPUTimeNanosec", p.cgroupCPU)
		g(cg+"MemoryCache", 256<<20)
		g(cg+"MemoryRss", p.heap+p.offHeap+200<<20+p.pyRSS)
		g(cg+"MemorySwap", 0)
		g(cg+"NetworkBytesIn", p.netIn)
		g(cg+"NetworkBytesOut", p.netOut)
	}

	// JvmSource.
	g("jvm.G1-Old-Generation.count", p.oldCount)
	g("jvm.G1-Old-Generation.time", p.oldMs)
	g("jvm.G1-Young-Generation.count", p.youngCount)
	g("jvm.G1-Young-Generation.time", p.youngMs)
	for _, k := range []string{"direct", "mapped"} {
		n := int64(0)
		if k == "direct" {
			n = 12
		}
		g("jvm."+k+".capacity", n<<20)
		g("jvm."+k+".count", n)
		g("jvm."+k+".used", n<<20)
	}
	g("jvm.heap.committed", heapMax/2)
	g("jvm.heap.init", 256<<20)
	g("jvm.heap.max", heapMax)
	gf("jvm.heap.usage", float64(p.heap)/float64(heapMax))
	g("jvm.heap.used", p.heap)
	g("jvm.non-heap.committed", p.offHeap+16<<20)
	g("jvm.non-heap.init", 7<<20)
	g("jvm.non-heap.max", -1)
	gf("jvm.non-heap.usage", float64(p.offHeap)/float64(p.offHeap+16<<20))
	g("jvm.non-heap.used", p.offHeap)
	for _, pool := range jvmPools {
		used := p.offHeap / 8
		committed, max := used+4<<20, int64(-1)
		switch pool {
		case "G1-Eden-Space":
			used, committed = p.heap/3, p.heap/2
		case "G1-Old-Gen":
			used, committed, max = p.heap/2, p.heap, heapMax
		case "G1-Survivor-Space":
			used, committed = 0, 0
			if busy {
				used, committed = 8<<20, 16<<20
			}
		}
		usage := float64(used) / float64(committed)
		if max > 0 {
			usage = float64(used) / float64(max)
		}
		if committed == 0 {
			usage = math.NaN() // RatioGauge with a zero denominator, as Spark really sends
		}
		name := "jvm.pools." + pool + "."
		g(name+"committed", committed)
		g(name+"init", 0)
		g(name+"max", max)
		gf(name+"usage", usage)
		g(name+"used", used)
		if strings.HasPrefix(pool, "G1-") {
			g(name+"used-after-gc", used/2)
		}
	}
	g("jvm.total.committed", heapMax/2+p.offHeap+16<<20)
	g("jvm.total.init", 263<<20)
	g("jvm.total.max", heapMax)
	g("jvm.total.used", p.heap+p.offHeap)

	// Static sources.
	for _, k := range []string{"fileCacheHits", "filesDiscovered", "hiveClientCalls", "parallelListingJobCount", "partitionsFetched"} {
		c("HiveExternalCatalog."+k, p.codegen*3)
	}
	for _, k := range []struct {
		name     string
		min, max float64
	}{{"compilationTime", 2, 400}, {"generatedClassSize", 1500, 12000}, {"generatedMethodSize", 40, 8000}, {"sourceCodeSize", 2000, 90000}} {
		ms = append(ms, metric{name: "CodeGenerator." + k.name, kind: histogram, snap: p.snap(p.codegen+1, k.min, k.max)})
	}

	if p.id != "driver" {
		ex := "executor."
		for _, e := range []struct {
			k string
			v int64
		}{
			{"bytesRead", p.readBytes}, {"bytesWritten", p.writeBytes}, {"cpuTime", p.cpuNs},
			{"deserializeCpuTime", p.deserCPUNs}, {"deserializeTime", p.deserMs}, {"diskBytesSpilled", p.diskSpill},
			{"jvmGCTime", p.gcMs}, {"memoryBytesSpilled", p.memSpill}, {"recordsRead", p.readRecords},
			{"recordsWritten", p.writeRecords}, {"resultSerializationTime", p.serMs}, {"resultSize", p.resultSize},
			{"runTime", p.runMs}, {"shuffleBytesWritten", p.shuffleWrite},
			{"shuffleCorruptMergedBlockChunks", 0}, {"shuffleFetchWaitTime", p.fetchWaitMs},
			{"shuffleLocalBlocksFetched", p.localBlocks}, {"shuffleLocalBytesRead", p.shuffleLocal},
			{"shuffleMergedFetchFallbackCount", 0}, {"shuffleMergedLocalBlocksFetched", 0}, {"shuffleMergedLocalBytesRead", 0},
			{"shuffleMergedLocalChunksFetched", 0}, {"shuffleMergedRemoteBlocksFetched", 0}, {"shuffleMergedRemoteBytesRead", 0},
			{"shuffleMergedRemoteChunksFetched", 0}, {"shuffleMergedRemoteReqsDuration", 0},
			{"shuffleRecordsRead", p.shuffleReadRecs}, {"shuffleRecordsWritten", p.shuffleWriteRecs},
			{"shuffleRemoteBlocksFetched", p.remoteBlocks}, {"shuffleRemoteBytesRead", p.shuffleRemote},
			{"shuffleRemoteBytesReadToDisk", p.remoteToDisk}, {"shuffleRemoteReqsDuration", p.remoteReqsMs},
			{"shuffleTotalBytesRead", p.shuffleRemote + p.shuffleLocal}, {"shuffleWriteTime", p.shuffleWriteNs},
			{"succeededTasks", p.tasks},
		} {
			c(ex+e.k, e.v)
		}
		for _, fs := range []struct {
			scheme                string
			read, write, rop, wop int64
		}{{"file", p.fileRead, p.fileWrite, p.fileRead >> 16, p.fileWrite >> 14}, {"hdfs", p.hdfsRead, p.hdfsWrite, p.hdfsReadOps, p.hdfsWriteOps}} {
			n := ex + "filesystem." + fs.scheme + "."
			g(n+"largeRead_ops", 0)
			g(n+"read_bytes", fs.read)
			g(n+"read_ops", fs.rop)
			g(n+"write_bytes", fs.write)
			g(n+"write_ops", fs.wop)
		}
		active := int64(0)
		if busy {
			active = 2 + r.Int64N(3)
		}
		g(ex+"threadpool.activeTasks", active)
		g(ex+"threadpool.completeTasks", p.tasks)
		g(ex+"threadpool.currentPool_size", 4)
		g(ex+"threadpool.maxPool_size", math.MaxInt32)
		g(ex+"threadpool.startedTasks", p.started+active)
		for _, side := range []string{"client", "server"} {
			g("NettyBlockTransfer.shuffle-"+side+".usedDirectMemory", 16<<20)
			g("NettyBlockTransfer.shuffle-"+side+".usedHeapMemory", 0)
		}
		return ms
	}

	// Driver-only sources.
	tl := p.app
	var jobs, running, failedJobs, stagesDone, failedStages, skipped, tasksDone, failedTasks int64
	if tl != nil {
		running = b2i(tl.busy())
		for _, j := range tl.att.Jobs {
			jobs++
			switch j.Status {
			case "SUCCEEDED":
				tasksDone += int64(j.CompletedTasks)
			case "FAILED":
				failedJobs++
				failedTasks += int64(j.FailedTasks)
			}
		}
		for _, s := range tl.att.Stages {
			switch s.Status {
			case "COMPLETE":
				stagesDone++
			case "FAILED":
				failedStages++
			case "SKIPPED":
				skipped++
			}
		}
	}
	bm := "BlockManager."
	maxMB := int64(2100)
	used := p.storageMem >> 20
	g(bm+"disk.diskSpaceUsed_MB", b2i(busy)*r.Int64N(200))
	g(bm+"memory.maxMem_MB", maxMB)
	g(bm+"memory.maxOffHeapMem_MB", 0)
	g(bm+"memory.maxOnHeapMem_MB", maxMB)
	g(bm+"memory.memUsed_MB", used)
	g(bm+"memory.offHeapMemUsed_MB", 0)
	g(bm+"memory.onHeapMemUsed_MB", used)
	g(bm+"memory.remainingMem_MB", maxMB-used)
	g(bm+"memory.remainingOffHeapMem_MB", 0)
	g(bm+"memory.remainingOnHeapMem_MB", maxMB-used)
	g("DAGScheduler.job.activeJobs", b2i(busy))
	g("DAGScheduler.job.allJobs", jobs)
	g("DAGScheduler.stage.failedStages", 0)
	g("DAGScheduler.stage.runningStages", b2i(busy))
	g("DAGScheduler.stage.waitingStages", b2i(busy && stage == 0))
	ea := "ExecutorAllocationManager.executors."
	nExec := int64(4)
	g(ea+"numberAllExecutors", nExec)
	g(ea+"numberDecommissioningExecutors", 0)
	g(ea+"numberExecutorsPendingToRemove", 0)
	g(ea+"numberExecutorsToAdd", b2i(busy))
	g(ea+"numberMaxNeededExecutors", nExec+2*b2i(busy))
	g(ea+"numberTargetExecutors", nExec+2*b2i(busy))
	for _, k := range []string{"numberExecutorsDecommissionUnfinished", "numberExecutorsExitedUnexpectedly", "numberExecutorsGracefullyDecommissioned", "numberExecutorsKilledByDriver"} {
		c(ea+k, 0)
	}
	lb := "LiveListenerBus."
	c(lb+"numEventsPosted", p.events)
	for _, q := range listenerQueues {
		g(lb+"queue."+q+".size", r.Int64N(3)*b2i(busy))
		c(lb+"queue."+q+".numDroppedEvents", 0)
		ms = append(ms, metric{name: lb + "queue." + q + ".listenerProcessingTime", kind: timer, snap: p.snap(p.events, 0.01, 4), rate: 5 + r.Float64()*20})
	}
	classes := listenerClasses
	if p.stream != "" {
		classes = append(classes[:len(classes):len(classes)], streamingListener)
	}
	for _, cl := range classes {
		ms = append(ms, metric{name: lb + "listenerProcessingTime." + cl, kind: timer, snap: p.snap(p.events/4, 0.01, 2), rate: 2 + r.Float64()*10})
	}
	ms = append(ms, metric{name: "DAGScheduler.messageProcessingTime", kind: timer, snap: p.snap(p.events/3, 0.05, 30), rate: 1 + r.Float64()*5})
	as := "appStatus."
	g(as+"jobDuration", 30_000+r.Int64N(40_000))
	c(as+"jobs.failedJobs", failedJobs)
	c(as+"jobs.succeededJobs", jobs-failedJobs-running)
	c(as+"stages.completedStages", stagesDone)
	c(as+"stages.failedStages", failedStages)
	c(as+"stages.skippedStages", skipped)
	c(as+"tasks.blackListedExecutors", 0)
	c(as+"tasks.completedTasks", tasksDone)
	c(as+"tasks.excludedExecutors", 0)
	c(as+"tasks.failedTasks", failedTasks)
	c(as+"tasks.killedTasks", 0)
	c(as+"tasks.skippedTasks", 0)
	c(as+"tasks.unblackListedExecutors", 0)
	c(as+"tasks.unexcludedExecutors", 0)
	if p.stream != "" {
		st := "spark.streaming." + p.stream + "."
		g(st+"eventTime-watermark", p.watermark)
		gf(st+"inputRate-total", 800+r.Float64()*800)
		g(st+"latency", 300+r.Int64N(900))
		gf(st+"processingRate-total", 900+r.Float64()*800)
		g(st+"states-rowsTotal", p.streamRows)
		g(st+"states-usedBytes", p.streamRows*380)
	}
	return ms
}

// snap makes a plausible reservoir snapshot between lo and hi.
func (p *process) snap(count int64, lo, hi float64) *snapshot {
	r := p.rng
	mid := lo + (hi-lo)*(0.1+0.2*r.Float64())
	return &snapshot{
		count: count, min: lo, max: hi, mean: mid, stddev: (hi - lo) / 6,
		p50: mid * 0.9, p75: mid * 1.3, p95: mid * 2, p98: mid * 2.4, p99: min(mid*2.8, hi), p999: hi,
	}
}

// String is for test failures.
func (s *snapshot) String() string { return fmt.Sprintf("count=%d mean=%.2f", s.count, s.mean) }
