package grafana

import (
	"fmt"
	"slices"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// The data source of every panel, query variable and annotation is the
// dashboard's data source variable, so that the same JSON works when
// Grafana loads it from a file (provisioning, the Helm chart's sidecar, a
// POST to /api/dashboards/db) and when a user imports it (UI or
// /api/dashboards/import). Only the variable's saved value differs
// between the two paths; what Grafana does with it (sources read in
// grafana/grafana and grafana/scenes):
//
//   - Import, legacy path: pkg/services/dashboardimport/utils/
//     dash_template_evaluator.go replaces "${<input name>}" in every string
//     of the JSON with the data source the user picked for that input, and
//     refuses an import that lacks a value for any input of __inputs. Other
//     ${...} ("${datasource}", "${__from}") are left alone.
//   - Import, newer path: public/app/features/manage-dashboards/import/
//     transform.ts (applyV1DatasourceInputs) sets a datasource variable
//     whose current value is "${<input name>}" to the picked data source.
//   - File provisioning reads the JSON as it is: __inputs is ignored and a
//     placeholder stays literal.
//   - On load, a datasource variable's options are the data sources of its
//     plugin, by name (public/app/features/plugins/datasource_srv.ts,
//     getList); a saved value among them is kept, else the option whose
//     name is the saved text, else the first (scenes' MultiValueVariable
//     getStateUpdateGivenNewOptions, value then text; the older variable
//     code of public/app/features/variables/state/actions.ts,
//     validateVariableSelectionState, matches the text only).
//
// So the variable is saved with the value "${DS_INFLUXDB}", which an
// import replaces with the picked data source, and the text of the
// provisioned data source's name, which picks that data source when the
// file is loaded as it is, and the first InfluxDB data source where there
// is none of that name.
const (
	// DatasourceUID is the uid the provisioning files give the InfluxDB
	// data source; DatasourceName is its name, which the dashboards'
	// data source variable selects by default.
	DatasourceUID  = "sparkpulse-influxdb"
	DatasourceName = "InfluxDB (sparkpulse)"
	// HistoryDatasourceUID and HistoryDatasourceName are those of the
	// data source of spark_app_history's database, which the history
	// dashboard's variable selects by default.
	HistoryDatasourceUID  = "sparkpulse-influxdb-history"
	HistoryDatasourceName = "InfluxDB history (sparkpulse)"
	// DatasourceVariable is the name of every dashboard's data source
	// variable, and DatasourceInput the __inputs entry an import asks for.
	DatasourceVariable = "datasource"
	DatasourceInput    = "DS_INFLUXDB"
	// datasourcePlugin is Grafana's InfluxDB data source, queried in
	// InfluxQL on 1.8, 2.x (DBRP mappings) and 3.x.
	datasourcePlugin = "influxdb"
	// grafanaVersion is the oldest Grafana whose dashboard schema
	// (schemaVersion) the JSON is written in: 11.6 brought schema 41.
	// Later versions migrate 41 on load (42: hideFrom overrides, 43:
	// formatTime transformations, neither used here); none of those
	// migrations touches a data source reference.
	grafanaVersion = "11.6.0"
	schemaVersion  = 41
)

// datasource is the reference every panel, target, query variable and
// annotation carries.
var datasource = common.DataSourceRef{Type: cog.ToPtr(datasourcePlugin), Uid: cog.ToPtr("${" + DatasourceVariable + "}")}

// source is what a dashboard reads: the data source its variable selects
// by default, and the database that data source is of.
type source struct{ name, database string }

var (
	// metricsSource is the metrics' and the facts' database: every
	// dashboard's but the history's.
	metricsSource = source{DatasourceName, "database spark"}
	// historySource is spark_app_history's ([annotate] history-*).
	historySource = source{HistoryDatasourceName, "the database of [annotate] history-database or history-bucket, spark_history under make run"}
)

// datasourceVar is the data source variable, the first of every dashboard.
func datasourceVar(src source) dashboard.VariableModel {
	v := dashboard.NewVariableModel()
	v.Type = dashboard.VariableTypeDatasource
	v.Name = DatasourceVariable
	v.Label = cog.ToPtr("Data source")
	v.Description = cog.ToPtr("The InfluxDB data source (InfluxQL, " + src.database + ") every panel reads.")
	v.Query = &dashboard.StringOrMap{String: cog.ToPtr(datasourcePlugin)}
	v.Current = &dashboard.VariableOption{
		Text:  dashboard.StringOrArrayOfString{String: cog.ToPtr(src.name)},
		Value: dashboard.StringOrArrayOfString{String: cog.ToPtr("${" + DatasourceInput + "}")},
	}
	v.Options = []dashboard.VariableOption{}
	v.Refresh = cog.ToPtr(dashboard.VariableRefreshOnDashboardLoad)
	v.Regex = cog.ToPtr("")
	v.Hide = cog.ToPtr(dashboard.VariableHideDontHide)
	return *v
}

// input is an entry of __inputs: what Grafana's import asks for.
type input struct {
	Name        string `json:"name"`
	Label       string `json:"label"`
	Description string `json:"description"`
	Type        string `json:"type"`
	PluginID    string `json:"pluginId"`
	PluginName  string `json:"pluginName"`
}

// require is an entry of __requires: the Grafana, data source and panel
// plugins the dashboard needs.
type require struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Name    string `json:"name"`
	Version string `json:"version"`
}

// shared is a dashboard as Grafana's "Export for sharing externally"
// writes it: __inputs and __requires before the dashboard's own fields.
type shared struct {
	Inputs   []input   `json:"__inputs"`
	Requires []require `json:"__requires"`
	dashboard.Dashboard
}

// panelNames are the names of the panel plugins the dashboards use.
var panelNames = map[string]string{"stat": "Stat", "table": "Table", "timeseries": "Time series"}

// share adds __inputs and __requires to d, which reads src.
func share(d dashboard.Dashboard, src source) (shared, error) {
	reqs := []require{
		{Type: "grafana", ID: "grafana", Name: "Grafana", Version: grafanaVersion},
		{Type: "datasource", ID: datasourcePlugin, Name: "InfluxDB", Version: "1.0.0"},
	}
	var types []string
	add := func(p *dashboard.Panel) {
		if !slices.Contains(types, p.Type) {
			types = append(types, p.Type)
		}
	}
	for _, p := range d.Panels {
		switch {
		case p.Panel != nil:
			add(p.Panel)
		case p.RowPanel != nil:
			for i := range p.RowPanel.Panels {
				add(&p.RowPanel.Panels[i])
			}
		}
	}
	for _, t := range types {
		name, ok := panelNames[t]
		if !ok {
			return shared{}, fmt.Errorf("panel type %q has no name for __requires (panelNames)", t)
		}
		reqs = append(reqs, require{Type: "panel", ID: t, Name: name, Version: grafanaVersion})
	}
	slices.SortFunc(reqs, func(a, b require) int {
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	return shared{
		Inputs: []input{{
			Name: DatasourceInput, Label: "InfluxDB", Type: "datasource", PluginID: datasourcePlugin, PluginName: "InfluxDB",
			Description: "The InfluxDB data source (InfluxQL, " + src.database + ") that sparkpulse writes to: the data source variable's default.",
		}},
		Requires:  reqs,
		Dashboard: d,
	}, nil
}
