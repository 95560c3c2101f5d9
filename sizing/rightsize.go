package sizing

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sparkpulse/sparkpulse/human"
)

// Right-sizing both ways. Advise only ever asks for more memory; these
// rules also take back what an application holds and does not use. Each
// recommendation carries its saving in core-seconds and byte-seconds of
// what the cluster holds (negative: a cost), so that a fleet's can be
// summed, and the risk of taking it.
//
//   - shrink: every executor reported its process-tree memory, none was
//     removed for memory, no memory rule fired, no task spilled, the
//     largest resident memory stayed at or under 60 % of the container,
//     the largest heap at or under 70 % of the heap, and garbage
//     collection under 5 % of task time, over at least ten
//     executor-minutes and ten minutes of task time: idle executors'
//     peaks say nothing of what the work needs. The heap becomes the
//     largest heap peak over 0.7 (so that it would again peak at 70 %),
//     at least 1 GiB, in steps of 256 MiB, with Spark's default overhead
//     for it (or the overhead as set); it grows until the largest
//     resident memory is at most 80 % of the container and the largest
//     execution + storage peak at most 70 % of the new unified region
//     ((heap − 300 MiB) × spark.memory.fraction, which a smaller heap
//     shrinks with it: past it tasks spill and cached blocks go).
//     Recommended when the container shrinks by 15 % or more. Peaks are
//     sampled at heartbeats: the margins are for the spikes between two.
//   - idle: the executors' task slots were busy under 30 % of the time
//     they were held — slot occupancy, Σ task run time × spark.task.cpus
//     ÷ core-seconds held, Sparklens' measure — over at least one core-hour, without
//     dynamic allocation. Occupancy, not CPU: a task's CPU time leaves
//     out its Python workers, its garbage collection and its waits on
//     I/O, so a PySpark UDF job with every slot busy, or an I/O-bound
//     scan, reads as idle by CPU and would run far longer on fewer
//     executors. The executors needed for 60 % occupancy are Σ run time
//     × spark.task.cpus ÷ (0.6 × duration × cores per executor), at least one:
//     spark.executor.instances. With dynamic allocation the rule is
//     quiet: the average held says nothing of the stage that needed the
//     most, and a cap from it would starve that stage; idle-timeout
//     speaks for dynamic allocation's waste. The saving assumes the same
//     run time: the tasks keep their run time, only the empty slots go.
//   - idle-timeout: with dynamic allocation, when the idle rule did not
//     fire, executors the driver released while the application ran
//     each sat idle for spark.dynamicAllocation.executorIdleTimeout
//     first (that is when Spark releases one). Where that idle time is
//     5 % or more of the core-seconds held and the timeout is over 30 s,
//     the timeout becomes 30 s: each released executor holds its cores
//     and container for the difference less. The saving is a lower
//     bound (an executor may idle between tasks without being released);
//     the risk is executors requested again when the next stage starts.
//   - cores: a heap rule fired (GC pressure or an executor out of heap),
//     executors have 4 cores or more, and a quarter more heap would pass
//     31 GiB (Advise held it back): half the cores per executor (rounded
//     down: 5 become 2) give each task c ÷ (c/2) times the heap. Keeping
//     the parallelism takes as many times the executors, each with a
//     whole container, not only an overhead: the cost is (factor − 1)
//     containers per executor for as long as they lived, at the plan's
//     container. Where more heap is possible the plan takes it (a quarter
//     of a heap per executor costs less than a container), and this rule
//     is a note with both costs; never for executors holding GPUs. With
//     spark.executor.instances set (and no dynamic allocation) the
//     instances are raised to match; under dynamic
//     allocation, spark.dynamicAllocation.maxExecutors when set (which
//     dynamic allocation reaches by pending tasks ÷ cores per executor).
//   - driver: the driver's heap peaked at or under 40 % of a
//     spark.driver.memory of 2 GiB or more: the heap becomes the peak
//     over 0.6, at least 1 GiB, in steps of 256 MiB, when that saves
//     512 MiB or more. A job failed over spark.driver.maxResultSize:
//     twice the limit (at least 2g), and a driver heap of at least twice
//     that, since the driver holds the results.

// The recommendations are one plan: the memory settings are applied
// together (Settings.Planned) and cost the planned container's growth,
// and the rules that change the executors' number cost against the
// planned container, so that their savings add up.

