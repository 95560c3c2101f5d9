package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
	"github.com/sparkpulse/sparkpulse/simulate"
)

// compatScenario is one [[graphite]] block and the lines sent to it.
type compatScenario struct {
	name      string
	separator string
	templates []string
	tags      []string
	lines     []string
	// refOnly are points InfluxDB's listener stores that sparkpulse
	// knowingly refuses, each with a counted drop (see docs/security.md, "Limits").
	refOnly []string
}

// T is the timestamp of most compat lines.
const T = "1795300000"

var compatScenarios = []compatScenario{
	{
		// The CERN Spark dashboard's template list, with Spark's own paths.
		name:      "cern",
		separator: ".",
		templates: simulate.CERNTemplates,
		lines: []string{
			"lucatest.app-20240101120000-0001.1.executor.threadpool.activeTasks 3 " + T,
			"lucatest.app-20240101120000-0001.1.executor.cpuTime.count 81234 " + T,
			"lucatest.app-20240101120000-0001.driver.jvm.pools.G1-Eden-Space.used 5 " + T,
			"lucatest.app-20240101120000-0001.driver.jvm.pools.CodeHeap-'non-nmethods'.used 1398016 " + T,
			"lucatest.app-20240101120000-0001.driver.spark.streaming.myQuery.inputRate-total 1532.40 " + T,
			"lucatest.application_1709816012523_4307.applicationMaster.numExecutorsRunning 10 " + T,
			"lucatest.shuffleService.blockTransferRateBytes.m1_rate 1048576.00 " + T,
			"lucatest.app-20240101120000-0001.driver.LiveListenerBus.listenerProcessingTime.org.apache.spark.ExecutorAllocationManager$ExecutorAllocationListener.count 20411 " + T,
			"app-20240101120000-0001.1.executor.threadpool.activeTasks 2 " + T,
			"app-20240101120000-0001.driver.jvm.pools.G1-Eden-Space.used 7 " + T,
			"lucatest.master.aliveWorkers 3 " + T,
			"lucatest.app-20240101120000-0001.1.jvm.pools.G1-Survivor-Space.usage NaN " + T,
			"lucatest.app-20240101120000-0001.1.jvm.pools.Metaspace.usage Infinity " + T,
		},
	},
	{
		// The odd cases of the template language, with a separator that is
		// not "." and global tags.
		name:      "odd",
		separator: "_",
		// A line dated 2038 is beyond max-future: sparkpulse drops it,
		// counted as "future".
		refOnly: []string{"#hash.x,dc=east,host=global value=34 1795300000000000000",
			"hi,dc=east,host=global value=1 2147472000000000000"},
		tags: []string{"dc=east", "host=global"},
		templates: []string{
			"cpu.* measurement.host.measurement region=us-west",
			"mem.* measurement.field*",
			"disk.* measurement.field.field",
			"net.* measurement*.field*",
			"srv.* host.host.measurement",
			"tag.* measurement.host host=dflt",
			"skip.* .measurement..field",
			"system.*.loadavg measurement.host.metric",
			"system.foo.sensors measurement.host.sensor",
			"a.* measurement.x",
			"a.*.c.d measurement.x.y.z",
			"abc.*.worker.* measurement.host.w.kind match=2",
			"abc.*.worker.*.*.*.count measurement.m.m.m.m.m.m match=1",
			"time.* measurement.time",
			"fld.* measurement.field.field*",
			"long.* measurement.host.region.rack.extra",
			"servers.*.cpu measurement*.host",
		},
		lines: []string{
			"cpu.server01.load 1 " + T,
			"cpu..load 2 " + T,
			"mem.used.free.bytes 3 " + T,
			"disk.sda.read 4 " + T,
			"disk..read 5 " + T,
			"net.eth0.rx 6 " + T,
			"srv.a.b.cpu 7 " + T,
			"tag.server01 8 " + T,
			"skip.x.cpu.y.idle 9 " + T,
			"system.foo.loadavg.1m 10 " + T,
			"system.bar.loadavg.1m 11 " + T,
			"a.b.c.q 12 " + T,
			"a.b 13 " + T,
			"abc.hostA.worker.bookmarks.COUNTER.bookmarks-messages 14 " + T,
			"time.x 15 " + T,
			"fld.a.b.c 16 " + T,
			"long.h1 17 " + T,
			"servers.s1.cpu.total 18 " + T,
			"unmatched.path.here 19 " + T,
			"x 0x1p-2 " + T,
			"y 1_000 " + T,
			"z -.5e1 1435077219.123",
			"z2 +1 1435077219.5",
			"neg 1 -1.5",
			"lo 1 -2147558400",
			"hi 1 2147472000",
			"over 1 2147472001",
			"under 1 -2147558401",
			"nbsp\u00a020\u00a0" + T,
			"\ttabs\t21\t" + T,
			"a,b=c 22 " + T,
			"e..mpty. 23 " + T,
			"toomany 1 2 3",
			"bare",
			"hex 0x10 " + T,
			"comma 1,5 " + T,
			"big 1e400 " + T,
			"nan nan " + T,
			"minf -Inf " + T,
			// Characters line protocol escapes, or that InfluxDB unescapes.
			`quo"te'd 24 ` + T,
			`back\slash 25 ` + T,
			`trail\ 26 ` + T,
			`bs\,comma 27 ` + T,
			`bs\ 28 ` + T,
			"ünï.cødé.日本 29 " + T,
			"eq=uals.x=1 30 " + T,
			`srv.h\,1.cpu 31 ` + T,
			`tag.h=1,x\y 32 ` + T,
			`cpu.h\.load 33 ` + T,
			// Line protocol reads a line starting with "#" as a comment.
			"#hash.x 34 " + T,
		},
	},
	{
		// A user default template with tags, and a filtered measurement*.
		name:      "userdefault",
		separator: ".",
		templates: []string{"stats.* .measurement*", "host.measurement.field region=eu"},
		lines: []string{
			"stats.gauges.cpu 1 " + T,
			"web01.cpu.idle 2 " + T,
			"short 3 " + T,
			"web02.mem 4 " + T,
		},
	},
}

