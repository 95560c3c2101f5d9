package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/delta"
	"github.com/sparkpulse/sparkpulse/influx"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func noEnv(string) string { return "" }

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// loadFile loads and prepares a config file as `run` does.
func loadFile(t *testing.T, content string, getenv func(string) string) (*Plan, error) {
	t.Helper()
	return Load(&Overrides{Config: writeFile(t, "sparkpulse.toml", content)}, getenv)
}

func TestConfigDefaults(t *testing.T) {
	plan, err := Load(&Overrides{}, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Listeners) != 2 {
		t.Fatalf("default config: %d listeners, want tcp and udp", len(plan.Listeners))
	}
	var names []string
	for _, l := range plan.Listeners {
		names = append(names, l.Name()+"→"+l.Target.Bucket)
		if w, tcp := l.Writer(plan.Influx).WithDefaults(), l.TCP().WithDefaults(); w.BatchSize != 5000 || tcp.MaxLineLength != 64<<10 {
			t.Errorf("%s: batch-size %d, max-line-length %d", l.Name(), w.BatchSize, tcp.MaxLineLength)
		}
	}
	if got, want := strings.Join(names, " "), "tcp://:2003→spark udp://:2003→spark"; got != want {
		t.Errorf("listeners %q, want %q", got, want)
	}
	if in := plan.Influx.WithDefaults(); in.URL != "http://127.0.0.1:8086" || in.Gzip != influx.GzipAuto || plan.AdminAddr != "127.0.0.1:2033" {
		t.Errorf("url %q gzip %v admin %q", in.URL, in.Gzip, plan.AdminAddr)
	}
}

// An influxdb.conf is taken as it is: its other sections are ignored and its
// [[graphite]] block runs with its templates. This one is the CERN Spark
// dashboard's, verbatim.
func TestConfigInfluxDBConf(t *testing.T) {
	conf, err := os.ReadFile("../testdata/cern-spark-dashboard/influxdb.conf")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := loadFile(t, string(conf), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Listeners) != 1 {
		t.Fatalf("%d listeners, want 1", len(plan.Listeners))
	}
	l := plan.Listeners[0]
	if l.Name() != "tcp://:2003" || l.Target.Bucket != "graphite" || l.Config.BatchPending != 10 {
		t.Errorf("listener %s bucket %q batch-pending %d", l.Name(), l.Target.Bucket, l.Config.BatchPending)
	}
	if l.Templates == nil || len(l.Templates.Describe()) < 5 {
		t.Errorf("the block's 5 templates are not compiled: %v", l.Templates)
	}
}

