package kubecheck

import (
	"bufio"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

const (
	alertRules = "../prometheus/alerts.yml"
	// Written and kept true by cmd/sparkpulse's TestMetricNames.
	metricNames = "../../cmd/sparkpulse/testdata/metric-names.txt"
)

// family is a metric family sparkpulse serves.
type family struct {
	typ    string
	labels []string
	values map[string][]string // label → its fixed values; absent when open
}

// readMetricNames reads the families of metricNames.
func readMetricNames(t *testing.T) map[string]*family {
	t.Helper()
	f, err := os.Open(metricNames)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fams := map[string]*family{}
	var last *family
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "  "):
			k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
			if !ok || last == nil {
				t.Fatalf("%s:%d: %q: not label=value under a family", metricNames, n, line)
			}
			last.values[k] = append(last.values[k], v)
		default:
			fields := strings.Fields(line)
			if len(fields) < 2 || len(fields) > 3 {
				t.Fatalf("%s:%d: %q: not \"name type [labels]\"", metricNames, n, line)
			}
			last = &family{typ: fields[1], values: map[string][]string{}}
			if len(fields) == 3 {
				last.labels = strings.Split(fields[2], ",")
			}
			fams[fields[0]] = last
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(fams) == 0 {
		t.Fatalf("%s: no families", metricNames)
	}
	return fams
}

// targetLabels are the labels Prometheus adds to every scraped series.
var targetLabels = []string{"job", "instance"}

// lookup finds the family a series name belongs to: a histogram's
// _bucket, _sum and _count series are its family's. Prometheus's own up
// has the target labels only.
func lookup(fams map[string]*family, name string) *family {
	if name == "up" {
		return &family{typ: "gauge", values: map[string][]string{}}
	}
	if f := fams[name]; f != nil {
		return f
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if f := fams[strings.TrimSuffix(name, suffix)]; f != nil && f.typ == "histogram" && strings.HasSuffix(name, suffix) {
			if suffix == "_bucket" {
				g := *f
				g.labels = append(slices.Clone(f.labels), "le")
				return &g
			}
			return f
		}
	}
	return nil
}

// TestAlertRules parses deploy/prometheus/alerts.yml as Prometheus does
// and checks that every series an alert reads exists in sparkpulse, with
// the labels it names and the label values it matches.
func TestAlertRules(t *testing.T) {
	fams := readMetricNames(t)
	p := parser.NewParser(parser.Options{})
	groups, errs := rulefmt.ParseFile(alertRules, false, model.UTF8Validation, p, slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Error(err)
	}
	if len(errs) > 0 {
		return
	}
	used := map[string]bool{}
	names := map[string]bool{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: a recording rule (%s); the file holds alerts only", g.Name, r.Record)
				continue
			}
			if names[r.Alert] {
				t.Errorf("alert %s: defined twice", r.Alert)
			}
			names[r.Alert] = true
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("alert %s: severity %q, want warning or critical", r.Alert, s)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s: needs a summary and a description", r.Alert)
			}
			expr, err := p.ParseExpr(r.Expr)
			if err != nil {
				t.Errorf("alert %s: %v", r.Alert, err)
				continue
			}
			for _, problem := range checkExpr(fams, expr, used) {
				t.Errorf("alert %s: %s", r.Alert, problem)
			}
		}
	}
	// What the alerts are for: each of these must stay watched.
	for _, m := range []string{"up", "sparkpulse_build_info", "sparkpulse_lines_dropped_total",
		"sparkpulse_influxdb_queue_bytes", "sparkpulse_influxdb_queue_limit_bytes", "sparkpulse_influxdb_disk_queue_bytes",
		"sparkpulse_influxdb_write_errors_total", "sparkpulse_influxdb_points_rejected_total",
		"sparkpulse_annotate_apps_refused_total", "sparkpulse_annotate_errors_total"} {
		if !used[m] {
			t.Errorf("no alert reads %s", m)
		}
	}
}

