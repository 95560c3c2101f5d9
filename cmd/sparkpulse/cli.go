package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/influx"
	"github.com/sparkpulse/sparkpulse/live"
	"github.com/sparkpulse/sparkpulse/report"
	"github.com/sparkpulse/sparkpulse/simulate"
)

// errUsage marks errors in how the command was called (exit status 2),
// config's flag combinations among them.
var errUsage = config.ErrUsage

// errForced marks a stop forced by a second signal (exit status 130).
var errForced = errors.New("stopped at once by a second signal")

// Exit statuses: 0 done (and help), 1 failed, 2 called wrongly, 130 stopped
// at once by a second signal.
func exitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errForced):
		return 130
	case errors.Is(err, errUsage):
		return 2
	}
	return 1
}

// runMain runs the program and prints its error, once, to stderr: each
// line after "sparkpulse: ". It returns the exit status.
func runMain(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	err := run(ctx, args, getenv, stdin, stdout, stderr)
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintln(stderr, "sparkpulse:", line)
		}
	}
	return exitCode(err)
}

// run is the whole program; main only adds signals, the printing of the
// error and the exit status. It prints no error itself.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	root, started := newRootCmd(getenv, stdin, stdout, stderr)
	root.SetArgs(normalizeArgs(root, args))
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return nil
	}
	// What fails before a command runs is the call: an unknown command,
	// flag or argument.
	if !*started && !errors.Is(err, errUsage) {
		err = fmt.Errorf("%w: %v", errUsage, err)
	}
	if errors.Is(err, errUsage) && cmd != nil {
		err = fmt.Errorf("%w\nsee '%s --help'", err, cmd.CommandPath())
	}
	return err
}

const rootLong = `sparkpulse receives Spark's Graphite metrics, maps them, computes deltas and
writes them to InfluxDB; it annotates from Spark's REST API and explains what
applications held, used and could save.

Settings come from the config file (--config, or SPARKPULSE_CONFIG), then the
environment (SPARKPULSE_<SECTION>_<KEY>), then the flags.

Exit status: 0 done, 1 failed, 2 called wrongly, 130 stopped at once by a
second Ctrl-C.`

// newRootCmd builds the command tree. started is set once a command runs,
// after its flags and arguments were accepted.
func newRootCmd(getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) (*cobra.Command, *bool) {
	started := new(bool)
	root := &cobra.Command{
		Use:           "sparkpulse",
		Short:         "Spark's Graphite metrics into InfluxDB, with annotations and sizing advice",
		Long:          rootLong,
		Version:       versionString(),
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.SetOut(cmd.ErrOrStderr())
			_ = cmd.Usage()
			return fmt.Errorf("%w: no command given", errUsage)
		},
		PersistentPreRun: func(*cobra.Command, []string) { *started = true },
	}
	// Before the completion command, which takes its output when made.
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetVersionTemplate("sparkpulse {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return fmt.Errorf("%w: %v", errUsage, err) })
	root.AddCommand(
		newRunCmd(getenv), newCheckCmd(getenv), newParseCmd(getenv), newSimulateCmd(),
		newReportCmd(getenv), newWatchCmd(getenv), newHealthCmd(getenv),
		&cobra.Command{
			Use:   "version",
			Short: "Print the version",
			Args:  noArgs,
			Run:   func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), "sparkpulse", versionString()) },
		},
	)
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Long = completionLong
		}
	}
	return root, started
}

const completionLong = `Print the shell completion script for bash, zsh, fish or powershell.

  bash:  sparkpulse completion bash > /etc/bash_completion.d/sparkpulse
         (or: source <(sparkpulse completion bash) in ~/.bashrc)
  zsh:   sparkpulse completion zsh > "${fpath[1]}/_sparkpulse"
  fish:  sparkpulse completion fish > ~/.config/fish/completions/sparkpulse.fish`

