package grafana

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"

	"github.com/grafana/grafana-foundation-sdk/go/dashboard"

	"github.com/sparkpulse/sparkpulse/schema"
)

// Dir is the folder, under grafana/, of the dashboards that read the
// stream of schema sc: the default schema's, which the provisioning
// files load, with the health dashboard in dashboards/; another schema's
// in dashboards-<schema>/, with distinct uids and titles, so that both
// sets can be imported into one Grafana.
func Dir(sc schema.Shape) string {
	if sc == schema.Default {
		return "dashboards"
	}
	return "dashboards-" + sc.String()
}

// Files returns every dashboard as the JSON file provisioning loads, by
// its path under grafana/ (Dir).
func Files() (map[string][]byte, error) {
	builders := map[string]*dashboard.DashboardBuilder{
		path.Join(Dir(schema.Default), "health.json"):        Health(),
		path.Join(Dir(schema.Default), HistoryDashboardFile): FleetHistory(),
	}
	for _, name := range schema.Shapes {
		sc, err := schema.ParseShape(name)
		if err != nil {
			return nil, err
		}
		builders[path.Join(Dir(sc), "spark.json")] = Spark(sc)
		builders[path.Join(Dir(sc), "spark-query-time.json")] = SparkQueryTime(sc)
		builders[path.Join(Dir(sc), "fleet.json")] = Fleet(sc)
	}
	out := map[string][]byte{}
	for name, b := range builders {
		d, err := b.Build()
		if err != nil {
			return nil, fmt.Errorf("grafana: %s: %w", name, err)
		}
		src := metricsSource
		if path.Base(name) == HistoryDashboardFile {
			src = historySource
		}
		finish(&d, src)
		s, err := share(d, src)
		if err != nil {
			return nil, fmt.Errorf("grafana: %s: %w", name, err)
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(s); err != nil {
			return nil, fmt.Errorf("grafana: %s: %w", name, err)
		}
		out[name] = buf.Bytes()
	}
	return out, nil
}

// finish gives every panel a stable id (Grafana links and repeats refer to
// them), makes the data source variable the first variable and every
// panel target's data source, writes the schema version the JSON is
// written in, and keeps the annotation toggles in the dashboard's controls
// bar, where Grafana 11 and 12 both show them.
func finish(d *dashboard.Dashboard, src source) {
	d.SchemaVersion = schemaVersion
	d.Templating.List = append([]dashboard.VariableModel{datasourceVar(src)}, d.Templating.List...)
	id := uint32(0)
	next := func() uint32 { id++; return id }
	panel := func(p *dashboard.Panel) {
		p.Id = new(next())
		for i, t := range p.Targets {
			if q, ok := t.(InfluxQL); ok {
				q.Datasource = &datasource
				p.Targets[i] = q
			}
		}
	}
	for _, p := range d.Panels {
		switch {
		case p.Panel != nil:
			panel(p.Panel)
		case p.RowPanel != nil:
			p.RowPanel.Id = next()
			for i := range p.RowPanel.Panels {
				panel(&p.RowPanel.Panels[i])
			}
		}
	}
	for i := range d.Annotations.List {
		d.Annotations.List[i].Placement = nil
	}
}
