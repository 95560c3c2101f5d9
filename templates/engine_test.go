package templates_test

import (
	"strings"
	"testing"

	"github.com/sparkpulse/sparkpulse/templates"
	"github.com/sparkpulse/sparkpulse/templates/templatestest"
)

func mustCompile(tb testing.TB, tmpls []string, sep string, global []string) *templates.Engine {
	tb.Helper()
	e, err := templates.Compile(tmpls, sep, global)
	if err != nil {
		tb.Fatalf("Compile(%q, %q, %q): %v", tmpls, sep, global, err)
	}
	return e
}

// apply maps path and renders the result, or "error: <text>".
func apply(e *templates.Engine, path string, r *templates.Result) string {
	if err := e.Apply([]byte(path), r); err != nil {
		return "error: " + err.Error()
	}
	return templatestest.Format(r)
}

// cern is the template list of the CERN Spark dashboard's influxdb.conf.
var cern = []string{
	"*.*.jvm.pools.* username.applicationid.process.namespace.namespace.measurement*",
	"*.*.applicationMaster.* username.applicationid.namespace.measurement*",
	"*.shuffleService.* username.namespace.measurement*",
	"*.*.*.spark.streaming.* username.applicationid.process.namespace.namespace.id.measurement*",
	"username.applicationid.process.namespace.measurement*",
}

// Template lists whose paths take more than one case: InfluxDB issue
// 14621's (no backtracking), a filter under another with a dead end, and
// issue 5989's, the longer filter first (no inheritance).
var (
	issue14621 = []string{"system.*.loadavg measurement.host.metric", "system.foo.sensors.soc.thermal.level measurement.host.a.b.c.d"}
	deadEnd    = []string{"a.* measurement.x", "a.*.c.d measurement.y"}
	badOrder   = []string{"abc.*.worker.*.*.*.count measurement.m match=1", "abc.*.worker.* measurement.m match=2"}
)

type applyCase struct {
	name   string
	tmpls  []string
	sep    string
	global []string
	path   string
	want   string // measurement|tags|field, or "error: ..."
}

