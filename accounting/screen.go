package accounting

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/sparkpulse/sparkpulse/sizing"
	"github.com/sparkpulse/sparkpulse/sparkapi"
	"github.com/sparkpulse/sparkpulse/timespent"
)

// Plausibility. Port 2003 takes lines from anyone who can reach it, so
// before the accounting, the advice or the reconciliation's verdict use a
// process's stream figures, screen checks that they could be true:
//
//   - Counters: task CPU (cpuTime, ns) and run time (runTime, ms) at most
//     the process's cores for as long as it was alive (plus a minute for
//     the reports' timing). Once the application has ended, no counter
//     above Spark's own total for that executor: Spark's executor list
//     counts every finished task, the executor's counters only the
//     successful ones, so a genuine stream is never above it (tasks,
//     task time for CPU and run time, GC, input, shuffle read and write).
//     A process with one counter that fails has all its counters set
//     aside: whoever wrote one could write the others.
//   - Gauges (peaks of memory): within what the process could hold: the
//     heap used within the heap (-Xmx, spark.executor.memory or
//     spark.driver.memory); resident memory within the container where a
//     cluster manager holds the process to it: on Kubernetes, plus 10 %
//     for the moments before the kill; on YARN, twice the limit YARN
//     enforces (the container rounded up to YARN's allocation increment,
//     1 GiB unless a kill message states the limit): without cgroups the
//     NodeManager checks the process tree every 3 s and kills it at once
//     only over twice its limit, and over the limit once its processes
//     are a check old (a PySpark worker was seen at 1.4 GB in a 1 GB
//     container), and a NodeManager with its physical-memory check off
//     never kills. Standalone and local processes have no such bound.
//     Where Spark's peak is above the setting, the JVM got more than the
//     setting says, and Spark's peak is the bound.
//   - The process tree's resident memory (JVM, Python workers, other
//     children together) within the same container bound.
//   - Not Spark's own peaks: Spark keeps peaks of the polls its
//     heartbeats carry while a stage runs, the metrics source reports
//     every poll, and real Spark's stream was seen well above them (1.24
//     times for the heap on the recordings of 3.5.9 and 4.3.0, 1.58 times
//     for a short application's heap and 7 times for Python workers on
//     real YARN). Where the peak is well above Spark's, the usage says it
//     is the stream's alone (package accounting's peakWitness). Where YARN
//     killed the process, what its message says the process tree used at
//     the kill (plus 5 %: it is rounded) bounds its resident memory: real
//     YARN's message was above every resident size the stream had sent.
//
// A gauge that fails is not used, peak or mean; Spark's peak stands.
//
// What is set aside is named in the accounting's notes and field
// set_aside, and a process whose counters exceed Spark's gives the
// reconciliation its verdict above_spark.

// plausibilitySlackMs is how much longer than its life a process's
// counters may cover: the stream is read from a minute before the start,
// and a report's counters are of its time, not of the tasks'.
const plausibilitySlackMs = 60_000

// rssSlack is how far above its container a process's resident memory
// may be seen on Kubernetes before the kubelet's kill.
const rssSlack = 0.10

// maxMemory is more memory than any process holds (1 PiB), as Spark's
// own answers are checked (sparkapi.Check).
const maxMemory = 1 << 50

// yarnIncrement is what YARN rounds a container up to a multiple of, by
// default (yarn.scheduler.minimum-allocation-mb, the capacity
// scheduler's increment), where no kill message states the limit.
const yarnIncrement = 1 << 30

// SetAside is a process whose figures the screen refused.
type SetAside struct {
	Process    string
	Counters   bool     // all its counters; else only the gauges named
	AboveSpark bool     // a counter above Spark's own total (the reconciliation's verdict)
	Why        []string // one per figure, e.g. "cpu_time_ns 1e+13 > 8.3e+10, Spark's total"
}

func (a SetAside) String() string {
	return fmt.Sprintf("process %s: %s", a.Process, strings.Join(a.Why, ", "))
}

