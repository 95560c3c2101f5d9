// Command bench is sparkpulse's load harness. It measures, on the machine
// it runs on, the targets in docs/performance.md, side by
// side with what they are judged against, and prints the tables:
//
//   - the hot path (P1) and TCP into a null sink (P2): the relay package's
//     benchmarks, run with go test, and the memory held per series;
//   - into a real InfluxDB 1.8.10 (P3): the sparkpulse binary, fed
//     simulated Spark reports over a TCP connection per report, against a
//     bare loader that POSTs the same points pre-encoded and pre-compressed,
//     and against InfluxDB's own graphite listener fed the same stream;
//   - the same stream with 1, 2, 4 and 8 write requests in flight;
//   - UDP (P4): datagrams of one line each at a fixed rate into the binary,
//     writing into influxd and into a sink that discards the writes;
//   - a soak (P5): the binary under churning applications and executors,
//     its CPU per line and its resident memory over time;
//   - only when -only names it, schema: the built-in mapping's wide and
//     cern shapes side by side on the same streams (simulated, and the
//     recordings of real Spark), each into an influxd of its own — the
//     CPU per value of influxd and of sparkpulse, the series, the bytes,
//     and that both store every value (bench/README.md);
//   - only when -only names it, fleet: a Spark fleet's days compressed
//     into minutes, into influxd 1.8 (inmem, tsi1) and 2.7, until InfluxDB
//     refuses a point: series, disk, memory and the dashboards' query
//     times as the applications pile up (bench/fleet.go);
//   - only when -only names it, history: a year of a fleet's
//     spark_app_history in influxd 1.8 (tsi1), and the time of every
//     query of the history dashboard and of report --fleet over 30, 90
//     and 365 days (bench/history.go).
//
// Every contender writes into its own database of one influxd, in turn;
// the harness, the senders, sparkpulse and influxd share the machine.
//
//	go run ./bench [-rounds 20] [-udp-rate 200000] [-udp-time 10s] [-soak 10m] [-only hot,influxdb,writers,udp,soak,schema] [-profile F]
//	go run ./bench -only history [-history-days 365] [-apps-per-day 5000] [-history-names 1000] [-query-runs 3]
//	go run ./bench -only fleet [-apps-per-day 5000] [-executors 2:50,8:25,24:18,60:7] [-days 365] [-target influxd1-inmem,influxd1-tsi1,influxd2] [-reports 1] [-budget 15m] [-influxd-set key=value] [-rp-duration 30d] [-shard-duration 1d] [-facts]
//	go run ./bench -only schema [-repeat 4] [-rounds 20] [-index inmem|tsi1] [-wide-batch-size N] [-base DIR] [-conn-count 5]
package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/ipv4"

	"github.com/sparkpulse/sparkpulse/influx/influxtest"
	"github.com/sparkpulse/sparkpulse/simulate"
)

var (
	rounds    = flag.Int("rounds", 20, "rounds of reports of the simulated cluster (8 apps × 50 executors, ~80 000 lines each) for the InfluxDB runs")
	udpRate   = flag.Int("udp-rate", 200_000, "UDP datagrams per second")
	udpTime   = flag.Duration("udp-time", 10*time.Second, "how long UDP is sent")
	soakTime  = flag.Duration("soak", 10*time.Minute, "how long the soak runs; 0 skips it")
	benchFor  = flag.String("benchtime", "20000000x", "go test -benchtime for the relay benchmarks")
	profile   = flag.String("profile", "", "write CPU profiles of sparkpulse to this file (its first InfluxDB run, 8 s) and to this file with .udp-influxdb, .udp-null and .soak appended")
	only      = flag.String("only", "", "run only these parts, comma-separated: hot (P1, P2), influxdb (P3), compression, writers, udp (P4), soak (P5), schema, fleet and history (only when named)")
	repeat    = flag.Int("repeat", 3, "runs of each contender into InfluxDB, interleaved; figures are given as ranges over them")
	base      = flag.String("base", "", "schema: a checkout of an earlier commit (git worktree add) whose relay BenchmarkConn is run beside this tree's")
	connCount = flag.Int("conn-count", 5, "schema: go test -count for the relay BenchmarkConn; 0 skips it")
	index     = flag.String("index", "inmem", "schema: influxd's index-version, inmem (its default) or tsi1")
	wideBatch = flag.Int("wide-batch-size", 0, "schema: batch-size (points per write) of the wide block; 0 keeps sparkpulse's default")
)

// optIn are the parts that run only when -only names them.
var optIn = []string{"schema", "fleet", "history"}

