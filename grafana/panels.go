package grafana

import (
	"fmt"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"

	"github.com/sparkpulse/sparkpulse/influxql"
	"github.com/sparkpulse/sparkpulse/schema"
)

// WHERE clause parts of the Spark dashboard. Variables sit in regular
// expressions, which Grafana fills with escaped values, or an All value.
var (
	byApp         = m(schema.TagApplicationID) + ` =~ /^$app$/`
	byProcess     = m(schema.TagProcess) + ` =~ /^$process$/`
	executorsOnly = byProcess + ` AND ` + m(schema.TagProcess) + ` != 'driver'`
	driverOnly    = m(schema.TagProcess) + ` = 'driver'`
	// overlaps keeps the facts of items that overlap the range: ended ones
	// that end in it or after it (they began before its end: factsRange),
	// and start marks (which have no end).
	overlaps = fmt.Sprintf(`(%s >= ${__from} OR %s = 'start')`, m(schema.FieldEndMs), m(schema.FieldFact))
)

const (
	timeFilter = `$timeFilter`
	// factsRange is the time range of annotation facts, which sit at their
	// item's start: from a day before the dashboard's range, so that jobs,
	// stages and executors that began before it still show (rule 3).
	factsRange = `time >= ${__from}ms - 1d AND time <= ${__to}ms`
)

// where joins conditions and the time filter.
func where(conds ...string) string {
	return strings.Join(append(conds, timeFilter), " AND ")
}

// scale turns a sum of deltas over one $__interval bucket into a rate:
// per second for counts and bytes, or "cores" (time spent per unit of
// time) for durations in ms or ns.
type scale string

const (
	perSecond scale = ` / $__interval_ms * 1000`
	msCores   scale = ` / $__interval_ms`
	nsCores   scale = ` / $__interval_ms / 1000000`
	perMinute scale = ` / $__interval_ms * 60000`
)

// m and ms quote identifiers for the dense query text of the dashboards,
// as every reader of sparkpulse quotes them (package influxql).
var (
	m  = influxql.QuoteIdent
	ms = influxql.QuoteIdents
)

// panel is a panel before it is placed on the grid.
type panel = cog.Builder[dashboard.Panel]

// series is a time series panel, half a row wide, with a legend and the
// reporting period (the period variable, Spark's 10 s by default) as its
// smallest interval.
func series(title, unit, desc string, targets ...*influxQLBuilder) *timeseries.PanelBuilder {
	b := timeseries.NewPanelBuilder().
		Title(title).
		Description(desc).
		Datasource(datasource).
		Unit(unit).
		Span(12).
		Height(8).
		Interval("$period").
		LineWidth(1).
		FillOpacity(10).
		ShowPoints(common.VisibilityModeNever).
		Legend(common.NewVizLegendOptionsBuilder().
			ShowLegend(true).
			DisplayMode(common.LegendDisplayModeList).
			Placement(common.LegendPlacementBottom)).
		Tooltip(common.NewVizTooltipOptionsBuilder().
			Mode(common.TooltipDisplayModeMulti).
			Sort(common.SortOrderDescending))
	for i, t := range targets {
		if t.q.RefID == "" {
			t.q.RefID = string(rune('A' + i))
		}
		b.WithTarget(t)
	}
	return b
}

// stacked makes a series panel stack its series.
func stacked(b *timeseries.PanelBuilder) *timeseries.PanelBuilder {
	return b.Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal)).FillOpacity(40)
}

// single is a stat panel showing one number.
func single(title, unit, desc, q string) *stat.PanelBuilder {
	return stat.NewPanelBuilder().
		Title(title).
		Description(desc).
		Datasource(datasource).
		Unit(unit).
		Span(4).
		Height(4).
		GraphMode(common.BigValueGraphModeNone).
		Orientation(common.VizOrientationAuto).
		ColorMode(common.BigValueColorModeNone).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}).Values(false)).
		WithTarget(&influxQLBuilder{InfluxQL{RefID: "A", Query: q, RawQuery: true, ResultFormat: "time_series"}})
}

// queryVar is a variable filled by an InfluxQL query.
func queryVar(name, label, q string) *dashboard.QueryVariableBuilder {
	return dashboard.NewQueryVariableBuilder(name).
		Label(label).
		Datasource(datasource).
		Query(dashboard.StringOrMap{String: cog.ToPtr(q)}).
		Definition(q).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged)
}