// RunCPUs is what a task's run time counts of its cpus, by resource
// profile id (sizing.RunTimeCPUs: 1 before Spark 4, the profile's task
// cpus from 4.0); a profile not listed counts as the default's, id 0.
type RunCPUs map[int]int

// RunCPUsOf is the attempt's RunCPUs: the default profile's from
// spark.task.cpus (taskCPUs), each other profile's from its own. Spark
// multiplies by the cpus of the task's profile, not the executor's: the
// tasks of a task-only profile (no executor resources; dynamic
// allocation off) run on the default profile's executors, whose bound is
// then the largest of those profiles' (TaskOnlyNote says what it does to
// the occupancy).
func RunCPUsOf(sparkVersion string, taskCPUs int, profiles []sparkapi.ResourceProfile) RunCPUs {
	m := RunCPUs{0: sizing.RunTimeCPUs(sparkVersion, taskCPUs)}
	for _, p := range profiles {
		c := p.TaskResources["cpus"].Amount
		switch {
		case p.ID == 0 || c < 1:
		case len(p.ExecutorResources) == 0:
			m[0] = max(m[0], sizing.RunTimeCPUs(sparkVersion, int(c)))
		default:
			m[p.ID] = sizing.RunTimeCPUs(sparkVersion, int(c))
		}
	}
	return m
}

// TaskOnlyNote says, where Spark counts the run time of a task-only
// profile's tasks at other cpus than spark.task.cpus (4.x), that the
// default executors' slot occupancy reads it at spark.task.cpus; "" when
// none does.
func TaskOnlyNote(sparkVersion string, taskCPUs int, profiles []sparkapi.ResourceProfile) string {
	def := sizing.RunTimeCPUs(sparkVersion, taskCPUs)
	for _, p := range profiles {
		if c := p.TaskResources["cpus"].Amount; p.ID != 0 && c >= 1 && len(p.ExecutorResources) == 0 && sizing.RunTimeCPUs(sparkVersion, int(c)) != def {
			return fmt.Sprintf("slot occupancy: Spark %s counts the run time of task-only resource profile %d's tasks (%d cpus each) times their cpus, and they ran on the default profile's executors, whose occupancy reads it at spark.task.cpus (%d): up to %d× too high for them",
				sparkVersion, p.ID, int(c), taskCPUs, max(int(c)/max(taskCPUs, 1), 1))
		}
	}
	return ""
}

func (m RunCPUs) of(profile int) int {
	if c, ok := m[profile]; ok {
		return max(c, 1)
	}
	return max(m[0], 1)
}

