"""Real Spark workloads for sparkpulse's real-Spark suite (realspark).

Usage: python3 workload.py CONFIG.json

CONFIG names the master, the application name, every Spark setting (the Go
test is their one source), the scenario and an output folder. The script
runs the scenario's jobs, saves what Spark's live REST API answers about
the application under OUT/rest/, prints "DONE <epoch seconds>" and waits
for a line on stdin before it stops the SparkSession, so that the test can
let every process send one more report and sparkpulse read the live UI.

Scenarios:
  main      a DataFrame job with a shuffle, a cached DataFrame read twice,
            a skewed key, a sort that spills, a Python UDF, a stateful
            streaming query
  failures  a job whose Python UDF fails, an executor killed with SIGKILL
            while its tasks run, and executors that run out of heap
  yarn      on YARN: a node lost while tasks run (the test stops its
            NodeManager, see LOSE below), then a Python worker over its
            container, which YARN kills, and executors out of heap
  dynamic   on YARN with dynamic allocation and the external shuffle
            service: executors up to the maximum, some preempted (the
            test submits a second application, see FULL below), all
            released when idle, then the shuffle read again from the
            shuffle service
  small     one short job (the application that preempts)
  worker    on a standalone cluster: a worker lost while tasks run (the
            test kills it, see LOSE below)
  cpus      tasks that each hold their slot for three seconds, for an
            application whose tasks take two cores (spark.task.cpus=2)
  scaling   dynamic allocation with decommissioning: two executors for a
            job of six tasks, both let go once idle
  recompute two executors of one core hold a shuffle's map output; one is
            killed with SIGKILL while the shuffle is read again: its
            output is fetched in vain (FetchFailed), and Spark runs the
            map stage again for the partitions lost with it
  speculation
            two executors on two hosts (workers advertised as 127.0.0.1
            and localhost); the second's worker sets SPARKPULSE_SLOW, and
            its tasks take 30 s where the others take 1 s: Spark runs a
            speculative copy on the first, and kills the slow original
  skewjoin  a sort-merge join of a table where nine rows in ten share one
            key, twice: adaptive execution's skew join off ("skew join,
            whole"), then on with thresholds the hot partition passes
            ("skew join, split"), which splits it by map output
  killed    a job runs when the test kills the driver's JVM with SIGKILL
            (see KILL below): its event log is never completed
  limits    a Python worker over its share of spark.executor.pyspark.memory
            (MemoryError, the job fails), then a streaming query the
            program stops while a micro-batch runs

The test and the driver speak through lines the driver says and words
the test answers. In client mode the lines go to stdout and the answers
come on stdin; in YARN's cluster mode, where the driver runs in a
container, the lines are appended to OUT/said and each answer is a file
OUT/<word>. The lines: "APP <id> <ui>", "LOSE <executor nodes>" (the
tasks then wait for the answer "lost", which the test gives once Spark
lists the lost executors), "FULL" (likewise, answer "preempted"), "KILL"
(the test then kills the driver's JVM; the script ends once it is gone), and
"DONE <epoch seconds>", after which the driver stops at "stop".
"""

import json
import os
import signal
import sys
import time
import urllib.request

from pyspark import TaskContext
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType


def log(msg):
    print("workload: " + msg, file=sys.stderr, flush=True)


def rest(ui, path):
    with urllib.request.urlopen(ui + "/api/v1/" + path, timeout=30) as r:
        return json.load(r)


class Channel:
    """The test's side of the conversation (see the module's doc)."""

    def __init__(self, out, files):
        self.out, self.files = out, files

    def say(self, line):
        if self.files:
            with open(os.path.join(self.out, "said"), "a") as f:
                f.write(line + "\n")
        else:
            print(line, flush=True)

    def answer(self, word, timeout=300):
        if not self.files:
            got = sys.stdin.readline().strip()
            if got != word:
                raise SystemExit("expected %r from the test, got %r" % (word, got))
            return
        wait_for_file(os.path.join(self.out, word), timeout)