// RightSize adds the rules above to a, which Advise made from the same
// executors; failures are the application's job and stage failure
// reasons.
func RightSize(a *Advice, s Settings, r Resources, u Usage, execs []Executor, failures []string) {
	var execSeconds, driverSeconds, taskSeconds float64
	var maxHeap, maxRSS, maxUnified, driverHeap int64
	allRSS, lowGC, memoryRemoved := u.Executors > 0, true, false
	for _, x := range execs {
		alive := float64(max(x.AliveMs, 0)) / 1000
		if x.ID == "driver" {
			driverSeconds = alive
			driverHeap = x.Peaks["JVMHeapMemory"]
			continue
		}
		if x.ResourceProfile != 0 {
			continue // another profile's: its settings are not these
		}
		execSeconds += alive
		taskSeconds += float64(max(x.TaskTimeMs, 0)) / 1000
		maxHeap = max(maxHeap, x.Peaks["JVMHeapMemory"])
		maxUnified = max(maxUnified, x.Peaks["OnHeapExecutionMemory"]+x.Peaks["OnHeapStorageMemory"])
		rss := x.RSS()
		maxRSS = max(maxRSS, rss)
		allRSS = allRSS && x.Peaks["ProcessTreeJVMRSSMemory"] > 0
		if x.TaskTimeMs > 0 && float64(x.GCTimeMs) >= 0.05*float64(x.TaskTimeMs) {
			lowGC = false
		}
		// A SIGKILL or SIGTERM without a named cause may be memory too
		// (a Kubernetes 137, a YARN 143): no shrinking after one.
		switch s.RemoveKind(x.RemoveReason) {
		case RemovedHeapOOM, RemovedContainerOOM, RemovedContainerVMem, RemovedKilled, RemovedTerminated, RemovedCrashed:
			memoryRemoved = true
		}
	}
	// A Python worker out of its share of spark.executor.pyspark.memory
	// fails its task with MemoryError (Spark limits each worker's address
	// space to the setting ÷ the executor's cores): its stage's failure
	// says so. Nothing measured says how much more it needed: twice the
	// setting, or what the workers' address space asks if more.
	if s.PySpark > 0 && slices.ContainsFunc(failures, PythonMemoryError) {
		cores := max(r.ExecutorCores, 1)
		a.find("python", "", "a Python worker ran out of its address space (MemoryError) under spark.executor.pyspark.memory (%s: %s per worker of an executor of %d cores)",
			Bytes(s.PySpark), Bytes(s.PySpark/int64(cores)), cores)
		i := slices.IndexFunc(a.Recommendations, func(r Setting) bool { return r.Property == "spark.executor.pyspark.memory" })
		switch {
		case i < 0:
			a.Recommendations = append(a.Recommendations, Setting{Property: "spark.executor.pyspark.memory", Current: s.PySpark, Value: 2 * s.PySpark, Rule: "python",
				Reason: "a task's Python worker needed more than its share of the setting, and nothing measured says how much more: twice it",
				Risk:   "a task whose data is larger still fails the same way; fewer cores per executor give each worker a larger share"})
		case a.Recommendations[i].Value < 2*s.PySpark:
			a.Recommendations[i].Value = 2 * s.PySpark
		}
	}

	// The memory rules' recommendations are one plan: together they
	// cost the planned container's growth for as long as the executors
	// lived, each what it adds, the heap's with the default overhead
	// that grows with it.
	container := s.Container()
	heap, overhead, _, planned := s.Planned(a.Recommendations)
	for i := range a.Recommendations {
		rec := &a.Recommendations[i]
		switch rec.Property {
		case "spark.executor.pyspark.memory":
			rec.SavingByteSeconds = -float64(rec.Value-rec.Current) * execSeconds
		case "spark.executor.memoryOverhead":
			rec.SavingByteSeconds = -float64(overhead-s.OverheadFor(heap)) * execSeconds
		}
	}
	for i := range a.Recommendations {
		if rec := &a.Recommendations[i]; rec.Property == "spark.executor.memory" {
			rec.SavingByteSeconds = -float64(planned-container) * execSeconds
			for _, o := range a.Recommendations {
				if o.Property != rec.Property {
					rec.SavingByteSeconds -= o.SavingByteSeconds
				}
			}
		}
	}
	// A Python worker that ended without an error may be the kernel's
	// OOM killer's: no shrinking after one either.
	memoryRemoved = memoryRemoved || slices.ContainsFunc(failures, PythonWorkerCrashed)
	memoryFinding := slices.ContainsFunc(a.Findings, func(f Finding) bool {
		return f.Rule == "container" || f.Rule == "python" || f.Rule == "heap" || f.Rule == "unified"
	})
	heapFinding := slices.ContainsFunc(a.Findings, func(f Finding) bool { return f.Rule == "heap" })
	_, heapRaised := findSetting(a.Recommendations, "spark.executor.memory")

	// shrink
	if allRSS && !memoryFinding && !memoryRemoved && !s.LocalDirsInMemory && lowGC && execSeconds >= 600 && taskSeconds >= 600 && u.SpilledBytes == 0 && maxHeap > 0 &&
		float64(maxRSS) <= 0.6*float64(container) && float64(maxHeap) <= 0.7*float64(s.Heap) {
		heap = max(roundUp(int64(float64(maxHeap)/0.7), 256*mib), 1<<30)
		unified := func(h int64) float64 { return float64(max(h-reserved, 0)) * s.MemoryFraction }
		for float64(maxRSS) > 0.8*float64(heap+s.OverheadFor(heap)+s.PySpark+s.OffHeap) || float64(maxUnified) > 0.7*unified(heap) {
			heap += 256 * mib
		}
		newContainer := heap + s.OverheadFor(heap) + s.PySpark + s.OffHeap
		if heap < s.Heap && float64(newContainer) <= 0.85*float64(container) {
			planned = newContainer
			a.find("shrink", "", "executors peaked at %s resident (%.0f %% of the %s container) and %s of heap (%.0f %% of %s), with garbage collection under 5 %% of task time",
				Bytes(maxRSS), 100*ratio(maxRSS, container), Bytes(container), Bytes(maxHeap), 100*ratio(maxHeap, s.Heap), Bytes(s.Heap))
			a.Recommendations = append(a.Recommendations, Setting{Property: "spark.executor.memory", Current: s.Heap, Value: heap, Rule: "shrink",
				Reason:            fmt.Sprintf("the heap's peak %s is then 70 %% of it, and the largest resident memory at most 80 %% of a %s container", Bytes(maxHeap), Bytes(newContainer)),
				SavingByteSeconds: float64(container-newContainer) * execSeconds,
				Risk:              "a peak between two heartbeats, or a larger input than this run's, could then reach the limit"})
		}
	}

	// idle
	cores, idle := u.Cores, false
	// Dynamic allocation pinned at minExecutors = maxExecutors holds a
	// fixed number, as a static application does.
	pinned := r.DynamicAllocation && r.MaxExecutors > 0 && r.MinExecutors == r.MaxExecutors
	if u.SlotOccupancy != nil && (!r.DynamicAllocation || pinned) && u.ExecutorCoreSeconds >= 3600 && cores > 0 && u.DurationMs > 0 &&
		*u.SlotOccupancy < 0.30 {
		seconds := float64(u.DurationMs) / 1000
		held := u.SlotCoreSeconds / float64(cores) / seconds // executors, on average
		// Tasks run only while a stage does: the time with none (the
		// driver's alone) is idle whatever the executors' number, and
		// fewer executors would not shorten it. The slots are sized for
		// the stages' time, with the tasks that failed or were killed,
		// which held their slots too (the stage list counts them already).
		stageSeconds, busy := seconds, *u.SlotOccupancy*u.SlotCoreSeconds // executor cores
		if u.DriverOnlyMs != nil {
			stageSeconds = max(seconds-float64(*u.DriverOnlyMs)/1000, 1)
		}
		if u.LostTaskSeconds != nil && u.CPUFrom != "stages" {
			lost := *u.LostTaskSeconds
			if u.RecomputeTaskSeconds != nil {
				lost -= *u.RecomputeTaskSeconds // successful tasks: in the run time already
			}
			busy += u.BusyCoreSeconds(max(lost, 0))
		}
		need := max(1, int(math.Ceil(busy/(0.6*stageSeconds*float64(cores)))))
		if driverOnly := 1 - stageSeconds/seconds; float64(need) >= held && driverOnly >= 0.25 {
			release := "spark.dynamicAllocation.enabled=true"
			if pinned {
				release = "spark.dynamicAllocation.minExecutors below maxExecutors"
			}
			note := fmt.Sprintf("task slots were busy %.0f %% of the time they were held, but no stage ran for %.0f %% of the run: "+
				"while stages ran the executors were needed, and between them no number of executors is right; "+
				"%s would release them while the driver works alone", 100**u.SlotOccupancy, 100*driverOnly, release)
			// What releasing would save: each stretch with no stage, less
			// the idle timeout an executor waits before it goes, at the
			// cores and containers held on average. An upper bound:
			// executors that hold cached blocks, or shuffle output
			// without an external shuffle service, stay.
			var releasable float64
			for _, g := range u.DriverOnlyGapsMs {
				releasable += max(0, float64(g)/1000-r.IdleTimeout.Seconds())
			}
			if releasable > 0 {
				note += fmt.Sprintf(": up to %s core-hours and %s GiB-hours less, the stretches with no stage after spark.dynamicAllocation.executorIdleTimeout (%s), "+
					"where the executors hold no cached blocks, nor shuffle output the next stages read without an external shuffle service (shuffle tracking keeps those executors)",
					human.Hours(releasable*u.ExecutorCoreSeconds/seconds/3600), human.Hours(releasable*float64(planned)*execSeconds/seconds/gibHour), durationText(r.IdleTimeout))
			}
			a.Notes = append(a.Notes, note)
		}
		if float64(need) < held {
			idle = true
			keep := float64(need) / held
			current := ""
			if r.Instances > 0 {
				current = strconv.Itoa(r.Instances)
			}
			a.find("idle", "", "task slots were busy %.0f %% of the time they were held (%.1f executors of %d cores on average; CPU used %.0f %%, from the %s)",
				100**u.SlotOccupancy, held, cores, 100*u.CPUUtilisation, u.CPUFrom)
			rec := Setting{Property: "spark.executor.instances", CurrentText: current, ValueText: strconv.Itoa(need), Rule: "idle",
				Reason: fmt.Sprintf("%d executors would keep their task slots 60 %% busy while stages run, with the same task run time", need),
				// Against the planned container, so that the rules'
				// savings add up.
				SavingCoreSeconds: u.ExecutorCoreSeconds * (1 - keep), SavingByteSeconds: float64(planned) * execSeconds * (1 - keep),
				SavingGPUSeconds: u.ExecutorGPUSeconds * (1 - keep),
				Risk:             "stages with more tasks than the fewer slots run in more waves: the run is longer where the busy time was concentrated in a few wide stages"}
			switch {
			case pinned:
				rec.Property, rec.CurrentText = "spark.dynamicAllocation.maxExecutors", strconv.Itoa(r.MaxExecutors)
			case r.Standalone:
				// A standalone Master reads no executor count without
				// dynamic allocation: the application's cores, in
				// executors of a given size.
				rec.Property, rec.CurrentText, rec.ValueText = "spark.cores.max", "", strconv.Itoa(need*cores)
				if r.CoresMax > 0 {
					rec.CurrentText = strconv.Itoa(r.CoresMax)
				}
				rec.Reason = fmt.Sprintf("%d executors of %d cores would keep their task slots 60 %% busy while stages run, with the same task run time", need, cores)
			}
			a.Recommendations = append(a.Recommendations, rec)
			if pinned {
				a.Recommendations = append(a.Recommendations, Setting{Property: "spark.dynamicAllocation.minExecutors", CurrentText: strconv.Itoa(r.MinExecutors),
					ValueText: strconv.Itoa(need), Rule: "idle", Reason: "as pinned as it was, at the new maxExecutors (its cost is counted with maxExecutors)"})
			}
			if r.Standalone && !pinned && r.ExecutorCores == 0 && !(heapFinding && cores >= 4) {
				// Without it each executor takes a worker's free cores,
				// and fewer cores would make smaller executors, not fewer
				// (the cores rule below sets it where it fires).
				a.Recommendations = append(a.Recommendations, Setting{Property: "spark.executor.cores", ValueText: strconv.Itoa(cores), Rule: "idle",
					Reason: fmt.Sprintf("executors of %d cores, as most were: spark.cores.max then makes %d of them", cores, need)})
			}
		}
	}

	// idle-timeout
	const shortTimeout = 30 * time.Second
	if !idle && r.DynamicAllocation && r.IdleTimeout > shortTimeout && u.ExecutorCoreSeconds > 0 {
		var released int
		var cores, gpus float64 // held by the released executors
		for _, x := range execs {
			if x.Released && x.ID != "driver" {
				released++
				cores += r.HeldCores(x)
				gpus += float64(r.gpus(x))
			}
		}
		idleCoreSeconds := cores * r.IdleTimeout.Seconds()
		if released > 0 && idleCoreSeconds >= 0.05*u.ExecutorCoreSeconds {
			less := (r.IdleTimeout - shortTimeout).Seconds()
			a.find("idle-timeout", "", "%d executors released by dynamic allocation each sat idle for spark.dynamicAllocation.executorIdleTimeout (%s) first: %.0f core-seconds, %.0f %% of those held",
				released, r.IdleTimeout, idleCoreSeconds, 100*idleCoreSeconds/u.ExecutorCoreSeconds)
			a.Recommendations = append(a.Recommendations, Setting{Property: "spark.dynamicAllocation.executorIdleTimeout",
				CurrentText: durationText(r.IdleTimeout), ValueText: durationText(shortTimeout), Rule: "idle-timeout",
				Reason:            fmt.Sprintf("%d released executors would each hold their cores and container %.0f s less", released, less),
				SavingCoreSeconds: cores * less, SavingByteSeconds: float64(planned) * float64(released) * less, SavingGPUSeconds: gpus * less,
				Risk: "executors released sooner are requested again when the next stage starts: a container start each, and their cached blocks lost unless spark.dynamicAllocation.cachedExecutorIdleTimeout keeps them"})
		}
	}

	// cores
	// Fewer cores per executor give each task more heap, as more heap
	// does; the plan takes one of the two. More heap costs a quarter of
	// a heap per executor, the cores a container per executor: the heap
	// unless the JVM would then lose its compressed pointers (Advise
	// holds the heap back then). Executors holding GPUs would take as
	// many times their GPUs: not advised.
	if heapFinding && cores >= 4 {
		half := cores / 2
		factor := float64(cores) / float64(half) // 2, or 2.5 from 5 cores
		switch {
		case u.ExecutorGPUSeconds > 0:
			a.Notes = append(a.Notes, fmt.Sprintf("the executors hold GPUs: %d cores instead of %d would take %s the executors, and their GPUs, for as many task slots: not advised",
				half, cores, timesText(factor)))
		case heapRaised:
			// The alternative keeps today's heap: its extra executors
			// hold the plan's container without the heap rule's growth.
			var keep []Setting
			for _, rec := range a.Recommendations {
				if rec.Property != "spark.executor.memory" {
					keep = append(keep, rec)
				}
			}
			_, _, _, alt := s.Planned(keep)
			a.Notes = append(a.Notes, fmt.Sprintf("alternatively spark.executor.cores=%d with %s the executors gives each task %s the heap, "+
				"at %s GiB-hours more held than this run, where a quarter more heap costs %s",
				half, timesText(factor), timesText(factor), human.Hours((factor-1)*float64(alt)*execSeconds/gibHour),
				human.Hours((float64(planned)-float64(container))*execSeconds/gibHour)))
		default:
			rec := Setting{Property: "spark.executor.cores", CurrentText: strconv.Itoa(cores), ValueText: strconv.Itoa(half), Rule: "cores",
				Reason: fmt.Sprintf("%s the heap per task, as GC pressure grows with the tasks sharing a heap, which cannot grow past %s; %s as many executors keep as many task slots",
					timesText(factor), Bytes(compressedOops), timesText(factor)),
				// The extra executors hold a container each for as long
				// as these lived; the cores stay as many.
				SavingByteSeconds: -(factor - 1) * float64(planned) * execSeconds,
				Risk:              "each extra executor also holds its overhead and its share of the driver's bookkeeping; a container start each"}
			a.Recommendations = append(a.Recommendations, rec)
			switch {
			case r.Instances > 0 && !r.DynamicAllocation && !r.Standalone: // standalone: spark.cores.max keeps the slots
				a.Recommendations = append(a.Recommendations, Setting{Property: "spark.executor.instances", CurrentText: strconv.Itoa(r.Instances),
					ValueText: strconv.Itoa(int(math.Ceil(float64(r.Instances) * factor))), Rule: "cores",
					Reason: fmt.Sprintf("the same %d task slots with %d cores per executor (its cost is counted with spark.executor.cores)", r.Instances*cores, half)})
			case r.DynamicAllocation && r.MaxExecutors > 0:
				// Dynamic allocation asks for executors by pending tasks ÷
				// cores per executor: its cap must grow as much, or the
				// widest stage runs on half the slots.
				a.Recommendations = append(a.Recommendations, Setting{Property: "spark.dynamicAllocation.maxExecutors", CurrentText: strconv.Itoa(r.MaxExecutors),
					ValueText: strconv.Itoa(int(math.Ceil(float64(r.MaxExecutors) * factor))), Rule: "cores",
					Reason: fmt.Sprintf("as many task slots at the cap with %d cores per executor (its cost is counted with spark.executor.cores)", half)})
			}
		}
	}

	// driver
	// A driver's memory costs the cluster only in cluster mode; in client
	// mode it runs where it was submitted (YARN holds an application
	// master of its own size instead).
	if !r.ClusterMode {
		driverSeconds = 0
	}
	resultSize := slices.ContainsFunc(failures, func(f string) bool { return strings.Contains(f, "spark.driver.maxResultSize") })
	if slices.ContainsFunc(failures, PythonWorkerCrashed) {
		a.Notes = append(a.Notes, "a stage failed as Python workers ended without a Python error (\"Python worker exited unexpectedly (crashed)\"): "+
			"under a container's memory limit (YARN with cgroups, Kubernetes) that is usually the kernel's OOM killer; "+
			"where the executors' resident memory reached the container the container rule sizes the overhead, else spark.python.worker.faulthandler.enabled=true tells a crash of the worker's own")
	}
	switch {
	case resultSize:
		limit := max(2*r.MaxResultSize, 2<<30)
		a.find("driver", "driver", "a job failed over spark.driver.maxResultSize (%s)", Bytes(r.MaxResultSize))
		a.Recommendations = append(a.Recommendations, Setting{Property: "spark.driver.maxResultSize", Current: r.MaxResultSize, Value: limit, Rule: "driver",
			Reason: "twice the limit the job's results passed", Risk: "the driver holds the results in its heap: a limit past half of it risks the driver running out"})
		if heap := roundUp(2*limit, 256*mib); heap > r.DriverHeap {
			a.Recommendations = append(a.Recommendations, Setting{Property: "spark.driver.memory", Current: r.DriverHeap, Value: heap, Rule: "driver",
				Reason: "twice the new spark.driver.maxResultSize", SavingByteSeconds: -float64(heap-r.DriverHeap) * driverSeconds,
				Risk: "the driver out of heap while it collects results"})
		}
	case driverHeap > 0 && r.DriverHeap >= 2<<30 && float64(driverHeap) <= 0.4*float64(r.DriverHeap):
		heap := max(roundUp(int64(float64(driverHeap)/0.6), 256*mib), 1<<30)
		if r.DriverHeap-heap >= 512*mib {
			a.find("driver", "driver", "the driver's heap peaked at %s, %.0f %% of %s", Bytes(driverHeap), 100*ratio(driverHeap, r.DriverHeap), Bytes(r.DriverHeap))
			a.Recommendations = append(a.Recommendations, Setting{Property: "spark.driver.memory", Current: r.DriverHeap, Value: heap, Rule: "driver",
				Reason:            fmt.Sprintf("the heap's peak %s is then 60 %% of it", Bytes(driverHeap)),
				SavingByteSeconds: float64(r.DriverHeap-heap) * driverSeconds,
				Risk:              "a collect() or broadcast larger than this run's needs more"})
		}
	}
}

// Savings sums what the recommendations would save: the rules' savings
// are worked out so that they add up (idle's against the container shrink
// leaves).
func (a Advice) Savings() (coreSeconds, byteSeconds, gpuSeconds float64) {
	for _, r := range a.Recommendations {
		coreSeconds += r.SavingCoreSeconds
		byteSeconds += r.SavingByteSeconds
		gpuSeconds += r.SavingGPUSeconds
	}
	return coreSeconds, byteSeconds, gpuSeconds
}

// gibHour is a GiB held for an hour, in byte-seconds.
const gibHour = float64(1<<30) * 3600

// findSetting is the recommendation for property, if any.
func findSetting(recs []Setting, property string) (Setting, bool) {
	i := slices.IndexFunc(recs, func(r Setting) bool { return r.Property == property })
	if i < 0 {
		return Setting{}, false
	}
	return recs[i], true
}

// durationText is d as Spark takes a time setting: whole seconds ("30s").
// timesText writes a factor as "twice" or "2.5×".
func timesText(f float64) string {
	if f == 2 {
		return "twice"
	}
	return strconv.FormatFloat(f, 'f', -1, 64) + "×"
}

func durationText(d time.Duration) string {
	return strconv.FormatInt(int64(d/time.Second), 10) + "s"
}
