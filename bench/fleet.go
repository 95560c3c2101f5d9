package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sparkpulse/sparkpulse/grafana"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/simulate"
	"github.com/sparkpulse/sparkpulse/spark"
	"github.com/sparkpulse/sparkpulse/sparkui"
	"github.com/sparkpulse/sparkpulse/templates"
)

// The fleet part: a Spark fleet's days compressed into minutes. Each
// simulated day starts -apps-per-day applications, each with its own id
// and a driver and executors (the number drawn from -executors), every
// process sending -reports reports of the simulator's Spark metrics, one
// TCP connection each, to the sparkpulse binary, which writes them to a
// real influxd. Series, not points, are what a fleet piles up in
// InfluxDB's index, so few reports per process suffice. The points are
// dated in simulated time, which starts -days ago and so stays in the
// past. After each day, and when the applications pass a -measure-at
// count, the harness waits until sparkpulse has delivered everything and
// reads what InfluxDB refused, its cardinality, disk and memory, and the
// time of the dashboards' variable queries and of `report --fleet`. A
// target stops at the first refused point, past -budget, or after the
// last day.

var (
	appsPerDay    = flag.Int("apps-per-day", 5000, "fleet: applications started per simulated day")
	executorsDist = flag.String("executors", "2:50,8:25,24:18,60:7", "fleet: executors per application, as count:weight,… (the default averages 11.5: 57 500 executors a day at 5 000 applications)")
	fleetDays     = flag.Int("days", 365, "fleet: simulated days at most")
	fleetTargets  = flag.String("target", "influxd1-inmem,influxd1-tsi1,influxd2", "fleet: the InfluxDB setups, run in turn: influxd1-inmem, influxd1-tsi1, influxd2")
	fleetReports  = flag.Int("reports", 1, "fleet: reports per driver and executor, -period apart")
	fleetPeriod   = flag.Duration("period", 10*time.Second, "fleet: Spark's reporting period (sink.graphite.period)")
	fleetBudget   = flag.Duration("budget", 0, "fleet: wall time per target; no more applications are sent after it (0: no limit)")
	fleetSenders  = flag.Int("senders", 8, "fleet: applications sent at once")
	fleetSeed     = flag.Uint64("seed", 1, "fleet: seed of the executor counts and the simulated values")
	measureAt     = flag.String("measure-at", "1000,10000,100000", "fleet: also measure when the applications sent reach these counts")
	queryRuns     = flag.Int("query-runs", 3, "fleet: runs of each timed query; their range is printed")
	fleetFields   = flag.String("fields", "all", "fleet: the lines of each report sent: all, or one, the first line of each series of the wide schema (its series, tags and index as with all, its points of one field: the writes cost a fraction, the TSM files are no measure)")
	fleetDeltas   = flag.Bool("deltas", false, "fleet: sparkpulse's deltas on (a first sample's delta is its value; past a million paths in a minute or two of wall time, first samples go without)")
	maxRSS        = flag.Int("max-rss-mib", 0, "fleet: stop a target once influxd's resident memory passes this many MiB (0: 60 % of the machine's), so that a shared machine is not run out of memory")
	factsWait     = flag.Duration("facts-wait", 10*time.Minute, "fleet: with -facts, how long to wait at each measurement for the accounting of every application sent")
	fleetFacts    = flag.Bool("facts", false, "fleet: also serve the applications' Spark REST API as a History Server and, at each measurement, run a sparkpulse that annotates from it until the applications' accounting is written (40–70 applications a second here)")
	rpDuration    = dayDuration{}
	shardDuration = dayDuration{}
	influxdSet    = settings{}
	influxd2Set   = settings{}
)

func init() {
	flag.Var(&rpDuration, "rp-duration", "fleet: retention of the metrics database, e.g. 30d, enforced on simulated time: after each measurement the shard groups that ended before it are dropped, as influxd's retention service does on the wall clock (0: infinite)")
	flag.Var(&shardDuration, "shard-duration", "fleet: shard group duration of the metrics database, e.g. 1d (0: influxd's default for the retention)")
	flag.Var(&influxdSet, "influxd-set", "fleet: a setting of influxd 1.x, [section.]key=value (section data by default), e.g. max-values-per-tag=0; repeatable")
	flag.Var(&influxd2Set, "influxd2-set", "fleet: a flag of influxd 2.x, key=value, e.g. storage-cache-max-memory-size=2147483648; repeatable")
}

// dayDuration is a duration flag that also takes days and weeks (30d, 2w).
type dayDuration struct{ d time.Duration }

func (f *dayDuration) String() string { return fmtDays(f.d) }

func (f *dayDuration) Set(s string) error {
	for suffix, unit := range map[string]time.Duration{"d": 24 * time.Hour, "w": 7 * 24 * time.Hour} {
		if n, ok := strings.CutSuffix(s, suffix); ok {
			v, err := strconv.ParseFloat(n, 64)
			if err != nil {
				return err
			}
			f.d = time.Duration(v * float64(unit))
			return nil
		}
	}
	d, err := time.ParseDuration(s)
	f.d = d
	return err
}

func fmtDays(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	}
	return d.String()
}

// settings is a repeatable key=value flag.
type settings []string

func (s *settings) String() string { return strings.Join(*s, " ") }

func (s *settings) Set(v string) error {
	if !strings.Contains(v, "=") {
		return fmt.Errorf("%q: want key=value", v)
	}
	*s = append(*s, v)
	return nil
}

