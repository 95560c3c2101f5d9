package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2"
	"go.yaml.in/yaml/v3"

	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
)

// docker-compose.yml's InfluxDB 1.8 as its image would set it up, run
// here without Docker: a real influxd with the service's INFLUXDB_DATA_*
// settings (influxd reads them from its environment, as in the image), the
// database of INFLUXDB_DB, then the statements of the init script the
// service mounts; and sparkpulse with deploy/compose/sparkpulse.toml (its
// ports made free). A Spark line lands in the two-week retention policy,
// the database's default, in shards with the TSI index.
func TestComposeInfluxDBSetup(t *testing.T) {
	var compose struct {
		Services map[string]struct {
			Environment map[string]string `yaml:"environment"`
			Volumes     []string          `yaml:"volumes"`
		} `yaml:"services"`
	}
	b, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &compose); err != nil {
		t.Fatal(err)
	}
	svc := compose.Services["influxdb"]
	var env []string
	for k, v := range svc.Environment {
		if strings.HasPrefix(k, "INFLUXDB_DATA_") {
			env = append(env, k+"="+v)
		}
	}
	var initScript string
	for _, v := range svc.Volumes {
		if src, dst, ok := strings.Cut(strings.TrimSuffix(v, ":ro"), ":"); ok && strings.HasPrefix(dst, "/docker-entrypoint-initdb.d/") {
			initScript = filepath.Join("../..", src)
		}
	}
	db := svc.Environment["INFLUXDB_DB"]
	if len(env) < 3 || initScript == "" || db == "" {
		t.Fatalf("the compose file's influxdb: environment %v, init script %q", svc.Environment, initScript)
	}

	srv := influxtest.Start(t, influxtest.WithEnv(env...))
	srv.Exec(t, "CREATE DATABASE "+fmt.Sprintf("%q", db)) // the image's INFLUXDB_DB
	script, err := os.ReadFile(initScript)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range strings.Split(strings.TrimSpace(string(script)), "\n") {
		srv.Exec(t, stmt)
	}

	// The compose file's sparkpulse settings, as it reads them, with this
	// InfluxDB's address and free ports.
	var cfg config.Config
	conf, err := os.ReadFile("../../deploy/compose/sparkpulse.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := toml.Unmarshal(conf, &cfg); err != nil {
		t.Fatal(err)
	}
	if !cfg.InfluxDB.CreateDatabase || len(cfg.Graphite) == 0 {
		t.Fatalf("deploy/compose/sparkpulse.toml: %+v", cfg)
	}
	cfg.InfluxDB.URL = srv.URL
	for i := range cfg.Graphite {
		cfg.Graphite[i].BindAddress = ""
	}
	s := startSparkpulse(t, cfg)
	now := time.Now().Unix()
	sendTCP(t, s.addr(0), fmt.Sprintf("app-20261122101500-0001.1.executor.cpuTime.count 81234 %d\n", now))
	s.flush()

	rps := srv.Query(t, db, "SHOW RETENTION POLICIES")
	var def []any
	for _, r := range rps[0].Values {
		if r[len(r)-1] == true {
			def = r
		}
	}
	if def == nil || def[0] != "two_weeks" || def[1] != "336h0m0s" {
		t.Fatalf("retention policies %v: want two_weeks, 14 days, the default", rps[0].Values)
	}
	if n := storedValues(t, srv, db, ""); n != 1 {
		t.Errorf("%d values in the default retention policy, want the line's 1", n)
	}
	index, _ := filepath.Glob(filepath.Join(srv.Dir, "data", db, "two_weeks", "*", "index"))
	if len(index) == 0 {
		t.Error("no TSI index in the shards of two_weeks")
	}
	if !slices.ContainsFunc(env, func(kv string) bool { return kv == "INFLUXDB_DATA_MAX_VALUES_PER_TAG=0" }) {
		t.Errorf("the compose file keeps InfluxDB's max-values-per-tag: %v", env)
	}
}

// docs/retention.md's InfluxDB 1.x statements, run as written on a real
// influxd: the database keeps two weeks by default, and the history's
// retention policy 400 days beside it.
func TestRetentionDocStatements(t *testing.T) {
	b, err := os.ReadFile("../../docs/retention.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(b), "```influxql\n")
	block, _, _ = strings.Cut(block, "```")
	if !ok || strings.TrimSpace(block) == "" {
		t.Fatal("docs/retention.md has no influxql block")
	}
	srv := influxtest.Start(t)
	for _, stmt := range strings.Split(strings.TrimSpace(block), "\n") {
		srv.Exec(t, stmt)
	}
	got := map[string]string{}
	for _, s := range srv.Query(t, "spark", "SHOW RETENTION POLICIES") {
		for _, r := range s.Values {
			got[fmt.Sprint(r[0])] = fmt.Sprintf("%v %v", r[1], r[len(r)-1])
		}
	}
	if got["two_weeks"] != "336h0m0s true" || got["year"] != "9600h0m0s false" {
		t.Errorf("retention policies %v", got)
	}
}
