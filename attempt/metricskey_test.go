package attempt

import "testing"

func TestMetricsKey(t *testing.T) {
	for _, c := range []struct {
		props map[string]string
		want  string
	}{
		{nil, "app-1"},
		{map[string]string{"spark.metrics.namespace": "  "}, "app-1"},
		{map[string]string{"spark.metrics.namespace": "${spark.app.name}", "spark.app.name": "Nightly ETL"}, "Nightly-ETL"},
		{map[string]string{"spark.metrics.namespace": "${spark.app.name}", "spark.app.name": " a \t b  c "}, "a-b-c"},
		{map[string]string{"spark.metrics.namespace": "etl.${spark.app.id}", "spark.app.id": "app-1"}, "etl.app-1"},
		{map[string]string{"spark.metrics.namespace": "team.orders"}, "team.orders"},
		// An unknown reference stays as written, as Spark leaves it.
		{map[string]string{"spark.metrics.namespace": "${env:TEAM}.${spark.app.name}", "spark.app.name": "x"}, "${env:TEAM}.x"},
	} {
		if got := MetricsKey("app-1", c.props); got != c.want {
			t.Errorf("MetricsKey(%v) = %q, want %q", c.props, got, c.want)
		}
	}
}