def wait_for_file(path, timeout):
    deadline = time.time() + timeout
    while not os.path.exists(path):
        if time.time() > deadline:
            raise SystemExit("no %s within %d s" % (path, timeout))
        time.sleep(0.1)


def executors(ui, app_id):
    return [e for e in rest(ui, "applications/%s/executors" % app_id) if e["id"] != "driver"]


def wait_executors(ui, app_id, n, timeout=180):
    """Waits until n executors are active and returns them."""
    deadline = time.time() + timeout
    while True:
        ex = executors(ui, app_id)
        if len(ex) >= n:
            return ex
        if time.time() > deadline:
            raise SystemExit("%d executors of %d after %d s" % (len(ex), n, timeout))
        time.sleep(0.2)


def waiting_tasks(flag, seconds=240):
    """A task function that holds its slot until the file flag exists, so
    that the test's loss (a node, a worker, a preemption) happens while
    tasks run and the job ends once Spark has seen it."""
    def run(it):
        deadline = time.time() + seconds
        while not os.path.exists(flag) and time.time() < deadline:
            time.sleep(0.1)
        return [sum(1 for _ in it)]
    return run


def lose_while_busy(sc, ui, ch, out, description, where):
    """Runs a job whose tasks hold their slots; once every executor runs
    one, says LOSE with where each executor is (where(executor)), waits
    for the test's "lost" (it has taken a node or a worker away, and Spark
    lists the executors on it as removed), then lets the tasks end."""
    flag = os.path.join(out, "lost")
    result = {}

    def run():
        sc.setJobDescription(description)
        result["n"] = sc.parallelize(range(6000), 60).mapPartitions(waiting_tasks(flag)).sum()

    import threading
    t = threading.Thread(target=run)
    t.start()
    deadline = time.time() + 120
    while True:
        ex = executors(ui, sc.applicationId)
        if ex and all(e["activeTasks"] > 0 for e in ex):
            break
        if time.time() > deadline:
            raise SystemExit("the executors did not all run tasks: %r" % ex)
        time.sleep(0.2)
    ch.say("LOSE " + json.dumps({e["id"]: where(e) for e in ex}, sort_keys=True))
    ch.answer("lost")
    open(flag, "w").close()
    t.join()
    if result.get("n") != 6000:
        raise SystemExit("the job with %s counted %r" % (description, result.get("n")))


def heap_out_of_memory(spark):
    """A 1.5 GB string in a 512 MB heap: java.lang.OutOfMemoryError on the
    executor, which exits; the task's retry kills another and the job
    fails (spark.task.maxFailures = 2)."""
    try:
        # The length comes from the data, so that the optimizer cannot fold
        # the string on the driver.
        spark.range(0, 1, numPartitions=1).selectExpr(
            "length(repeat('x', CAST(id AS INT) + 1500000000)) AS n").collect()
        raise SystemExit("the job out of memory succeeded")
    except Exception as e:  # noqa: BLE001
        if "SystemExit" in type(e).__name__:
            raise
        log("heap job failed as intended")


