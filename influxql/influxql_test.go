package influxql

import "testing"

func TestQuote(t *testing.T) {
	for _, c := range []struct{ in, ident, str string }{
		{"spark_app", `"spark_app"`, `'spark_app'`},
		{`a"b`, `"a\"b"`, `'a"b'`},
		{`it's`, `"it's"`, `'it\'s'`},
		{`back\slash`, `"back\\slash"`, `'back\\slash'`},
		{`\"`, `"\\\""`, `'\\"'`},
		{"", `""`, `''`},
	} {
		if got := QuoteIdent(c.in); got != c.ident {
			t.Errorf("QuoteIdent(%q) = %s, want %s", c.in, got, c.ident)
		}
		if got := QuoteString(c.in); got != c.str {
			t.Errorf("QuoteString(%q) = %s, want %s", c.in, got, c.str)
		}
	}
	if got := QuoteIdents("applicationid", "process"); got != `"applicationid", "process"` {
		t.Errorf("QuoteIdents = %s", got)
	}
}
