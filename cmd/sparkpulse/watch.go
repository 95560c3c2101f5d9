package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/live"
	"github.com/sparkpulse/sparkpulse/schema"
)

// watchOptions are what `sparkpulse watch` reads: InfluxDB as report reads
// it, and sparkpulse's own admin endpoint.
type watchOptions struct {
	Plan     *config.Plan  // InfluxDB URL, credentials and database, from the same flags, env and config as report
	AdminURL string        // base URL of sparkpulse's admin endpoint (…/metrics); "" leaves its figures out
	Interval time.Duration // redraw period
	Since    time.Duration // data dated from this long before the view starts
	Notes    []string      // the frame's last lines (live.Config.Notes)
}

// runWatch draws the live view until ctx ends: the applications and the
// accounting from the databases the plan writes (the metrics to its first
// [[graphite]] block's, the annotations to [annotate]'s), data dated from
// o.Since before the view's start on.
func runWatch(ctx context.Context, o watchOptions, stdout io.Writer) error {
	metrics, _, _ := strings.Cut(o.Plan.DefaultTarget().Bucket, "/")
	annotations := metrics
	if a := o.Plan.Annotate; a != nil {
		annotations, _, _ = strings.Cut(a.Target.Bucket, "/")
	}
	if metrics == "" && annotations == "" {
		return fmt.Errorf("%w: no database to read: give --database, a [[graphite]] block or [annotate] database", errUsage)
	}
	admin := o.AdminURL
	if admin != "" && !strings.Contains(admin, "://") {
		admin = "http://" + admin
	}
	var schemas []schema.Shape // the shapes the blocks writing metrics write; none: both
	for _, d := range streamDBs(o.Plan) {
		if d.Name == metrics {
			schemas = d.Schemas
		}
	}
	return live.Run(ctx, live.Config{Influx: o.Plan.Influx, MetricsDB: metrics, AnnotationsDB: annotations, Schemas: schemas,
		AdminURL: admin, Interval: o.Interval, Since: time.Now().Add(-o.Since), Notes: o.Notes}, stdout)
}
