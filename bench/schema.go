package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sparkpulse/sparkpulse/influx/influxtest"
)

// The schema part: the built-in mapping's two shapes, wide and cern, side
// by side on the same stream. Each measurement runs the sparkpulse binary
// with one [[graphite]] block of one schema, writing through a counting
// proxy into an influxd of its own (so that its CPU is that schema's
// alone); the two schemas run one after the other, in alternating order
// from run to run, since the machine's cores are shared.

// coldCache is influxd's cache-snapshot-write-cold-duration here: a
// second after the last write, a shard's cache is written to TSM files,
// so that the CPU of persisting the points is measured too. The default
// (10 minutes) would leave one schema's points in the cache and the
// other's, past cache-snapshot-memory-size, in files.
const coldCache = "1s"

// schemaStream is a stream both schemas are given.
type schemaStream struct {
	name     string
	reports  [][]byte // each sent over its own TCP connection
	lines    int
	prefixes []string // spark-prefixes of the block
	// processes is the number of Spark processes that report, when known
	// beforehand; the stored series are checked against it.
	processes int
	senders   int // reports sent at once: 8 for the simulated cluster, 1 for a recording
	// perReport: the reports are single processes' reports (a recording's
	// chunks are not), so that figures per report mean something.
	perReport bool
}

// schemaResult is one schema's run over one stream.
type schemaResult struct {
	took            time.Duration // first byte sent to the last point acknowledged
	cpu             time.Duration // sparkpulse's
	received        float64       // lines sparkpulse received
	influxCPU       time.Duration // influxd's, until the last point was acknowledged
	influxPersisted time.Duration // influxd's, until its cache was on disk and it was idle
	points          int64         // points POSTed and acknowledged
	body, wire      int64         // their line protocol, and what travelled
	series          int
	processes       int   // (applicationid, process) pairs among the series
	values, deltas  int64 // field values stored: the metrics', and their deltas
	// noDelta is sparkpulse's count of samples of cumulative series that
	// got no plain delta, by outcome (first_unknown, out_of_order, …).
	noDelta map[string]float64
	// others is the CPU the machine spent during the run in processes
	// other than sparkpulse, influxd and the harness (senders, proxy).
	others time.Duration
	// keys and counts are what db holds, for telling runs apart: the
	// series keys, and the values of each field ("measurement field").
	keys   map[string]bool
	counts map[string]int64
}

func schemas(bin, dir string) error {
	fmt.Printf("## Schemas: wide against cern (a fresh influxd per schema and run, index %s; %d runs, alternating which schema goes first)\n\n", *index, *repeat)
	if *wideBatch > 0 {
		fmt.Printf("The wide block writes batches of %d points; the cern block sparkpulse's default.\n\n", *wideBatch)
	}
	fmt.Printf("%s; %s; sparkpulse at %s.\n\n", goVersion(), influxdVersion(dir), revision())
	if *connCount > 0 {
		if err := connBenchmarks(); err != nil {
			return err
		}
	}
	streams := []schemaStream{simulatedSchemaStream(*rounds)}
	recordings, _ := filepath.Glob(filepath.Join("testdata", "spark-real", "*", "graphite.txt.gz"))
	for _, f := range recordings {
		s, err := recordedStream(f)
		if err != nil {
			return err
		}
		streams = append(streams, s)
	}
	for _, st := range streams {
		runs := map[string][]schemaResult{}
		for r := range *repeat {
			order := []string{"wide", "cern"}
			if r%2 == 1 {
				order = []string{"cern", "wide"}
			}
			for _, schema := range order {
				res, err := schemaRun(bin, dir, st, schema, r)
				if err != nil {
					return fmt.Errorf("%s, schema %s, run %d: %w", st.name, schema, r+1, err)
				}
				runs[schema] = append(runs[schema], res)
			}
		}
		printSchemas(st, runs["wide"], runs["cern"])
	}
	return nil
}

func simulatedSchemaStream(rounds int) schemaStream {
	reports, lines := simulatedStream(rounds)
	return schemaStream{
		name:    fmt.Sprintf("simulated: %d rounds of reports of 8 applications × 50 executors, %d lines", rounds, lines),
		reports: reports, lines: lines, processes: 8 * 51, senders: 8, perReport: true,
	}
}

