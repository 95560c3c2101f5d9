package live

import (
	"context"
	"io"
	"os"
	"strings"
	"time"
)

// ANSI sequences of a redraw in place: cursor home, then each line
// clears what is left of the previous frame's line, and the end clears
// the rest of the screen; so the frame is replaced without flicker.
const (
	home     = "\x1b[H"
	clearEOL = "\x1b[K"
	clearEOS = "\x1b[J"
	clearAll = "\x1b[H\x1b[2J"
)

// Run draws a frame every cfg.Interval until ctx ends. On a terminal each
// frame replaces the last one; otherwise frames follow each other, with a
// blank line between them. It returns nil when ctx ends, or the error of
// writing to w.
func Run(ctx context.Context, cfg Config, w io.Writer) error {
	if cfg.Since.IsZero() {
		cfg.Since = time.Now()
	}
	q, err := NewQuerier(cfg)
	if err != nil {
		return err
	}
	tty, width := terminal(w)
	if cfg.Width > 0 {
		width = cfg.Width
	}
	if tty {
		if _, err := io.WriteString(w, clearAll); err != nil {
			return err
		}
	}
	tick := time.NewTicker(q.cfg.Interval)
	defer tick.Stop()
	for first := true; ; first = false {
		s := q.Snapshot(ctx, time.Now())
		if ctx.Err() != nil {
			return nil // a frame read while stopping says nothing true
		}
		if err := draw(w, Render(s, width), tty, first); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if tty {
			_, width = terminal(w)
			if cfg.Width > 0 {
				width = cfg.Width
			}
		}
	}
}

// draw writes one frame.
func draw(w io.Writer, lines []string, tty, first bool) error {
	var b strings.Builder
	if tty {
		b.WriteString(home)
		for _, l := range lines {
			b.WriteString(l)
			b.WriteString(clearEOL + "\n")
		}
		b.WriteString(clearEOS)
	} else {
		if !first {
			b.WriteString("\n")
		}
		for _, l := range lines {
			b.WriteString(l)
			b.WriteString("\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// terminal reports whether w is a terminal, and its width (DefaultWidth
// when unknown).
func terminal(w io.Writer) (bool, int) {
	f, ok := w.(*os.File)
	if !ok {
		return false, DefaultWidth
	}
	return termSize(f)
}
