package influx

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sparkpulse/sparkpulse/influxql"
)

// Capacity is what an InfluxDB 1.x database holds of a tag that takes a
// value per application, and how long it keeps it: what `check` projects
// the database's limits from. InfluxDB 1.x does not say its limits
// (max-series-per-database, max-values-per-tag): they are its defaults
// unless its configuration changes them.
type Capacity struct {
	Database, RetentionPolicy string        // the policy the target writes to
	Retention                 time.Duration // 0: kept for ever
	ShardDuration             time.Duration
	Values                    int // of the tag, in the database
	ValuesLastDay             int // of the tag, on a point of field of measurement in the last 24 hours
	Series                    int // in the database
}

// ReadCapacity reads the Capacity of tag in the 1.x target t ("db" or
// "db/rp"; the database's default policy when no rp). The values of the
// last day are those of the series of field of measurement with a point
// in it: a field every application writes, read with last() (a series
// each, not a day of points).
func ReadCapacity(ctx context.Context, cfg Config, t Target, tag, measurement, field string) (Capacity, error) {
	q, err := NewQuerier(cfg)
	if err != nil {
		return Capacity{}, err
	}
	defer q.Close()
	db, rp, _ := strings.Cut(t.Bucket, "/")
	c := Capacity{Database: db, RetentionPolicy: rp}
	rps, err := q.Query(ctx, db, "SHOW RETENTION POLICIES ON "+influxql.QuoteIdent(db))
	if err != nil {
		return c, err
	}
	found := false
	for _, s := range rps {
		col := columns(s)
		for _, row := range s.Values {
			name, _ := row[col["name"]].(string)
			def, _ := row[col["default"]].(bool)
			if (rp == "" && def) || name == rp {
				c.RetentionPolicy, found = name, true
				c.Retention, _ = time.ParseDuration(fmt.Sprint(row[col["duration"]]))
				c.ShardDuration, _ = time.ParseDuration(fmt.Sprint(row[col["shardGroupDuration"]]))
			}
		}
	}
	if !found {
		return c, fmt.Errorf("influx: database %q has no retention policy %q", db, rp)
	}
	count := func(stmt string) (int, error) {
		series, err := q.Query(ctx, db, stmt)
		if err != nil {
			return 0, err
		}
		n := 0
		for _, s := range series {
			for _, row := range s.Values {
				if v, ok := Number(row[len(row)-1]); ok {
					n += int(v)
				}
			}
		}
		return n, nil
	}
	key := influxql.QuoteIdent(tag)
	if c.Values, err = count("SHOW TAG VALUES EXACT CARDINALITY WITH KEY = " + key); err != nil {
		return c, err
	}
	// SHOW TAG VALUES … WHERE time reads whole shards (a week each by
	// default): a selector per series reads the day itself.
	from := influxql.QuoteIdent(measurement)
	if rp != "" {
		from = influxql.QuoteIdent(rp) + "." + from
	}
	day, err := q.Query(ctx, db, fmt.Sprintf("SELECT last(%s) FROM %s WHERE time > now() - 24h GROUP BY %s", influxql.QuoteIdent(field), from, key))
	if err != nil {
		return c, err
	}
	seen := map[string]bool{}
	for _, s := range day {
		seen[s.Tags[tag]] = true
	}
	c.ValuesLastDay = len(seen)
	if c.Series, err = count("SHOW SERIES EXACT CARDINALITY"); err != nil {
		return c, err
	}
	return c, nil
}

// columns maps a series' column names to their places.
func columns(s Series) map[string]int {
	m := make(map[string]int, len(s.Columns))
	for i, c := range s.Columns {
		m[c] = i
	}
	return m
}
