package configtest_test

import (
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/config/configtest"
	"github.com/sparkpulse/sparkpulse/delta"
)

func load(t *testing.T, cfg config.Config) *config.Plan {
	t.Helper()
	plan, err := config.Load(&config.Overrides{Config: configtest.Write(t, cfg)}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// TestDefaults: what every test wants, unless the config says otherwise.
func TestDefaults(t *testing.T) {
	plan := load(t, config.Config{Graphite: []config.GraphiteConfig{{}, {Protocol: "udp"}}})
	if !plan.CreateDatabase || plan.AdminAddr != "127.0.0.1:0" || plan.Internal != nil {
		t.Errorf("create-database %v, admin %q, internal %+v", plan.CreateDatabase, plan.AdminAddr, plan.Internal)
	}
	for _, l := range plan.Listeners {
		if l.Config.BindAddress != "127.0.0.1:0" {
			t.Errorf("block %d binds %q", l.Index, l.Config.BindAddress)
		}
	}
	// Zero values are the defaults, as if the keys were absent: not
	// first-sample-grace = "0s", nor max-future = "0s".
	if plan.MaxFuture == 0 || plan.Annotate != nil || plan.Deltas == nil || plan.Deltas.Settings.FirstSampleGrace == delta.NoGrace {
		t.Errorf("max-future %v, annotate %+v, deltas %+v", plan.MaxFuture, plan.Annotate, plan.Deltas)
	}
}

// TestSet: what the config sets is kept, explicit zeros included.
func TestSet(t *testing.T) {
	plan := load(t, config.Config{
		Admin:    config.AdminConfig{BindAddress: new("")},
		Internal: config.InternalConfig{Interval: config.Duration(2 * time.Second)},
		Deltas:   config.DeltaSettings{FirstSampleGrace: new(config.Duration(0))},
		Graphite: []config.GraphiteConfig{{BindAddress: "127.0.0.1:2003"}},
	})
	if plan.AdminAddr != "" || plan.Internal == nil || plan.Internal.Interval != 2*time.Second ||
		plan.Listeners[0].Config.BindAddress != "127.0.0.1:2003" || plan.Deltas.Settings.FirstSampleGrace != delta.NoGrace {
		t.Errorf("admin %q, internal %+v, bind %q, deltas %+v", plan.AdminAddr, plan.Internal, plan.Listeners[0].Config.BindAddress, plan.Deltas.Settings)
	}
}
