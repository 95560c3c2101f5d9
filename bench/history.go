package main

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sparkpulse/sparkpulse/grafana"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
	"github.com/sparkpulse/sparkpulse/schema"
)

// The history part: a year of a fleet's spark_app_history, and how long
// what reads it takes. spark_app_history holds one point per ended
// application in one series per name, queue and user (docs/retention.md),
// so a year of 5 000 applications a day is 1.8 M points in a few thousand
// series: nothing for InfluxDB's index, everything for a query that reads
// them. The harness writes the points itself, with the fields sparkpulse
// writes, into a real influxd 1.8.10 (tsi1, as make run and the compose
// stack run it), then times every query of the history dashboard and
// `report --fleet` over the last 30, 90 and 365 days.

var (
	historyDays  = flag.Int("history-days", 365, "history: days of spark_app_history written")
	historyNames = flag.Int("history-names", 1000, "history: distinct application names (spark.app.name) in the fleet")
)

const historyDatabase = "spark_history"

func history(bin, dir string) error {
	hdir := filepath.Join(dir, "history")
	srv, err := influxtest.Launch(hdir, influxtest.WithEnv("INFLUXDB_DATA_INDEX_VERSION=tsi1"))
	if err != nil {
		return err
	}
	defer srv.Stop()
	// report --fleet reads the running applications' estimates from the
	// facts' database: there, empty.
	for _, db := range []string{historyDatabase, "spark"} {
		if _, err := srv.TryQuery("", "CREATE DATABASE "+db); err != nil {
			return err
		}
	}
	end := time.Now().Truncate(24 * time.Hour)
	start := end.Add(-time.Duration(*historyDays) * 24 * time.Hour)
	began := time.Now()
	points, err := writeHistory(srv.URL, start, *historyDays, *appsPerDay, *historyNames)
	if err != nil {
		return err
	}
	wrote := time.Since(began)
	res, err := srv.TryQuery(historyDatabase, "SHOW SERIES EXACT CARDINALITY")
	if err != nil {
		return err
	}
	series := sum(res)
	fmt.Printf("## spark_app_history: %d days of %d applications a day (%d names)\n\n", *historyDays, *appsPerDay, *historyNames)
	fmt.Printf("influxd %s (tsi1): %d points written in %s, %d series; disk %s; influxd RSS %d MiB\n\n",
		influxdVersion1(srv.PID()), points, wrote.Round(time.Second), series,
		fmt.Sprintf("%.0f MiB", float64(diskOf([]string{filepath.Join(hdir, "data"), filepath.Join(hdir, "wal")}).total)/(1<<20)), procStatus(srv.PID(), "VmRSS")>>20)

	b, err := os.ReadFile(filepath.Join("grafana", "dashboards", grafana.HistoryDashboardFile))
	if err != nil {
		return err
	}
	vars, queries, err := grafana.Parse(b)
	if err != nil {
		return err
	}
	cfg := filepath.Join(dir, "history.toml")
	conf := fmt.Sprintf("[influxdb]\n  url = %q\n[annotate]\n  urls = [\"http://127.0.0.1:1\"]\n  history-database = %q\n[[graphite]]\n  database = \"spark\"\n", srv.URL, historyDatabase)
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		return err
	}
	fmt.Println("Each query of grafana/dashboards/" + grafana.HistoryDashboardFile + " and `report --fleet --since`, over the last 30, 90 and 365 days, run " + fmt.Sprint(*queryRuns) + " times (range; rows returned in brackets):")
	fmt.Println()
	fmt.Println("| query | 30 days | 90 days | 365 days |")
	fmt.Println("|---|---|---|---|")
	windows := []int{30, 90, 365}
	for _, q := range queries {
		row := []string{q.Where}
		for _, days := range windows {
			from := end.Add(-time.Duration(days) * 24 * time.Hour)
			// Grafana's interval for a range on a panel about 1 000
			// pixels wide.
			text, err := grafana.Interpolate(q.Text, vars, grafana.Values{}, from, end, end.Sub(from)/1000)
			if err != nil {
				return fmt.Errorf("%s: %w", q.Where, err)
			}
			var took []time.Duration
			rows := 0
			var qerr error
			for range *queryRuns {
				t0 := time.Now()
				// Grafana's InfluxDB data source gives up after its
				// timeout (30 s by default); the harness waits longer,
				// to say how long.
				res, err := slowQueryIn(srv.URL, "", historyDatabase, text)
				took = append(took, time.Since(t0))
				if err != nil {
					qerr = err
					break
				}
				rows = 0
				for _, s := range res {
					rows += len(s.Values)
				}
			}
			if qerr != nil {
				row = append(row, fmt.Sprintf("%s: %v", durRange(took), qerr))
				continue
			}
			row = append(row, fmt.Sprintf("%s (%d)", durRange(took), rows))
		}
		fmt.Println("| " + strings.Join(row, " | ") + " |")
	}
	row := []string{"`report --fleet`"}
	for _, days := range windows {
		var took []time.Duration
		var rss []int64
		lines := 0
		for range *queryRuns {
			cmd := exec.Command(bin, "report", "--fleet", "--since", fmt.Sprintf("%dd", days), "--config", cfg)
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			t0 := time.Now()
			if err := cmd.Run(); err != nil {
				lines = -1
				row = append(row, fmt.Sprintf("%s: %v: %s", time.Since(t0).Round(time.Millisecond), err, firstLine(errOut.String())))
				break
			}
			took = append(took, time.Since(t0))
			if u, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
				rss = append(rss, u.Maxrss>>10)
			}
			lines = bytes.Count(out.Bytes(), []byte("\n"))
		}
		if lines >= 0 {
			row = append(row, fmt.Sprintf("%s (%d lines, peak RSS %d–%d MiB)", durRange(took), lines, slices.Min(rss), slices.Max(rss)))
		}
	}
	fmt.Println("| " + strings.Join(row, " | ") + " |")
	fmt.Println()
	return nil
}

