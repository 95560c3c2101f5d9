package attempt

import (
	"regexp"
	"strings"

	"github.com/sparkpulse/sparkpulse/sizing"
)

// Kinds of task failure.
const (
	TaskOOM             = "oom"              // java.lang.OutOfMemoryError in the task: the heap
	TaskExecutionMemory = "execution_memory" // SparkOutOfMemoryError: execution memory could not be acquired, not the heap
	TaskFetchFailed     = "fetch_failed"     // shuffle data could not be fetched (a lost executor's output)
	TaskExecutorLost    = "executor_lost"    // the executor died under it
	TaskKilled          = "killed"           // killed: a speculative copy lost, a job cancelled
	// TaskPythonCrashed: the task's Python worker ended without a Python
	// error (PythonRunner: "Python worker exited unexpectedly (crashed)",
	// with no fault handler's report of its own): a signal, which under a
	// container's memory limit (YARN with cgroups, Kubernetes) is usually
	// the kernel's OOM killer taking the largest process.
	TaskPythonCrashed = "python_crashed"
	TaskException     = "exception" // any other exception
)

var (
	exceptionClassRE = regexp.MustCompile(`^([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*)(?::|$)`)
	// Spark 3.4+ names its errors: "org.apache.spark.SparkException:
	// [FAILED_EXECUTE_UDF] …" (common/utils error-conditions.json).
	errorConditionRE = regexp.MustCompile(`^[^:\s]+: \[([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)\]`)
	pythonTypeRE     = regexp.MustCompile(`^([A-Za-z_][\w.]*)(?::|$)`)
)

// pythonException is how PySpark reports an error of a Python worker: its
// first line is "…PythonException: Traceback (most recent call last):",
// and Python's own exception is the last unindented line of the
// traceback, before the JVM's stack.
const pythonException = "org.apache.spark.api.python.PythonException"

// TaskErrorClass reads a failed task's error message (Spark's errorMessage)
// as the exception class, or Spark's name for the end reason, and a kind.
func TaskErrorClass(msg, status string) (class, kind string) {
	class, kind, _ = TaskError(msg, status)
	return class, kind
}

// TaskError is TaskErrorClass with the line that says what went wrong:
// the message's first line, or for a Python worker's error Python's
// exception ("ValueError: bad row 42"), whose type then completes the
// class ("PythonException: ValueError"), so that Python errors of
// different types are not one row.
func TaskError(msg, status string) (class, kind, line string) {
	first := strings.TrimSpace(firstLine(msg))
	line = first
	switch {
	case strings.HasPrefix(first, "ExecutorLostFailure"):
		class, kind = "ExecutorLostFailure", TaskExecutorLost
	case strings.HasPrefix(first, "FetchFailed"):
		class, kind = "FetchFailed", TaskFetchFailed
	case strings.HasPrefix(first, "TaskKilled"), strings.HasPrefix(first, "TaskCommitDenied"), status == "KILLED":
		class, kind = strings.Fields(first + " TaskKilled")[0], TaskKilled
	case strings.HasPrefix(first, pythonException):
		class, kind = "PythonException", TaskException
		if py := pythonError(msg); py != "" {
			line = py
			class += ": " + pythonTypeRE.FindStringSubmatch(py)[1]
		}
		return class, kind, line
	default:
		if m := exceptionClassRE.FindStringSubmatch(first); m != nil {
			class = m[1]
		}
		wrapper := class == "org.apache.spark.SparkException"
		if m := errorConditionRE.FindStringSubmatch(first); m != nil {
			class += " [" + m[1] + "]"
			wrapper = true
		}
		// Spark wraps what failed a write or a stage ("[TASK_WRITE_FAILED]
		// Task failed while writing rows"): the root cause, the last
		// "Caused by:", says what it was (a full disk, a throttled object
		// store) and tells such failures apart.
		if root := rootCause(msg); wrapper && root != "" {
			if m := exceptionClassRE.FindStringSubmatch(root); m != nil {
				class += " caused by " + m[1]
			}
			line += "; caused by: " + root
		}
		kind = TaskException
	}
	switch {
	case strings.Contains(msg, "SparkOutOfMemoryError"):
		kind = TaskExecutionMemory
	case strings.Contains(msg, "OutOfMemoryError"):
		kind = TaskOOM
	case strings.Contains(class, "FetchFailedException"):
		kind = TaskFetchFailed
	case sizing.PythonWorkerCrashed(msg):
		kind = TaskPythonCrashed
	}
	return class, kind, line
}

// rootCause is the last "Caused by:" line of a JVM stack trace, without
// its prefix; "" when there is none.
func rootCause(msg string) string {
	const causedBy = "\nCaused by: "
	i := strings.LastIndex(msg, causedBy)
	if i < 0 {
		return ""
	}
	return strings.TrimSpace(firstLine(msg[i+len(causedBy):]))
}

// pythonError is the last exception line of the Python traceback in a
// PythonException's message: unindented, "Type: text" or "Type", before
// the JVM's stack ("\tat …") begins.
func pythonError(msg string) string {
	var last string
	for i, l := range strings.Split(msg, "\n") {
		if i == 0 {
			continue
		}
		if strings.HasPrefix(l, "\tat ") {
			break
		}
		l = strings.TrimRight(l, "\r ")
		if l == "" || l[0] == ' ' || l[0] == '\t' || strings.HasPrefix(l, "Traceback ") ||
			strings.HasPrefix(l, "During handling") || strings.HasPrefix(l, "The above exception") {
			continue
		}
		if pythonTypeRE.MatchString(l) {
			last = l
		}
	}
	return last
}

// firstLine is s's first line, without the white space around it.
func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(line)
}
