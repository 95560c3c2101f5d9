package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sparkpulse/sparkpulse/attempt"
	"github.com/sparkpulse/sparkpulse/human"
	"github.com/sparkpulse/sparkpulse/influx"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/sizing"
	"github.com/sparkpulse/sparkpulse/sparkapi"
)

// A task lost with its executor is classed with why the executor went,
// as its removal reads: memory (container_oom) is told from a kill.
func TestWhereTimeWentLostExecutors(t *testing.T) {
	lost := func(exec string) sparkapi.TaskData {
		return sparkapi.TaskData{ExecutorID: exec, Status: "FAILED",
			ErrorMessage: "ExecutorLostFailure (executor " + exec + " exited caused by one of the running tasks) Reason: lost"}
	}
	read := []attempt.StageRead{{Stage: sparkapi.Stage{StageID: 3, Status: "FAILED", NumFailedTasks: 3},
		Failed: []sparkapi.TaskData{lost("1"), lost("1"), lost("2")}}}
	var as attempt.Assessment
	as.Application.Executors = []sizing.Executor{
		{ID: "1", RemoveReason: "Container killed by YARN for exceeding physical memory limits. 4.5 GB of 4.5 GB physical memory used."},
		{ID: "2"},
	}
	var got []string
	for _, f := range whereTimeWent(read, as, DefaultStages).Failures {
		got = append(got, fmt.Sprintf("%s %s %d", f.Class, f.Kind, f.Tasks))
	}
	if want := []string{"ExecutorLostFailure (container_oom) executor_lost 2", "ExecutorLostFailure executor_lost 1"}; !slices.Equal(got, want) {
		t.Errorf("failures %q, want %q", got, want)
	}
}

// Spark 4 counts a task's cpus in its run time: a stage whose tasks of 2
// cpus spent 15 % of their wall time in GC (the rule's bar is 10 %) reads
// so on 4.x, where Spark reports twice the run time (7.5 % of it), as on
// 3.5, where it does not; and a stage at 8 % fires on neither.
func TestWhereTimeWentTaskCPUs(t *testing.T) {
	for _, tc := range []struct {
		runTimeCPUs int
		runMs, gcMs int64
		gc          bool
	}{
		{1, 100_000, 15_000, true}, // 3.5: run time is wall time
		{2, 200_000, 15_000, true}, // 4.x, task.cpus 2: twice the wall time
		{2, 200_000, 8_000, false},
		{1, 100_000, 8_000, false},
	} {
		read := []attempt.StageRead{{Stage: sparkapi.Stage{StageID: 1, Status: "COMPLETE", NumTasks: 8,
			ExecutorRunTime: tc.runMs, JVMGCTime: tc.gcMs}}}
		var as attempt.Assessment
		as.Usage.RunTimeCPUs = tc.runTimeCPUs
		fired := false
		for _, s := range whereTimeWent(read, as, DefaultStages).Slowest {
			for _, v := range s.Verdicts {
				fired = fired || v.Rule == "gc"
			}
		}
		if fired != tc.gc {
			t.Errorf("run time counting %d cpus, %d ms of it, GC %d ms: gc verdict %v, want %v", tc.runTimeCPUs, tc.runMs, tc.gcMs, fired, tc.gc)
		}
	}
}

// spark_app_usage rows become applications ranked by idle core-hours,
// then GiB-hours, then id; the totals add them up, a lost one counted,
// and the text says so.
func TestFleetRankAndText(t *testing.T) {
	n := func(f float64) json.Number { return json.Number(strconv.FormatFloat(f, 'g', -1, 64)) } // as InfluxDB's answers are read
	s := influx.Series{Name: schema.MeasurementUsage,
		Columns: []string{"time", "applicationid", "app_id", "appname", "user", "duration_ms", "executors", "executor_core_seconds",
			"executor_memory_byte_seconds", "busy_slot_seconds", "mean_memory_utilisation", "outcome", "recommended", "lost_task_seconds"},
		Values: [][]any{
			{"2026-11-25T10:00:00Z", "ns.a", "app-a", "a", "ann", n(3600000), n(2), n(7200), n(2 * gibHour), n(7200), n(0.5), "succeeded", "", nil},
			{"2026-11-25T11:00:00Z", "app-b", nil, "b", "bob", n(1800000), n(4), n(14400), n(4 * gibHour), n(3600), nil, "driver_lost", "--conf spark.executor.cores=2", n(1800)},
		}}
	r := Fleet{SinceText: "7d", Database: "spark", Applications: appendFleetApps(nil, s)}
	r.rank()
	var ids []string
	for _, a := range r.Applications {
		ids = append(ids, a.Application)
	}
	if want := []string{"app-b", "app-a"}; !slices.Equal(ids, want) {
		t.Errorf("order %q, want %q (most idle first)", ids, want)
	}
	a := r.Applications[1]
	if a.MetricsKey != "ns.a" || a.IdleCoreHours != 0 || a.UnusedGiBHours != 1 {
		t.Errorf("app-a: %+v", a)
	}
	tot := r.Totals
	if tot.Applications != 2 || tot.CoreHours != 6 || tot.IdleCoreHours != 3 || tot.Lost != 1 || tot.LostTaskHours != 0.5 {
		t.Errorf("totals %+v", tot)
	}
	var out bytes.Buffer
	printFleet(&out, r, true)
	for _, want := range []string{
		"2 applications ended in the last 7d (database spark), 1 of them lost while running",
		"lost to failed and killed tasks: 0.5 task-hours",
		"  app-b: --conf spark.executor.cores=2",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "GPU") {
		t.Errorf("GPUs where none were held:\n%s", out.String())
	}

	// GPUs held, by the executors and the driver, and what the advice
	// saves of them: beside core- and GiB-hours.
	s.Columns = append(s.Columns, "executor_gpu_seconds", "driver_gpu_seconds", "saving_gpu_seconds")
	s.Values[0] = append(s.Values[0], n(7200), n(3600), n(1800))
	s.Values[1] = append(s.Values[1], nil, nil, nil)
	r = Fleet{SinceText: "7d", Database: "spark", Applications: appendFleetApps(nil, s)}
	r.rank()
	if r.Totals.GPUHours != 3 || r.Totals.SavingGPUHours != 0.5 {
		t.Errorf("GPU totals %+v", r.Totals)
	}
	out.Reset()
	printFleet(&out, r, false)
	for _, want := range []string{"GPUs: 3.0 GPU-hours held", "0.5 GPU-hours (17 %) less"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	}
}