// part reports whether a part is to run.
func part(name string) bool {
	if *only == "" {
		return !slices.Contains(optIn, name)
	}
	return slices.Contains(strings.Split(*only, ","), name)
}

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	dir, err := os.MkdirTemp("", "sparkpulse-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "sparkpulse")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/sparkpulse").CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	fmt.Printf("# sparkpulse load harness — %s, %d CPUs, %s\n\n", time.Now().UTC().Format(time.DateOnly), runtime.NumCPU(), cpuModel())

	if part("hot") {
		if err := hotPath(); err != nil {
			return err
		}
	}
	if part("influxdb") {
		if err := intoInfluxDB(bin, dir); err != nil {
			return err
		}
	}
	if part("compression") {
		if err := compression(bin, dir); err != nil {
			return err
		}
	}
	if part("writers") {
		if err := writers(bin, dir); err != nil {
			return err
		}
	}
	if part("udp") {
		if err := udp(bin, dir); err != nil {
			return err
		}
	}
	if part("soak") && *soakTime > 0 {
		if err := soak(bin, dir); err != nil {
			return err
		}
	}
	if part("schema") {
		if err := schemas(bin, dir); err != nil {
			return err
		}
	}
	if part("history") {
		if err := history(bin, dir); err != nil {
			return err
		}
	}
	if part("fleet") {
		return fleet(bin, dir)
	}
	return nil
}

// hotPath runs the relay benchmarks (P1, P2) and prints their figures.
func hotPath() error {
	out, err := exec.Command("go", "test", "-run", "^$", "-bench", "^(BenchmarkConn|BenchmarkTCP)$", "-benchmem",
		"-benchtime", *benchFor, "-count", "3", "./relay").CombinedOutput()
	if err != nil {
		return fmt.Errorf("relay benchmarks: %v\n%s", err, out)
	}
	fmt.Println("## P1, P2: the ingest path in-process and over loopback TCP into a null sink")
	fmt.Println()
	fmt.Println("| benchmark | ns/line | lines/s | allocs/line | target |")
	fmt.Println("|---|---|---|---|---|")
	re := regexp.MustCompile(`^Benchmark(\S+?)-\d+\s+\d+\s+([\d.]+) ns/op.*?\s([\d.]+) lines/s.*?\s(\d+) allocs/op`)
	runs := map[string][][]string{}
	var order []string
	for _, l := range strings.Split(string(out), "\n") {
		m := re.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		if _, ok := runs[m[1]]; !ok {
			order = append(order, m[1])
		}
		runs[m[1]] = append(runs[m[1]], m)
	}
	targets := map[string]string{
		"Conn/spark": "P1 ≤ 200 ns, 0 allocs", "Conn/spark+deltas": "P1 ≤ 200 ns, 0 allocs",
		"Conn/spark+deltas+admission": "as spark+deltas: no ns for the id and quota checks on known series", "Conn/cern-templates": "P1 ≤ 200 ns, 0 allocs",
		"TCP/conns=1": "P2 ≥ 3 M lines/s", "TCP/conns=8": "P2 ≥ 5 M lines/s",
	}
	for _, name := range order {
		var ns, rate, allocs []float64
		for _, m := range runs[name] {
			ns, rate, allocs = append(ns, atof(m[2])), append(rate, atof(m[3])), append(allocs, atof(m[4]))
		}
		fmt.Printf("| %s | %s | %s | %s | %s |\n", name, spread(ns, "%.0f"), spreadOf(rate, mega), spread(allocs, "%.0f"), targets[name])
	}
	fmt.Println()

	// Memory per series: the relay's cache entry (template result,
	// encoded series key and, for a cumulative series, its baseline).
	out, err = exec.Command("go", "test", "-run", "^$", "-bench", "^BenchmarkMemoryPerCachedSeries", "-benchtime", "1x", "./relay").CombinedOutput()
	if err != nil {
		return fmt.Errorf("memory benchmarks: %v\n%s", err, out)
	}
	per := regexp.MustCompile(`(?m)^BenchmarkMemoryPerCachedSeries/deltas=(\w+)-\d+\s.*?\s([\d.]+) B/series`).FindAllStringSubmatch(string(out), -1)
	if len(per) != 2 {
		return fmt.Errorf("memory benchmarks: want two results, got:\n%s", out)
	}
	fmt.Println("| memory per series (500 000 series) | bytes | target |")
	fmt.Println("|---|---|---|")
	fmt.Printf("| a gauge: cached mapping and encoded point text | %s | |\n", per[0][2])
	fmt.Printf("| a cumulative series, its delta baseline included | %s | ≤ 200 |\n\n", per[1][2])
	return nil
}

// spread writes the range of vs: "a–b", or "a" when they are all alike.
func spread(vs []float64, format string) string {
	return spreadOf(vs, func(v float64) string { return fmt.Sprintf(format, v) })
}

func spreadOf(vs []float64, f func(float64) string) string {
	if len(vs) == 0 {
		return ""
	}
	lo, hi := slices.Min(vs), slices.Max(vs)
	if f(lo) == f(hi) {
		return f(lo)
	}
	return f(lo) + "–" + f(hi)
}

// contender is one run of getting the stream into InfluxDB.
type contender struct {
	name      string
	db        string
	points    int
	took      time.Duration
	cpu       time.Duration // sparkpulse's CPU time, when it is the contender
	sys       time.Duration // the part of cpu spent in the kernel
	influxCPU time.Duration // influxd's CPU time during the run
	lines     int
}

func (c contender) rate() float64 { return float64(c.points) / c.took.Seconds() }

// perLine and perPoint are CPU per line of the stream and per point, as
// "1.23 µs".
func (c contender) perLine() float64  { return float64(c.cpu.Nanoseconds()) / float64(c.lines) }
func (c contender) sysLine() float64  { return float64(c.sys.Nanoseconds()) / float64(c.lines) }
func (c contender) perPoint() float64 { return float64(c.influxCPU.Nanoseconds()) / float64(c.points) }

