package schema_test

import (
	"slices"
	"testing"

	"github.com/sparkpulse/sparkpulse/accounting"
	"github.com/sparkpulse/sparkpulse/schema"
)

// TestReconciledTotals: the totals this package declares for the readers
// of spark_reconcile are those package accounting compares, which the
// encoder writes.
func TestReconciledTotals(t *testing.T) {
	r := accounting.Reconcile(nil, accounting.StageTotals{}, nil, nil)
	var got []string
	for _, m := range r.Metrics {
		got = append(got, m.Name)
	}
	want := []string{schema.TotalTasks, schema.TotalCPUTimeNs, schema.TotalRunTimeMs, schema.TotalGCTimeMs, schema.TotalInputBytes, schema.TotalShuffleReadBytes, schema.TotalShuffleWriteBytes}
	if !slices.Equal(got, want) {
		t.Errorf("accounting compares %v, schema declares %v", got, want)
	}
	if got := schema.ReconcileDiff(schema.TotalTasks); got != "diff_tasks" {
		t.Errorf("ReconcileDiff(TotalTasks) = %s", got)
	}
}
