// Package docs is sparkpulse's documentation, in Markdown, and its tests:
// they fail when a relative link or anchor of README.md or docs/*.md leads
// nowhere, and when a config key, a measurement, a tag or a field is in
// the code and not in the docs, or in the docs and not in the code (see
// development.md, "The documentation").
package docs
