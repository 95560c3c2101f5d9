//go:build !unix

package statefile

import "os"

// tryLock takes no lock where the system has no flock: a second process
// is not refused there (docs/operations.md).
func tryLock(*os.File) (bool, error) { return true, nil }
