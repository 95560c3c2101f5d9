package docs

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"
)

// mdFile is what the tests read of one Markdown file, parsed as GitHub
// renders it (CommonMark with GFM tables).
type mdFile struct {
	path    string
	anchors map[string]bool // GitHub's heading ids
	links   []mdLink
	tables  []mdTable
	fences  []mdFence
}

type mdLink struct {
	dest string
	line int
}

// mdTable is a GFM table: its header and rows of cells.
type mdTable struct {
	line   int
	header []mdCell
	rows   [][]mdCell
}

// mdCell is a table cell's text and its code spans, in order.
type mdCell struct {
	text  string
	codes []string
}

type mdFence struct {
	lang string
	body string
	line int
}

var markdown = goldmark.New(goldmark.WithExtensions(extension.Table))

// docFiles are README.md and every Markdown file under docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.md")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Markdown files in docs/: %v", err)
	}
	return append([]string{"../README.md"}, files...)
}

func readMarkdown(t *testing.T, path string) *mdFile {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return parseMarkdown(path, src)
}

func parseMarkdown(path string, src []byte) *mdFile {
	f := &mdFile{path: path, anchors: map[string]bool{}}
	lineOf := func(offset int) int { return bytes.Count(src[:offset], []byte("\n")) + 1 }
	// blockLine is the first line of the block that holds n.
	blockLine := func(n ast.Node) int {
		for p := n; p != nil; p = p.Parent() {
			if p.Type() == ast.TypeBlock && p.Lines().Len() > 0 {
				return lineOf(p.Lines().At(0).Start)
			}
		}
		line := 0 // a table's lines are its cells'
		ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
			if t, ok := c.(*ast.Text); ok && entering {
				line = lineOf(t.Segment.Start)
				return ast.WalkStop, nil
			}
			return ast.WalkContinue, nil
		})
		return line
	}
	seen := map[string]int{}
	doc := markdown.Parser().Parse(text.NewReader(src))
	ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Heading:
			slug := githubSlug(inlineText(n, src))
			if k := seen[slug]; k > 0 {
				f.anchors[slug+"-"+strconv.Itoa(k)] = true
			} else {
				f.anchors[slug] = true
			}
			seen[slug]++
		case *ast.Link:
			f.links = append(f.links, mdLink{string(n.Destination), blockLine(n)})
		case *ast.Image:
			f.links = append(f.links, mdLink{string(n.Destination), blockLine(n)})
		case *ast.FencedCodeBlock:
			var b strings.Builder
			for i := 0; i < n.Lines().Len(); i++ {
				seg := n.Lines().At(i)
				b.Write(seg.Value(src))
			}
			line := 0
			if n.Lines().Len() > 0 {
				line = lineOf(n.Lines().At(0).Start) - 1
			}
			f.fences = append(f.fences, mdFence{string(n.Language(src)), b.String(), line})
			return ast.WalkSkipChildren, nil
		case *east.Table:
			tb := mdTable{line: blockLine(n)}
			for r := n.FirstChild(); r != nil; r = r.NextSibling() {
				var row []mdCell
				for c := r.FirstChild(); c != nil; c = c.NextSibling() {
					row = append(row, cellOf(c, src))
				}
				if _, ok := r.(*east.TableHeader); ok {
					tb.header = row
				} else {
					tb.rows = append(tb.rows, row)
				}
			}
			f.tables = append(f.tables, tb)
		}
		return ast.WalkContinue, nil
	})
	return f
}

func cellOf(c ast.Node, src []byte) mdCell {
	cell := mdCell{text: inlineText(c, src)}
	ast.Walk(c, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if cs, ok := n.(*ast.CodeSpan); ok && entering {
			cell.codes = append(cell.codes, inlineText(cs, src))
			return ast.WalkSkipChildren, nil
		}
		return ast.WalkContinue, nil
	})
	return cell
}

// inlineText is the text content of n, as a browser shows it.
func inlineText(n ast.Node, src []byte) string {
	var b strings.Builder
	ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch c := c.(type) {
		case *ast.Text:
			b.Write(c.Segment.Value(src))
			if c.SoftLineBreak() || c.HardLineBreak() {
				b.WriteByte(' ')
			}
		case *ast.String:
			b.Write(c.Value)
		case *ast.RawHTML:
			return ast.WalkSkipChildren, nil
		}
		return ast.WalkContinue, nil
	})
	return b.String()
}

// githubSlug is the id GitHub gives a heading: its text in lower case,
// without punctuation other than hyphens and underscores, each space a
// hyphen. Repeats get -1, -2, … (see parseMarkdown).
func githubSlug(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(s)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
