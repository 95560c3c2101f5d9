package docs

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// measurementSchema is what the code writes to one measurement.
type measurementSchema struct {
	tags, fields nameSet
}

// annotateSchema reads, from the Go source of package annotate in dir,
// every measurement the annotator writes with its tags and fields.
//
// The encoder is a value with methods begin and startLine, which start a
// point of a Measurement… constant, int, str, float and bool, which add a
// field, and enc.AddTag and enc.AddField; names are string literals or
// string constants, the package's or, read as pkg.Name, those of the
// packages in constDirs (package schema declares every name), alone or
// summed. The source is walked in order,
// as the encoder runs: a field belongs to the point begun last, calls to
// other encoder methods and to local closures are followed (a closure's
// string and bool arguments bound, so that `name+"_p50"` and `if p95`
// are resolved), and a name the walk cannot resolve to text is an error,
// so that no field can be added in a way this reading misses. Text that
// is not known (`"peak_"+k`) is "*".
func annotateSchema(dir string, constDirs ...string) (map[string]*measurementSchema, error) {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	// The constants of the packages in constDirs (package schema) are
	// read as pkg.Name, as the encoder spells them.
	consts := map[string]string{}
	for _, cd := range constDirs {
		more, err := stringConsts(cd, filepath.Base(cd)+".")
		if err != nil {
			return nil, err
		}
		maps.Copy(consts, more)
	}
	methods := map[string]*ast.FuncDecl{} // of the encoder type
	var funcs []*ast.FuncDecl
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				if d.Tok != token.CONST {
					continue
				}
				for _, s := range d.Specs {
					vs := s.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if i < len(vs.Values) {
							if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
								consts[n.Name], _ = strconv.Unquote(lit.Value)
							}
						}
					}
				}
			case *ast.FuncDecl:
				funcs = append(funcs, d)
				if d.Recv != nil && len(d.Recv.List) == 1 {
					if s, ok := d.Recv.List[0].Type.(*ast.StarExpr); ok {
						if id, ok := s.X.(*ast.Ident); ok && id.Name == "points" {
							methods[d.Name.Name] = d
						}
					}
				}
			}
		}
	}
	if methods["begin"] == nil || methods["str"] == nil {
		return nil, fmt.Errorf("%s: no encoder type points with methods begin and str", dir)
	}
	out := map[string]*measurementSchema{}
	for name, v := range consts {
		if strings.HasPrefix(name[strings.LastIndexByte(name, '.')+1:], "Measurement") {
			out[v] = &measurementSchema{tags: nameSet{}, fields: nameSet{}}
		}
	}

	w := &schemaWalk{fset: fset, consts: consts, methods: methods, out: out}
	for _, fn := range funcs {
		if fn.Body == nil || primitive[fn.Name.Name] && methods[fn.Name.Name] == fn {
			continue
		}
		w.cur = ""
		w.closures = closuresOf(fn)
		w.walk(fn.Body, nil, 0)
		if w.err != nil {
			return nil, w.err
		}
	}
	return out, nil
}

// closuresOf maps the names of fn's local closures (name := func…) to
// them.
func closuresOf(fn *ast.FuncDecl) map[string]*ast.FuncLit {
	out := map[string]*ast.FuncLit{}
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		if as, ok := n.(*ast.AssignStmt); ok && len(as.Lhs) == 1 && len(as.Rhs) == 1 {
			if lit, ok := as.Rhs[0].(*ast.FuncLit); ok {
				if id, ok := as.Lhs[0].(*ast.Ident); ok {
					out[id.Name] = lit
				}
			}
		}
		return true
	})
	return out
}

// primitive are the encoder's methods the walk knows, not walks.
var primitive = map[string]bool{"begin": true, "startLine": true, "int": true, "str": true, "float": true, "bool": true, "history": true}

type schemaWalk struct {
	fset     *token.FileSet
	consts   map[string]string
	methods  map[string]*ast.FuncDecl
	closures map[string]*ast.FuncLit // of the function walked
	out      map[string]*measurementSchema
	cur      string // the measurement of the point being encoded
	starting bool   // in startLine, where a point starts
	err      error
}

// binding is a closure's or method's argument known as text or a bool.
type binding struct {
	s      string
	b, isB bool
}

func (w *schemaWalk) fail(n ast.Node, format string, a ...any) {
	if w.err == nil {
		w.err = fmt.Errorf("%s: %s", w.fset.Position(n.Pos()), fmt.Sprintf(format, a...))
	}
}