// applyCases come from InfluxDB 1.8.10's services/graphite/parser_test.go
// (named after the upstream test) and from the behaviour spec, §5–§7.
var applyCases = []applyCase{
	// TestTemplateApply
	{name: "metric only", tmpls: []string{"measurement"}, path: "cpu", want: "cpu||value"},
	{name: "single series", tmpls: []string{"measurement.hostname"}, path: "cpu.server01", want: "cpu|hostname=server01|value"},
	{name: "multiple series", tmpls: []string{"measurement.region.hostname"}, path: "cpu.us-west.server01", want: "cpu|hostname=server01,region=us-west|value"},
	{name: "multiple tags", tmpls: []string{"hostname.hostname.hostname.measurement.region"}, path: "server01.example.org.cpu.us-west", want: "cpu|hostname=server01.example.org,region=us-west|value"},
	{name: "ignore unnamed", tmpls: []string{"measurement"}, path: "foo.cpu", want: "foo||value"},
	{name: "name shorter than template", tmpls: []string{"measurement.A.B.C"}, path: "foo", want: "foo||value"},
	{name: "wildcard measurement at end", tmpls: []string{"env.zone.host.measurement*"}, path: "prod.us-west.server01.cpu.load", want: "cpu.load|env=prod,host=server01,zone=us-west|value"},
	{name: "skip fields", tmpls: []string{".zone..measurement*"}, path: "ignore.us-west.ignore-this-too.cpu.load", want: "cpu.load|zone=us-west|value"},
	{name: "conjoined fields", tmpls: []string{"env.zone.host.measurement.measurement.field*"}, path: "prod.us-west.server01.cpu.util.idle.percent", want: "cpu.util|env=prod,host=server01,zone=us-west|idle.percent"},
	// TestParse
	{name: "normal case", tmpls: []string{"measurement.foo.bar"}, path: "cpu.foo.bar", want: "cpu|bar=bar,foo=foo|value"},
	{name: "measurement* and field*", tmpls: []string{"env.zone.host.measurement*.field*"}, path: "prod.us-west.server01.cpu.util.idle.percent",
		want: `error: either 'field*' or 'measurement*' can be used in each template (but not both together): "env.zone.host.measurement*.field*"`},
	{name: "measurement* and field* joined with separator", tmpls: []string{"servers.* measurement*.field*"}, sep: "_", path: "servers.a",
		want: `error: either 'field*' or 'measurement*' can be used in each template (but not both together): "measurement*_field*"`},
	{name: "measurement* and field* fail even when unreachable", tmpls: []string{"measurement.field*.measurement*"}, path: "a",
		want: `error: either 'field*' or 'measurement*' can be used in each template (but not both together): "measurement.field*.measurement*"`},
	// TestFilterMatch*, TestParseNoMatch, TestParseDefault*, TestParseTemplateWhitespace
	{name: "TestFilterMatchDefault", tmpls: []string{"servers.localhost .host.measurement*"}, path: "miss.servers.localhost.cpu_load", want: "miss.servers.localhost.cpu_load||value"},
	{name: "TestFilterMatchMultipleMeasurement", tmpls: []string{"servers.localhost .host.measurement.measurement*"}, path: "servers.localhost.cpu.cpu_load.10", want: "cpu.cpu_load.10|host=localhost|value"},
	{name: "TestFilterMatchMultipleMeasurementSeparator", tmpls: []string{"servers.localhost .host.measurement.measurement*"}, sep: "_", path: "servers.localhost.cpu.cpu_load.10", want: "cpu_cpu_load_10|host=localhost|value"},
	{name: "TestFilterMatchSingle", tmpls: []string{"servers.localhost .host.measurement*"}, path: "servers.localhost.cpu_load", want: "cpu_load|host=localhost|value"},
	{name: "TestParseNoMatch", tmpls: []string{"servers.*.cpu .host.measurement.cpu.measurement"}, path: "servers.localhost.memory.VmallocChunk", want: "servers.localhost.memory.VmallocChunk||value"},
	{name: "TestFilterMatchWildcard", tmpls: []string{"servers.* .host.measurement*"}, path: "servers.localhost.cpu_load", want: "cpu_load|host=localhost|value"},
	{name: "TestFilterMatchExactBeforeWildcard", tmpls: []string{"servers.* .wrong.measurement*", "servers.localhost .host.measurement*"}, path: "servers.localhost.cpu_load", want: "cpu_load|host=localhost|value"},
	{name: "TestFilterMatchMostLongestFilter", tmpls: []string{
		"*.* .wrong.measurement*",
		"servers.* .wrong.measurement*",
		"servers.localhost .wrong.measurement*",
		"servers.localhost.cpu .host.resource.measurement*",
		"*.localhost .wrong.measurement*",
	}, path: "servers.localhost.cpu.cpu_load", want: "cpu_load|host=localhost,resource=cpu|value"},
	{name: "TestFilterMatchMultipleWildcards", tmpls: []string{
		"*.* .wrong.measurement*",
		"servers.* .host.measurement*",
		"servers.localhost .wrong.measurement*",
		"*.localhost .wrong.measurement*",
	}, path: "servers.server01.cpu_load", want: "cpu_load|host=server01|value"},
	{name: "TestParseDefaultTags", tmpls: []string{"servers.localhost .host.measurement*"}, global: []string{"region=us-east", "zone=1c", "host=should not set"},
		path: "servers.localhost.cpu_load", want: "cpu_load|host=localhost,region=us-east,zone=1c|value"},
	{name: "TestParseDefaultTemplateTags", tmpls: []string{"servers.localhost .host.measurement* zone=1c"}, global: []string{"region=us-east", "host=should not set"},
		path: "servers.localhost.cpu_load", want: "cpu_load|host=localhost,region=us-east,zone=1c|value"},
	{name: "TestParseDefaultTemplateTagsOverridGlobal", tmpls: []string{"servers.localhost .host.measurement* zone=1c,region=us-east"}, global: []string{"region=shot not be set", "host=should not set"},
		path: "servers.localhost.cpu_load", want: "cpu_load|host=localhost,region=us-east,zone=1c|value"},
	{name: "TestParseTemplateWhitespace", tmpls: []string{"servers.localhost        .host.measurement*           zone=1c"}, global: []string{"region=us-east", "host=should not set"},
		path: "servers.localhost.cpu_load", want: "cpu_load|host=localhost,region=us-east,zone=1c|value"},
	// TestApplyTemplate*
	{name: "TestApplyTemplate", tmpls: []string{"current.* measurement.measurement"}, sep: "_", path: "current.users", want: "current_users||value"},
	{name: "TestApplyTemplateNoMatch: built-in default joins with dot", tmpls: []string{"foo.bar measurement.measurement"}, sep: "_", path: "current.users", want: "current.users||value"},
	{name: "TestApplyTemplateSpecific", tmpls: []string{"current.* measurement.measurement", "current.*.* measurement.measurement.service"}, sep: "_",
		path: "current.users.facebook", want: "current_users|service=facebook|value"},
	{name: "TestApplyTemplateSpecificIsNA", tmpls: []string{"current.* measurement.service", "current.*.*.test measurement.measurement.service"}, sep: "_",
		path: "current.users.facebook", want: "current|service=users|value"},
	{name: "TestApplyTemplateSpecificIsNA reversed: default", tmpls: []string{"current.*.*.test measurement.measurement.service", "current.* measurement.service"}, sep: "_",
		path: "current.users.facebook", want: "current.users.facebook||value"},
	{name: "TestApplyTemplateTags", tmpls: []string{"current.* measurement.measurement region=us-west"}, sep: "_", path: "current.users", want: "current_users|region=us-west|value"},
	{name: "TestApplyTemplateField", tmpls: []string{"current.* measurement.measurement.field"}, sep: "_", path: "current.users.logged_in", want: "current_users||logged_in"},
	{name: "TestApplyTemplateFieldError", tmpls: []string{"current.* measurement.field.field"}, sep: "_", path: "current.users.logged_in",
		want: `error: 'field' can only be used once in each template: "current.users.logged_in"`},

	// Spec §5: the walk.
	{name: "parts after measurement* never used", tmpls: []string{"measurement*.host"}, path: "cpu.server01", want: "cpu.server01||value"},
	{name: "parts after field* never used", tmpls: []string{"measurement.field*.host"}, path: "cpu.a.b", want: "cpu||a.b"},
	{name: "template tag concatenated, not overridden", tmpls: []string{"measurement.host host=dflt"}, path: "cpu.server01", want: "cpu|host=dflt.server01|value"},
	{name: "template tag concatenated with separator", tmpls: []string{"measurement.host host=dflt"}, sep: "_", path: "cpu.server01", want: "cpu|host=dflt_server01|value"},
	{name: "template tag kept when its key is out of reach", tmpls: []string{"measurement.host host=dflt"}, path: "cpu", want: "cpu|host=dflt|value"},
	{name: "repeated tag key joined with separator", tmpls: []string{"host.host.measurement"}, sep: "_", path: "a.b.cpu", want: "cpu|host=a_b|value"},
	{name: "repeated measurement joined with separator", tmpls: []string{"measurement.measurement"}, sep: "_", path: "cpu.load", want: "cpu_load||value"},
	{name: "non-adjacent measurement parts", tmpls: []string{"measurement.host.measurement"}, path: "cpu.h.load", want: "cpu.load|host=h|value"},
	{name: "measurement* after measurement with separator", tmpls: []string{"measurement.x.measurement*"}, sep: "--", path: "a.b.c.d", want: "a--c--d|x=b|value"},
	{name: "multi-character separator in field*", tmpls: []string{"measurement.field*"}, sep: "::", path: "cpu.a.b.c", want: "cpu||a::b::c"},
	{name: "empty parts kept by built-in default", tmpls: nil, path: "cpu..load", want: "cpu..load||value"},
	{name: "empty parts kept by measurement*", tmpls: []string{"measurement*"}, sep: "_", path: "cpu..load", want: "cpu__load||value"},
	{name: "empty parts kept when joining", tmpls: []string{"measurement.measurement.measurement"}, path: "cpu..load", want: "cpu..load||value"},
	{name: "leading empty part", tmpls: []string{"host.measurement"}, path: ".cpu", want: "cpu||value"},
	{name: "trailing empty part", tmpls: []string{"measurement.host"}, path: "cpu.", want: "cpu||value"},
	{name: "empty tag value dropped and blocks global tag", tmpls: []string{"measurement.host.region"}, global: []string{"host=g"}, path: "cpu..us-west", want: "cpu|region=us-west|value"},
	{name: "tag key out of reach does not block global tag", tmpls: []string{"measurement.host"}, global: []string{"host=g"}, path: "cpu", want: "cpu|host=g|value"},
	{name: "two empty tag values joined are kept", tmpls: []string{"host.host.measurement"}, path: "..cpu", want: "cpu|host=.|value"},
	{name: "tag keys that look like keywords", tmpls: []string{"measurementX.value.*.measurement"}, path: "a.b.c.cpu", want: "cpu|*=c,measurementX=a,value=b|value"},
	{name: "second field out of reach", tmpls: []string{"measurement.field.field"}, path: "cpu.a", want: "cpu||a"},
	{name: "second field after an empty first", tmpls: []string{"measurement.field.field"}, path: "cpu..b", want: "cpu||b"},
	{name: "second field error", tmpls: []string{"measurement.field.field"}, path: "cpu.a.b", want: `error: 'field' can only be used once in each template: "cpu.a.b"`},
	{name: "field* replaces field", tmpls: []string{"measurement.field.field*"}, path: "cpu.a.b.c", want: "cpu||b.c"},
	{name: "field* replaces field, separator", tmpls: []string{"measurement.field.field*"}, sep: "_", path: "cpu.a.b.c", want: "cpu||b_c"},
	{name: "field* out of reach keeps field", tmpls: []string{"measurement.field.field*"}, path: "cpu.a", want: "cpu||a"},
	{name: "empty field is value", tmpls: []string{"measurement.field"}, path: "cpu.", want: "cpu||value"},
	{name: "empty field* is value", tmpls: []string{"measurement.field*"}, path: "cpu.", want: "cpu||value"},
	// Spec §7: measurement fallback.
	{name: "no measurement extracted: whole path", tmpls: []string{"host.measurement"}, path: "server01", want: "server01|host=server01|value"},
	{name: "empty measurement: whole path", tmpls: []string{"measurement.host"}, path: ".h", want: ".h|host=h|value"},
	{name: "two empty measurement parts are not empty", tmpls: []string{"measurement.measurement"}, sep: "_", path: ".", want: "_||value"},
	{name: "path keeps odd characters", tmpls: nil, path: "a,b=c;d=e", want: "a,b=c;d=e||value"},
	// Spec §6: filter matching.
	{name: "filter is a prefix match", tmpls: []string{"servers .measurement.host"}, path: "servers.cpu.h1.extra", want: "cpu|host=h1|value"},
	{name: "path shorter than filter", tmpls: []string{"servers.localhost.cpu .host.measurement"}, path: "servers.localhost", want: "servers.localhost||value"},
	{name: "filter is case-sensitive", tmpls: []string{"Servers.* .host.measurement*"}, path: "servers.h.cpu", want: "servers.h.cpu||value"},
	{name: "literal beats star at first difference", tmpls: []string{"servers.* .a.measurement*", "*.localhost .b.measurement*"}, path: "servers.localhost.x", want: "x|a=localhost|value"},
	{name: "literal beats star, other order", tmpls: []string{"*.localhost .b.measurement*", "servers.* .a.measurement*"}, path: "servers.localhost.x", want: "x|a=localhost|value"},
	{name: "14621: dead end falls to default", tmpls: issue14621,
		path: "system.foo.loadavg.1m", want: "system.foo.loadavg.1m||value"},
	{name: "14621: sibling still matches", tmpls: issue14621,
		path: "system.bar.loadavg.1m", want: "system|host=bar,metric=loadavg|value"},
	{name: "a.* + a.*.c.d: dead end", tmpls: deadEnd, path: "a.b.c.q", want: "a.b.c.q||value"},
	{name: "a.* + a.*.c.d: other part", tmpls: deadEnd, path: "a.b.x.q", want: "a|x=b|value"},
	{name: "a.* + a.*.c.d: longer filter", tmpls: deadEnd, path: "a.b.c.d", want: "a|y=b|value"},
	{name: "5989: broader listed first is inherited", tmpls: []string{"abc.*.worker.* measurement.m match=2", "abc.*.worker.*.*.*.count measurement.m match=1"},
		path: "abc.hostA.worker.bookmarks.COUNTER.bookmarks-messages", want: "abc|m=hostA,match=2|value"},
	{name: "5989: broader listed second is not", tmpls: badOrder,
		path: "abc.hostA.worker.bookmarks.COUNTER.bookmarks-messages", want: "abc.hostA.worker.bookmarks.COUNTER.bookmarks-messages||value"},
	{name: "5989: longer filter itself", tmpls: badOrder,
		path: "abc.hostA.worker.b.c.d.count", want: "abc|m=hostA,match=1|value"},
	{name: "star filter inherits nothing from root", tmpls: []string{"* .measurement"}, path: "a.b", want: "b||value"},
	{name: "user default template uses separator", tmpls: []string{"measurement.measurement"}, sep: "_", path: "a.b.c", want: "a_b||value"},
	{name: "user default template with tags", tmpls: []string{"measurement.measurement* env=prod"}, path: "a.b.c", want: "a.b.c|env=prod|value"},
	{name: "user default with filters", tmpls: []string{"servers.* .host.measurement*", "measurement.host"}, path: "other.h.x", want: "other|host=h|value"},
	// Entry forms.
	{name: "three fields with tags in the middle: middle ignored", tmpls: []string{"measurement.host a=b c=d"}, path: "cpu.h", want: "cpu|c=d,host=h|value"},
	{name: "single field keeps its white space", tmpls: []string{" host.measurement"}, path: "h.cpu", want: "cpu| host=h|value"},
	{name: "single field with = also gives tags", tmpls: []string{"host=x.measurement"}, path: "a.b", want: "b|host=x.measurement,host=x=a|value"},
	{name: "global tag: last wins", tmpls: nil, global: []string{"dc=a", "dc=b"}, path: "x", want: "x|dc=b|value"},

	// The CERN Spark dashboard's list.
	{name: "cern executor", tmpls: cern, path: "lucatest.app-20240101120000-0001.1.executor.cpuTime.count",
		want: "cpuTime.count|applicationid=app-20240101120000-0001,namespace=executor,process=1,username=lucatest|value"},
	{name: "cern jvm pools filter wants jvm at part 3", tmpls: cern, path: "lucatest.app-1.jvm.pools.G1-Eden-Space.usage",
		want: "usage|applicationid=app-1,namespace=pools.G1-Eden-Space,process=jvm,username=lucatest|value"},
	{name: "cern jvm pools after a process part: default template", tmpls: cern, path: "lucatest.app-1.driver.jvm.pools.G1-Eden-Space.usage",
		want: "pools.G1-Eden-Space.usage|applicationid=app-1,namespace=jvm,process=driver,username=lucatest|value"},
	{name: "cern jvm heap: dead end, default", tmpls: cern, path: "lucatest.app-1.driver.jvm.heap.used",
		want: "heap.used|applicationid=app-1,namespace=jvm,process=driver,username=lucatest|value"},
	{name: "cern applicationMaster", tmpls: cern, path: "lucatest.application_1_2.applicationMaster.numContainersPendingAllocate",
		want: "numContainersPendingAllocate|applicationid=application_1_2,namespace=applicationMaster,username=lucatest|value"},
	{name: "cern shuffle service", tmpls: cern, path: "host1.shuffleService.blockTransferRate.count",
		want: "blockTransferRate.count|namespace=shuffleService,username=host1|value"},
	{name: "cern streaming", tmpls: cern, path: "lucatest.app-1.driver.spark.streaming.q1.inputRate-total",
		want: "inputRate-total|applicationid=app-1,id=q1,namespace=spark.streaming,process=driver,username=lucatest|value"},
	{name: "cern separator", tmpls: cern, sep: "_", path: "lucatest.app-1.jvm.pools.G1-Eden-Space.usage",
		want: "usage|applicationid=app-1,namespace=pools_G1-Eden-Space,process=jvm,username=lucatest|value"},
	{name: "cern separator, default template", tmpls: cern, sep: "_", path: "lucatest.app-1.driver.jvm.pools.G1-Eden-Space.usage",
		want: "pools_G1-Eden-Space_usage|applicationid=app-1,namespace=jvm,process=driver,username=lucatest|value"},
}

