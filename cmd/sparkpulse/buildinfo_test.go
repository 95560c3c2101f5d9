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