func tomlList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// TestCompatWithInfluxDBGraphite checks the promise that a pasted
// [[graphite]] block gives the same points as InfluxDB 1.8.10's own graphite
// listener. One real influxd runs a graphite listener per scenario, writing
// to ref_<name>; sparkpulse runs the same blocks, writing to ours_<name>;
// both get the same bytes, and the two databases must hold the same points.
func TestCompatWithInfluxDBGraphite(t *testing.T) {
	var ref, ours strings.Builder
	for _, sc := range compatScenarios {
		block := fmt.Sprintf(`
[[graphite]]
  bind-address = "127.0.0.1:0"
  protocol = "tcp"
  database = "%%s_%s"
  separator = %q
  templates = %s
  tags = %s
`, sc.name, sc.separator, tomlList(sc.templates), tomlList(sc.tags))
		fmt.Fprintf(&ref, block+"  enabled = true\n  batch-timeout = \"100ms\"\n", "ref")
		fmt.Fprintf(&ours, block, "ours")
	}
	srv := influxtest.Start(t, influxtest.WithGraphite(ref.String()))
	refAddrs := srv.GraphiteAddrs(t, len(compatScenarios))
	// The delta stage adds fields InfluxDB's listener does not have; the
	// promise is about what the templates make of each line.
	var cfg config.Config
	if err := toml.Unmarshal([]byte(ours.String()), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.InfluxDB.URL, cfg.Deltas.Enabled = srv.URL, new(false)
	svc := startSparkpulse(t, cfg)

	for i, sc := range compatScenarios {
		payload := strings.Join(sc.lines, "\n") + "\n" // InfluxDB drops a last line without newline
		sendTCP(t, refAddrs[i], payload)
		sendTCP(t, svc.addr(i), payload)
	}
	svc.stop()

	for _, sc := range compatScenarios {
		t.Run(sc.name, func(t *testing.T) {
			want := dump(t, srv, "ours_"+sc.name)
			if len(want) == 0 {
				t.Fatal("sparkpulse wrote nothing")
			}
			// InfluxDB's listener batches for up to batch-timeout and
			// creates its database on the first batch: wait until it holds
			// as many points as sparkpulse wrote, then compare all.
			var got []string
			deadline := time.Now().Add(30 * time.Second)
			for tick := time.NewTicker(100 * time.Millisecond); ; <-tick.C {
				got = dumpIfExists(t, srv, "ref_"+sc.name)
				if len(got) >= len(want)+len(sc.refOnly) || time.Now().After(deadline) {
					tick.Stop()
					break
				}
			}
			for _, p := range sc.refOnly {
				i := slices.Index(got, p)
				if i < 0 {
					t.Fatalf("InfluxDB's listener did not store %q", p)
				}
				got = slices.Delete(got, i, i+1)
			}
			equalLines(t, "InfluxDB 1.8.10 graphite listener (got) vs sparkpulse (want)", got, want)
		})
	}
}

// dumpIfExists is dump for a database that may not have been created yet.
func dumpIfExists(t *testing.T, srv *influxtest.Server, db string) []string {
	for _, s := range srv.Query(t, "", "SHOW DATABASES") {
		for _, row := range s.Values {
			if row[0] == db {
				return dump(t, srv, db)
			}
		}
	}
	return nil
}
