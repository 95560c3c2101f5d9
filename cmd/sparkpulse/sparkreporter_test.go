package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
)

// The jars of Debian's libdropwizard-metrics-java and libslf4j-java.
var dropwizardJars = []string{
	"/usr/share/java/metrics-core.jar",
	"/usr/share/java/metrics-graphite.jar",
	"/usr/share/java/slf4j-api.jar",
	"/usr/share/java/slf4j-nop.jar",
}

// sparkReporter compiles testdata/dropwizard/SparkReporter.java and returns
// a command that runs it with args.
func sparkReporter(t *testing.T) func(args ...string) *exec.Cmd {
	t.Helper()
	missing := func(what string) {
		msg := what + " is missing: run `make deps` (Debian packages libdropwizard-metrics-java libslf4j-java and a JDK)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	for _, j := range dropwizardJars {
		if _, err := os.Stat(j); err != nil {
			missing(j)
		}
	}
	javac, err := exec.LookPath("javac")
	if err != nil {
		missing("javac")
	}
	dir := t.TempDir()
	cp := strings.Join(dropwizardJars, ":")
	out, err := exec.Command(javac, "-d", dir, "-cp", cp, "testdata/dropwizard/SparkReporter.java").CombinedOutput()
	if err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	return func(args ...string) *exec.Cmd {
		return exec.Command("java", append([]string{"-cp", dir + ":" + cp, "SparkReporter"}, args...)...)
	}
}