def main_jobs(spark, out):
    sc = spark.sparkContext

    sc.setJobDescription("shuffle: sum by key")
    spark.range(0, 2_000_000, numPartitions=4).groupBy((F.col("id") % 1000).alias("k")).agg(
        F.sum("id").alias("s")).collect()

    sc.setJobDescription("cache: count twice")
    cached = spark.range(0, 1_000_000, numPartitions=4).selectExpr("id", "id * 3 AS x").cache()
    cached.count()
    cached.count()
    cached.unpersist()

    # Nine rows in ten share key 0: one of the eight tasks after the
    # shuffle reads most of the bytes.
    sc.setJobDescription("skew: one hot key")
    skewed = spark.range(0, 3_000_000, numPartitions=4).selectExpr(
        "CASE WHEN id % 10 < 9 THEN 0 ELSE id END AS k", "id AS v")
    # Per-row work heavy enough that the hot task's run time, not only its
    # bytes, stands out against the tasks' fixed cost.
    skewed.repartition(8, "k").selectExpr(
        "k", "sha2(sha2(sha2(cast(v AS string), 512), 512), 512) AS h").groupBy(
        "k").agg(F.count("h")).collect()

    # A sort larger than the tasks' execution memory (spark.memory.fraction
    # is small) spills to disk; its output is written, then read back.
    sc.setJobDescription("spill: sort and write")
    path = os.path.join(out, "sorted.parquet")
    spark.range(0, 1_600_000, numPartitions=2).selectExpr(
        "id", "repeat(cast(id AS string), 8) AS s").sortWithinPartitions(F.rand(7)).write.mode(
        "overwrite").parquet(path)
    sc.setJobDescription("read back")
    spark.read.parquet(path).agg(F.sum(F.length("s"))).collect()

    # Python workers: their memory is ProcessTreePythonRSSMemory.
    sc.setJobDescription("python udf")
    double = F.udf(lambda x: x * 2, LongType())
    spark.range(0, 600_000, numPartitions=4).select(double("id").alias("d")).agg(F.sum("d")).collect()

    # Structured Streaming with state, reported with
    # spark.sql.streaming.metricsEnabled: six files, one per micro-batch,
    # read until none is left (availableNow), so that no task is killed
    # by a stop.
    sc.setJobDescription("streaming")
    src = os.path.join(out, "stream-in")
    os.makedirs(src, exist_ok=True)
    for i in range(6):
        with open(os.path.join(src, "part-%d.json" % i), "w") as f:
            f.writelines('{"value": %d}\n' % v for v in range(i * 20_000, (i + 1) * 20_000))
    query = (spark.readStream.schema("value LONG").option("maxFilesPerTrigger", 1).json(src)
             .groupBy((F.col("value") % 10).alias("k")).count()
             .writeStream.queryName("file_counts").outputMode("complete").format("memory")
             .trigger(availableNow=True).start())
    if not query.awaitTermination(180):
        raise SystemExit("the streaming query did not finish")
    if query.exception() is not None:
        raise SystemExit("the streaming query failed: %r" % query.exception())


def executor_pid(app_id, executor_id):
    """The pid of the executor JVM the local-cluster worker started."""
    want = ["--executor-id", executor_id]
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                args = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if "org.apache.spark.executor.CoarseGrainedExecutorBackend" not in args or app_id not in args:
            continue
        for i in range(len(args) - 1):
            if args[i:i + 2] == want:
                return int(pid)
    return None


def kill_executor(app_id, executor_id, when):
    pid = executor_pid(app_id, executor_id)
    if pid is None:
        raise SystemExit("executor %s not found" % executor_id)
    os.kill(pid, signal.SIGKILL)
    log("killed executor %s (pid %d) %s" % (executor_id, pid, when))


def failures_jobs(spark, ui):
    sc = spark.sparkContext
    app_id = sc.applicationId

    sc.setJobDescription("warm up")
    spark.range(0, 400_000, numPartitions=4).agg(F.sum("id")).collect()

    # A Python UDF that raises on one row: its task fails
    # spark.task.maxFailures times and the job with it.
    sc.setJobDescription("failing udf")

    def boom(x):
        if x == 4242:
            raise ValueError("bad row 4242")
        return x

    try:
        spark.range(0, 10_000, numPartitions=4).select(
            F.udf(boom, LongType())("id").alias("b")).agg(F.sum("b")).collect()
        raise SystemExit("the failing job succeeded")
    except Exception as e:  # noqa: BLE001 - the job must fail
        if "SystemExit" in type(e).__name__:
            raise
        log("failing udf job failed as intended")

    # Many short tasks keep both executors busy; executor 1 is killed
    # while it runs them, after its last report and before its next one.
    import threading

    result = {}

    def run():
        # Job descriptions are per thread.
        sc.setJobDescription("many tasks, an executor killed")

        def slow(it):
            time.sleep(0.02)
            return [sum(1 for _ in it)]
        result["n"] = sc.parallelize(range(40_000), 300).mapPartitions(slow).sum()

    t = threading.Thread(target=run)
    t.start()
    deadline = time.time() + 60
    while time.time() < deadline:
        ex = {e["id"]: e for e in rest(ui, "applications/%s/executors" % app_id)}
        if ex.get("1", {}).get("completedTasks", 0) >= 20 and ex["1"].get("activeTasks", 0) > 0:
            break
        time.sleep(0.1)
    kill_executor(app_id, "1", "while its tasks run")
    t.join()
    if result.get("n") != 40_000:
        raise SystemExit("the job with the killed executor counted %r" % result.get("n"))

    sc.setJobDescription("heap out of memory")
    heap_out_of_memory(spark)

    sc.setJobDescription("after the losses")
    spark.range(0, 200_000, numPartitions=4).agg(F.sum("id")).collect()


