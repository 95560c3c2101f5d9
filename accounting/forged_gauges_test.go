package accounting

import (
	"slices"
	"testing"

	"github.com/sparkpulse/sparkpulse/sizing"
)

// Forged gauges, each in a shape of its own, must leave an ended
// application's peak resident memory and its advice as a genuine stream
// gives them, or set the figure aside and say so: never change the advice
// without a word, nor make it vanish.
func TestForgedGauges(t *testing.T) {
	for _, master := range []string{"yarn", "k8s://https://10.0.0.1:6443", "spark://10.0.0.1:7077"} {
		control := accountOf(t, master, genuine())
		for _, tc := range []struct {
			name  string
			forge func(map[string]ProcessTotals)
		}{
			{"60 GiB of resident memory", func(s map[string]ProcessTotals) { s["1"].Peak["ProcessTreeJVMRSSMemory"] = 60 << 30 }},
			{"overflowing resident and Python memory", func(s map[string]ProcessTotals) {
				s["1"].Peak["ProcessTreeJVMRSSMemory"], s["1"].Peak["ProcessTreePythonRSSMemory"] = 9.2e18, 9.2e18
			}},
			{"resident memory within the container", func(s map[string]ProcessTotals) { s["1"].Peak["ProcessTreeJVMRSSMemory"] = 4.8 * (1 << 30) }},
			{"a heap at the heap's limit", func(s map[string]ProcessTotals) { s["1"].Peak["JVMHeapMemory"] = 4 << 30 }},
			{"Python workers of 3 GiB", func(s map[string]ProcessTotals) { s["1"].Peak["ProcessTreePythonRSSMemory"] = 3 << 30 }},
			{"other processes of 2 GiB", func(s map[string]ProcessTotals) { s["2"].Peak["ProcessTreeOtherRSSMemory"] = 2 << 30 }},
		} {
			t.Run(master+"/"+tc.name, func(t *testing.T) {
				stream := genuine()
				tc.forge(stream)
				got := accountOf(t, master, stream)
				same := got.u.PeakRSS == control.u.PeakRSS && slices.Equal(recommendedOf(got.a), recommendedOf(control.a))
				if !same && len(got.u.SetAside) == 0 {
					t.Errorf("peak RSS %d, advice %v, nothing set aside; a genuine stream: %d, %v",
						got.u.PeakRSS, recommendedOf(got.a), control.u.PeakRSS, recommendedOf(control.a))
				}
				if !same {
					t.Errorf("peak RSS %d, advice %v (set aside %q); want a genuine stream's %d, %v",
						got.u.PeakRSS, recommendedOf(got.a), got.u.SetAside, control.u.PeakRSS, recommendedOf(control.a))
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
