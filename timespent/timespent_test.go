package timespent

import (
	"slices"
	"strings"
	"testing"
)

// Each rule by hand, at and just below its threshold.
func TestRules(t *testing.T) {
	for _, c := range []struct {
		name  string
		s     Stage
		rules []string
		text  string // in the first verdict
		note  string
	}{{
		// 200 tasks, median 1 s, the longest 41 s of a 100 s stage: 41×
		// the median, 41 % of the stage.
		// It read 2 GiB where the median task read 50 MiB: a big key.
		name: "skewed",
		s: Stage{ID: 3, DurationMs: 100_000, Tasks: 200, Detailed: true, TaskMedianMs: 1000, TaskMaxMs: 41_000,
			TaskMedianBytes: 50 << 20, TaskMaxBytes: 2 << 30, StragglerHost: "node-7", StragglerExecutor: "12", RunTimeMs: 240_000},
		rules: []string{"skewed"},
		text:  "the longest task took 41s, 41× the median 1s and 41 % of the stage; the largest task read 2.0 GiB, the median 50 MiB, on node-7 (executor 12)",
	}, {
		// The same times, but no task read more than 1.2× the median's
		// bytes: a slow host or GC, not the data. Salting would not help.
		name: "straggler, not skew",
		s: Stage{ID: 3, DurationMs: 100_000, Tasks: 200, Detailed: true, TaskMedianMs: 1000, TaskMaxMs: 41_000,
			TaskMedianBytes: 50 << 20, TaskMaxBytes: 60 << 20, StragglerHost: "node-7", StragglerExecutor: "12", StragglerGCMs: 30_000, RunTimeMs: 240_000},
		rules: []string{"straggler"},
		text:  "the longest task took 41s, 41× the median 1s and 41 % of the stage, though no task read 4× the median's 50 MiB: a slow task, not a big one, on node-7 (executor 12), 30s of it in GC",
	}, {
		// 3.9× the median's bytes: under the ratio, a straggler.
		name: "bytes just under the skew ratio",
		s: Stage{ID: 3, DurationMs: 100_000, Detailed: true, TaskMedianMs: 1000, TaskMaxMs: 41_000,
			TaskMedianBytes: 100 << 20, TaskMaxBytes: 390 << 20, RunTimeMs: 240_000},
		rules: []string{"straggler"},
	}, {
		// Run-time skew in a stage that read nothing (data made in the
		// stage): bytes cannot tell a big key from a slow task.
		name: "nothing read: not judged",
		s:    Stage{ID: 3, DurationMs: 100_000, Detailed: true, TaskMedianMs: 1000, TaskMaxMs: 41_000, RunTimeMs: 240_000},
	}, {
		// 40× the median but only 10 % of a stage whose waves took the
		// time: not held up by one task.
		name: "uneven, not held up",
		s:    Stage{ID: 4, DurationMs: 400_000, Detailed: true, TaskMedianMs: 1000, TaskMaxMs: 40_000, RunTimeMs: 1_000_000},
	}, {
		// 3.9× the median and half the stage: under the ratio.
		name: "just under the skew ratio",
		s:    Stage{ID: 5, DurationMs: 20_000, Detailed: true, TaskMedianMs: 2564, TaskMaxMs: 10_000, RunTimeMs: 50_000},
	}, {
		// 30 s of GC in 300 s of task time: 10 %.
		name:  "gc",
		s:     Stage{ID: 6, DurationMs: 60_000, RunTimeMs: 300_000, GCTimeMs: 30_000},
		rules: []string{"gc"},
		text:  "garbage collection took 10 % of task time (30s of 5m0s)",
	}, {
		// 2 GiB spilled while reading 3 GiB: over half, over 100 MiB.
		name:  "spill",
		s:     Stage{ID: 7, DurationMs: 60_000, RunTimeMs: 100_000, InputBytes: 1 << 30, ShuffleReadBytes: 2 << 30, DiskSpilledBytes: 2 << 30},
		rules: []string{"spill"},
		text:  "tasks spilled 2.0 GiB to disk, reading 3.0 GiB",
	}, {
		// 90 MiB spilled of 100 MiB read: under the 100 MiB floor.
		name: "small spill",
		s:    Stage{ID: 8, DurationMs: 60_000, RunTimeMs: 100_000, InputBytes: 100 << 20, DiskSpilledBytes: 90 << 20},
	}, {
		// 12 % GC under ZGC: its GC time is concurrent cycles, not
		// pauses; no verdict, a note.
		name: "gc under ZGC",
		s:    Stage{ID: 10, DurationMs: 60_000, RunTimeMs: 100_000, GCTimeMs: 12_000, ConcurrentGC: "ZGC"},
		note: "GC time 12 % of task time under ZGC is its concurrent cycles', not pauses: not judged",
	}, {
		// 25 s of fetch wait in 100 s of task time.
		name:  "fetch wait",
		s:     Stage{ID: 9, DurationMs: 60_000, RunTimeMs: 100_000, FetchWaitMs: 25_000},
		rules: []string{"fetch_wait"},
		text:  "tasks waited for shuffle data 25 % of their run time (25s)",
	}} {
		t.Run(c.name, func(t *testing.T) {
			r := Judge([]Stage{c.s}, nil, 5)
			var rules []string
			for _, v := range r.Slowest[0].Verdicts {
				rules = append(rules, v.Rule)
			}
			if !slices.Equal(rules, c.rules) {
				t.Fatalf("rules %q, want %q", rules, c.rules)
			}
			if c.text != "" && r.Slowest[0].Verdicts[0].Text != c.text {
				t.Errorf("text %q, want %q", r.Slowest[0].Verdicts[0].Text, c.text)
			}
			if !strings.Contains(r.Slowest[0].Note, c.note) {
				t.Errorf("note %q, want it to say %q", r.Slowest[0].Note, c.note)
			}
		})
	}
}

