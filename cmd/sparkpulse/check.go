package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sparkpulse/sparkpulse/delta"
	"github.com/sparkpulse/sparkpulse/influx"
)

// cmdCheck validates a config and says what each part of it will do, with
// the defaults applied.
func cmdCheck(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var o flagOverrides
	if err := parseFlags(newFlagSet("check", stderr, &o, false), args); err != nil {
		return err
	}
	plan, err := loadPlan(&o, getenv)
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
	fmt.Fprintf(stdout, "; gzip %s (%s), %d requests in flight, queue %d bytes in memory",
		in.Gzip, onOff(in.Gzip.Enabled(in.URL)), in.MaxInFlight, in.Queue.MaxBytes)
	if plan.StateDir != "" {
		fmt.Fprintf(stdout, " and up to %d on disk per writer", in.Queue.MaxDiskBytes)
	}
	fmt.Fprintln(stdout)
	if plan.AdminAddr != "" {
		fmt.Fprintf(stdout, "admin: http://%s/metrics, /healthz and /readyz\n", plan.AdminAddr)
	}
	describeDeltas(stdout, plan.Deltas)
	if plan.StateDir != "" {
		fmt.Fprintf(stdout, "state-dir: %s\n", plan.StateDir)
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
// fail the check, as they would fail run.
func describeTargets(w io.Writer, plan *Plan) error {
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	for _, c := range checkTargets(ctx, plan, false) {
		switch {
		case errors.Is(c.err, influx.ErrUnreachable):
			fmt.Fprintf(w, "influxdb: not reached, the targets were not checked: %v\n", c.err)
			return nil
		case errors.Is(c.err, influx.ErrMissing) && plan.CreateDatabase && c.res.Major == 1:
			fmt.Fprintf(w, "target %s: %s; run creates it (create-database = true)\n", c.target.Bucket, c.res.String())
		case c.err != nil:
			return c.err
		default:
			fmt.Fprintf(w, "target %s: %s: OK\n", c.target.Bucket, c.res.String())
		}
		for _, warn := range c.res.Warnings {
			fmt.Fprintf(w, "warning: %s\n", warn)
		}
	}
	return nil
}

func describeDeltas(w io.Writer, d *DeltaPlan) {
	if d == nil {
		fmt.Fprintln(w, "deltas: off")
		return
	}
	s := d.Settings
	grace := s.FirstSampleGrace.String()
	if s.FirstSampleGrace == delta.NoGrace {
		grace = "none"
	}
	fmt.Fprintf(w, "deltas: %d [[delta]] rules, then %d built-in Spark rules; first-sample-grace %s, idle-ttl %s, max-series %d, %d per application\n",
		len(d.UserRules), d.Rules.Len()-len(d.UserRules), grace, s.IdleTTL, s.MaxSeries, s.MaxSeriesPerApp)
	for _, r := range d.UserRules {
		kind := "cumulative"
		if !r.Cumulative {
			kind = "not cumulative"
		}
		fmt.Fprintf(w, "  %s: %s, path %q, measurement %q, unit %q\n", r.Source, kind, r.Path, r.Measurement, r.Unit)
	}
}

func describeAnnotate(w io.Writer, a *AnnotatePlan) {
	if a == nil {
		return
	}
	pc := a.Poller.WithDefaults()
	fmt.Fprintf(w, "annotate: every %s → bucket %q, auth: %s\n", pc.Interval, a.Target.Bucket, pc.Auth)
	for _, u := range pc.Sources {
		what := "a live UI or History Server"
		if strings.Contains(u, "{app_id}") {
			what = fmt.Sprintf("filled with each %s tag value seen", a.AppIDTag)
		}
		fmt.Fprintf(w, "  %s (%s)\n", u, what)
	}
}

func describeListener(w io.Writer, l *Listener, base influx.Config) {
	wc := l.Writer(base).WithDefaults()
	fmt.Fprintf(w, "[[graphite]] #%d: %s → bucket %q, batches of %d points or %s\n",
		l.Index, l.Name(), l.Target.Bucket, wc.BatchSize, wc.BatchTimeout)
	if l.Templates != nil {
		for _, d := range l.Templates.Describe() {
			fmt.Fprintf(w, "  %s\n", d)
		}
		for _, warn := range l.Templates.Warnings() {
			fmt.Fprintf(w, "  warning: %s\n", warn)
		}
		return
	}
	fmt.Fprintln(w, "  built-in Spark mapping (no templates configured)")
	if p := l.Config.SparkPrefixes; len(p) > 0 {
		fmt.Fprintf(w, "  known GraphiteSink prefixes: %q\n", p)
	}
	if t := l.Config.Tags; len(t) > 0 {
		fmt.Fprintf(w, "  global tags: %q\n", t)
	}
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