// fleetDB is an influxd of one target, with the metrics database "spark"
// made.
type fleetDB struct {
	name     string // and version
	pid      int
	dirs     []string           // what the disk figures sum
	ql       *influxtest.Server // InfluxQL, through /query
	url      string
	influx   []string // [influxdb] keys sparkpulse needs besides url
	block    string   // the [[graphite]] block's target keys beside its database
	stop     func()
	log      func() string
	shardDur time.Duration                            // of the metrics database, for the retention
	expire   func(cutoff time.Time) (int, error)      // drops what ended before cutoff; the shards dropped
	cardin   func() (series, appIDs int64, err error) // the database's series and applicationid values
}

const fleetDatabase = "spark"

func startFleetDB(target, dir string) (*fleetDB, error) {
	switch target {
	case "influxd1-inmem", "influxd1-tsi1":
		return startFleetDB1(strings.TrimPrefix(target, "influxd1-"), dir)
	case "influxd2":
		return startFleetDB2(dir)
	}
	return nil, fmt.Errorf("unknown target %q: influxd1-inmem, influxd1-tsi1 or influxd2", target)
}

// defaultShardDuration is InfluxDB's shard group duration for a retention
// policy's duration (1.x and 2.x alike).
func defaultShardDuration(rp time.Duration) time.Duration {
	switch {
	case rp == 0 || rp > 180*24*time.Hour:
		return 7 * 24 * time.Hour
	case rp >= 2*24*time.Hour:
		return 24 * time.Hour
	}
	return time.Hour
}

func startFleetDB1(index, dir string) (*fleetDB, error) {
	env := []string{"INFLUXDB_DATA_INDEX_VERSION=" + index}
	for _, kv := range influxdSet {
		k, v, _ := strings.Cut(kv, "=")
		if !strings.Contains(k, ".") {
			k = "data." + k
		}
		env = append(env, "INFLUXDB_"+strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(k))+"="+v)
	}
	srv, err := influxtest.Launch(dir, influxtest.WithEnv(env...))
	if err != nil {
		return nil, err
	}
	db := &fleetDB{name: "influxd " + influxdVersion1(srv.PID()) + ", " + index, pid: srv.PID(), ql: srv, url: srv.URL,
		dirs: []string{filepath.Join(dir, "data"), filepath.Join(dir, "wal")}, stop: srv.Stop, log: srv.Log,
		shardDur: orDefault(shardDuration.d, defaultShardDuration(rpDuration.d))}
	// The retention policy on the server keeps everything: the simulated
	// days lie in the past, and a real duration would refuse the oldest
	// of them as they are written. The harness drops the shards.
	create := fmt.Sprintf("CREATE DATABASE %s WITH DURATION INF SHARD DURATION %s NAME fleet", fleetDatabase, influxDur(db.shardDur))
	if _, err := srv.TryQuery("", create); err != nil {
		srv.Stop()
		return nil, fmt.Errorf("%s: %w", create, err)
	}
	db.expire = func(cutoff time.Time) (int, error) {
		res, err := srv.TryQuery("", "SHOW SHARDS")
		if err != nil {
			return 0, err
		}
		n := 0
		for _, s := range res {
			if s.Name != fleetDatabase {
				continue
			}
			col := columnIndex(s.Columns)
			for _, row := range s.Values {
				end, err := time.Parse(time.RFC3339, fmt.Sprint(row[col["end_time"]]))
				if err != nil || end.After(cutoff) {
					continue
				}
				if _, err := srv.TryQuery("", fmt.Sprintf("DROP SHARD %v", row[col["id"]])); err != nil {
					return n, err
				}
				n++
			}
		}
		return n, nil
	}
	db.cardin = func() (int64, int64, error) {
		res, err := slowQuery(srv.URL, "", "SHOW SERIES CARDINALITY")
		if err != nil {
			return 0, 0, err
		}
		apps, err := maxTagValues(srv.URL, "")
		return sum(res), apps, err
	}
	return db, nil
}

// slowQuery runs an InfluxQL statement on the metrics database with a
// timeout of ten minutes: the cardinality queries take longer than
// influxtest's 30 s as the index grows.
func slowQuery(url, token, q string) ([]influxtest.Series, error) {
	return slowQueryIn(url, token, fleetDatabase, q)
}

