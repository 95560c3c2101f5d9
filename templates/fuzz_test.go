package templates_test

import (
	"bytes"
	"testing"

	"github.com/sparkpulse/sparkpulse/templates"
	"github.com/sparkpulse/sparkpulse/templates/templatestest"
)

// fuzzLists are the template lists FuzzApply maps every path with.
var fuzzLists = []struct {
	tmpls  []string
	sep    string
	global []string
}{
	{tmpls: nil},
	{tmpls: cern, global: []string{"cluster=prod", "username=nobody"}},
	{tmpls: cern, sep: "_"},
	{tmpls: []string{
		"servers.* .host.measurement* zone=1c",
		"servers.localhost .host.measurement.field",
		"*.localhost host.host.measurement.region",
		"a.*.c.d measurement.field*",
		"a.* measurement.measurement.field.field host=dflt",
		"x measurement*.field*",
		"measurement.measurement.host.host",
	}, sep: "--", global: []string{"host=g", "dc=x"}},
	{tmpls: []string{"abc.*.worker.*.*.*.count measurement.m match=1", "abc.*.worker.* measurement.m match=2", "host=x.measurement"}},
}

func FuzzApply(f *testing.F) {
	for _, c := range applyCases {
		f.Add([]byte(c.path))
	}
	for _, p := range benchPaths {
		f.Add([]byte(p))
	}
	engines := make([]*templates.Engine, len(fuzzLists))
	for i, l := range fuzzLists {
		engines[i] = mustCompile(f, l.tmpls, l.sep, l.global)
	}
	var reused templates.Result
	f.Fuzz(func(t *testing.T, path []byte) {
		for i, e := range engines {
			var r templates.Result
			err := e.Apply(path, &r)
			errAgain := e.Apply(path, &reused)
			if (err == nil) != (errAgain == nil) {
				t.Fatalf("list %d, %q: fresh error %v, reused error %v", i, path, err, errAgain)
			}
			if err != nil {
				continue
			}
			if templatestest.Format(&r) != templatestest.Format(&reused) {
				t.Fatalf("list %d, %q: fresh %s, reused %s", i, path, templatestest.Format(&r), templatestest.Format(&reused))
			}
			if len(r.Measurement) == 0 || len(r.Field) == 0 {
				t.Fatalf("list %d, %q: empty measurement or field: %s", i, path, templatestest.Format(&r))
			}
			for j, tg := range r.Tags {
				if len(tg.Value) == 0 {
					t.Fatalf("list %d, %q: empty value for tag %q", i, path, tg.Key)
				}
				if j > 0 && bytes.Compare(r.Tags[j-1].Key, tg.Key) >= 0 {
					t.Fatalf("list %d, %q: tags not sorted and unique: %s", i, path, templatestest.Format(&r))
				}
			}
		}
	})
}

// benchPaths are Spark-shaped paths for the CERN list: default template,
// the jvm pools filter, the default again (the jvm filter has no process
// part), streaming, shuffle service and a dead end.
var benchPaths = []string{
	"lucatest.app-20240101120000-0001.1.executor.cpuTime.count",
	"lucatest.app-20240101120000-0001.jvm.pools.G1-Eden-Space.usage",
	"lucatest.app-20240101120000-0001.driver.jvm.pools.G1-Eden-Space.usage",
	"lucatest.app-20240101120000-0001.driver.spark.streaming.query1.inputRate-total",
	"host1.shuffleService.blockTransferRateBytes.count",
	"lucatest.app-20240101120000-0001.driver.jvm.heap.used",
}

func BenchmarkApply(b *testing.B) {
	for _, sep := range []string{".", "_"} {
		e := mustCompile(b, cern, sep, []string{"cluster=prod"})
		for _, p := range benchPaths {
			path := []byte(p)
			b.Run("sep="+sep+"/"+p, func(b *testing.B) {
				b.ReportAllocs()
				var r templates.Result
				for b.Loop() {
					if err := e.Apply(path, &r); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