func TestConfigInfluxDBConfDisabledBlock(t *testing.T) {
	// As in influxd, a block without enabled = true does not run, but a bad
	// one still fails validation.
	_, err := loadFile(t, `
[meta]
  dir = "/x"
[[graphite]]
  bind-address = ":2003"
`, noEnv)
	if err == nil || !strings.Contains(err.Error(), "no enabled [[graphite]] block") {
		t.Fatalf("err = %v, want no enabled block", err)
	}
	_, err = loadFile(t, `
[meta]
  dir = "/x"
[[graphite]]
  templates = ["host.cpu"]
`, noEnv)
	if err == nil || !strings.Contains(err.Error(), "no measurement in template `host.cpu`") {
		t.Fatalf("err = %v, want the template error of the disabled block", err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, conf string
		want       []string // each must appear in the error
	}{
		{"unknown key with position", "[influxdb]\nurl = \"http://x:8086\"\ntokn = \"a\"\n",
			[]string{"sparkpulse.toml:3:1", `unknown key "influxdb.tokn"`}},
		{"unknown key in graphite", "[[graphite]]\nbind-adress = \":2003\"\n",
			[]string{"sparkpulse.toml:2:1", `unknown key "graphite.bind-adress"`}},
		{"bad duration", "[[graphite]]\nbatch-timeout = \"soon\"\n",
			[]string{"sparkpulse.toml:2", `"graphite.batch-timeout"`, `invalid duration "soon"`}},
		{"wrong type", "[[graphite]]\nbatch-size = \"many\"\n",
			[]string{"sparkpulse.toml:2", `"graphite.batch-size"`}},
		{"bad protocol", "[[graphite]]\nprotocol = \"sctp\"\n",
			[]string{`sparkpulse.toml:2:1: [[graphite]] #1 (bind-address ":2003")`, `protocol "sctp": must be tcp or udp`}},
		{"bad template names block and position", "[[graphite]]\n[[graphite]]\nbind-address = \":2004\"\ntemplates = [\"a.* measurement\", \"b.* host\"]\n",
			[]string{`[[graphite]] #2 (bind-address ":2004")`, "template 2", "no measurement in template `host`"}},
		{"duplicate filter", "[[graphite]]\ntemplates = [\"a.* measurement\", \"a.* measurement.field\"]\n",
			[]string{"duplicate filter 'a.*' found at position: 1"}},
		{"bad global tag", "[[graphite]]\ntags = [\"region\"]\n",
			[]string{"invalid template tags: 'region'"}},
		{"same address twice", "[[graphite]]\n[[graphite]]\n",
			[]string{`[[graphite]] #2`, "already used by block #1"}},
		{"tcp and udp may share", "[[graphite]]\nprotocol=\"tcp\"\n[[graphite]]\nprotocol=\"udp\"\n[influxdb]\nurl=\"ftp://x\"\n",
			[]string{`sparkpulse.toml:6:1: [influxdb] url "ftp://x": must start with http:// or https://`}},
		{"all problems at once", "[log]\nformat = \"xml\"\nlevel = \"loud\"\n[[graphite]]\nmax-line-length = -1\n",
			[]string{`sparkpulse.toml:2:1: [log] format "xml"`, `sparkpulse.toml:3:1: [log] level "loud"`, "sparkpulse.toml:5:1: [[graphite]] #1", "max-line-length -1"}},
		{"prefixes with templates", "[[graphite]]\ntemplates = [\"measurement*\"]\nspark-prefixes = [\"p\"]\n",
			[]string{"spark-prefixes applies to the built-in Spark mapping only"}},
		{"delta rule without patterns", "[[delta]]\nunit = \"ms\"\n[[graphite]]\n",
			[]string{"sparkpulse.toml:1:1: [[delta]] #1: needs path or measurement patterns"}},
		{"bad delta pattern", "[[delta]]\npath = [\"a.*\"]\n[[delta]]\npath = [\"ok\", \"a.b*\"]\n[[graphite]]\n",
			[]string{`sparkpulse.toml:3:1: [[delta]] #2: path pattern "a.b*": partial wildcard in segment "b*"`}},
		{"negative max-series", "[deltas]\nmax-series = -5\n[[graphite]]\n",
			[]string{"sparkpulse.toml:2:1: [deltas] max-series -5: must be positive"}},
		{"bad gzip", "[influxdb]\ngzip = \"yes\"\n[[graphite]]\n",
			[]string{`[influxdb] gzip yes: must be true, false or "auto"`}},
		{"unknown delta key", "[deltas]\nfirst-sample = \"5s\"\n[[graphite]]\n",
			[]string{"sparkpulse.toml:2:1", `unknown key "deltas.first-sample"`}},
		{"check-peer without REST sources", "[[graphite]]\ncheck-peer = true\n",
			[]string{"[[graphite]] #1 check-peer: needs [annotate] urls"}},
		{"check-peer over UDP", "[annotate]\nurls = [\"http://hs:18080\"]\n[[graphite]]\nprotocol = \"udp\"\ncheck-peer = true\n",
			[]string{"check-peer: UDP has no sender to check"}},
		{"negative max-future", "max-future = \"-1s\"\n[[graphite]]\n",
			[]string{"sparkpulse.toml:1:14", `key "max-future"`, "must not be negative"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadFile(t, tc.conf, noEnv)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

func TestConfigTokenSources(t *testing.T) {
	file := writeFile(t, "token", "from-file\n")
	conf := "[influxdb]\ntoken = \"from-config\"\n[[graphite]]\n"
	fileConf := "[influxdb]\ntoken = \"from-config\"\ntoken-file = \"" + file + "\"\n[[graphite]]\n"
	for _, tc := range []struct {
		name, conf string
		env        map[string]string
		want       string
	}{
		{"config", conf, nil, "from-config"},
		{"file beats config", fileConf, nil, "from-file"},
		{"env beats all", fileConf, map[string]string{EnvToken: "from-env"}, "from-env"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := loadFile(t, tc.conf, envOf(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if plan.Influx.Token != tc.want {
				t.Errorf("token %q, want %q", plan.Influx.Token, tc.want)
			}
		})
	}
	_, err := loadFile(t, "[influxdb]\ntoken-file = \"/nonexistent/token\"\n[[graphite]]\n", noEnv)
	if err == nil || !strings.Contains(err.Error(), "token-file") {
		t.Errorf("missing token file: err = %v", err)
	}
}

func TestConfigFlagsOverride(t *testing.T) {
	path := writeFile(t, "c.toml", "[influxdb]\nurl = \"http://file:8086\"\n[[graphite]]\ndatabase = \"x\"\nretention-policy = \"rp\"\n")
	plan, err := Load(&Overrides{Config: path, InfluxURL: "http://flag:8086", Database: "spark", AdminAddr: "off"},
		envOf(map[string]string{EnvURL: "http://env:8086"}))
	if err != nil {
		t.Fatal(err)
	}
	if plan.Influx.URL != "http://flag:8086" {
		t.Errorf("url %q: flags beat env and file", plan.Influx.URL)
	}
	if got := plan.Listeners[0].Target.Bucket; got != "spark" {
		t.Errorf("bucket %q, want spark (--database replaces database and retention-policy)", got)
	}
	if plan.AdminAddr != "" {
		t.Errorf("admin %q, want off", plan.AdminAddr)
	}
	plan, err = Load(&Overrides{Config: path}, envOf(map[string]string{EnvURL: "http://env:8086"}))
	if err != nil {
		t.Fatal(err)
	}
	if plan.Influx.URL != "http://env:8086" || plan.Listeners[0].Target.Bucket != "x/rp" {
		t.Errorf("url %q bucket %q: env beats file; database/rp makes the bucket", plan.Influx.URL, plan.Listeners[0].Target.Bucket)
	}
	if _, err := Load(&Overrides{Config: path, Bind: ":1"}, noEnv); err == nil {
		t.Error("--bind with --config must be refused")
	}
}

func TestConfigDeltas(t *testing.T) {
	plan, err := Load(&Overrides{}, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Deltas == nil {
		t.Fatal("the delta stage is on by default")
	}
	if s := plan.Deltas.Settings; s.FirstSampleGrace != 20*time.Second || s.IdleTTL != 15*time.Minute || s.MaxSeries != 1_000_000 {
		t.Errorf("default settings %+v", s)
	}
	if cum, _ := plan.Deltas.Rules.Match([]byte("app-1.3.executor.cpuTime.count"), nil); !cum {
		t.Error("built-in Spark rules are on by default")
	}

	plan, err = loadFile(t, `
[deltas]
  first-sample-grace = "0s"
  idle-ttl = "1h"
  spark-rules = false
[[delta]]
  path = ["**.plugin.ch.cern.CgroupMetrics.CPUTimeNanosec"]
  unit = "ns"
[[graphite]]
`, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if s := plan.Deltas.Settings; s.FirstSampleGrace != delta.NoGrace || s.IdleTTL != time.Hour {
		t.Errorf("settings %+v: \"0s\" grace means every first sample is new", s)
	}
	if cum, rule := plan.Deltas.Rules.Match([]byte("app-1.3.plugin.ch.cern.CgroupMetrics.CPUTimeNanosec"), nil); !cum || rule != 0 {
		t.Errorf("own rule: %v, %d", cum, rule)
	}
	if cum, _ := plan.Deltas.Rules.Match([]byte("app-1.3.executor.cpuTime.count"), nil); cum {
		t.Error("spark-rules = false leaves the built-in rules out")
	}

	// An exception before the built-in rules wins over them.
	plan, err = loadFile(t, "[[delta]]\npath = [\"**.executor.cpuTime.count\"]\ncumulative = false\n[[graphite]]\n", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if cum, rule := plan.Deltas.Rules.Match([]byte("app-1.3.executor.cpuTime.count"), nil); cum || rule != 0 {
		t.Errorf("exception: %v, %d", cum, rule)
	}
	if cum, _ := plan.Deltas.Rules.Match([]byte("app-1.3.executor.runTime.count"), nil); !cum {
		t.Error("built-in rules follow the [[delta]] blocks")
	}

	plan, err = loadFile(t, "[deltas]\nenabled = false\n[[delta]]\npath = [\"x\"]\n[[graphite]]\n", noEnv)
	if err != nil || plan.Deltas != nil {
		t.Errorf("enabled = false: deltas %v, err %v", plan.Deltas, err)
	}
	_, err = loadFile(t, "[deltas]\nenabled = false\n[[delta]]\npath = [\"x*\"]\n[[graphite]]\n", noEnv)
	if err == nil || !strings.Contains(err.Error(), `path pattern "x*"`) {
		t.Errorf("rules are validated when the stage is off: err %v", err)
	}
}

// docs/configuration.md's "-1s" for stage-details-min-duration (every stage gets its
// details) is a valid setting, and only there is a duration negative.
func TestConfigStageDetailsEveryStage(t *testing.T) {
	plan, err := loadFile(t, "[annotate]\nurls = [\"http://127.0.0.1:4040\"]\nstage-details-min-duration = \"-1s\"\n[[graphite]]\n", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if got := plan.Annotate.Poller.StageDetailsMinDuration; got != -time.Second {
		t.Errorf("stage-details-min-duration = %s, want -1s", got)
	}
	if _, err := loadFile(t, "[annotate]\nurls = [\"http://127.0.0.1:4040\"]\nusage-delay = \"-1s\"\n[[graphite]]\n", noEnv); err == nil ||
		!strings.Contains(err.Error(), "must not be negative") {
		t.Errorf("a negative usage-delay: %v", err)
	}
}

func TestConfigAnnotate(t *testing.T) {
	plan, err := loadFile(t, `
[annotate]
  urls = ["http://hs:18080", "http://rm:8088/proxy/{app_id}"]
  username = "spark"
  password-file = "`+writeFile(t, "pw", "from-file\n")+`"
[[graphite]]
  database = "spark"
  retention-policy = "week"
`, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	a := plan.Annotate
	if a.Target.Bucket != "spark/week" || a.Poller.Auth.Password != "from-file" ||
		a.Poller.WithDefaults().Interval != 10*time.Second || a.AppIDTag != "applicationid" {
		t.Errorf("plan %+v", a)
	}
	plan, err = loadFile(t, "[annotate]\nurls = [\"http://hs:18080\"]\ntoken = \"in-file\"\nbucket = \"ann\"\n[[graphite]]\n",
		envOf(map[string]string{envAnnotateToken: "from-env"}))
	if err != nil || plan.Annotate.Poller.Auth.Token != "from-env" || plan.Annotate.Target.Bucket != "ann" {
		t.Errorf("env token: %+v, %v", plan.Annotate, err)
	}
	if plan, err = loadFile(t, "[[graphite]]\n", noEnv); err != nil || plan.Annotate != nil {
		t.Errorf("no urls: annotate %+v, %v", plan.Annotate, err)
	}
	for _, tc := range []struct{ conf, want string }{
		{`urls = ["hs:18080"]`, `[annotate] urls entry 1 "hs:18080": must start with http:// or https://`},
		{`urls = ["http://u:p@hs"]`, "must not hold credentials"},
		{"urls = [\"http://hs\"]\nusername = \"u\"\ntoken = \"t\"", "choose basic auth or a bearer token"},
		{"urls = [\"http://hs\"]\npassword = \"p\"", "a password needs a username"},
		{"urls = [\"http://hs\"]\nretention-policy = \"rp\"", "retention-policy needs database"},
		{"urls = [\"http://hs\"]\ninterval = \"100ms\"", "interval 100ms: must be at least 1s"},
		{"urls = [\"http://hs\"]\ntoken-file = \"/nonexistent\"", "[annotate] token-file: open /nonexistent"},
		{"urls = [\"http://hs\"]\nlookbak = \"1h\"", `unknown key "annotate.lookbak"`},
	} {
		_, err := loadFile(t, "[annotate]\n"+tc.conf+"\n[[graphite]]\n", noEnv)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.conf, err, tc.want)
		}
	}
}

// The history's target: none without history-*; a retention policy alone
// is one of the annotations' database; a database or bucket of its own;
// never the annotations' own target, nor, with create-database, a
// retention policy that its creation would make the default of the
// annotations' database. Errors name the key and where it was set.
func TestConfigHistory(t *testing.T) {
	for _, tc := range []struct{ conf, want, err string }{
		{"", "", ""},
		{`history-retention-policy = "year"`, "spark/year", ""},
		{`history-database = "spark_history"`, "spark_history", ""},
		{"history-database = \"h\"\nhistory-retention-policy = \"year\"", "h/year", ""},
		{`history-bucket = "history"`, "history", ""},
		{`history-database = "spark"`, "", `sparkpulse.toml:5:1: [annotate] spark is where the annotations go`},
		{"history-retention-policy = \"year\"\n[influxdb]\ncreate-database = true", "", `[annotate] with create-database, retention policy "year" would be created as the default of database "spark", where the annotations go; create it yourself (CREATE RETENTION POLICY "year" ON "spark" DURATION 0s REPLICATION 1)`},
		{"history-database = \"h\"\nhistory-retention-policy = \"year\"\n[influxdb]\ncreate-database = true", "h/year", ""},
	} {
		plan, err := loadFile(t, "[[graphite]]\n  database = \"spark\"\n[annotate]\nurls = [\"http://hs:18080\"]\n"+tc.conf+"\n", noEnv)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.conf, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.conf, err)
			continue
		}
		got := ""
		if h := plan.Annotate.History; h != nil {
			got = h.Bucket
		}
		if got != tc.want || plan.Annotate.Target.Bucket != "spark" {
			t.Errorf("%q: history %q, annotations %q; want %q", tc.conf, got, plan.Annotate.Target.Bucket, tc.want)
		}
	}
}

// Settings that would put a password in a URL are refused without quoting
// it (cmd/sparkpulse's TestSecretsStayHidden: the running service).
func TestConfigErrorsHideURLCredentials(t *testing.T) {
	for _, bad := range []string{
		"[influxdb]\n  url = \"ftp://admin:SECRET-1@db:8086\"\n[[graphite]]\n",
		"[annotate]\n  urls = [\"http://spark:SECRET-2@hs:18080\"]\n[[graphite]]\n",
		"[annotate]\n  urls = [\"http://spark:SECRET-3@hs:18080/%zz\"]\n[[graphite]]\n",
	} {
		_, err := loadFile(t, bad, noEnv)
		if err == nil {
			t.Errorf("accepted %q", bad)
			continue
		}
		if strings.Contains(err.Error(), "SECRET") {
			t.Errorf("the config error shows a secret:\n%v", err)
		}
	}
}

// The remedy for a missing InfluxDB 1.x database names where
// create-database was set, else what sets it (cmd/sparkpulse's
// TestRunCreateDatabaseHint: in run's error).
func TestConfigCreateDatabaseHint(t *testing.T) {
	file := writeFile(t, "c.toml", "[[graphite]]\n")
	fileFalse := writeFile(t, "f.toml", "[influxdb]\ncreate-database = false\n[[graphite]]\n")
	for _, tc := range []struct {
		o            Overrides
		env          map[string]string
		hint, origin string
	}{
		{Overrides{}, nil, "run with --create-database or set SPARKPULSE_INFLUXDB_CREATE_DATABASE=true", "create-database = true"},
		{Overrides{Config: file}, nil,
			"run with --create-database, set SPARKPULSE_INFLUXDB_CREATE_DATABASE=true, or add create-database = true to [influxdb] in " + file, "create-database = true"},
		{Overrides{Config: fileFalse}, nil, "set create-database = true at " + fileFalse + ":2:1 (it is false)", "create-database = true at " + fileFalse + ":2:1"},
		{Overrides{}, map[string]string{EnvCreateDatabase: "false"},
			"set SPARKPULSE_INFLUXDB_CREATE_DATABASE=true (it is false)", "SPARKPULSE_INFLUXDB_CREATE_DATABASE=false"},
		{Overrides{CreateDatabase: true}, nil, "run with --create-database or set SPARKPULSE_INFLUXDB_CREATE_DATABASE=true", "--create-database"},
	} {
		plan, err := Load(&tc.o, envOf(tc.env))
		if err != nil {
			t.Fatal(err)
		}
		if got := plan.CreateDatabaseHint(); got != tc.hint {
			t.Errorf("%+v %v: hint %q, want %q", tc.o, tc.env, got, tc.hint)
		}
		if got := plan.CreateDatabaseOrigin(); got != tc.origin {
			t.Errorf("%+v %v: origin %q, want %q", tc.o, tc.env, got, tc.origin)
		}
	}
}

// A health check finds the admin endpoint as run would bind it, and says
// where an endpoint that is off was turned off.
func TestConfigAdminAddr(t *testing.T) {
	for _, tc := range []struct {
		o                  Overrides
		env                map[string]string
		wantAddr, wantFrom string
	}{
		{Overrides{}, nil, DefaultAdminAddr, "default config"},
		{Overrides{AdminAddr: "off"}, nil, "", "--admin-bind"},
		{Overrides{}, map[string]string{EnvAdminBind: "off"}, "", EnvAdminBind + "=off"},
		{Overrides{Config: writeFile(t, "c.toml", "[admin]\nbind-address = \"0.0.0.0:9\"\n")}, nil, "0.0.0.0:9", "c.toml:2:1"},
	} {
		addr, from, err := AdminAddr(&tc.o, envOf(tc.env))
		if err != nil || addr != tc.wantAddr || !strings.HasSuffix(from, tc.wantFrom) {
			t.Errorf("%+v %v: %q from %q, %v; want %q from …%q", tc.o, tc.env, addr, from, err, tc.wantAddr, tc.wantFrom)
		}
	}
}
