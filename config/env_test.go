package config

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// Every key of Config has a variable by the scheme, and setting it takes
// effect, with the variable as the value's origin.
func TestEnvEveryKey(t *testing.T) {
	keys := envKeys()
	if len(keys) < 80 {
		t.Fatalf("only %d keys found in Config", len(keys))
	}
	scheme := regexp.MustCompile(`^SPARKPULSE_[A-Z0-9_]+$`)
	seen := map[string]string{}
	for _, k := range keys {
		if !scheme.MatchString(k.env) {
			t.Errorf("%s: variable %q", k.key, k.env)
		}
		want := "SPARKPULSE_" + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(k.key))
		if k.env != want {
			t.Errorf("%s: variable %q, want %q", k.key, k.env, want)
		}
		if prev, ok := seen[k.env]; ok {
			t.Errorf("%s and %s share %s", prev, k.key, k.env)
		}
		seen[k.env] = k.key
	}
	// The names that were read before the scheme are its names.
	for _, name := range []string{EnvToken, EnvURL, EnvOrg, envAnnotatePassword, envAnnotateToken, EnvCreateDatabase, EnvAdminBind} {
		if _, ok := seen[name]; !ok {
			t.Errorf("%s is not in the scheme", name)
		}
	}
	// Every field of every section is a key.
	fields := 0
	ct := reflect.TypeFor[Config]()
	for i := range ct.NumField() {
		f := ct.Field(i)
		if !f.IsExported() {
			continue
		}
		switch ft := f.Type; {
		case ft.Kind() == reflect.Struct && ft != reflect.TypeFor[Duration]():
			fields += ft.NumField()
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			fields += ft.Elem().NumField()
		default:
			fields++
		}
	}
	if fields != len(keys) {
		t.Errorf("%d fields in Config, %d keys with a variable", fields, len(keys))
	}

	file := writeFile(t, "c.toml", "[[delta]]\npath = [\"a.b\"]\n[[graphite]]\n")
	base, _, err := loadLayers(&Overrides{Config: file}, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	root := reflect.ValueOf(base).Elem()
	for _, k := range keys {
		name, key := k.env, k.key
		if k.array {
			name, key = k.envFor(1), k.keyFor(1)
		}
		t.Run(name, func(t *testing.T) {
			if secretKeys[k.key] {
				return // TestEnvSecrets
			}
			value := sampleValue(k)
			cfg, _, err := loadLayers(&Overrides{Config: file}, envOf(map[string]string{name: value}))
			if err != nil {
				t.Fatalf("%s=%s: %v", name, value, err)
			}
			got, was := field(reflect.ValueOf(cfg).Elem(), k), field(root, k)
			if reflect.DeepEqual(got.Interface(), was.Interface()) {
				t.Errorf("%s=%s: %s is still %v", name, value, key, got)
			}
			if o := cfg.origins[key]; o.env != name {
				t.Errorf("%s=%s: origin of %s is %q", name, value, key, o)
			}
		})
	}
}

// field is key k's value in cfg (block 1 for block keys).
func field(cfg reflect.Value, k envKey) reflect.Value {
	if k.array {
		return cfg.Field(k.field[0]).Index(0).Field(k.field[1])
	}
	return cfg.FieldByIndex(k.field)
}

// sampleValue is a valid value for a key's type that is not its zero.
func sampleValue(k envKey) string {
	t := k.typ
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeFor[SignedDuration]():
		return "-1s"
	case t == reflect.TypeFor[Duration]():
		return "7d"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true"
	case reflect.Int, reflect.Int64:
		return "12345"
	case reflect.Slice:
		return `["a.b", "c d,e=f"]`
	case reflect.Interface:
		return "false"
	}
	return "127.0.0.1:1"
}

func TestEnvSecrets(t *testing.T) {
	plan, err := Load(&Overrides{}, envOf(map[string]string{EnvToken: "t0k", envAnnotateToken: "a-t0k",
		"SPARKPULSE_ANNOTATE_URLS": "http://127.0.0.1:18080"}))
	if err != nil {
		t.Fatal(err)
	}
	if plan.Influx.Token != "t0k" || plan.Annotate.Poller.Auth.Token != "a-t0k" {
		t.Errorf("tokens %q %q", plan.Influx.Token, plan.Annotate.Poller.Auth.Token)
	}
}

