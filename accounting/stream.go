package accounting

import (
	"slices"

	"github.com/sparkpulse/sparkpulse/schema"
)

// ProcessTotals is what the stream says of one process.
type ProcessTotals struct {
	Sums       map[string]float64 // StreamKey of a StreamCounters metric → Σ delta
	NoDelta    map[string]int     // StreamKey of a StreamCounters metric → samples stored without a delta
	Peak, Mean map[string]float64 // StreamKey of a StreamGauges metric → max, mean of its value
	Samples    map[string]float64 // StreamKey of a StreamGauges metric → samples the mean is of; absent: weighed alike
	// TreePeak is the peak of the process tree's resident memory, JVM,
	// Python and other processes summed report by report: one moment's,
	// where the sum of each one's peak adds moments apart. 0: unknown
	// (a shape that stores them apart, or reports without all three).
	TreePeak float64
}

// MergeTotals adds src, read over a window that does not overlap dst's,
// to dst: sums and samples without a delta add up, peaks are the larger,
// means are weighed by their samples.
func MergeTotals(dst, src map[string]ProcessTotals) {
	for proc, s := range src {
		d, ok := dst[proc]
		if !ok {
			d = ProcessTotals{Sums: map[string]float64{}, NoDelta: map[string]int{}, Peak: map[string]float64{}, Mean: map[string]float64{}, Samples: map[string]float64{}}
		}
		for k, v := range s.Sums {
			d.Sums[k] += v
		}
		for k, v := range s.NoDelta {
			d.NoDelta[k] += v
		}
		for k, v := range s.Peak {
			if old, ok := d.Peak[k]; !ok || v > old {
				d.Peak[k] = v
			}
		}
		d.TreePeak = max(d.TreePeak, s.TreePeak)
		for k, v := range s.Mean {
			n, m := s.Samples[k], d.Samples[k]
			if n <= 0 {
				n = 1
			}
			if _, ok := d.Mean[k]; !ok {
				m = 0
			}
			d.Mean[k] = (d.Mean[k]*m + v*n) / (m + n)
			d.Samples[k] = m + n
		}
		dst[proc] = d
	}
}

// CloneTotals is a copy of src, its maps new.
func CloneTotals(src map[string]ProcessTotals) map[string]ProcessTotals {
	out := map[string]ProcessTotals{}
	MergeTotals(out, src)
	return out
}

// StreamCounters are the counters whose deltas the accounting and
// reconciliation sum.
var StreamCounters = []schema.Metric{schema.SucceededTasks, schema.CPUTime, schema.RunTime, schema.JVMGCTime,
	schema.BytesRead, schema.ShuffleRead, schema.ShuffleWritten, schema.CgroupCPU}

// TreeGauges are the parts of a process tree's resident memory: the
// JVM, its Python workers, its other children.
var TreeGauges = []schema.Metric{schema.JVMRSSMemory, schema.PythonRSSMemory, schema.OtherRSSMemory}

// StreamGauges are the gauges whose peak and mean the accounting reads.
var StreamGauges = append(slices.Clone(TreeGauges), schema.JVMHeapMemory)

// StreamKey is m's key in ProcessTotals' maps, whatever shape the stream
// is stored in: its measurement in the CERN shape ("cpuTime.count",
// "ch.cern.CgroupMetrics.CPUTimeNanosec"), for a gauge of ExecutorMetrics
// also its name in Spark's peakMemoryMetrics.
func StreamKey(m schema.Metric) string { return schema.CERN.Measurement(m) }
