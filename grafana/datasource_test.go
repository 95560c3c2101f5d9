package grafana

import (
	"encoding/json"
	"iter"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// decoded returns every generated dashboard as generic JSON, by file name.
func decoded(t *testing.T) map[string]map[string]any {
	t.Helper()
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for name, b := range files {
		var d map[string]any
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = d
	}
	if len(out) < 4 {
		t.Fatalf("%d dashboards", len(out))
	}
	return out
}

func list(v any) []any         { l, _ := v.([]any); return l }
func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }

// panelsOf yields the panels of dashboard d, those of its rows included,
// in order; not the rows.
func panelsOf(d map[string]any) iter.Seq[map[string]any] {
	return func(yield func(map[string]any) bool) {
		var walk func(ps []any) bool
		walk = func(ps []any) bool {
			for _, p := range ps {
				p := obj(p)
				if p["type"] == "row" {
					if !walk(list(p["panels"])) {
						return false
					}
				} else if !yield(p) {
					return false
				}
			}
			return true
		}
		walk(list(d["panels"]))
	}
}

// wantRef is how every reference names the data source: the variable.
func isVarRef(v any) bool {
	m := obj(v)
	return len(m) == 2 && m["type"] == "influxdb" && m["uid"] == "${"+DatasourceVariable+"}"
}

// walk calls f with every key and value of the JSON, nested ones included.
func walk(v any, f func(key string, v any)) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			f(k, e)
			walk(e, f)
		}
	case []any:
		for _, e := range v {
			walk(e, f)
		}
	}
}

// Every panel, panel target, query variable and annotation reads the data
// source variable, the first variable; nothing names a data source uid.
func TestDatasourceReferences(t *testing.T) {
	for name, d := range decoded(t) {
		vars := list(obj(d["templating"])["list"])
		if len(vars) == 0 {
			t.Fatalf("%s: no variables", name)
		}
		first := obj(vars[0])
		if first["type"] != "datasource" || first["name"] != DatasourceVariable || first["query"] != "influxdb" || first["label"] != "Data source" {
			t.Errorf("%s: first variable %v", name, first)
		}
		for _, v := range vars[1:] {
			v := obj(v)
			switch v["type"] {
			case "query":
				if !isVarRef(v["datasource"]) {
					t.Errorf("%s: variable %v: data source %v", name, v["name"], v["datasource"])
				}
			case "datasource":
				t.Errorf("%s: a second data source variable %v", name, v["name"])
			}
		}
		for _, a := range list(obj(d["annotations"])["list"]) {
			if a := obj(a); !isVarRef(a["datasource"]) {
				t.Errorf("%s: annotation %v: data source %v", name, a["name"], a["datasource"])
			}
		}
		panels, targets := 0, 0
		for p := range panelsOf(d) {
			panels++
			if !isVarRef(p["datasource"]) {
				t.Errorf("%s: panel %q: data source %v", name, p["title"], p["datasource"])
			}
			for _, tg := range list(p["targets"]) {
				targets++
				if tg := obj(tg); !isVarRef(tg["datasource"]) {
					t.Errorf("%s: panel %q target %v: data source %v", name, p["title"], tg["refId"], tg["datasource"])
				}
			}
		}
		if panels == 0 || targets < panels {
			t.Errorf("%s: %d panels, %d targets", name, panels, targets)
		}
		// Nothing else names a data source: every "datasource" key is the
		// variable, and the provisioned uid appears nowhere.
		refs := 0
		walk(d, func(k string, v any) {
			if k == "datasource" {
				refs++
				if !isVarRef(v) {
					t.Errorf("%s: data source reference %v", name, v)
				}
			}
			if s, ok := v.(string); ok && strings.Contains(s, DatasourceUID) {
				t.Errorf("%s: %q names the provisioned uid", name, s)
			}
		})
		if refs < panels+targets {
			t.Errorf("%s: %d data source references for %d panels and %d targets", name, refs, panels, targets)
		}
	}
}

var placeholderRE = regexp.MustCompile(`\$\{(DS_\w+)\}`)

// __inputs has the one data source input an import asks for, every
// placeholder is one of them (Grafana refuses an import that lacks one),
// and __requires lists Grafana, InfluxDB and exactly the panels used.
func TestInputsAndRequires(t *testing.T) {
	for name, d := range decoded(t) {
		var in []input
		b, _ := json.Marshal(d["__inputs"])
		if err := json.Unmarshal(b, &in); err != nil {
			t.Fatalf("%s: __inputs: %v", name, err)
		}
		if len(in) != 1 || in[0].Name != DatasourceInput || in[0].Type != "datasource" || in[0].PluginID != "influxdb" ||
			in[0].PluginName != "InfluxDB" || in[0].Label == "" {
			t.Errorf("%s: __inputs %+v", name, in)
		}
		used := map[string]bool{}
		body := maps.Clone(d)
		delete(body, "__inputs")
		walk(body, func(_ string, v any) {
			if s, ok := v.(string); ok {
				for _, m := range placeholderRE.FindAllStringSubmatch(s, -1) {
					used[m[1]] = true
				}
			}
		})
		if !used[DatasourceInput] || len(used) != 1 {
			t.Errorf("%s: placeholders used %v, inputs %+v", name, used, in)
		}

		var reqs []require
		b, _ = json.Marshal(d["__requires"])
		if err := json.Unmarshal(b, &reqs); err != nil {
			t.Fatalf("%s: __requires: %v", name, err)
		}
		types := map[string]bool{}
		for p := range panelsOf(d) {
			types[p["type"].(string)] = true
		}
		got := map[string]bool{}
		for _, r := range reqs {
			switch {
			case r.Type == "grafana" && r.ID == "grafana" && r.Version == grafanaVersion,
				r.Type == "datasource" && r.ID == "influxdb",
				r.Type == "panel" && types[r.ID] && r.Name != "":
				got[r.Type+"/"+r.ID] = true
			default:
				t.Errorf("%s: __requires %+v", name, r)
			}
		}
		if len(got) != 2+len(types) || !got["grafana/grafana"] || !got["datasource/influxdb"] {
			t.Errorf("%s: __requires %+v for panels %v", name, reqs, types)
		}
		if !slices.IsSortedFunc(reqs, func(a, b require) int { return strings.Compare(a.ID, b.ID) }) {
			t.Errorf("%s: __requires not sorted by id as Grafana writes it: %+v", name, reqs)
		}
		if d["schemaVersion"] != float64(schemaVersion) {
			t.Errorf("%s: schemaVersion %v", name, d["schemaVersion"])
		}
	}
}

