package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/delta"
	"github.com/sparkpulse/sparkpulse/human"
	"github.com/sparkpulse/sparkpulse/influx"
	"github.com/sparkpulse/sparkpulse/schema"
)

// cmdCheck validates the settings run would start with and says what each
// part of them will do, with the defaults applied. Every problem is
// reported, each with where its value came from.
func cmdCheck(o *config.Overrides, getenv func(string) string, stdout io.Writer) error {
	plan, err := config.Load(o, getenv)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: OK\n", plan.Source)
	in := plan.Influx.WithDefaults()
	fmt.Fprintf(stdout, "influxdb: %s", influx.RedactURL(in.URL))
	if in.Org != "" {
		fmt.Fprintf(stdout, " org %q", in.Org)
	}
	if in.Token != "" {
		fmt.Fprint(stdout, " (token set)")
	}
	fmt.Fprintf(stdout, "; gzip %s (%s), %s in flight, queue %s in memory",
		in.Gzip, onOff(in.Gzip.Enabled(in.URL)), human.Count(in.MaxInFlight, "request"), human.Bytes(int64(in.Queue.MaxBytes)))
	if plan.StateDir != "" {
		fmt.Fprintf(stdout, " and up to %s on disk per writer", human.Bytes(in.Queue.MaxDiskBytes))
	}
	fmt.Fprintln(stdout)
	if plan.AdminAddr != "" {
		fmt.Fprintf(stdout, "admin: http://%s/metrics, /healthz and /readyz\n", plan.AdminAddr)
	}
	describeDeltas(stdout, plan.Deltas)
	if plan.StateDir != "" {
		fmt.Fprintf(stdout, "state-dir: %s", plan.StateDir)
		if plan.Deltas != nil {
			fmt.Fprintf(stdout, " (the ingest log up to %s)", human.Bytes(plan.Deltas.IngestLogBytes))
		}
		fmt.Fprintln(stdout)
	}
	describeAnnotate(stdout, plan.Annotate)
	for _, l := range plan.Listeners {
		describeListener(stdout, l, in)
	}
	for _, w := range plan.Warnings {
		fmt.Fprintf(stdout, "warning: %s\n", w)
	}
	return describeTargets(stdout, plan)
}

// checkTimeout bounds check's look at InfluxDB.
const checkTimeout = 5 * time.Second

// describeTargets looks at InfluxDB as run would at start, creating
// nothing: what server it is, whether each target exists, and the limits
// the dashboards run into there. An unreachable InfluxDB is only noted;
// a missing target (that run would not create) or refused credentials
// fail the check, as they would fail run; all of them are reported.
func describeTargets(w io.Writer, plan *config.Plan) error {
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	var errs []error
	for _, c := range checkTargets(ctx, plan, false) {
		switch {
		case errors.Is(c.err, influx.ErrUnreachable):
			fmt.Fprintf(w, "influxdb: not reached, the targets were not checked: %v\n", c.err)
			return errors.Join(errs...)
		case errors.Is(c.err, influx.ErrMissing) && plan.CreateDatabase && c.res.Major == 1:
			fmt.Fprintf(w, "target %s: %s; run creates it (%s)\n", c.target.Bucket, c.res.String(), plan.CreateDatabaseOrigin())
		case c.err != nil:
			fmt.Fprintf(w, "target %s: FAILED\n", c.target.Bucket)
			errs = append(errs, explainMissing(c.err, plan))
			continue
		default:
			fmt.Fprintf(w, "target %s: %s: OK\n", c.target.Bucket, c.res.String())
		}
		warnings := slices.Concat(c.res.Warnings, schemaWarnings(plan, c.target, c.res))
		if c.err == nil && c.res.Major == 1 {
			if capacity, ok := capacityOf(ctx, plan, c.target); ok {
				warnings = append(warnings, capacityWarnings(c.target.Bucket, capacity)...)
			}
		}
		for _, warn := range warnings {
			fmt.Fprintf(w, "warning: %s\n", warn)
		}
	}
	return errors.Join(errs...)
}