func micros(ns float64) string { return fmt.Sprintf("%.2f µs", ns/1e3) }

// intoInfluxDB compares sparkpulse with a bare loader and with InfluxDB's
// graphite listener (P3), each run -repeat times, interleaved, each run
// into a database of its own.
func intoInfluxDB(bin, dir string) error {
	reports, lines := simulatedStream(*rounds)
	fmt.Printf("## P3: into InfluxDB 1.8.10 (%d lines: %d rounds of 8 applications × 50 executors; %d runs each)\n\n", lines, *rounds, *repeat)

	graphitePort, err := freePort()
	if err != nil {
		return err
	}
	srv, err := influxtest.Launch(filepath.Join(dir, "influxd"), influxtest.WithConfig(fmt.Sprintf(`
[[graphite]]
  enabled = true
  bind-address = "127.0.0.1:%d"
  database = "influx_cern"
  templates = %s
  batch-size = 5000
  batch-timeout = "1s"
`, graphitePort, tomlList(simulate.CERNTemplates))))
	if err != nil {
		return err
	}
	defer srv.Stop()

	spark := "[deltas]\n  enabled = true\n"
	cern := fmt.Sprintf("[deltas]\n  enabled = false\n[[graphite]]\n  templates = %s\n", tomlList(simulate.CERNTemplates))
	// The points each configuration makes of the stream, from the same
	// binary's parse command: what the bare loader sends, and how many
	// points mean done.
	sparkPoints, nSpark, err := parsePoints(bin, dir, spark, reports)
	if err != nil {
		return err
	}
	cernPoints, nCern, err := parsePoints(bin, dir, cern, reports)
	if err != nil {
		return err
	}
	gz := gzipDefault(bin, dir, srv.URL)
	runs := map[string][]contender{}
	var order []string
	add := func(key string, c contender, err error) error {
		if err != nil {
			return err
		}
		if _, ok := runs[key]; !ok {
			order = append(order, key)
		}
		runs[key] = append(runs[key], c)
		return nil
	}
	for r := range *repeat {
		db := func(name string) string { return fmt.Sprintf("%s_%d", name, r) }
		steps := []struct {
			key string
			run func() (contender, error)
		}{
			{"bare_spark", func() (contender, error) { return bareLoad(srv, db("bare_spark"), sparkPoints, nSpark, gz) }},
			{"sparkpulse_spark", func() (contender, error) {
				return viaSparkpulse(bin, dir, srv, db("sparkpulse_spark"), spark, reports, nSpark, lines)
			}},
			{"influx_cern", func() (contender, error) {
				return viaInfluxListener(srv, graphitePort, reports, nCern*(r+1), lines)
			}},
			{"sparkpulse_cern", func() (contender, error) {
				return viaSparkpulse(bin, dir, srv, db("sparkpulse_cern"), cern, reports, nCern, lines)
			}},
			{"bare_cern", func() (contender, error) { return bareLoad(srv, db("bare_cern"), cernPoints, nCern, gz) }},
		}
		for _, st := range steps {
			c, err := st.run()
			if err := add(st.key, c, err); err != nil {
				return err
			}
		}
	}
	printContenders(runs, order)
	return nil
}

// printContenders writes P3's table: each contender's ranges over its
// runs, and sparkpulse's ratios to the bare loader and InfluxDB's listener
// of the same run.
func printContenders(runs map[string][]contender, order []string) {
	ratio := func(a, b string) string {
		var rs []float64
		for i := range runs[a] {
			rs = append(rs, runs[a][i].rate()/runs[b][i].rate())
		}
		return spread(rs, "%.2f")
	}
	fmt.Println("| into InfluxDB | points | points/s | against | sparkpulse CPU per line | of it in the kernel | influxd CPU per point |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, key := range order {
		cs := runs[key]
		var rate, cpu, sys, icpu []float64
		for _, c := range cs {
			rate, icpu = append(rate, c.rate()), append(icpu, c.perPoint())
			if c.cpu > 0 {
				cpu, sys = append(cpu, c.perLine()), append(sys, c.sysLine())
			}
		}
		against := ""
		switch key {
		case "sparkpulse_spark":
			against = ratio(key, "bare_spark") + "× the bare loader (≥ 0.95)"
		case "sparkpulse_cern":
			against = ratio(key, "bare_cern") + "× the bare loader, " + ratio(key, "influx_cern") + "× InfluxDB's listener"
		}
		fmt.Printf("| %s | %d | %s | %s | %s | %s | %s |\n", cs[0].name, cs[0].points, spreadOf(rate, mega), against, spreadOf(cpu, micros), spreadOf(sys, micros), spreadOf(icpu, micros))
	}
	fmt.Println()
}

// gzipDefault reports whether sparkpulse compresses write requests to the
// InfluxDB at url by default, as its check command says: the bare loader
// does as sparkpulse does.
func gzipDefault(bin, dir, url string) bool {
	path := filepath.Join(dir, "default.toml")
	os.WriteFile(path, []byte(fmt.Sprintf("[influxdb]\n  url = %q\n[[graphite]]\n", url)), 0o600)
	out, _ := exec.Command(bin, "check", "--config", path).Output()
	return strings.Contains(string(out), " (on),")
}

