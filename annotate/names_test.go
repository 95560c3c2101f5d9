package annotate

import (
	"slices"
	"testing"

	"github.com/sparkpulse/sparkpulse/accounting"
)

// TestReconciledTotals: the totals names.go declares for the readers of
// spark_reconcile are those package accounting compares, which the
// encoder writes.
func TestReconciledTotals(t *testing.T) {
	r := accounting.Reconcile(nil, accounting.StageTotals{}, nil, nil)
	var got []string
	for _, m := range r.Metrics {
		got = append(got, m.Name)
	}
	want := []string{TotalTasks, TotalCPUTimeNs, TotalRunTimeMs, TotalGCTimeMs, TotalInputBytes, TotalShuffleReadBytes, TotalShuffleWriteBytes}
	if !slices.Equal(got, want) {
		t.Errorf("accounting compares %v, names.go declares %v", got, want)
	}
	if got := ReconcileDiff(TotalTasks); got != "diff_tasks" {
		t.Errorf("ReconcileDiff(TotalTasks) = %s", got)
	}
}
