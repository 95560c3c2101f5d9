package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/accounting"
	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/config/configtest"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
)

// The accounting reads each database in the shapes its blocks write: a
// block that names no schema in both, as its database may hold points
// of either (written before and after the default became wide), which
// add up; a block that names one in that one only.
func TestStreamReadsEachBlocksShapes(t *testing.T) {
	srv := influxtest.Start(t)
	const app = "app-20261125100000-0001"
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	at := func(s int) int64 { return t0.Add(time.Duration(s) * time.Second).UnixNano() }
	srv.Exec(t, `CREATE DATABASE "mixed"`)
	srv.Exec(t, `CREATE DATABASE "cern"`)
	for _, l := range []string{
		// Before the change of schema: the CERN shape.
		fmt.Sprintf(`cpuTime.count,applicationid=%s,namespace=executor,process=1 value=100,delta=100 %d`, app, at(0)),
		fmt.Sprintf(`cpuTime.count,applicationid=%s,namespace=executor,process=1 value=150 %d`, app, at(10)), // no delta
		fmt.Sprintf(`JVMHeapMemory,applicationid=%s,namespace=ExecutorMetrics,process=1 value=10 %d`, app, at(0)),
		fmt.Sprintf(`JVMHeapMemory,applicationid=%s,namespace=ExecutorMetrics,process=1 value=20 %d`, app, at(10)),
		// After it: the wide one.
		fmt.Sprintf(`executor,applicationid=%s,process=1 cpuTime.count=300,cpuTime.count_delta=150,runTime.count=5,runTime.count_delta=5 %d`, app, at(20)),
		// The process tree's parts peak at different reports: 1000 + 700
		// apart, 1300 at once.
		fmt.Sprintf(`ExecutorMetrics,applicationid=%s,process=1 JVMHeapMemory=40,ProcessTreeJVMRSSMemory=1000,ProcessTreePythonRSSMemory=100,ProcessTreeOtherRSSMemory=0 %d`, app, at(20)),
		fmt.Sprintf(`ExecutorMetrics,applicationid=%s,process=1 ProcessTreeJVMRSSMemory=600,ProcessTreePythonRSSMemory=700,ProcessTreeOtherRSSMemory=0 %d`, app, at(30)),
		// A report without all three parts sums to nothing.
		fmt.Sprintf(`ExecutorMetrics,applicationid=%s,process=1 ProcessTreeJVMRSSMemory=900 %d`, app, at(40)),
		fmt.Sprintf(`plugin.ch.cern.CgroupMetrics,applicationid=%s,process=1 CPUTimeNanosec=9,CPUTimeNanosec_delta=9 %d`, app, at(20)),
		// Outside the window read.
		fmt.Sprintf(`executor,applicationid=%s,process=1 cpuTime.count=900,cpuTime.count_delta=600 %d`, app, at(100)),
	} {
		srv.Write(t, "/write?db=mixed", l)
	}
	srv.Write(t, "/write?db=cern", fmt.Sprintf(`succeededTasks.count,applicationid=%s,namespace=executor,process=1 value=7,delta=7 %d`, app, at(0)))
	// Not the shape the block writes: not read.
	srv.Write(t, "/write?db=cern", fmt.Sprintf(`executor,applicationid=%s,process=1 succeededTasks.count=1000,succeededTasks.count_delta=1000 %d`, app, at(0)))

	plan := streamPlan(t, config.Config{
		InfluxDB: config.InfluxDBConfig{URL: srv.URL},
		Graphite: []config.GraphiteConfig{{Database: "mixed"}, {Database: "cern", Schema: "cern"}},
	})
	totals := streamTotals(t, plan, app, t0)
	p := totals["1"]
	var got []string
	for _, k := range []string{"cpuTime.count", "runTime.count", "succeededTasks.count", "ch.cern.CgroupMetrics.CPUTimeNanosec"} {
		got = append(got, fmt.Sprintf("sum %s %v, %d without delta", k, p.Sums[k], p.NoDelta[k]))
	}
	for _, k := range []string{"JVMHeapMemory", "ProcessTreeJVMRSSMemory", "ProcessTreePythonRSSMemory"} {
		got = append(got, fmt.Sprintf("%s peak %v, mean %.6g of %v", k, p.Peak[k], p.Mean[k], p.Samples[k]))
	}
	got = append(got, fmt.Sprintf("process tree peak %v at once", p.TreePeak))
	equalLines(t, "process 1", got, []string{
		"sum cpuTime.count 250, 1 without delta",
		"sum runTime.count 5, 0 without delta",
		"sum succeededTasks.count 7, 0 without delta",
		"sum ch.cern.CgroupMetrics.CPUTimeNanosec 9, 0 without delta",
		"JVMHeapMemory peak 40, mean 23.3333 of 3", // the samples of both shapes
		"ProcessTreeJVMRSSMemory peak 1000, mean 833.333 of 3",
		"ProcessTreePythonRSSMemory peak 700, mean 400 of 2",
		"process tree peak 1300 at once",
	})
	if len(totals) != 1 {
		t.Errorf("processes %v, want 1 only", totals)
	}

	// Each database is read in the shapes its blocks write.
	var dbs []string
	for _, d := range streamDBs(plan) {
		dbs = append(dbs, fmt.Sprint(d.Name, d.Schemas))
	}
	if got := strings.Join(dbs, " "); got != "mixed[wide cern] cern[cern]" {
		t.Errorf("databases read: %s", got)
	}
}

// streamPlan loads the plan of cfg (see configtest.Write) and env, failing the
// test on an error.
func streamPlan(t *testing.T, cfg config.Config, env ...string) *config.Plan {
	t.Helper()
	plan, err := config.Load(&config.Overrides{Config: configtest.Write(t, cfg)}, environ(env))
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// streamTotals is what the accounting reads of app's metrics stream in
// the minute from t0, through plan's blocks.
func streamTotals(t *testing.T, plan *config.Plan, app string, t0 time.Time) map[string]accounting.ProcessTotals {
	t.Helper()
	totals, err := newStream(plan, nil).Totals(context.Background(), app, t0, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	return totals
}
