package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// durationUnits are the units ParseDuration takes: Go's, then days and
// weeks, which a retention or a look back is written in.
var durationUnits = map[string]time.Duration{
	"ns": time.Nanosecond, "us": time.Microsecond, "µs": time.Microsecond, "μs": time.Microsecond,
	"ms": time.Millisecond, "s": time.Second, "m": time.Minute, "h": time.Hour,
	"d": 24 * time.Hour, "w": 7 * 24 * time.Hour,
}

// durationHelp says what ParseDuration takes, for its errors and flags.
const durationHelp = "a number and a unit (ns, us, ms, s, m, h, d = 24h, w = 7d), several in a row, e.g. 90s, 36h, 7d, 2w3d"

// ParseDuration is the one duration parser of sparkpulse: the config
// file, the environment and the command's flags. It takes what
// time.ParseDuration takes, plus d (24 hours) and w (7 days), in any
// combination: "2w3d", "1d12h", "1.5d". A bare "0" is zero. Written here rather than taken from
// prometheus/common's model.ParseDuration, which has d and w but no
// fractions, ns or us, so that every value time.ParseDuration took before
// (config files written for it: "1.5h", "500us") is still taken.
func ParseDuration(s string) (time.Duration, error) {
	in := s
	bad := func() (time.Duration, error) {
		return 0, fmt.Errorf("invalid duration %q: use %s", in, durationHelp)
	}
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg, s = s[0] == '-', s[1:]
	}
	if s == "0" {
		return 0, nil
	}
	if s == "" {
		return bad()
	}
	var total float64
	for s != "" {
		i := 0
		for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
			i++
		}
		num := s[:i]
		j := i
		for j < len(s) && !(s[j] >= '0' && s[j] <= '9' || s[j] == '.') {
			j++
		}
		unit, ok := durationUnits[s[i:j]]
		if num == "" || !ok {
			return bad()
		}
		f, err := strconv.ParseFloat(num, 64)
		if err != nil {
			return bad()
		}
		total += f * float64(unit)
		s = s[j:]
	}
	if total > math.MaxInt64 {
		return 0, fmt.Errorf("invalid duration %q: longer than %s", in, FormatDuration(math.MaxInt64))
	}
	d := time.Duration(math.Round(total))
	if neg {
		d = -d
	}
	return d, nil
}

// FormatDuration writes d as ParseDuration reads it, days counted out:
// 24h → "1d", 36h → "1d12h", 90s → "1m30s".
func FormatDuration(d time.Duration) string {
	if d < 0 {
		return "-" + FormatDuration(-d)
	}
	day := 24 * time.Hour
	if d < day {
		return trimZeroUnits(d.String())
	}
	days, rest := d/day, d%day
	out := strconv.FormatInt(int64(days), 10) + "d"
	if rest > 0 {
		out += trimZeroUnits(rest.String())
	}
	return out
}

// trimZeroUnits drops the empty minutes and seconds of "12h0m0s".
func trimZeroUnits(s string) string {
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
