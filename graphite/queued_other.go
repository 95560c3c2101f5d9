//go:build !linux

package graphite

import "syscall"

// bytesQueued is only implemented on Linux: 0 means unknown, and a drain
// ends at its first quiet interval.
func bytesQueued(syscall.Conn) int { return 0 }
