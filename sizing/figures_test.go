package sizing

import (
	"slices"
	"strings"
	"testing"
)

// Driver-only time, worked by hand on a 100 s application.
func TestDriverOnly(t *testing.T) {
	for _, tc := range []struct {
		name     string
		spans    []Span
		from, to int64
		want     int64
	}{
		// 10–30 and 20–50 overlap: 10–50 counts once (40 s); 70–80 adds 10:
		// 50 s of stages, 50 s with none.
		{"overlapping stages count once", []Span{{10, 30}, {20, 50}, {70, 80}}, 0, 100, 50},
		// A stage inside another adds nothing; two that touch leave no gap.
		{"nested and touching", []Span{{10, 60}, {20, 30}, {60, 70}}, 0, 100, 40},
		// A stage submitted before the start, or running past the end (a
		// running stage read at 95), is clipped: 0–5 and 90–95.
		{"clipped to the application", []Span{{-5, 5}, {90, 200}}, 0, 95, 85},
		// Spans out of the range, or ending before they start, cover nothing.
		{"outside the range", []Span{{-20, -10}, {120, 130}, {50, 40}}, 0, 100, 100},
		{"no stage at all", nil, 0, 100, 100},
		{"stages all the time", []Span{{0, 60}, {40, 100}}, 0, 100, 0},
		{"an empty range", []Span{{0, 10}}, 50, 50, 0},
	} {
		if got := DriverOnly(tc.spans, tc.from, tc.to); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

// Slot occupancy is Σ task run time ÷ executor core-seconds held, and
// absent whenever the task times are unknown.
func TestSlotOccupancy(t *testing.T) {
	s, err := FromProperties(map[string]string{"spark.executor.memory": "4g"})
	if err != nil {
		t.Fatal(err)
	}
	r := Resources{ExecutorCores: 4, DriverCores: 1}
	// Two executors of 4 cores for 100 s: 800 core-seconds held; 200 s of
	// task run time (and only 50 s of CPU: a PySpark job's tasks wait on
	// their Python workers): the slots were busy 25 % of the time, though
	// the CPU says 6.25 %.
	execs := []Executor{
		{ID: "driver", AliveMs: 100_000},
		{ID: "1", Cores: 4, AliveMs: 100_000, CPUNs: 30e9, RunMs: 150_000},
		{ID: "2", Cores: 4, AliveMs: 100_000, CPUNs: 20e9, RunMs: 50_000},
	}
	u := Account(s, r, execs, 100_000)
	if u.SlotOccupancy == nil || *u.SlotOccupancy != 0.25 || u.CPUUtilisation != 0.0625 {
		t.Fatalf("occupancy %v, CPU %v; want 0.25 and 0.0625", u.SlotOccupancy, u.CPUUtilisation)
	}
	// From the stage list instead: 400 s of run time, failed tasks' too.
	u.TaskTimesFromStages(60e9, 400_000)
	if u.SlotOccupancy == nil || *u.SlotOccupancy != 0.5 {
		t.Errorf("from the stages: %v, want 0.5", u.SlotOccupancy)
	}
	// Must not: a figure when the task times are unknown.
	u.TaskTimesUnknown("set aside")
	if u.SlotOccupancy != nil {
		t.Errorf("unknown task times: occupancy %v", *u.SlotOccupancy)
	}
	noStream := []Executor{{ID: "1", Cores: 4, AliveMs: 100_000}}
	if u := Account(s, r, noStream, 100_000); u.SlotOccupancy != nil || !strings.Contains(strings.Join(u.Notes, ";"), noTaskCPU) {
		t.Errorf("no task counters: occupancy %v, notes %q", u.SlotOccupancy, u.Notes)
	}
	// Nor when no core was held: no executor ever ran.
	if u := Account(s, r, []Executor{{ID: "driver", AliveMs: 100_000}}, 100_000); u.SlotOccupancy != nil {
		t.Errorf("no executor: occupancy %v", *u.SlotOccupancy)
	}
}

// Spark 4 counts a task's spark.task.cpus in its run time; 3.5 does not.
// A slot's occupancy is the same figure either way: tasks of 2 cpus that
// ran 100 s of wall time on 800 core-seconds held are 25 % busy.
func TestSlotOccupancyTaskCPUs(t *testing.T) {
	for _, tc := range []struct {
		version string
		runMs   int64 // what Spark reports for 100 s of wall time
		want    int   // RunTimeCPUs
	}{
		{"3.5.9", 100_000, 1},
		{"3.5.0", 100_000, 1},
		{"", 100_000, 1}, // unknown: as before 4.0
		{"not a version", 100_000, 1},
		{"4.0.0", 200_000, 2},
		{"4.0.1", 200_000, 2},
		{"4.3.0", 200_000, 2},
		{"4.1.0-SNAPSHOT", 200_000, 2},
	} {
		if got := RunTimeCPUs(tc.version, 2); got != tc.want {
			t.Errorf("RunTimeCPUs(%q, 2) = %d, want %d", tc.version, got, tc.want)
		}
		s, _ := FromProperties(map[string]string{"spark.executor.memory": "4g"})
		r := Resources{ExecutorCores: 4, DriverCores: 1, TaskCPUs: 2, RunTimeCPUs: RunTimeCPUs(tc.version, 2)}
		execs := []Executor{
			{ID: "1", Cores: 4, AliveMs: 100_000, CPUNs: 30e9, RunMs: tc.runMs * 3 / 4},
			{ID: "2", Cores: 4, AliveMs: 100_000, CPUNs: 20e9, RunMs: tc.runMs / 4},
		}
		u := Account(s, r, execs, 100_000)
		if u.SlotOccupancy == nil || *u.SlotOccupancy != 0.25 || u.BusySlotSeconds != 200 {
			t.Errorf("Spark %q: occupancy %v, busy slot-seconds %v; want 0.25 and 200", tc.version, u.SlotOccupancy, u.BusySlotSeconds)
		}
	}
	if got := RunTimeCPUs("4.0.0", 0); got != 1 {
		t.Errorf("RunTimeCPUs(4.0.0, 0) = %d, want 1", got)
	}
}

// Gaps are the stretches no span covers, overlapping spans counting
// once; together they are DriverOnly.
func TestGaps(t *testing.T) {
	spans := []Span{{100, 200}, {150, 300}, {500, 600}, {900, 1200}}
	got := Gaps(spans, 0, 1000)
	if want := []int64{100, 200, 300}; !slices.Equal(got, want) {
		t.Errorf("Gaps = %v, want %v", got, want)
	}
	var sum int64
	for _, g := range got {
		sum += g
	}
	if d := DriverOnly(spans, 0, 1000); d != sum {
		t.Errorf("DriverOnly %d, the gaps' sum %d", d, sum)
	}
	if got := Gaps(nil, 0, 50); !slices.Equal(got, []int64{50}) {
		t.Errorf("no span: %v", got)
	}
	if got := Gaps([]Span{{0, 50}}, 0, 50); len(got) != 0 {
		t.Errorf("all covered: %v", got)
	}
}
