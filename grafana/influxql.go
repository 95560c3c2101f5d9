package grafana

import (
	"encoding/json"
	"errors"
	"reflect"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
)

// InfluxQL is a raw InfluxQL query of Grafana's InfluxDB data source, as a
// panel target or as the target of an annotation. The SDK has no InfluxDB
// query type; the JSON field names are those the data source reads.
type InfluxQL struct {
	RefID        string `json:"refId,omitempty"`
	Query        string `json:"query"`
	RawQuery     bool   `json:"rawQuery"`
	ResultFormat string `json:"resultFormat,omitempty"` // time_series or table
	Alias        string `json:"alias,omitempty"`        // legend, e.g. "$tag_process"
	Hide         bool   `json:"hide,omitempty"`
	// Datasource is a panel target's data source, the panel's own.
	Datasource *common.DataSourceRef `json:"datasource,omitempty"`

	// Annotation queries: which columns hold the title, text, end time
	// (epoch ms, for regions) and tags.
	FromAnnotations bool   `json:"fromAnnotations,omitempty"`
	TitleColumn     string `json:"titleColumn,omitempty"`
	TextColumn      string `json:"textColumn,omitempty"`
	TimeEndColumn   string `json:"timeEndColumn,omitempty"`
	TagsColumn      string `json:"tagsColumn,omitempty"`
	Limit           int    `json:"limit,omitempty"`
}

// ImplementsDataqueryVariant marks InfluxQL as a data query for the SDK.
func (InfluxQL) ImplementsDataqueryVariant() {}

// DataqueryType is the data source plugin id.
func (InfluxQL) DataqueryType() string { return "influxdb" }

// Equals implements variants.Dataquery.
func (q InfluxQL) Equals(other variants.Dataquery) bool {
	o, ok := other.(InfluxQL)
	return ok && reflect.DeepEqual(o, q)
}

// Validate implements variants.Dataquery.
func (q InfluxQL) Validate() error {
	if q.Query == "" {
		return errors.New("influxql: empty query")
	}
	return nil
}

// InfluxQLVariant lets the SDK unmarshal dashboards holding InfluxQL
// queries (cog.NewRuntime().RegisterDataqueryVariant).
func InfluxQLVariant() variants.DataqueryConfig {
	return variants.DataqueryConfig{
		Identifier: "influxdb",
		DataqueryUnmarshaler: func(raw []byte) (variants.Dataquery, error) {
			var q InfluxQL
			err := json.Unmarshal(raw, &q)
			return q, err
		},
	}
}

// influxQLBuilder builds an InfluxQL query for panels and annotations.
type influxQLBuilder struct{ q InfluxQL }

var _ cog.Builder[variants.Dataquery] = (*influxQLBuilder)(nil)

func (b *influxQLBuilder) Build() (variants.Dataquery, error) { return b.q, b.q.Validate() }

// query starts a raw time-series query.
func query(refID, text, alias string) *influxQLBuilder {
	return &influxQLBuilder{InfluxQL{RefID: refID, Query: text, RawQuery: true, ResultFormat: "time_series", Alias: alias}}
}
