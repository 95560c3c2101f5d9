// Command sparkpulse receives Spark's Graphite metrics and writes them to
// InfluxDB.
//
//	sparkpulse run     [--config F] [flags]   run the service
//	sparkpulse check   [--config F]           validate the config and say what each block does
//	sparkpulse parse   [--config F] [--block N] graphite lines on stdin → line protocol on stdout
//	sparkpulse simulate [--addr A] [--apps N] [--executors M] [--period D]
//	sparkpulse version
//
// These commands, their flags and the output of parse are a stable contract;
// the README documents them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/sparkpulse/sparkpulse/influx"
	"github.com/sparkpulse/sparkpulse/simulate"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = ""

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "sparkpulse:", err)
		}
		os.Exit(exitCode(err))
	}
}

// errUsage marks errors in how the command was called (exit status 2).
var errUsage = errors.New("usage")

func exitCode(err error) int {
	if errors.Is(err, errUsage) || errors.Is(err, flag.ErrHelp) {
		return 2
	}
	return 1
}

const usage = `usage: sparkpulse <command> [flags]

commands:
  run      receive Graphite metrics and write them to InfluxDB
  check    validate a config file and print what each [[graphite]] block does
  parse    read Graphite lines on stdin, print each as line protocol (or "# error")
  simulate send Spark-shaped GraphiteSink traffic to a listener (demo and load source)
  report   an application's memory peaks against its settings, sizing advice and where its
           time went; with --fleet, what every application that ended held, used and could save
  version  print the version

"sparkpulse <command> -h" lists a command's flags.
`

// run is the whole program; main only adds signals and the exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("%w: no command given", errUsage)
	}
	switch args[0] {
	case "run":
		return cmdRun(ctx, args[1:], getenv, stderr)
	case "check":
		return cmdCheck(args[1:], getenv, stdout, stderr)
	case "parse":
		return cmdParse(args[1:], getenv, stdin, stdout, stderr)
	case "simulate":
		return cmdSimulate(ctx, args[1:], stdout, stderr)
	case "report":
		return cmdReport(ctx, args[1:], getenv, stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "sparkpulse", versionString())
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("%w: unknown command %q", errUsage, args[0])
}

func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// flagOverrides are the settings that flags may override in any config.
type flagOverrides struct {
	config         string
	influxURL      string
	influxOrg      string
	database       string
	bucket         string
	bind           string
	adminAddr      string
	logFormat      string
	logLevel       string
	createDatabase bool
	stateDir       string
	annotateURLs   stringList
}

// stringList is a flag that may be given several times.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func newFlagSet(name string, stderr io.Writer, o *flagOverrides, full bool) *flag.FlagSet {
	fs := flag.NewFlagSet("sparkpulse "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.config, "config", "", "config file: sparkpulse TOML, or an influxdb.conf whose [[graphite]] blocks are used")
	if !full {
		return fs
	}
	fs.StringVar(&o.influxURL, "influxdb-url", "", "InfluxDB URL (default "+influx.DefaultURL+"; env "+envURL+")")
	fs.StringVar(&o.influxOrg, "influxdb-org", "", "InfluxDB 2.x/3.x organization (env "+envOrg+")")
	fs.StringVar(&o.database, "database", "", "InfluxDB 1.x database for every [[graphite]] block")
	fs.StringVar(&o.bucket, "bucket", "", "InfluxDB 2.x/3.x bucket for every [[graphite]] block")
	fs.StringVar(&o.bind, "bind", "", "address of the default TCP and UDP listeners when no --config is given (default "+defaultBindAddr+")")
	fs.StringVar(&o.adminAddr, "admin-bind", "", "address of /metrics and /healthz (default "+defaultAdminAddr+"; \"off\" disables)")
	fs.StringVar(&o.logFormat, "log-format", "", "console or json")
	fs.StringVar(&o.logLevel, "log-level", "", "debug, info, warn or error")
	fs.BoolVar(&o.createDatabase, "create-database", false, "create the InfluxDB 1.x database when it is missing")
	fs.StringVar(&o.stateDir, "state-dir", "", "directory for state kept across restarts (delta baselines)")
	fs.Var(&o.annotateURLs, "annotate-url", "Spark UI, History Server or {app_id} URL template to poll for annotations (repeatable; replaces [annotate] urls)")
	return fs
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	return nil
}

