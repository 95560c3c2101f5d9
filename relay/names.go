package relay

import (
	"fmt"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sparkpulse/sparkpulse/templates"
)

// Metric names are bounded. Anyone who reaches the port can send a new
// name with every line, and each becomes a field (wide schema) or a
// measurement that InfluxDB keeps for good and that slows every write
// after it: a million names in seconds held every application's points
// back for minutes. So, at a path's first line (the series cache holds
// the answer):
//
//   - A name (measurement or field) with a control or format character
//     (U+202E, zero-width, BOM) or over maxNameLen bytes is refused: no
//     Spark metric has one.
//   - A name the mapping knows real Spark sends (spark.Mapper.Known) is
//     never refused by what follows: no flood takes Spark's own metrics
//     away.
//   - Any other name is kept once the block holds it (names, at most
//     MaxNames); a name new to the block counts to the application that
//     brought it (the AppTag value; with the built-in mapping, "" for
//     paths of no application), at most MaxNamesPerApp each: one
//     application's flood stops there, and the others' names still fit.
//     With the user's templates, a point of no application is bounded by
//     the block's table alone. Names and counts older than namesTTL are
//     forgotten when the table is full.
//
// Refused paths are counted as dropped lines, reason "names".

// The bounds on names (see above).
const (
	maxNameLen     = 256
	MaxNames       = 16384 // names no Spark sends, per block
	MaxNamesPerApp = 1024  // of them, brought by one application
	namesTTL       = 24 * time.Hour
)

// knower is a Mapper that knows which names real Spark sends.
type knower interface {
	Known(r *templates.Result) bool
}

// nameGuard is a block's table of names (see above).
type nameGuard struct {
	max, perApp int // MaxNames, MaxNamesPerApp
	mu          sync.Mutex
	names       map[string]time.Time // name → when it was first kept
	apps        map[string]*appNames
	forgot      time.Time // the last forget: a full table is swept at most once a minute
}

type appNames struct {
	n     int
	since time.Time
}

func newNameGuard(max, perApp int) *nameGuard {
	return &nameGuard{max: max, perApp: perApp, names: map[string]time.Time{}, apps: map[string]*appNames{}}
}

// check says why r's name may not be written by application app, "" when
// it may.
func (g *nameGuard) check(r *templates.Result, app []byte, known func(*templates.Result) bool, now time.Time) string {
	for _, n := range [][]byte{r.Measurement, r.Field} {
		if why := badName(n); why != "" {
			return why
		}
	}
	if known != nil && known(r) {
		return ""
	}
	var b [160]byte
	key := string(append(append(append(b[:0], r.Measurement...), '\t'), r.Field...))
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.names[key]; ok {
		return ""
	}
	if len(g.names) >= g.max {
		g.forget(now)
	}
	if len(g.names) >= g.max {
		return fmt.Sprintf("metric name %q new to the block, which holds %d names no Spark sends already", shorten(key), g.max)
	}
	if len(app) == 0 && known == nil {
		// A block of the user's templates, and a point of no
		// application: only the block's table bounds its names.
		g.names[key] = now
		return ""
	}
	a := g.apps[string(app)]
	if a == nil {
		if len(g.apps) >= g.max {
			g.forget(now)
		}
		if len(g.apps) >= g.max {
			return fmt.Sprintf("metric name %q new to the block, from an application past the %d the block counts", shorten(key), g.max)
		}
		a = &appNames{since: now}
		g.apps[string(app)] = a
	}
	if a.n >= g.perApp {
		return fmt.Sprintf("metric name %q new to the block: application %q has brought %d names no Spark sends already", shorten(key), app, g.perApp)
	}
	a.n++
	g.names[key] = now
	return ""
}

// forget drops the names and application counts older than namesTTL, at
// most once a minute: while the table is full, each new name would sweep
// it. Called with mu held.
func (g *nameGuard) forget(now time.Time) {
	if now.Sub(g.forgot) < time.Minute {
		return
	}
	g.forgot = now
	for k, t := range g.names {
		if now.Sub(t) > namesTTL {
			delete(g.names, k)
		}
	}
	for k, a := range g.apps {
		if now.Sub(a.since) > namesTTL {
			delete(g.apps, k)
		}
	}
}

// badName says why n is no metric name, "" when it may be one.
func badName(n []byte) string {
	if len(n) > maxNameLen {
		return fmt.Sprintf("metric name of %d bytes, over %d", len(n), maxNameLen)
	}
	for i := 0; i < len(n); {
		c, size := utf8.DecodeRune(n[i:])
		if unicode.Is(unicode.Cc, c) || unicode.Is(unicode.Cf, c) {
			return fmt.Sprintf("metric name %q has the control or format character %U", n, c)
		}
		i += size
	}
	return ""
}

// shorten cuts a name for a message.
func shorten(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
