package accounting

import (
	"slices"
	"strings"
	"testing"

	"github.com/sparkpulse/sparkpulse/sizing"
)

// Forged gauges, each in a shape of its own, must leave an ended
// application's peak resident memory and its advice as a genuine stream
// gives them, or set the figure aside and say so: never change the advice
// without a word, nor make it vanish. Memory within what a container
// lets an executor hold, or any on standalone, cannot be told from a
// genuine peak Spark missed: the advice follows it, and the usage says
// the figure is the stream's alone.
func TestForgedGauges(t *testing.T) {
	const standalone = "spark://10.0.0.1:7077"
	for _, master := range []string{"yarn", "k8s://https://10.0.0.1:6443", standalone} {
		control := accountOf(t, master, genuine())
		for _, tc := range []struct {
			name  string
			forge func(map[string]ProcessTotals)
			// mustHold: the advice must be the genuine stream's, or the
			// figure set aside; otherwise, and on standalone where no
			// container holds an executor (Spark's peaks are no bound: they
			// miss the polls between stages), a note saying the figure is
			// the stream's alone may stand in.
			mustHold bool
		}{
			{"60 GiB of resident memory", func(s map[string]ProcessTotals) { s["1"].Peak["ProcessTreeJVMRSSMemory"] = 60 << 30 }, true},
			{"overflowing resident and Python memory", func(s map[string]ProcessTotals) {
				s["1"].Peak["ProcessTreeJVMRSSMemory"], s["1"].Peak["ProcessTreePythonRSSMemory"] = 9.2e18, 9.2e18
			}, true},
			{"resident memory within the container", func(s map[string]ProcessTotals) { s["1"].Peak["ProcessTreeJVMRSSMemory"] = 4.8 * (1 << 30) }, false},
			{"a heap at the heap's limit", func(s map[string]ProcessTotals) { s["1"].Peak["JVMHeapMemory"] = 4 << 30 }, true},
			{"Python workers of 3 GiB", func(s map[string]ProcessTotals) { s["1"].Peak["ProcessTreePythonRSSMemory"] = 3 << 30 }, false},
			{"other processes of 2 GiB", func(s map[string]ProcessTotals) { s["2"].Peak["ProcessTreeOtherRSSMemory"] = 2 << 30 }, true},
		} {
			t.Run(master+"/"+tc.name, func(t *testing.T) {
				stream := genuine()
				tc.forge(stream)
				got := accountOf(t, master, stream)
				same := got.u.PeakRSS == control.u.PeakRSS && slices.Equal(recommendedOf(got.a), recommendedOf(control.a))
				noted := slices.ContainsFunc(got.u.Notes, func(n string) bool { return strings.Contains(n, "from the metrics stream alone") })
				switch {
				case same:
				case len(got.u.SetAside) > 0:
					t.Errorf("peak RSS %d, advice %v, though %q was set aside; want a genuine stream's %d, %v",
						got.u.PeakRSS, recommendedOf(got.a), got.u.SetAside, control.u.PeakRSS, recommendedOf(control.a))
				case !noted || tc.mustHold && master != standalone:
					t.Errorf("peak RSS %d, advice %v, nothing set aside (notes %q); a genuine stream: %d, %v",
						got.u.PeakRSS, recommendedOf(got.a), got.u.Notes, control.u.PeakRSS, recommendedOf(control.a))
				}
			})
		}
	}
}

type accounted struct {
	u sizing.Usage
	a sizing.Advice
}

// accountOf is screenApp's accounting and advice on master, from stream.
func accountOf(t *testing.T, master string, stream map[string]ProcessTotals) accounted {
	t.Helper()
	a := screenApp()
	a.Properties["spark.master"] = master
	a.Stream, a.StreamRead = stream, true
	res, err := Account(a, ms(at(600)))
	if err != nil {
		t.Fatal(err)
	}
	adv := sizing.Advise(res.Settings, res.Executors)
	sizing.RightSize(&adv, res.Settings, res.Resources, res.Usage, res.Executors, res.FailureReasons)
	return accounted{res.Usage, adv}
}
