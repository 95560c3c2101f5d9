package graphite

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// bytesQueued returns the size of the next datagram waiting in the socket
// (SIOCINQ), or 0 if none or unknown.
func bytesQueued(c syscall.Conn) int {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	rc.Control(func(fd uintptr) {
		if v, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ); err == nil {
			n = v
		}
	})
	return n
}
