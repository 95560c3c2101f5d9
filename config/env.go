package config

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/pelletier/go-toml/v2"

	"github.com/sparkpulse/sparkpulse/human"
)

// The environment can set every key of the config file, over the file and
// under the flags. A key's variable is SPARKPULSE_, then its section, then
// the key, in upper case with dashes made underscores:
//
//	state-dir                    SPARKPULSE_STATE_DIR
//	[influxdb] url               SPARKPULSE_INFLUXDB_URL
//	[admin] bind-address         SPARKPULSE_ADMIN_BIND_ADDRESS
//	[[graphite]] #N database     SPARKPULSE_GRAPHITE_N_DATABASE
//
// N is a block's position in the file, from 1, as in "[[graphite]] #1" and
// `parse --block 1`; a variable sets a block the file has. Without a config
// file, block 1 is the default listeners (TCP and UDP on one address).
// The list is made from Config's toml tags: envKeys is its one source.
const (
	envPrefix = "SPARKPULSE_"
	EnvConfig = "SPARKPULSE_CONFIG" // the --config flag

	// Exported for the command's flag help. Secrets keep their own order:
	// the variable, then the -file key, then the key in the file (see
	// Plan.secret).
	EnvToken            = "SPARKPULSE_INFLUXDB_TOKEN"
	EnvURL              = "SPARKPULSE_INFLUXDB_URL"
	EnvOrg              = "SPARKPULSE_INFLUXDB_ORG"
	envAnnotatePassword = "SPARKPULSE_ANNOTATE_PASSWORD"
	envAnnotateToken    = "SPARKPULSE_ANNOTATE_TOKEN"
	EnvCreateDatabase   = "SPARKPULSE_INFLUXDB_CREATE_DATABASE"
	EnvAdminBind        = "SPARKPULSE_ADMIN_BIND_ADDRESS"
)

// secretKeys are read from the environment by Plan.secret, not laid over
// the file.
var secretKeys = map[string]bool{"influxdb.token": true, "annotate.password": true, "annotate.token": true}

// envKey is a config key and its variable.
type envKey struct {
	key     string // "influxdb.url"; in a block "graphite.N.database"
	env     string // "SPARKPULSE_INFLUXDB_URL"; "SPARKPULSE_GRAPHITE_N_DATABASE"
	section string // "influxdb", "graphite"; "" at the top
	name    string // "url"
	array   bool   // a key of an array of tables ([[graphite]], [[delta]])
	field   []int  // reflect index path: in Config, then in the block
	typ     reflect.Type
}

// envFor is a block key's variable for block n (from 1).
func (k envKey) envFor(n int) string {
	return strings.Replace(k.env, "_N_", "_"+strconv.Itoa(n)+"_", 1)
}

// keyFor is a block key's origins key for block n.
func (k envKey) keyFor(n int) string {
	return blockKey(k.section, n, k.name)
}

func envName(parts ...string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(strings.Join(parts, "_"), "-", "_"))
}

var envKeys = sync.OnceValue(func() []envKey {
	var keys []envKey
	textU := reflect.TypeFor[encoding.TextUnmarshaler]()
	isValue := func(t reflect.Type) bool {
		return reflect.PointerTo(t).Implements(textU) || t.Kind() != reflect.Struct
	}
	ct := reflect.TypeFor[Config]()
	for i := range ct.NumField() {
		f := ct.Field(i)
		tag := tomlName(f)
		if tag == "" {
			continue
		}
		switch {
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			et := f.Type.Elem()
			for j := range et.NumField() {
				g := et.Field(j)
				if name := tomlName(g); name != "" {
					keys = append(keys, envKey{key: tag + ".N." + name, env: envName(tag, "N", name), section: tag, name: name,
						array: true, field: []int{i, j}, typ: g.Type})
				}
			}
		case isValue(f.Type):
			keys = append(keys, envKey{key: tag, env: envName(tag), name: tag, field: []int{i}, typ: f.Type})
		default:
			for j := range f.Type.NumField() {
				g := f.Type.Field(j)
				if name := tomlName(g); name != "" {
					keys = append(keys, envKey{key: tag + "." + name, env: envName(tag, name), section: tag, name: name,
						field: []int{i, j}, typ: g.Type})
				}
			}
		}
	}
	return keys
})

func tomlName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
	if name == "-" {
		return ""
	}
	return name
}

// sectionKeys are the keys of a section, for keyedErrors.
func sectionKeys(section string) []string {
	var out []string
	for _, k := range envKeys() {
		if k.section == section {
			out = append(out, k.name)
		}
	}
	return out
}

// extraBlocks is how far past the file's blocks variables are looked for,
// to report those that set no block.
const extraBlocks = 8