func TestApply(t *testing.T) {
	var reused templates.Result
	for _, c := range applyCases {
		t.Run(c.name, func(t *testing.T) {
			e := mustCompile(t, c.tmpls, c.sep, c.global)
			var fresh templates.Result
			got := apply(e, c.path, &fresh)
			if got != c.want {
				t.Errorf("%q on %q (sep %q, tags %q):\n got %s\nwant %s", c.tmpls, c.path, c.sep, c.global, got, c.want)
			}
			// A reused Result must give the same answer.
			if again := apply(e, c.path, &reused); again != got {
				t.Errorf("reused Result: %s, fresh: %s", again, got)
			}
		})
	}
}

func TestApplyEmptyPath(t *testing.T) {
	var r templates.Result
	if err := mustCompile(t, nil, "", nil).Apply(nil, &r); err == nil {
		t.Fatal("empty path: no error")
	}
}

// TestApplyResultAliasing checks that results stored in a Result's own
// storage survive later stores in the same Apply.
func TestApplyResultAliasing(t *testing.T) {
	e := mustCompile(t, []string{"a.b.c.d.e.f.g.h.i.j.measurement.measurement*.field host=x,zone=y"}, "_", nil)
	var r templates.Result
	path := strings.Repeat("p.", 20) + "end"
	if err := e.Apply([]byte(path), &r); err != nil {
		t.Fatal(err)
	}
	want := templatestest.Format(&r)
	for range 3 {
		if got := apply(e, path, &r); got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	}
}