// checkExpr returns what in expr does not exist in fams: series names,
// label names in matchers and groupings, and label values matched where a
// label has a fixed set of values. It records the series names read.
func checkExpr(fams map[string]*family, expr parser.Expr, used map[string]bool) []string {
	var problems []string
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			f := lookup(fams, n.Name)
			if f == nil {
				problems = append(problems, fmt.Sprintf("%s: no such metric in %s", n.Name, metricNames))
				return nil
			}
			used[n.Name] = true
			for _, m := range n.LabelMatchers {
				if m.Name != labels.MetricName {
					problems = append(problems, checkMatcher(n.Name, f, m)...)
				}
			}
		case *parser.AggregateExpr:
			problems = append(problems, checkLabels(fams, n.Expr, "by", n.Grouping)...)
		case *parser.BinaryExpr:
			if vm := n.VectorMatching; vm != nil {
				problems = append(problems, checkLabels(fams, n.LHS, "on", vm.MatchingLabels)...)
				problems = append(problems, checkLabels(fams, n.RHS, "on", vm.MatchingLabels)...)
				side := n.RHS
				if vm.Card == parser.CardOneToMany {
					side = n.LHS
				}
				problems = append(problems, checkLabels(fams, side, "group_left/right", vm.Include)...)
			}
		}
		return nil
	})
	return problems
}

// checkMatcher checks that m's label exists on f and, where its values
// are fixed, that m matches one of them (or, negated, excludes one).
func checkMatcher(name string, f *family, m *labels.Matcher) []string {
	if !slices.Contains(f.labels, m.Name) && !slices.Contains(targetLabels, m.Name) {
		return []string{fmt.Sprintf("%s has no label %s (it has %v)", name, m.Name, f.labels)}
	}
	values, fixed := f.values[m.Name]
	if !fixed {
		return nil
	}
	var problems []string
	switch m.Type {
	case labels.MatchEqual, labels.MatchNotEqual:
		if !slices.Contains(values, m.Value) {
			problems = append(problems, fmt.Sprintf("%s: %s %q is none of %q", name, m.Name, m.Value, values))
		}
	case labels.MatchRegexp, labels.MatchNotRegexp:
		// Each alternative of a plain alternation must be a value.
		if !strings.ContainsAny(m.Value, `.*+?()[]{}\^$`) {
			for _, v := range strings.Split(m.Value, "|") {
				if !slices.Contains(values, v) {
					problems = append(problems, fmt.Sprintf("%s: %s %q in %q is none of %q", name, m.Name, v, m.Value, values))
				}
			}
		}
	}
	return problems
}

// checkLabels checks that every label of ls is on some series read under
// node, or is a target label.
func checkLabels(fams map[string]*family, node parser.Node, clause string, ls []string) []string {
	have := slices.Clone(targetLabels)
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			if f := lookup(fams, vs.Name); f != nil {
				have = append(have, f.labels...)
			}
		}
		return nil
	})
	var problems []string
	for _, l := range ls {
		if !slices.Contains(have, l) {
			problems = append(problems, fmt.Sprintf("%s (%s): no series under it has label %s", clause, node, l))
		}
	}
	return problems
}

// TestAlertRulesCatch checks that the checks above catch what they are for.
func TestAlertRulesCatch(t *testing.T) {
	fams := readMetricNames(t)
	p := parser.NewParser(parser.Options{})
	for expr, want := range map[string]string{
		`rate(sparkpulse_lines_droped_total[5m]) > 0`:                                        "no such metric",
		`rate(sparkpulse_lines_dropped_total{reason="queue-full"}[5m]) > 0`:                  "is none of",
		`rate(sparkpulse_lines_dropped_total{reason=~"nan|infinity"}[5m]) > 0`:               "is none of",
		`rate(sparkpulse_lines_dropped_total{kind="network"}[5m]) > 0`:                       "has no label kind",
		`sum by (pod) (rate(sparkpulse_lines_dropped_total[5m])) > 0`:                        "no series under it has label pod",
		`sum by (le) (rate(sparkpulse_influxdb_write_duration_seconds_bucket[5m])) > 0`:      "",
		`sparkpulse_influxdb_queue_bytes / on (listener, instance) sparkpulse_series_cached`: "",
	} {
		e, err := p.ParseExpr(expr)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		got := strings.Join(checkExpr(fams, e, map[string]bool{}), "; ")
		if want == "" && got != "" || !strings.Contains(got, want) {
			t.Errorf("%s: %q, want %q", expr, got, want)
		}
	}
}