// explainMissing rewrites the remedy of a missing InfluxDB 1.x database or
// retention policy as the plan's (see config.Plan.CreateDatabaseHint).
func explainMissing(err error, p *config.Plan) error {
	const remedy = "set create-database = true"
	if !errors.Is(err, influx.ErrMissing) || !strings.Contains(err.Error(), remedy) {
		return err
	}
	return &hintedError{strings.Replace(err.Error(), remedy, p.CreateDatabaseHint(), 1), err}
}

// hintedError is an error with a better text, still matching the original.
type hintedError struct {
	msg string
	err error
}

func (e *hintedError) Error() string { return e.msg }
func (e *hintedError) Unwrap() error { return e.err }

func describeDeltas(w io.Writer, d *config.DeltaPlan) {
	if d == nil {
		fmt.Fprintln(w, "deltas: off")
		return
	}
	s := d.Settings
	grace := config.FormatDuration(s.FirstSampleGrace)
	if s.FirstSampleGrace == delta.NoGrace {
		grace = "none"
	}
	fmt.Fprintf(w, "deltas: %s, then %s; first-sample-grace %s, idle-ttl %s, max-series %d, %d per application\n",
		human.Count(len(d.UserRules), "[[delta]] rule"), human.Count(d.Rules.Len()-len(d.UserRules), "built-in Spark rule"), grace, config.FormatDuration(s.IdleTTL), s.MaxSeries, s.MaxSeriesPerApp)
	for _, r := range d.UserRules {
		kind := "cumulative"
		if !r.Cumulative {
			kind = "not cumulative"
		}
		fmt.Fprintf(w, "  %s: %s, path %q, measurement %q, unit %q\n", r.Source, kind, r.Path, r.Measurement, r.Unit)
	}
}

func describeAnnotate(w io.Writer, a *config.AnnotatePlan) {
	if a == nil {
		return
	}
	pc := a.Poller.WithDefaults()
	fmt.Fprintf(w, "annotate: every %s → bucket %q, auth: %s\n", config.FormatDuration(pc.Interval), a.Target.Bucket, pc.Auth)
	if a.History != nil {
		fmt.Fprintf(w, "  history: each ended application's usage → bucket %q (spark_app_history, by name)\n", a.History.Bucket)
	}
	for _, u := range pc.Sources {
		what := "a live UI or History Server"
		if strings.Contains(u, "{app_id}") {
			what = fmt.Sprintf("filled with each %s tag value seen", a.AppIDTag)
		}
		fmt.Fprintf(w, "  %s (%s)\n", u, what)
	}
}

func describeListener(w io.Writer, l *config.Listener, base influx.Config) {
	wc := l.Writer(base).WithDefaults()
	fmt.Fprintf(w, "[[graphite]] #%d: %s → bucket %q, batches of %s or %s\n",
		l.Index, l.Name(), l.Target.Bucket, human.Count(wc.BatchSize, "point"), config.FormatDuration(wc.BatchTimeout))
	if l.Templates != nil {
		for _, d := range l.Templates.Describe() {
			fmt.Fprintf(w, "  %s\n", d)
		}
		for _, warn := range l.Templates.Warnings() {
			fmt.Fprintf(w, "  warning: %s\n", warn)
		}
		return
	}
	shape := "a measurement per metric, field \"value\""
	if l.Schema == schema.Wide {
		shape = "a measurement per Spark source, a field per metric"
	}
	fmt.Fprintf(w, "  built-in Spark mapping (no templates configured), schema %q: %s\n", l.Schema, shape)
	if p := l.Config.SparkPrefixes; len(p) > 0 {
		fmt.Fprintf(w, "  known GraphiteSink prefixes: %q\n", p)
	}
	if t := l.Config.Tags; len(t) > 0 {
		fmt.Fprintf(w, "  global tags: %q\n", t)
	}
}

