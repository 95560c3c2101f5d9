// Package sparkpulse holds the version in preparation, the VERSION file,
// for the builds that are given none: a plain go build reports
// X.Y.Z-dev and the commit, as the release policy
// (docs/development.md) says a development build does.
package sparkpulse

import (
	_ "embed"
	"strings"
)

//go:embed VERSION
var versionFile string

// Version is VERSION's X.Y.Z.
func Version() string { return strings.TrimSpace(versionFile) }
