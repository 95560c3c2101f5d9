package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sparkpulse/sparkpulse/attempt"
	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/influx"
	"github.com/sparkpulse/sparkpulse/report"
)

// reportApp is `report APP_ID` (report.WriteApp) from plan's [annotate]
// sources, the metrics stream read from its [[graphite]] blocks'
// databases; when no source shows the application (attempt.ErrNotShown:
// its live UI is gone, or there are no sources), what the annotator
// recorded of it (report.WriteRecorded) where report --fleet reads.
func reportApp(ctx context.Context, plan *config.Plan, appID string, stages int, asJSON bool, stdout io.Writer) error {
	why := ""
	if plan.Annotate != nil {
		cfg := plan.Annotate.Poller.Attempt()
		cfg.Stream = newStream(plan, func() []*influx.Writer { return nil })
		err := report.WriteApp(ctx, cfg, appID, stages, asJSON, stdout)
		if err == nil || ctx.Err() != nil || !errors.Is(err, attempt.ErrNotShown) {
			return err // a source that shows it failed: said, not covered by the record
		}
		why = strings.TrimPrefix(err.Error(), "application "+appID+": ")
	}
	db := recordDatabase(plan)
	if db == "" {
		return fmt.Errorf("%w: no Spark REST source and no database to read: give --url, or [annotate] urls or a [[graphite]] block", errUsage)
	}
	err := report.WriteRecorded(ctx, report.RecordQuery{Influx: plan.Influx, Database: db}, appID, why, asJSON, stdout)
	if errors.Is(err, report.ErrNotRecorded) && why != "" {
		return fmt.Errorf("application %s: no Spark REST source shows it (%s), and %w", appID, why, errors.Unwrap(err))
	}
	return err
}

// recordDatabase is where plan's annotator writes: [annotate]'s
// database, else the first [[graphite]] block's; "" with neither.
func recordDatabase(plan *config.Plan) string {
	target := plan.DefaultTarget()
	if plan.Annotate != nil {
		target = plan.Annotate.Target
	}
	db, _, _ := strings.Cut(target.Bucket, "/")
	return db
}

// reportFleet is `report --fleet` (report.WriteFleet): the accounting
// where plan's annotator writes it, [annotate]'s database, else the first
// [[graphite]] block's.
// reportJob is `report --job NAME`.
func reportJob(ctx context.Context, plan *config.Plan, name string, since time.Duration, baseline int, asJSON bool, stdout io.Writer) error {
	db := recordDatabase(plan)
	if db == "" {
		return fmt.Errorf("%w: no database to read: give a [[graphite]] block or [annotate] database", errUsage)
	}
	q := report.JobQuery{Influx: plan.Influx, Database: db, Name: name, Since: since, SinceText: config.FormatDuration(since), Baseline: baseline}
	if plan.Annotate != nil && plan.Annotate.History != nil {
		q.History = plan.Annotate.History.Bucket
	}
	return report.WriteJob(ctx, q, asJSON, stdout)
}

func reportFleet(ctx context.Context, plan *config.Plan, since time.Duration, asJSON, wide bool, stdout io.Writer) error {
	db := recordDatabase(plan)
	if db == "" {
		return fmt.Errorf("%w: no database to read: give a [[graphite]] block or [annotate] database", errUsage)
	}
	fq := report.FleetQuery{Influx: plan.Influx, Database: db, Since: since, SinceText: config.FormatDuration(since)}
	if plan.Annotate != nil && plan.Annotate.History != nil {
		fq.History = plan.Annotate.History.Bucket
	}
	return report.WriteFleet(ctx, fq, asJSON, wide, stdout)
}
