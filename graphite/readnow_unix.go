//go:build unix

package graphite

import (
	"errors"
	"io"
	"net"
	"syscall"
)

// nowReaderOf returns a function that reads what c has received so far,
// without waiting: 0 bytes and no error when nothing is there, io.EOF when
// the sender has closed.
func nowReaderOf(c net.Conn) func([]byte) (int, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return c.Read
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return c.Read
	}
	return func(b []byte) (int, error) {
		var n int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			n, rerr = syscall.Read(int(fd), b)
			return true // never wait: the byte before this read came already
		})
		switch {
		case err != nil:
			return 0, err
		case errors.Is(rerr, syscall.EAGAIN), errors.Is(rerr, syscall.EINTR):
			return 0, nil
		case rerr != nil:
			return 0, rerr
		case n == 0 && len(b) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}
