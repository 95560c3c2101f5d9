//go:build unix

package graphite

import "syscall"

// readBufferSize returns the socket's SO_RCVBUF, or 0 if it cannot be read.
func readBufferSize(c syscall.Conn) int {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0
	}
	size := 0
	rc.Control(func(fd uintptr) {
		if v, err := syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF); err == nil {
			size = v
		}
	})
	return size
}
