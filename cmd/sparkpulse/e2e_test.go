package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
	"github.com/sparkpulse/sparkpulse/schema"
)

// forEachSchema runs test as a subtest in each shape of the built-in
// mapping, with the [[graphite]] block's schema setting that selects it
// ("" for the default).
func forEachSchema(t *testing.T, test func(t *testing.T, sc schema.Shape, setting string)) {
	for _, sc := range []schema.Shape{schema.Wide, schema.CERN} {
		setting := sc.String()
		if sc == schema.Default {
			setting = ""
		}
		t.Run(sc.String(), func(t *testing.T) { test(t, sc, setting) })
	}
}

// sendTCP sends payload on a connection of its own and returns once
// sparkpulse has taken every line: after its half-close, sparkpulse hands
// the lines on before it closes its side.
func sendTCP(t *testing.T, addr, payload string) {
	t.Helper()
	sendFrom(t, "", addr, payload)
}

func sendUDP(t *testing.T, addr string, lines ...string) {
	t.Helper()
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, l := range lines {
		if _, err := c.Write([]byte(l)); err != nil {
			t.Fatal(err)
		}
	}
}

// dump returns every point of db as sorted "measurement,tags field=value time"
// strings, the way a reader of InfluxDB sees them.
func dump(t *testing.T, srv *influxtest.Server, db string) []string {
	t.Helper()
	var out []string
	for _, s := range srv.Query(t, db, `SELECT * FROM /.*/ GROUP BY *`) {
		var tags []string
		for k, v := range s.Tags {
			if v != "" {
				tags = append(tags, k+"="+v)
			}
		}
		sort.Strings(tags)
		key := strings.Join(append([]string{s.Name}, tags...), ",")
		for _, row := range s.Values {
			var fields []string
			for i, col := range s.Columns {
				if i == 0 || row[i] == nil {
					continue
				}
				fields = append(fields, fmt.Sprintf("%s=%v", col, row[i]))
			}
			out = append(out, fmt.Sprintf("%s %s %v", key, strings.Join(fields, ","), row[0]))
		}
	}
	sort.Strings(out)
	return out
}

func equalLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\ngot\n  %s\nwant\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestEndToEnd sends lines over TCP (templates) and UDP (built-in Spark
// mapping, in the default wide shape and in the CERN one) to an
// in-process sparkpulse and reads the points back from a real InfluxDB
// 1.8.10 with InfluxQL.
func TestEndToEnd(t *testing.T) {
	srv := influxtest.Start(t)
	svc := startSparkpulse(t, config.Config{
		InfluxDB: config.InfluxDBConfig{URL: srv.URL},
		Graphite: []config.GraphiteConfig{
			{Protocol: "tcp", Database: "e2e_tcp", Separator: "_", MaxLineLength: 1024,
				Templates: []string{"servers.* .host.measurement.field*", "measurement.measurement"}, Tags: []string{"dc=east"}},
			{Protocol: "udp", Database: "e2e_udp"},
			{Protocol: "udp", Database: "e2e_cern", Schema: "cern"},
		},
	})
	sendTCP(t, svc.addr(0), "servers.web01.cpu.load.avg 1.5 1795300000\r\n"+
		"disk.sda 10 1795300001\n"+
		"bad line\n"+
		"x NaN 1795300002\n"+
		"x Infinity 1795300002\n"+
		"x 1 99999999999\n"+
		strings.Repeat("a", 2000)+" 1 1795300003\n"+
		"\n   \n"+
		"tail.x 7 1795300004") // no newline at the end: cut, as by a sender that died mid-line
	if status, body := adminGet(t, svc.adminLn.Addr().String(), "/healthz"); status != http.StatusOK {
		t.Fatalf("/healthz: %d %s", status, body)
	}
	datagrams := []string{
		"app-20261122101500-0001.3.executor.cpuTime.count 81234 1795300000\n",
		"app-20261122101500-0001.driver.jvm.pools.G1-Eden-Space.used 42 1795300000",
		"spark.prod.app-20261122101500-0001.1.JVMCPU.jvmCpuTime 5 1795300000\nlocal-1717171000000.driver.executor.cpuTime.count 9 1795300000\n",
	}
	sendUDP(t, svc.addr(1), datagrams...)
	sendUDP(t, svc.addr(2), datagrams...)
	svc.stop()

	equalLines(t, "tcp points", dump(t, srv, "e2e_tcp"), []string{
		"cpu,dc=east,host=web01 load_avg=1.5 1795300000000000000",
		"disk_sda,dc=east value=10 1795300001000000000",
	})
	equalLines(t, "udp points", dump(t, srv, "e2e_udp"), []string{
		"JVMCPU,applicationid=app-20261122101500-0001,process=1,username=spark.prod jvmCpuTime=5 1795300000000000000",
		"executor,applicationid=app-20261122101500-0001,process=3 cpuTime.count=81234 1795300000000000000",
		"executor,applicationid=local-1717171000000,process=driver cpuTime.count=9 1795300000000000000",
		"jvm,applicationid=app-20261122101500-0001,process=driver pools.G1-Eden-Space.used=42 1795300000000000000",
	})
	equalLines(t, "udp points, cern schema", dump(t, srv, "e2e_cern"), []string{
		"cpuTime.count,applicationid=app-20261122101500-0001,namespace=executor,process=3 value=81234 1795300000000000000",
		"cpuTime.count,applicationid=local-1717171000000,namespace=executor,process=driver value=9 1795300000000000000",
		"jvmCpuTime,applicationid=app-20261122101500-0001,namespace=JVMCPU,process=1,username=spark.prod value=5 1795300000000000000",
		"pools.used,applicationid=app-20261122101500-0001,namespace=jvm,pool=G1-Eden-Space,process=driver value=42 1795300000000000000",
	})
	for reason, want := range map[string]uint64{"value": 1, "nan": 1, "inf": 1, "timestamp_range": 1} {
		if got := svc.dropped(0, reason); got != want {
			t.Errorf("tcp dropped[%s] = %d, want %d", reason, got, want)
		}
	}
	if got := svc.blocks[0].srv.Stats().LinesTooLong.Load(); got != 1 {
		t.Errorf("tcp lines too long = %d, want 1", got)
	}
	for b := 1; b <= 2; b++ {
		if got := svc.blocks[b].relay.Stats().Points.Load(); got != 4 {
			t.Errorf("udp block %d: points = %d, want 4", b, got)
		}
	}

	// The same counters, as /metrics exposes them.
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(svc.registry, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{
		`sparkpulse_lines_received_total{listener="tcp://127.0.0.1:0#1"} 8`,
		`sparkpulse_lines_dropped_total{listener="tcp://127.0.0.1:0#1",reason="nan"} 1`,
		`sparkpulse_lines_dropped_total{listener="tcp://127.0.0.1:0#1",reason="too_long"} 1`,
		`sparkpulse_lines_dropped_total{listener="tcp://127.0.0.1:0#1",reason="cut"} 1`,
		`sparkpulse_influxdb_points_written_total{listener="tcp://127.0.0.1:0#1"} 2`,
		`sparkpulse_influxdb_points_written_total{listener="udp://127.0.0.1:0#2"} 4`,
		`sparkpulse_influxdb_points_written_total{listener="udp://127.0.0.1:0#3"} 4`,
		`sparkpulse_graphite_datagrams_received_total{listener="udp://127.0.0.1:0#2"} 3`,
		`sparkpulse_graphite_connections_total{listener="tcp://127.0.0.1:0#1"} 1`,
	} {
		if !strings.Contains(rec.Body.String(), want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// sparkpulse's own metrics land in InfluxDB ([internal]), with deltas that
// sum to the counters' increase; the last sample is written at shutdown.
func TestInternalMetrics(t *testing.T) {
	srv := influxtest.Start(t)
	svc := startSparkpulse(t, config.Config{
		InfluxDB: config.InfluxDBConfig{URL: srv.URL},
		Internal: config.InternalConfig{Database: "health"},
		Graphite: []config.GraphiteConfig{{Database: "metrics"}},
	})
	sendTCP(t, svc.addr(0), "a.b 1 1795300000\na.c 2 1795300000\nbad\n")
	svc.reportInternal(time.Now())
	sendTCP(t, svc.addr(0), "a.b 3 1795300010\n")
	svc.stop()
	q := `SELECT sum("delta"), last("value") FROM "sparkpulse_lines_received_total" GROUP BY "listener"`
	res := srv.Query(t, "health", q)
	if len(res) != 1 || fmt.Sprint(res[0].Values[0][1:]) != "[4 4]" {
		t.Errorf("%s: %v", q, res)
	}
	res = srv.Query(t, "health", `SELECT sum("delta") FROM "sparkpulse_lines_dropped_total" WHERE "reason" = 'fields'`)
	if len(res) != 1 || fmt.Sprint(res[0].Values[0][1]) != "1" {
		t.Errorf("dropped: %v", res)
	}
	if res := srv.Query(t, "health", `SELECT last("value") FROM "process_resident_memory_bytes"`); len(res) != 1 {
		t.Errorf("process memory: %v", res)
	}
	if m := dump(t, srv, "metrics"); len(m) != 3 {
		t.Errorf("the metrics database holds %d points: %q", len(m), m)
	}
}

// /readyz says whether the listeners serve: not before Ready, and not once
// Shutdown has begun, so a load balancer sends no new sender to a replica
// that is stopping.
func TestReadyz(t *testing.T) {
	p := &pipeline{ready: make(chan struct{}), stopping: make(chan struct{})}
	status := func() int {
		rec := httptest.NewRecorder()
		p.serveReadyz(rec, httptest.NewRequest("GET", "/readyz", nil))
		return rec.Code
	}
	if got := status(); got != http.StatusServiceUnavailable {
		t.Errorf("before Ready: %d", got)
	}
	close(p.ready)
	if got := status(); got != http.StatusOK {
		t.Errorf("serving: %d", got)
	}
	close(p.stopping)
	if got := status(); got != http.StatusServiceUnavailable {
		t.Errorf("shutting down: %d", got)
	}
}
