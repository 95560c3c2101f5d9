package statefile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// LockName is the file in a state directory that its process holds
// locked while it runs.
const LockName = "LOCK"

// ErrLocked is Lock's error when another process holds the directory.
var ErrLocked = errors.New("state-dir is in use")

// Lock makes the process the state directory's one user: two processes
// on one directory would each replace the other's baselines, queue and
// journal without a word. It takes an exclusive lock on dir/LOCK, which
// the system drops when the process ends, crash or not, and writes the
// process's id into the file; another process's Lock then fails with
// ErrLocked, naming the holder. It creates dir (mode 0750) if needed.
// Unlock (or the process's end) lets it go.
func Lock(dir string) (*Locked, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("state-dir: %w", err)
	}
	path := filepath.Join(dir, LockName)
	f, err := OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("state-dir: %w", err)
	}
	held, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("state-dir: locking %s: %w", path, err)
	}
	if !held {
		b := make([]byte, 32)
		n, _ := f.ReadAt(b, 0)
		f.Close()
		holder := "another process"
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n]))); err == nil && pid > 0 {
			holder = "process " + strconv.Itoa(pid)
		}
		return nil, fmt.Errorf("%w: %s holds %s (one sparkpulse per state-dir)", ErrLocked, holder, path)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Locked{f: f}, nil
}

// Locked is a state directory held by this process.
type Locked struct{ f *os.File }

// Unlock lets the directory go. It is safe on nil.
func (l *Locked) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // which drops the lock
	l.f = nil
	return err
}
