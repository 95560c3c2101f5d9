package delta

import (
	"errors"
	"strings"
	"testing"
)

func mustCompile(t testing.TB, rules []Rule) *Rules {
	t.Helper()
	r, err := CompileRules(rules)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestMatch(t *testing.T) {
	rules := []Rule{
		/* 0 */ {Path: []string{"**.shuffleService.{numActiveConnections,numRegisteredConnections,deferredBlockBytes}.count"}, Cumulative: false},
		/* 1 */ {Path: []string{"**.executor.*.count"}, Cumulative: true, Unit: "mixed"},
		/* 2 */ {Path: []string{"**.ExecutorMetrics.{MinorGCCount,MajorGCCount}"}, Cumulative: true},
		/* 3 */ {Path: []string{"app.*.JVMCPU.jvmCpuTime"}, Cumulative: true, Unit: "ns"},
		/* 4 */ {Path: []string{"**.count"}, Cumulative: true},
		/* 5 */ {Measurement: []string{"{spark_executor,spark_driver}"}, Cumulative: false},
		/* 6 */ {Measurement: []string{"spark_executor"}, Path: []string{"never.matches"}, Cumulative: true},
		/* 7 */ {Path: []string{"*.*"}, Measurement: []string{"{cpu,mem}.used"}, Cumulative: true},
	}
	r := mustCompile(t, rules)
	if r.Len() != len(rules) {
		t.Errorf("Len %d", r.Len())
	}
	for _, tc := range []struct {
		path, meas string
		cum        bool
		rule       int
	}{
		// ** matches a suffix, with any number of leading segments.
		{"ns.17.executor.cpuTime.count", "", true, 1},
		{"executor.cpuTime.count", "", true, 1},
		{"a.b.c.d.executor.runTime.count", "", true, 1},
		{"xexecutor.cpuTime.count", "", true, 4}, // segments, not text
		{"ns.executor.cpuTime.count.m1_rate", "", false, -1},
		// An exception listed first wins.
		{"ns.shuffleService.numActiveConnections.count", "", false, 0},
		{"ns.shuffleService.numCaughtExceptions.count", "", true, 4},
		// {a,b} as the last segment.
		{"ns.1.ExecutorMetrics.MajorGCCount", "", true, 2},
		{"ns.1.ExecutorMetrics.MajorGCTime", "", false, -1},
		// Anchored: the whole path, * exactly one segment.
		{"app.17.JVMCPU.jvmCpuTime", "", true, 3},
		{"x.app.17.JVMCPU.jvmCpuTime", "", false, -1},
		{"app.JVMCPU.jvmCpuTime", "", false, -1},
		{"app.1.2.JVMCPU.jvmCpuTime", "", false, -1},
		// Measurement patterns; the first rule by order wins across both.
		{"", "spark_executor", false, 5},
		{"ns.executor.cpuTime.count", "spark_executor", true, 1},
		{"a.b", "spark_driver", false, 5},
		{"a.b", "other", true, 7},
		{"a.b.c", "mem.used", true, 7},
		{"a.b.c", "mem.free", false, -1},
		{"a", "cpu", false, -1},
		// Empty inputs match nothing.
		{"", "", false, -1},
		{".", "", true, 7}, // two empty segments
	} {
		cum, rule := r.Match([]byte(tc.path), []byte(tc.meas))
		if cum != tc.cum || rule != tc.rule {
			t.Errorf("Match(%q, %q) = %v, %d; want %v, %d", tc.path, tc.meas, cum, rule, tc.cum, tc.rule)
		}
	}
}

func TestMatchNoRules(t *testing.T) {
	r := mustCompile(t, nil)
	if cum, rule := r.Match([]byte("a.b"), []byte("m")); cum || rule != -1 || r.Len() != 0 {
		t.Errorf("no rules: %v, %d", cum, rule)
	}
}

func TestCompileRulesErrors(t *testing.T) {
	for _, tc := range []struct {
		pattern, want string
	}{
		{"", "empty pattern"},
		{"a..b", "empty segment"},
		{".a", "empty segment"},
		{"a.", "empty segment"},
		{"a.b*", `partial wildcard in segment "b*"`},
		{"*a.b", `partial wildcard in segment "*a"`},
		{"a.**", "'**' is only allowed as the first segment"},
		{"a.**.b", "'**' is only allowed as the first segment"},
		{"**", "'**' must be followed by a segment"},
		{"***.a", `partial wildcard in segment "***"`},
		{"a.{b,c", "'{' without '}'"},
		{"a.bc}", "'}' without '{'"},
		{"a.{b,{c}}", "nested '{'"},
		{"a.{b.c,d}", "'.' inside {…}"},
		{"a.{b,}", `empty alternative in "{b,}"`},
		{"a.{}", `empty alternative in "{}"`},
		{"a.{b*,c}", `wildcard in alternative "b*"`},
		{"a.x{b,c}", `{…} must be a whole segment, not part of "x{b,c}"`},
		{"a,b", "',' outside {…}"},
		{"a.b?", `'?' is not supported`},
		{"a.[bc]", `'[' is not supported`},
		{"a. b", "contains white space or a control character"},
		{"a.b\t", "contains white space or a control character"},
	} {
		_, err := CompileRules([]Rule{{Path: []string{"ok.*"}, Source: "src"}, {Path: []string{tc.pattern}, Source: "[[delta]] #2"}})
		want := `[[delta]] #2: path pattern "` + strings.ReplaceAll(tc.pattern, "\t", `\t`) + `": ` + tc.want
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("pattern %q: error %v, want %q", tc.pattern, err, want)
		}
	}
	for _, ok := range []string{"*", "**.*", "a", "{a}", "{a,a}.b", "**.{x,y}", "a-b_c:d"} {
		if _, err := CompileRules([]Rule{{Measurement: []string{ok}}}); err != nil {
			t.Errorf("pattern %q: %v", ok, err)
		}
	}
}