// compression measures write requests with and without gzip: sparkpulse's
// and influxd's CPU, and the throughput, -repeat times, interleaved.
func compression(bin, dir string) error {
	reports, lines := simulatedStream(*rounds)
	srv, err := influxtest.Launch(filepath.Join(dir, "influxd-gzip"))
	if err != nil {
		return err
	}
	defer srv.Stop()
	spark := "[deltas]\n  enabled = true\n"
	points, n, err := parsePoints(bin, dir, spark, reports)
	if err != nil {
		return err
	}
	var z bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&z, gzip.BestSpeed)
	zw.Write(points)
	zw.Close()
	fmt.Printf("## Compression of write requests (%d lines, Spark mapping + deltas, into InfluxDB 1.8.10 on loopback; %d runs each)\n\n", lines, *repeat)
	fmt.Printf("Line protocol: %.1f bytes per point, %.1f gzipped (%.1f:1).\n\n", float64(len(points))/float64(n), float64(z.Len())/float64(n), float64(len(points))/float64(z.Len()))
	runs := map[bool][]contender{}
	for r := range *repeat {
		for _, gz := range []bool{false, true} {
			c, err := viaSparkpulse(bin, dir, srv, fmt.Sprintf("gzip_%v_%d", gz, r), spark, reports, n, lines, fmt.Sprintf("  gzip = %v", gz))
			if err != nil {
				return err
			}
			runs[gz] = append(runs[gz], c)
		}
	}
	fmt.Println("| gzip | points/s | sparkpulse CPU per line | influxd CPU per point | both, per line |")
	fmt.Println("|---|---|---|---|---|")
	for _, gz := range []bool{false, true} {
		var rate, cpu, icpu, both []float64
		for _, c := range runs[gz] {
			rate, cpu, icpu = append(rate, c.rate()), append(cpu, c.perLine()), append(icpu, c.perPoint())
			both = append(both, float64((c.cpu+c.influxCPU).Nanoseconds())/float64(c.lines))
		}
		fmt.Printf("| %v | %s | %s | %s | %s |\n", gz, spreadOf(rate, mega), spreadOf(cpu, micros), spreadOf(icpu, micros), spreadOf(both, micros))
	}
	fmt.Println()
	return nil
}

func simulatedStream(rounds int) (reports [][]byte, lines int) {
	start := time.Now().Add(-time.Duration(rounds) * 10 * time.Second).Truncate(time.Second)
	c := simulate.NewCluster(simulate.Config{Apps: 8, Executors: 50, Period: 10 * time.Second, Seed: 1, Prefix: "spark.prod"}, start)
	for r := range rounds {
		now := start.Add(time.Duration(r) * 10 * time.Second)
		c.Step(now)
		for p := range c.Processes() {
			var b bytes.Buffer
			c.Report(p, &b, now)
			lines += bytes.Count(b.Bytes(), []byte("\n"))
			reports = append(reports, b.Bytes())
		}
	}
	return reports, lines
}

// parsePoints runs the stream through `sparkpulse parse` with the config
// body conf and returns the points and their number.
func parsePoints(bin, dir, conf string, reports [][]byte) ([]byte, int, error) {
	path := filepath.Join(dir, "parse.toml")
	if err := os.WriteFile(path, []byte(withBlock(conf, "127.0.0.1:0", "parse")), 0o600); err != nil {
		return nil, 0, err
	}
	cmd := exec.Command(bin, "parse", "--config", path)
	cmd.Stdin = bytes.NewReader(bytes.Join(reports, nil))
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		return nil, 0, fmt.Errorf("sparkpulse parse: %v", err)
	}
	var points []byte
	n := 0
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if l := sc.Bytes(); len(l) > 0 && l[0] != '#' { // "# error" for a dropped line
			points = append(append(points, l...), '\n')
			n++
		}
	}
	return points, n, sc.Err()
}

// withBlock gives conf a [[graphite]] block (or completes its first one)
// listening on addr and writing to db.
func withBlock(conf, addr, db string) string {
	block := fmt.Sprintf("  bind-address = %q\n  database = %q\n", addr, db)
	if i := strings.Index(conf, "[[graphite]]\n"); i >= 0 {
		j := i + len("[[graphite]]\n")
		return conf[:j] + block + conf[j:]
	}
	return conf + "[[graphite]]\n" + block
}

