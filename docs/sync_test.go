package docs

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

// The documentation names every config key, measurement, tag and field
// the code has, and nothing the code does not have. Each set of names is
// read from its single source in the code, and from one place in docs/:
//
//   - config keys: the toml tags of type Config in package config and
//     the types it nests, against the first column of the tables headed "key"
//     in configuration.md (`section.key`, `[[graphite]]` keys as
//     `graphite.key`), each with its environment variable in the column
//     "variable" as the scheme names it (see envVar); every ```toml
//     example anywhere in the docs may use only keys the code has;
//   - annotation measurements, their tags and fields: the encoders of
//     package annotate (see annotateSchema), against the index tables of
//     schema.md headed "measurement" (names in backticks; `<x>` stands for
//     any text);
//   - the built-in Spark mapping's tags and fields, and sparkpulse's own
//     metrics' fields: their sources in spark, relay and selfmetrics.

// nameSet is a set of names; a name may hold "*", which stands for any
// text (written `<metric>` in the docs).
type nameSet map[string]bool

func (s nameSet) sorted() []string {
	var out []string
	for k := range s {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// compareNames returns what the code has and the docs lack, and what the
// docs name and the code lacks.
func compareNames(code, docs nameSet) (undocumented, unknown []string) {
	for _, k := range code.sorted() {
		if !docs[k] {
			undocumented = append(undocumented, k)
		}
	}
	for _, k := range docs.sorted() {
		if !code[k] {
			unknown = append(unknown, k)
		}
	}
	return undocumented, unknown
}

// reportNames fails t with both differences, naming what and where.
func reportNames(t *testing.T, what, docsWhere string, code, docs nameSet) {
	t.Helper()
	undocumented, unknown := compareNames(code, docs)
	if len(undocumented) > 0 {
		t.Errorf("%s in the code but not in %s: %s", what, docsWhere, strings.Join(undocumented, ", "))
	}
	if len(unknown) > 0 {
		t.Errorf("%s in %s but not in the code: %s", what, docsWhere, strings.Join(unknown, ", "))
	}
}

// docName turns a documented name into a nameSet key: `<…>` becomes "*".
func docName(s string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '<')
		j := strings.IndexByte(s, '>')
		if i < 0 || j < i {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		b.WriteByte('*')
		s = s[j+1:]
	}
}

// tablesHeaded returns the tables of f whose first header cell is first.
func tablesHeaded(f *mdFile, first string) []mdTable {
	var out []mdTable
	for _, tb := range f.tables {
		if len(tb.header) > 0 && strings.EqualFold(strings.TrimSpace(tb.header[0].text), first) {
			out = append(out, tb)
		}
	}
	return out
}

// column returns the index of the header cell named name, or -1.
func (tb mdTable) column(name string) int {
	for i, c := range tb.header {
		if strings.EqualFold(strings.TrimSpace(c.text), name) {
			return i
		}
	}
	return -1
}

// ---- config keys ----

// configKeys reads the keys of type Config from the Go source in dir:
// `section.key` for a key of a nested table or array of tables. blocks
// are the sections that are arrays of tables ([[graphite]], [[delta]]).
func configKeys(dir string) (keys, blocks nameSet, err error) {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, nil, err
	}
	structs := map[string]*ast.StructType{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, nil, err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok {
				if st, ok := ts.Type.(*ast.StructType); ok {
					structs[ts.Name.Name] = st
				}
			}
			return true
		})
	}
	root, ok := structs["Config"]
	if !ok {
		return nil, nil, fmt.Errorf("no type Config in %s", dir)
	}
	keys, blocks = nameSet{}, nameSet{}
	var walk func(st *ast.StructType, prefix string, depth int) error
	walk = func(st *ast.StructType, prefix string, depth int) error {
		if depth > 4 {
			return fmt.Errorf("config types nest deeper than expected under %q", prefix)
		}
		for _, fld := range st.Fields.List {
			name := ""
			if fld.Tag != nil {
				tag, err := strconv.Unquote(fld.Tag.Value)
				if err != nil {
					return err
				}
				name, _, _ = strings.Cut(reflect.StructTag(tag).Get("toml"), ",")
			}
			if name == "-" {
				continue
			}
			typ := fld.Type
			array := false
			for {
				if s, ok := typ.(*ast.StarExpr); ok {
					typ = s.X
				} else if a, ok := typ.(*ast.ArrayType); ok {
					typ, array = a.Elt, true
				} else {
					break
				}
			}
			var nested *ast.StructType
			if id, ok := typ.(*ast.Ident); ok {
				nested = structs[id.Name]
			}
			switch {
			case name == "" && len(fld.Names) == 0 && nested != nil: // embedded: its keys are inline
				if err := walk(nested, prefix, depth+1); err != nil {
					return err
				}
			case name == "":
				if len(fld.Names) > 0 && fld.Names[0].IsExported() {
					return fmt.Errorf("config field %s%s has no toml tag", prefix, fld.Names[0].Name)
				}
			case nested != nil:
				if array {
					blocks[prefix+name] = true
				}
				if err := walk(nested, prefix+name+".", depth+1); err != nil {
					return err
				}
			default:
				keys[prefix+name] = true
			}
		}
		return nil
	}
	if err := walk(root, "", 0); err != nil {
		return nil, nil, err
	}
	return keys, blocks, nil
}