// schemaCost is what the built-in mapping makes of a Spark application's
// metrics in a schema: the series a driver and an executor each add, the
// tables (measurements), and the columns of the widest table (time, tags,
// fields and the deltas' fields). The figures are the largest of the
// recordings of real Spark in testdata/spark-real, as TestSchemaCosts
// counts them; every further listener class, queue, streaming query or
// plugin adds to them.
type schemaCost struct {
	driverSeries, executorSeries, tables, maxColumns int
}

var schemaCosts = map[schema.Shape]schemaCost{
	schema.CERN: {driverSeries: 374, executorSeries: 194, tables: 402, maxColumns: 8},
	schema.Wide: {driverSeries: 22, executorSeries: 7, tables: 16, maxColumns: 148},
}

// The limits of InfluxDB that a schema decides whether a target reaches.
const (
	maxSeries1x     = 1_000_000 // max-series-per-database's default, inmem index only
	maxTables3      = 500       // per database: InfluxDB 3 Cloud Dedicated and Clustered, by default
	maxColumns3     = 250       // per table: the same
	maxTables3Core  = 2000      // across all databases: InfluxDB 3 Core
	maxColumns3Core = 500       // per table: InfluxDB 3 Core

	// A listener's processing time is a Dropwizard timer of 15 values,
	// each a table of its own in the cern shape.
	tablesPerListener = 15
)

// schemaWarnings are the limits of the server res describes that the
// built-in mapping's blocks writing to t run into, each naming the block
// and the remedy. run may log them as check prints them.
func schemaWarnings(p *config.Plan, t influx.Target, res influx.CheckResult) []string {
	var out []string
	core := strings.Contains(res.Build, "Core")
	wide := schemaCosts[schema.Wide]
	for _, l := range p.Listeners {
		if l.Templates != nil || l.Target != t {
			continue
		}
		block := fmt.Sprintf("[[graphite]] #%d (%s)", l.Index, p.Origin(fmt.Sprintf("graphite.%d.schema", l.Index)))
		c := schemaCosts[l.Schema]
		switch {
		case res.Major == 1 && l.Schema == schema.CERN:
			out = append(out, fmt.Sprintf("%s: schema \"cern\" makes %d series per executor, %d per driver: the inmem index's "+
				"max-series-per-database (a million by default; the server does not tell its own) is reached after about %d executors kept; "+
				"use schema = \"wide\" (%d per executor)",
				block, c.executorSeries, c.driverSeries, maxSeries1x/c.executorSeries/100*100, wide.executorSeries))
		case res.Major == 3 && l.Schema == schema.CERN:
			limit := fmt.Sprintf("InfluxDB 3 Cloud Dedicated and Clustered allow %d per database by default", maxTables3)
			if core {
				limit = fmt.Sprintf("InfluxDB 3 Core allows %d across its databases", maxTables3Core)
			}
			out = append(out, fmt.Sprintf("%s: schema \"cern\" makes a table per metric: %d for a Spark application, %d more per listener it adds; "+
				"%s, sparkpulse's other tables included; use schema = \"wide\" (%d tables)",
				block, c.tables, tablesPerListener, limit, wide.tables))
		case res.Major == 3:
			limit, product := maxColumns3, "InfluxDB 3 Cloud Dedicated and Clustered allow by default"
			if core {
				limit, product = maxColumns3Core, "InfluxDB 3 Core allows"
			}
			// A global tag is a column of every table.
			if n := c.maxColumns + len(l.Config.Tags); n > limit {
				out = append(out, fmt.Sprintf("%s: schema %q makes up to %d columns in a table with its %d global tags, more than the %d %s; set fewer tags",
					block, l.Schema, n, len(l.Config.Tags), limit, product))
			}
		}
	}
	return out
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
