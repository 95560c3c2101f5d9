package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every sparkpulse command line of a shell block of the README and docs/
// names a command and flags the CLI has, so that a recipe copied from
// them runs.
func TestDocCommandLines(t *testing.T) {
	files, _ := filepath.Glob("../../docs/*.md")
	checked := 0
	for _, f := range append([]string{"../../README.md"}, files...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, block := range strings.Split(string(b), "```sh\n")[1:] {
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
					t.Errorf("%s: %q: %v", strings.TrimPrefix(f, "../../"), line, err)
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