// envVar is the environment variable of a config key, by the scheme
// package config's env.go states: SPARKPULSE_, the section, the key, in
// upper case with dashes as underscores; a block's keys with the block's
// position, written <N>: graphite.bind-address → SPARKPULSE_GRAPHITE_<N>_BIND_ADDRESS.
func envVar(key string, blocks nameSet) string {
	up := func(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }
	section, name, nested := strings.Cut(key, ".")
	switch {
	case !nested:
		return "SPARKPULSE_" + up(key)
	case blocks[section]:
		return "SPARKPULSE_" + up(section) + "_<N>_" + up(name)
	}
	return "SPARKPULSE_" + up(section) + "_" + up(name)
}

// documentedKeys reads the first column of configuration.md's tables
// headed "key", and each key's variable from the column "variable".
func documentedKeys(f *mdFile) (keys nameSet, vars map[string]string, err error) {
	keys, vars = nameSet{}, map[string]string{}
	tables := tablesHeaded(f, "key")
	if len(tables) == 0 {
		return nil, nil, fmt.Errorf("%s has no table headed \"key\"", f.path)
	}
	for _, tb := range tables {
		vc := tb.column("variable")
		if vc < 0 {
			return nil, nil, fmt.Errorf("%s:%d: a key table has no column \"variable\"", f.path, tb.line)
		}
		for _, row := range tb.rows {
			if len(row) == 0 || len(row[0].codes) != 1 {
				return nil, nil, fmt.Errorf("%s:%d: a key table's first cell must be one `section.key`, not %q", f.path, tb.line, rowText(row))
			}
			if len(row) <= vc || len(row[vc].codes) != 1 {
				return nil, nil, fmt.Errorf("%s:%d: a key table's variable cell must be one `SPARKPULSE_…`, not %q", f.path, tb.line, rowText(row))
			}
			keys[row[0].codes[0]] = true
			vars[row[0].codes[0]] = row[vc].codes[0]
		}
	}
	return keys, vars, nil
}

// wrongVars returns "key: has X, want Y" for each documented variable
// that is not the one the scheme gives its key.
func wrongVars(vars map[string]string, blocks nameSet) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		if want := envVar(k, blocks); vars[k] != want {
			out = append(out, fmt.Sprintf("%s: has %s, want %s", k, vars[k], want))
		}
	}
	return out
}

func rowText(row []mdCell) string {
	var s []string
	for _, c := range row {
		s = append(s, c.text)
	}
	return strings.Join(s, " | ")
}

// tomlKeys are the keys of a TOML document, as configKeys names them.
func tomlKeys(doc string) (nameSet, error) {
	var m map[string]any
	if err := toml.Unmarshal([]byte(doc), &m); err != nil {
		return nil, err
	}
	keys := nameSet{}
	for k, v := range m {
		switch v := v.(type) {
		case map[string]any:
			for kk := range v {
				keys[k+"."+kk] = true
			}
		case []any:
			tables := false
			for _, e := range v {
				if t, ok := e.(map[string]any); ok {
					tables = true
					for kk := range t {
						keys[k+"."+kk] = true
					}
				}
			}
			if !tables {
				keys[k] = true
			}
		default:
			keys[k] = true
		}
	}
	return keys, nil
}

