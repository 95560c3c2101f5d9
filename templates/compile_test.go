package templates_test

import (
	"strings"
	"testing"

	"github.com/sparkpulse/sparkpulse/templates"
)

// compileErrorCases come from InfluxDB 1.8.10's services/graphite
// config_test.go and parser_test.go, with influxd's messages.
var compileErrorCases = []struct {
	name   string
	tmpls  []string
	global []string
	want   []string // the joined error, line by line
}{
	{name: "empty template", tmpls: []string{""},
		want: []string{`template 1 "": missing template at position: 0`}},
	{name: "blank template", tmpls: []string{"measurement*", "     "},
		want: []string{`template 2 "     ": missing template at position: 1`}},
	{name: "too many fields", tmpls: []string{"a measurement b c"},
		want: []string{`template 1 "a measurement b c": invalid template format: 'a measurement b c'`}},
	{name: "partial measurement", tmpls: []string{"*measurement"},
		want: []string{"template 1 \"*measurement\": no measurement in template `*measurement`"}},
	{name: "no measurement", tmpls: []string{".host.region"},
		want: []string{"template 1 \".host.region\": no measurement in template `.host.region`"}},
	{name: "measurement prefix is not enough", tmpls: []string{"measurementX.host"},
		want: []string{"template 1 \"measurementX.host\": no measurement in template `measurementX.host`"}},
	{name: "parser-only template: no measurement", tmpls: []string{"a.b.c"},
		want: []string{"template 1 \"a.b.c\": no measurement in template `a.b.c`"}},
	{name: "single field keeps its white space", tmpls: []string{" measurement*"},
		want: []string{"template 1 \" measurement*\": no measurement in template ` measurement*`"}},
	{name: "filter leading blank section", tmpls: []string{".server measurement*"},
		want: []string{`template 1 ".server measurement*": filter contains blank section: .server`}},
	{name: "filter split by white space", tmpls: []string{".    .server measurement*"},
		want: []string{
			"template 1 \".    .server measurement*\": no measurement in template `.server`",
			`template 1 ".    .server measurement*": filter contains blank section: .`,
			`template 1 ".    .server measurement*": invalid template tags: 'measurement*'`,
		}},
	{name: "filter trailing blank section", tmpls: []string{"spark.* .app.measurement*", "spark. .app.measurement*"},
		want: []string{`template 2 "spark. .app.measurement*": filter contains blank section: spark.`}},
	{name: "filter partial wildcard", tmpls: []string{"server* measurement*"},
		want: []string{`template 1 "server* measurement*": invalid filter wildcard section: server*`}},
	{name: "tags without =", tmpls: []string{"*.server measurement* foo"},
		want: []string{`template 1 "*.server measurement* foo": invalid template tags: 'foo'`}},
	{name: "tags with two =", tmpls: []string{"*.server measurement* foo=bar="},
		want: []string{`template 1 "*.server measurement* foo=bar=": invalid template tags: 'foo=bar='`}},
	{name: "tags with empty element", tmpls: []string{"*.server measurement* foo=bar,"},
		want: []string{`template 1 "*.server measurement* foo=bar,": invalid template tags: ''`}},
	{name: "tags with empty key and value", tmpls: []string{"*.server measurement* ="},
		want: []string{`template 1 "*.server measurement* =": invalid template tags: ='`}},
	{name: "tags with empty value", tmpls: []string{"measurement* a=b,c="},
		want: []string{`template 1 "measurement* a=b,c=": invalid template tags: c='`}},
	{name: "duplicate filter", tmpls: []string{"foo measurement*", "foo .host.measurement"},
		want: []string{`template 2 "foo .host.measurement": duplicate filter 'foo' found at position: 1`}},
	{name: "duplicate default template", tmpls: []string{"measurement*", ".host.measurement"},
		want: []string{`template 2 ".host.measurement": duplicate filter '' found at position: 1`}},
	{name: "duplicate default template with tags", tmpls: []string{"measurement* a=b", "measurement* c=d"},
		want: []string{`template 2 "measurement* c=d": duplicate filter '' found at position: 1`}},
	{name: "global tag without =", global: []string{"foo"},
		want: []string{`tags entry 1 "foo": invalid template tags: 'foo'`}},
	{name: "global tag with two =", global: []string{"foo=bar="},
		want: []string{`tags entry 1 "foo=bar=": invalid template tags: 'foo=bar='`}},
	{name: "global tag empty", global: []string{"foo=bar", ""},
		want: []string{`tags entry 2 "": invalid template tags: ''`}},
	{name: "global tag =", global: []string{"="},
		want: []string{`tags entry 1 "=": invalid template tags: ='`}},
	{name: "single field with = and a bare element", tmpls: []string{"a,host=x.measurement"},
		want: []string{`template 1 "a,host=x.measurement": tag element "a" read from the template is malformed (influxd crashes on it or writes an empty tag key)`}},
	{name: "every problem reported", tmpls: []string{"spark.* .app.measurement*", "spark.* .app.measurement*", "a*. host foo", ""}, global: []string{"x"},
		want: []string{
			`template 2 "spark.* .app.measurement*": duplicate filter 'spark.*' found at position: 1`,
			"template 3 \"a*. host foo\": no measurement in template `host`",
			`template 3 "a*. host foo": filter contains blank section: a*.`,
			`template 3 "a*. host foo": invalid filter wildcard section: a*.`,
			`template 3 "a*. host foo": invalid template tags: 'foo'`,
			`template 4 "": missing template at position: 3`,
			`tags entry 1 "x": invalid template tags: 'x'`,
		}},
}

