package grafana

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// Counter queries of the Spark dashboard, as rate and total write them.
var (
	rateQuery  = regexp.MustCompile(`^SELECT sum\("delta"\)(.*?) FROM (.+?) WHERE (.+) GROUP BY time\(\$__interval\)(.*?) fill\(0\)$`)
	totalQuery = regexp.MustCompile(`^SELECT sum\("delta"\) FROM (.+?) WHERE (.+)$`)
)

// queryTimeRates derives, from the Spark dashboard's JSON, the dashboard
// for deployments whose ingest-time deltas are off (several receivers with
// no source affinity between them): every counter query takes each
// process's increase at query time instead, with non_negative_difference
// of its last value per interval (or of its raw values, for totals). The
// first interval of each process, and the part of an interval before a
// counter restarted, are not counted: the reason the main dashboard uses
// the deltas.
func queryTimeRates(spark []byte) ([]byte, error) {
	var d map[string]any
	if err := json.Unmarshal(spark, &d); err != nil {
		return nil, err
	}
	d["uid"] = sparkDashboard + "-query-time"
	d["title"] = "Spark performance (sparkpulse, query-time rates)"
	d["description"] = "The Spark performance dashboard for receivers with [deltas] off: counters are differenced at query time, per process; each process's first interval and the work before a counter restart are not counted."
	var err error
	var walk func(any)
	walk = func(o any) {
		switch v := o.(type) {
		case map[string]any:
			if q, ok := v["query"].(string); ok {
				if m := rateQuery.FindStringSubmatch(q); m != nil {
					v["query"] = fmt.Sprintf(`SELECT sum("d")%s FROM (SELECT non_negative_difference(last("value")) AS "d" FROM %s WHERE %s GROUP BY time($__interval), "process") WHERE $timeFilter GROUP BY time($__interval)%s fill(0)`,
						m[1], m[2], m[3], m[4])
				} else if m := totalQuery.FindStringSubmatch(q); m != nil {
					v["query"] = fmt.Sprintf(`SELECT sum("d") FROM (SELECT non_negative_difference("value") AS "d" FROM %s WHERE %s GROUP BY "process")`, m[1], m[2])
				}
				if q, _ := v["query"].(string); strings.Contains(q, `"delta"`) && err == nil {
					err = fmt.Errorf("grafana: a counter query not derived for query-time rates: %s", q)
				}
			}
			if desc, ok := v["description"].(string); ok {
				v["description"] = deltaNoteRE.ReplaceAllString(desc, "")
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(d)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// deltaNoteRE is the panel descriptions' note on ingest-time deltas.
var deltaNoteRE = regexp.MustCompile(regexp.QuoteMeta(deltaNote))
