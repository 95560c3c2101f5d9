//go:build unix

package influxtest

import (
	"net"
	"strings"
	"syscall"
	"testing"
)

// A held port binds for no socket that does not share it (a bind of port
// 0 is one), but for an explicit listener with SO_REUSEADDR, as a
// restarted server's; released, it is free.
func TestHoldPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr, port := l.Addr().String(), l.Addr().(*net.TCPAddr).Port
	l.Close() // no connection: nothing stays in TIME_WAIT on the port
	release, err := holdPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	if fd, _, err := bindLoopback(port, false); err == nil {
		_ = syscall.Close(fd)
		t.Errorf("held port %d bound", port)
	} else if !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("binding held port %d: %v", port, err)
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Errorf("a connection to held port %d was accepted", port)
	}
	restarted, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("a listener on held port %d: %v", port, err)
	}
	restarted.Close()
	release()
	fd, _, err := bindLoopback(port, false)
	if err != nil {
		t.Fatalf("port %d after release: %v", port, err)
	}
	_ = syscall.Close(fd)
}

// Kill holds the killed server's port until Restart.
func TestKillHoldsPort(t *testing.T) {
	srv := Start(t)
	srv.Kill()
	if srv.held == nil {
		t.Errorf("the killed server's %s is not held", srv.HTTPAddr)
	}
	srv.Restart(t)
	if srv.held != nil {
		t.Error("the port is still held after the restart")
	}
	srv.Exec(t, "CREATE DATABASE after")
}
