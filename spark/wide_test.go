package spark

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sparkpulse/sparkpulse/delta"
	"github.com/sparkpulse/sparkpulse/realspark/recorded"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/templates"
)

// wideExamples: the wide shape of each kind of path, and the cases where
// a source's identity must not be split out.
var wideExamples = []struct{ path, want string }{
	{yarnID + ".3.executor.cpuTime.count", "executor|applicationid=" + yarnID + ",process=3|cpuTime.count"},
	{yarnID + ".3.ExecutorMetrics.JVMHeapMemory", "ExecutorMetrics|applicationid=" + yarnID + ",process=3|JVMHeapMemory"},
	{yarnID + ".3.jvm.pools.G1-Eden-Space.used", "jvm|applicationid=" + yarnID + ",process=3|pools.G1-Eden-Space.used"},
	{yarnID + ".3.jvm.pools.G1-Eden-Space.other", "jvm|applicationid=" + yarnID + ",process=3|pools.G1-Eden-Space.other"},
	{yarnID + ".3.jvm.heap.used", "jvm|applicationid=" + yarnID + ",process=3|heap.used"},
	{yarnID + ".3.plugin.ch.cern.CgroupMetrics.CPUTimeNanosec", "plugin.ch.cern.CgroupMetrics|applicationid=" + yarnID + ",process=3|CPUTimeNanosec"},
	{yarnID + ".3.plugin.ch.cern.experimental.S3ATimeInstrumentation.S3ABytesRead", "plugin.ch.cern.experimental.S3ATimeInstrumentation|applicationid=" + yarnID + ",process=3|S3ABytesRead"},
	{yarnID + ".3.plugin.com.example.metrics.rows", "plugin.com.example.metrics|applicationid=" + yarnID + ",process=3|rows"},
	{yarnID + ".3.plugin.rows", "plugin|applicationid=" + yarnID + ",process=3|rows"},
	{yarnID + ".driver.LiveListenerBus.listenerProcessingTime.org.apache.spark.status.AppStatusListener.p99",
		"LiveListenerBus|applicationid=" + yarnID + ",listener=org.apache.spark.status.AppStatusListener,process=driver|listenerProcessingTime.p99"},
	{yarnID + ".driver.LiveListenerBus.queue.appStatus.listenerProcessingTime.count",
		"LiveListenerBus|applicationid=" + yarnID + ",process=driver,queue=appStatus|queue.listenerProcessingTime.count"},
	{yarnID + ".driver.LiveListenerBus.queue.eventLog.size", "LiveListenerBus|applicationid=" + yarnID + ",process=driver,queue=eventLog|queue.size"},
	{yarnID + ".driver.LiveListenerBus.queue.shared.numDroppedEvents.count", "LiveListenerBus|applicationid=" + yarnID + ",process=driver,queue=shared|queue.numDroppedEvents.count"},
	// Not a listener's or a queue's: no identity to split out.
	{yarnID + ".driver.LiveListenerBus.numEventsPosted.count", "LiveListenerBus|applicationid=" + yarnID + ",process=driver|numEventsPosted.count"},
	{yarnID + ".driver.LiveListenerBus.listenerProcessingTime.x.y.z", "LiveListenerBus|applicationid=" + yarnID + ",process=driver|listenerProcessingTime.x.y.z"},
	{yarnID + ".driver.LiveListenerBus.queue.appStatus.other", "LiveListenerBus|applicationid=" + yarnID + ",process=driver|queue.appStatus.other"},
	{yarnID + ".driver.spark.streaming.orders_agg.inputRate-total", "spark.streaming|applicationid=" + yarnID + ",id=orders_agg,process=driver|inputRate-total"},
	{yarnID + ".driver.NightlyETL.StreamingMetrics.streaming.totalProcessedRecords", "StreamingMetrics|applicationid=" + yarnID + ",id=NightlyETL,process=driver|streaming.totalProcessedRecords"},
	{"lucatest." + yarnID + ".driver.appStatus.tasks.failedTasks.count", "appStatus|applicationid=" + yarnID + ",process=driver,username=lucatest|tasks.failedTasks.count"},
	{yarnID + ".applicationMaster.numExecutorsRunning", "applicationMaster|applicationid=" + yarnID + "|numExecutorsRunning"},
	{"application.Nightly-ETL.1717170000123.cores", "application|appname=Nightly-ETL,appstart=1717170000123|cores"},
	{"master.aliveWorkers", "master||aliveWorkers"},
	{"jvm.pools.Metaspace.used", "jvm||pools.Metaspace.used"},
	{"prod.worker.coresUsed", "worker|username=prod|coresUsed"},
	{"not.a.spark.path", "not.a.spark.path||value"},
}

