package queue

import (
	"slices"
	"strings"
	"testing"
)

func TestLines(t *testing.T) {
	l := Scan([]byte("a 1\nbb 2\nccc 3\nd"))
	if l.Len() != 3 || string(l.Data) != "a 1\nbb 2\nccc 3\n" {
		t.Fatalf("Scan: %d lines, %q", l.Len(), l.Data)
	}
	var got []string
	for i := range l.Len() {
		got = append(got, string(l.Line(i)))
	}
	if !slices.Equal(got, []string{"a 1\n", "bb 2\n", "ccc 3\n"}) {
		t.Errorf("lines %q", got)
	}
	head, tail := l.Cut(1)
	if head.Len() != 1 || string(head.Data) != "a 1\n" || tail.Len() != 2 || string(tail.Line(0)) != "bb 2\n" || string(tail.Line(1)) != "ccc 3\n" {
		t.Errorf("Cut(1): %q %q", head.Data, tail.Data)
	}
	h2, t2 := tail.Cut(1)
	if string(h2.Line(0)) != "bb 2\n" || string(t2.Line(0)) != "ccc 3\n" || t2.Len() != 1 {
		t.Errorf("Cut of a Cut: %q %q", h2.Data, t2.Data)
	}
	// Appending to a head must not overwrite the tail's bytes.
	head.Append([]byte("zz 9\n"), 2)
	if string(tail.Line(0)) != "bb 2\n" || string(head.Line(1)) != "zz 9\n" {
		t.Errorf("Append to a head: head %q, tail %q", head.Data, tail.Data)
	}
	if n := l.Within(9); n != 2 || l.Within(8) != 1 || l.Within(0) != 0 || l.Within(100) != 3 || tail.Within(5) != 1 {
		t.Errorf("Within: %d %d %d %d %d", n, l.Within(8), l.Within(0), l.Within(100), tail.Within(5))
	}
	var all Lines
	all.AppendLines(t2)
	all.AppendLines(h2)
	if all.Len() != 2 || string(all.Line(0)) != "ccc 3\n" || string(all.Line(1)) != "bb 2\n" {
		t.Errorf("AppendLines: %q %v", all.Data, all.Ends)
	}
	if string(all.Key(0)) != "ccc" || string(all.Key(1)) != "bb" || string(head.Key(1)) != "zz" || string(t2.Key(0)) != "ccc" {
		t.Errorf("keys after Cut and Append: %q %q %q %q", all.Key(0), all.Key(1), head.Key(1), t2.Key(0))
	}
	var one Lines
	one.AppendLine(l, 1)
	one.AppendLine(tail, 1)
	if one.Len() != 2 || string(one.Line(1)) != "ccc 3\n" || string(one.Key(0)) != "bb" || string(one.Key(1)) != "ccc" {
		t.Errorf("AppendLine: %q %v %v", one.Data, one.Ends, one.Keys)
	}
	if e, _ := Scan(nil).Cut(0); e.Len() != 0 || Scan([]byte(strings.Repeat("x", 5))).Len() != 0 {
		t.Error("empty runs")
	}
}

// A series key ends at the first space no backslash escapes; a line
// without one (not line protocol) is all key.
func TestScanKeys(t *testing.T) {
	for _, c := range []struct{ line, key string }{
		{"m f=1 1\n", "m"},
		{"m,t=a f=1 1\n", "m,t=a"},
		{`m\ x,t=a\ b,u=c\\ f=1 1` + "\n", `m\ x,t=a\ b,u=c\\`},
		{"m,t=a f=\"s p\" 1\n", "m,t=a"},
		{"nospace\n", "nospace"},
		{"\n", ""},
	} {
		l := Scan([]byte("x y 1\n" + c.line))
		if l.Len() != 2 || string(l.Key(1)) != c.key || string(l.Key(0)) != "x" {
			t.Errorf("Scan(%q): key %q, want %q", c.line, l.Key(1), c.key)
		}
	}
}