// TestSparkReporter drives Dropwizard's real GraphiteReporter, as Spark's
// GraphiteSink configures it, into sparkpulse over TCP and over UDP, and
// checks the points InfluxDB holds afterwards.
//
// The Java client simulates a driver and executors 1..3 of one application,
// each with its own registry, reporter and clock (executor n runs n seconds
// ahead), reporting 4 times 10 s apart. At report r (from 0), process n
// (0 for the driver) adds n·1e9 + r·1000 to executor.cpuTime, n·100 + r to
// executor.runTime and n to executor.succeededTasks, and reports
// jvm.pools.G1-Eden-Space.used = 1000·(n+1), JVMCPU.jvmCpuTime =
// (n+1)·1e9·(r+1), a NaN and an Infinity ratio gauge, a histogram, and on
// the driver a timer and a structured-streaming gauge for the query
// "orders.agg" (a name with a dot).
func TestSparkReporter(t *testing.T) {
	reporter := sparkReporter(t)
	srv := influxtest.Start(t)
	const (
		app       = "app-20261122101500-0001"
		executors = 3
		reports   = 4
		start     = 1795300000
		period    = 10
	)
	for _, proto := range []string{"tcp", "udp"} {
		t.Run(proto, func(t *testing.T) {
			db := "spark_" + proto
			// The reporter sends a datagram per line, as fast as it can: a
			// receive buffer as recommended for UDP holds the burst while
			// the reader waits for a core.
			svc := startSparkpulse(t, config.Config{
				InfluxDB: config.InfluxDBConfig{URL: srv.URL},
				Graphite: []config.GraphiteConfig{{Protocol: proto, Database: db, UDPReadBuffer: 8 << 20}},
			})
			_, port, _ := strings.Cut(svc.addr(0), "127.0.0.1:")
			cmd := reporter("127.0.0.1", port, proto, "spark.prod", app,
				strconv.Itoa(executors), strconv.Itoa(reports), strconv.Itoa(start), strconv.Itoa(period))
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			wire, err := cmd.Output()
			if err != nil {
				t.Fatalf("SparkReporter: %v\n%s", err, stderr.String())
			}
			svc.stop()

			// What went over the wire, as the reporter's tee printed it.
			var sent, nan, inf int
			sc := bufio.NewScanner(bytes.NewReader(wire))
			for sc.Scan() {
				sent++
				switch strings.Fields(sc.Text())[1] {
				case "NaN":
					nan++
				case "Infinity":
					inf++
				}
			}
			if sent < 200 || nan != (executors+1)*reports || inf != nan {
				t.Fatalf("unexpected wire capture: %d lines, %d NaN, %d Infinity", sent, nan, inf)
			}
			if got := svc.dropped(0, "nan"); got != uint64(nan) {
				t.Errorf("dropped nan = %d, want %d", got, nan)
			}
			if got := svc.dropped(0, "inf"); got != uint64(inf) {
				t.Errorf("dropped inf = %d, want %d", got, inf)
			}
			if stored, want := storedValues(t, srv, db, ""), uint64(sent-nan-inf); stored != want {
				t.Errorf("InfluxDB holds %d values, want %d (every line but NaN and Infinity)", stored, want)
			}

			// Exact series and values of the task counters, per executor.
			for n := 1; n <= executors; n++ {
				var want []string
				var cpu int64
				for r := range reports {
					cpu += int64(n)*1_000_000_000 + int64(r)*1000
					ts := int64(start+r*period+n) * 1e9
					want = append(want, fmt.Sprintf("%d %d", ts, cpu))
				}
				q := fmt.Sprintf(`SELECT "cpuTime.count" FROM "executor" WHERE "process" = '%d' GROUP BY *`, n)
				res := srv.Query(t, db, q)
				if len(res) != 1 {
					t.Fatalf("%s: %d series, want 1", q, len(res))
				}
				wantTags := fmt.Sprintf("map[applicationid:%s process:%d username:spark.prod]", app, n)
				if got := fmt.Sprint(res[0].Tags); got != wantTags {
					t.Errorf("executor %d cpuTime.count tags %s, want %s", n, got, wantTags)
				}
				var got []string
				for _, row := range res[0].Values {
					got = append(got, fmt.Sprintf("%d %d", int64(toFloat(t, row[0])), int64(toFloat(t, row[1]))))
				}
				equalLines(t, fmt.Sprintf("executor %d cpuTime.count", n), got, want)
			}

			// A JVM pool is a field of the process's jvm point; the
			// streaming query name keeps its dot in the id tag.
			checkSeries(t, srv, db, `SELECT last("pools.G1-Eden-Space.used") FROM "jvm" GROUP BY *`, []string{
				"jvm applicationid=" + app + " process=1 username=spark.prod: 2000",
				"jvm applicationid=" + app + " process=2 username=spark.prod: 3000",
				"jvm applicationid=" + app + " process=3 username=spark.prod: 4000",
				"jvm applicationid=" + app + " process=driver username=spark.prod: 1000",
			})
			checkSeries(t, srv, db, `SELECT last("inputRate-total") FROM "spark.streaming" GROUP BY *`, []string{
				"spark.streaming applicationid=" + app + " id=orders.agg process=driver username=spark.prod: 1532.4",
			})
			checkSeries(t, srv, db, `SELECT count("compilationTime.p99") FROM "CodeGenerator" GROUP BY "process"`, []string{
				"CodeGenerator process=1: 4",
				"CodeGenerator process=2: 4",
				"CodeGenerator process=3: 4",
				"CodeGenerator process=driver: 4",
			})
			checkSeries(t, srv, db, `SELECT count("messageProcessingTime.count") FROM "DAGScheduler" GROUP BY "process"`, []string{
				"DAGScheduler process=driver: 4",
			})
		})
	}
}

// checkSeries runs q and compares "name tags: value" lines with want.
func checkSeries(t *testing.T, srv *influxtest.Server, db, q string, want []string) {
	t.Helper()
	var got []string
	for _, s := range srv.Query(t, db, q) {
		keys := make([]string, 0, len(s.Tags))
		for k := range s.Tags {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		line := s.Name
		for _, k := range keys {
			line += " " + k + "=" + s.Tags[k]
		}
		got = append(got, fmt.Sprintf("%s: %v", line, s.Values[0][1]))
	}
	sort.Strings(got)
	equalLines(t, q, got, want)
}

func toFloat(t *testing.T, v any) float64 {
	t.Helper()
	switch x := v.(type) {
	case float64:
		return x
	case interface{ Float64() (float64, error) }:
		f, err := x.Float64()
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	t.Fatalf("not a number: %#v", v)
	return 0
}