// option is a data source as a datasource variable lists it.
type option struct{ name, uid string }

// selectDatasource is the data source a datasource variable saved with
// current ends up on, given the data sources of its plugin: in scenes
// (Grafana 11.3 on), the option whose uid is the saved value, else the one
// whose name is the saved text; in the older variable code (byValue false)
// the one whose name is the text; else the first.
func selectDatasource(current map[string]any, options []option, byValue bool) string {
	if byValue {
		for _, o := range options {
			if o.uid == current["value"] {
				return o.uid
			}
		}
	}
	for _, o := range options {
		if o.name == current["text"] {
			return o.uid
		}
	}
	return options[0].uid
}

// evalImport does what Grafana's import does with the inputs given
// (pkg/services/dashboardimport/utils/dash_template_evaluator.go): every
// ${<input>} in every string is replaced, other ${...} kept, __inputs
// dropped.
func evalImport(v any, inputs map[string]string) any {
	switch v := v.(type) {
	case string:
		return regexp.MustCompile(`\$\{.+?\}`).ReplaceAllStringFunc(v, func(m string) string {
			if r, ok := inputs[m[2:len(m)-1]]; ok {
				return r
			}
			return m
		})
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			if k != "__inputs" {
				out[k] = evalImport(e, inputs)
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = evalImport(e, inputs)
		}
		return out
	}
	return v
}

// Loaded as it is (file provisioning, the sidecar, /api/dashboards/db),
// a dashboard reads the provisioned data source even where another
// InfluxDB data source sorts before it, and the first InfluxDB data source
// where none has the provisioned name. Imported, it reads the data source
// picked for its input.
func TestDatasourceDefault(t *testing.T) {
	var provisioned []option
	var sets [][]option // each file's data sources
	for _, f := range provisioningFiles {
		var ds struct {
			Datasources []struct{ Name, UID string } `yaml:"datasources"`
		}
		readYAML(t, f, &ds)
		var set []option
		for _, d := range ds.Datasources {
			set = append(set, option{d.Name, d.UID})
		}
		provisioned = append(provisioned, set...)
		sets = append(sets, set)
	}
	other := option{"A team's InfluxDB", "team-influxdb"}
	for name, d := range decoded(t) {
		current := obj(obj(list(obj(d["templating"])["list"])[0])["current"])
		want := DatasourceUID
		if filepath.Base(name) == HistoryDashboardFile {
			want = HistoryDatasourceUID
		}
		for _, set := range sets {
			for _, byValue := range []bool{true, false} {
				if got := selectDatasource(current, append([]option{other}, set...), byValue); got != want {
					t.Errorf("%s: provisioned, scenes %v: %q, want %q", name, byValue, got, want)
				}
			}
		}
		if got := selectDatasource(current, []option{other, {"InfluxDB", "influx"}}, true); got != other.uid {
			t.Errorf("%s: without the provisioned data source: %q, want the first, %q", name, got, other.uid)
		}

		picked := option{"Picked", "picked-uid"}
		imported := obj(evalImport(d, map[string]string{DatasourceInput: picked.uid}))
		if _, ok := imported["__inputs"]; ok {
			t.Errorf("%s: __inputs kept", name)
		}
		vars := list(obj(imported["templating"])["list"])
		cur := obj(obj(vars[0])["current"])
		if got := selectDatasource(cur, []option{other, provisioned[0], picked}, true); got != picked.uid {
			t.Errorf("%s: imported with %q: %q", name, picked.uid, got)
		}
		walk(imported, func(k string, v any) {
			if s, ok := v.(string); ok && placeholderRE.MatchString(s) {
				t.Errorf("%s: imported, %q left", name, s)
			}
			if k == "datasource" && !isVarRef(v) {
				t.Errorf("%s: imported, data source reference %v", name, v)
			}
		})
		// The newer import (import/transform.ts) sets a datasource
		// variable whose value is "${<input>}" to the picked data source.
		if v, _ := current["value"].(string); v != "${"+DatasourceInput+"}" {
			t.Errorf("%s: variable's value %q is not the input's placeholder", name, v)
		}
	}
}