// slowQueryIn is slowQuery on database db.
func slowQueryIn(url, token, db, q string) ([]influxtest.Series, error) {
	req, _ := http.NewRequest(http.MethodPost, url+"/query", strings.NewReader(neturl.Values{"q": {q}, "db": {db}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if token != "" {
		req.Header.Set("Authorization", "Token "+token)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Minute}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Error   string
		Results []struct {
			Error  string
			Series []influxtest.Series
		}
	}
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("%s: %w", resp.Status, err)
	}
	var out []influxtest.Series
	for _, res := range r.Results {
		if res.Error != "" {
			return nil, errors.New(res.Error)
		}
		out = append(out, res.Series...)
	}
	if r.Error != "" {
		return nil, errors.New(r.Error)
	}
	return out, nil
}

func startFleetDB2(dir string) (*fleetDB, error) {
	// influxd 2.x reads every flag from INFLUXD_<FLAG> as well.
	var env []string
	for _, kv := range influxd2Set {
		k, v, _ := strings.Cut(kv, "=")
		env = append(env, "INFLUXD_"+strings.ToUpper(strings.ReplaceAll(k, "-", "_"))+"="+v)
	}
	srv, err := influxtest.Launch2(dir, influxtest.WithEnv(env...))
	if err != nil {
		return nil, err
	}
	db := &fleetDB{name: "influxd " + srv.Version, pid: srv.PID(), ql: srv.InfluxQL(), url: srv.URL,
		dirs: []string{filepath.Join(dir, "engine")}, stop: srv.Stop, log: srv.Log,
		influx: []string{fmt.Sprintf("  org = %q\n  token = %q", srv.Org, srv.Token)},
		block:  fmt.Sprintf("  bucket = %q\n", srv.Bucket), shardDur: orDefault(shardDuration.d, defaultShardDuration(rpDuration.d))}
	// The onboarded bucket keeps everything, as in 1.x; its shard group
	// duration is set, and the harness deletes what the retention would.
	rule := map[string]any{"type": "expire", "everySeconds": 0, "shardGroupDurationSeconds": int64(db.shardDur / time.Second)}
	if err := srv.TryAPI(srv.Token, http.MethodPatch, "/api/v2/buckets/"+srv.BucketID, map[string]any{"retentionRules": []any{rule}}, nil); err != nil {
		srv.Stop()
		return nil, fmt.Errorf("setting the bucket's shard group duration: %w", err)
	}
	db.expire = func(cutoff time.Time) (int, error) {
		// 2.x has no DROP SHARD: a delete of everything before the
		// cutoff, a shard group boundary, removes the same data, and
		// the series left with none.
		body := map[string]any{"start": time.Unix(0, 0).UTC().Format(time.RFC3339), "stop": cutoff.UTC().Format(time.RFC3339)}
		q := neturl.Values{"org": {srv.Org}, "bucket": {srv.Bucket}}
		return 0, srv.TryAPI(srv.Token, http.MethodPost, "/api/v2/delete?"+q.Encode(), body, nil)
	}
	db.cardin = func() (int64, int64, error) {
		series, err := fluxCardinality(srv)
		if err != nil {
			return 0, 0, err
		}
		apps, err := maxTagValues(srv.URL, srv.Token)
		return series, apps, err
	}
	return db, nil
}

func orDefault(d, otherwise time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return otherwise
}

// influxDur writes d in InfluxQL's duration literal.
func influxDur(d time.Duration) string {
	if d%time.Hour == 0 {
		return fmt.Sprintf("%dh", d/time.Hour)
	}
	return fmt.Sprintf("%ds", d/time.Second)
}

func columnIndex(cols []string) map[string]int {
	m := map[string]int{}
	for i, c := range cols {
		m[c] = i
	}
	return m
}

// scalar is the sum of the last column of q's answer on the metrics
// database.
func scalar(srv *influxtest.Server, q string) (int64, error) {
	res, err := srv.TryQuery(fleetDatabase, q)
	return sum(res), err
}

func sum(res []influxtest.Series) int64 {
	var n int64
	for _, s := range res {
		for _, row := range s.Values {
			if v, ok := row[len(row)-1].(json.Number); ok {
				x, _ := v.Int64()
				n += x
			}
		}
	}
	return n
}

// maxTagValues is the largest count of applicationid values in one
// measurement: what max-values-per-tag (per measurement and key) is held
// against.
func maxTagValues(url, token string) (int64, error) {
	res, err := slowQuery(url, token, `SHOW TAG VALUES CARDINALITY WITH KEY = "applicationid"`)
	if err != nil {
		return 0, err
	}
	var most int64
	for _, s := range res {
		most = max(most, sum([]influxtest.Series{s}))
	}
	return most, nil
}

// fluxCardinality is the bucket's series cardinality from Flux: 2.x's
// InfluxQL has no SHOW SERIES CARDINALITY.
func fluxCardinality(srv *influxtest.Server2) (int64, error) {
	q := fmt.Sprintf(`import "influxdata/influxdb"
influxdb.cardinality(bucket: %q, start: 1970-01-01T00:00:00Z)`, srv.Bucket)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/v2/query?org="+neturl.QueryEscape(srv.Org), strings.NewReader(q))
	req.Header.Set("Content-Type", "application/vnd.flux")
	req.Header.Set("Authorization", "Token "+srv.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("flux cardinality: %s: %s", resp.Status, b)
	}
	// Annotated CSV: the _value column of the one row.
	var col = -1
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Split(strings.TrimSpace(l), ",")
		if col < 0 {
			col = slices.Index(f, "_value")
			continue
		}
		if len(f) > col && f[col] != "" {
			return strconv.ParseInt(f[col], 10, 64)
		}
	}
	return 0, fmt.Errorf("flux cardinality: no value in %q", b)
}

// influxdVersion1 is the module version the running influxd 1.x was built
// from.
func influxdVersion1(pid int) string {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return "1.x"
	}
	out, _ := exec.Command("go", "version", "-m", exe).Output()
	if m := regexp.MustCompile(`(?m)^\s+mod\s+\S+\s+(\S+)`).FindSubmatch(out); m != nil {
		return string(m[1])
	}
	return "1.x"
}

// fleetApp is one simulated application.
type fleetApp struct {
	n         int // from 0, over the whole run
	start     time.Time
	executors int
}

// execCounts draws executor counts from a count:weight list.
type execCounts struct {
	counts, cum []int
}

func parseExecutors(s string) (execCounts, error) {
	var e execCounts
	total := 0
	for _, part := range strings.Split(s, ",") {
		c, w, ok := strings.Cut(part, ":")
		if !ok {
			w = "1"
		}
		n, err1 := strconv.Atoi(strings.TrimSpace(c))
		wt, err2 := strconv.Atoi(strings.TrimSpace(w))
		if err1 != nil || err2 != nil || n < 0 || wt <= 0 {
			return e, fmt.Errorf("-executors %q: want count:weight,…", s)
		}
		total += wt
		e.counts, e.cum = append(e.counts, n), append(e.cum, total)
	}
	return e, nil
}

func (e execCounts) draw(r *rand.Rand) int {
	x := r.IntN(e.cum[len(e.cum)-1])
	i, _ := slices.BinarySearch(e.cum, x+1)
	return e.counts[i]
}