func (w *schemaWalk) walk(body ast.Node, env map[string]binding, depth int) {
	if depth > 8 {
		w.fail(body, "encoder calls nest deeper than expected")
		return
	}
	ast.Inspect(body, func(n ast.Node) bool {
		if w.err != nil {
			return false
		}
		switch n := n.(type) {
		case *ast.FuncLit:
			// Named closures are walked where they are called.
			for _, lit := range w.closures {
				if lit == n {
					return false
				}
			}
		case *ast.IfStmt:
			if id, ok := n.Cond.(*ast.Ident); ok {
				if b, ok := env[id.Name]; ok && b.isB {
					if n.Init != nil {
						w.walk(n.Init, env, depth)
					}
					if b.b {
						w.walk(n.Body, env, depth)
					} else if n.Else != nil {
						w.walk(n.Else, env, depth)
					}
					return false
				}
			}
		case *ast.CallExpr:
			w.call(n, env, depth)
		}
		return true
	})
}

func (w *schemaWalk) call(c *ast.CallExpr, env map[string]binding, depth int) {
	switch fun := c.Fun.(type) {
	case *ast.Ident:
		if lit, ok := w.closures[fun.Name]; ok {
			w.walk(lit.Body, w.bind(lit.Type, c.Args, env), depth+1)
		}
	case *ast.SelectorExpr:
		name := fun.Sel.Name
		if inner, ok := fun.X.(*ast.SelectorExpr); ok && inner.Sel.Name == "enc" {
			switch name {
			case "AddTag":
				w.add(c, env, func(s *measurementSchema) nameSet { return s.tags })
			case "AddField":
				w.add(c, env, func(s *measurementSchema) nameSet { return s.fields })
			case "StartLine":
				if !w.starting {
					w.fail(c, "a point started without begin or startLine")
				}
			}
			return
		}
		if _, ok := fun.X.(*ast.Ident); !ok {
			return
		}
		m, ok := w.methods[name]
		if !ok {
			return
		}
		switch name {
		case "begin", "startLine":
			name, ok := constName(c.Args[0])
			if !ok || w.out[w.consts[name]] == nil {
				w.fail(c, "a point of a measurement that is not a Measurement… constant")
				return
			}
			w.cur = w.consts[name]
			// Every point starts in startLine, with the tags it adds.
			w.starting = true
			w.walk(w.methods["startLine"].Body, nil, depth+1)
			w.starting = false
		case "int", "str", "float", "bool":
			w.add(c, env, func(s *measurementSchema) nameSet { return s.fields })
		case "history":
			// The point just ended again, as spark_app_history: its tags
			// but applicationid, and its fields.
			h := w.out[w.consts["schema.MeasurementAppHistory"]]
			src := w.out[w.cur]
			if h == nil || src == nil {
				w.fail(c, "history of a point the walk does not know")
				return
			}
			for k := range src.tags {
				if k != w.consts["schema.TagApplicationID"] {
					h.tags[k] = true
				}
			}
			for k := range src.fields {
				// cores_held is an estimate's, and estimates have no
				// history: the walk does not tell the branches apart.
				if k != w.consts["schema.UsageCoresHeld"] {
					h.fields[k] = true
				}
			}
		default:
			outer := w.closures
			w.closures = closuresOf(m)
			w.walk(m.Body, w.bind(m.Type, c.Args, env), depth+1)
			w.closures = outer
		}
	}
}

// constName is the name of the constant e may be: Name, or pkg.Name.
func constName(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name, true
	case *ast.SelectorExpr:
		if pkg, ok := e.X.(*ast.Ident); ok {
			return pkg.Name + "." + e.Sel.Name, true
		}
	}
	return "", false
}

// bind binds the parameters of a function of type ft to the arguments
// known as text or bools.
func (w *schemaWalk) bind(ft *ast.FuncType, args []ast.Expr, env map[string]binding) map[string]binding {
	out := map[string]binding{}
	i := 0
	for _, p := range ft.Params.List {
		for _, n := range p.Names {
			if i < len(args) {
				if id, ok := args[i].(*ast.Ident); ok && (id.Name == "true" || id.Name == "false") {
					out[n.Name] = binding{b: id.Name == "true", isB: true}
				} else if s, ok := w.text(args[i], env); ok && !strings.Contains(s, "*") {
					out[n.Name] = binding{s: s}
				}
			}
			i++
		}
	}
	return out
}

// add records the name in c's first argument in the set of the point
// being encoded.
func (w *schemaWalk) add(c *ast.CallExpr, env map[string]binding, set func(*measurementSchema) nameSet) {
	name, ok := w.text(c.Args[0], env)
	if !ok {
		w.fail(c, "a tag or field whose name is not text the docs test can read")
		return
	}
	if w.cur == "" {
		return // a helper walked on its own: its names count where it is called
	}
	set(w.out[w.cur])[name] = true
}

// text is the text of e: a string literal, a string constant, a bound
// parameter, or a sum of them; "*" stands for a part that is not known
// (a variable), which may not be all of it.
func (w *schemaWalk) text(e ast.Expr, env map[string]binding) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			s, err := strconv.Unquote(e.Value)
			return s, err == nil
		}
	case *ast.Ident:
		if b, ok := env[e.Name]; ok && !b.isB {
			return b.s, true
		}
		if s, ok := w.consts[e.Name]; ok {
			return s, true
		}
	case *ast.SelectorExpr:
		if name, ok := constName(e); ok {
			s, ok := w.consts[name]
			return s, ok
		}
	case *ast.ParenExpr:
		return w.text(e.X, env)
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		l, lok := w.text(e.X, env)
		r, rok := w.text(e.Y, env)
		switch {
		case lok && rok:
			return l + r, true
		case lok:
			return l + "*", true
		case rok:
			return "*" + r, true
		}
	}
	return "", false
}