// bareLoad POSTs points in batches of 5000, gzip-compressed beforehand when
// gz, two requests at a time: sparkpulse's defaults, without any of its
// work.
func bareLoad(srv *influxtest.Server, db string, points []byte, n int, gz bool) (contender, error) {
	if _, err := srv.TryQuery("", "CREATE DATABASE "+db); err != nil {
		return contender{}, err
	}
	var batches [][]byte
	for rest := points; len(rest) > 0; {
		end := len(rest)
		if i := nthNewline(rest, 5000); i >= 0 {
			end = i + 1
		}
		b := rest[:end]
		if gz {
			var z bytes.Buffer
			w := gzip.NewWriter(&z)
			w.Write(b)
			w.Close()
			b = z.Bytes()
		}
		batches = append(batches, b)
		rest = rest[end:]
	}
	u := srv.URL + "/api/v2/write?precision=ns&bucket=" + url.QueryEscape(db+"/autogen")
	work := make(chan []byte)
	var wg sync.WaitGroup
	var failed error
	var mu sync.Mutex
	start, icpu0 := time.Now(), procCPU(srv.PID())
	for range 2 {
		wg.Go(func() {
			for b := range work {
				req, _ := http.NewRequest(http.MethodPost, u, bytes.NewReader(b))
				if gz {
					req.Header.Set("Content-Encoding", "gzip")
				}
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusNoContent {
						err = fmt.Errorf("write to %s: %s", db, resp.Status)
					}
				}
				if err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
				}
			}
		})
	}
	for _, b := range batches {
		work <- b
	}
	close(work)
	wg.Wait()
	if failed != nil {
		return contender{}, failed
	}
	if err := waitPoints(srv, db, n, time.Minute); err != nil {
		return contender{}, err
	}
	name, _, _ := strings.Cut(strings.TrimPrefix(db, "bare_"), "_")
	return contender{name: "bare loader (" + name + " points)", db: db, points: n, took: time.Since(start),
		influxCPU: procCPU(srv.PID()) - icpu0}, nil
}

func nthNewline(b []byte, n int) int {
	off := 0
	for range n {
		i := bytes.IndexByte(b[off:], '\n')
		if i < 0 {
			return -1
		}
		off += i + 1
	}
	return off - 1
}