// applyEnv lays the environment over the file's settings and notes where
// each value came from. defaults says there is no config file: then
// block 1 of [[graphite]] is every default listener. All bad values are
// reported. Secrets are resolved later, with their files (see secret).
func (c *Config) applyEnv(getenv func(string) string, defaults bool) error {
	if c.origins == nil {
		c.origins = origins{}
	}
	var errs []error
	root := reflect.ValueOf(c).Elem()
	for _, k := range envKeys() {
		if secretKeys[k.key] {
			continue
		}
		if !k.array {
			v := getenv(k.env)
			if v == "" {
				continue
			}
			o := origin{env: k.env, value: redactValue(k.key, v)}
			if err := setValue(root.FieldByIndex(k.field), k.key, v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %s: %w", o, describeKey(k.section, k.name), err))
				continue
			}
			c.origins[k.key] = o
			continue
		}
		blocks := root.Field(k.field[0])
		for n := 1; n <= max(blocks.Len(), 1)+extraBlocks; n++ {
			name := k.envFor(n)
			v := getenv(name)
			if v == "" {
				continue
			}
			o := origin{env: name, value: redactValue(k.key, v)}
			targets := []int{n - 1}
			if defaults && k.section == "graphite" {
				targets = nil
				if n == 1 {
					for i := range blocks.Len() {
						targets = append(targets, i)
					}
				}
			}
			if len(targets) == 0 || targets[0] >= blocks.Len() {
				why := "the config file has " + human.Count(blocks.Len(), "block")
				if defaults {
					why = "without a config file, block 1 is the default listeners"
				}
				errs = append(errs, fmt.Errorf("%s: no [[%s]] block #%d (%s)", o, k.section, n, why))
				continue
			}
			for _, i := range targets {
				if err := setValue(blocks.Index(i).Field(k.field[1]), k.key, v); err != nil {
					errs = append(errs, fmt.Errorf("%s: [[%s]] #%d %s: %w", o, k.section, n, k.name, err))
					break
				}
				c.origins[k.keyFor(i+1)] = o
			}
		}
	}
	return errors.Join(errs...)
}

// describeKey names a key as errors do: "[influxdb] url", "state-dir".
func describeKey(section, name string) string {
	if section == "" {
		return name
	}
	return "[" + section + "] " + name
}

// setValue sets a config field from a variable's text, as the file would:
// strings as they are; booleans; integers; durations as ParseDuration
// reads them; lists as a TOML array (["a", "b,c"]) or comma-separated.
func setValue(v reflect.Value, key, raw string) error {
	if key == "admin.bind-address" && raw == "off" {
		raw = "" // as --admin-bind off: a variable cannot be set to ""
	}
	if v.Kind() == reflect.Pointer {
		p := reflect.New(v.Type().Elem())
		if err := setValue(p.Elem(), key, raw); err != nil {
			return err
		}
		v.Set(p)
		return nil
	}
	if u, ok := v.Addr().Interface().(encoding.TextUnmarshaler); ok {
		return u.UnmarshalText([]byte(raw))
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(raw)
	case reflect.Bool:
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return fmt.Errorf("%q: must be true or false", raw)
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(strings.ReplaceAll(raw, "_", ""), 10, 64)
		if err != nil || v.OverflowInt(n) {
			return fmt.Errorf("%q: not an integer", raw)
		}
		v.SetInt(n)
	case reflect.Slice:
		list, err := parseList(raw)
		if err != nil {
			return err
		}
		v.Set(reflect.ValueOf(list))
	case reflect.Interface: // gzip: true, false or "auto"
		if b, err := strconv.ParseBool(raw); err == nil {
			v.Set(reflect.ValueOf(b))
		} else {
			v.Set(reflect.ValueOf(raw))
		}
	default:
		return fmt.Errorf("cannot be set from the environment (%s)", v.Type())
	}
	return nil
}

// parseList reads a list variable: a TOML array, or values separated by
// commas (a template with tags, which hold commas, needs the array).
func parseList(raw string) ([]string, error) {
	if strings.HasPrefix(strings.TrimSpace(raw), "[") {
		var doc struct{ V []string }
		if err := toml.Unmarshal([]byte("v = "+raw), &doc); err != nil {
			return nil, fmt.Errorf("%q: not a TOML array of strings: %v", raw, err)
		}
		return doc.V, nil
	}
	var out []string
	for _, s := range strings.Split(raw, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

// envList is every variable, for the documentation: the key, its variable
// and its type.
func envList() [][3]string {
	out := [][3]string{{"--config", EnvConfig, "path"}}
	for _, k := range envKeys() {
		key := describeKey(k.section, k.name)
		if k.array {
			key = "[[" + k.section + "]] #N " + k.name
		}
		out = append(out, [3]string{key, k.env, typeName(k.typ)})
	}
	return out
}

func typeName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case reflect.TypeFor[Duration](), reflect.TypeFor[SignedDuration]():
		return "duration"
	}
	switch t.Kind() {
	case reflect.Slice:
		return "list"
	case reflect.Interface:
		return "true, false or auto"
	case reflect.Int, reflect.Int64:
		return "integer"
	}
	return t.Kind().String()
}
