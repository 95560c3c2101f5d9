package attempt

import (
	"testing"

	"github.com/sparkpulse/sparkpulse/realspark/recorded"
	"github.com/sparkpulse/sparkpulse/sparkapi"
)

// The error message of a failed task names its class and kind.
func TestTaskErrorClass(t *testing.T) {
	for _, tc := range []struct{ msg, status, class, kind string }{
		{"java.lang.OutOfMemoryError: Java heap space\n\tat java.util.Arrays.copyOf(Arrays.java:3236)", "FAILED", "java.lang.OutOfMemoryError", TaskOOM},
		{"java.lang.RuntimeException: got a 3, failing\n\tat $line11.$read", "FAILED", "java.lang.RuntimeException", TaskException},
		{"ExecutorLostFailure (executor 7 exited caused by one of the running tasks) Reason: Container killed by YARN for exceeding physical memory limits.", "FAILED", "ExecutorLostFailure", TaskExecutorLost},
		{"FetchFailed(BlockManagerId(3, node-3, 7337, None), shuffleId=0, mapIndex=4, mapId=12, reduceId=9, message=\norg.apache.spark.shuffle.FetchFailedException: Failed to connect", "FAILED", "FetchFailed", TaskFetchFailed},
		{"org.apache.spark.shuffle.FetchFailedException: Too large frame", "FAILED", "org.apache.spark.shuffle.FetchFailedException", TaskFetchFailed},
		{"TaskKilled (another attempt succeeded)", "KILLED", "TaskKilled", TaskKilled},
		{"org.apache.spark.SparkException: Task failed while writing rows.\nCaused by: java.lang.OutOfMemoryError: GC overhead limit exceeded", "FAILED", "org.apache.spark.SparkException caused by java.lang.OutOfMemoryError", TaskOOM},
		// A wrapper's root cause tells a full disk from a throttled store.
		{"org.apache.spark.SparkException: [TASK_WRITE_FAILED] Task failed while writing rows to s3a://bucket/out. SQLSTATE: 58030\n\tat org.apache.spark.sql.errors.QueryExecutionErrors$.taskFailedWhileWritingRowsError(QueryExecutionErrors.scala:775)\nCaused by: org.apache.hadoop.fs.s3a.AWSServiceThrottledException: put on out/part-0: Slow Down\n\tat org.apache.hadoop.fs.s3a.S3AUtils.translateException(S3AUtils.java:241)\nCaused by: software.amazon.awssdk.services.s3.model.S3Exception: Slow Down (Status Code: 503)\n\tat software.amazon.awssdk", "FAILED",
			"org.apache.spark.SparkException [TASK_WRITE_FAILED] caused by software.amazon.awssdk.services.s3.model.S3Exception", TaskException},
		{"org.apache.spark.SparkException: [TASK_WRITE_FAILED] Task failed while writing rows to file:/data/out. SQLSTATE: 58030\nCaused by: java.io.IOException: No space left on device\n\tat java.base/java.io.FileOutputStream.writeBytes(Native Method)", "FAILED",
			"org.apache.spark.SparkException [TASK_WRITE_FAILED] caused by java.io.IOException", TaskException},
		// Not a wrapper: its own class stays the class.
		{"java.lang.IllegalStateException: bad state\nCaused by: java.io.IOException: closed", "FAILED", "java.lang.IllegalStateException", TaskException},
		// Spark 3.4+ error conditions name the error; execution memory
		// that cannot be acquired is not the heap.
		{"org.apache.spark.SparkException: [FAILED_EXECUTE_UDF] User defined function (`f (UDFRegistration$$Lambda$1)`: (int) => int) failed due to: java.lang.ArithmeticException: / by zero. SQLSTATE: 39000", "FAILED", "org.apache.spark.SparkException [FAILED_EXECUTE_UDF]", TaskException},
		{"org.apache.spark.memory.SparkOutOfMemoryError: [UNABLE_TO_ACQUIRE_MEMORY] Unable to acquire 65536 bytes of memory, got 0. SQLSTATE: 53200\n\tat org.apache.spark.memory.MemoryConsumer.throwOom(MemoryConsumer.java:157)", "FAILED", "org.apache.spark.memory.SparkOutOfMemoryError [UNABLE_TO_ACQUIRE_MEMORY]", TaskExecutionMemory},
		// A Python worker's error: Python's type completes the class.
		{"org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n  File \"/opt/job.py\", line 12, in f\n    return 1 / x\nZeroDivisionError: division by zero\n\n\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:572)", "FAILED", "PythonException: ZeroDivisionError", TaskException},
		{"org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n  File \"/opt/job.py\", line 3, in g\n    d[k]\nKeyError: 'a'\n\nDuring handling of the above exception, another exception occurred:\n\nTraceback (most recent call last):\n  File \"/opt/job.py\", line 5, in g\n    raise mylib.errors.BadInput(k)\nmylib.errors.BadInput: a\n\n\tat org.apache.spark.api.python.BasePythonRunner", "FAILED", "PythonException: mylib.errors.BadInput", TaskException},
		// A Python worker gone without a Python error (3.5's and 4.x's
		// wordings): the kernel's OOM killer under a container's limit,
		// most often; one whose fault handler reported a crash of its own
		// is not that.
		{"org.apache.spark.SparkException: Python worker exited unexpectedly (crashed)\n\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator$$anonfun$1.applyOrElse(PythonRunner.scala:612)\nCaused by: java.io.EOFException\n\tat java.base/java.io.DataInputStream.readInt(DataInputStream.java:398)", "FAILED",
			"org.apache.spark.SparkException caused by java.io.EOFException", TaskPythonCrashed},
		{"org.apache.spark.SparkException: Python worker exited unexpectedly (crashed). Consider setting 'spark.sql.execution.pyspark.udf.faulthandler.enabled' or'spark.python.worker.faulthandler.enabled' configuration to 'true' for the better Python traceback.\nCaused by: java.io.EOFException", "FAILED",
			"org.apache.spark.SparkException caused by java.io.EOFException", TaskPythonCrashed},
		{"org.apache.spark.SparkException: Python worker exited unexpectedly (crashed): Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f (most recent call first):\n  File \"/opt/job.py\", line 9 in f\nCaused by: java.io.EOFException", "FAILED",
			"org.apache.spark.SparkException caused by java.io.EOFException", TaskException},
	} {
		class, kind := TaskErrorClass(tc.msg, tc.status)
		if class != tc.class || kind != tc.kind {
			t.Errorf("%.50q: %s %s, want %s %s", tc.msg, class, kind, tc.class, tc.kind)
		}
	}
}

// The failed and killed tasks of the real Spark runs (testdata/spark-real,
// see package realspark) read as what they were: the Python UDF's
// ValueError with its line, the executors lost under their tasks, the
// task that ran out of heap.
func TestTaskErrorOfRealSpark(t *testing.T) {
	for f, stages := range recorded.Answers[map[string][]sparkapi.TaskData](t, "failures/failed-tasks.json", 2) {
		seen := map[string]bool{}
		for _, tasks := range stages {
			for _, task := range tasks {
				class, kind, line := TaskError(task.ErrorMessage, task.Status)
				seen[class+" "+kind] = true
				if class == "PythonException: ValueError" && line != "ValueError: bad row 4242" {
					t.Errorf("%s: line %q", f, line)
				}
			}
		}
		for _, want := range []string{"PythonException: ValueError exception", "ExecutorLostFailure executor_lost", "java.lang.OutOfMemoryError oom"} {
			if !seen[want] {
				t.Errorf("%s: no failed task of %s among %v", f, want, seen)
			}
		}
	}
}