// viaSparkpulse runs the binary with conf, sends the stream and waits until
// InfluxDB holds every point.
func viaSparkpulse(bin, dir string, srv *influxtest.Server, db, conf string, reports [][]byte, n, lines int, influxKeys ...string) (contender, error) {
	port, err := freePort()
	if err != nil {
		return contender{}, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	p, err := startSparkpulse(bin, dir, srv.URL, withBlock(conf, addr, db), influxKeys...)
	if err != nil {
		return contender{}, err
	}
	defer p.stop()
	profiled := make(chan error, 1)
	if *profile != "" && db == "sparkpulse_spark_0" {
		go func() { profiled <- p.saveProfile(*profile, 8) }()
	} else {
		profiled <- nil
	}
	_, sys0 := procTimes(p.cmd.Process.Pid)
	cpu0, icpu0 := p.cpu(), procCPU(srv.PID())
	start := time.Now()
	if err := sendReports(addr, reports, 8); err != nil {
		return contender{}, err
	}
	if err := waitPoints(srv, db, n, 5*time.Minute); err != nil {
		return contender{}, fmt.Errorf("%v\n%s", err, p.log.String())
	}
	took := time.Since(start)
	if err := <-profiled; err != nil {
		return contender{}, err
	}
	if *profile != "" && db == "sparkpulse_spark_0" {
		if err := p.save("/debug/pprof/allocs", *profile+".allocs"); err != nil {
			return contender{}, err
		}
	}
	name := "sparkpulse, Spark mapping + deltas"
	if strings.Contains(conf, "templates") {
		name = "sparkpulse, CERN templates"
	}
	_, sys1 := procTimes(p.cmd.Process.Pid)
	return contender{name: name, db: db, points: n, took: took, cpu: p.cpu() - cpu0, sys: sys1 - sys0, lines: lines,
		influxCPU: procCPU(srv.PID()) - icpu0}, nil
}

// viaInfluxListener sends the stream to InfluxDB's own graphite listener.
// viaInfluxListener sends the stream to InfluxDB's graphite listener; n is
// the points its database must hold at the end.
func viaInfluxListener(srv *influxtest.Server, port int, reports [][]byte, n, lines int) (contender, error) {
	start, icpu0, before := time.Now(), procCPU(srv.PID()), 0
	if got, err := pointsOK(srv, "influx_cern"); err == nil {
		before = got
	}
	if err := sendReports(fmt.Sprintf("127.0.0.1:%d", port), reports, 8); err != nil {
		return contender{}, err
	}
	if err := waitPoints(srv, "influx_cern", n, 5*time.Minute); err != nil {
		return contender{}, err
	}
	return contender{name: "InfluxDB 1.8.10 graphite listener, CERN templates", db: "influx_cern", points: n - before,
		took: time.Since(start), lines: lines, influxCPU: procCPU(srv.PID()) - icpu0}, nil
}

// sendReports sends each report over its own TCP connection, as Spark's
// reporter does, from parallel senders.
func sendReports(addr string, reports [][]byte, parallel int) error {
	work := make(chan []byte, parallel)
	errs := make(chan error, parallel)
	var wg sync.WaitGroup
	for range parallel {
		wg.Go(func() {
			for r := range work {
				c, err := net.Dial("tcp", addr)
				if err == nil {
					_, err = c.Write(r)
					if cerr := c.Close(); err == nil {
						err = cerr
					}
				}
				if err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for _, r := range reports {
		work <- r
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// pointsOK is how many points InfluxDB has written into db's shards.
func pointsOK(srv *influxtest.Server, db string) (int, error) {
	series, err := srv.TryQuery("", "SHOW STATS FOR 'shard'")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range series {
		if s.Tags["database"] != db {
			continue
		}
		for i, c := range s.Columns {
			if c == "writePointsOk" {
				for _, row := range s.Values {
					v, _ := row[i].(json.Number).Int64()
					n += int(v)
				}
			}
		}
	}
	return n, nil
}

// waitPoints polls until db holds want points: influxd is another process,
// with nothing to wait on but its statistics.
func waitPoints(srv *influxtest.Server, db string, want int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		n, err := pointsOK(srv, db)
		if err != nil {
			return err
		}
		if n >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("database %s holds %d points after %s, want %d", db, n, limit, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// writers runs the Spark stream of the InfluxDB comparison through
// sparkpulse with 1, 2 (the default), 4 and 8 write requests in flight per
// [[graphite]] block: how the write rate scales with writers.
func writers(bin, dir string) error {
	reports, lines := simulatedStream(*rounds)
	srv, err := influxtest.Launch(filepath.Join(dir, "influxd-writers"))
	if err != nil {
		return err
	}
	defer srv.Stop()
	spark := "[deltas]\n  enabled = true\n"
	_, n, err := parsePoints(bin, dir, spark, reports)
	if err != nil {
		return err
	}
	fmt.Printf("## Write requests in flight (%d lines, Spark mapping + deltas, into InfluxDB 1.8.10)\n\n", lines)
	fmt.Println("| max-in-flight | seconds | points/s | sparkpulse CPU per line |")
	fmt.Println("|---|---|---|---|")
	for _, k := range []int{1, 2, 4, 8} {
		c, err := viaSparkpulse(bin, dir, srv, fmt.Sprintf("writers_%d", k), spark, reports, n, lines, fmt.Sprintf("  max-in-flight = %d", k))
		if err != nil {
			return err
		}
		fmt.Printf("| %d | %.2f | %s | %.2f µs |\n", k, c.took.Seconds(), mega(float64(c.points)/c.took.Seconds()), float64(c.cpu.Microseconds())/float64(c.lines))
	}
	fmt.Println()
	return nil
}

// udp sends datagrams of one line each at a fixed rate to the binary's UDP
// listener (P4): once writing into influxd, which competes with the sender
// and sparkpulse for the machine's cores, and once into a sink that
// accepts writes and discards them, which measures the receiver alone.
func udp(bin, dir string) error {
	srv, err := influxtest.Launch(filepath.Join(dir, "influxd-udp"))
	if err != nil {
		return err
	}
	defer srv.Stop()
	null, err := nullSink()
	if err != nil {
		return err
	}
	defer null.Close()

	// One line per datagram, from the simulated reports, in a loop.
	reports, _ := simulatedStream(2)
	var lines [][]byte
	for _, r := range reports {
		for _, l := range bytes.SplitAfter(r, []byte("\n")) {
			if len(l) > 0 && !bytes.Contains(l, []byte(" NaN ")) {
				lines = append(lines, l)
			}
		}
	}
	var rows []string
	granted := ""
	for _, sink := range []struct {
		name, file, url string
		stored          func(p *proc) int
	}{
		{"InfluxDB 1.8.10", "influxdb", srv.URL, func(*proc) int { n, _ := pointsOK(srv, "udp"); return n }},
		{"null sink", "null", "http://" + null.Addr().String(), func(p *proc) int { return int(p.metric("sparkpulse_influxdb_points_written_total")) }},
	} {
		row, g, err := udpRun(bin, dir, sink.file, sink.url, lines, sink.stored)
		if err != nil {
			return fmt.Errorf("UDP into %s: %w", sink.name, err)
		}
		rows = append(rows, "| "+sink.name+" "+row)
		granted = g
	}
	fmt.Printf("## P4: UDP, one line per datagram (kernel receive buffer granted: %s bytes)\n\n", granted)
	fmt.Println("| writing into | rate asked | achieved | sent | received | lost | dropped (queue full) | points written | sparkpulse CPU per line |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Println(r)
	}
	fmt.Println()
	return nil
}

// udpRun starts the binary writing to url and sends it lines, one per
// datagram, at -udp-rate for -udp-time. It returns the table row (without
// its first cell) and the receive buffer the kernel granted.
func udpRun(bin, dir, name, url string, lines [][]byte, stored func(*proc) int) (row, granted string, err error) {
	port, err := freePort()
	if err != nil {
		return "", "", err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	conf := fmt.Sprintf("[[graphite]]\n  protocol = \"udp\"\n  udp-read-buffer = 8388608\n  bind-address = %q\n  database = \"udp\"\n", addr)
	p, err := startSparkpulse(bin, dir, url, conf)
	if err != nil {
		return "", "", err
	}
	defer p.stop()
	g := regexp.MustCompile(`"udp_read_buffer_granted":\s*(\d+)`).FindStringSubmatch(p.log.String())

	// The datagrams leave in batches of sendmmsg: one line each, as Spark's
	// sink sends them, but without a system call each, so that one sender
	// can stand in for a cluster's worth of them.
	c, err := net.Dial("udp", addr)
	if err != nil {
		return "", "", err
	}
	defer c.Close()
	pc := ipv4.NewPacketConn(c.(*net.UDPConn))
	const tick = time.Millisecond
	perTick := *udpRate / int(time.Second/tick)
	total := perTick * int(*udpTime/tick)
	ms := make([]ipv4.Message, perTick)
	profiled := make(chan error, 1)
	if *profile != "" {
		go func() { profiled <- p.saveProfile(*profile+".udp-"+name, min(8, int(udpTime.Seconds()))) }()
	} else {
		profiled <- nil
	}
	cpu0 := p.cpu()
	start := time.Now()
	sent := 0
	for t := start; sent < total; t = t.Add(tick) {
		time.Sleep(time.Until(t)) // the pace: perTick datagrams every millisecond
		for i := range ms {
			ms[i].Buffers = [][]byte{lines[(sent+i)%len(lines)]}
		}
		for batch := ms; len(batch) > 0; {
			n, err := pc.WriteBatch(batch, 0)
			if err != nil {
				return "", "", fmt.Errorf("sending datagrams: %w", err)
			}
			batch = batch[n:]
		}
		sent += len(ms)
	}
	took := time.Since(start)
	if err := <-profiled; err != nil {
		return "", "", err
	}
	// The count settles once the socket is drained; sparkpulse is another
	// process, so it is polled until it stops moving.
	received := -1.0
	for {
		time.Sleep(500 * time.Millisecond)
		r := p.metric("sparkpulse_graphite_datagrams_received_total")
		if r == received {
			break
		}
		received = r
	}
	// Written within batch-timeout and a request.
	for deadline := time.Now().Add(10 * time.Second); stored(p) < int(received) && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	queueFull := p.metric(`sparkpulse_lines_dropped_total{listener="udp://` + addr + `",reason="queue_full"}`)
	cpu := p.cpu() - cpu0
	row = fmt.Sprintf("| %s/s | %s/s | %d | %.0f | %.3f %% | %.0f | %d | %.2f µs |", mega(float64(*udpRate)), mega(float64(sent)/took.Seconds()),
		sent, received, 100*(1-received/float64(sent)), queueFull, stored(p), float64(cpu.Microseconds())/received)
	return row, first(g, 1), nil
}

// nullSink serves the part of InfluxDB's HTTP API that sparkpulse uses and
// throws the points away: /ping says 3.x, so the start-up check is
// skipped, and every write is read to its end and answered 204.
func nullSink() (net.Listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/ping", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Influxdb-Version", "3.0.0")
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /api/v2/write", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	})
	go http.Serve(ln, mux)
	return ln, nil
}

// soak runs the binary under a churning cluster (P5) and samples its CPU
// and resident memory.
func soak(bin, dir string) error {
	// The TSI index, as docs/operations.md advises for many applications: the
	// inmem index's max-series-per-database (a million) is reached within
	// minutes of this churn, and the soak is about sparkpulse.
	srv, err := influxtest.Launch(filepath.Join(dir, "influxd-soak"), influxtest.WithEnv("INFLUXDB_DATA_INDEX_VERSION=tsi1"))
	if err != nil {
		return err
	}
	defer srv.Stop()
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	const idleTTL = "2m"
	p, err := startSparkpulse(bin, dir, srv.URL, fmt.Sprintf("[deltas]\n  idle-ttl = %q\n", idleTTL)+withBlock("", addr, "soak"))
	if err != nil {
		return err
	}
	defer p.stop()

	// 20 applications of 40 executors reporting every 5 s: about 33 000
	// lines/s, which this influxd keeps up with while new series keep
	// coming; each application lives a minute (a new one every 3 s) and
	// each executor 30 s.
	cfg := simulate.Config{Addr: addr, Apps: 20, Executors: 40, Period: 5 * time.Second, Seed: 1,
		AppLifetime: time.Minute, ExecutorLifetime: 30 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), *soakTime)
	defer cancel()
	var sent, failed int
	var mu sync.Mutex
	done := make(chan error, 1)
	go func() {
		done <- simulate.Run(ctx, cfg, func(lines, f int) {
			mu.Lock()
			sent += lines
			failed += f
			mu.Unlock()
		})
	}()

	fmt.Printf("## P5: soak, %s of 20 applications × 40 executors every 5 s, a new application every 3 s, executors replaced every 30 s ([deltas] idle-ttl = %q)\n\n", *soakTime, idleTTL)
	fmt.Println("| minute | lines received | lines/s | RSS MiB | series cached | delta series | CPU per line (last interval) |")
	fmt.Println("|---|---|---|---|---|---|---|")
	const every = time.Minute
	start := time.Now()
	lastLines, lastCPU := p.metric("sparkpulse_lines_received_total"), p.cpu()
	cpu0, lines0 := lastCPU, lastLines
	var rss []int64
	if *profile != "" && *soakTime > 90*time.Second {
		// 30 s once the first minute has filled the caches.
		t := time.AfterFunc(time.Minute, func() { p.saveProfile(*profile+".soak", 30) })
		defer t.Stop()
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for running := true; running; {
		select {
		case <-tick.C:
		case err := <-done:
			if err != nil {
				return err
			}
			running = false
		}
		l, cpu := p.metric("sparkpulse_lines_received_total"), p.cpu()
		r := p.rss()
		rss = append(rss, r)
		fmt.Printf("| %.0f | %.0f | %.0f | %.1f | %.0f | %.0f | %.2f µs |\n", time.Since(start).Minutes(), l, (l-lastLines)/every.Seconds(),
			float64(r)/(1<<20), p.metric("sparkpulse_series_cached"), p.metric("sparkpulse_delta_series"),
			float64((cpu-lastCPU).Microseconds())/max(l-lastLines, 1))
		lastLines, lastCPU = l, cpu
	}
	total := lastLines - lines0
	fmt.Printf("\n%.0f lines received (%d sent, %d reports failed); CPU per line over the run: %.2f µs (P5 ≤ 1 µs)", total, sent, failed,
		float64((lastCPU-cpu0).Microseconds())/total)
	if len(rss) >= 4 {
		half := rss[len(rss)/2:]
		lo, hi := half[0], half[0]
		for _, v := range half {
			lo, hi = min(lo, v), max(hi, v)
		}
		fmt.Printf("; RSS over the second half: %.1f–%.1f MiB", float64(lo)/(1<<20), float64(hi)/(1<<20))
	}
	fmt.Println()
	// What became of the lines, once the writer's queue is empty.
	for deadline := time.Now().Add(time.Minute); p.metric("sparkpulse_influxdb_queue_bytes") > 0 && time.Now().Before(deadline); {
		time.Sleep(time.Second)
	}
	fmt.Printf("\nPoints written to InfluxDB: %.0f; refused by it: %.0f; dropped by sparkpulse (NaN values and other lines it does not write): %.0f; still queued: %.0f bytes\n",
		p.metric("sparkpulse_influxdb_points_written_total"), p.metric("sparkpulse_influxdb_points_rejected_total"),
		p.metric("sparkpulse_lines_dropped_total"), p.metric("sparkpulse_influxdb_queue_bytes"))
	return nil
}

// proc is a running sparkpulse binary.
type proc struct {
	cmd   *exec.Cmd
	admin string
	log   *syncBuffer
}

func startSparkpulse(bin, dir, url, conf string, influxKeys ...string) (*proc, error) {
	admin, err := freePort()
	if err != nil {
		return nil, err
	}
	full := fmt.Sprintf("[influxdb]\n  url = %q\n  create-database = true\n"+strings.Join(influxKeys, "\n")+"\n[admin]\n  bind-address = \"127.0.0.1:%d\"\n  pprof = true\n[internal]\n  enabled = false\n[log]\n  format = \"json\"\n", url, admin) + conf
	path := filepath.Join(dir, fmt.Sprintf("sparkpulse-%d.toml", admin))
	if err := os.WriteFile(path, []byte(full), 0o600); err != nil {
		return nil, err
	}
	p := &proc{cmd: exec.Command(bin, "run", "--config", path), admin: fmt.Sprintf("127.0.0.1:%d", admin), log: &syncBuffer{}}
	p.cmd.Stderr = p.log
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get("http://" + p.admin + "/healthz")
		if err == nil {
			resp.Body.Close()
			return p, nil
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("sparkpulse did not start: %v\n%s", err, p.log.String())
		}
	}
}

// saveProfile writes a CPU profile of the next seconds to file.
func (p *proc) saveProfile(file string, seconds int) error {
	return p.save(fmt.Sprintf("/debug/pprof/profile?seconds=%d", seconds), file)
}

// save writes what the admin endpoint serves at path to file.
func (p *proc) save(path, file string) error {
	resp, err := http.Get("http://" + p.admin + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (p *proc) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.cmd.Wait()
}

// metric is the sum of the samples in /metrics whose name (with labels)
// starts with name.
func (p *proc) metric(name string) float64 {
	resp, err := http.Get("http://" + p.admin + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, name) && (len(l) == len(name) || l[len(name)] == ' ' || l[len(name)] == '{' || strings.HasSuffix(name, "}")) {
			if i := strings.LastIndexByte(l, ' '); i > 0 {
				sum += atof(l[i+1:])
			}
		}
	}
	return sum
}

// cpu is the process's user plus system time, from /proc.
func (p *proc) cpu() time.Duration { return procCPU(p.cmd.Process.Pid) }

// procCPU is a process's CPU time, user and system, from /proc.
func procCPU(pid int) time.Duration {
	user, sys := procTimes(pid)
	return user + sys
}

// procTimes is a process's CPU time in user space and in the kernel.
func procTimes(pid int) (user, sys time.Duration) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime) * time.Second / 100, time.Duration(stime) * time.Second / 100 // USER_HZ
}

// rss is the process's resident memory in bytes.
func (p *proc) rss() int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tomlList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = strconv.Quote(x)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func atof(s string) float64 {
	v, _ := strconv.ParseFloat(s, 64)
	return v
}

func mega(v float64) string {
	if v >= 1e6 {
		return fmt.Sprintf("%.2f M", v/1e6)
	}
	return fmt.Sprintf("%.0f k", v/1e3)
}

func first(m []string, i int) string {
	if len(m) > i {
		return m[i]
	}
	return "?"
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	if m := regexp.MustCompile(`model name\s*:\s*(.*)`).FindSubmatch(b); m != nil {
		return string(m[1])
	}
	return runtime.GOARCH
}