// documentedSchema reads schema.md's index tables: the first column a
// measurement in backticks, the columns "tags" and "fields" names in
// backticks.
func documentedSchema(f *mdFile) (map[string]*measurementSchema, error) {
	out := map[string]*measurementSchema{}
	tables := tablesHeaded(f, "measurement")
	for _, tb := range tables {
		tc, fc := tb.column("tags"), tb.column("fields")
		if tc < 0 || fc < 0 {
			continue // a table for reading, not the index
		}
		for _, row := range tb.rows {
			if len(row) <= max(tc, fc) || len(row[0].codes) == 0 {
				return nil, fmt.Errorf("%s:%d: an index row must name its measurement in backticks first and have tags and fields: %q", f.path, tb.line, rowText(row))
			}
			m := docName(row[0].codes[0])
			if out[m] != nil {
				return nil, fmt.Errorf("%s:%d: measurement %s indexed twice", f.path, tb.line, m)
			}
			s := &measurementSchema{tags: nameSet{}, fields: nameSet{}}
			for _, c := range row[tc].codes {
				s.tags[docName(c)] = true
			}
			for _, c := range row[fc].codes {
				s.fields[docName(c)] = true
			}
			out[m] = s
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s has no index table headed measurement | tags | fields", f.path)
	}
	return out, nil
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestAnnotateSchemaNames: a field or tag named by a constant (declared
// in another file, as package schema declares them) or by a
// constant prefix is read as its text, and reported when the docs lack
// it; a name the walk cannot read is an error.
func TestAnnotateSchemaNames(t *testing.T) {
	encoder := "package a\n\ntype points struct{ enc enc }\ntype enc struct{}\n\n" +
		"func (enc) StartLine(string)        {}\nfunc (enc) AddTag(string, string)    {}\nfunc (enc) AddField(string, any)     {}\n" +
		"func (w *points) begin(m string, ts int64) bool { w.startLine(m); return true }\n" +
		"func (w *points) startLine(m string) { w.enc.StartLine(m); w.enc.AddTag(TagKey, \"x\") }\n" +
		"func (w *points) str(k, v string)     { w.enc.AddField(k, v) }\n" +
		"func (w *points) int(k string, v int64) { w.enc.AddField(k, v) }\n" +
		"func (w *points) float(k string, v float64) { w.enc.AddField(k, v) }\n" +
		"func (w *points) bool(k string, v bool) { w.enc.AddField(k, v) }\n"
	names := "package a\n\nconst (\n\tMeasurementThing = \"thing\"\n\tTagKey = \"key\"\n\tThingCount = \"count\"\n\tThingDiffPrefix = \"diff_\"\n)\n"
	schemaOf := func(write string) (map[string]*measurementSchema, error) {
		t.Helper()
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "encoder.go"), encoder)
		writeFile(t, filepath.Join(dir, "names.go"), names)
		writeFile(t, filepath.Join(dir, "write.go"), "package a\n\n"+write)
		return annotateSchema(dir)
	}
	got, err := schemaOf("func (w *points) thing(xs []string) {\n\tif !w.begin(MeasurementThing, 0) {\n\t\treturn\n\t}\n" +
		"\tw.int(ThingCount, 1)\n\tw.str(\"text\", \"t\")\n\tfor _, x := range xs {\n\t\tw.float(ThingDiffPrefix+x, 1)\n\t}\n}\n")
	if err != nil {
		t.Fatal(err)
	}
	s := got["thing"]
	if s == nil {
		t.Fatalf("no measurement thing read: %v", got)
	}
	if want := []string{"count", "diff_*", "text"}; !slices.Equal(s.fields.sorted(), want) {
		t.Errorf("fields %v, want %v", s.fields.sorted(), want)
	}
	if want := []string{"key"}; !slices.Equal(s.tags.sorted(), want) {
		t.Errorf("tags %v, want %v", s.tags.sorted(), want)
	}
	undocumented, _ := compareNames(s.fields, nameSet{"text": true, docName("diff_<X>"): true})
	if !slices.Equal(undocumented, []string{"count"}) {
		t.Errorf("undocumented %v, want [count]", undocumented)
	}
	if _, err := schemaOf("func (w *points) thing(k string) {\n\tif !w.begin(MeasurementThing, 0) {\n\t\treturn\n\t}\n\tw.int(fieldName(k), 1)\n}\n\nfunc fieldName(k string) string { return k }\n"); err == nil {
		t.Error("a field named by a call: not reported")
	}
}