// appendRecording appends the paths of the recording in dir to paths and
// the GraphiteSink prefix it used to prefixes.
func appendRecording(t *testing.T, dir string, paths, prefixes []string) ([]string, []string) {
	t.Helper()
	run := recorded.MustRun(t, dir)
	return append(paths, run.Paths(t)...), append(prefixes, run.Prefix)
}

func TestWideMapping(t *testing.T) {
	m := NewMapper(Options{Schema: schema.Wide})
	for _, c := range wideExamples {
		if got := mapPath(t, m, c.path+" 1 1717171717"); got != c.want {
			t.Errorf("%s\n got %s\nwant %s", c.path, got, c.want)
		}
	}
}

// The wide shape says what the CERN shape says: for every path of the
// examples and of the real Spark recordings, the same tags but the
// namespace (and the wide identity tags), the namespace as the
// measurement, and the CERN measurement as the field, except where an
// identity or a plugin's class moved between them.
func TestWideMatchesCERN(t *testing.T) {
	var paths []string
	for _, c := range wireExamples {
		p, _, _ := strings.Cut(c.line, " ")
		paths = append(paths, p)
	}
	for _, c := range wideExamples {
		paths = append(paths, c.path)
	}
	prefixes := []string{"lucatest"}
	for _, dir := range recordings(t) {
		paths, prefixes = appendRecording(t, dir, paths, prefixes)
	}
	cern := NewMapper(Options{Prefixes: prefixes})
	wide := NewMapper(Options{Prefixes: prefixes, Schema: schema.Wide})
	var rc, rw templates.Result
	for _, p := range paths {
		if err := cern.Apply([]byte(p), &rc); err != nil {
			t.Fatal(err)
		}
		if err := wide.Apply([]byte(p), &rw); err != nil {
			t.Fatal(err)
		}
		ns, pool := "", ""
		var tags []string
		for _, tg := range rc.Tags {
			switch string(tg.Key) {
			case "namespace":
				ns = string(tg.Value)
				continue
			case "pool": // a field's part in the wide shape
				pool = string(tg.Value)
				continue
			}
			tags = append(tags, string(tg.Key)+"="+string(tg.Value))
		}
		cernMeas := string(rc.Measurement)
		if pool != "" {
			cernMeas = strings.Replace(cernMeas, "pools.", "pools."+pool+".", 1)
		}
		var wtags []string
		ident := ""
		for _, tg := range rw.Tags {
			switch string(tg.Key) {
			case "listener", "queue":
				ident = string(tg.Value)
				continue
			}
			wtags = append(wtags, string(tg.Key)+"="+string(tg.Value))
		}
		if !slices.Equal(tags, wtags) {
			t.Errorf("%s: tags %v, CERN's %v", p, wtags, tags)
		}
		meas, field := string(rw.Measurement), string(rw.Field)
		switch {
		case ns == "":
			if meas != cernMeas || field != "value" {
				t.Errorf("%s: not Spark's, yet %s %s", p, meas, field)
			}
		case ns == "plugin":
			if meas+"."+field != "plugin."+cernMeas && (meas != "plugin" || field != cernMeas) {
				t.Errorf("%s: %s %s, CERN's %s", p, meas, field, rc.Measurement)
			}
		case ident != "":
			if meas != ns || strings.Replace(cernMeas, "."+ident, "", 1) != field {
				t.Errorf("%s: %s %s for %s", p, meas, field, rc.Measurement)
			}
		default:
			if meas != ns || field != cernMeas {
				t.Errorf("%s: %s %s, CERN's %s namespace=%s", p, meas, field, rc.Measurement, ns)
			}
		}
	}
}

