//go:build !unix

package graphite

import "syscall"

// readBufferSize is not implemented here: 0 means unknown.
func readBufferSize(syscall.Conn) int { return 0 }
