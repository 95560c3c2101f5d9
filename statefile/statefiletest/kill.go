// Package statefiletest kills a process while it writes a state file, as
// a crash or an OOM kill would, for the tests of each kind of file kept in
// state-dir.
package statefiletest

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

const (
	envKind = "SPARKPULSE_KILLTEST"
	envDir  = "SPARKPULSE_KILLTEST_DIR"
)

// KillDuring runs write in a child process — the test binary itself,
// running only the calling test — on one directory, and kills it with
// SIGKILL at a random moment within the given time after its first write
// has ended, rounds times. After each kill, check reads what the writes left. write calls
// ready once, after its first write, then writes for ever.
//
// The calling test must call KillDuring first: in the child it runs write
// and exits.
func KillDuring(t *testing.T, kind string, rounds int, within time.Duration, write func(dir string, ready func()), check func(t *testing.T, dir string, round int)) {
	if os.Getenv(envKind) == kind {
		write(os.Getenv(envDir), func() { fmt.Println("ready") })
		os.Exit(0)
	}
	t.Helper()
	dir := t.TempDir()
	for round := range rounds {
		cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1")
		cmd.Env = append(os.Environ(), envKind+"="+kind, envDir+"="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || line != "ready\n" {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("round %d: the writer did not start: %q, %v", round, line, err)
		}
		// A random moment within the writes: the kill is what is tested.
		time.Sleep(time.Duration(rand.Int64N(int64(within))))
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		check(t, dir, round)
	}
}
