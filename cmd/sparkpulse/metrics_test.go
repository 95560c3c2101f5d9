package main

import (
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/sparkpulse/sparkpulse/annotate"
	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/influx"
	"github.com/sparkpulse/sparkpulse/relay"
)

// metricNamesFile lists the families /metrics serves (name, type, label
// names), for the alert rules' test in deploy/kubecheck, which checks that
// every metric and label an alert reads exists. TestMetricNames keeps it
// true; -update rewrites it.
const metricNamesFile = "testdata/metric-names.txt"

// startFresh starts sparkpulse with every part that has metrics (a TCP
// and a UDP listener, deltas, annotations from a static source and an
// {app_id} template, own metrics, a disk queue) against a stand-in
// InfluxDB 3 that takes every write, and returns it before any line,
// poll answer or write has happened: the Spark source never answers.
func startFresh(t *testing.T) (p *pipeline, sources []string) {
	t.Helper()
	influxdb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Influxdb-Version", "3.0.1")
		w.Header().Set("X-Influxdb-Build", "Enterprise")
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(influxdb.Close)
	release := make(chan struct{})
	spark := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // hold every poll: no error and no point is counted
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(spark.Close)
	t.Cleanup(func() { close(release) })

	sources = []string{spark.URL, spark.URL + "/proxy/{app_id}"}
	svc := startSparkpulse(t, config.Config{
		StateDir: t.TempDir(),
		InfluxDB: config.InfluxDBConfig{URL: influxdb.URL, MaxQueueBytes: 2 << 20, MaxDiskQueueBytes: 32 << 20},
		Internal: config.InternalConfig{Interval: seconds(3600)},
		Annotate: config.AnnotateConfig{URLs: []string{sources[0], sources[1], sources[0]}, Interval: seconds(3600)}, // one listed twice
		Graphite: []config.GraphiteConfig{{Protocol: "tcp", Database: "tcp"}, {Protocol: "udp", Database: "udp"}},
	})
	return svc.pipeline, sources
}

// gather returns the sparkpulse_ families of p's registry by name.
func gather(t *testing.T, p *pipeline) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := p.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "sparkpulse_") {
			out[f.GetName()] = f
		}
	}
	return out
}

// sample finds the sample of f whose labels are exactly want.
func sample(f *dto.MetricFamily, want map[string]string) *dto.Metric {
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(want) {
			continue
		}
		match := true
		for _, l := range m.GetLabel() {
			if v, ok := want[l.GetName()]; !ok || v != l.GetValue() {
				match = false
				break
			}
		}
		if match {
			return m
		}
	}
	return nil
}

