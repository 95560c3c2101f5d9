// Package configtest writes sparkpulse config files for tests that start
// sparkpulse, in-process or as the built binary. A test builds a
// config.Config in code, holding what the test is about, and Write adds
// what every test wants and writes the file `sparkpulse run --config`
// reads.
//
// Unless cfg says otherwise, the file has the admin endpoint and every
// [[graphite]] block on 127.0.0.1 port 0, so that no port is picked
// beforehand for another process to take (the test learns the ports bound
// from run --ready-file or from the pipeline); the databases created
// (create-database = true, always); and sparkpulse's own metrics off
// unless cfg sets something in [internal], so that the databases hold only
// what the test sends.
//
// Every field is written, a zero value as the key's zero ("", 0, "0s"),
// which config reads as the key being absent: its default. Where the zero
// is not the default, the field is a pointer, and nil leaves the key out:
// an explicit zero such as first-sample-grace = "0s" or enabled = false is
// a pointer to it (new(false), new(config.Duration(0))).
package configtest

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pelletier/go-toml/v2"

	"github.com/sparkpulse/sparkpulse/config"
)

// Write writes cfg, with the defaults of the package comment, as
// sparkpulse.toml in a temporary directory of tb and returns its path.
func Write(tb testing.TB, cfg config.Config) string {
	tb.Helper()
	cfg.InfluxDB.CreateDatabase = true
	if cfg.Admin.BindAddress == nil {
		cfg.Admin.BindAddress = new("127.0.0.1:0")
	}
	if cfg.Internal == (config.InternalConfig{}) {
		cfg.Internal.Enabled = new(false)
	}
	cfg.Graphite = slices.Clone(cfg.Graphite)
	for i := range cfg.Graphite {
		if cfg.Graphite[i].BindAddress == "" {
			cfg.Graphite[i].BindAddress = "127.0.0.1:0"
		}
	}
	b, err := toml.Marshal(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(tb.TempDir(), "sparkpulse.toml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}