func TestEnvOverrides(t *testing.T) {
	file := writeFile(t, "c.toml", "state-dir = \"/file\"\n[influxdb]\nurl = \"http://file:8086\"\n[[graphite]]\nbind-address = \"127.0.0.1:0\"\ndatabase = \"x\"\n[[graphite]]\nbind-address = \"127.0.0.1:0\"\nprotocol = \"udp\"\n")
	env := map[string]string{
		"SPARKPULSE_STATE_DIR":              "/env",
		"SPARKPULSE_INFLUXDB_URL":           "http://env:8086",
		"SPARKPULSE_INFLUXDB_TIMEOUT":       "1m",
		"SPARKPULSE_INFLUXDB_GZIP":          "false",
		"SPARKPULSE_ADMIN_BIND_ADDRESS":     "off",
		"SPARKPULSE_LOG_LEVEL":              "debug",
		"SPARKPULSE_GRAPHITE_2_DATABASE":    "y",
		"SPARKPULSE_GRAPHITE_1_TEMPLATES":   `["a.* measurement.field host=x,region=y"]`,
		"SPARKPULSE_DELTAS_SPARK_RULES":     "false",
		"SPARKPULSE_ANNOTATE_URLS":          "http://hs:18080, http://rm:8088/proxy/{app_id}",
		"SPARKPULSE_INTERNAL_ENABLED":       "false",
		"SPARKPULSE_INFLUXDB_MAX_IN_FLIGHT": "3",
	}
	plan, err := Load(&Overrides{Config: file, LogLevel: "warn"}, envOf(env))
	if err != nil {
		t.Fatal(err)
	}
	if plan.StateDir != "/env" || plan.Influx.URL != "http://env:8086" || plan.Influx.RequestTimeout != time.Minute ||
		plan.Influx.Gzip != "off" || plan.AdminAddr != "" || plan.Influx.MaxInFlight != 3 || plan.Internal != nil {
		t.Errorf("plan %+v", plan)
	}
	if plan.Log.Level != "warn" {
		t.Errorf("log level %q: the flag beats the environment", plan.Log.Level)
	}
	if plan.Listeners[0].Target.Bucket != "x" || plan.Listeners[1].Target.Bucket != "y" {
		t.Errorf("buckets %q %q", plan.Listeners[0].Target.Bucket, plan.Listeners[1].Target.Bucket)
	}
	if plan.Listeners[0].Templates == nil || !slices.Equal(plan.Listeners[0].Config.Templates, []string{"a.* measurement.field host=x,region=y"}) {
		t.Errorf("templates %q", plan.Listeners[0].Config.Templates)
	}
	if got := plan.Annotate.Poller.Sources; !slices.Equal(got, []string{"http://hs:18080", "http://rm:8088/proxy/{app_id}"}) {
		t.Errorf("annotate urls %q", got)
	}
	if cum, _ := plan.Deltas.Rules.Match([]byte("app-1.3.executor.cpuTime.count"), nil); cum {
		t.Error("SPARKPULSE_DELTAS_SPARK_RULES=false left the built-in rules in")
	}

	// Without a file, block 1 is the default listeners, TCP and UDP.
	plan, err = Load(&Overrides{}, envOf(map[string]string{"SPARKPULSE_GRAPHITE_1_DATABASE": "metrics", "SPARKPULSE_GRAPHITE_1_BIND_ADDRESS": "127.0.0.1:0"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range plan.Listeners {
		if l.Target.Bucket != "metrics" || l.Config.BindAddress != "127.0.0.1:0" {
			t.Errorf("default listener %s: bucket %q", l.Name(), l.Target.Bucket)
		}
	}

	// The config file's name.
	plan, err = Load(&Overrides{}, envOf(map[string]string{EnvConfig: file}))
	if err != nil || plan.Source != file || plan.StateDir != "/file" {
		t.Errorf("%s: source %q state-dir %q, %v", EnvConfig, plan.Source, plan.StateDir, err)
	}
}

// Every error starts with where the bad value came from: file:line:col,
// VARIABLE=value or --flag; and all of them are reported at once.
func TestConfigOrigins(t *testing.T) {
	file := writeFile(t, "c.toml", "[influxdb]\nurl = \"localhost:8086\"\n[log]\nformat = \"xml\"\n[[graphite]]\nbind-address = \"127.0.0.1:0\"\nprotocol = \"sctp\"\n")
	for _, tc := range []struct {
		name string
		o    Overrides
		env  map[string]string
		want []string
		not  []string
	}{
		{"file", Overrides{Config: file}, nil,
			[]string{`c.toml:2:1: [influxdb] url "localhost:8086": must start with http://`, `c.toml:4:1: [log] format "xml"`,
				`c.toml:7:1: [[graphite]] #1 (bind-address "127.0.0.1:0"): protocol "sctp"`}, nil},
		{"env", Overrides{Config: file}, map[string]string{EnvURL: "localhost:8087", "SPARKPULSE_LOG_LEVEL": "loud", "SPARKPULSE_GRAPHITE_1_PROTOCOL": "quic"},
			[]string{`SPARKPULSE_INFLUXDB_URL=localhost:8087: [influxdb] url "localhost:8087"`, `SPARKPULSE_LOG_LEVEL=loud: [log] level "loud"`,
				`SPARKPULSE_GRAPHITE_1_PROTOCOL=quic: [[graphite]] #1 (bind-address "127.0.0.1:0"): protocol "quic"`, `c.toml:4:1: [log] format "xml"`},
			[]string{`c.toml:2:1`}},
		{"flags", Overrides{Config: file, InfluxURL: "localhost:8088", LogFormat: "yaml"}, map[string]string{EnvURL: "localhost:8087"},
			[]string{`--influxdb-url: [influxdb] url "localhost:8088"`, `--log-format: [log] format "yaml"`}, []string{"SPARKPULSE_INFLUXDB_URL"}},
		{"no file", Overrides{}, map[string]string{"SPARKPULSE_INFLUXDB_MAX_IN_FLIGHT": "many", "SPARKPULSE_DELTAS_IDLE_TTL": "soon", "SPARKPULSE_GRAPHITE_2_DATABASE": "x"},
			[]string{`SPARKPULSE_INFLUXDB_MAX_IN_FLIGHT=many: [influxdb] max-in-flight: "many": not an integer`,
				`SPARKPULSE_DELTAS_IDLE_TTL=soon: [deltas] idle-ttl: invalid duration "soon"`,
				`SPARKPULSE_GRAPHITE_2_DATABASE=x: no [[graphite]] block #2`}, nil},
		{"url credentials hidden", Overrides{}, map[string]string{EnvURL: "ftp://u:secret@h:8086"},
			[]string{`SPARKPULSE_INFLUXDB_URL=`}, []string{"secret"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(&tc.o, envOf(tc.env))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\ndoes not contain %q", err, w)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\ncontains %q", err, w)
				}
			}
		})
	}
}