# What a Python worker holds over its container: YARN's limit for the
# suite's executors (512 MiB heap and 384 MiB overhead, rounded up to
# 1 GiB) is well below it, with the JVM's own resident memory on top.
PYTHON_HOG = 1200 * 1024 * 1024


def yarn_jobs(spark, ui, ch, out):
    sc = spark.sparkContext

    sc.setJobDescription("warm up")
    spark.range(0, 400_000, numPartitions=6).agg(F.sum("id")).collect()

    # A node goes while every executor runs a task.
    lose_while_busy(sc, ui, ch, out, "a node lost", lambda e: e.get("attributes", {}).get("NM_PORT", ""))

    # The first attempt of partition 0 grows its Python worker past the
    # container and holds it: YARN's monitor kills the container within
    # a few of its 3 s checks. The retry is small.
    sc.setJobDescription("python over its container")

    def hog(it):
        ctx = TaskContext.get()
        if ctx.partitionId() == 0 and ctx.attemptNumber() == 0:
            b = bytearray(PYTHON_HOG)
            for i in range(0, len(b), 4096):
                b[i] = 1
            time.sleep(90)
        return [sum(1 for _ in it)]
    if sc.parallelize(range(3000), 3).mapPartitions(hog).sum() != 3000:
        raise SystemExit("the job over its container counted wrong")
    log("python job done")

    sc.setJobDescription("heap out of memory")
    heap_out_of_memory(spark)

    sc.setJobDescription("after the losses")
    spark.range(0, 200_000, numPartitions=4).agg(F.sum("id")).collect()


def dynamic_jobs(spark, ui, ch, out):
    sc = spark.sparkContext
    app_id = sc.applicationId
    most = int(spark.conf.get("spark.dynamicAllocation.maxExecutors"))
    flag = os.path.join(out, "preempted")
    # Tasks that hold their slots until the test has seen executors
    # preempted: dynamic allocation asks for the maximum meanwhile.
    shuffled = (sc.parallelize(range(20_000), 40).mapPartitions(waiting_tasks(flag))
                .map(lambda x: (x % 50, x)).reduceByKey(lambda a, b: a + b, 10))
    result = {}

    def run():
        sc.setJobDescription("scale up")
        result["n"] = shuffled.count()

    import threading
    t = threading.Thread(target=run)
    t.start()
    deadline = time.time() + 300
    while len([e for e in executors(ui, app_id) if e["activeTasks"] > 0]) < most:
        if time.time() > deadline:
            seen = rest(ui, "applications/%s/allexecutors" % app_id)
            raise SystemExit("dynamic allocation did not reach %d busy executors: %r" % (most, [
                (e["id"], e["isActive"], e["activeTasks"], e.get("removeReason")) for e in seen]))
        time.sleep(0.2)
    ch.say("FULL %d" % most)
    ch.answer("preempted")
    open(flag, "w").close()
    t.join()

    # Idle: dynamic allocation releases every executor
    # (spark.dynamicAllocation.minExecutors is 0).
    deadline = time.time() + 120
    while executors(ui, app_id):
        if time.time() > deadline:
            raise SystemExit("executors not released: %r" % executors(ui, app_id))
        time.sleep(0.2)

    # The shuffle's map output outlived the executors that wrote it: the
    # NodeManagers' shuffle service serves it to new ones.
    sc.setJobDescription("shuffle read from the shuffle service")
    if shuffled.count() != result["n"]:
        raise SystemExit("the shuffle read again counted wrong")