func TestCompileErrors(t *testing.T) {
	for _, c := range compileErrorCases {
		t.Run(c.name, func(t *testing.T) {
			e, err := templates.Compile(c.tmpls, "", c.global)
			if err == nil {
				t.Fatalf("Compile(%q, %q): no error", c.tmpls, c.global)
			}
			if e != nil {
				t.Error("Engine returned with an error")
			}
			if got, want := err.Error(), strings.Join(c.want, "\n"); got != want {
				t.Errorf("Compile(%q, %q):\n got %s\nwant %s", c.tmpls, c.global, got, want)
			}
		})
	}
}

func TestCompileAccepts(t *testing.T) {
	for _, tmpls := range [][]string{
		nil,
		{"servers.* .host.measurement*"}, // TestConfig_Parse
		cern,
		{"measurement*.field*"}, // fails per line, not at start-up
		{"a=b measurement"},     // "=" in a filter is a literal
		{"measurement* a=b"},
		{"* measurement", "*.* measurement", "a.* measurement", "measurement"},
	} {
		if _, err := templates.Compile(tmpls, "", []string{"region=us-east"}); err != nil {
			t.Errorf("Compile(%q): %v", tmpls, err)
		}
	}
}

func TestParseTags(t *testing.T) {
	tags, err := templates.ParseTags([]string{"a=1", "b=2", "a=3"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tg := range tags {
		got = append(got, string(tg.Key)+"="+string(tg.Value))
	}
	if strings.Join(got, ",") != "a=3,b=2" {
		t.Errorf("ParseTags = %q", got)
	}
	if _, err := templates.ParseTags([]string{"a"}); err == nil || err.Error() != "invalid template tags: 'a'" {
		t.Errorf("ParseTags(a): %v", err)
	}
}

func TestWarnings(t *testing.T) {
	for _, c := range []struct {
		name  string
		tmpls []string
		want  []string
	}{
		{name: "none", tmpls: []string{"servers.* .host.measurement*", "servers.localhost .host.measurement*", "*.localhost .x.measurement*", "measurement*"}},
		{name: "14621: no backtracking", tmpls: issue14621,
			want: []string{`template 1 "system.*.loadavg measurement.host.metric": paths with "foo" at part 2 go to the branch of template 2 "system.foo.sensors.soc.thermal.level" and get the default template instead (InfluxDB 1.x does not backtrack)`}},
		{name: "a.* + a.*.c.d", tmpls: deadEnd,
			want: []string{`template 1 "a.* measurement.x": paths with "c" at part 3 go to the branch of template 2 "a.*.c.d" and get the default template instead (InfluxDB 1.x does not backtrack)`}},
		{name: "5989: inheritance, good order", tmpls: []string{"abc.*.worker.* measurement.m match=2", "abc.*.worker.*.*.*.count measurement.m match=1"}},
		{name: "5989: inheritance, bad order", tmpls: badOrder,
			want: []string{"template 2 \"abc.*.worker.* measurement.m match=2\": paths with more than 4 parts go to the branch of template 1 \"abc.*.worker.*.*.*.count\" and get the default template instead (a `*` node copies its parent's template only when created, and template 1 created this branch first; list this template before it)"}},
		{name: "SpecificIsNA reversed", tmpls: []string{"current.*.*.test measurement.measurement.service", "current.* measurement.service"},
			want: []string{"template 2 \"current.* measurement.service\": paths with more than 2 parts go to the branch of template 1 \"current.*.*.test\" and get the default template instead (a `*` node copies its parent's template only when created, and template 1 created this branch first; list this template before it)"}},
		{name: "stale inherited template", tmpls: []string{"a measurement", "a.*.*.d measurement", "a.* measurement"},
			want: []string{"template 3 \"a.* measurement\": paths with more than 2 parts go to the branch of template 2 \"a.*.*.d\" and get template 1 \"a\" instead (a `*` node copies its parent's template only when created, and template 2 created this branch first; list this template before it)"}},
		{name: "literal beats star is intended", tmpls: []string{"a.b measurement", "a.b.*.z measurement", "a.*.* measurement"}},
		{name: "cern", tmpls: cern, want: []string{
			`template 4 "*.*.*.spark.streaming.* username.applicationid.process.namespace.namespace.id.measurement*": paths with "jvm" at part 3 go to the branch of template 1 "*.*.jvm.pools.*" and get the default template instead (InfluxDB 1.x does not backtrack)`,
		}},
		{name: "unused parts and failing templates", tmpls: []string{"a measurement*.host", "b measurement.field*.", "c measurement*.x.field*"}, want: []string{
			`template 1 "a measurement*.host": parts after "measurement*" are never used: host`,
			`template 3 "c measurement*.x.field*": every line it selects fails: either 'field*' or 'measurement*' can be used in each template (but not both together): "measurement*.x.field*"`,
		}},
		{name: "odd entry forms", tmpls: []string{"measurement.host a=b c=d"}, want: []string{
			`template 1 "measurement.host a=b c=d": its second field "a=b" is ignored: influxd reads it as neither filter nor tags`,
		}},
		{name: "single field with =", tmpls: []string{"host=x.measurement"}, want: []string{
			`template 1 "host=x.measurement": it has no white space, yet influxd also reads it as per-template tags: host=x.measurement`,
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := mustCompile(t, c.tmpls, "", nil)
			got := e.Warnings()
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("Warnings(%q):\n got %q\nwant %q", c.tmpls, got, c.want)
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	e := mustCompile(t, []string{"servers.* .host.measurement* zone=1c,dc=a", "measurement.measurement"}, "_", []string{"region=us-east"})
	want := []string{
		`template 1: filter "servers.*", template ".host.measurement*", tags zone=1c,dc=a`,
		`template 2: default (no filter), template "measurement.measurement"`,
		`separator "_"`,
		`default template in effect: template 2 "measurement.measurement"`,
		`global tags (for keys a template does not produce): region=us-east`,
	}
	if got := e.Describe(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Describe:\n got %q\nwant %q", got, want)
	}

	want = []string{
		`separator "."`,
		`default template in effect: built-in "measurement*" (joins with "." whatever the separator)`,
	}
	if got := mustCompile(t, nil, "", nil).Describe(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Describe:\n got %q\nwant %q", got, want)
	}
}