// writeHistory writes days × perDay spark_app_history points ending on
// day boundaries from start, as sparkpulse writes them: tags appname, user,
// queue and fact, the usage fields, the application's id in app_id.
// Names recur (nightly and hourly jobs): each has its user and queue.
func writeHistory(url string, start time.Time, days, perDay, names int) (int, error) {
	rng := rand.New(rand.NewPCG(7, 7))
	type job struct{ name, user, queue string }
	jobs := make([]job, names)
	for i := range jobs {
		jobs[i] = job{fmt.Sprintf("job-%04d", i), fmt.Sprintf("user%02d", i%50), fmt.Sprintf("queue%d", i%8)}
	}
	var buf bytes.Buffer
	n := 0
	flush := func() error {
		if buf.Len() == 0 {
			return nil
		}
		resp, err := http.Post(url+"/write?db="+historyDatabase+"&precision=ns", "text/plain", &buf)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			return fmt.Errorf("write: %s", resp.Status)
		}
		buf.Reset()
		return nil
	}
	for d := range days {
		for i := range perDay {
			j := jobs[rng.IntN(len(jobs))]
			ended := start.Add(time.Duration(d)*24*time.Hour + time.Duration(i)*24*time.Hour/time.Duration(perDay))
			fact, outcome := "end", "succeeded"
			switch r := rng.IntN(100); {
			case r < 4:
				outcome = "failed"
			case r < 5:
				fact, outcome = "lost", "driver_lost"
			}
			execs := 1 + rng.IntN(60)
			dur := 60_000 + rng.Int64N(3_600_000)
			coreSec := float64(execs*4) * float64(dur) / 1000
			busy := coreSec * (0.2 + 0.7*rng.Float64())
			memSec := coreSec / 4 * 5 * (1 << 30)
			fmt.Fprintf(&buf, "%s,%s=%s,%s=%s,%s=%s,%s=%s %s=\"app-%s-%04d\",%s=%di,%s=%di,%s=%g,%s=%g,%s=%g,%s=%g,%s=%g,%s=%g,%s=%g,%s=%g,%s=%g,%s=%g,%s=%g,%s=%g,%s=%di,%s=%di,%s=%g,%s=\"%s\",%s=\"%s\" %d\n",
				schema.MeasurementAppHistory, schema.TagAppName, j.name, schema.FieldFact, fact, schema.TagQueue, j.queue, schema.TagUser, j.user,
				schema.FieldAppID, ended.Format("20060102150405"), i,
				schema.UsageDurationMs, dur, schema.UsageExecutors, execs,
				schema.UsageExecutorCoreSeconds, coreSec, schema.UsageExecutorMemoryByteSeconds, memSec,
				schema.UsageDriverCoreSeconds, float64(dur)/1000, schema.UsageCPUUsedSeconds, busy*0.8,
				schema.UsageBusySlotSeconds, busy, schema.UsageSlotOccupancy, busy/coreSec,
				schema.UsageCPUUtilisation, busy*0.8/coreSec, schema.UsageMemoryUtilisation, 0.3+0.6*rng.Float64(),
				schema.UsageMeanMemoryUtilisation, 0.2+0.5*rng.Float64(), schema.UsageGCShare, 0.1*rng.Float64(),
				schema.UsageSavingCoreSeconds, coreSec*0.3*rng.Float64(), schema.UsageSavingByteSeconds, memSec*0.2*rng.Float64(),
				schema.UsageDriverOnlyMs, rng.Int64N(dur/4), schema.UsageFailedTasks, rng.IntN(3),
				schema.UsageLostTaskSeconds, 10*rng.Float64(), schema.UsageOutcome, outcome,
				schema.UsageRecommended, "--conf spark.executor.instances=8",
				ended.UnixNano()+int64(i%1000))
			n++
			if buf.Len() >= 1<<20 {
				if err := flush(); err != nil {
					return n, err
				}
			}
		}
	}
	return n, flush()
}

// durRange is "a–b" of ds, or "a" when they round alike.
func durRange(ds []time.Duration) string {
	lo, hi := slices.Min(ds), slices.Max(ds)
	r := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	if r(lo) == r(hi) {
		return r(lo)
	}
	return r(lo) + "–" + r(hi)
}