def small_jobs(spark):
    spark.sparkContext.setJobDescription("a short job")
    spark.range(0, 100_000, numPartitions=2).agg(F.sum("id")).collect()


def cpus_jobs(spark):
    sc = spark.sparkContext
    sc.setJobDescription("tasks of two cpus")

    def hold(it):
        time.sleep(3)
        yield sum(1 for _ in it)

    if sum(sc.parallelize(range(4000), 4).mapPartitions(hold).collect()) != 4000:
        raise SystemExit("the tasks of two cpus counted wrong")


def limits_jobs(spark, out):
    sc = spark.sparkContext
    # Each worker may map its share of spark.executor.pyspark.memory
    # (RLIMIT_AS): a task that allocates far more fails with MemoryError.
    sc.setJobDescription("a Python worker over its memory")

    def grab(it):
        block = bytearray(1 << 30)
        yield len(block)

    try:
        sc.parallelize(range(2), 1).mapPartitions(grab).collect()
        raise SystemExit("no MemoryError under spark.executor.pyspark.memory")
    except Exception as e:  # the job's failure, as py4j raises it
        if "MemoryError" not in str(e):
            raise

    # A streaming query whose micro-batch runs a slow Python UDF, stopped
    # by the program while the batch runs: stop() cancels the batch's
    # job group.
    sc.setJobDescription(None)
    src = os.path.join(out, "stream-slow")
    os.makedirs(src, exist_ok=True)
    with open(os.path.join(src, "part-0.json"), "w") as f:
        f.writelines('{"value": %d}\n' % v for v in range(4))
    slow = F.udf(lambda v: time.sleep(60) or v, LongType())
    query = (spark.readStream.schema("value LONG").json(src).select(slow("value").alias("v"))
             .writeStream.queryName("slow_batches").format("memory").start())
    deadline = time.time() + 120
    while not sc.statusTracker().getActiveJobsIds():
        if time.time() > deadline:
            raise SystemExit("the micro-batch did not start")
        time.sleep(0.1)
    time.sleep(2)  # its task is running
    query.stop()


def scaling_jobs(spark, ui):
    sc = spark.sparkContext
    app_id = sc.applicationId
    # Six tasks of three seconds: the backlog lasts while the first
    # executor works through them, so that the second, requested after a
    # second of it, comes even on a busy host (with two tasks the first
    # executor could take both, and the request be withdrawn).
    sc.setJobDescription("six tasks")
    sc.parallelize(range(6), 6).map(lambda x: time.sleep(3) or x).collect()
    # Idle: dynamic allocation lets both go (spark.dynamicAllocation.
    # minExecutors is 0), decommissioning them.
    deadline = time.time() + 120
    while executors(ui, app_id):
        if time.time() > deadline:
            raise SystemExit("executors not let go: %r" % executors(ui, app_id))
        time.sleep(0.2)


def recompute_jobs(spark, ui):
    sc = spark.sparkContext
    app_id = sc.applicationId
    wait_executors(ui, app_id, 2)

    def slow_map(it):
        time.sleep(1)  # each executor takes map tasks
        for x in it:
            yield (x % 16, 1)

    # The map stage runs once, in its own job: both executors hold its
    # output (no shuffle service).
    sc.setJobDescription("map output on both executors")
    pairs = sc.parallelize(range(40_000), 4).mapPartitions(slow_map).partitionBy(4)
    if pairs.count() != 40_000:
        raise SystemExit("the map job counted wrong")
    holders = {e["id"] for e in executors(ui, app_id) if e.get("completedTasks", 0) > 0}
    if holders != {"0", "1"}:
        raise SystemExit("map output not on both executors: %r" % sorted(holders))

    # The shuffle read again, each reduce task holding its slot for two
    # seconds: executor 1 is killed while the first two run, and the
    # next two, launched after, find its output gone.
    import threading

    result = {}

    def run():
        sc.setJobDescription("the shuffle read again, an executor killed")

        def slow_reduce(it):
            time.sleep(2)
            return [sum(v for _, v in it)]
        result["n"] = sum(pairs.mapPartitions(slow_reduce).collect())

    t = threading.Thread(target=run)
    t.start()
    deadline = time.time() + 60
    while time.time() < deadline:
        busy = {e["id"] for e in executors(ui, app_id) if e.get("activeTasks", 0) > 0}
        if busy == {"0", "1"}:
            break
        time.sleep(0.05)
    else:
        raise SystemExit("the reduce tasks did not start on both executors")
    kill_executor(app_id, "1", "while the shuffle is read")
    t.join()
    if result.get("n") != 40_000:
        raise SystemExit("the job with the lost map output counted %r" % result.get("n"))


