// Package statefile reads and replaces the files sparkpulse keeps in its
// state-dir across restarts (the delta baselines, the annotation facts).
//
// Replace never leaves a file half written: what it writes goes to a fresh
// temporary file in the same directory (created anew, so never through a
// link planted under the file's name), is flushed and synced to disk, and
// only then renamed over the file; the directory is synced after. A reader sees the old file or the new
// one, whole, even after a crash or a power loss. Read tells a missing
// file (none saved yet) from one that cannot be opened.
//
// Every file in state-dir is opened with OpenFile, which never follows a
// symbolic link: a link planted under a state file's name is an error
// naming the file, and its target is neither read nor written.
package statefile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Replace replaces the file name in dir with what write writes: under a
// fresh temporary name, name.<random>.tmp (never through a planted link),
// synced, then renamed into place. It creates dir (mode 0750) if needed,
// and first removes the temporary files an earlier Replace of name left
// when its process was killed mid-write: the directory has one process
// (Lock), so they are no other writer's.
func Replace(dir, name string, write func(io.Writer) error) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("state-dir: %w", err)
	}
	if left, err := filepath.Glob(filepath.Join(dir, name+".*.tmp")); err == nil {
		for _, f := range left {
			os.Remove(f)
		}
	}
	tmp, err := os.CreateTemp(dir, name+".*.tmp")
	if err != nil {
		return fmt.Errorf("saving %s: %w", name, err)
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	bw := bufio.NewWriter(tmp)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, name))
	}
	if err == nil {
		err = SyncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("saving %s to %s: %w", name, tmp.Name(), err)
	}
	return nil
}

// SyncDir flushes dir's entries to disk: after a rename, so that a power
// loss does not bring the old file back, or none.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// OpenFile is os.OpenFile that fails, naming the file, where path is a
// symbolic link.
func OpenFile(path string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|noFollow, perm)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&os.ModeSymlink != 0 {
			return nil, fmt.Errorf("%s is a symbolic link: a state file is never opened through one: %w", path, err)
		}
	}
	return f, err
}

// Read calls read with the file name in dir; false when there is none.
func Read(dir, name string, read func(io.Reader) error) (bool, error) {
	f, err := OpenFile(filepath.Join(dir, name), os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	return true, read(bufio.NewReader(f))
}
