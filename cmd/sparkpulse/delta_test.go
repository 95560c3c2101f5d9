package main

import (
	"bytes"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
	"github.com/sparkpulse/sparkpulse/influxql"
	"github.com/sparkpulse/sparkpulse/schema"
)

// TestDeltaSums drives Dropwizard's real GraphiteReporter as a driver and
// three executors through six reports, while executor 2's JVM restarts
// before report 2 (its counters begin again at zero) and sparkpulse itself
// is restarted after report 2, keeping its baselines in state-dir. The sum
// of the delta field of each series over the run must equal the true
// increase of the counter exactly, and rate must be delta per second, in
// either shape of the built-in mapping.
//
// The client's counters are documented in TestSparkReporter: at report r,
// executor n adds n·1e9 + r·1000 to cpuTime and n·100 + r to runTime.
func TestDeltaSums(t *testing.T) {
	reporter := sparkReporter(t)
	srv := influxtest.Start(t)
	forEachSchema(t, func(t *testing.T, sc schema.Shape, setting string) {
		deltaSums(t, reporter, srv, sc, setting)
	})
}

func deltaSums(t *testing.T, reporter func(args ...string) *exec.Cmd, srv *influxtest.Server, sc schema.Shape, setting string) {
	db := "deltas_" + sc.String()
	const (
		app       = "app-20261122101500-0002"
		executors = 3
		reports   = 6
		restartAt = 3 // sparkpulse restarts before this report
		start     = 1795300000
		period    = 10
		reset     = "2:2" // executor 2 restarts before report 2
	)
	cfg := config.Config{
		StateDir: t.TempDir(),
		InfluxDB: config.InfluxDBConfig{URL: srv.URL},
		// Every series starts with sparkpulse: its first sample is all new work.
		Deltas:   config.DeltaSettings{FirstSampleGrace: new(config.Duration(0))},
		Graphite: []config.GraphiteConfig{{Database: db, Schema: setting}},
	}

	// The reporter sends its reports back to back, each over its own
	// connection, and sparkpulse reads connections in parallel: two reports
	// of one executor may be taken out of order, which the rules answer
	// with no delta for the older one and the whole increase on the newer.
	var outOfOrder uint64
	runReports := func(first, last int) {
		t.Helper()
		svc := startSparkpulse(t, cfg)
		_, port, _ := strings.Cut(svc.addr(0), "127.0.0.1:")
		cmd := reporter("127.0.0.1", port, "tcp", "-", app, strconv.Itoa(executors), strconv.Itoa(last),
			strconv.Itoa(start), strconv.Itoa(period), strconv.Itoa(first), reset)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if out, err := cmd.Output(); err != nil || len(out) == 0 {
			t.Fatalf("SparkReporter: %v\n%s", err, stderr.String())
		}
		svc.stop()
		outOfOrder += svc.deltas.tracker.Stats().OutOfOrder.Load()
		if got := svc.deltas.tracker.Stats().Resets.Load(); first == 0 && got != 3 {
			t.Errorf("first run: %d resets, want 3 (executor 2's cpuTime, runTime, succeededTasks)", got)
		}
	}
	runReports(0, restartAt)       // reports 0, 1, 2
	runReports(restartAt, reports) // a new sparkpulse, reports 3, 4, 5

	for _, m := range []struct {
		schema.Metric
		inc func(n, r int) int64
	}{
		{schema.CPUTime, func(n, r int) int64 { return int64(n)*1_000_000_000 + int64(r)*1000 }},
		{schema.RunTime, func(n, r int) int64 { return int64(n)*100 + int64(r) }},
	} {
		var want []string
		for n := 1; n <= executors; n++ {
			var total int64
			for r := range reports {
				total += m.inc(n, r)
			}
			want = append(want, fmt.Sprintf("%s process=%d: %d points, deltas summing to %d", m.Name, n, reports, total))
		}
		var got []string
		value, delta := influxql.QuoteIdent(sc.Field(m.Metric)), influxql.QuoteIdent(sc.DeltaField(m.Metric))
		q := fmt.Sprintf(`SELECT count(%s), count(%s), sum(%s) FROM %s WHERE "process" != 'driver' GROUP BY "process"`,
			value, delta, delta, influxql.QuoteIdent(sc.Measurement(m.Metric)))
		for _, s := range srv.Query(t, db, q) {
			points, deltas := int64(toFloat(t, s.Values[0][1])), int64(toFloat(t, s.Values[0][2]))
			got = append(got, fmt.Sprintf("%s process=%s: %d points, deltas summing to %d", m.Name, s.Tags["process"],
				points, int64(toFloat(t, s.Values[0][3]))))
			// A point without a delta must be a sample taken out of order.
			if missing := uint64(points - deltas); missing > outOfOrder {
				t.Errorf("%s process=%s: %d points without a delta, %d samples out of order", m.Name, s.Tags["process"], missing, outOfOrder)
			}
		}
		equalLines(t, m.Name, got, want)
	}

	// rate = delta per second between the two reports (10 s apart), and
	// the reset report carries the value since the restart.
	res := srv.Query(t, db, fmt.Sprintf(`SELECT %s, %s, %s FROM %s WHERE "process" = '2'`, influxql.QuoteIdent(sc.Field(schema.CPUTime)),
		influxql.QuoteIdent(sc.DeltaField(schema.CPUTime)), influxql.QuoteIdent(sc.RateField(schema.CPUTime)), influxql.QuoteIdent(sc.Measurement(schema.CPUTime))))
	if len(res) != 1 || len(res[0].Values) != reports {
		t.Fatalf("executor 2 cpuTime.count: %v", res)
	}
	if outOfOrder > 0 {
		// The rows below hold when the reports were taken in order; the
		// sums above hold either way.
		t.Logf("%d samples taken out of order: the rows of executor 2 are not compared", outOfOrder)
		return
	}
	var got []string
	for _, row := range res[0].Values {
		rate := "none"
		if row[3] != nil {
			rate = strconv.FormatFloat(toFloat(t, row[3]), 'f', -1, 64)
		}
		got = append(got, fmt.Sprintf("value %.0f delta %.0f rate %s", toFloat(t, row[1]), toFloat(t, row[2]), rate))
	}
	equalLines(t, "executor 2 cpuTime.count", got, []string{
		"value 2000000000 delta 2000000000 rate none", // first sample of a new series
		"value 4000001000 delta 2000001000 rate 200000100",
		"value 2000002000 delta 2000002000 rate 200000200", // JVM restarted: delta = value
		"value 4000005000 delta 2000003000 rate 200000300", // sparkpulse restarted: baseline restored
		"value 6000009000 delta 2000004000 rate 200000400",
		"value 8000014000 delta 2000005000 rate 200000500",
	})
}