// all adds an All option whose value is a regular expression.
func all(v *dashboard.QueryVariableBuilder, allValue string) *dashboard.QueryVariableBuilder {
	return v.Multi(true).IncludeAll(true).AllValue(allValue).
		Current(dashboard.VariableOption{
			Selected: cog.ToPtr(true),
			Text:     dashboard.StringOrArrayOfString{ArrayOfString: []string{"All"}},
			Value:    dashboard.StringOrArrayOfString{ArrayOfString: []string{"$__all"}},
		})
}

// annotation draws the facts of an annotation measurement: an item's end
// (or loss) as a region from its start to end_ms, an item seen running as
// a mark at its start (it has no end_ms), each with its title and text.
func annotation(name, color, measurement string, enable bool) *dashboard.AnnotationQueryBuilder {
	q := fmt.Sprintf(`SELECT %s FROM %s WHERE %s AND %s AND %s`, ms(schema.FieldTitle, schema.FieldText, schema.FieldEndMs, schema.FieldStatus), m(measurement), byApp, factsRange, overlaps)
	return dashboard.NewAnnotationQueryBuilder().
		Name(name).
		Datasource(datasource).
		Enable(enable).
		IconColor(color).
		Target(&influxQLBuilder{InfluxQL{
			RefID: "Anno", Query: q, RawQuery: true, ResultFormat: "table",
			FromAnnotations: true, TitleColumn: schema.FieldTitle, TextColumn: schema.FieldText, TimeEndColumn: schema.FieldEndMs, TagsColumn: schema.FieldStatus,
			Limit: 500,
		}})
}

// column is a column of a table panel: the field its query returns, the
// name shown and the unit ("" for none).
type column struct {
	field, name, unit string
	expr              string // what the query selects as field; "" for the field itself
}

// columnsTable is a full-width table of one raw InfluxQL query, made by
// query from the SELECT list of cols; sorted by the column named sortBy,
// largest first; its time column shown as timeName.
func columnsTable(title, desc string, height uint32, cols []column, query func(selectList string) string, sortBy, timeName string) *table.PanelBuilder {
	var fields []string
	for _, c := range cols {
		if c.expr == "" {
			fields = append(fields, m(c.field))
		} else {
			fields = append(fields, c.expr+" AS "+m(c.field))
		}
	}
	t := fullTable(title, desc, height, sortBy, query(strings.Join(fields, ", "))).
		OverrideByName("Time", []dashboard.DynamicConfigValue{{Id: "displayName", Value: timeName}})
	return nameColumns(t, cols)
}

// groupTable is a full-width table of one raw InfluxQL query q of grouped
// figures, largest sortBy first, its time column hidden and its columns
// cols shown by their names.
func groupTable(title, desc string, height uint32, sortBy, q string, cols []column) *table.PanelBuilder {
	t := fullTable(title, desc, height, sortBy, q).
		OverrideByName("Time", []dashboard.DynamicConfigValue{{Id: "custom.hidden", Value: true}})
	return nameColumns(t, cols)
}

// fullTable is a full-width table of the raw InfluxQL query q, largest
// sortBy first, without a footer.
func fullTable(title, desc string, height uint32, sortBy, q string) *table.PanelBuilder {
	return table.NewPanelBuilder().
		Title(title).
		Description(desc).
		Datasource(datasource).
		Span(24).
		Height(height).
		SortBy([]cog.Builder[common.TableSortByFieldState]{
			common.NewTableSortByFieldStateBuilder().DisplayName(sortBy).Desc(true),
		}).
		Footer(common.NewTableFooterOptionsBuilder().Show(false).Reducer([]string{})).
		WithTarget(&influxQLBuilder{InfluxQL{RefID: "A", Query: q, RawQuery: true, ResultFormat: "table"}})
}

// nameColumns shows each column of t by its name, in its unit if it has
// one.
func nameColumns(t *table.PanelBuilder, cols []column) *table.PanelBuilder {
	for _, c := range cols {
		props := []dashboard.DynamicConfigValue{{Id: "displayName", Value: c.name}}
		if c.unit != "" {
			props = append(props, dashboard.DynamicConfigValue{Id: "unit", Value: c.unit})
		}
		t.OverrideByName(c.field, props)
	}
	return t
}
