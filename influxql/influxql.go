// Package influxql quotes the names and values that sparkpulse's readers
// put into InfluxQL statements — the report, the live view, the stream's
// read-back, the dashboards and the command's checks — so that each is
// written one way. It imports only the standard library.
//
// A name (measurement, tag key, field) is quoted as an identifier, a tag
// value or other string as a string literal: InfluxQL's rules, with the
// backslash escaped first, so that any text, quotes included, reads back
// as itself.
package influxql

import "strings"

var (
	identEscaper  = strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	stringEscaper = strings.NewReplacer(`\`, `\\`, `'`, `\'`)
)

// QuoteIdent quotes an identifier: a measurement, tag or field.
func QuoteIdent(s string) string { return `"` + identEscaper.Replace(s) + `"` }

// QuoteIdents quotes identifiers and joins them with ", ", for a SELECT's
// fields, a FROM's measurements or a GROUP BY's tags.
func QuoteIdents(names ...string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = QuoteIdent(n)
	}
	return strings.Join(q, ", ")
}

// QuoteString quotes a string literal, such as a tag value.
func QuoteString(s string) string { return `'` + stringEscaper.Replace(s) + `'` }