func (e execCounts) mean() float64 {
	sum, prev := 0, 0
	for i, c := range e.counts {
		sum += c * (e.cum[i] - prev)
		prev = e.cum[i]
	}
	return float64(sum) / float64(prev)
}

// fleetSample is what was read at one measurement point.
type fleetSample struct {
	day                  int // 1-based simulated day
	simNow               time.Time
	apps, executors      int
	lines                int64
	ingest               time.Duration // sending this stretch and delivering it
	series, appIDs       int64
	cardErr              error
	cardTook             time.Duration // of the two cardinality queries
	refused              map[string]float64
	disk                 diskUse
	rss, hwm, anon       int64 // influxd's resident memory, its peak, and of it the anonymous (not mapped files)
	sparkpulseRSS        int64
	queries              []queryTiming
	report               []time.Duration
	reportErr            string
	reportRows           int
	facts, factsWanted   int64
	factsWait            time.Duration
	shardsDropped        int
	firstRefusalAtApp    int // apps sent when the first refusal was seen; 0: none
	firstRefusalLog      string
	deltaRefused, noBase float64
	cpu                  [3]time.Duration // of influxd, sparkpulse and the harness over ingest
}

type queryTiming struct {
	name, window string
	took         []time.Duration
	rows         int
	err          string
}

// diskUse is a data directory's allocated bytes by kind of file.
type diskUse struct{ total, tsm, index, wal, other int64 }

func diskOf(dirs []string) diskUse {
	var u diskUse
	for _, d := range dirs {
		filepath.WalkDir(d, func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return nil
			}
			info, err := e.Info()
			if err != nil {
				return nil
			}
			n := info.Size()
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				n = st.Blocks * 512 // allocated: series segments are sparse
			}
			u.total += n
			switch rel := filepath.ToSlash(path); {
			case strings.HasSuffix(rel, ".tsm") || strings.HasSuffix(rel, ".tombstone"):
				u.tsm += n
			case strings.Contains(rel, "/_series/") || strings.Contains(rel, "/index/") || strings.HasSuffix(rel, "fields.idx"):
				u.index += n
			case strings.Contains(rel, "/wal/") || strings.HasSuffix(rel, ".wal"):
				u.wal += n
			default:
				u.other += n
			}
			return nil
		})
	}
	return u
}

// procStatus is a field of /proc/pid/status in bytes (VmRSS, VmHWM).
func procStatus(pid int, key string) int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, key+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// procMemTotal is the machine's memory in bytes.
func procMemTotal() int64 {
	b, _ := os.ReadFile("/proc/meminfo")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 1 << 62
}

func fleet(bin, dir string) error {
	dist, err := parseExecutors(*executorsDist)
	if err != nil {
		return err
	}
	if *fleetFields != "all" && *fleetFields != "one" {
		return fmt.Errorf("-fields %q: all or one", *fleetFields)
	}
	if *appsPerDay > 86400 {
		return errors.New("-apps-per-day: at most 86 400, one a second, so that the standalone-style ids (app-<second>-0001) differ")
	}
	var marks []int
	for _, s := range strings.Split(*measureAt, ",") {
		if s = strings.TrimSpace(s); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil {
				return fmt.Errorf("-measure-at: %w", err)
			}
			marks = append(marks, n)
		}
	}
	vars, err := sparkVariables()
	if err != nil {
		return err
	}
	fmt.Printf("## Fleet: %d applications a day, executors %s (mean %.1f), %d report(s) per process every %s (lines: %s), up to %d days\n\n",
		*appsPerDay, *executorsDist, dist.mean(), *fleetReports, *fleetPeriod, *fleetFields, *fleetDays)
	fmt.Printf("%s; sparkpulse at %s; %s.\n\n", goVersion(), revision(), fleetSetup())
	var summaries []string
	for _, target := range strings.Split(*fleetTargets, ",") {
		s, err := fleetRun(bin, dir, strings.TrimSpace(target), dist, marks, vars)
		if err != nil {
			return fmt.Errorf("fleet, %s: %w", target, err)
		}
		summaries = append(summaries, s)
	}
	fmt.Println("### Summary")
	fmt.Println()
	fmt.Println("| target | stopped | day | applications | executors | series | applicationid values | disk per executor | influxd RSS (peak) | run |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range summaries {
		fmt.Println(s)
	}
	fmt.Println()
	return nil
}

// fleetSetup describes the flags that change InfluxDB.
func fleetSetup() string {
	var parts []string
	if rpDuration.d > 0 {
		parts = append(parts, "retention "+fmtDays(rpDuration.d)+" (enforced by the harness on simulated time)")
	} else {
		parts = append(parts, "retention infinite")
	}
	parts = append(parts, "shard group duration "+fmtDays(orDefault(shardDuration.d, defaultShardDuration(rpDuration.d))))
	if len(influxdSet) > 0 {
		parts = append(parts, "influxd 1.x "+influxdSet.String())
	}
	if len(influxd2Set) > 0 {
		parts = append(parts, "influxd 2.x --"+strings.Join(influxd2Set, " --"))
	}
	if *fleetFacts {
		parts = append(parts, "facts from a simulated History Server")
	} else {
		parts = append(parts, "metrics only (no [annotate])")
	}
	return strings.Join(parts, ", ")
}

// sparkVariables are the Spark dashboard's query variables, as generated
// into grafana/dashboards.
func sparkVariables() ([]grafana.Variable, error) {
	b, err := os.ReadFile(filepath.Join("grafana", "dashboards", "spark.json"))
	if err != nil {
		return nil, err
	}
	vars, _, err := grafana.Parse(b)
	return vars, err
}