func cmdRun(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	var o flagOverrides
	if err := parseFlags(newFlagSet("run", stderr, &o, true), args); err != nil {
		return err
	}
	plan, err := loadPlan(&o, getenv)
	if err != nil {
		return err
	}
	log, err := newLogger(plan.Log, stderr)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()

	p, err := startPipeline(ctx, plan, log)
	if err != nil {
		return err
	}
	<-ctx.Done()
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	return p.Shutdown(shutdownCtx)
}

// shutdownTimeout bounds a graceful stop: reading open connections to their
// end, then delivering what is buffered.
const shutdownTimeout = 30 * time.Second

func cmdSimulate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sparkpulse simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg simulate.Config
	fs.StringVar(&cfg.Addr, "addr", "127.0.0.1:2003", "Graphite listener to send to (TCP, or UDP with --udp)")
	fs.StringVar(&cfg.Prefix, "prefix", "", "GraphiteSink prefix (spark.metrics.conf.*.sink.graphite.prefix)")
	fs.IntVar(&cfg.Apps, "apps", 1, "concurrent Spark applications")
	fs.IntVar(&cfg.Executors, "executors", 4, "executors per application")
	fs.DurationVar(&cfg.Period, "period", 10*time.Second, "reporting period (sink.graphite.period)")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "random seed; the same seed sends the same values")
	fs.StringVar(&cfg.UIAddr, "ui-addr", "", "also serve the simulated applications' Spark REST API here (host:port), as a History Server would")
	fs.BoolVar(&cfg.UDP, "udp", false, "send every line as a UDP datagram (sink.graphite.protocol=udp) instead of a TCP connection per report")
	fs.DurationVar(&cfg.AppLifetime, "app-lifetime", 0, "end each application after this long and start a new one in its place (0: never)")
	fs.DurationVar(&cfg.ExecutorLifetime, "executor-lifetime", 0, "replace each executor by a new one after this long (0: never)")
	rounds := fs.Int("rounds", 0, "send this many rounds of reports as fast as the listener takes them, then exit (0: one round every period, until stopped)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if cfg.Apps < 1 || cfg.Executors < 0 || *rounds < 0 {
		return fmt.Errorf("%w: --apps must be at least 1, --executors and --rounds not negative", errUsage)
	}
	proto := "TCP"
	if cfg.UDP {
		proto = "UDP"
	}
	if *rounds > 0 {
		fmt.Fprintf(stdout, "sending %d rounds of %d app(s) × (driver + %d executors) as fast as possible → %s %s\n", *rounds, cfg.Apps, cfg.Executors, proto, cfg.Addr)
		start := time.Now()
		c := simulate.NewCluster(cfg, start.Add(-time.Duration(*rounds)*cfg.Period))
		lines, err := c.Replay(ctx, start.Add(-time.Duration(*rounds)*cfg.Period), *rounds)
		took := time.Since(start)
		fmt.Fprintf(stdout, "sent %d lines in %s: %.0f lines/s\n", lines, took.Round(time.Millisecond), float64(lines)/took.Seconds())
		return err
	}
	fmt.Fprintf(stdout, "simulating %d app(s) × (driver + %d executors) every %s → %s %s\n", cfg.Apps, cfg.Executors, cfg.Period, proto, cfg.Addr)
	if cfg.UIAddr != "" {
		fmt.Fprintf(stdout, "Spark REST API of the simulated applications: http://%s/api/v1/applications\n", cfg.UIAddr)
	}
	return simulate.Run(ctx, cfg, func(lines, failed int) {
		fmt.Fprintf(stdout, "%s sent %d lines", time.Now().Format(time.TimeOnly), lines)
		if failed > 0 {
			fmt.Fprintf(stdout, ", %d reports failed (is sparkpulse listening on %s?)", failed, cfg.Addr)
		}
		fmt.Fprintln(stdout)
	})
}