// Screen returns the stream figures that may be used, as a new map (the
// stream is kept as read), and what it set aside, given the application's
// Spark properties and its executors as Spark lists them; runCPUs is
// what their task run time counts of their tasks' cpus (RunCPUsOf).
// final: the application has ended and its executor list was read after
// the end, so Spark's totals bound the counters.
func Screen(props map[string]string, runCPUs RunCPUs, execs []sparkapi.Executor, stream map[string]ProcessTotals, endMs int64, final bool) (map[string]ProcessTotals, []SetAside) {
	bounds := boundsOf(props)
	listed := byID(execs)
	kept := make(map[string]ProcessTotals, len(stream))
	var aside []SetAside
	for _, id := range slices.SortedFunc(maps.Keys(stream), CompareExecutorIDs) {
		t := stream[id]
		x := listed[id] // nil if Spark does not list it
		a := SetAside{Process: id}
		// Counters.
		bad := func(format string, v ...any) { a.Why = append(a.Why, fmt.Sprintf(format, v...)) }
		for _, m := range StreamCounters {
			c := StreamKey(m)
			if v, ok := t.Sums[c]; ok && (v < 0 || math.IsNaN(v) || math.IsInf(v, 0) || v >= 0x1p63) {
				bad("%s %g is no counter's sum", c, v)
			}
		}
		if x != nil && x.TotalCores > 0 {
			added, removed := optMS(x.AddTime), optMS(x.RemoveTime)
			if removed == 0 || removed > endMs {
				removed = endMs
			}
			if added > 0 && removed >= added {
				limitMs := float64(x.TotalCores) * float64(removed-added+plausibilitySlackMs)
				if v := t.Sums["cpuTime.count"]; v > limitMs*1e6 {
					bad("cpu_time_ns %.3g > %.3g, %d cores for %s", v, limitMs*1e6, x.TotalCores, timespent.Duration(removed-added))
				}
				if v := t.Sums["runTime.count"]; v > limitMs {
					bad("run_time_ms %.3g > %.3g, %d cores for %s", v, limitMs, x.TotalCores, timespent.Duration(removed-added))
				}
			}
		}
		if final && x != nil {
			above := func(name, counter string, spark float64) {
				if v := t.Sums[counter]; v > spark*(1+reconcileTolerance)+1 {
					bad("%s %.6g > %.6g, Spark's total", name, v, spark)
					a.AboveSpark = true
				}
			}
			above("tasks", "succeededTasks.count", float64(x.CompletedTasks))
			above("cpu_time_ns", "cpuTime.count", float64(x.TotalDuration)*1e6)                                      // a task's CPU is within its duration
			above("run_time_ms", "runTime.count", float64(x.TotalDuration)*float64(runCPUs.of(x.ResourceProfileID))) // Spark 4 counts a task's cpus
			above("gc_time_ms", "jvmGCTime.count", float64(x.TotalGCTime))
			above("input_bytes", "bytesRead.count", float64(x.TotalInputBytes))
			above("shuffle_read_bytes", "shuffleTotalBytesRead.count", float64(x.TotalShuffleRead))
			above("shuffle_write_bytes", "shuffleBytesWritten.count", float64(x.TotalShuffleWrite))
		}
		k := t
		if len(a.Why) > 0 {
			a.Counters = true
			k.Sums = nil
		}
		// Gauges.
		cloned := false
		for _, m := range StreamGauges {
			g := StreamKey(m)
			v, ok := t.Peak[g]
			if !ok {
				continue
			}
			var spark, stated int64 // Spark's own peak of g; the limit a YARN kill message states
			if x != nil {
				spark, stated = x.PeakMemoryMetrics[g], sizing.YARNLimit(x.RemoveReason)
			}
			why := bounds.check(id, g, v, spark, stated)
			if why == "" {
				continue
			}
			a.Why = append(a.Why, why)
			if !cloned { // the stream's maps stay as read
				k.Peak, k.Mean, cloned = maps.Clone(k.Peak), maps.Clone(k.Mean), true
			}
			delete(k.Peak, g)
			delete(k.Mean, g)
		}
		// An executor's container holds its whole process tree: the JVM,
		// its Python workers and other children together. (The driver's
		// resident memory is not what the accounting or the advice read.)
		if x != nil && id != "driver" {
			var rss float64
			var spark int64 // Spark's own peaks of the tree's parts: a bound Spark saw is no bound
			for _, g := range rssGauges {
				rss += k.Peak[g]
				spark += x.PeakMemoryMetrics[g]
			}
			if why := bounds.check(id, "resident memory", rss, spark, sizing.YARNLimit(x.RemoveReason)); why != "" && rss > 0 {
				a.Why = append(a.Why, why)
				if !cloned {
					k.Peak, k.Mean, cloned = maps.Clone(k.Peak), maps.Clone(k.Mean), true
				}
				for _, g := range rssGauges {
					delete(k.Peak, g)
					delete(k.Mean, g)
				}
			}
		}
		// A YARN kill states the process tree's use at the kill: resident
		// memory the stream says was larger is not the process's.
		if used := yarnUsed(x); used > 0 {
			var rss float64
			for _, g := range rssGauges {
				rss += k.Peak[g]
			}
			if rss > float64(used)*(1+yarnUsedSlack) {
				a.Why = append(a.Why, fmt.Sprintf("resident memory %s > %s, what YARN measured at its kill", sizing.Bytes(int64(rss)), sizing.Bytes(used)))
				if !cloned {
					k.Peak, k.Mean, cloned = maps.Clone(k.Peak), maps.Clone(k.Mean), true
				}
				for _, g := range rssGauges {
					delete(k.Peak, g)
					delete(k.Mean, g)
				}
			}
		}
		// The tree's one-moment peak sums the parts' reports: it goes
		// with any part set aside.
		for _, g := range rssGauges {
			if _, had := t.Peak[g]; had {
				if _, stays := k.Peak[g]; !stays {
					k.TreePeak = 0
				}
			}
		}
		if len(a.Why) > 0 {
			aside = append(aside, a)
		}
		kept[id] = k
	}
	return kept, aside
}

