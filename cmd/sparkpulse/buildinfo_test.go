package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestChangelogVersion: the VERSION file is a semver release version, and
// CHANGELOG.md's newest entry is for it, dated or Unreleased.
func TestChangelogVersion(t *testing.T) {
	b, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(b))
	if !regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$`).MatchString(version) {
		t.Fatalf("VERSION %q is not MAJOR.MINOR.PATCH", version)
	}
	b, err = os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	entry := regexp.MustCompile(`(?m)^## \[([^\]]+)\] - (\d{4}-\d{2}-\d{2}|Unreleased)$`)
	m := entry.FindStringSubmatch(string(b))
	if m == nil {
		t.Fatal(`CHANGELOG.md has no entry "## [X.Y.Z] - YYYY-MM-DD" or "## [X.Y.Z] - Unreleased"`)
	}
	if m[1] != version {
		t.Errorf("CHANGELOG.md's newest entry is %s, VERSION says %s", m[1], version)
	}
	if first := regexp.MustCompile(`(?m)^## .*$`).FindString(string(b)); first != m[0] {
		t.Errorf("CHANGELOG.md's first entry %q is not of the form \"## [X.Y.Z] - YYYY-MM-DD\"", first)
	}
}

// A build given no version (a plain go build) reports the version in
// preparation as a development build, never a bare "dev"; the go
// command's pseudo-versions are no release.
func TestVersionString(t *testing.T) {
	b, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	if version != "" {
		t.Skipf("built with -X main.version=%s", version)
	}
	if got, want := versionString(), strings.TrimSpace(string(b))+"-dev"; !strings.HasPrefix(got, want) {
		t.Errorf("versionString() = %q, want %q…", got, want)
	}
	for v, pseudo := range map[string]bool{
		"v0.0.0-20261129101500-abcdef123456":             true,
		"v0.0.0-20261129101500-abcdef123456+dirty":       true,
		"v0.2.1-0.20261129101500-abcdef123456":           true,
		"v0.2.0":                                         false,
		"v0.2.0-rc.1":                                    false,
		"v1.2.3-pre.0.20261129101500-abcdef123456+dirty": true,
	} {
		if pseudoVersion.MatchString(v) != pseudo {
			t.Errorf("%s: pseudo-version %v, want %v", v, !pseudo, pseudo)
		}
	}
}
