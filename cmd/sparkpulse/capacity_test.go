package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/influx"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
)

// The projection of InfluxDB 1.x's limits, case by case: it must fire
// when the rate of applications reaches a limit within a year while
// everything is kept, or past it with what the retention keeps, and stay
// quiet otherwise.
func TestCapacityWarnings(t *testing.T) {
	const day = 24 * time.Hour
	for _, c := range []struct {
		name string
		cap  influx.Capacity
		want []string // one entry per warning, each a part of it
	}{
		{"nothing in the last day", influx.Capacity{RetentionPolicy: "autogen", Values: 90_000, Series: 900_000}, nil},
		{"the fleet of the issue, kept for ever", influx.Capacity{RetentionPolicy: "autogen", Values: 5_000, ValuesLastDay: 5_000, Series: 5_000 * 50},
			[]string{`target spark: at 5000 applications a day (the last 24 hours), applicationid's values reaches max-values-per-tag (100 000 by default; the server does not tell its own) in 19 days, as retention policy "autogen" keeps everything: keep at most 19 days there`,
				"its series reaches max-series-per-database (a million by default, inmem index only) in 3 days"}},
		{"a small fleet, kept for ever", influx.Capacity{RetentionPolicy: "autogen", Values: 1_000, ValuesLastDay: 200, Series: 10_000}, nil},
		{"two weeks of 5 000 a day, 20 series each", influx.Capacity{RetentionPolicy: "two_weeks", Retention: 14 * day, ShardDuration: day, Values: 70_000, ValuesLastDay: 5_000, Series: 70_000 * 20},
			[]string{`retention policy "two_weeks" (14d, shards of 1d) holds about 1500000 of its series at once, past max-series-per-database (a million by default, inmem index only): keep at most 9 days there`}},
		{"two weeks of 5 000 a day, 10 series each", influx.Capacity{RetentionPolicy: "two_weeks", Retention: 14 * day, ShardDuration: day, Values: 70_000, ValuesLastDay: 5_000, Series: 70_000 * 10}, nil},
		{"two weeks of 1 000 a day", influx.Capacity{RetentionPolicy: "two_weeks", Retention: 14 * day, ShardDuration: day, Values: 14_000, ValuesLastDay: 1_000, Series: 14_000 * 7}, nil},
		{"30 days of 5 000 a day", influx.Capacity{RetentionPolicy: "month", Retention: 30 * day, ShardDuration: 7 * day, Values: 150_000, ValuesLastDay: 5_000, Series: 150_000 * 7},
			[]string{`retention policy "month" (30d, shards of 7d) holds about 185000 of applicationid's values at once, past max-values-per-tag`, "keep at most 13 days there",
				"holds about 1295000 of its series at once"}},
	} {
		got := capacityWarnings("spark", c.cap)
		text := strings.Join(got, "\n")
		for _, w := range c.want {
			if !strings.Contains(text, w) {
				t.Errorf("%s: warnings\n  %s\nlack %q", c.name, strings.Join(got, "\n  "), w)
			}
		}
		if len(c.want) == 0 && len(got) > 0 {
			t.Errorf("%s: warned %q", c.name, got)
		}
	}
}

// check reads a real InfluxDB 1.8's target: the applications of the last
// day (of executors' cpuTime, as the wide shape stores it), the values
// kept and the retention policy, and warns with the numbers; with a
// retention that holds the rate, it stays quiet.
func TestCheckProjectsCapacity(t *testing.T) {
	srv := influxtest.Start(t)
	srv.Exec(t, `CREATE DATABASE "kept"`)
	srv.Exec(t, `CREATE DATABASE "weeks" WITH DURATION 14d SHARD DURATION 1d NAME "two_weeks"`)
	now := time.Now()
	var lines strings.Builder
	for i := range 500 {
		at := now.Add(-time.Duration(i) * time.Minute) // 400 of them in the last day
		if i >= 400 {
			at = now.Add(-3 * 24 * time.Hour)
		}
		fmt.Fprintf(&lines, "executor,applicationid=app-%05d,process=1 cpuTime.count=1 %d\n", i, at.UnixNano())
	}
	for _, db := range []string{"kept", "weeks"} {
		resp, err := http.Post(srv.URL+"/write?db="+db, "text/plain", strings.NewReader(lines.String()))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("write to %s: %s", db, resp.Status)
		}
	}
	for _, c := range []struct{ db, want string }{
		{"kept", `warning: target kept: at 400 applications a day (the last 24 hours), applicationid's values reaches max-values-per-tag (100 000 by default; the server does not tell its own) in 249 days, as retention policy "autogen" keeps everything: keep at most 249 days there`},
		{"weeks", ""},
	} {
		var out strings.Builder
		path := writeFile(t, "c.toml", fmt.Sprintf("[internal]\n  enabled = false\n[[graphite]]\n  database = %q\n", c.db))
		if err := cmdCheck(&config.Overrides{Config: path, InfluxURL: srv.URL}, noEnv, &out); err != nil {
			t.Fatalf("%s: %v\n%s", c.db, err, out.String())
		}
		got := out.String()
		if c.want != "" && !strings.Contains(got, c.want) || c.want == "" && strings.Contains(got, "applications a day") {
			t.Errorf("%s: check printed\n%s\nwant %q", c.db, got, c.want)
		}
	}
}
