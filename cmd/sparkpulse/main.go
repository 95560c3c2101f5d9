// Command sparkpulse receives Spark's Graphite metrics and writes them to
// InfluxDB.
//
//	sparkpulse run      [--config F] [flags]   run the service
//	sparkpulse check    [--config F] [flags]   validate the settings and say what each part does
//	sparkpulse parse    [--config F] [--block N]  graphite lines on stdin → line protocol on stdout
//	sparkpulse simulate [--addr A] [--apps N] [--executors M] [--period D]
//	sparkpulse report   [flags] APP_ID | --fleet [--since 7d]
//	sparkpulse watch    [flags]                a live view
//	sparkpulse health   [--admin-url U]        exit 0 when the service's /healthz answers 200
//	sparkpulse completion bash|zsh|fish
//	sparkpulse version  (or --version)
//
// Settings come from the config file, then the environment
// (SPARKPULSE_<SECTION>_<KEY>), then the flags. Package config reads,
// layers and validates them, and words their errors; this package is
// wiring and flags: the commands, their flags (given to config as
// config.Overrides), the pipeline started from the config.Plan, and the
// exit statuses. Exit status: 0 done (and help), 1 failed, 2 called
// wrongly, 130 stopped at once by a second signal. These commands, their
// flags, the exit statuses and the output of parse are a stable contract;
// the documentation lists them.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"regexp"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/sparkpulse/sparkpulse"
	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/human"
	"github.com/sparkpulse/sparkpulse/simulate"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = ""

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	stop := &stopSignals{forced: make(chan struct{})}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		cancel() // the graceful stop
		<-sigs
		close(stop.forced)
		if !stop.claimed.Load() {
			// No graceful stop under way to report on: just go.
			fmt.Fprintln(os.Stderr, "sparkpulse: second signal: stopped at once")
			os.Exit(130)
		}
	}()
	code := runMain(context.WithValue(ctx, stopSignalsKey{}, stop), os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	cancel()
	os.Exit(code)
}

// stopSignals is how main tells a command that a second signal came: the
// first cancels the context and starts the graceful stop; the second closes
// forced. A command that reports what it abandons claims it.
type stopSignals struct {
	forced  chan struct{}
	claimed atomic.Bool
}

type stopSignalsKey struct{}

// forcedStop returns the channel a second signal closes, nil without one
// (tests stop by cancelling the context), and claims the reporting.
func forcedStop(ctx context.Context) <-chan struct{} {
	s, _ := ctx.Value(stopSignalsKey{}).(*stopSignals)
	if s == nil {
		return nil
	}
	s.claimed.Store(true)
	return s.forced
}

// versionString is the version the build reports: the ldflag (make
// build, make release, the container build); else a release the go
// command installed by its tag ("v0.2.0"); else the development build of
// the version in preparation, VERSION's X.Y.Z-dev, with the commit the go
// command stamps (+<12 hex>, .dirty with changes), as
// scripts/release.sh names one.
func versionString() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if ok && strings.HasPrefix(bi.Main.Version, "v") && !pseudoVersion.MatchString(bi.Main.Version) {
		return strings.TrimPrefix(bi.Main.Version, "v")
	}
	v := sparkpulse.Version() + "-dev"
	if rev := revisionString(); rev != "unknown" && len(rev) >= 12 {
		v += "+" + rev[:12]
		if strings.HasSuffix(rev, "-dirty") {
			v += ".dirty"
		}
	}
	return v
}

// pseudoVersion matches what the go command stamps on a build from a
// checkout between tags (v0.0.0-20261129101500-abcdef123456, +dirty):
// not a release.
var pseudoVersion = regexp.MustCompile(`[-.]\d{14}-[0-9a-f]{12}(\+dirty)?$`)

