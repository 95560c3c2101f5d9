package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docPage is a page of the documentation: its path from the repository's
// root, and its text.
type docPage struct{ path, text string }

// docPages are the README and every page under docs/.
func docPages(t *testing.T) []docPage {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []docPage
	for _, f := range append([]string{"../../README.md"}, files...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, docPage{strings.TrimPrefix(f, "../../"), string(b)})
	}
	return out
}

// Every sparkpulse command line of a shell block of the README and docs/
// names a command and flags the CLI has, so that a recipe copied from
// them runs.
func TestDocCommandLines(t *testing.T) {
	checked := 0
	for _, page := range docPages(t) {
		for _, block := range strings.Split(page.text, "```sh\n")[1:] {
			block, _, _ = strings.Cut(block, "```")
			block = strings.ReplaceAll(block, "\\\n", " ")
			for _, line := range strings.Split(block, "\n") {
				line, _, _ = strings.Cut(line, " #")
				fields := strings.Fields(line)
				if len(fields) < 2 || (fields[0] != "bin/sparkpulse" && fields[0] != "sparkpulse") {
					continue
				}
				root, _ := newRootCmd(noEnv, strings.NewReader(""), io.Discard, io.Discard)
				cmd, rest, err := root.Find(normalizeArgs(root, fields[1:]))
				if err == nil {
					err = cmd.ParseFlags(rest)
				}
				if err != nil || cmd == root {
					t.Errorf("%s: %q: %v", page.path, line, err)
				}
				checked++
			}
		}
	}
	if checked < 3 {
		t.Errorf("%d sparkpulse command lines found in the README and docs/", checked)
	}
	t.Logf("%d command lines", checked)
}
