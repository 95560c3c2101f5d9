package kubecheck

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
)

// ruleExpr is the expression of the shipped alert named name.
func ruleExpr(t *testing.T, name string) string {
	t.Helper()
	groups, errs := rulefmt.ParseFile(alertRules, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == name {
				return r.Expr
			}
		}
	}
	t.Fatalf("%s: no alert %s", alertRules, name)
	return ""
}

// The refusals of points split between two alerts, evaluated by
// Prometheus's engine on counters as sparkpulse serves them: a database
// limit (a new application's points refused) is critical and only
// SparkpulseInfluxDBLimitReached fires for it; any other refusal (a field
// type conflict) fires SparkpulsePointsRejected alone.
func TestRejectedAlertsFire(t *testing.T) {
	const load = `
load 1m
	sparkpulse_influxdb_points_rejected_total{job="sparkpulse",instance="a:2033",listener="tcp://:2003",reason="max values per tag"} 0+120x20
	sparkpulse_influxdb_points_rejected_total{job="sparkpulse",instance="a:2033",listener="annotate",reason="field type conflict"} 0 0 0 0 0 0 0 0 0 0 3x10
	sparkpulse_influxdb_points_rejected_total{job="sparkpulse",instance="a:2033",listener="tcp://:2003",reason="disk queue full"} 0+50x20
`
	limit, rejected := ruleExpr(t, "SparkpulseInfluxDBLimitReached"), ruleExpr(t, "SparkpulsePointsRejected")
	promqltest.RunTest(t, load+fmt.Sprintf(`
eval instant at 20m %s
	{job="sparkpulse",instance="a:2033",listener="tcp://:2003",reason="max values per tag"} 1800

eval instant at 20m %s
	{job="sparkpulse",instance="a:2033",listener="annotate",reason="field type conflict"} 3
`, limit, rejected), promqltest.NewTestEngine(t, false, 0, promqltest.DefaultMaxSamplesPerQuery))
}
