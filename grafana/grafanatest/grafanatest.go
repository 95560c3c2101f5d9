// Package grafanatest runs a committed dashboard's queries as Grafana
// would, against a real InfluxDB: the variables resolved from their own
// queries and substituted, every panel, variable and annotation query run
// for each value of the application variable. Tests of data written by
// sparkpulse use it to prove that every panel has something to show.
package grafanatest

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/grafana"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
)

// Result is one query of a dashboard, run for every value of the
// application variable.
type Result struct {
	Where, Text string // where in the dashboard, and the query as written
	Annotation  bool
	Runs        int // the values (and repeats) it ran for
	WithData    int // of them, those that returned data
}

// Run resolves the variables of the dashboard in file from database db
// and runs every query over [from, to]. A query InfluxDB refuses, or a
// variable without values, fails the test.
func Run(t testing.TB, srv *influxtest.Server, db, file string, from, to time.Time) []Result {
	t.Helper()

	body, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	vars, queries, err := grafana.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	run := func(q string) ([]influxtest.Series, error) { return srv.TryQuery(db, q) }

	// Resolve the variables in order: the first variable without All that
	// lists several values is the application; the test runs every query
	// for each of its values.
	base := grafana.Values{Selected: map[string][]string{}, AllSelected: map[string]bool{}}
	var fanOut string
	var fanValues []string
	options := map[string][]string{}
	for _, v := range vars {
		q, err := grafana.Interpolate(v.Query, vars, base, from, to, time.Minute)
		if err != nil {
			t.Fatalf("variable %s: %v", v.Name, err)
		}
		var res []influxtest.Series
		if v.Values == nil { // a custom variable lists its values
			if res, err = run(q); err != nil {
				t.Fatalf("variable %s: %q: %v", v.Name, q, err)
			}
		}
		values := slices.Clone(v.Values)
		for _, s := range res {
			col := 1 // SHOW TAG VALUES: key, value
			if len(s.Columns) == 1 {
				col = 0 // SHOW MEASUREMENTS: name
			}
			for _, row := range s.Values {
				values = append(values, fmt.Sprint(row[col]))
			}
		}
		if values, err = v.ApplyRegex(values); err != nil {
			t.Fatal(err)
		}
		slices.Sort(values)
		values = slices.Compact(values)
		options[v.Name] = values
		switch {
		case v.IncludeAll:
			base.AllSelected[v.Name] = true
		case len(values) == 0:
			t.Fatalf("variable %s: %q has no values", v.Name, q)
		case fanOut == "" && len(values) > 1:
			fanOut, fanValues = v.Name, values
			base.Selected[v.Name] = values[:1]
		default:
			base.Selected[v.Name] = values[:1]
		}
		t.Logf("variable %s: %d values %q", v.Name, len(values), values[:min(len(values), 6)])
	}
	if fanOut == "" {
		fanValues = []string{""}
	}

	var results []Result
	for _, q := range queries {
		withData, runs := 0, 0
		for _, fv := range fanValues {
			vals := base
			if fanOut != "" {
				vals = grafana.Values{Selected: map[string][]string{}, AllSelected: base.AllSelected}
				for k, v := range base.Selected {
					vals.Selected[k] = v
				}
				vals.Selected[fanOut] = []string{fv}
				// Variables that depend on the application are re-read.
				for _, v := range vars {
					if v.Name != fanOut && !v.IncludeAll && strings.Contains(v.Query, "$"+fanOut) {
						if vs := resolve(t, srv, db, v, vars, vals, from, to); len(vs) > 0 {
							vals.Selected[v.Name] = vs[:1]
						}
					}
				}
			}
			// A repeated row is run for each value of its variable.
			repeats := [][]string{nil}
			if q.Repeat != "" {
				repeats = nil
				for _, o := range options[q.Repeat] {
					repeats = append(repeats, []string{o})
				}
			}
			for _, r := range repeats {
				vv := vals
				if r != nil {
					vv = grafana.Values{Selected: map[string][]string{q.Repeat: r}, AllSelected: map[string]bool{}}
					for k, v := range vals.Selected {
						if k != q.Repeat {
							vv.Selected[k] = v
						}
					}
					for k, v := range vals.AllSelected {
						vv.AllSelected[k] = v && k != q.Repeat
					}
				}
				text, err := grafana.Interpolate(q.Text, vars, vv, from, to, 30*time.Second)
				if err != nil {
					t.Fatalf("%s: %v", q.Where, err)
				}
				res, err := run(text)
				if err != nil {
					t.Fatalf("%s: %q: %v", q.Where, text, err)
				}
				runs++
				if HasData(res, q.Annotation) {
					withData++
				}
			}
		}
		results = append(results, Result{Where: q.Where, Text: q.Text, Annotation: q.Annotation, Runs: runs, WithData: withData})
	}
	t.Logf("%d queries and %d variables ran, for each %s", len(queries), len(vars), fanOut)
	return results
}

func resolve(t testing.TB, srv *influxtest.Server, db string, v grafana.Variable, vars []grafana.Variable, vals grafana.Values, from, to time.Time) []string {
	t.Helper()
	q, err := grafana.Interpolate(v.Query, vars, vals, from, to, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	res, err := srv.TryQuery(db, q)
	if err != nil {
		t.Fatalf("variable %s: %v", v.Name, err)
	}
	var out []string
	for _, s := range res {
		for _, row := range s.Values {
			out = append(out, fmt.Sprint(row[len(row)-1]))
		}
	}
	slices.Sort(out)
	return out
}

// HasData reports whether a result holds a value that is not null; an
// annotation also needs its title, text and end.
func HasData(res []influxtest.Series, annotation bool) bool {
	for _, s := range res {
		for _, row := range s.Values {
			nonNull := 0
			for _, v := range row[1:] {
				if v != nil {
					nonNull++
				}
			}
			if annotation && nonNull == len(row)-1 || !annotation && nonNull > 0 {
				return true
			}
		}
	}
	return false
}