func fleetRun(bin, dir, target string, dist execCounts, marks []int, vars []grafana.Variable) (string, error) {
	base := filepath.Join(dir, "fleet-"+target)
	defer os.RemoveAll(base)
	db, err := startFleetDB(target, base)
	if err != nil {
		return "", err
	}
	defer db.stop()

	var hs *sparkui.Server
	hsURL := ""
	if *fleetFacts {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		defer ln.Close()
		hs = sparkui.NewServer(sparkui.HistoryServer, &sparkui.Model{})
		go http.Serve(ln, hs)
		hsURL = "http://" + ln.Addr().String()
	}
	port, err := freePort()
	if err != nil {
		return "", err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	// Compressed time: a simulated day passes in minutes, so what
	// sparkpulse keeps for a minute or two of wall time, its series cache
	// (max-cached-series, a million paths) and the deltas' baselines,
	// would hold a day's executors, some 11 million paths: past the
	// bound, first samples go without a delta, and which do depends on
	// the pace. Deltas are off unless asked for; with -reports 1 they
	// would only repeat each counter's value.
	conf := "[deltas]\n  enabled = false\n"
	if *fleetDeltas {
		conf = "[deltas]\n  first-sample-grace = \"0s\"\n  idle-ttl = \"1m\"\n  max-series = 20000000\n  max-series-per-app = 20000000\n"
	}
	conf += "[[graphite]]\n" + db.block
	p, err := startSparkpulse(bin, dir, db.url, withBlock(conf, addr, fleetDatabase), db.influx...)
	if err != nil {
		return "", err
	}
	defer p.stop()
	cfgPath := filepath.Join(dir, "fleet-report.toml")
	reportConf := fmt.Sprintf("[influxdb]\n  url = %q\n%s\n[[graphite]]\n  bind-address = \"127.0.0.1:0\"\n  database = %q\n%s", db.url, strings.Join(db.influx, "\n"), fleetDatabase, db.block)
	if err := os.WriteFile(cfgPath, []byte(reportConf), 0o600); err != nil {
		return "", err
	}

	fmt.Printf("### %s (%s)\n\n", target, db.name)
	fmt.Println("| day | applications | executors | series | applicationid values | refused | disk MiB: all, index, TSM, WAL | disk per executor | influxd RSS MiB (peak) | app 1d | app 7d | process 7d | report --fleet | ingest |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	var samples []fleetSample

	rssLimit := int64(*maxRSS) << 20
	if rssLimit == 0 {
		rssLimit = procMemTotal() * 6 / 10
	}
	simStart := time.Now().Add(-time.Duration(*fleetDays)*24*time.Hour - 2*time.Hour).Truncate(time.Hour)
	began := time.Now()
	var (
		appsSent, execsSent atomic.Int64
		linesSent           atomic.Int64
		apps                int
		stop                string
	)
	// The first refusal, seen while the applications go out.
	var firstRefusal atomic.Int64
	watchDone := make(chan struct{})
	go func() {
		for {
			select {
			case <-watchDone:
				return
			case <-time.After(time.Second):
			}
			if firstRefusal.Load() == 0 && p.metric("sparkpulse_influxdb_points_rejected_total") > 0 {
				firstRefusal.Store(appsSent.Load())
			}
		}
	}()
	defer close(watchDone)

	for day := 0; day < *fleetDays && stop == ""; day++ {
		dayStart := simStart.Add(time.Duration(day) * 24 * time.Hour)
		rng := rand.New(rand.NewPCG(*fleetSeed, uint64(day)))
		todo := make([]fleetApp, *appsPerDay)
		for i := range todo {
			todo[i] = fleetApp{n: apps + i, start: dayStart.Add(time.Duration(i) * 24 * time.Hour / time.Duration(*appsPerDay)).Truncate(time.Second), executors: dist.draw(rng)}
		}
		// Measurement points: each -measure-at count passed today, and
		// the day's end.
		for len(todo) > 0 && stop == "" {
			n := len(todo)
			for _, m := range marks {
				if m > apps && m < apps+n {
					n = m - apps
				}
			}
			part := todo[:n]
			todo = todo[n:]
			t0, lines0 := time.Now(), linesSent.Load()
			icpu0, pcpu0, hcpu0 := procCPU(db.pid), p.cpu(), procCPU(os.Getpid())
			sent, last, err := sendApps(addr, part, hs, &appsSent, &execsSent, &linesSent, &firstRefusal)
			if err != nil {
				return "", err
			}
			apps += sent
			if err := drain(p, linesSent.Load()); err != nil {
				return "", err
			}
			s := fleetSample{day: day + 1, simNow: last.start.Add(time.Duration(*fleetReports) * *fleetPeriod), apps: apps,
				executors: int(execsSent.Load()), lines: linesSent.Load() - lines0, ingest: time.Since(t0),
				firstRefusalAtApp: int(firstRefusal.Load()),
				cpu:               [3]time.Duration{procCPU(db.pid) - icpu0, p.cpu() - pcpu0, procCPU(os.Getpid()) - hcpu0}}
			if hs != nil {
				s.factsWanted = int64(apps)
				if s.facts, s.factsWait, err = annotateRound(bin, dir, db, hsURL, part[0].start, int64(apps)); err != nil {
					return "", err
				}
			}
			if rpDuration.d > 0 {
				cutoff := s.simNow.Add(-rpDuration.d).Truncate(db.shardDur)
				if s.shardsDropped, err = db.expire(cutoff); err != nil {
					return "", fmt.Errorf("retention: %w", err)
				}
			}
			measure(db, p, &s, vars, simAppID(last), cfgPath, bin)
			samples = append(samples, s)
			printSample(s)
			switch {
			case len(s.refused) > 0:
				stop = "refused: " + refusedText(s.refused)
			case s.rss > rssLimit:
				stop = fmt.Sprintf("influxd's RSS, %s MiB, passed -max-rss-mib %s", mib(s.rss), mib(rssLimit))
			case *fleetBudget > 0 && time.Since(began) > *fleetBudget:
				stop = fmt.Sprintf("budget (%s) spent", *fleetBudget)
			}
		}
	}
	if stop == "" {
		stop = fmt.Sprintf("last day (%d)", *fleetDays)
	}
	took := time.Since(began)
	fmt.Println()
	last := samples[len(samples)-1]
	fmt.Printf("Stopped: %s, after %s of wall time.", stop, took.Round(time.Second))
	if last.firstRefusalAtApp > 0 {
		// Seen at the next poll of /metrics, after the points' way
		// through sparkpulse's queue: the applicationid values stored
		// tell how far InfluxDB took them.
		fmt.Printf(" The first refusal was seen by the time %d applications had been sent (day %d); sparkpulse logged: %s.", last.firstRefusalAtApp, last.day, last.firstRefusalLog)
	}
	fmt.Println()
	fmt.Println()
	printQueries(samples)
	if lines := influxdWarnings(db.log()); len(lines) > 0 {
		fmt.Println("influxd's first warnings and errors:")
		fmt.Println()
		for _, l := range lines {
			fmt.Println("    " + l)
		}
		fmt.Println()
	}
	series, ids := fmt.Sprint(last.series), fmt.Sprint(last.appIDs)
	if last.cardErr != nil {
		series, ids = "error", "error"
	}
	return fmt.Sprintf("| %s | %s | %d | %d | %d | %s | %s | %s | %s (%s) | %s |", target, stop, last.day, last.apps, last.executors, series, ids,
		perExecutor(last), mib(last.rss), mib(last.hwm), took.Round(time.Second)), nil
}

// simAppID is the id the simulator gives an application of one.
func simAppID(a fleetApp) string { return simulate.AppID(a.start, 1) }

// sendApps simulates the applications and sends their reports, -senders
// applications at a time, each report over its own connection, confirmed
// (sparkpulse closes it once it has every line). It stops early once a
// refusal has been seen, and returns how many applications it sent and
// the newest of them.
func sendApps(addr string, apps []fleetApp, hs *sparkui.Server, appsSent, execsSent, linesSent, refused *atomic.Int64) (int, fleetApp, error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	done := make([]bool, len(apps))
	errs := make([]error, *fleetSenders)
	for w := range *fleetSenders {
		wg.Go(func() {
			var buf bytes.Buffer
			mapper := spark.NewMapper(spark.Options{Schema: schema.Wide})
			var res templates.Result
			seen := map[string]bool{}
			for {
				i := int(next.Add(1)) - 1
				if i >= len(apps) || refused.Load() > 0 {
					return
				}
				a := apps[i]
				c := simulate.NewCluster(simulate.Config{Apps: 1, Executors: a.executors, Period: *fleetPeriod, Seed: *fleetSeed + uint64(a.n)}, a.start)
				for r := range *fleetReports {
					now := a.start.Add(time.Duration(r) * *fleetPeriod)
					c.Step(now)
					for proc := range c.Processes() {
						buf.Reset()
						c.Report(proc, &buf, now)
						if *fleetFields == "one" {
							onePerSeries(&buf, mapper, &res, seen)
						}
						if err := sendOne(addr, buf.Bytes()); err != nil {
							errs[w] = err
							next.Store(int64(len(apps)))
							return
						}
						linesSent.Add(int64(bytes.Count(buf.Bytes(), []byte("\n"))))
					}
				}
				if hs != nil {
					c.End(a.start.Add(time.Duration(*fleetReports) * *fleetPeriod))
					var ended []*sparkui.App
					c.UI.Update(func(m *sparkui.Model) { ended = m.Apps })
					hs.Update(func(m *sparkui.Model) { m.Apps = append(m.Apps, ended...) })
				}
				done[i] = true
				appsSent.Add(1)
				execsSent.Add(int64(a.executors))
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, fleetApp{}, err
	}
	// Stopped early, the senders may leave gaps: the newest sent counts.
	n, newest := 0, -1
	for i, d := range done {
		if d {
			n, newest = n+1, i
		}
	}
	if n == 0 {
		return 0, fleetApp{}, errors.New("no application was sent")
	}
	return n, apps[newest], nil
}

// onePerSeries keeps, of a report, the first line of each series the wide
// schema makes of it whose value InfluxDB can store (not NaN or infinite,
// which sparkpulse drops).
func onePerSeries(buf *bytes.Buffer, m *spark.Mapper, r *templates.Result, seen map[string]bool) {
	clear(seen)
	var kept, key []byte
	for l := range bytes.Lines(buf.Bytes()) {
		path, rest, _ := bytes.Cut(l, []byte(" "))
		value, _, _ := bytes.Cut(rest, []byte(" "))
		if v, err := strconv.ParseFloat(string(value), 64); err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		if m.Apply(path, r) != nil {
			continue
		}
		key = append(key[:0], r.Measurement...)
		for _, t := range r.Tags {
			key = append(append(append(append(key, ','), t.Key...), '='), t.Value...)
		}
		if !seen[string(key)] {
			seen[string(key)] = true
			kept = append(kept, l...)
		}
	}
	buf.Reset()
	buf.Write(kept)
}

// drain waits until sparkpulse has every line sent and InfluxDB has
// answered for every point: the queue is empty and the counts stand still
// for two seconds (past batch-timeout).
func drain(p *proc, lines int64) error {
	deadline := time.Now().Add(10 * time.Minute)
	still, last := 0, -1.0
	for time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		got := p.metric("sparkpulse_lines_received_total")
		answered := p.metric("sparkpulse_influxdb_points_written_total") + p.metric("sparkpulse_influxdb_points_rejected_total")
		if got < float64(lines) || p.metric("sparkpulse_influxdb_queue_bytes") > 0 || answered != last {
			still, last = 0, answered
			continue
		}
		if still++; still >= 4 {
			return nil
		}
	}
	return fmt.Errorf("sparkpulse did not deliver within 10 minutes: %.0f of %d lines received, %.0f bytes queued",
		p.metric("sparkpulse_lines_received_total"), lines, p.metric("sparkpulse_influxdb_queue_bytes"))
}

// annotateRound runs a sparkpulse that only annotates, from the
// simulated History Server, until spark_app_usage holds the accounting of
// want applications or -facts-wait has passed, and returns how many it
// holds and how long that took. Its annotator reads a History Server's
// ended applications once, in its first listing, back to lookback, and
// then only those that end as it runs: applications of simulated days,
// which ended days ago by the wall clock, are seen by a new one, whose
// lookback reaches the first of them.
func annotateRound(bin, dir string, db *fleetDB, hsURL string, first time.Time, want int64) (int64, time.Duration, error) {
	lookback := time.Since(first).Truncate(time.Hour) + time.Hour
	conf := fmt.Sprintf("[deltas]\n  enabled = false\n[annotate]\n  urls = [%q]\n  interval = \"2s\"\n  lookback = \"%dh\"\n  usage-delay = \"0s\"\n[[graphite]]\n%s",
		hsURL, int(lookback.Hours()), db.block)
	a, err := startSparkpulse(bin, dir, db.url, withBlock(conf, "127.0.0.1:0", fleetDatabase), db.influx...)
	if err != nil {
		return 0, 0, err
	}
	defer a.stop()
	// Done when every application has its accounting, or when the count
	// has stood still for 20 s: an application the annotator no longer
	// sees listed waits for close-out-after (10 minutes).
	start, moved := time.Now(), time.Now()
	var n int64
	for time.Since(start) < *factsWait && time.Since(moved) < 20*time.Second {
		time.Sleep(time.Second)
		got, _ := scalar(db.ql, `SELECT count("app_id") FROM "spark_app_usage" WHERE "fact" = 'end'`)
		if got != n {
			n, moved = got, time.Now()
		}
		if n >= want {
			break
		}
	}
	if n < want {
		fmt.Fprintf(os.Stderr, "facts: %d of %d applications after %s; the annotator's log ends:\n%s\n", n, want, time.Since(start).Round(time.Second), lastLines(a.log.String(), 5))
	}
	return n, time.Since(start), nil
}

func measure(db *fleetDB, p *proc, s *fleetSample, vars []grafana.Variable, newest, cfgPath, bin string) {
	s.refused = map[string]float64{}
	for reason, n := range p.metricByLabel("sparkpulse_influxdb_points_rejected_total", "reason") {
		if n > 0 {
			s.refused[reason] = n
		}
	}
	s.firstRefusalLog = firstRefusalLog(p.log.String())
	s.deltaRefused = p.metric(`sparkpulse_delta_samples_total{outcome="refused"}`) + p.metric(`sparkpulse_delta_samples_total{outcome="refused_app_quota"}`)
	s.noBase = p.metric(`sparkpulse_delta_samples_total{outcome="first_unknown"}`)
	t0 := time.Now()
	s.series, s.appIDs, s.cardErr = db.cardin()
	s.cardTook = time.Since(t0)
	s.disk = diskOf(db.dirs)
	s.rss, s.hwm, s.anon = procStatus(db.pid, "VmRSS"), procStatus(db.pid, "VmHWM"), procStatus(db.pid, "RssAnon")
	s.sparkpulseRSS = p.rss()

	// The Spark dashboard's variables as Grafana asks for them, over the
	// last day and week of simulated time, the newest application
	// chosen (the Application variable sorts newest first).
	for _, w := range []struct {
		name string
		d    time.Duration
	}{{"1d", 24 * time.Hour}, {"7d", 7 * 24 * time.Hour}} {
		vals := grafana.Values{Selected: map[string][]string{"app": {newest}}}
		for _, v := range vars {
			if v.Query == "" {
				continue
			}
			q, err := grafana.Interpolate(v.Query, vars, vals, s.simNow.Add(-w.d), s.simNow, time.Minute)
			t := queryTiming{name: v.Name, window: w.name}
			if err != nil {
				t.err = err.Error()
				s.queries = append(s.queries, t)
				continue
			}
			for range *queryRuns {
				start := time.Now()
				res, err := db.ql.TryQuery(fleetDatabase, q)
				t.took = append(t.took, time.Since(start))
				if err != nil {
					t.err = err.Error()
					break
				}
				t.rows = 0
				for _, r := range res {
					t.rows += len(r.Values)
				}
			}
			s.queries = append(s.queries, t)
		}
	}

	// report --fleet over the last week of simulated time: its --since
	// counts back from the wall clock.
	since := time.Since(s.simNow.Add(-7*24*time.Hour)).Truncate(time.Hour) + time.Hour
	for range *queryRuns {
		cmd := exec.Command(bin, "report", "--fleet", "--since", fmt.Sprintf("%dh", int(since.Hours())), "--config", cfgPath)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		start := time.Now()
		err := cmd.Run()
		s.report = append(s.report, time.Since(start))
		if err != nil {
			s.reportErr = strings.TrimSpace(err.Error() + ": " + firstLine(errOut.String()))
			break
		}
		s.reportRows = bytes.Count(out.Bytes(), []byte("\n"))
	}
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(ls[max(0, len(ls)-n):], "\n")
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// metricByLabel sums the samples of a metric by the value of one label.
func (p *proc) metricByLabel(name, label string) map[string]float64 {
	out := map[string]float64{}
	resp, err := http.Get("http://" + p.admin + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(name) + `\{.*\b` + label + `="([^"]*)".*\} (\S+)$`)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			out[m[1]] += atof(m[2])
		}
	}
	return out
}

// firstRefusalLog is the first warning sparkpulse logged about points
// InfluxDB refused: its message and InfluxDB's answer.
func firstRefusalLog(log string) string {
	for _, l := range strings.Split(log, "\n") {
		if !strings.Contains(l, "refuse") {
			continue
		}
		var e struct {
			Msg   string
			Error string
			N     int `json:"refused"`
		}
		if json.Unmarshal([]byte(l), &e) == nil && e.Msg != "" {
			return fmt.Sprintf("%q (%d points; InfluxDB: %q)", e.Msg, e.N, e.Error)
		}
	}
	return "nothing"
}

// influxdWarnings are the first warnings and errors influxd logged.
func influxdWarnings(log string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "lvl=warn") || strings.Contains(l, "lvl=error") {
			out = append(out, strings.TrimSpace(l))
			if len(out) == 5 {
				break
			}
		}
	}
	return out
}

func refusedText(m map[string]float64) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%.0f %s", v, k))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

func mib(b int64) string { return fmt.Sprintf("%.0f", float64(b)/(1<<20)) }

// perExecutor is the disk per executor, drivers' share included, and of
// it the index's.
func perExecutor(s fleetSample) string {
	return fmt.Sprintf("%.1f KiB (index %.1f)", float64(s.disk.total)/float64(s.executors)/1024, float64(s.disk.index)/float64(s.executors)/1024)
}

func durations(ds []time.Duration) string {
	vs := make([]float64, len(ds))
	for i, d := range ds {
		vs[i] = d.Seconds()
	}
	return spreadOf(vs, func(v float64) string {
		if v < 1 {
			return fmt.Sprintf("%.0f ms", v*1000)
		}
		return fmt.Sprintf("%.2f s", v)
	})
}

func (s fleetSample) query(name, window string) string {
	for _, q := range s.queries {
		if q.name == name && q.window == window {
			if q.err != "" {
				return "error"
			}
			return durations(q.took)
		}
	}
	return ""
}

func printSample(s fleetSample) {
	series, ids := fmt.Sprint(s.series), fmt.Sprint(s.appIDs)
	if s.cardErr != nil {
		series, ids = "error", "error"
		fmt.Fprintf(os.Stderr, "cardinality: %v\n", s.cardErr)
	}
	refused := "0"
	if len(s.refused) > 0 {
		refused = refusedText(s.refused)
	}
	report := durations(s.report)
	if s.reportErr != "" {
		report = "error"
		fmt.Fprintf(os.Stderr, "report --fleet: %s\n", s.reportErr)
	}
	d := s.disk
	fmt.Printf("| %d | %d | %d | %s | %s | %s | %s, %s, %s, %s | %s | %s (%s) | %s | %s | %s | %s | %s |\n", s.day, s.apps, s.executors, series, ids, refused,
		mib(d.total), mib(d.index), mib(d.tsm), mib(d.wal), perExecutor(s), mib(s.rss), mib(s.hwm),
		s.query("app", "1d"), s.query("app", "7d"), s.query("process", "7d"), report, s.ingest.Round(100*time.Millisecond))
	extra := fmt.Sprintf("  sim %s, %d lines, CPU s influxd %.1f, sparkpulse %.1f, harness %.1f; influxd anonymous RSS %s MiB, sparkpulse RSS %s MiB; cardinality queries %s",
		s.simNow.Format(time.DateTime), s.lines, s.cpu[0].Seconds(), s.cpu[1].Seconds(), s.cpu[2].Seconds(), mib(s.anon), mib(s.sparkpulseRSS), s.cardTook.Round(time.Millisecond))
	if *fleetDeltas {
		extra += fmt.Sprintf(", deltas refused %.0f, first samples without baseline %.0f", s.deltaRefused, s.noBase)
	}
	if s.factsWanted > 0 {
		extra += fmt.Sprintf(", facts %d of %d applications after %s", s.facts, s.factsWanted, s.factsWait.Round(time.Second))
	}
	if s.shardsDropped > 0 {
		extra += fmt.Sprintf(", %d shards dropped", s.shardsDropped)
	}
	fmt.Fprintln(os.Stderr, extra)
}

// printQueries writes every timed query at each measurement point.
func printQueries(samples []fleetSample) {
	fmt.Println("The Spark dashboard's variable queries (grafana/dashboards/spark.json, the newest application chosen) and `report --fleet --since` the last simulated week, each run", *queryRuns, "times; rows returned in brackets:")
	fmt.Println()
	var head []string
	for _, q := range samples[0].queries {
		head = append(head, q.name+" "+q.window)
	}
	fmt.Println("| applications | " + strings.Join(head, " | ") + " | report --fleet |")
	fmt.Println("|---|" + strings.Repeat("---|", len(head)+1))
	for _, s := range samples {
		var cells []string
		for _, q := range s.queries {
			c := durations(q.took) + fmt.Sprintf(" (%d)", q.rows)
			if q.err != "" {
				c = "error: " + q.err
			}
			cells = append(cells, c)
		}
		r := durations(s.report) + fmt.Sprintf(" (%d lines)", s.reportRows)
		if s.reportErr != "" {
			r = "error: " + s.reportErr
		}
		fmt.Printf("| %d | %s | %s |\n", s.apps, strings.Join(cells, " | "), r)
	}
	fmt.Println()
}