func TestApplyAllocations(t *testing.T) {
	e := mustCompile(t, cern, "", []string{"cluster=prod"})
	sepEngine := mustCompile(t, cern, "_", []string{"cluster=prod"})
	var r templates.Result
	for _, p := range benchPaths {
		path := []byte(p)
		for _, eng := range []*templates.Engine{e, sepEngine} {
			_ = eng.Apply(path, &r) // let r's storage grow
			if n := testing.AllocsPerRun(100, func() { _ = eng.Apply(path, &r) }); n != 0 {
				t.Errorf("%q: %v allocations per Apply", path, n)
			}
		}
	}
}

func TestLen(t *testing.T) {
	if n := mustCompile(t, cern, "", nil).Len(); n != 5 {
		t.Errorf("Len = %d, want 5", n)
	}
	if n := mustCompile(t, nil, "", nil).Len(); n != 0 {
		t.Errorf("Len = %d, want 0", n)
	}
}

// TestConcurrentApply lets the race detector look at shared Engine use.
func TestConcurrentApply(t *testing.T) {
	e := mustCompile(t, cern, "_", []string{"cluster=prod"})
	done := make(chan string)
	for range 4 {
		go func() {
			var r templates.Result
			var out string
			for range 100 {
				out = apply(e, benchPaths[1], &r)
			}
			done <- out
		}()
	}
	first := <-done
	for range 3 {
		if got := <-done; got != first {
			t.Errorf("got %s, want %s", got, first)
		}
	}
}
