package grafana

import (
	"bytes"
	"flag"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/schema"
)

var update = flag.Bool("update", false, "rewrite the dashboards' JSON files from the code")

// The committed dashboards are what the code generates.
func TestDashboardsUpToDate(t *testing.T) {
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string]bool{}
	for name, want := range files {
		dirs[filepath.Dir(name)] = true
		if *update {
			if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(name, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("%v (run go test ./grafana -update)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what the code generates; run go test ./grafana -update and commit it", name)
		}
	}
	committed := 0
	for dir := range dirs {
		m, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		committed += len(m)
	}
	if committed != len(files) {
		t.Errorf("%v hold %d files, the code makes %d", slices.Sorted(maps.Keys(dirs)), committed, len(files))
	}
}

func TestInterpolate(t *testing.T) {
	vars := []Variable{
		{Name: "app"},
		{Name: "process", Multi: true, IncludeAll: true, AllValue: ".*"},
	}
	from, to := time.UnixMilli(1795300000000), time.UnixMilli(1795300900000)
	for _, tc := range []struct {
		vals Values
		q    string
		want string
	}{
		{Values{Selected: map[string][]string{"app": {"app-2026.1"}}, AllSelected: map[string]bool{"process": true}},
			`SELECT sum("delta") / $__interval_ms FROM "x" WHERE "applicationid" =~ /^$app$/ AND "process" =~ /^${process}$/ AND $timeFilter GROUP BY time($__interval)`,
			`SELECT sum("delta") / 30000 FROM "x" WHERE "applicationid" =~ /^app-2026\.1$/ AND "process" =~ /^.*$/ AND time >= 1795300000000ms and time <= 1795300900000ms GROUP BY time(30s)`},
		{Values{Selected: map[string][]string{"app": {"a"}, "process": {"1", "driver"}}},
			`"process" =~ /^$process$/`, `"process" =~ /^(1|driver)$/`},
	} {
		got, err := Interpolate(tc.q, vars, tc.vals, from, to, 30*time.Second)
		if err != nil || got != tc.want {
			t.Errorf("Interpolate(%q)\n= %q, %v\nwant %q", tc.q, got, err, tc.want)
		}
	}
	if _, err := Interpolate(`$app`, vars, Values{}, from, to, time.Second); err == nil || !strings.Contains(err.Error(), "no value for variable(s) app") {
		t.Errorf("missing value: %v", err)
	}
}

func TestParseAndRegex(t *testing.T) {
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range schema.Shapes {
		sc, _ := schema.ParseShape(name)
		file := path.Join(Dir(sc), "spark.json")
		vars, qs, err := Parse(files[file])
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		var fs Variable
		repeated, annotations := 0, 0
		for _, v := range vars {
			if v.Name == "fs" {
				fs = v
			}
		}
		for _, q := range qs {
			if q.Repeat == "drill" {
				repeated++
			}
			if q.Annotation {
				annotations++
			}
			if strings.Contains(q.Text, "non_negative_derivative") {
				t.Errorf("%s: %s uses non_negative_derivative instead of the ingest-time deltas", file, q.Where)
			}
		}
		if len(vars) != 7 || len(qs) < 100 || repeated < 6 || annotations != 6 {
			t.Errorf("%s: %d variables, %d queries, %d in the repeated row, %d annotations", file, len(vars), len(qs), repeated, annotations)
		}
		if !slices.Equal(fs.Values, []string{"file", "hdfs", "s3a", "gs", "abfs", "abfss", "wasb", "viewfs"}) || fs.AllValue != ".+" {
			t.Errorf("%s: fs: %+v", file, fs)
		}
	}
	re := Variable{Name: "fs", Regex: `/^filesystem\.(.+)\.read_bytes$/`}
	got, err := re.ApplyRegex([]string{"filesystem.hdfs.read_bytes", "filesystem.s3a.read_bytes", "other"})
	if err != nil || strings.Join(got, ",") != "hdfs,s3a" {
		t.Errorf("regex: %q, %v", got, err)
	}
}

// Each set reads its schema's stream only: the wide shape has no field
// value, delta or rate for Spark's metrics and no namespace or pool tag,
// the CERN shape no <metric>_delta or _rate fields. The health dashboard reads
// sparkpulse's own metrics, alike in both.
func TestDashboardsReadTheirSchema(t *testing.T) {
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	cern := regexp.MustCompile(`"(value|delta|rate|namespace|pool)"`)
	wide := regexp.MustCompile(`_(delta|rate)"|_rate\$/`)
	sets := 0
	for _, name := range schema.Shapes {
		sc, _ := schema.ParseShape(name)
		wrong := wide
		if sc == schema.Wide {
			wrong = cern
		}
		for _, f := range []string{"spark.json", "spark-query-time.json", "fleet.json"} {
			file := path.Join(Dir(sc), f)
			vars, qs, err := Parse(files[file])
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			for _, v := range vars {
				qs = append(qs, Query{Where: "variable " + v.Name, Text: v.Query})
			}
			for _, q := range qs {
				if w := wrong.FindString(q.Text); w != "" {
					t.Errorf("%s: %s reads %s, not of the %s schema: %s", file, q.Where, w, sc, q.Text)
				}
			}
			sets++
		}
	}
	if sets != 3*len(schema.Shapes) {
		t.Errorf("%d dashboards checked", sets)
	}
}