def speculation_jobs(spark, ui):
    sc = spark.sparkContext
    app_id = sc.applicationId
    ex = wait_executors(ui, app_id, 2)
    hosts = sorted(e["hostPort"].rsplit(":", 1)[0] for e in ex)
    if hosts != ["127.0.0.1", "localhost"]:
        raise SystemExit("executors on %r, want one on each host" % hosts)
    sc.setJobDescription("a slow executor's task speculated")

    def work(it):
        time.sleep(30 if os.environ.get("SPARKPULSE_SLOW") else 1)
        yield sum(1 for _ in it)
    if sum(sc.parallelize(range(8000), 8).mapPartitions(work).collect()) != 8000:
        raise SystemExit("the speculated job counted wrong")
    # The slow original is killed once its copy succeeded; its end comes
    # after the job's.
    deadline = time.time() + 60
    while sum(st["numKilledTasks"] for st in rest(ui, "applications/%s/stages" % app_id)) == 0:
        if time.time() > deadline:
            raise SystemExit("no task killed for its speculative copy")
        time.sleep(0.2)


def skewjoin_jobs(spark):
    sc = spark.sparkContext
    for k, v in {
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.autoBroadcastJoinThreshold": "-1",  # a sort-merge join
        "spark.sql.adaptive.coalescePartitions.enabled": "false",
        "spark.sql.shuffle.partitions": "8",
        "spark.sql.adaptive.skewJoin.skewedPartitionFactor": "2",
        "spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes": "1MB",
        "spark.sql.adaptive.advisoryPartitionSizeInBytes": "1MB",
    }.items():
        spark.conf.set(k, v)
    # 32 map tasks: a skewed partition is split along map outputs, so up
    # to 32 pieces.
    facts = spark.range(0, 4_000_000, numPartitions=32).selectExpr(
        "IF(id % 10 < 9, 0, id % 1000) AS k", "id AS v")
    dim = spark.range(0, 1000, numPartitions=2).selectExpr("id AS k", "id * 2 AS w")
    want = None
    for split in (False, True):
        spark.conf.set("spark.sql.adaptive.skewJoin.enabled", "true" if split else "false")
        sc.setJobDescription("skew join, " + ("split" if split else "whole"))
        got = facts.join(dim, "k").agg(F.sum("v"), F.count("*")).collect()[0]
        if want is not None and tuple(got) != want:
            raise SystemExit("the split join gave %r, the whole one %r" % (tuple(got), want))
        want = tuple(got)
    if want[1] != 4_000_000:
        raise SystemExit("the join counted %r rows" % (want,))


def killed_jobs(spark, ui, ch):
    sc = spark.sparkContext
    app_id = sc.applicationId
    import threading

    def run():
        sc.setJobDescription("running when the driver is killed")

        def hold(it):
            time.sleep(600)
            yield 1
        try:
            sc.parallelize(range(2), 2).mapPartitions(hold).collect()
        except Exception:  # noqa: BLE001 - the driver is gone
            pass

    threading.Thread(target=run, daemon=True).start()
    deadline = time.time() + 60
    while not any(e.get("activeTasks", 0) > 0 for e in executors(ui, app_id)):
        if time.time() > deadline:
            raise SystemExit("the tasks did not start")
        time.sleep(0.1)
    time.sleep(3)  # a few metrics reports of the running tasks
    jvm = os.getppid()
    ch.say("KILL")
    # The driver's JVM is this process's parent: once it is gone, this
    # process is another's child, and ends.
    deadline = time.time() + 120
    while os.getppid() == jvm:
        if time.time() > deadline:
            raise SystemExit("the driver was not killed")
        time.sleep(0.1)
    os._exit(0)


