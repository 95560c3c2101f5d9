package grafana

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Variable is a query or custom variable of a dashboard.
type Variable struct {
	Name       string
	Query      string   // a query variable's InfluxQL
	Values     []string // a custom variable's values
	Regex      string   // applied to each result, as Grafana does; a capture group gives the value
	Multi      bool
	IncludeAll bool
	AllValue   string
}

// Query is one InfluxQL query of a dashboard and where it is.
type Query struct {
	Where  string // e.g. `panel "Task CPU (cores)" A`, `annotation "Jobs"`
	Text   string
	Repeat string // the variable by which its row is repeated, if any
	// Annotation queries return title, text and end columns.
	Annotation bool
}

// Parse reads a dashboard's JSON (as Files writes it) and returns its
// query and custom variables, in order, and every panel and annotation
// query. The data source variable is left out: it holds no query, and no
// query refers to it.
func Parse(b []byte) ([]Variable, []Query, error) {
	var d struct {
		Templating struct {
			List []struct {
				Type, Name, Regex, AllValue string
				Query                       any
				Multi, IncludeAll           bool
			}
		}
		Annotations struct {
			List []struct {
				Name   string
				Target struct{ Query string }
			}
		}
		Panels []panelJSON
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, nil, err
	}
	var vars []Variable
	for _, v := range d.Templating.List {
		q, _ := v.Query.(string)
		nv := Variable{Name: v.Name, Regex: v.Regex, Multi: v.Multi, IncludeAll: v.IncludeAll, AllValue: v.AllValue}
		switch v.Type {
		case "query":
			nv.Query = q
		case "custom":
			nv.Values = strings.Split(q, ",")
		default:
			continue
		}
		vars = append(vars, nv)
	}
	var qs []Query
	for _, a := range d.Annotations.List {
		qs = append(qs, Query{Where: fmt.Sprintf("annotation %q", a.Name), Text: a.Target.Query, Annotation: true})
	}
	var walk func(ps []panelJSON, repeat string)
	walk = func(ps []panelJSON, repeat string) {
		for _, p := range ps {
			if p.Type == "row" {
				walk(p.Panels, p.Repeat)
				continue
			}
			for _, t := range p.Targets {
				qs = append(qs, Query{Where: fmt.Sprintf("panel %q %s", p.Title, t.RefID), Text: t.Query, Repeat: repeat})
			}
		}
	}
	walk(d.Panels, "")
	return vars, qs, nil
}

type panelJSON struct {
	Type, Title, Repeat string
	Targets             []struct {
		RefID string `json:"refId"`
		Query string
	}
	Panels []panelJSON
}

// Values are the selected values of variables; AllSelected marks a
// variable whose All option is selected.
type Values struct {
	Selected    map[string][]string
	AllSelected map[string]bool
}

var varRef = regexp.MustCompile(`\$\{?(__interval_ms|__interval|timeFilter|[A-Za-z_][A-Za-z0-9_]*)\}?`)

// Interpolate fills a query's variables the way Grafana's InfluxDB data
// source does: $timeFilter with the time range, ${__from} and ${__to} with
// its ends in epoch milliseconds, $__interval and
// $__interval_ms with the interval, a variable with its value escaped for
// a regular expression, several values as (a|b), and All as its allValue.
// It fails on a variable it has no value for.
func Interpolate(q string, vars []Variable, vals Values, from, to time.Time, interval time.Duration) (string, error) {
	byName := map[string]Variable{}
	for _, v := range vars {
		byName[v.Name] = v
	}
	var missing []string
	out := varRef.ReplaceAllStringFunc(q, func(ref string) string {
		name := strings.Trim(ref, "${}")
		switch name {
		case "timeFilter":
			return fmt.Sprintf("time >= %dms and time <= %dms", from.UnixMilli(), to.UnixMilli())
		case "__interval":
			return (interval).String()
		case "__interval_ms":
			return strconv.FormatInt(interval.Milliseconds(), 10)
		case "__from":
			return strconv.FormatInt(from.UnixMilli(), 10)
		case "__to":
			return strconv.FormatInt(to.UnixMilli(), 10)
		}
		v, ok := byName[name]
		if !ok {
			return ref // not a variable: InfluxQL's own $ (none in our queries)
		}
		if vals.AllSelected[name] {
			return v.AllValue
		}
		sel := vals.Selected[name]
		if len(sel) == 0 {
			missing = append(missing, name)
			return ref
		}
		esc := make([]string, len(sel))
		for i, s := range sel {
			esc[i] = regexp.QuoteMeta(s)
		}
		if len(esc) == 1 {
			return esc[0]
		}
		return "(" + strings.Join(esc, "|") + ")"
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("no value for variable(s) %s in %q", strings.Join(missing, ", "), q)
	}
	return out, nil
}

// ApplyRegex turns raw variable query results into values with the
// variable's regex, as Grafana does: results that do not match are left
// out, and the first capture group, if any, is the value.
func (v Variable) ApplyRegex(results []string) ([]string, error) {
	if v.Regex == "" {
		return results, nil
	}
	re, err := regexp.Compile(strings.TrimSuffix(strings.TrimPrefix(v.Regex, "/"), "/"))
	if err != nil {
		return nil, fmt.Errorf("variable %s: regex %q: %w", v.Name, v.Regex, err)
	}
	var out []string
	for _, r := range results {
		m := re.FindStringSubmatch(r)
		switch {
		case m == nil:
		case len(m) > 1:
			out = append(out, m[1])
		default:
			out = append(out, r)
		}
	}
	return out, nil
}

// fieldList is the SELECT list of the fields or tags names, each quoted
// as an InfluxQL identifier: "a", "b".
func fieldList(names ...string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = m(n)
	}
	return strings.Join(quoted, ", ")
}
