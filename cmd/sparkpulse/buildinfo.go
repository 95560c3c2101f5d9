package main

import "runtime/debug"

// revision is the source commit, set at build time with
// -ldflags "-X main.revision=…" (the Makefile passes git rev-parse HEAD).
var revision = ""

// revisionString is the commit the binary was built from: the ldflag, else
// the one the go command stamps into a build from a git checkout (with
// "-dirty" when the tree had changes), else "unknown".
func revisionString() string {
	if revision != "" {
		return revision
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return "unknown"
	}
	if modified == "true" {
		rev += "-dirty"
	}
	return rev
}