// recordedStream reads a recording of real Spark (testdata/spark-real,
// see package realspark). Its lines are in the order they arrived, the
// reports of its processes one after another; they are sent in chunks of
// one timestamp each, over a connection each.
func recordedStream(file string) (schemaStream, error) {
	dir := filepath.Dir(file)
	var meta struct {
		Prefix       string
		SparkVersion string `json:"spark_version"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "recording.json"))
	if err != nil {
		return schemaStream{}, err
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		return schemaStream{}, fmt.Errorf("%s: %w", file, err)
	}
	f, err := os.Open(file)
	if err != nil {
		return schemaStream{}, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return schemaStream{}, fmt.Errorf("%s: %w", file, err)
	}
	st := schemaStream{name: "real Spark " + meta.SparkVersion + " (" + file + ")", prefixes: []string{meta.Prefix}, senders: 1}
	var chunk []byte
	last := ""
	sc := bufio.NewScanner(zr)
	for sc.Scan() {
		l := sc.Text()
		if strings.TrimSpace(l) == "" {
			continue
		}
		ts := l[strings.LastIndexByte(l, ' ')+1:]
		if ts != last && len(chunk) > 0 {
			st.reports = append(st.reports, chunk)
			chunk = nil
		}
		last = ts
		chunk = append(append(chunk, l...), '\n')
		st.lines++
	}
	if len(chunk) > 0 {
		st.reports = append(st.reports, chunk)
	}
	return st, sc.Err()
}

// schemaRun sends the stream through sparkpulse with one block of schema
// into a new influxd, and reads back what it stored.
func schemaRun(bin, dir string, st schemaStream, schema string, r int) (schemaResult, error) {
	var res schemaResult
	base := filepath.Join(dir, fmt.Sprintf("influxd-%s-%d", schema, r))
	defer os.RemoveAll(base)
	srv, err := influxtest.Launch(base, influxtest.WithEnv("INFLUXDB_DATA_CACHE_SNAPSHOT_WRITE_COLD_DURATION="+coldCache,
		"INFLUXDB_DATA_INDEX_VERSION="+*index))
	if err != nil {
		return res, err
	}
	defer srv.Stop()
	px, err := newCountingProxy(srv.URL)
	if err != nil {
		return res, err
	}
	defer px.close()
	port, err := freePort()
	if err != nil {
		return res, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	const db = "spark"
	conf := fmt.Sprintf("[deltas]\n  enabled = true\n[[graphite]]\n  schema = %q\n", schema)
	if len(st.prefixes) > 0 {
		conf += "  spark-prefixes = " + tomlList(st.prefixes) + "\n"
	}
	if schema == "wide" && *wideBatch > 0 {
		conf += fmt.Sprintf("  batch-size = %d\n", *wideBatch)
	}
	p, err := startSparkpulse(bin, dir, px.url, withBlock(conf, addr, db))
	if err != nil {
		return res, err
	}
	defer p.stop()

	cpu0, icpu0, hcpu0, mcpu0 := p.cpu(), procCPU(srv.PID()), procCPU(os.Getpid()), machineCPU()
	start := time.Now()
	if err := sendConfirmed(addr, st.reports, st.senders); err != nil {
		return res, err
	}
	// Done when sparkpulse has every line and InfluxDB has acknowledged
	// every point sparkpulse made of them; sparkpulse is polled only now,
	// so that its /metrics are not in its CPU while it works.
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		res.received = p.metric("sparkpulse_lines_received_total")
		encoded := p.metric("sparkpulse_points_encoded_total")
		if res.received >= float64(st.lines) && float64(px.points.Load()) >= encoded {
			break
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("after %s: %.0f of %d lines received, %d of %.0f points acknowledged\n%s",
				5*time.Minute, res.received, st.lines, px.points.Load(), encoded, p.log.String())
		}
	}
	res.took, res.cpu, res.influxCPU = time.Since(start), p.cpu()-cpu0, procCPU(srv.PID())-icpu0
	// Ticks are 10 ms: a quiet machine can come out a little below zero.
	res.others = max(0, machineCPU()-mcpu0-res.cpu-res.influxCPU-(procCPU(os.Getpid())-hcpu0))
	if n := p.metric("sparkpulse_influxdb_points_rejected_total"); n > 0 {
		return res, fmt.Errorf("InfluxDB refused %.0f points\n%s", n, p.log.String())
	}
	res.noDelta = map[string]float64{}
	for _, o := range []string{"reset", "first_new", "first_unknown", "out_of_order", "refused", "refused_app_quota"} {
		if n := p.metric(`sparkpulse_delta_samples_total{outcome="` + o + `"}`); n > 0 {
			res.noDelta[o] = n
		}
	}
	persisted, err := settle(srv, db)
	if err != nil {
		return res, err
	}
	res.influxPersisted = persisted - icpu0
	res.points, res.body, res.wire = px.points.Load(), px.body.Load(), px.wire.Load()
	if res.keys, res.processes, err = seriesOf(srv, db); err != nil {
		return res, err
	}
	res.series = len(res.keys)
	if res.values, res.deltas, res.counts, err = storedValues(srv, db); err != nil {
		return res, err
	}
	if st.processes > 0 && res.processes != st.processes {
		return res, fmt.Errorf("the series name %d Spark processes, the stream has %d", res.processes, st.processes)
	}
	return res, nil
}

// sendConfirmed sends each report over its own TCP connection, from
// parallel senders, and waits until sparkpulse closes it, which it does
// once it has handled every line: a process's next report is not read
// before its last one, as with Spark's period between them, so that the
// deltas, which a sample out of order does not get, are the same in every
// run and schema.
func sendConfirmed(addr string, reports [][]byte, parallel int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, parallel)
	for i := range parallel {
		wg.Go(func() {
			for {
				n := int(next.Add(1)) - 1
				if n >= len(reports) {
					return
				}
				if err := sendOne(addr, reports[n]); err != nil {
					errs[i] = err
					next.Store(int64(len(reports))) // the others stop too
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func sendOne(addr string, report []byte) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write(report); err != nil {
		return err
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, c)
	return err
}

// machineCPU is the time the machine's CPUs have been busy, from
// /proc/stat.
func machineCPU() time.Duration {
	b, _ := os.ReadFile("/proc/stat")
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal …
	var ticks int64
	for i, v := range f[1:min(len(f), 9)] {
		if i != 3 && i != 4 { // idle, iowait
			n, _ := strconv.ParseInt(v, 10, 64)
			ticks += n
		}
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}

// settle waits until influxd has written db's cache to TSM files and has
// then been idle (under 10 ms of CPU) for a second, and returns its CPU
// time.
func settle(srv *influxtest.Server, db string) (time.Duration, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		mem, err := cacheBytes(srv, db)
		if err != nil {
			return 0, err
		}
		if mem == 0 {
			break
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("influxd still holds %d bytes of %s in its cache", mem, db)
		}
		time.Sleep(200 * time.Millisecond)
	}
	last := procCPU(srv.PID())
	for time.Now().Before(deadline) {
		time.Sleep(time.Second)
		now := procCPU(srv.PID())
		if now-last <= 10*time.Millisecond {
			return now, nil
		}
		last = now
	}
	return 0, errors.New("influxd did not become idle within 2 minutes")
}

// cacheBytes is the size of db's points in influxd's in-memory cache.
func cacheBytes(srv *influxtest.Server, db string) (int64, error) {
	series, err := srv.TryQuery("", "SHOW STATS FOR 'tsm1_cache'")
	if err != nil {
		return 0, err
	}
	var n int64
	found := false
	for _, s := range series {
		if s.Tags["database"] != db {
			continue
		}
		for i, c := range s.Columns {
			if c == "memBytes" {
				for _, row := range s.Values {
					v, _ := row[i].(json.Number).Int64()
					n += v
					found = true
				}
			}
		}
	}
	if !found {
		return 0, fmt.Errorf("SHOW STATS has no cache of %s", db)
	}
	return n, nil
}

// seriesOf returns db's series keys and counts the Spark processes they
// name: the distinct (applicationid, process) pairs.
func seriesOf(srv *influxtest.Server, db string) (keys map[string]bool, processes int, err error) {
	res, err := srv.TryQuery(db, "SHOW SERIES")
	if err != nil {
		return nil, 0, err
	}
	keys = map[string]bool{}
	procs := map[string]bool{}
	for _, s := range res {
		for _, row := range s.Values {
			key, _ := row[0].(string)
			keys[key] = true
			var app, proc string
			for _, part := range splitUnescaped(key, ',')[1:] {
				kv := splitUnescaped(part, '=')
				if len(kv) != 2 {
					continue
				}
				switch kv[0] {
				case "applicationid":
					app = kv[1]
				case "process":
					proc = kv[1]
				}
			}
			if app != "" && proc != "" {
				procs[app+"\x00"+proc] = true
			}
		}
	}
	return keys, len(procs), nil
}

// splitUnescaped splits a series key's text at each sep not escaped by a
// backslash.
func splitUnescaped(s string, sep byte) []string {
	var parts []string
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case sep:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// storedValues counts the field values db holds: those of the metrics,
// and the deltas of their cumulative ones. A derived field is "delta" or
// "rate" (the CERN shape, and paths that are not Spark's), or, in the wide
// shape, F_delta and F_rate where the measurement has both: Dropwizard's
// own fields such as "messageProcessingTime.mean_rate" are values.
// It also returns the count of every field, by "measurement field".
func storedValues(srv *influxtest.Server, db string) (values, deltas int64, all map[string]int64, err error) {
	res, err := srv.TryQuery(db, `SELECT count(*) FROM /.*/`)
	if err != nil {
		return 0, 0, nil, err
	}
	all = map[string]int64{}
	for _, s := range res {
		if len(s.Values) != 1 {
			return 0, 0, nil, fmt.Errorf("count(*) of %s: %d rows", s.Name, len(s.Values))
		}
		counts := map[string]int64{}
		for i, c := range s.Columns {
			if f, ok := strings.CutPrefix(c, "count_"); ok {
				n, _ := s.Values[0][i].(json.Number) // null where a field has no value
				counts[f], _ = n.Int64()
			}
		}
		derived := func(f, suffix, other string) bool {
			g, ok := strings.CutSuffix(f, suffix)
			if !ok {
				return false
			}
			_, hasG := counts[g]
			_, hasOther := counts[g+other]
			return hasG && hasOther
		}
		for f, n := range counts {
			all[s.Name+" "+f] = n
			switch {
			case f == "delta" || derived(f, "_delta", "_rate"):
				deltas += n
			case f == "rate" || derived(f, "_rate", "_delta"):
			default:
				values += n
			}
		}
	}
	return values, deltas, all, nil
}

// countingProxy forwards sparkpulse's requests to influxd and counts the
// writes influxd acknowledged: their points, their line protocol and the
// bytes that travelled (less when gzipped).
type countingProxy struct {
	ln                 net.Listener
	url, target        string
	points, body, wire atomic.Int64
}

func newCountingProxy(target string) (*countingProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &countingProxy{ln: ln, url: "http://" + ln.Addr().String(), target: target}
	go http.Serve(ln, p)
	return p, nil
}

func (p *countingProxy) close() { p.ln.Close() }

func (p *countingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/write") || resp.StatusCode != http.StatusNoContent {
		return
	}
	lp := body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err == nil {
			lp, err = io.ReadAll(zr)
		}
		if err != nil {
			return // influxd took it: it cannot be
		}
	}
	p.wire.Add(int64(len(body)))
	p.body.Add(int64(len(lp)))
	p.points.Add(int64(bytes.Count(lp, []byte("\n")) + btoi(len(lp) > 0 && lp[len(lp)-1] != '\n')))
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// printSchemas writes a stream's table: each figure's range over the
// runs for each schema, and the ratio of cern to wide within each run.
func printSchemas(st schemaStream, wide, cern []schemaResult) {
	fmt.Printf("### %s\n\n", st.name)
	procs := cern[0].processes
	fmt.Printf("%d reports, %d Spark processes.\n\n", len(st.reports), procs)
	fmt.Println("| per run | wide | cern | cern ÷ wide | goal |")
	fmt.Println("|---|---|---|---|---|")
	row := func(name string, f func(schemaResult) float64, show func(float64) string, goal string) {
		var w, c, ratio []float64
		for i := range wide {
			w, c = append(w, f(wide[i])), append(c, f(cern[i]))
			if f(wide[i]) != 0 {
				ratio = append(ratio, f(cern[i])/f(wide[i]))
			}
		}
		r := spread(ratio, "%.2f") + "×"
		if goal == "-" { // a figure of the machine, not of the schema
			r, goal = "", ""
		}
		fmt.Printf("| %s | %s | %s | %s | %s |\n", name, spreadOf(w, show), spreadOf(c, show), r, goal)
	}
	lines := float64(st.lines)
	perValue := func(d func(schemaResult) time.Duration) func(schemaResult) float64 {
		return func(r schemaResult) float64 { return float64(d(r).Nanoseconds()) / lines }
	}
	count := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	row("influxd CPU per Spark value, until the last write was acknowledged", perValue(func(r schemaResult) time.Duration { return r.influxCPU }), micros, "wide ≥ 1.8× less")
	row("influxd CPU per Spark value, until its cache was written to disk", perValue(func(r schemaResult) time.Duration { return r.influxPersisted }), micros, "wide ≥ 1.8× less")
	row("series", func(r schemaResult) float64 { return float64(r.series) }, count, "")
	row("series per process", func(r schemaResult) float64 { return float64(r.series) / float64(r.processes) }, func(v float64) string { return fmt.Sprintf("%.1f", v) }, "wide ≥ 20× fewer")
	if st.perReport {
		reports := float64(len(st.reports))
		row("points per report", func(r schemaResult) float64 { return float64(r.points) / reports }, func(v float64) string { return fmt.Sprintf("%.1f", v) }, "")
		row("line-protocol bytes per report", func(r schemaResult) float64 { return float64(r.body) / reports }, count, "")
	}
	row("line-protocol bytes per Spark value", func(r schemaResult) float64 { return float64(r.body) / lines }, func(v float64) string { return fmt.Sprintf("%.1f", v) }, "")
	if wide[0].wire != wide[0].body {
		row("bytes sent per Spark value (gzip)", func(r schemaResult) float64 { return float64(r.wire) / lines }, func(v float64) string { return fmt.Sprintf("%.1f", v) }, "")
	}
	row("sparkpulse CPU per line", func(r schemaResult) float64 { return float64(r.cpu.Nanoseconds()) / r.received }, micros, "")
	row("lines/s, first byte sent to last point acknowledged", func(r schemaResult) float64 { return lines / r.took.Seconds() }, mega, "")
	row("CPU of other processes on the machine meanwhile, per second of the run", func(r schemaResult) float64 { return r.others.Seconds() / r.took.Seconds() },
		func(v float64) string { return fmt.Sprintf("%.2f s", v) }, "-")
	row("values stored (deltas and rates aside)", func(r schemaResult) float64 { return float64(r.values) }, count, "equal")
	row("deltas stored", func(r schemaResult) float64 { return float64(r.deltas) }, count, "equal")
	lost := 0
	for i := range wide {
		if wide[i].values != cern[i].values || wide[i].deltas != cern[i].deltas {
			lost++
		}
	}
	if lost == 0 {
		fmt.Printf("\nValues and deltas stored: equal in both schemas in each of the %d runs (%d lines sent, of which NaN and other lines no point is made of are not stored).\n\n", len(wide), st.lines)
	} else {
		fmt.Printf("\nValues or deltas stored DIFFER between the schemas in %d of %d runs.\n\n", lost, len(wide))
		for i := range wide {
			fmt.Printf("- run %d: values %d wide, %d cern; deltas %d wide, %d cern; samples without a plain delta %v wide, %v cern\n",
				i+1, wide[i].values, cern[i].values, wide[i].deltas, cern[i].deltas, wide[i].noDelta, cern[i].noDelta)
		}
		fmt.Println()
	}
	for i, runs := range [][]schemaResult{wide, cern} {
		if d := differences(runs); len(d) > 0 {
			fmt.Printf("The runs of %s stored different series or values:\n\n", []string{"wide", "cern"}[i])
			for _, l := range d {
				fmt.Println("- " + l)
			}
			fmt.Println()
		}
	}
}

// differences lists, up to 20, the series keys and field counts in which
// a run differs from the first.
func differences(runs []schemaResult) []string {
	var out []string
	add := func(s string) {
		if len(out) < 20 {
			out = append(out, s)
		}
	}
	first := runs[0]
	for i, r := range runs[1:] {
		for k := range r.keys {
			if !first.keys[k] {
				add(fmt.Sprintf("run %d has series %q, run 1 not", i+2, k))
			}
		}
		for k := range first.keys {
			if !r.keys[k] {
				add(fmt.Sprintf("run 1 has series %q, run %d not", k, i+2))
			}
		}
		for k, n := range r.counts {
			if first.counts[k] != n {
				add(fmt.Sprintf("%s: %d values in run %d, %d in run 1", k, n, i+2, first.counts[k]))
			}
		}
		for k, n := range first.counts {
			if _, ok := r.counts[k]; !ok {
				add(fmt.Sprintf("%s: %d values in run 1, none in run %d", k, n, i+2))
			}
		}
	}
	return out
}

// connBenchmarks runs BenchmarkConn of the relay package here and, with
// -base, in an earlier checkout, and prints ns per line side by side.
func connBenchmarks() error {
	trees := []string{"."}
	if *base != "" {
		trees = append(trees, *base)
	}
	re := regexp.MustCompile(`^BenchmarkConn/(\S+?)-\d+\s+\d+\s+([\d.]+) ns/op.*?\s(\d+) allocs/op`)
	ns := make([]map[string][]float64, len(trees))
	allocs := make([]map[string][]float64, len(trees))
	var order []string
	for i, tree := range trees {
		cmd := exec.Command("go", "test", "./relay", "-run", "^$", "-bench", "^BenchmarkConn$", "-benchmem", "-count", fmt.Sprint(*connCount))
		cmd.Dir = tree
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("BenchmarkConn in %s: %v\n%s", tree, err, out)
		}
		ns[i], allocs[i] = map[string][]float64{}, map[string][]float64{}
		for _, l := range strings.Split(string(out), "\n") {
			m := re.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			if _, ok := ns[0][m[1]]; !ok && i == 0 {
				order = append(order, m[1])
			}
			ns[i][m[1]] = append(ns[i][m[1]], atof(m[2]))
			allocs[i][m[1]] = append(allocs[i][m[1]], atof(m[3]))
		}
	}
	fmt.Printf("relay BenchmarkConn, -count %d (ns per line, the in-process ingest path):\n\n", *connCount)
	if len(trees) == 1 {
		fmt.Println("| benchmark | ns/line | allocs/line |")
		fmt.Println("|---|---|---|")
		for _, name := range order {
			fmt.Printf("| %s | %s | %s |\n", name, spread(ns[0][name], "%.0f"), spread(allocs[0][name], "%.0f"))
		}
	} else {
		fmt.Printf("| benchmark | ns/line | allocs/line | ns/line in %s | allocs/line there |\n", *base)
		fmt.Println("|---|---|---|---|---|")
		for _, name := range order {
			fmt.Printf("| %s | %s | %s | %s | %s |\n", name, spread(ns[0][name], "%.0f"), spread(allocs[0][name], "%.0f"),
				spread(ns[1][name], "%.0f"), spread(allocs[1][name], "%.0f"))
		}
	}
	fmt.Println()
	return nil
}

func goVersion() string {
	out, _ := exec.Command("go", "version").Output()
	return strings.TrimSpace(string(out))
}

// influxdVersion is the module version of the influxd the harness runs
// (built with go install, it answers "unknown" itself).
func influxdVersion(dir string) string {
	srv, err := influxtest.Launch(filepath.Join(dir, "influxd-version"))
	if err != nil {
		return "influxd: " + err.Error()
	}
	defer srv.Stop()
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", srv.PID()))
	if err != nil {
		return "influxd: " + err.Error()
	}
	out, _ := exec.Command("go", "version", "-m", exe).Output()
	if m := regexp.MustCompile(`(?m)^\s+mod\s+(\S+)\s+(\S+)`).FindSubmatch(out); m != nil {
		return fmt.Sprintf("influxd %s (%s, %s)", m[2], m[1], exe)
	}
	return "influxd " + exe
}

// revision is the commit of the tree, and whether it has changes.
func revision() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "an unknown commit"
	}
	r := strings.TrimSpace(string(out))
	if out, _ := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); len(out) > 0 {
		r += " with changes"
	}
	return r
}
