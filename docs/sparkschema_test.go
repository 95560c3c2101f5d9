package docs

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/delta"
	"github.com/sparkpulse/sparkpulse/queue"
	"github.com/sparkpulse/sparkpulse/relay"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/spark"
	"github.com/sparkpulse/sparkpulse/templates"
)

// Rows of schema.md's table of the built-in Spark mapping, by the schemas
// in their first cell.
const (
	cernRow  = "cern"
	wideRow  = "wide"
	otherRow = "cern,wide" // a path that is not Spark's
)

// sparkSchema is what one schema of the built-in mapping writes:
// measurements, tag keys and fields.
type sparkSchema struct {
	measurements, tags, fields nameSet
}

// checkSparkMapping compares schema.md's table of the built-in Spark
// mapping with what the mapping and the relay write in each schema for
// every documented and recorded Spark path, and with the tag keys of
// package spark and the field names of package relay.
func checkSparkMapping(t *testing.T, f *mdFile) {
	t.Helper()
	docs, err := documentedSparkSchemas(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{cernRow, wideRow, otherRow} {
		if docs[row] == nil {
			t.Fatalf("schema.md's table of the built-in Spark mapping has no row for schema %q", row)
		}
	}
	paths, others, prefixes := sparkPaths(t)
	cern := sparkMappingWrites(t, schema.CERN, paths, prefixes)
	wide := sparkMappingWrites(t, schema.Wide, paths, prefixes)
	other := sparkMappingWrites(t, schema.Wide, others, prefixes)
	if o := sparkMappingWrites(t, schema.CERN, others, prefixes); fmt.Sprint(o) != fmt.Sprint(other) {
		t.Errorf("paths that are not Spark's: cern writes %v, wide %v", o, other)
	}

	// The tag keys: each schema's, and together every key package spark has.
	keys, err := byteVars("../spark", "spark.go", func(name string) bool { return strings.HasPrefix(name, "key") })
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) < 8 {
		t.Fatalf("Spark mapping: tag keys %v read from the code", keys.sorted())
	}
	both := nameSet{}
	for k := range cern.tags {
		both[k] = true
	}
	for k := range wide.tags {
		both[k] = true
	}
	reportNames(t, "tag keys of package spark", "what the Spark paths are mapped to in either schema", keys, both)
	reportNames(t, `schema "cern" tags`, "schema.md's Spark mapping table", cern.tags, docs[cernRow].tags)
	reportNames(t, `schema "wide" tags`, "schema.md's Spark mapping table", wide.tags, docs[wideRow].tags)

	// The fields: cern's are the relay's names; wide's are the metrics'
	// names and their deltas', none of cern's.
	fields, err := byteVars("../relay", "relay.go", func(name string) bool {
		return name == "valueField" || name == "fieldDelta" || name == "fieldRate"
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(fields) != 3 {
		t.Fatalf("Spark mapping: fields %v read from the code", fields.sorted())
	}
	reportNames(t, `schema "cern" fields`, "package relay's field names", cern.fields, fields)
	reportNames(t, `schema "cern" fields`, "schema.md's Spark mapping table", cern.fields, docs[cernRow].fields)
	for k := range fields {
		if wide.fields[k] {
			t.Errorf(`schema "wide" writes the field %q of the cern shape for a Spark path`, k)
		}
	}
	reportPatterns(t, `schema "wide" fields`, wide.fields, docs[wideRow].fields)

	// The measurements: cern's are the metrics' names; wide's the sources,
	// each listed.
	if !docs[cernRow].measurements["*"] || len(docs[cernRow].measurements) != 1 {
		t.Errorf(`schema.md: schema "cern" measurements %v, want <metric>`, docs[cernRow].measurements.sorted())
	}
	reportPatterns(t, `schema "wide" measurements`, wide.measurements, docs[wideRow].measurements)

	// A path that is not Spark's: no tag, the field value.
	for k := range other.tags {
		if !docs[otherRow].tags[k] {
			t.Errorf("a path that is not Spark's gets the tag %s, not in schema.md's Spark mapping table", k)
		}
	}
	for k := range other.fields {
		if !docs[otherRow].fields[k] {
			t.Errorf("a path that is not Spark's gets the field %s, not in schema.md's Spark mapping table", k)
		}
	}
	if !other.fields["value"] || len(other.tags) > 0 {
		t.Errorf("paths that are not Spark's: tags %v, fields %v", other.tags.sorted(), other.fields.sorted())
	}
}

// reportPatterns fails t for a name written that no documented name or
// pattern matches, and for a documented one that matches nothing written.
func reportPatterns(t *testing.T, what string, code, docs nameSet) {
	t.Helper()
	var undocumented, unknown []string
	for _, k := range code.sorted() {
		if !matches(docs, k) {
			undocumented = append(undocumented, k)
		}
	}
	for _, d := range docs.sorted() {
		found := false
		for k := range code {
			if matches(nameSet{d: true}, k) {
				found = true
				break
			}
		}
		if !found {
			unknown = append(unknown, d)
		}
	}
	if len(undocumented) > 0 {
		t.Errorf("%s written but not in schema.md's Spark mapping table: %s", what, strings.Join(undocumented, ", "))
	}
	if len(unknown) > 0 {
		t.Errorf("%s in schema.md's Spark mapping table but not written for any path: %s", what, strings.Join(unknown, ", "))
	}
}

// documentedSparkSchemas reads schema.md's table headed "schema": per
// row, keyed by the schemas of its first cell, the names in backticks of
// its columns measurement, tags and fields.
func documentedSparkSchemas(f *mdFile) (map[string]*sparkSchema, error) {
	out := map[string]*sparkSchema{}
	for _, tb := range tablesHeaded(f, "schema") {
		mc, tc, fc := tb.column("measurement"), tb.column("tags"), tb.column("fields")
		if mc < 0 || tc < 0 || fc < 0 {
			return nil, fmt.Errorf("%s:%d: the table headed schema needs the columns measurement, tags and fields", f.path, tb.line)
		}
		for _, row := range tb.rows {
			if len(row) <= max(mc, tc, fc) || len(row[0].codes) == 0 {
				return nil, fmt.Errorf("%s:%d: a row must name its schemas in backticks first: %q", f.path, tb.line, rowText(row))
			}
			key := strings.Join(row[0].codes, ",")
			if out[key] != nil {
				return nil, fmt.Errorf("%s:%d: schema %s twice", f.path, tb.line, key)
			}
			s := &sparkSchema{measurements: nameSet{}, tags: nameSet{}, fields: nameSet{}}
			for _, c := range row[mc].codes {
				s.measurements[docName(c)] = true
			}
			for _, c := range row[tc].codes {
				s.tags[docName(c)] = true
			}
			for _, c := range row[fc].codes {
				s.fields[docName(c)] = true
			}
			out[key] = s
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s has no table headed schema | measurement | tags | fields", f.path)
	}
	return out, nil
}

// sparkPaths are the documented paths (spark/testdata) and those real
// Spark sent (testdata/spark-real), each once, with the GraphiteSink
// prefixes they use: Spark's, which the mapping recognises, and the
// others.
func sparkPaths(t *testing.T) (paths, others, prefixes []string) {
	t.Helper()
	seen := map[string]bool{}
	var all []string
	add := func(line string) {
		p, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		if p != "" && !strings.HasPrefix(p, "#") && !seen[p] {
			seen[p] = true
			all = append(all, p)
		}
	}
	b, err := os.ReadFile("../spark/testdata/spark-paths.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		add(l)
	}
	prefixes = []string{"lucatest", "spark.prod"} // those the documented paths use
	recordings, _ := filepath.Glob("../testdata/spark-real/*/graphite.txt.gz")
	if len(recordings) < 2 {
		t.Fatalf("recordings of real Spark: %v", recordings)
	}
	for _, file := range recordings {
		var meta struct{ Prefix string }
		b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "recording.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &meta); err != nil {
			t.Fatal(err)
		}
		prefixes = append(prefixes, meta.Prefix)
		fh, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(fh)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(zr)
		for sc.Scan() {
			add(sc.Text())
		}
		fh.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	// The cern shape tells Spark's paths by their namespace tag.
	m := spark.NewMapper(spark.Options{Prefixes: prefixes})
	var r templates.Result
	for _, p := range all {
		if err := m.Apply([]byte(p), &r); err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(r.Tags, func(tg templates.Tag) bool { return string(tg.Key) == "namespace" }) {
			paths = append(paths, p)
		} else {
			others = append(others, p)
		}
	}
	if len(others) == 0 || len(paths) < 1000 {
		t.Fatalf("%d Spark paths, %d others", len(paths), len(others))
	}
	return paths, others, prefixes
}

// sparkMappingWrites runs the built-in mapping of schema s, with the
// built-in delta rules, over two samples of each path, and returns what
// the relay wrote.
func sparkMappingWrites(t *testing.T, s schema.Shape, paths, prefixes []string) *sparkSchema {
	t.Helper()
	rules, err := delta.CompileRules(spark.DeltaRules())
	if err != nil {
		t.Fatal(err)
	}
	sink := &captureSink{}
	conn := relay.New(relay.Config{
		Mapper: spark.NewMapper(spark.Options{Prefixes: prefixes, Schema: s}),
		Sink:   sink,
		Deltas: &relay.Deltas{Rules: rules, Tracker: delta.New(delta.Settings{FirstSampleGrace: delta.NoGrace}, time.Now()),
			Bucket: "spark", MatchField: s == schema.Wide},
	}).NewConn(nil)
	now := time.Now().Unix()
	for i, ts := range []int64{now - 20, now - 10} {
		for _, p := range paths {
			conn.Line(fmt.Appendf(nil, "%s %d %d", p, i+1, ts))
		}
		conn.Flush()
	}
	out := &sparkSchema{measurements: nameSet{}, tags: nameSet{}, fields: nameSet{}}
	for m, p := range pointsOf(t, sink.lines.Bytes(), func(string) bool { return true }) {
		out.measurements[m] = true
		for k := range p.tags {
			out.tags[k] = true
		}
		for k := range p.fields {
			out.fields[k] = true
		}
	}
	if len(out.measurements) == 0 {
		t.Fatalf("schema %s: nothing written for %d paths", s, len(paths))
	}
	return out
}

// AppendLines makes captureSink a relay.Sink.
func (s *captureSink) AppendLines(l queue.Lines, _ bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines.Write(l.Data)
	return true
}