// noArgs refuses arguments, as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, args[0])
	}
	return nil
}

// addConfigFlag adds --config.
func addConfigFlag(cmd *cobra.Command, o *config.Overrides) {
	cmd.Flags().StringVar(&o.Config, "config", "", "config `FILE`: sparkpulse TOML, or an influxdb.conf whose [[graphite]] blocks are used (env "+config.EnvConfig+")")
	_ = cmd.MarkFlagFilename("config", "toml", "conf")
}

// addInfluxFlags adds where InfluxDB is: the same flags for run, check,
// report and watch.
func addInfluxFlags(cmd *cobra.Command, o *config.Overrides) {
	fs := cmd.Flags()
	fs.StringVar(&o.InfluxURL, "influxdb-url", "", "InfluxDB `URL` (default "+influx.DefaultURL+"; env "+config.EnvURL+")")
	fs.StringVar(&o.InfluxOrg, "influxdb-org", "", "InfluxDB 2.x/3.x organization `ORG` (env "+config.EnvOrg+")")
	fs.StringVar(&o.Database, "database", "", "InfluxDB 1.x `DATABASE` of every [[graphite]] block (default "+config.DefaultDatabase+")")
	fs.StringVar(&o.Bucket, "bucket", "", "InfluxDB 2.x/3.x `BUCKET` of every [[graphite]] block")
}

// addServiceFlags adds the settings of the running service.
func addServiceFlags(cmd *cobra.Command, o *config.Overrides) {
	fs := cmd.Flags()
	fs.StringVar(&o.Bind, "bind", "", "`ADDR`, the address of the default TCP and UDP listeners when no config file is given (default "+config.DefaultBindAddr+")")
	fs.StringVar(&o.AdminAddr, "admin-bind", "", "`ADDR`, the address of /metrics and /healthz (default "+config.DefaultAdminAddr+"; \"off\" disables; env "+config.EnvAdminBind+")")
	fs.StringVar(&o.LogFormat, "log-format", "", "`FORMAT`: console or json (default "+config.DefaultLogFormat+")")
	fs.StringVar(&o.LogLevel, "log-level", "", "`LEVEL`: debug, info, warn or error (default "+config.DefaultLogLevel+")")
	fs.BoolVar(&o.CreateDatabase, "create-database", false, "create the InfluxDB 1.x database when it is missing, at start and on a write answered 404 (env "+config.EnvCreateDatabase+")")
	fs.StringVar(&o.StateDir, "state-dir", "", "`DIR`, the directory for state kept across restarts: delta baselines, disk queue (env SPARKPULSE_STATE_DIR)")
	fs.StringArrayVar(&o.AnnotateURLs, "annotate-url", nil, "Spark UI, History Server or {app_id} `URL` template to poll for annotations (repeatable; replaces [annotate] urls)")
	_ = cmd.RegisterFlagCompletionFunc("log-format", fixedValues("console", "json"))
	_ = cmd.RegisterFlagCompletionFunc("log-level", fixedValues("debug", "info", "warn", "error"))
	_ = cmd.MarkFlagDirname("state-dir")
}

func fixedValues(v ...string) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return v, cobra.ShellCompDirectiveNoFileComp
	}
}

func newRunCmd(getenv func(string) string) *cobra.Command {
	var o config.Overrides
	var readyFile string
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Receive Graphite metrics and write them to InfluxDB",
		Long: `Receive Graphite metrics and write them to InfluxDB, until SIGINT or SIGTERM.

The first signal stops gracefully: the listeners close, open connections are
read to their end and what is buffered is delivered. A second one stops at
once (exit status 130), saying what was abandoned.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmdRun(cmd.Context(), &o, readyFile, getenv, cmd.ErrOrStderr())
		},
	}
	addConfigFlag(cmd, &o)
	addInfluxFlags(cmd, &o)
	addServiceFlags(cmd, &o)
	cmd.Flags().StringVar(&readyFile, "ready-file", "", "once every listener serves, write the addresses bound to `FILE` as JSON (for port 0)")
	return cmd
}

func newCheckCmd(getenv func(string) string) *cobra.Command {
	var o config.Overrides
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Validate the settings and print what each part does",
		Long: `Validate the settings run would start with (the config file, the environment and
the same flags as run), print what each [[graphite]] block and section does
with the defaults applied, and look at InfluxDB without creating anything.
Every problem is reported, each with where its value came from.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmdCheck(&o, getenv, cmd.OutOrStdout())
		},
	}
	addConfigFlag(cmd, &o)
	addInfluxFlags(cmd, &o)
	addServiceFlags(cmd, &o)
	return cmd
}

