//go:build unix

package influxtest

import (
	"fmt"
	"syscall"
	"testing"
)

// RefusingAddr returns an address on 127.0.0.1 (host:port) on which
// connections are refused for the whole test: a TCP socket is bound to a
// port the kernel picks, and never listens, so the kernel answers each
// connection with a reset and no other process can take the port until
// the socket is closed, at the end of the test.
func RefusingAddr(tb testing.TB) string {
	tb.Helper()
	// Close-on-exec, as the net package's sockets, so that no process the
	// test starts holds the port; set under ForkLock, as net does.
	syscall.ForkLock.RLock()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		tb.Fatalf("influxtest: socket: %v", err)
	}
	tb.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		tb.Fatalf("influxtest: bind 127.0.0.1:0: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		tb.Fatalf("influxtest: getsockname: %v", err)
	}
	in4, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		tb.Fatalf("influxtest: getsockname: %T", sa)
	}
	return fmt.Sprintf("127.0.0.1:%d", in4.Port)
}