def worker_jobs(spark, ui, ch, out, n):
    sc = spark.sparkContext
    sc.setJobDescription("warm up")
    spark.range(0, 400_000, numPartitions=n).agg(F.sum("id")).collect()

    lose_while_busy(sc, ui, ch, out, "a worker lost", lambda e: e["hostPort"])
    sc.setJobDescription("after the loss")
    spark.range(0, 200_000, numPartitions=2).agg(F.sum("id")).collect()


def dump(ui, app_id, out):
    os.makedirs(out, exist_ok=True)
    app = "applications/" + app_id
    paths = {
        "application": app,
        "jobs": app + "/jobs",
        "stages": app + "/stages",
        "sql": app + "/sql?details=false",
        "allexecutors": app + "/allexecutors",
        "environment": app + "/environment",
    }
    for name, path in paths.items():
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump(rest(ui, path), f, indent=1, sort_keys=True)
    # The tasks that failed or were killed, by stage attempt, with Spark's
    # error messages.
    failed = {}
    for st in rest(ui, app + "/stages"):
        if st["numFailedTasks"] + st["numKilledTasks"] == 0:
            continue
        tasks = []
        for status in ("failed", "killed"):
            tasks += rest(ui, "%s/stages/%d/%d/taskList?status=%s&length=100" % (
                app, st["stageId"], st["attemptId"], status))
        failed["%d.%d" % (st["stageId"], st["attemptId"])] = tasks
    with open(os.path.join(out, "failed-tasks.json"), "w") as f:
        json.dump(failed, f, indent=1, sort_keys=True)


def main():
    with open(sys.argv[1]) as f:
        cfg = json.load(f)
    # Under spark-submit (YARN, standalone) the master and the settings are
    # spark-submit's already.
    b = SparkSession.builder.appName(cfg["app_name"])
    if cfg.get("master"):
        b = b.master(cfg["master"])
    for k, v in cfg["conf"].items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    sc = spark.sparkContext
    ui = sc.uiWebUrl.rstrip("/")
    ch = Channel(cfg["out"], cfg.get("files", False))
    ch.say("APP %s %s" % (sc.applicationId, ui))

    # Executors start after the session: wait for them, so that every job
    # has them all (dynamic allocation starts with one).
    want = int(cfg.get("executors", 2))
    if want:
        wait_executors(ui, sc.applicationId, want)

    scenario = cfg["scenario"]
    if scenario == "main":
        main_jobs(spark, cfg["out"])
    elif scenario == "failures":
        failures_jobs(spark, ui)
    elif scenario == "yarn":
        yarn_jobs(spark, ui, ch, cfg["out"])
    elif scenario == "dynamic":
        dynamic_jobs(spark, ui, ch, cfg["out"])
    elif scenario == "small":
        small_jobs(spark)
    elif scenario == "worker":
        worker_jobs(spark, ui, ch, cfg["out"], want)
    elif scenario == "cpus":
        cpus_jobs(spark)
    elif scenario == "limits":
        limits_jobs(spark, cfg["out"])
    elif scenario == "scaling":
        scaling_jobs(spark, ui)
    elif scenario == "recompute":
        recompute_jobs(spark, ui)
    elif scenario == "speculation":
        speculation_jobs(spark, ui)
    elif scenario == "skewjoin":
        skewjoin_jobs(spark)
    elif scenario == "killed":
        killed_jobs(spark, ui, ch)
    else:
        raise SystemExit("unknown scenario " + scenario)

    # A job cancelled a moment ago may still be listed as running.
    deadline = time.time() + 60
    while sc.statusTracker().getActiveJobsIds():
        if time.time() > deadline:
            raise SystemExit("jobs still active: %r" % sc.statusTracker().getActiveJobsIds())
        time.sleep(0.1)
    dump(ui, sc.applicationId, os.path.join(cfg["out"], "rest"))
    ch.say("DONE %d" % int(time.time()))
    ch.answer("stop")
    spark.stop()


if __name__ == "__main__":
    main()