func newParseCmd(getenv func(string) string) *cobra.Command {
	var o config.Overrides
	var block int
	var newSeries bool
	cmd := &cobra.Command{
		Use:   "parse",
		Short: `Read Graphite lines on stdin, print each as line protocol (or "# error")`,
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			args := []string{"--block", fmt.Sprint(block)}
			if o.Config != "" {
				args = append(args, "--config", o.Config)
			}
			if newSeries {
				args = append(args, "--new-series")
			}
			return cmdParse(args, getenv, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	addConfigFlag(cmd, &o)
	cmd.Flags().IntVar(&block, "block", 0, "use the templates of the [[graphite]] block at position `N`, from 1 (default: the first enabled one)")
	cmd.Flags().BoolVar(&newSeries, "new-series", false, "treat the first sample of each cumulative series as new (delta = value) instead of as an unknown baseline (no delta)")
	return cmd
}

// newFlagSet and parseFlags read the flags cmdParse is called with: the
// parse command has checked them already.
func newFlagSet(name string, stderr io.Writer, o *config.Overrides, _ bool) *flagSet {
	fs := &flagSet{pflag.NewFlagSet("sparkpulse "+name, pflag.ContinueOnError)}
	fs.SetOutput(stderr)
	fs.StringVar(&o.Config, "config", "", "config file")
	return fs
}

// flagSet is a pflag.FlagSet with the standard library's Int and Bool.
type flagSet struct{ *pflag.FlagSet }

func parseFlags(fs *flagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	return nil
}

func newSimulateCmd() *cobra.Command {
	var cfg simulate.Config
	var rounds int
	cmd := &cobra.Command{
		Use:   "simulate",
		Short: "Send Spark-shaped GraphiteSink traffic to a listener (demo and load source)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmdSimulate(cmd.Context(), cfg, rounds, cmd.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&cfg.Addr, "addr", "127.0.0.1:2003", "Graphite listener to send to (TCP, or UDP with --udp)")
	fs.StringVar(&cfg.Prefix, "prefix", "", "GraphiteSink prefix (spark.metrics.conf.*.sink.graphite.prefix)")
	fs.IntVar(&cfg.Apps, "apps", 1, "concurrent Spark applications")
	fs.IntVar(&cfg.Executors, "executors", 4, "executors per application")
	fs.Var(newDurationFlag(&cfg.Period, 10*time.Second), "period", "reporting period (sink.graphite.period)")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "random seed; the same seed sends the same values")
	fs.StringVar(&cfg.UIAddr, "ui-addr", "", "also serve the simulated applications' Spark REST API here (host:port), as a History Server would")
	fs.BoolVar(&cfg.UDP, "udp", false, "send every line as a UDP datagram (sink.graphite.protocol=udp) instead of a TCP connection per report")
	fs.Var(newDurationFlag(&cfg.AppLifetime, 0), "app-lifetime", "end each application after this long and start a new one in its place (0: never)")
	fs.Var(newDurationFlag(&cfg.ExecutorLifetime, 0), "executor-lifetime", "replace each executor by a new one after this long (0: never)")
	fs.IntVar(&rounds, "rounds", 0, "send this many rounds of reports as fast as the listener takes them, then exit (0: one round every period, until stopped)")
	return cmd
}

func newReportCmd(getenv func(string) string) *cobra.Command {
	var o config.Overrides
	var asJSON, fleet, wide bool
	var since time.Duration
	var stages, baseline int
	var job string
	cmd := &cobra.Command{
		Use:   "report [flags] APP_ID\n  sparkpulse report --fleet [--since 7d] [flags]\n  sparkpulse report --job NAME [--since 90d] [--baseline 5] [flags]",
		Short: "An application's memory peaks, sizing advice and where its time went; with --fleet, every application's accounting",
		Long: `Without --fleet: an application's memory peaks against its settings, sizing
advice and where its time went, from Spark's REST API (--url or [annotate]
urls) and the metrics stream in InfluxDB.

With --fleet: what every application that ended in --since held, used and
could save, from the accounting the annotator writes to InfluxDB.

With --job: the runs of the recurring job NAME (spark.app.name) that ended
in --since (90 days unless given), from the history ([annotate] history-*)
or the accounting, each compared with the median of its last --baseline
successful runs: a run past it by half and a minute (or by half and half a
core-hour) is a regression, with the figure that explains it.

InfluxDB is found as run finds it: the config file, the environment and the
same flags.`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case job != "" && (fleet || len(args) > 0):
				return fmt.Errorf("%w: report --job takes no application id, and not --fleet", errUsage)
			case job != "" && (wide || cmd.Flags().Changed("stages")):
				return fmt.Errorf("%w: --wide is for --fleet, --stages for one application", errUsage)
			case cmd.Flags().Changed("baseline") && job == "":
				return fmt.Errorf("%w: --baseline is for --job", errUsage)
			case job != "" && baseline < report.MinBaseline:
				return fmt.Errorf("%w: --baseline %d: must be at least %d", errUsage, baseline, report.MinBaseline)
			case job != "" && since <= 0:
				return fmt.Errorf("%w: --since %s: must be positive", errUsage, config.FormatDuration(since))
			case job != "":
				return nil
			case fleet && len(args) > 0:
				return fmt.Errorf("%w: report --fleet takes no application id", errUsage)
			case !fleet && len(args) != 1:
				return fmt.Errorf("%w: report takes one application id (or --fleet)", errUsage)
			case wide && !fleet:
				return fmt.Errorf("%w: --wide is for --fleet", errUsage)
			case fleet && since <= 0:
				return fmt.Errorf("%w: --since %s: must be positive", errUsage, config.FormatDuration(since))
			case stages < 1:
				return fmt.Errorf("%w: --stages %d: must be at least 1", errUsage, stages)
			case fleet && cmd.Flags().Changed("stages"):
				return fmt.Errorf("%w: --stages is for one application, not --fleet", errUsage)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			plan, err := config.Load(&o, getenv)
			if err != nil {
				return err
			}
			if job != "" {
				if !cmd.Flags().Changed("since") {
					since = report.DefaultJobSince
				}
				return reportJob(cmd.Context(), plan, job, since, baseline, asJSON, cmd.OutOrStdout())
			}
			if fleet {
				return reportFleet(cmd.Context(), plan, since, asJSON, wide, cmd.OutOrStdout())
			}
			return reportApp(cmd.Context(), plan, args[0], stages, asJSON, cmd.OutOrStdout())
		},
	}
	addConfigFlag(cmd, &o)
	addInfluxFlags(cmd, &o)
	fs := cmd.Flags()
	fs.StringArrayVar(&o.AnnotateURLs, "url", nil, "Spark UI, History Server or {app_id} `URL` template to ask (repeatable; default [annotate] urls)")
	fs.BoolVar(&asJSON, "json", false, "print JSON instead of tables")
	fs.BoolVar(&fleet, "fleet", false, "every application that ended in --since, from the accounting in InfluxDB, instead of one")
	fs.Var(newDurationFlag(&since, 7*24*time.Hour), "since", "with --fleet or --job: how far back, e.g. 36h, 7d, 2w (--job: 90d unless given)")
	fs.BoolVar(&wide, "wide", false, "with --fleet: every column (user, executors, GiB-hours, the driver, driver-only time, lost task-hours, GC, GiB-hours saved), not the 120 columns of the default table")
	fs.IntVar(&stages, "stages", report.DefaultStages, "with APP_ID: how many of its slowest stages are read and judged")
	fs.StringVar(&job, "job", "", "the runs of the recurring job `NAME` (spark.app.name), each against its baseline, instead of one application")
	fs.IntVar(&baseline, "baseline", report.DefaultBaseline, "with --job: the successful runs before a run whose median it is compared with")
	return cmd
}

// cmdReport is `sparkpulse report ARGS`.
func cmdReport(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return run(ctx, append([]string{"report"}, args...), getenv, nil, stdout, stderr)
}

func newWatchCmd(getenv func(string) string) *cobra.Command {
	var o config.Overrides
	var adminURL string
	var interval, since time.Duration
	var notes []string
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "A live view of sparkpulse and the applications it sees, redrawn every --interval",
		Long: `A live view of sparkpulse and the applications it sees, redrawn every
--interval until Ctrl-C: sparkpulse's own figures from its admin endpoint,
and what InfluxDB holds, found as report finds it.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if interval <= 0 {
				return fmt.Errorf("%w: --interval %s: must be positive", errUsage, config.FormatDuration(interval))
			}
			if since < 0 {
				return fmt.Errorf("%w: --since %s: must not be negative", errUsage, config.FormatDuration(since))
			}
			plan, err := config.Load(&o, getenv)
			if err != nil {
				return err
			}
			u := adminURL
			if u == "" && plan.AdminAddr != "" {
				u = probeURL(plan.AdminAddr)
			}
			if u, err = normalizeAdminURL(u); err != nil {
				return err
			}
			return runWatch(cmd.Context(), watchOptions{Plan: plan, AdminURL: u, Interval: interval, Since: since, Notes: notes}, cmd.OutOrStdout())
		},
	}
	addConfigFlag(cmd, &o)
	addInfluxFlags(cmd, &o)
	cmd.Flags().StringVar(&adminURL, "admin-url", "", "sparkpulse's admin endpoint `URL` (default: from [admin] bind-address or "+config.EnvAdminBind+", 0.0.0.0 read as 127.0.0.1)")
	cmd.Flags().Var(newDurationFlag(&interval, 2*time.Second), "interval", "redraw period")
	cmd.Flags().Var(newDurationFlag(&since, live.DefaultSince), "since", "show what is dated from this long before the view starts: applications started, and ended with their accounting (0s: from the start)")
	cmd.Flags().StringArrayVar(&notes, "note", nil, "a `LINE` at the foot of every frame, in place of where the dashboards are (repeatable; make run lists its next commands)")
	return cmd
}

// normalizeArgs lets long flags be written with one dash, as the standard
// library's flag package took them (-config F): each "-name" or
// "-name=value" whose name is a long flag of some command becomes
// "--name…". Arguments after "--" are left as they are.
func normalizeArgs(root *cobra.Command, args []string) []string {
	long := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.InitDefaultHelpFlag()
		c.InitDefaultVersionFlag()
		for _, fs := range []*pflag.FlagSet{c.LocalFlags(), c.PersistentFlags(), c.Flags()} {
			fs.VisitAll(func(f *pflag.Flag) { long[f.Name] = true })
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	out := make([]string, len(args))
	copy(out, args)
	for i, a := range out {
		if a == "--" {
			break
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' {
			name, _, _ := strings.Cut(a[1:], "=")
			if len(name) > 1 && long[name] {
				out[i] = "-" + a
			}
		}
	}
	return out
}
