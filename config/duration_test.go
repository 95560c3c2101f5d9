package config

import (
	"strings"
	"testing"
	"time"
)

func TestDurationParse(t *testing.T) {
	day := 24 * time.Hour
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"90s", 90 * time.Second},
		{"36h", 36 * time.Hour},
		{"7d", 7 * day},
		{"1w", 7 * day},
		{"2w3d", 17 * day},
		{"1d12h", 36 * time.Hour},
		{"1.5d", 36 * time.Hour},
		{"500ms", 500 * time.Millisecond},
		{"1h30m", 90 * time.Minute},
		{"0", 0},
		{"-1s", -time.Second},
		{"+2m", 2 * time.Minute},
	} {
		got, err := ParseDuration(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "1", "1x", "d", "1h30", "7 d", "soon", "1e3s", "--1s", "99999999999w"} {
		if d, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", bad, d)
		} else if !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseDuration(%q): error %q does not quote the input", bad, err)
		}
	}
}

func TestDurationFormat(t *testing.T) {
	for _, tc := range []struct {
		in   time.Duration
		want string
	}{
		{0, "0s"},
		{90 * time.Second, "1m30s"},
		{2 * time.Hour, "2h"},
		{24 * time.Hour, "1d"},
		{36 * time.Hour, "1d12h"},
		{7 * 24 * time.Hour, "7d"},
		{7*24*time.Hour + time.Minute, "7d1m"},
		{-time.Second, "-1s"},
	} {
		got := FormatDuration(tc.in)
		if got != tc.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", tc.in, got, tc.want)
		}
		if back, err := ParseDuration(got); err != nil || back != tc.in {
			t.Errorf("ParseDuration(FormatDuration(%v)) = %v, %v", tc.in, back, err)
		}
	}
}

// The config file takes the same durations as the flags.
func TestDurationInConfig(t *testing.T) {
	plan, err := loadFile(t, "[annotate]\nurls = [\"http://127.0.0.1:4040\"]\nlookback = \"2w3d\"\n[[graphite]]\nbatch-timeout = \"1d\"\n", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if got := plan.Annotate.Poller.Lookback; got != 17*24*time.Hour {
		t.Errorf("lookback %v, want 17 days", got)
	}
	if got := time.Duration(plan.Listeners[0].Config.BatchTimeout); got != 24*time.Hour {
		t.Errorf("batch-timeout %v, want 1 day", got)
	}
}