// cmdRun runs the service until ctx ends. With readyFile, once every
// listener serves (/readyz answers ready) it writes there the addresses
// bound (see writeReadyFile), removing a file left by an earlier run first
// and this one when it returns: a parent that starts sparkpulse with port 0
// learns its ports without racing for them.
func cmdRun(ctx context.Context, o *config.Overrides, readyFile string, getenv func(string) string, stderr io.Writer) error {
	plan, err := config.Load(o, getenv)
	if err != nil {
		return err
	}
	if readyFile != "" {
		if err := os.Remove(readyFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("--ready-file: %w", err)
		}
		defer os.Remove(readyFile)
	}
	log, err := newLogger(plan.Log, stderr)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	log.Info("starting sparkpulse", zap.String("version", versionString()), zap.String("config", plan.Source))

	forced := forcedStop(ctx)
	p, err := startPipeline(ctx, plan, log)
	if err != nil {
		return explainMissing(err, plan)
	}
	if readyFile != "" {
		if err := writeReadyFile(readyFile, p.Bound()); err != nil {
			log.Error("stopping: the ready file could not be written", zap.Error(err))
			shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
			defer cancel()
			return errors.Join(err, p.Shutdown(shutdownCtx))
		}
	}
	<-ctx.Done()
	log.Info("shutting down; a second SIGINT or SIGTERM stops at once", zap.String("timeout", config.FormatDuration(shutdownTimeout)))
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Shutdown(shutdownCtx) }()
	select {
	case err := <-done:
		return err
	case <-forced:
		return abandoned(plan)
	}
}

// abandoned says what a stop forced during the graceful one leaves
// undone.
func abandoned(plan *config.Plan) error {
	kept := "no state-dir: points not yet delivered to InfluxDB are lost, and the next start has no delta baselines"
	if plan.StateDir != "" {
		kept = fmt.Sprintf("points held in memory and not yet delivered to InfluxDB are lost; the disk queue and the delta baselines last saved under %s are used at the next start", plan.StateDir)
	}
	return fmt.Errorf("%w: the graceful stop was abandoned (open connections not read to their end, buffers not flushed): %s", errForced, kept)
}

// shutdownTimeout bounds a graceful stop: reading open connections to their
// end, then delivering what is buffered.
const shutdownTimeout = 30 * time.Second

func cmdSimulate(ctx context.Context, cfg simulate.Config, rounds int, stdout io.Writer) error {
	if cfg.Apps < 1 || cfg.Executors < 0 || rounds < 0 {
		return fmt.Errorf("%w: --apps must be at least 1, --executors and --rounds not negative", errUsage)
	}
	if cfg.Period <= 0 {
		return fmt.Errorf("%w: --period %s: must be positive", errUsage, config.FormatDuration(cfg.Period))
	}
	proto := "TCP"
	if cfg.UDP {
		proto = "UDP"
	}
	what := fmt.Sprintf("%s × (driver + %s)", human.Count(cfg.Apps, "app"), human.Count(cfg.Executors, "executor"))
	if rounds > 0 {
		fmt.Fprintf(stdout, "sending %s of %s as fast as possible → %s %s\n", human.Count(rounds, "round"), what, proto, cfg.Addr)
		start := time.Now()
		c := simulate.NewCluster(cfg, start.Add(-time.Duration(rounds)*cfg.Period))
		lines, err := c.Replay(ctx, start.Add(-time.Duration(rounds)*cfg.Period), rounds)
		took := time.Since(start)
		fmt.Fprintf(stdout, "sent %s in %s: %.0f lines/s\n", human.Count(lines, "line"), took.Round(time.Millisecond), float64(lines)/took.Seconds())
		return err
	}
	fmt.Fprintf(stdout, "simulating %s every %s → %s %s\n", what, config.FormatDuration(cfg.Period), proto, cfg.Addr)
	if cfg.UIAddr != "" {
		fmt.Fprintf(stdout, "Spark REST API of the simulated applications: http://%s/api/v1/applications\n", cfg.UIAddr)
	}
	return simulate.Run(ctx, cfg, func(lines, failed int) {
		fmt.Fprintf(stdout, "%s sent %s", time.Now().Format(time.TimeOnly), human.Count(lines, "line"))
		if failed > 0 {
			fmt.Fprintf(stdout, ", %s failed (is sparkpulse listening on %s?)", human.Count(failed, "report"), cfg.Addr)
		}
		fmt.Fprintln(stdout)
	})
}
