package streamread

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sparkpulse/sparkpulse/accounting"
	"github.com/sparkpulse/sparkpulse/influx"
	"github.com/sparkpulse/sparkpulse/schema"
)

// Each database is read in the shapes its blocks write: templates the
// CERN shape, a named schema that one, no schema both; blocks writing one
// database (whatever its retention policy) share it.
func TestDatabases(t *testing.T) {
	dbs := Databases([]Block{
		{Bucket: "mixed"},
		{Bucket: "cern", Schema: schema.CERN, SchemaSet: true},
		{Bucket: "tmpl/autogen", Templates: true},
		{Bucket: "wide", Schema: schema.Wide, SchemaSet: true},
		{Bucket: "wide/week", Templates: true},
	})
	var got []string
	for _, d := range dbs {
		got = append(got, fmt.Sprint(d.Name, d.Schemas))
	}
	if s := strings.Join(got, " "); s != "mixed[wide cern] cern[cern] tmpl[cern] wide[wide cern]" {
		t.Errorf("databases read: %s", s)
	}
}

// One statement per shape reads every column once; its answer adds up by
// process, a sample without a delta counted, means weighed by samples.
func TestTotalsQuery(t *testing.T) {
	q := newTotalsQuery(schema.Wide)
	st := q.statement("WHERE true")
	if strings.Count(st, `sum("cpuTime.count_delta")`) != 1 || !strings.Contains(st, ` FROM "executor", `) {
		t.Errorf("statement %s", st)
	}
	n := func(f float64) json.Number { return json.Number(fmt.Sprint(f)) }
	row := make([]any, len(q.columns)+1)
	cpu, heap := q.at[schema.CPUTime], q.at[schema.JVMHeapMemory]
	row[cpu[0]], row[cpu[1]], row[cpu[2]] = n(250), n(2), n(3)
	out := map[string]accounting.ProcessTotals{}
	q.add(out, []influx.Series{{Name: "executor", Tags: map[string]string{"process": "1"}, Values: [][]any{row}}})
	heapRow := make([]any, len(q.columns)+1)
	heapRow[heap[0]], heapRow[heap[1]], heapRow[heap[2]] = n(40), n(30), n(2)
	q.add(out, []influx.Series{{Name: "ExecutorMetrics", Tags: map[string]string{"process": "1"}, Values: [][]any{heapRow}}})
	heapRow[heap[0]], heapRow[heap[1]], heapRow[heap[2]] = n(10), n(0), n(1)
	q.add(out, []influx.Series{{Name: "ExecutorMetrics", Tags: map[string]string{"process": "1"}, Values: [][]any{heapRow}}})
	p, key := out["1"], accounting.StreamKey(schema.JVMHeapMemory)
	if p.Sums["cpuTime.count"] != 250 || p.NoDelta["cpuTime.count"] != 1 || p.Peak[key] != 40 || p.Mean[key] != 20 || p.Samples[key] != 3 {
		t.Errorf("process 1: %+v", p)
	}
}
