package statefile

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// One holder at a time: a second Lock on the directory fails, naming the
// holder's process, until the first lets it go.
func TestLock(t *testing.T) {
	dir := t.TempDir() + "/state"
	l, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Lock(dir)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), fmt.Sprintf("process %d holds %s/LOCK", os.Getpid(), dir)) {
		t.Fatalf("a second lock: %v", err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	l2, err := Lock(dir)
	if err != nil {
		t.Fatalf("after the first let go: %v", err)
	}
	l2.Unlock()
	var none *Locked
	if err := none.Unlock(); err != nil {
		t.Error(err)
	}
}
