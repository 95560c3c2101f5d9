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
"""

import json
import os
import signal
import sys
import time
import urllib.request

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType


def log(msg):
    print("workload: " + msg, file=sys.stderr, flush=True)


def rest(ui, path):
    with urllib.request.urlopen(ui + "/api/v1/" + path, timeout=30) as r:
        return json.load(r)


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
    pid = executor_pid(app_id, "1")
    if pid is None:
        raise SystemExit("executor 1 not found")
    os.kill(pid, signal.SIGKILL)
    log("killed executor 1 (pid %d)" % pid)
    t.join()
    if result.get("n") != 40_000:
        raise SystemExit("the job with the killed executor counted %r" % result.get("n"))

    # A 1.5 GB string in a 512 MB heap: java.lang.OutOfMemoryError, and the
    # executor exits; the task's retry kills another and the job fails.
    sc.setJobDescription("heap out of memory")
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

    sc.setJobDescription("after the losses")
    spark.range(0, 200_000, numPartitions=4).agg(F.sum("id")).collect()


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
    b = SparkSession.builder.master(cfg["master"]).appName(cfg["app_name"])
    for k, v in cfg["conf"].items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    sc = spark.sparkContext
    ui = sc.uiWebUrl.rstrip("/")
    print("APP %s %s" % (sc.applicationId, ui), flush=True)

    # local-cluster starts its executors after the session: wait for them,
    # so that every job has both.
    want = int(cfg.get("executors", 2))
    deadline = time.time() + 120
    while len([e for e in rest(ui, "applications/%s/executors" % sc.applicationId) if e["id"] != "driver"]) < want:
        if time.time() > deadline:
            raise SystemExit("executors did not register")
        time.sleep(0.2)

    if cfg["scenario"] == "main":
        main_jobs(spark, cfg["out"])
    elif cfg["scenario"] == "failures":
        failures_jobs(spark, ui)
    else:
        raise SystemExit("unknown scenario " + cfg["scenario"])

    # A job cancelled a moment ago may still be listed as running.
    deadline = time.time() + 60
    while sc.statusTracker().getActiveJobsIds():
        if time.time() > deadline:
            raise SystemExit("jobs still active: %r" % sc.statusTracker().getActiveJobsIds())
        time.sleep(0.1)
    dump(ui, sc.applicationId, os.path.join(cfg["out"], "rest"))
    print("DONE %d" % int(time.time()), flush=True)
    sys.stdin.readline()
    spark.stop()


if __name__ == "__main__":
    main()
