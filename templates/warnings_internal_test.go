package templates

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

// treeResult is the template the filter tree gives parts, -1 for none.
func treeResult(e *Engine, parts []string) int {
	n := e.root
	for _, p := range parts {
		if n.leaf() {
			break
		}
		c := n.step([]byte(p))
		if c == nil {
			break
		}
		n = c
	}
	return n.tmpl
}

// TestWarningsExact checks, over every path of up to 5 parts on a small
// alphabet, that a template gets a tree warning exactly when some path
// whose most specific filter is its own is sent elsewhere. "z" appears in
// no filter, so it stands for any other value.
func TestWarningsExact(t *testing.T) {
	alphabet := []string{"a", "b", "c", "z"}
	var paths [][]string
	var grow func(p []string)
	grow = func(p []string) {
		if len(p) > 0 {
			paths = append(paths, p)
		}
		if len(p) == 5 {
			return
		}
		for _, x := range alphabet {
			grow(append(p[:len(p):len(p)], x))
		}
	}
	grow(nil)

	rng := rand.New(rand.NewSource(1))
	secs := []string{"a", "b", "c", "*", "*"}
	warned := 0
	for iter := 0; iter < 300; iter++ {
		seen := map[string]bool{}
		var tmpls []string
		for i := 1 + rng.Intn(5); i > 0; i-- {
			var f []string
			for j := 1 + rng.Intn(4); j > 0; j-- {
				f = append(f, secs[rng.Intn(len(secs))])
			}
			filter := strings.Join(f, ".")
			if !seen[filter] {
				seen[filter] = true
				tmpls = append(tmpls, filter+" measurement")
			}
		}
		e, err := Compile(tmpls, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		want := map[int]bool{}
		for _, p := range paths {
			if best := e.mostSpecific(p); best >= 0 && treeResult(e, p) != best {
				want[best] = true
			}
		}
		got := map[int]bool{}
		for _, w := range e.Warnings() {
			var n int
			if _, err := fmt.Sscanf(w, "template %d", &n); err != nil {
				t.Fatalf("warning %q: %v", w, err)
			}
			got[n-1] = true
		}
		warned += len(got)
		for i := range tmpls {
			if got[i] != want[i] {
				t.Fatalf("%q: template %d: warned %v, has misrouted paths %v\n%s", tmpls, i+1, got[i], want[i], strings.Join(e.Warnings(), "\n"))
			}
		}
	}
	if warned < 50 {
		t.Errorf("only %d templates warned: the lists do not exercise the check", warned)
	}
}
