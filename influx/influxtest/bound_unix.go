//go:build unix

package influxtest

import (
	"fmt"
	"net"
	"strconv"
	"syscall"
	"testing"
)

// Sockets bound without listening: the kernel answers a connection to
// their port with a reset, as it does for a port nothing holds, but the
// port stays theirs.

// RefusingAddr returns an address on 127.0.0.1 (host:port) on which
// connections are refused for the whole test: a TCP socket is bound to a
// port the kernel picks, and never listens, so the kernel answers each
// connection with a reset and no other process can take the port until
// the socket is closed, at the end of the test.
func RefusingAddr(tb testing.TB) string {
	tb.Helper()
	fd, port, err := bindLoopback(0, false)
	if err != nil {
		tb.Fatalf("influxtest: %v", err)
	}
	tb.Cleanup(func() { _ = syscall.Close(fd) })
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// holdPort keeps addr (127.0.0.1:port) from other processes while the
// server that listened there is down, so that what the programs under
// test send to it is refused, never taken by a server another test
// started on port 0 meanwhile. The socket is bound with SO_REUSEADDR and
// never listens: Linux then lets an explicit bind of the same address
// succeed, as the restarted server's (Go's listeners set SO_REUSEADDR),
// while it gives the port to no bind of port 0. release closes it.
func holdPort(addr string) (release func(), err error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return nil, fmt.Errorf("port of %q: %v", addr, err)
	}
	fd, _, err := bindLoopback(port, true)
	if err != nil {
		return nil, err
	}
	return func() { _ = syscall.Close(fd) }, nil
}

// bindLoopback binds a TCP socket to 127.0.0.1:port (0: the kernel picks)
// without listening, and returns it and its port.
func bindLoopback(port int, reuse bool) (fd, bound int, err error) {
	// Close-on-exec, as the net package's sockets, so that no process the
	// test starts holds the port; set under ForkLock, as net does.
	syscall.ForkLock.RLock()
	fd, err = syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return 0, 0, fmt.Errorf("socket: %v", err)
	}
	fail := func(step string, err error) (int, int, error) {
		_ = syscall.Close(fd)
		return 0, 0, fmt.Errorf("%s 127.0.0.1:%d: %v", step, port, err)
	}
	if reuse {
		if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
			return fail("SO_REUSEADDR on", err)
		}
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return fail("bind", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		return fail("getsockname of", err)
	}
	in4, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		return fail("getsockname of", fmt.Errorf("%T", sa))
	}
	return fd, in4.Port, nil
}