// yarnUsedSlack is how far above the use YARN's kill message states a
// killed process's resident memory may be seen: the message rounds to a
// tenth of its unit ("4.6 GB").
const yarnUsedSlack = 0.05

// rssGauges are TreeGauges' keys.
var rssGauges = func() (keys []string) {
	for _, m := range TreeGauges {
		keys = append(keys, StreamKey(m))
	}
	return keys
}()

// yarnUsed is the process tree's use that YARN's kill of x states, 0
// without one.
func yarnUsed(x *sparkapi.Executor) int64 {
	if x == nil {
		return 0
	}
	return sizing.YARNUsed(x.RemoveReason)
}

// heapGauges are the ExecutorMetrics gauges of memory within the heap;
// the others are within the process's resident memory.
var heapGauges = []string{"JVMHeapMemory", "OnHeapExecutionMemory", "OnHeapStorageMemory", "OnHeapUnifiedMemory"}

// memoryBounds are the memory a process of an application can hold; 0
// where nothing holds it.
type memoryBounds struct {
	heap, container             int64 // an executor's
	driverHeap, driverContainer int64
	yarn                        bool // YARN's monitor holds the containers (above)
}

func boundsOf(props map[string]string) memoryBounds {
	s, r, err := Settings(props)
	if err != nil {
		return memoryBounds{}
	}
	b := memoryBounds{s.Heap, s.Container(), r.DriverHeap, r.DriverContainer(), r.YARN}
	if master := props["spark.master"]; !strings.HasPrefix(master, "yarn") && !strings.HasPrefix(master, "k8s://") {
		b.container, b.driverContainer = 0, 0 // no cluster manager holds the process to it
	}
	if !r.ClusterMode {
		b.driverContainer = 0 // client mode: the driver runs outside the cluster, in no container
	}
	return b
}

// check says why process id could not have had a peak v of gauge g, ""
// when it could; spark is Spark's own peak of it, 0 if none; stated the
// limit a YARN kill message states of the process, 0 if none.
func (b memoryBounds) check(id, g string, v float64, spark, stated int64) string {
	heap, container := b.heap, b.container
	if id == "driver" {
		heap, container = b.driverHeap, b.driverContainer
	}
	bound, slack := container, rssSlack
	if b.yarn && container > 0 {
		limit := (container + yarnIncrement - 1) / yarnIncrement * yarnIncrement
		if stated > 0 {
			limit = stated
		}
		// Twice the limit whether or not YARN killed the process: a
		// NodeManager with its physical-memory check off (common where
		// cgroups or nothing enforce memory) never kills.
		bound, slack = 2*limit, 0
	}
	if slices.Contains(heapGauges, g) {
		bound, slack = heap, reconcileTolerance
	}
	if bound > 0 {
		bound = max(bound, spark) // Spark saw it: the setting is not what the JVM got
	}
	switch {
	case v < 0 || math.IsNaN(v) || math.IsInf(v, 0) || v > maxMemory:
		return fmt.Sprintf("%s peak %g is no amount of memory", g, v)
	case bound > 0 && v > float64(bound)*(1+slack):
		return fmt.Sprintf("%s peak %s > %s it could hold", g, sizing.Bytes(int64(v)), sizing.Bytes(bound))
	}
	return ""
}

// Settings reads from an application's Spark properties the executor
// and application settings the accounting and the rules take.
func Settings(props map[string]string) (sizing.Settings, sizing.Resources, error) {
	s, err := sizing.FromProperties(props)
	if err != nil {
		return s, sizing.Resources{}, err
	}
	r, err := sizing.ResourcesFromProperties(props)
	return s, r, err
}