// TestCompileRulesAllErrors: every problem is reported, each naming its
// rule and pattern.
func TestCompileRulesAllErrors(t *testing.T) {
	_, err := CompileRules([]Rule{
		{Path: []string{"a.b*", "ok.*"}, Measurement: []string{"m.**"}, Source: "[[delta]] #1"},
		{Cumulative: true, Source: "built-in Spark rules"},
		{Path: []string{"fine"}},
		{Path: []string{"x..y"}}, // no Source
	})
	if err == nil {
		t.Fatal("no error")
	}
	want := []string{
		`[[delta]] #1: path pattern "a.b*": partial wildcard`,
		`[[delta]] #1: measurement pattern "m.**": '**' is only allowed`,
		`built-in Spark rules: no Path or Measurement pattern`,
		`rule #4: path pattern "x..y": empty segment`,
	}
	if got := strings.Split(err.Error(), "\n"); len(got) != len(want) {
		t.Errorf("%d errors, want %d:\n%v", len(got), len(want), err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not say %q:\n%v", w, err)
		}
	}
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) || len(joined.Unwrap()) != 4 {
		t.Errorf("not an errors.Join of 4: %T", err)
	}
}

// benchRules resembles Spark's built-in rules: about 20 patterns, most
// ending in a literal, a few in *.
func benchRules(t testing.TB) *Rules {
	return mustCompile(t, []Rule{
		{Path: []string{"**.shuffleService.{numActiveConnections,numRegisteredConnections,deferredBlockBytes}.count"}},
		{Path: []string{"**.executor.{cpuTime,deserializeCpuTime,shuffleWriteTime}.count"}, Cumulative: true, Unit: "ns"},
		{Path: []string{"**.executor.{runTime,deserializeTime,resultSerializationTime,jvmGCTime,shuffleFetchWaitTime}.count"}, Cumulative: true, Unit: "ms"},
		{Path: []string{"**.executor.{bytesRead,bytesWritten,resultSize,diskBytesSpilled,memoryBytesSpilled,shuffleBytesWritten,shuffleTotalBytesRead,shuffleRemoteBytesRead,shuffleLocalBytesRead}.count"}, Cumulative: true, Unit: "bytes"},
		{Path: []string{"**.executor.{recordsRead,recordsWritten,shuffleRecordsRead,shuffleRecordsWritten}.count"}, Cumulative: true},
		{Path: []string{"**.executor.threadpool.{completeTasks,startedTasks}"}, Cumulative: true},
		{Path: []string{"**.executor.filesystem.*.{read_bytes,write_bytes}"}, Cumulative: true, Unit: "bytes"},
		{Path: []string{"**.executor.filesystem.*.{read_ops,largeRead_ops,write_ops}"}, Cumulative: true},
		{Path: []string{"**.ExecutorMetrics.{MinorGCCount,MajorGCCount,ConcurrentGCCount}"}, Cumulative: true},
		{Path: []string{"**.ExecutorMetrics.{MinorGCTime,MajorGCTime,TotalGCTime,ConcurrentGCTime}"}, Cumulative: true, Unit: "ms"},
		{Path: []string{"**.JVMCPU.jvmCpuTime"}, Cumulative: true, Unit: "ns"},
		{Path: []string{"**.jvm.*.count"}, Cumulative: true},
		{Path: []string{"**.jvm.*.time"}, Cumulative: true, Unit: "ms"},
		{Path: []string{"**.appStatus.*.count"}, Cumulative: true},
		{Path: []string{"**.LiveListenerBus.numEventsPosted.count"}, Cumulative: true},
		{Path: []string{"**.LiveListenerBus.queue.*.numDroppedEvents.count"}, Cumulative: true},
		{Path: []string{"**.HiveExternalCatalog.*.count"}, Cumulative: true},
		{Path: []string{"**.DAGScheduler.job.allJobs"}, Cumulative: true},
		{Path: []string{"**.StreamingMetrics.streaming.{totalCompletedBatches,totalReceivedRecords,totalProcessedRecords}"}, Cumulative: true},
		{Path: []string{"**.*.{m1_rate,m5_rate,m15_rate,mean_rate,p50,p75,p95,p98,p99,p999,min,max,mean,stddev}"}},
		{Path: []string{"**.count"}, Cumulative: true},
	})
}

var benchPaths = []string{
	"spark.app-20240101123456-0001.17.executor.shuffleRemoteBytesRead.count", // 70 bytes, rule 3
	"spark.app-20240101123456-0001.17.ExecutorMetrics.JVMHeapMemoryUsage",    // no rule
	"spark.app-20240101123456-0001.driver.jvm.G1-Young-Generation.count",     // rule 11, after a wildcard
	"spark.app-20240101123456-0001.17.executor.filesystem.hdfs.read_bytes",   // rule 6
}

func TestMatchAllocs(t *testing.T) {
	r := benchRules(t)
	want := []int{3, -1, 11, 6}
	for i, p := range benchPaths {
		if _, rule := r.Match([]byte(p), []byte("spark_executor")); rule != want[i] {
			t.Errorf("%s: rule %d, want %d", p, rule, want[i])
		}
		if a := testing.AllocsPerRun(100, func() { r.Match([]byte(p), []byte("spark_executor")) }); a != 0 {
			t.Errorf("%s: %v allocs", p, a)
		}
	}
}

func BenchmarkMatch(b *testing.B) {
	r := benchRules(b)
	for i, p := range benchPaths {
		path := []byte(p)
		b.Run([]string{"literal", "nomatch", "wildcard", "alt"}[i], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r.Match(path, nil)
			}
		})
	}
}