func TestDocsConfigKeys(t *testing.T) {
	code, blocks, err := configKeys("../config")
	if err != nil {
		t.Fatal(err)
	}
	if len(code) < 60 {
		t.Fatalf("only %d config keys read from the code: %v", len(code), code.sorted())
	}
	if !blocks["graphite"] || !blocks["delta"] {
		t.Fatalf("the blocks read from the code, %v, lack graphite or delta", blocks.sorted())
	}
	docs, vars, err := documentedKeys(readMarkdown(t, "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	reportNames(t, "config keys", "docs/configuration.md's key tables", code, docs)
	if wrong := wrongVars(vars, blocks); len(wrong) > 0 {
		t.Errorf("docs/configuration.md's key tables name variables the scheme does not give:\n%s", strings.Join(wrong, "\n"))
	}

	// Every example may use only keys the code has.
	examples := 0
	for _, path := range docFiles(t) {
		for _, fence := range readMarkdown(t, path).fences {
			if fence.lang != "toml" {
				continue
			}
			examples++
			keys, err := tomlKeys(fence.body)
			if err != nil {
				t.Errorf("%s:%d: the TOML example does not parse: %v", path, fence.line, err)
				continue
			}
			if _, unknown := compareNames(code, keys); len(unknown) > 0 {
				t.Errorf("%s:%d: the TOML example sets keys the code does not have: %s", path, fence.line, strings.Join(unknown, ", "))
			}
		}
	}
	if examples < 3 {
		t.Errorf("only %d TOML examples found", examples)
	}
}

// TestDocsCompareNames: both directions of every comparison are reported.
func TestDocsCompareNames(t *testing.T) {
	code := nameSet{"influxdb.url": true, "graphite.bind-address": true, "fake-undocumented-key": true, "peak_*": true}
	docs := nameSet{"influxdb.url": true, "graphite.bind-address": true, "graphite.documented-only": true, docName("peak_<metric>"): true}
	undocumented, unknown := compareNames(code, docs)
	if !slices.Equal(undocumented, []string{"fake-undocumented-key"}) {
		t.Errorf("undocumented = %v, want [fake-undocumented-key]", undocumented)
	}
	if !slices.Equal(unknown, []string{"graphite.documented-only"}) {
		t.Errorf("unknown = %v, want [graphite.documented-only]", unknown)
	}
	if u, k := compareNames(code, code); len(u)+len(k) != 0 {
		t.Errorf("a set against itself: %v, %v", u, k)
	}

	// The config key table and the examples, read as the test reads them.
	f := parseMarkdown("configuration.md", []byte("| key | default | variable |\n|---|---|---|\n| `influxdb.url` | x | `SPARKPULSE_INFLUXDB_URL` |\n| `graphite.documented-only` | y | `SPARKPULSE_GRAPHITE_DOCUMENTED_ONLY` |\n\n"+
		"```toml\nstate-dir = \"\"\n[influxdb]\nurl = \"\"\n[[graphite]]\nbind-address = \":2003\"\n[[graphite]]\nnot-a-key = 1\n```\n"))
	keys, vars, err := documentedKeys(f)
	if err != nil {
		t.Fatal(err)
	}
	if !keys["influxdb.url"] || !keys["graphite.documented-only"] || len(keys) != 2 {
		t.Errorf("documented keys: %v", keys.sorted())
	}
	// A block's variable needs <N>: the second row is wrong, the first right.
	if wrong := wrongVars(vars, nameSet{"graphite": true}); !slices.Equal(wrong, []string{
		"graphite.documented-only: has SPARKPULSE_GRAPHITE_DOCUMENTED_ONLY, want SPARKPULSE_GRAPHITE_<N>_DOCUMENTED_ONLY"}) {
		t.Errorf("wrong variables: %q", wrong)
	}
	if got := envVar("state-dir", nil); got != "SPARKPULSE_STATE_DIR" {
		t.Errorf("envVar(state-dir) = %s", got)
	}
	ex, err := tomlKeys(f.fences[0].body)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"graphite.bind-address", "graphite.not-a-key", "influxdb.url", "state-dir"}; !slices.Equal(ex.sorted(), want) {
		t.Errorf("example keys %v, want %v", ex.sorted(), want)
	}
	if _, unknown := compareNames(nameSet{"state-dir": true, "influxdb.url": true, "graphite.bind-address": true}, ex); !slices.Equal(unknown, []string{"graphite.not-a-key"}) {
		t.Errorf("an example's unknown key: %v", unknown)
	}
	if _, _, err := documentedKeys(parseMarkdown("x.md", []byte("| key | variable |\n|---|---|\n| no code span | `X` |\n"))); err == nil {
		t.Error("a key cell without a code span: not reported")
	}
	if _, _, err := documentedKeys(parseMarkdown("x.md", []byte("| key | default |\n|---|---|\n| `a` | `1` |\n"))); err == nil {
		t.Error("a key table without a variable column: not reported")
	}
	if _, _, err := documentedKeys(parseMarkdown("x.md", []byte("| key | variable |\n|---|---|\n| `a` | none |\n"))); err == nil {
		t.Error("a variable cell without a code span: not reported")
	}

	// The code's keys, from a config type written for the test.
	keysOf := func(src string) (nameSet, nameSet) {
		t.Helper()
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "config.go"), src)
		keys, blocks, err := configKeys(dir)
		if err != nil {
			t.Fatal(err)
		}
		return keys, blocks
	}
	got, blocks := keysOf("package main\ntype Config struct {\n\tA string `toml:\"a\"`\n\tS Sect `toml:\"sect\"`\n\tL []*Sect `toml:\"list\"`\n\tunexported int\n}\n" +
		"type Sect struct {\n\tB *Dur `toml:\"b,omitempty\"`\n\tC []string `toml:\"c\"`\n}\ntype Dur int64\n")
	if want := []string{"a", "list.b", "list.c", "sect.b", "sect.c"}; !slices.Equal(got.sorted(), want) {
		t.Errorf("config keys %v, want %v", got.sorted(), want)
	}
	if want := []string{"list"}; !slices.Equal(blocks.sorted(), want) {
		t.Errorf("blocks %v, want %v", blocks.sorted(), want)
	}
	if got := envVar("list.b", blocks); got != "SPARKPULSE_LIST_<N>_B" {
		t.Errorf("envVar(list.b) = %s", got)
	}
	if got := envVar("sect.b", blocks); got != "SPARKPULSE_SECT_B" {
		t.Errorf("envVar(sect.b) = %s", got)
	}
}
