package docs

import (
	"bytes"
	"context"

	"go/ast"
	"go/parser"
	"go/token"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/influxdata/line-protocol/v2/lineprotocol"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sparkpulse/sparkpulse/accounting"
	"github.com/sparkpulse/sparkpulse/annotate"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/selfmetrics"
	"github.com/sparkpulse/sparkpulse/sparkui"
)

// Index rows of schema.md that are not annotation measurements.
const (
	ownMetricsRow = "sparkpulse_*" // `sparkpulse_<metric>`: [internal]
	processRow    = "process_*"    // `process_<metric>`: [internal]
)

func TestDocsSchema(t *testing.T) {
	code, err := annotateSchema("../annotate", "../schema")
	if err != nil {
		t.Fatal(err)
	}
	if len(code) < 10 {
		t.Fatalf("only %d annotation measurements read from the code", len(code))
	}
	f := readMarkdown(t, "schema.md")
	docs, err := documentedSchema(f)
	if err != nil {
		t.Fatal(err)
	}

	// The measurements: the index, and the first column of the table
	// that describes the annotations' facts.
	codeM, docsM := nameSet{}, nameSet{}
	for m := range code {
		codeM[m] = true
	}
	for m := range docs {
		if m != ownMetricsRow && m != processRow {
			docsM[m] = true
		}
	}
	reportNames(t, "annotation measurements", "schema.md's index", codeM, docsM)
	described := nameSet{}
	for _, tb := range tablesHeaded(f, "measurement") {
		if tb.column("facts, and their time") < 0 {
			continue
		}
		for _, row := range tb.rows {
			if len(row) > 0 && len(row[0].codes) > 0 {
				described[row[0].codes[0]] = true
			}
		}
	}
	reportNames(t, "annotation measurements", "schema.md's table of facts", codeM, described)

	for m, s := range code {
		d := docs[m]
		if d == nil {
			continue
		}
		reportNames(t, m+" tags", "schema.md's index", s.tags, d.tags)
		reportNames(t, m+" fields", "schema.md's index", s.fields, d.fields)
	}

	checkSparkMapping(t, f)

	// sparkpulse's own metrics, as [internal] writes them.
	own := ownMetricsSchema(t)
	for _, row := range []string{ownMetricsRow, processRow} {
		if d := docs[row]; d == nil {
			t.Errorf("schema.md's index has no row for %s", row)
		} else {
			reportNames(t, row+" tags", "schema.md's index", own.tags, d.tags)
			reportNames(t, row+" fields", "schema.md's index", own.fields, d.fields)
		}
	}
}

// byteVars reads the `name = []byte("text")` variables of file in dir
// whose names keep.
func byteVars(dir, file string, keep func(string) bool) (nameSet, error) {
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, file), nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	consts, err := stringConsts("../schema", "schema.")
	if err != nil {
		return nil, err
	}
	out := nameSet{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range vs.Names {
			if !keep(name.Name) || i >= len(vs.Values) {
				continue
			}
			if c, ok := vs.Values[i].(*ast.CallExpr); ok && len(c.Args) == 1 {
				if lit, ok := c.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					s, _ := strconv.Unquote(lit.Value)
					out[s] = true
				} else if name, ok := constName(c.Args[0]); ok && consts[name] != "" {
					out[consts[name]] = true
				}
			}
		}
		return true
	})
	return out, nil
}

// stringConsts reads the string constants of the package in dir (not its
// tests), each named prefix+Name.
func stringConsts(dir, prefix string) (map[string]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if vs, ok := n.(*ast.ValueSpec); ok {
				for i, name := range vs.Names {
					if i < len(vs.Values) {
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							out[prefix+name.Name], _ = strconv.Unquote(lit.Value)
						}
					}
				}
			}
			return true
		})
	}
	return out, nil
}

// captureSink keeps what is written to it.
type captureSink struct {
	mu    sync.Mutex
	lines bytes.Buffer
}

func (s *captureSink) Append(lines []byte, _ bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines.Write(lines)
	return true
}

// pointsOf reads line protocol into measurement → tags and fields seen;
// tag keys other than keep are "*".
func pointsOf(t *testing.T, lines []byte, keepTag func(string) bool) map[string]*measurementSchema {
	t.Helper()
	out := map[string]*measurementSchema{}
	dec := lineprotocol.NewDecoderWithBytes(lines)
	for dec.Next() {
		m, err := dec.Measurement()
		if err != nil {
			t.Fatal(err)
		}
		s := out[string(m)]
		if s == nil {
			s = &measurementSchema{tags: nameSet{}, fields: nameSet{}}
			out[string(m)] = s
		}
		for {
			k, _, err := dec.NextTag()
			if err != nil {
				t.Fatal(err)
			}
			if k == nil {
				break
			}
			if keepTag(string(k)) {
				s.tags[string(k)] = true
			} else {
				s.tags["*"] = true
			}
		}
		for {
			k, _, err := dec.NextField()
			if err != nil {
				t.Fatal(err)
			}
			if k == nil {
				break
			}
			s.fields[string(k)] = true
		}
	}
	return out
}

