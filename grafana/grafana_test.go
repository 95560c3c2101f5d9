package grafana

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite dashboards/*.json from the code")

// The committed dashboards are what the code generates.
func TestDashboardsUpToDate(t *testing.T) {
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		path := filepath.Join("dashboards", name)
		if *update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./grafana -update)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what the code generates; run go test ./grafana -update and commit it", path)
		}
	}
	committed, _ := filepath.Glob(filepath.Join("dashboards", "*.json"))
	if len(committed) != len(files) {
		t.Errorf("dashboards/ holds %d files, the code makes %d", len(committed), len(files))
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
	vars, qs, err := Parse(files["spark.json"])
	if err != nil {
		t.Fatal(err)
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
			t.Errorf("%s uses non_negative_derivative instead of the ingest-time deltas", q.Where)
		}
	}
	if len(vars) != 7 || len(qs) < 100 || repeated < 6 || annotations != 6 {
		t.Errorf("%d variables, %d queries, %d in the repeated row, %d annotations", len(vars), len(qs), repeated, annotations)
	}
	if !slices.Equal(fs.Values, []string{"file", "hdfs", "s3a", "gs", "abfs", "abfss", "wasb", "viewfs"}) || fs.AllValue != ".+" {
		t.Errorf("fs: %+v", fs)
	}
	re := Variable{Name: "fs", Regex: `/^filesystem\.(.+)\.read_bytes$/`}
	got, err := re.ApplyRegex([]string{"filesystem.hdfs.read_bytes", "filesystem.s3a.read_bytes", "other"})
	if err != nil || strings.Join(got, ",") != "hdfs,s3a" {
		t.Errorf("regex: %q, %v", got, err)
	}
}