// The slowest first, and failed tasks by class, the most frequent first.
func TestJudge(t *testing.T) {
	stages := []Stage{{ID: 1, DurationMs: 5_000, Name: "a"}, {ID: 2, DurationMs: 50_000, Name: "b", Detailed: true, TaskMedianMs: 100, TaskMaxMs: 110},
		{ID: 3, DurationMs: 20_000, Name: "c"}}
	failures := []Failure{
		{Stage: 3, Class: "java.lang.OutOfMemoryError", Kind: "oom", Executor: "5"},
		{Stage: 2, Class: "FetchFailed", Kind: "fetch_failed", Executor: "1"},
		{Stage: 3, Class: "java.lang.OutOfMemoryError", Kind: "oom", Executor: "3"},
		{Stage: 3, Class: "java.lang.OutOfMemoryError", Kind: "oom", Executor: "5"},
	}
	r := Judge(stages, failures, 2)
	if len(r.Slowest) != 2 || r.Slowest[0].ID != "2.0" || r.Slowest[1].ID != "3.0" || r.StageTimeMs != 75_000 || r.Stages != 3 {
		t.Errorf("report %+v", r)
	}
	if r.Slowest[1].Note == "" || r.Slowest[0].Note != "" {
		t.Error("a stage without details must say so, one with them not")
	}
	want := "  3 × java.lang.OutOfMemoryError (oom) in stages 3 on executors 5, 3\n  1 × FetchFailed (fetch_failed) in stages 2 on executors 1\n"
	if text := r.Text(); !strings.HasSuffix(text, want) {
		t.Errorf("text:\n%s\nwant it to end with\n%s", text, want)
	}
}

func TestDuration(t *testing.T) {
	for ms, want := range map[int64]string{51: "51ms", 4230: "4.2s", 125_400: "2m5s"} {
		if got := Duration(ms); got != want {
			t.Errorf("Duration(%d) = %q, want %q", ms, got, want)
		}
	}
}
