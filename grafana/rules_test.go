package grafana

import (
	"regexp"
	"strings"
	"testing"
)

// The rules every generated query keeps so that it answers the same on
// InfluxDB 1.8, 2.x and 3.x (package documentation, "Portable queries").
// TestPortableQueries checks them on every committed dashboard, the
// query-time variant and health included.

var (
	showRE       = regexp.MustCompile(`(?i)^\s*SHOW\s+(\w+)(\s+\w+)?`)
	fromRE       = regexp.MustCompile(`(?i)\bFROM\s+("[^"]+"|/[^/]+/)`)
	selectFromRE = regexp.MustCompile(`(?i)\bFROM\s+("[^"]+"|/(?:[^/\\]|\\.)+/)(.*?)(\)|$)`)
	tagCondRE    = regexp.MustCompile(`"(\w+)"\s*(=~|!~|=|!=|<>)`)
)

// absentTags are tags that a Spark measurement may lack: the GraphiteSink
// prefix, and the application name and start that only the
// "application" namespace carries.
var absentTags = map[string]bool{"username": true, "appname": true, "appstart": true}

// boundedInTime is what bounds a query in time: the dashboard's range, or
// the facts' range, which starts a day earlier.
func boundedInTime(s string) bool {
	return strings.Contains(s, "$timeFilter") || strings.Contains(s, factsRange)
}

// violations returns the rules a query breaks.
func violations(text string) []string {
	var out []string
	// Rule 1: no condition on a tag a measurement may lack.
	for _, m := range tagCondRE.FindAllStringSubmatch(text, -1) {
		if absentTags[m[1]] {
			out = append(out, "rule 1: a condition on "+m[1]+", which a measurement may lack")
		}
	}
	if m := showRE.FindStringSubmatch(text); m != nil {
		// Rule 2: SHOW TAG VALUES only, with FROM and the time range.
		switch kind := strings.ToUpper(m[1] + m[2]); {
		case kind != "TAG VALUES":
			out = append(out, "rule 2: SHOW "+kind+", which InfluxDB 1.x answers for all time and 3.x for the last day only")
		case !fromRE.MatchString(text):
			out = append(out, "rule 2: SHOW TAG VALUES without FROM scans every table")
		case !boundedInTime(text):
			out = append(out, "rule 2: SHOW TAG VALUES without a time range")
		}
		return out
	}
	// Rule 3: every SELECT from a measurement is bounded in time.
	for _, m := range selectFromRE.FindAllStringSubmatch(text, -1) {
		if !boundedInTime(m[2]) {
			out = append(out, "rule 3: a SELECT from "+m[1]+" not bounded in time")
		}
	}
	// Rule 4: nothing relies on a point being written again: an executor's
	// rows are its latest snapshot.
	if strings.Contains(text, `FROM "spark_executor"`) && (!strings.Contains(text, "last(") || !strings.Contains(text, `GROUP BY "process"`)) {
		out = append(out, "rule 4: spark_executor holds a snapshot per change; read the last per process")
	}
	return out
}

func TestPortableQueries(t *testing.T) {
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for name, body := range files {
		vars, queries, err := Parse(body)
		if err != nil {
			t.Fatal(err)
		}
		check := func(where, text string) {
			checked++
			for _, v := range violations(text) {
				t.Errorf("%s: %s: %s: %s", name, where, v, text)
			}
		}
		for _, v := range vars {
			if v.Query != "" {
				check("variable "+v.Name, v.Query)
			}
		}
		for _, q := range queries {
			check(q.Where, q.Text)
		}
	}
	if checked < 250 {
		t.Errorf("%d queries checked", checked)
	}
}

// The rules catch what they are for.
func TestPortableRulesCatch(t *testing.T) {
	for _, bad := range []string{
		`SHOW TAG VALUES WITH KEY = "applicationid" WHERE $timeFilter`,
		`SHOW TAG VALUES FROM "x" WITH KEY = "applicationid"`,
		`SHOW MEASUREMENTS WITH MEASUREMENT =~ /^filesystem/`,
		`SELECT "title" FROM "spark_sizing" WHERE "applicationid" =~ /^$app$/`,
		`SELECT sum("d") FROM (SELECT last("value") AS "d" FROM "x" WHERE "applicationid" =~ /^$app$/) WHERE $timeFilter`,
		`SHOW TAG VALUES FROM "x" WITH KEY = "applicationid" WHERE "username" =~ /^$username$/ AND $timeFilter`,
		`SELECT "status" FROM "spark_executor" WHERE "applicationid" =~ /^$app$/ AND $timeFilter`,
	} {
		if len(violations(bad)) == 0 {
			t.Errorf("not caught: %s", bad)
		}
	}
}
