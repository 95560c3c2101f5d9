package main

import (
	"time"

	"github.com/sparkpulse/sparkpulse/config"
)

// durationFlag is a duration flag read by config.ParseDuration, so that
// flags take the durations the config file takes ("7d", "2w3d").
type durationFlag struct{ d *time.Duration }

func newDurationFlag(p *time.Duration, def time.Duration) *durationFlag {
	*p = def
	return &durationFlag{p}
}

func (f *durationFlag) Set(s string) error {
	d, err := config.ParseDuration(s)
	if err != nil {
		return err
	}
	*f.d = d
	return nil
}

// String is "0" for zero, which pflag takes for "no default".
func (f *durationFlag) String() string {
	if f.d == nil || *f.d == 0 {
		return "0"
	}
	return config.FormatDuration(*f.d)
}
func (f *durationFlag) Type() string { return "duration" }
