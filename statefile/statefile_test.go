package statefile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// Replace writes the whole file or nothing; Read tells a missing file.
func TestReplaceRead(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	read := func() (string, bool, error) {
		var got []byte
		found, err := Read(dir, "f", func(r io.Reader) (err error) {
			got, err = io.ReadAll(r)
			return err
		})
		return string(got), found, err
	}
	if _, found, err := read(); found || err != nil {
		t.Fatalf("no file: found %v, %v", found, err)
	}
	if err := Replace(dir, "f", func(w io.Writer) error { _, err := io.WriteString(w, "one"); return err }); err != nil {
		t.Fatal(err)
	}
	failed := errors.New("disk full")
	err := Replace(dir, "f", func(w io.Writer) error {
		io.WriteString(w, "half")
		return failed
	})
	if !errors.Is(err, failed) {
		t.Errorf("failed write: %v", err)
	}
	if got, found, err := read(); got != "one" || !found || err != nil {
		t.Errorf("after a failed replace: %q, %v, %v; want the last file", got, found, err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*")); len(m) != 1 {
		t.Errorf("left %q", m)
	}
	// A link planted under the name is replaced, not written through.
	target := filepath.Join(t.TempDir(), "target")
	os.WriteFile(target, []byte("keep"), 0o600)
	os.Remove(filepath.Join(dir, "f"))
	if err := os.Symlink(target, filepath.Join(dir, "f")); err != nil {
		t.Fatal(err)
	}
	if err := Replace(dir, "f", func(w io.Writer) error { _, err := io.WriteString(w, "two"); return err }); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("written through a link: %q", b)
	}
	if got, _, _ := read(); got != "two" {
		t.Errorf("read %q", got)
	}
	// What a process killed mid-write left is removed by the next
	// Replace of the file; another file's is not.
	for _, left := range []string{"f.123.tmp", "g.456.tmp"} {
		os.WriteFile(filepath.Join(dir, left), []byte("half"), 0o600)
	}
	if err := Replace(dir, "f", func(w io.Writer) error { _, err := io.WriteString(w, "three"); return err }); err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*")); len(m) != 2 || filepath.Base(m[0]) != "f" || filepath.Base(m[1]) != "g.456.tmp" {
		t.Errorf("after a replace over a killed one's leftovers: %q", m)
	}
}
