package docs

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLinks checks every relative link of README.md and docs/*.md: the
// file it names exists, and its #anchor is a heading of that file.
func TestLinks(t *testing.T) {
	files := map[string]*mdFile{}
	for _, p := range docFiles(t) {
		files[absPath(t, p)] = readMarkdown(t, p)
	}
	n := 0
	for _, f := range files {
		for _, l := range f.links {
			if msg := checkLink(f, l.dest, files); msg != "" {
				t.Errorf("%s:%d: link %q: %s", f.path, l.line, l.dest, msg)
			}
			n++
		}
	}
	if n < 20 {
		t.Errorf("only %d links found: the Markdown was not read as meant", n)
	}
}

// checkLink says what is wrong with dest, a link in f, or "" if nothing.
// Links with a scheme, or to a host, are not followed.
func checkLink(f *mdFile, dest string, files map[string]*mdFile) string {
	u, err := url.Parse(dest)
	if err != nil {
		return err.Error()
	}
	if u.Scheme != "" || u.Host != "" || strings.HasPrefix(dest, "//") {
		return ""
	}
	target := f
	if u.Path != "" {
		p := filepath.Join(filepath.Dir(f.path), filepath.FromSlash(u.Path))
		if _, err := os.Stat(p); err != nil {
			return "no such file " + p
		}
		target = files[absPath(nil, p)]
	}
	if u.Fragment == "" {
		return ""
	}
	if target == nil {
		return "an anchor into a file that is not Markdown, or not under README.md and docs/"
	}
	if !target.anchors[u.Fragment] {
		return "no heading with the id " + u.Fragment + " in " + target.path
	}
	return ""
}

func TestGitHubSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Using an InfluxDB 1.x [[graphite]] block":    "using-an-influxdb-1x-graphite-block",
		"Accounting, right-sizing and reconciliation": "accounting-right-sizing-and-reconciliation",
		"What was verified, and how":                  "what-was-verified-and-how",
		"Spark in 5 minutes":                          "spark-in-5-minutes",
		"Spark's settings, and what they send":        "sparks-settings-and-what-they-send",
		"max_values — per tag":                        "max_values--per-tag",
		"Größe":                                       "größe",
	} {
		if got := githubSlug(in); got != want {
			t.Errorf("githubSlug(%q) = %q, want %q", in, got, want)
		}
	}
	f := parseMarkdown("x.md", []byte("# A\n\n## A\n\n## A `b`\n\n[x](#a-1) [y](#nope)\n"))
	for _, a := range []string{"a", "a-1", "a-b"} {
		if !f.anchors[a] {
			t.Errorf("anchor %q missing from %v", a, f.anchors)
		}
	}
	files := map[string]*mdFile{absPath(t, "x.md"): f}
	if msg := checkLink(f, "#a-1", files); msg != "" {
		t.Errorf("#a-1: %s", msg)
	}
	if msg := checkLink(f, "#nope", files); msg == "" {
		t.Error("#nope: not reported")
	}
	if msg := checkLink(f, "missing.md", files); msg == "" {
		t.Error("missing.md: not reported")
	}
}

// absPath is p made absolute, the key of the files read.
func absPath(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil && t != nil {
		t.Fatal(err)
	}
	return a
}