// Bad values the decoder meets are all reported, with those found after
// decoding.
func TestConfigAllErrorsAtOnce(t *testing.T) {
	_, err := loadFile(t, `[influxdb]
max-in-flight = "four"
[deltas]
idle-ttl = "soon"
[[graphite]]
batch-size = "many"
protocol = "sctp"
[annotate]
intervl = "1m"
`, noEnv)
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range []string{"sparkpulse.toml:2:", `"influxdb.max-in-flight"`, "sparkpulse.toml:4:", `invalid duration "soon"`,
		"sparkpulse.toml:6:", `"graphite.batch-size"`, "sparkpulse.toml:9:1", `unknown key "annotate.intervl"`,
		`sparkpulse.toml:7:1: [[graphite]] #1 (bind-address ":2003"): protocol "sctp"`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error\n%v\ndoes not contain %q", err, w)
		}
	}
}

func TestConfigVars(t *testing.T) {
	env := envOf(map[string]string{"DB": "spark_prod", "PORT": "2004", "QUOTED": `a"b\c`, "SIZE": "5000"})
	plan, err := loadFile(t, `# ${NOT_EXPANDED} in a comment
[[graphite]]
bind-address = "127.0.0.1:${PORT}"
database = "${DB}"  # ${ALSO_NOT}
retention-policy = "${RP:-autogen}"
batch-size = ${SIZE}
tags = ["cost=$$5", "q=${QUOTED}", 'lit=${DB}']
`, env)
	if err != nil {
		t.Fatal(err)
	}
	g := plan.Listeners[0].Config
	if g.BindAddress != "127.0.0.1:2004" || plan.Listeners[0].Target.Bucket != "spark_prod/autogen" || g.BatchSize != 5000 {
		t.Errorf("block %+v, bucket %q", g, plan.Listeners[0].Target.Bucket)
	}
	if want := []string{"cost=$5", `q=a"b\c`, "lit=spark_prod"}; !slices.Equal(g.Tags, want) {
		t.Errorf("tags %q, want %q", g.Tags, want)
	}

	for _, tc := range []struct{ conf, want string }{
		{"[[graphite]]\ndatabase = \"${MISSING}\"\n", "sparkpulse.toml:2:13: ${MISSING}: the variable is not set"},
		{"[[graphite]]\ndatabase = \"${9X}\"\n", "${9X}: not a variable name"},
		{"[[graphite]]\ndatabase = \"${DB\"\n", "sparkpulse.toml:2:13: ${ without a closing }"},
		{"[[graphite]]\ndatabase = '${QUOTED}'\n", `${QUOTED}: its value holds a '`},
	} {
		_, err := loadFile(t, tc.conf, envOf(map[string]string{"QUOTED": "it's"}))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.conf, err, tc.want)
		}
	}
	// Every unset variable at once.
	_, err = loadFile(t, "[[graphite]]\ndatabase = \"${A}\"\nbucket = \"${B}\"\n", noEnv)
	if err == nil || !strings.Contains(err.Error(), "${A}") || !strings.Contains(err.Error(), "${B}") {
		t.Errorf("two unset variables: %v", err)
	}
	// A bad value that came through a variable says so.
	_, err = loadFile(t, "[[graphite]]\nprotocol = \"${P}\"\n", envOf(map[string]string{"P": "sctp"}))
	if err == nil || !strings.Contains(err.Error(), "sparkpulse.toml:2:1 (${P}): [[graphite]] #1") {
		t.Errorf("bad value from a variable: %v", err)
	}
}

// The generated list of variables, for the documentation:
// go test -run TestEnvList -v ./config
func TestEnvList(t *testing.T) {
	var b strings.Builder
	fmt.Fprintln(&b, "| key | variable | type |\n| --- | --- | --- |")
	for _, e := range envList() {
		fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", e[0], e[1], e[2])
	}
	if !strings.Contains(b.String(), "`SPARKPULSE_GRAPHITE_N_BIND_ADDRESS`") {
		t.Errorf("list:\n%s", b.String())
	}
	t.Log("\n" + b.String())
}