// ownMetricsSchema runs selfmetrics on a metric of every Prometheus type,
// with a label, twice (the deltas come from the second report on).
func ownMetricsSchema(t *testing.T) *measurementSchema {
	t.Helper()
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sparkpulse_c_total", Help: "h"}, []string{"reason"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "sparkpulse_g", Help: "h"})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sparkpulse_h_seconds", Help: "h"})
	s := prometheus.NewSummary(prometheus.SummaryOpts{Name: "sparkpulse_s_seconds", Help: "h"})
	u := prometheus.NewUntypedFunc(prometheus.UntypedOpts{Name: "sparkpulse_u", Help: "h"}, func() float64 { return 1 })
	reg.MustRegister(c, g, h, s, u)
	sink := &captureSink{}
	r := selfmetrics.New(reg, sink, "host-1", nil)
	for i := range 2 {
		c.WithLabelValues("x").Add(1)
		g.Set(2)
		h.Observe(0.5)
		s.Observe(0.5)
		if n, err := r.Report(time.Unix(int64(1_800_000_000+i*10), 0)); err != nil || n != 5 {
			t.Fatalf("selfmetrics: %d points, %v", n, err)
		}
	}
	all := &measurementSchema{tags: nameSet{}, fields: nameSet{}}
	for _, p := range pointsOf(t, sink.lines.Bytes(), func(k string) bool { return k == "host" }) {
		for k := range p.tags {
			all.tags[k] = true
		}
		for k := range p.fields {
			all.fields[k] = true
		}
	}
	return all
}

// matches reports whether name is in set, exactly or by a pattern.
func matches(set nameSet, name string) bool {
	if set[name] {
		return true
	}
	for p := range set {
		if pre, suf, ok := strings.Cut(p, "*"); ok && len(name) >= len(pre)+len(suf) &&
			strings.HasPrefix(name, pre) && strings.HasSuffix(name, suf) {
			return true
		}
	}
	return false
}

// TestDocsSchemaFixtures checks the reading of the encoders against what
// they write: Spark's own event logs, replayed as a History Server serves
// them, polled with an accounting, write only measurements, tags and
// fields that annotateSchema found.
func TestDocsSchemaFixtures(t *testing.T) {
	code, err := annotateSchema("../annotate", "../schema")
	if err != nil {
		t.Fatal(err)
	}
	m := &sparkui.Model{}
	if _, err := m.ReplayDir("../testdata/spark-events"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sparkui.NewServer(sparkui.HistoryServer, m))
	defer srv.Close()
	sink := &captureSink{}
	p, err := annotate.New(annotate.Config{
		Sources:                 []string{srv.URL},
		Sink:                    sink,
		Lookback:                20 * 365 * 24 * time.Hour,
		Stream:                  emptyStream{},
		UsageDelay:              time.Millisecond,
		StageDetailsMinDuration: -time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		p.PollOnce(context.Background())
	}
	got := pointsOf(t, sink.lines.Bytes(), func(string) bool { return true })
	var names []string
	for name, s := range got {
		names = append(names, name)
		c := code[name]
		if c == nil {
			t.Errorf("%s written, not found in the encoders", name)
			continue
		}
		for k := range s.tags {
			if !matches(c.tags, k) {
				t.Errorf("%s: tag %s written, not found in the encoders", name, k)
			}
		}
		for k := range s.fields {
			if !matches(c.fields, k) {
				t.Errorf("%s: field %s written, not found in the encoders", name, k)
			}
		}
	}
	slices.Sort(names)
	t.Logf("measurements written from the fixtures: %v", names)
	for _, want := range []string{schema.MeasurementApp, schema.MeasurementJob, schema.MeasurementStage, schema.MeasurementExecutor, schema.MeasurementUsage} {
		if got[want] == nil {
			t.Errorf("no %s point from the fixtures: the check would prove little", want)
		}
	}
}

// emptyStream is a metrics stream with nothing in it.
type emptyStream struct{}

func (emptyStream) Totals(context.Context, string, time.Time, time.Time) (map[string]accounting.ProcessTotals, error) {
	return map[string]accounting.ProcessTotals{}, nil
}
