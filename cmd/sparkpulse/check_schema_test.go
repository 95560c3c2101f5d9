package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/delta"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
	"github.com/sparkpulse/sparkpulse/realspark/recorded"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/spark"
	"github.com/sparkpulse/sparkpulse/templates"
)

// TestSchemaCosts keeps schemaCosts equal to what the built-in mapping
// makes of the recordings of real Spark: per schema, the most series a
// driver and an executor add, the tables, and the columns of the widest
// table, the largest over the recorded Spark versions.
func TestSchemaCosts(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "spark-real", "*", "graphite.txt.gz"))
	if len(dirs) < 2 {
		t.Fatalf("recordings of real Spark: %v", dirs)
	}
	rules, err := delta.CompileRules(spark.DeltaRules())
	if err != nil {
		t.Fatal(err)
	}
	got := map[schema.Shape]schemaCost{}
	for _, file := range dirs {
		paths, prefix := readSparkRecording(t, filepath.Dir(file))
		for _, s := range []schema.Shape{schema.CERN, schema.Wide} {
			c := costOf(t, spark.NewMapper(spark.Options{Prefixes: []string{prefix}, Schema: s}), rules, s, paths)
			t.Logf("Spark %s, schema %s: %+v", filepath.Base(filepath.Dir(file)), s, c)
			g := got[s]
			got[s] = schemaCost{max(g.driverSeries, c.driverSeries), max(g.executorSeries, c.executorSeries),
				max(g.tables, c.tables), max(g.maxColumns, c.maxColumns)}
		}
	}
	for s, c := range got {
		if schemaCosts[s] != c {
			t.Errorf("schema %s: schemaCosts has %+v, the recordings %+v", s, schemaCosts[s], c)
		}
	}
	// Each listener's processing time makes tablesPerListener tables in
	// the cern shape.
	paths, prefix := readSparkRecording(t, filepath.Dir(dirs[len(dirs)-1]))
	m := spark.NewMapper(spark.Options{Prefixes: []string{prefix}})
	perListener := map[string]map[string]bool{}
	var r templates.Result
	for _, p := range paths {
		if err := m.Apply([]byte(p), &r); err != nil {
			t.Fatal(err)
		}
		if rest, ok := strings.CutPrefix(string(r.Measurement), "listenerProcessingTime."); ok && strings.Contains(rest, ".") {
			class := rest[:strings.LastIndexByte(rest, '.')]
			if perListener[class] == nil {
				perListener[class] = map[string]bool{}
			}
			perListener[class][string(r.Measurement)] = true
		}
	}
	if len(perListener) < 5 {
		t.Errorf("%d listeners in the recording", len(perListener))
	}
	for class, tables := range perListener {
		if len(tables) != tablesPerListener {
			t.Errorf("listener %s: %d tables, tablesPerListener is %d", class, len(tables), tablesPerListener)
		}
	}

	// The figures the warnings rest on.
	if cern, wide := got[schema.CERN], got[schema.Wide]; cern.executorSeries < 10*wide.executorSeries ||
		cern.tables < 20*wide.tables || wide.maxColumns > maxColumns3 {
		t.Errorf("cern %+v, wide %+v", cern, wide)
	}
}

// costOf counts what the mapping m of schema s makes of paths: the series
// of each driver and executor, the tables and their columns.
func costOf(t *testing.T, m *spark.Mapper, rules *delta.Rules, s schema.Shape, paths []string) schemaCost {
	t.Helper()
	series := map[string]map[string]bool{} // process → series keys
	role := map[string]string{}
	tables := map[string]map[string]bool{} // table → columns
	var r templates.Result
	for _, p := range paths {
		if err := m.Apply([]byte(p), &r); err != nil {
			t.Fatal(err)
		}
		if len(r.Tags) == 0 {
			continue // not a Spark path
		}
		key := string(r.Measurement)
		var app, proc string
		cols := tables[string(r.Measurement)]
		if cols == nil {
			cols = map[string]bool{"time": true}
			tables[string(r.Measurement)] = cols
		}
		for _, tg := range r.Tags {
			key += "," + string(tg.Key) + "=" + string(tg.Value)
			cols["tag "+string(tg.Key)] = true
			switch string(tg.Key) {
			case "applicationid":
				app = string(tg.Value)
			case "process":
				proc = string(tg.Value)
			}
		}
		cols[string(r.Field)] = true
		name := r.Measurement
		if s == schema.Wide {
			name = r.Field
		}
		if cum, _ := rules.Match([]byte(p), name); cum {
			cols["delta of "+string(r.Field)] = true
			cols["rate of "+string(r.Field)] = true
		}
		if proc == "" {
			continue // a daemon's or the master's
		}
		id := app + " " + proc
		if series[id] == nil {
			series[id] = map[string]bool{}
			role[id] = "executor"
			if proc == "driver" {
				role[id] = "driver"
			}
		}
		series[id][key] = true
	}
	var c schemaCost
	for id, keys := range series {
		if role[id] == "driver" {
			c.driverSeries = max(c.driverSeries, len(keys))
		} else {
			c.executorSeries = max(c.executorSeries, len(keys))
		}
	}
	c.tables = len(tables)
	for _, cols := range tables {
		c.maxColumns = max(c.maxColumns, len(cols))
	}
	return c
}

// readSparkRecording returns the paths of a recording of real Spark and
// the GraphiteSink prefix it used.
func readSparkRecording(t *testing.T, dir string) (paths []string, prefix string) {
	t.Helper()
	run := recorded.MustRun(t, dir)
	return run.Paths(t), run.Prefix
}