// Without --wide, the table and the totals fit FleetWidth columns with
// the longest figures a fleet has, names are cut, and small figures keep
// two significant digits; --wide has every column.
func TestFleetFitsWidth(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	r := Fleet{SinceText: "30d", Database: "spark"}
	for i, a := range []FleetApp{
		{Application: "app-20261125210947-0003", Name: "a-name-far-longer-than-any-column", User: "etl-service-account",
			Outcome: "driver_lost", DurationMs: 36*3600*1000 + 59*60*1000 + 59*1000, Executors: 1200, CoreHours: 9999.9, GiBHours: 99999.9,
			IdleCoreHours: 9999.9, UnusedGiBHours: 99999.9, SavingCoreHours: -9999.9, SavingGiBHours: -99999.9,
			SlotOccupancy: f(1), CPUUtilisation: f(1.06), MemoryUtilisation: f(1.5), Recommended: "--conf spark.executor.memoryOverhead=1664m"},
		{Application: "application_1795869601720_0002", Name: "short", Outcome: "succeeded", DurationMs: 65000, Executors: 2,
			CoreHours: 0.031, GiBHours: 0.0123, IdleCoreHours: 0.004, SavingCoreHours: 0.0021},
		{Application: "spark-0123456789abcdef0123456789abcdef", Name: "on-kubernetes-with-a-long-name", Outcome: "failed",
			DurationMs: 1000, CoreHours: 9999.9, IdleCoreHours: 9999.9, SavingCoreHours: -9999.9,
			SlotOccupancy: f(1), CPUUtilisation: f(1.06), MemoryUtilisation: f(1.5)},
	} {
		r.Applications = append(r.Applications, a)
		r.Totals.Applications++
		r.Totals.CoreHours += a.CoreHours
		_ = i
	}
	var narrow, wide bytes.Buffer
	printFleet(&narrow, r, false)
	printFleet(&wide, r, true)
	inRecommended := false
	for _, l := range strings.Split(narrow.String(), "\n") {
		inRecommended = inRecommended || l == "recommended:"
		if n := len([]rune(l)); n > FleetWidth && !inRecommended {
			t.Errorf("%d columns: %q", n, l)
		}
	}
	for _, want := range []string{"a-name-fa…", "on-kubern…", " 0.031 ", " 1m5s ", "--wide: "} {
		if !strings.Contains(narrow.String(), want) {
			t.Errorf("no %q in:\n%s", want, narrow.String())
		}
	}
	for _, want := range []string{"a-name-far-longer-than-any-column", "etl-service-account", "unused GiB-h", " 0.012 "} {
		if !strings.Contains(wide.String(), want) {
			t.Errorf("--wide: no %q in:\n%s", want, wide.String())
		}
	}
}

// Hours read as a person reads them; savings and costs as the fleet
// counts them.
func TestHoursAndSaving(t *testing.T) {
	got := []string{hours(36000), hours(720), hours(0),
		saving(sizing.Setting{SavingCoreSeconds: 7200, SavingByteSeconds: -gibHour / 2})}
	want := []string{"10.0", "0.2", "0.0", "; saves 2.0 core-hours; costs 0.5 GiB-hours"}
	got = append(got, saving(sizing.Setting{SavingCoreSeconds: 7200, SavingGPUSeconds: 3600}))
	want = append(want, "; saves 2.0 core-hours, 1.0 GPU-hours")
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if s := fmt.Sprint(human.Count(1, "executor"), ", ", human.Count(2, "executor"), ", ", human.Bytes(3<<29)); s != "1 executor, 2 executors, 1.5 GiB" {
		t.Errorf("%s", s)
	}
}
