package influxtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
)

// listensOn tells a port this process listens on from one another
// process holds.
func TestListensOn(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	ours, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ours.Close()
	if err := checkOwn(os.Getpid(), ours.Addr().String()); err != nil {
		t.Errorf("a port this process listens on: %v", err)
	}
	// A connected socket on another port is no listener on it.
	c, err := net.Dial("tcp", ours.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := checkOwn(os.Getpid(), c.LocalAddr().String()); !errors.Is(err, errNotOurs) {
		t.Errorf("a port this process only connects from: %v, want errNotOurs", err)
	}
}

// A launch is tried again on a port taken, and only then.
func TestLaunchRetrying(t *testing.T) {
	dir := t.TempDir()
	tries := 0
	_, err := launchRetrying(dir, func(sub string) (int, error) {
		tries++
		if filepath.Base(sub) != strconv.Itoa(tries-1) {
			t.Errorf("try %d in %s", tries, sub)
		}
		if tries < 3 {
			return 0, fmt.Errorf("influxd did not start: influxd exited\nlisten tcp 127.0.0.1:1234: bind: address already in use")
		}
		return tries, nil
	})
	if err != nil || tries != 3 {
		t.Errorf("ports taken twice: %d tries, %v", tries, err)
	}
	tries = 0
	_, err = launchRetrying(dir, func(string) (int, error) { tries++; return 0, errNotOurs })
	if !errors.Is(err, errNotOurs) || tries != launchTries {
		t.Errorf("a port always taken: %d tries, %v", tries, err)
	}
	tries = 0
	_, err = launchRetrying(dir, func(string) (int, error) { tries++; return 0, errors.New("no such file") })
	if err == nil || tries != 1 {
		t.Errorf("another failure: %d tries, %v", tries, err)
	}
}