// influxdb3 is a stand-in for an InfluxDB 3 server of the build given,
// answering /ping as influxdb3_server does.
func influxdb3(t *testing.T, build string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ping" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if build != "" {
			w.Header().Set("X-Influxdb-Build", build)
		}
		w.Header().Set("X-Influxdb-Version", "3.10.1")
		fmt.Fprintf(w, `{"version":"3.10.1","revision":"abc"}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// schemaConfig is a config of one [[graphite]] block writing to database
// spark, with the lines given.
func schemaConfig(t *testing.T, lines ...string) string {
	return writeFile(t, "schema.toml", "[influxdb]\ncreate-database = true\n\n[[graphite]]\nbind-address = \"127.0.0.1:0\"\ndatabase = \"spark\"\n"+
		strings.Join(lines, "\n")+"\n")
}

// check shows each block's schema and warns where a schema's tables,
// series or columns reach the limits of the InfluxDB it writes to, naming
// the block and the remedy; it does not warn otherwise.
func TestCheckSchemaWarnings(t *testing.T) {
	influx1 := influxtest.Start(t).URL
	manyTags := `tags = [` + strings.Join(slices.Collect(func(yield func(string) bool) {
		for i := range maxColumns3 - schemaCosts[schema.Wide].maxColumns + 1 {
			if !yield(fmt.Sprintf(`"t%d=x"`, i)) {
				return
			}
		}
	}), ", ") + `]`
	for _, c := range []struct {
		name, url string
		lines     []string
		shows     string
		warn      []string // in the one schema warning; none when nil
	}{
		{"cern to InfluxDB 3", influxdb3(t, "Enterprise"), []string{`schema = "cern"`}, `schema "cern": a measurement per metric`,
			[]string{`[[graphite]] #1 (`, `schema.toml:7:1): schema "cern" makes a table per metric: 402 for a Spark application`,
				"allow 500 per database", `use schema = "wide" (16 tables)`}},
		{"cern to InfluxDB 3 Core", influxdb3(t, "Core"), []string{`schema = "cern"`}, `schema "cern"`,
			[]string{`schema.toml:7:1): schema "cern"`, "InfluxDB 3 Core allows 2000 across its databases", `use schema = "wide"`}},
		{"cern to InfluxDB 1.x", influx1, []string{`schema = "cern"`}, `schema "cern"`,
			[]string{`schema.toml:7:1): schema "cern" makes 194 series per executor, 374 per driver`,
				"max-series-per-database (a million by default", "after about 5100 executors", `use schema = "wide" (7 per executor)`}},
		{"wide to InfluxDB 3", influxdb3(t, "Enterprise"), nil, `schema "wide": a measurement per Spark source, a field per metric`, nil},
		{"wide to InfluxDB 3 Core", influxdb3(t, "Core"), []string{`schema = "wide"`}, `schema "wide"`, nil},
		{"wide to InfluxDB 1.x", influx1, nil, `schema "wide"`, nil},
		{"wide with global tags past the columns", influxdb3(t, ""), []string{manyTags}, `schema "wide"`,
			[]string{`[[graphite]] #1 (`, `schema "wide" makes up to 251 columns in a table with its 103 global tags, more than the 250`, "set fewer tags"}},
		{"wide with those tags on Core", influxdb3(t, "Core"), []string{manyTags}, `schema "wide"`, nil},
		{"templates", influxdb3(t, ""), []string{`templates = ["measurement*"]`}, "measurement*", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := checkWith(t, c.url, "--config", schemaConfig(t, c.lines...))
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if !strings.Contains(out, c.shows) {
				t.Errorf("output lacks %q:\n%s", c.shows, out)
			}
			var warnings []string
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, "warning: [[graphite]]") {
					warnings = append(warnings, l)
				}
			}
			t.Logf("%s", warnings)
			if c.warn == nil {
				if len(warnings) > 0 {
					t.Errorf("unexpected warnings:\n%s", strings.Join(warnings, "\n"))
				}
				return
			}
			if len(warnings) != 1 {
				t.Fatalf("%d schema warnings, want 1:\n%s", len(warnings), out)
			}
			for _, w := range c.warn {
				if !strings.Contains(warnings[0], w) {
					t.Errorf("the warning lacks %q:\n%s", w, warnings[0])
				}
			}
		})
	}
}

// The warning names where the schema was set: a variable as well as a
// line of the file, and only the blocks writing to the target.
func TestCheckSchemaWarningOrigin(t *testing.T) {
	conf := writeFile(t, "two.toml", "[[graphite]]\nbind-address = \"127.0.0.1:0\"\ndatabase = \"spark\"\n\n"+
		"[[graphite]]\nbind-address = \"127.0.0.1:0\"\ndatabase = \"other\"\nschema = \"cern\"\n")
	url := influxdb3(t, "Core")
	var out strings.Builder
	env := envOf(map[string]string{config.EnvURL: url, "SPARKPULSE_GRAPHITE_1_SCHEMA": "cern"})
	if err := run(t.Context(), []string{"check", "--config", conf}, env, nil, &out, &strings.Builder{}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{
		`warning: [[graphite]] #1 (SPARKPULSE_GRAPHITE_1_SCHEMA=cern): schema "cern"`,
		`warning: [[graphite]] #2 (` + conf + `:8:1): schema "cern"`,
	} {
		if strings.Count(out.String(), want) != 1 {
			t.Errorf("output has not once %q:\n%s", want, out.String())
		}
	}
}