// The catalogue's metrics are where each schema's mapping puts them.
func TestSchemaCatalogue(t *testing.T) {
	for _, m := range []schema.Metric{schema.SucceededTasks, schema.CPUTime, schema.RunTime, schema.JVMGCTime, schema.BytesRead, schema.ShuffleRead, schema.ShuffleWritten,
		schema.ActiveTasks, schema.CgroupCPU, schema.JVMHeapMemory, schema.JVMRSSMemory, schema.PythonRSSMemory, schema.OtherRSSMemory} {
		path := []byte(yarnID + ".3." + m.Source + "." + m.Name)
		for _, s := range []schema.Shape{schema.CERN, schema.Wide} {
			var r templates.Result
			if err := NewMapper(Options{Schema: s}).Apply(path, &r); err != nil {
				t.Fatal(err)
			}
			ns := ""
			for _, tg := range r.Tags {
				if string(tg.Key) == "namespace" {
					ns = string(tg.Value)
				}
			}
			if string(r.Measurement) != s.Measurement(m) || string(r.Field) != s.Field(m) || ns != s.Namespace(m) {
				t.Errorf("%s %v: mapped to %s %s namespace=%q, the catalogue says %s %s %q", s, m,
					r.Measurement, r.Field, ns, s.Measurement(m), s.Field(m), s.Namespace(m))
			}
		}
	}
	for _, name := range []string{"", "wide", "cern"} {
		if _, err := schema.ParseShape(name); err != nil {
			t.Error(err)
		}
	}
	if _, err := schema.ParseShape("narrow"); err == nil || !strings.Contains(err.Error(), `"narrow"`) {
		t.Errorf("ParseSchema(narrow): %v", err)
	}
}

// maxColumns is the columns per table of InfluxDB 3 Cloud Dedicated and
// Clustered by default; InfluxDB 3 Core allows 500.
const maxColumns = 250

// WideColumns counts the columns of each wide table (tags, fields with
// the delta and rate fields of cumulative series, and time) for the
// metric sets of the real Spark recordings and the documented paths, and
// fails when one passes maxColumns or there are more than 40 tables.
func TestWideColumns(t *testing.T) {
	rules, err := delta.CompileRules(DeltaRules())
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range append(recordings(t), "all") {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			var paths []string
			prefixes := []string{"lucatest", "spark.prod"}
			if dir == "all" {
				paths = readLines(t, filepath.Join("testdata", "spark-paths.txt"))
				for _, d := range recordings(t) {
					paths, prefixes = appendRecording(t, d, paths, prefixes)
				}
			} else {
				paths, prefixes = appendRecording(t, dir, paths, prefixes)
			}
			m := NewMapper(Options{Prefixes: prefixes, Schema: schema.Wide})
			tables := map[string]map[string]bool{}
			var r templates.Result
			for _, p := range paths {
				p, _, _ = strings.Cut(p, " ")
				if err := m.Apply([]byte(p), &r); err != nil {
					t.Fatal(err)
				}
				if bytes.Equal(r.Field, []byte("value")) && len(r.Tags) == 0 {
					continue // not a Spark path
				}
				cols := tables[string(r.Measurement)]
				if cols == nil {
					cols = map[string]bool{"time": true}
					tables[string(r.Measurement)] = cols
				}
				for _, tg := range r.Tags {
					cols["tag "+string(tg.Key)] = true
				}
				cols[string(r.Field)] = true
				if cum, _ := rules.Match([]byte(p), r.Field); cum {
					cols[string(r.Field)+"_delta"] = true
					cols[string(r.Field)+"_rate"] = true
				}
			}
			var report []string
			for name, cols := range tables {
				report = append(report, fmt.Sprintf("%s=%d", name, len(cols)))
				if len(cols) > maxColumns {
					t.Errorf("table %s has %d columns, more than %d", name, len(cols), maxColumns)
				}
			}
			slices.Sort(report)
			if len(tables) > 40 {
				t.Errorf("%d tables", len(tables))
			}
			t.Logf("%d tables: %s", len(tables), strings.Join(report, " "))
		})
	}
}
