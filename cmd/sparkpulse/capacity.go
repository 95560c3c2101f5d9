package main

import (
	"context"
	"fmt"
	"math"

	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/influx"
	"github.com/sparkpulse/sparkpulse/schema"
)

// maxValuesPerTag1x is InfluxDB 1.x's max-values-per-tag by default; the
// server does not tell its own.
const maxValuesPerTag1x = 100_000

// capacityWarnings projects, from how many applications a 1.x target
// took in the last day, when what grows per application — the values of
// its applicationid tag, and its series — reaches InfluxDB 1.x's default
// limits, with what the target's retention keeps: a number of days while
// it keeps everything, the most it holds at once otherwise.
func capacityWarnings(target string, c influx.Capacity) []string {
	perDay := c.ValuesLastDay
	if perDay == 0 {
		return nil
	}
	var seriesPerApp float64
	if c.Values > 0 {
		seriesPerApp = float64(c.Series) / float64(c.Values)
	}
	rate := fmt.Sprintf("at %d applications a day (the last 24 hours)", perDay)
	var out []string
	check := func(what string, now float64, perApp float64, limit int, limitText string) {
		daily := float64(perDay) * perApp
		if c.Retention == 0 {
			days := (float64(limit) - now) / daily
			if days < 365 {
				keep := int(math.Floor(float64(limit) / daily))
				out = append(out, fmt.Sprintf("target %s: %s, %s reaches %s %s, as retention policy %q keeps everything: "+
					"keep at most %d days there (a retention policy with one-day shards), or lift the limit with the TSI index (docs/retention.md)",
					target, rate, what, limitText, within(days), c.RetentionPolicy, max(keep-1, 1)))
			}
			return
		}
		kept := c.Retention + c.ShardDuration // whole shard groups are dropped
		held := daily * kept.Hours() / 24
		if held > float64(limit) {
			keep := int(math.Floor(float64(limit)/daily)) - int(math.Ceil(c.ShardDuration.Hours()/24))
			out = append(out, fmt.Sprintf("target %s: %s, retention policy %q (%s, shards of %s) holds about %d of %s at once, past %s: "+
				"keep at most %d days there, or lift the limit with the TSI index (docs/retention.md)",
				target, rate, c.RetentionPolicy, config.FormatDuration(c.Retention), config.FormatDuration(c.ShardDuration),
				int(held), what, limitText, max(keep, 1)))
		}
	}
	check(schema.TagApplicationID+"'s values", float64(c.Values), 1, maxValuesPerTag1x,
		"max-values-per-tag (100 000 by default; the server does not tell its own)")
	if seriesPerApp > 0 {
		check("its series", float64(c.Series), seriesPerApp, maxSeries1x,
			"max-series-per-database (a million by default, inmem index only)")
	}
	return out
}

// within says in how many days: "in 19 days", "now".
func within(days float64) string {
	if days <= 0 {
		return "now"
	}
	return fmt.Sprintf("in %d days", int(math.Ceil(days)))
}

// capacityOf reads the capacity of a 1.x target, by the field every
// application writes there: executors' cpuTime in a block's shape, the
// application's fact in the annotations'.
func capacityOf(ctx context.Context, plan *config.Plan, t influx.Target) (influx.Capacity, bool) {
	measurement, field := "", ""
	for _, l := range plan.Listeners {
		if l.Target == t && l.Templates == nil {
			measurement, field = l.Schema.Measurement(schema.CPUTime), l.Schema.Field(schema.CPUTime)
			break
		}
	}
	if a := plan.Annotate; measurement == "" && a != nil && a.Target == t {
		measurement, field = schema.MeasurementApp, schema.FieldStatus
	}
	if measurement == "" {
		return influx.Capacity{}, false
	}
	ctx, cancel := context.WithTimeout(ctx, 2*checkTimeout)
	defer cancel()
	c, err := influx.ReadCapacity(ctx, plan.Influx, t, schema.TagApplicationID, measurement, field)
	return c, err == nil
}
