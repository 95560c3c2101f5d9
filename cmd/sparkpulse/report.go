package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sparkpulse/sparkpulse/influx"
	"github.com/sparkpulse/sparkpulse/report"
)

// reportApp is `report APP_ID` (report.WriteApp) from plan's [annotate]
// sources, the metrics stream read from its [[graphite]] blocks'
// databases.
func reportApp(ctx context.Context, plan *Plan, appID string, asJSON bool, stdout io.Writer) error {
	if plan.Annotate == nil {
		return fmt.Errorf("%w: no Spark REST source: give --url or [annotate] urls", errUsage)
	}
	cfg := plan.Annotate.Poller
	cfg.Stream = newStream(plan, func() []*influx.Writer { return nil })
	return report.WriteApp(ctx, cfg, appID, asJSON, stdout)
}

// reportFleet is `report --fleet` (report.WriteFleet): the accounting
// where plan's annotator writes it, [annotate]'s database, else the first
// [[graphite]] block's.
func reportFleet(ctx context.Context, plan *Plan, since time.Duration, asJSON, wide bool, stdout io.Writer) error {
	target := plan.defaultTarget()
	if plan.Annotate != nil {
		target = plan.Annotate.Target
	}
	db, _, _ := strings.Cut(target.Bucket, "/")
	if db == "" {
		return fmt.Errorf("%w: no database to read: give a [[graphite]] block or [annotate] database", errUsage)
	}
	return report.WriteFleet(ctx, report.FleetQuery{Influx: plan.Influx, Database: db, Since: since, SinceText: formatDuration(since)}, asJSON, wide, stdout)
}
