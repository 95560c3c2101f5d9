package annotate

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/attempt"
)

// runTime is a process's totals of one report: its run time delta and a
// heap sample.
func runTime(ms, heap float64) map[string]ProcessTotals {
	return map[string]ProcessTotals{"1": {Sums: map[string]float64{"runTime.count": ms},
		Peak: map[string]float64{"JVMHeapMemory": heap}, Mean: map[string]float64{"JVMHeapMemory": heap}, Samples: map[string]float64{"JVMHeapMemory": 1}}}
}

// A streaming application reports every 10 s for three hours; estimates
// are read every 5 minutes. Each read spans at most 5 minutes and the
// minute reports may still arrive in, what is older is read once, and
// every estimate holds each report exactly once: the run time of every
// report up to its read, the heap's peak and its mean weighed by samples.
func TestEstimateWindows(t *testing.T) {
	start := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	f := &fakeStream{dated: []datedTotals{}}
	for s := 0; s < 3*3600; s += 10 {
		f.dated = append(f.dated, datedTotals{start.Add(time.Duration(s) * time.Second), runTime(1000, float64(s%600))})
	}
	p := &Poller{cfg: Config{Stream: f, UsageDelay: time.Minute}}
	st := newAppState(attempt.Key{App: "app-1", Start: start.UnixMilli()})
	for now := start.Add(5 * time.Minute); !now.After(start.Add(3 * time.Hour)); now = now.Add(5 * time.Minute) {
		f.asked = nil
		got, err := p.estimateStream(context.Background(), st, now)
		if err != nil {
			t.Fatal(err)
		}
		reports := float64(now.Sub(start) / (10 * time.Second)) // those stamped before now
		if r := got["1"].Sums["runTime.count"]; r != 1000*reports {
			t.Fatalf("at %s: run time %v, want %v", now.Sub(start), r, 1000*reports)
		}
		var sum, peak float64
		for s := 0.0; s < reports; s++ {
			sum += float64(int(s*10) % 600)
			peak = max(peak, float64(int(s*10)%600))
		}
		if pk := got["1"].Peak["JVMHeapMemory"]; pk != peak {
			t.Errorf("at %s: heap peak %v, want %v", now.Sub(start), pk, peak)
		}
		if m := got["1"].Mean["JVMHeapMemory"]; math.Abs(m-sum/reports) > 1e-9 {
			t.Errorf("at %s: heap mean %v, want %v", now.Sub(start), m, sum/reports)
		}
		for _, w := range f.asked {
			if span := w[1].Sub(w[0]); span > 6*time.Minute && now.Sub(start) > 10*time.Minute {
				t.Errorf("at %s: read %s to %s, %s", now.Sub(start), w[0].Sub(start), w[1].Sub(start), span)
			}
		}
		if want := now.Add(-time.Minute); !st.accTo.Equal(want) {
			t.Errorf("at %s: kept up to %s, want %s", now.Sub(start), st.accTo.Sub(start), want.Sub(start))
		}
	}
}

// An application's end reads its life a day at a time: a three-day run
// is four reads (the minute before its start included), none over 24 h,
// whose sums add up to every report.
func TestStreamChunks(t *testing.T) {
	start := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	f := &fakeStream{dated: []datedTotals{}}
	for h := 0; h < 72; h++ {
		f.dated = append(f.dated, datedTotals{start.Add(time.Duration(h) * time.Hour), runTime(1000, 1)})
	}
	p := &Poller{cfg: Config{Stream: f}}
	got, err := p.readStream(context.Background(), "app-1", start.Add(-time.Minute), start.Add(72*time.Hour+time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if r := got["1"].Sums["runTime.count"]; r != 72_000 {
		t.Errorf("run time %v, want 72000", r)
	}
	if len(f.asked) != 4 {
		t.Errorf("%d reads, want 4: %v", len(f.asked), f.asked)
	}
	for i, w := range f.asked {
		if w[1].Sub(w[0]) > attempt.StreamChunk || (i > 0 && !w[0].Equal(f.asked[i-1][1])) {
			t.Errorf("read %d: %v to %v", i, w[0], w[1])
		}
	}
}
