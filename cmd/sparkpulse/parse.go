package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/delta"
	"github.com/sparkpulse/sparkpulse/relay"
	"github.com/sparkpulse/sparkpulse/schema"
)

// cmdParse reads Graphite lines on stdin and prints each as the line
// protocol a block makes of it, or "# <why it is dropped>".
func cmdParse(args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	var o config.Overrides
	fs := newFlagSet("parse", stderr, &o, false)
	block := fs.Int("block", 0, "use the templates of the [[graphite]] block at this position (default: the first enabled one)")
	newSeries := fs.Bool("new-series", false, "treat the first sample of each cumulative series as new (delta = value) instead of as an unknown baseline (no delta)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	plan, err := config.Load(&o, getenv)
	if err != nil {
		return err
	}
	l, err := pickBlock(plan, *block)
	if err != nil {
		return err
	}
	rc := relay.Config{Mapper: l.Mapper}
	if d := plan.Deltas; d != nil {
		// A captured stream starts mid-application: by default the first
		// sample of a series is a baseline, as after sparkpulse starts.
		settings := d.Settings
		settings.FirstSampleGrace = 100 * 365 * 24 * time.Hour
		if *newSeries {
			settings.FirstSampleGrace = delta.NoGrace
		}
		rc.Deltas = &relay.Deltas{Rules: d.Rules, Tracker: delta.New(settings, time.Now()), Bucket: l.Target.Bucket,
			MatchField: l.Templates == nil && l.Schema == schema.Wide}
	}
	conn := relay.New(rc).NewConn(nil).(*relay.Conn)
	return translate(stdin, stdout, conn, l.TCP().WithDefaults().MaxLineLength)
}

// pickBlock is the enabled block at position index, or the first one.
func pickBlock(plan *config.Plan, index int) (*config.Listener, error) {
	if index == 0 {
		return plan.Listeners[0], nil
	}
	for _, l := range plan.Listeners {
		if l.Index == index {
			return l, nil
		}
	}
	return nil, fmt.Errorf("%w: --block %d: no enabled [[graphite]] block at that position", errUsage, index)
}

// translate writes a line of output for every non-blank line of input.
func translate(stdin io.Reader, stdout io.Writer, conn *relay.Conn, maxLine int) error {
	out := bufio.NewWriter(stdout)
	in := bufio.NewReaderSize(stdin, 64<<10)
	var line []byte
	tooLong := false
	for {
		chunk, isPrefix, err := in.ReadLine()
		if len(line)+len(chunk) <= maxLine {
			line = append(line, chunk...)
		} else {
			tooLong, line = true, line[:0]
		}
		if isPrefix {
			continue
		}
		switch {
		case err != nil && len(line) == 0 && !tooLong:
			// end of input
		case tooLong:
			fmt.Fprintf(out, "# line longer than max-line-length (%d bytes)\n", maxLine)
		case len(bytes.TrimSpace(line)) == 0:
			// blank lines produce no output
		default:
			if lp, perr := conn.Process(line); perr != nil {
				fmt.Fprintf(out, "# %v\n", perr)
			} else {
				out.Write(lp)
			}
		}
		line, tooLong = line[:0], false
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out.Flush()
			}
			out.Flush()
			return fmt.Errorf("reading stdin: %w", err)
		}
	}
}