// TestMetricsAtZero: before anything happens, every error, drop and
// refusal counter is served at 0 for every label value its package lists,
// so that rate() and the alert rules see a series from the first scrape.
func TestMetricsAtZero(t *testing.T) {
	p, sources := startFresh(t)
	fams := gather(t, p)

	zero := func(name string, labels map[string]string) {
		t.Helper()
		f := fams[name]
		if f == nil {
			t.Errorf("%s: not served", name)
			return
		}
		m := sample(f, labels)
		switch {
		case m == nil:
			t.Errorf("%s%v: not served", name, labels)
		case f.GetType() != dto.MetricType_COUNTER:
			t.Errorf("%s: type %s, want counter", name, f.GetType())
		case m.GetCounter().GetValue() != 0:
			t.Errorf("%s%v = %v, want 0", name, labels, m.GetCounter().GetValue())
		}
	}
	var relayReasons []string
	for r := relay.Reason(1); r < relay.NumReasons; r++ {
		relayReasons = append(relayReasons, r.String())
	}
	for _, b := range p.blocks {
		reasons := append([]string{"too_long"}, relayReasons...)
		if b.Config.Protocol == "tcp" {
			reasons = append(reasons, "cut")
		}
		for _, r := range reasons {
			zero("sparkpulse_lines_dropped_total", map[string]string{"listener": b.Name(), "reason": r})
		}
		zero("sparkpulse_graphite_read_errors_total", map[string]string{"listener": b.Name()})
	}
	writers := []string{"annotate", "internal"}
	for _, b := range p.blocks {
		writers = append(writers, b.Name())
	}
	for _, w := range writers {
		for _, r := range influx.DropReasons {
			zero("sparkpulse_influxdb_points_rejected_total", map[string]string{"listener": w, "reason": r})
		}
		for _, k := range influx.WriteErrorKinds {
			zero("sparkpulse_influxdb_write_errors_total", map[string]string{"listener": w, "kind": k})
		}
		zero("sparkpulse_influxdb_write_retries_total", map[string]string{"listener": w})
		for name, want := range map[string]float64{"sparkpulse_influxdb_queue_limit_bytes": 2097152, "sparkpulse_influxdb_disk_queue_limit_bytes": 33554432} {
			if m := sample(fams[name], map[string]string{"listener": w}); m.GetGauge().GetValue() != want {
				t.Errorf("%s{listener=%q}: %v, want %v", name, w, m, want)
			}
		}
	}
	for _, src := range sources {
		for _, k := range annotate.ErrorKinds {
			zero("sparkpulse_annotate_errors_total", map[string]string{"source": src, "kind": k})
		}
	}
	for _, r := range annotate.RefusedReasons {
		zero("sparkpulse_annotate_apps_refused_total", map[string]string{"reason": r})
	}
	for _, what := range []string{"executors", "points"} {
		zero("sparkpulse_annotate_capped_total", map[string]string{"what": what})
	}
	for _, o := range []string{"read", "short", "budget", "unavailable"} {
		zero("sparkpulse_annotate_stage_details_total", map[string]string{"outcome": o})
	}
	for _, o := range []string{"reset", "first_new", "first_unknown", "out_of_order", "refused", "refused_app_quota", "future", "not_counter", "rebased"} {
		zero("sparkpulse_delta_samples_total", map[string]string{"outcome": o})
	}
}

// TestBuildInfo: /metrics says which build is running, as Prometheus's
// convention has it, with the version `sparkpulse version` prints.
func TestBuildInfo(t *testing.T) {
	p, _ := startFresh(t)
	_, body := adminGet(t, p.adminLn.Addr().String(), "/metrics")
	want := fmt.Sprintf("sparkpulse_build_info{goversion=%q,revision=%q,version=%q} 1\n", runtime.Version(), revisionString(), versionString())
	if !strings.Contains(body, want) {
		t.Errorf("/metrics lacks %q", want)
	}
}

// openLabels are the labels whose values depend on the configuration or
// the build; the golden file lists the values of every other label.
var openLabels = []string{"listener", "source", "version", "revision", "goversion"}

// TestMetricNames keeps testdata/metric-names.txt equal to the families a
// fresh sparkpulse serves: a line "name type label,…" for each, sorted,
// followed by a line "  label=value" for each value of a label that has a
// fixed set of them.
func TestMetricNames(t *testing.T) {
	p, _ := startFresh(t)
	fams := gather(t, p)
	var families []string
	for name, f := range fams {
		labels := map[string]bool{}
		var values []string
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = true
				if !slices.Contains(openLabels, l.GetName()) {
					values = append(values, "  "+l.GetName()+"="+l.GetValue())
				}
			}
		}
		slices.Sort(values)
		line := name + " " + strings.ToLower(f.GetType().String())
		if len(labels) > 0 {
			line += " " + strings.Join(slices.Sorted(maps.Keys(labels)), ",")
		}
		families = append(families, strings.Join(append([]string{line}, slices.Compact(values)...), "\n"))
	}
	slices.Sort(families)
	got := "# The metric families sparkpulse serves on /metrics: \"name type labels\", then\n" +
		"# \"  label=value\" for each value of a label with a fixed set of values.\n" +
		"# Written by `go test ./cmd/sparkpulse -run TestMetricNames -update`; the alert\n" +
		"# rules' test (deploy/kubecheck) checks every metric and label an alert reads.\n" +
		strings.Join(families, "\n") + "\n"
	if *update {
		if err := os.WriteFile(metricNamesFile, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(filepath.FromSlash(metricNamesFile))
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if string(want) != got {
		t.Errorf("%s is not what /metrics serves (run with -update and review the diff):\ngot:\n%s", metricNamesFile, got)
	}
}
