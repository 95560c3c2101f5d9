//go:build linux

package realspark

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/sparkpulse/sparkpulse/influx/influxtest"
	"github.com/sparkpulse/sparkpulse/report"
	"github.com/sparkpulse/sparkpulse/sparkapi"
)

// quickstartInside marks the test process that runs the recipe inside
// its own namespaces.
const quickstartInside = "SPARKPULSE_QUICKSTART_INSIDE"

// TestQuickstart runs the README's "Without Docker" recipe as written
// against real Spark (the newest pinned PySpark): InfluxDB, a History
// Server from Spark's own sbin script, `sparkpulse run` with the flags
// given, then a PySpark job with the README's settings and event logs,
// and what the README says to expect — the application's accounting in
// `report --fleet` a minute after it ends, `report APP_ID` from the
// History Server and, without --url, from what was recorded.
//
// The recipe names fixed ports (8086, 2003, 4040, 18080) and a folder
// (/tmp/spark-events), so it runs in network, mount and PID namespaces of
// its own: a loopback no other process shares, a private event log
// folder, and every process it started gone when it ends. Its two install lines (make build,
// go install influxd) are what make test has done; the test checks they
// are there and runs the rest.
func TestQuickstart(t *testing.T) {
	if os.Getenv(quickstartInside) != "" {
		quickstartRun(t)
		return
	}
	vs := versions(t)
	v := vs[len(vs)-1]
	home := sparkHome(t, v)
	bin := binary(t)
	gopath, err := exec.Command("go", "env", "GOPATH").Output()
	if err != nil {
		t.Fatal(err)
	}
	influxd := filepath.Join(strings.TrimSpace(string(gopath)), "bin", "influxd")
	if _, err := os.Stat(influxd); err != nil {
		unavailable(t, fmt.Sprintf("%s: the recipe's InfluxDB is not installed (%s)", influxd, influxtest.InstallCommand))
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(quickstartEvents); os.IsNotExist(err) {
		// The mount point is made on this machine's /tmp: gone after.
		t.Cleanup(func() { os.Remove(quickstartEvents) })
	}
	cmd := exec.Command(self, "-test.run", "^TestQuickstart$", "-test.v", "-test.timeout", "9m")
	cmd.Env = append(os.Environ(), quickstartInside+"=1", "QUICKSTART_SPARK="+home, "QUICKSTART_BIN="+bin,
		"GOPATH="+strings.TrimSpace(string(gopath)))
	// Pdeathsig: should this process die, the namespace's first process
	// does, and with it every process of the recipe.
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID,
		Pdeathsig: syscall.SIGKILL}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		unavailable(t, fmt.Sprintf("namespaces for the recipe (root's CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWPID): %v", err))
	}
	if err := cmd.Wait(); err != nil { // started: a failure or a timeout inside is the recipe's
		t.Fatalf("the recipe, run in its namespaces: %v\n%s", err, out.Bytes())
	}
	t.Logf("the recipe, run in its namespaces:\n%s", tail(out.String(), 6000))
}

// quickstartRun is the recipe, in the namespaces TestQuickstart made: the
// test process is their first process, so every other one ends with it.
func quickstartRun(t *testing.T) {
	if os.Getpid() != 1 {
		// Not in the namespaces TestQuickstart makes: endAll would reach
		// every process of the machine the user may signal.
		t.Fatalf("%s is set, but this is not the first process of a PID namespace", quickstartInside)
	}
	home, bin := os.Getenv("QUICKSTART_SPARK"), os.Getenv("QUICKSTART_BIN")
	binData, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	// Mounts stay here (private); the recipe's event log folder is a
	// fresh one (the user's, if any, is not read, and nothing is left in
	// it); /proc is this PID namespace's (Spark's scripts find their
	// daemons by pid); the loopback is up.
	if err := os.MkdirAll(quickstartEvents, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct {
		src, target, fstype string
		flags               uintptr
	}{{"", "/", "", syscall.MS_REC | syscall.MS_PRIVATE}, {"tmpfs", quickstartEvents, "tmpfs", 0}, {"proc", "/proc", "proc", 0}} {
		if err := syscall.Mount(m.src, m.target, m.fstype, m.flags, ""); err != nil {
			t.Fatalf("mount %s: %v", m.target, err)
		}
	}
	if err := loopbackUp(); err != nil {
		t.Fatalf("loopback up: %v", err)
	}

	work := t.TempDir()
	// Before the folder goes: every process the recipe started ends (this
	// process is the namespace's first, and kill(-1) reaches all others).
	t.Cleanup(endAll)
	for _, d := range []string{"bin", "conf", "home", "logs", "pids"} {
		if err := os.MkdirAll(filepath.Join(work, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(work, "bin", "sparkpulse"), binData, 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(sparkEnv(home, work),
		// influxd keeps its data in the user's ~/.influxdb, found from the
		// user database rather than $HOME: here, in the test's folder.
		"HOME="+filepath.Join(work, "home"), "INFLUXDB_META_DIR="+filepath.Join(work, "influxdb", "meta"),
		"INFLUXDB_DATA_DIR="+filepath.Join(work, "influxdb", "data"), "INFLUXDB_DATA_WAL_DIR="+filepath.Join(work, "influxdb", "wal"),
		"SPARK_LOG_DIR="+filepath.Join(work, "logs"), "SPARK_PID_DIR="+filepath.Join(work, "pids"))
	defer func() {
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(work, "logs", "*"))
			for _, l := range append(logs, filepath.Join(work, "sparkpulse.log"), filepath.Join(work, "influxd.log")) {
				b, _ := os.ReadFile(l)
				t.Logf("%s:\n%s", l, tail(string(b), 3000))
			}
		}
	}()

	lines := readmeRecipe(t)
	if len(lines) != 6 || lines[0] != "make build" || lines[1] != influxtest.InstallCommand {
		t.Fatalf("the README's recipe: %q; want make build, %s, then four commands", lines, influxtest.InstallCommand)
	}
	var sparkpulse *exec.Cmd
	for _, line := range lines[2:] {
		switch {
		case strings.HasPrefix(line, "bin/sparkpulse run "):
			// It runs in the foreground, as the user's terminal would.
			log, err := os.Create(filepath.Join(work, "sparkpulse.log"))
			if err != nil {
				t.Fatal(err)
			}
			sparkpulse = exec.Command("bash", "-c", "exec "+line)
			sparkpulse.Dir, sparkpulse.Env, sparkpulse.Stdout, sparkpulse.Stderr = work, env, log, log
			if err := sparkpulse.Start(); err != nil {
				t.Fatal(err)
			}
		case strings.HasSuffix(line, "&"):
			c := exec.Command("bash", "-c", strings.TrimSuffix(line, "&")+" > influxd.log 2>&1 &")
			c.Dir, c.Env = work, env
			if out, err := c.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", line, err, out)
			}
		default:
			c := exec.Command("bash", "-c", line)
			c.Dir, c.Env = work, env
			if out, err := c.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", line, err, out)
			}
		}
	}
	if sparkpulse == nil {
		t.Fatal("the recipe starts no sparkpulse")
	}
	// What the recipe says each listens on.
	for _, u := range []string{"http://127.0.0.1:8086/ping", "http://localhost:18080/api/v1/applications", "http://127.0.0.1:2033/readyz"} {
		eventually(t, 90*time.Second, u, func() error { return httpOK(u) })
	}

	// The README's settings and event logs, the sink at this host.
	conf := readmeSparkConf(t)
	conf["spark.metrics.conf.*.sink.graphite.host"] = "127.0.0.1"
	for _, m := range regexp.MustCompile("--conf (spark\\.eventLog\\.[a-zA-Z]+)=([^\\s`]+)").FindAllStringSubmatch(readme(t), -1) {
		conf[m[1]] = m[2]
	}
	if conf["spark.eventLog.dir"] != "file:/tmp/spark-events" || conf["spark.eventLog.enabled"] != "true" {
		t.Fatalf("the README's event log settings: %q, %q", conf["spark.eventLog.enabled"], conf["spark.eventLog.dir"])
	}
	conf["spark.driver.host"], conf["spark.driver.bindAddress"] = "127.0.0.1", "127.0.0.1"
	args := []string{"--master", "local-cluster[2,1,1024]", "--conf", "spark.executor.memory=512m"}
	for _, k := range slices.Sorted(maps.Keys(conf)) {
		args = append(args, "--conf", k+"="+conf[k])
	}
	job := filepath.Join(work, "job.py")
	if err := os.WriteFile(job, []byte(quickstartJob), 0o644); err != nil {
		t.Fatal(err)
	}
	submit := exec.Command(filepath.Join(home, "pyspark", "bin", "spark-submit"), append(args, job)...)
	submit.Dir, submit.Env = work, env
	if out, err := submit.CombinedOutput(); err != nil {
		t.Fatalf("spark-submit: %v\n%s", err, tail(string(out), 4000))
	}

	sp := func(args ...string) (string, error) {
		c := exec.Command(filepath.Join(work, "bin", "sparkpulse"), args...)
		c.Dir, c.Env = work, env
		out, err := c.CombinedOutput()
		return string(out), err
	}
	// "its accounting and advice a minute after it ends"
	began := time.Now()
	var fleet report.Fleet
	eventually(t, 3*time.Minute, "the job in report --fleet", func() error {
		out, err := sp("report", "--fleet", "--json")
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		fleet = report.Fleet{}
		if err := json.Unmarshal([]byte(out), &fleet); err != nil {
			return err
		}
		if len(fleet.Applications) == 0 {
			return errNotYet
		}
		return nil
	})
	// The History Server has read the whole event log by then: Spark's
	// own lifetimes.
	var apps []sparkapi.Application
	getJSON(t, "http://localhost:18080/api/v1/applications", &apps)
	if len(apps) != 1 || len(apps[0].Attempts) == 0 || !apps[0].Attempts[0].Completed {
		t.Fatalf("the History Server lists %+v, want the job's, completed; report --fleet: %+v", apps, fleet)
	}
	id := apps[0].ID
	var execs []sparkapi.Executor
	getJSON(t, "http://localhost:18080/api/v1/applications/"+id+"/allexecutors", &execs)
	want, _ := coreSeconds(execs, apps[0].Attempts[0].EndTime.UnixMilli())
	t.Logf("%s in report --fleet %s after spark-submit returned", id, time.Since(began).Round(time.Second))
	a := fleet.Applications[0]
	if a.Application != id || a.Outcome != "succeeded" || math.Abs(a.CoreHours*3600-want) > 0.01 || a.Executors != 2 {
		t.Errorf("report --fleet: %+v; want %s, succeeded, 2 executors, %.3f core-s (Spark's Σ cores × lifetime)", a, id, want)
	}
	out, err := sp("report", id, "--url", "http://localhost:18080")
	if err != nil || !strings.Contains(out, "limits per executor") || !strings.Contains(out, id) {
		t.Errorf("report %s --url http://localhost:18080: %v\n%s", id, err, out)
	}
	out, err = sp("report", id)
	if err != nil || !strings.HasPrefix(out, id+" (quickstart), from what sparkpulse recorded in database spark\n") || !strings.Contains(out, "\nusage (end): ") {
		t.Errorf("report %s: %v\n%s", id, err, out)
	}

	// Ctrl-C: a clean stop.
	sparkpulse.Process.Signal(os.Interrupt)
	if err := sparkpulse.Wait(); err != nil {
		t.Errorf("sparkpulse after Ctrl-C: %v", err)
	}
}

// quickstartEvents is the README's event log folder.
const quickstartEvents = "/tmp/spark-events"

// endAll kills every other process of the PID namespace and waits, at
// most 10 s, until none is left but zombies, which it reaps.
func endAll() {
	syscall.Kill(-1, syscall.SIGKILL)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for {
			if pid, _ := syscall.Wait4(-1, nil, syscall.WNOHANG, nil); pid <= 0 {
				break
			}
		}
		dirs, _ := filepath.Glob("/proc/[0-9]*")
		alive := 0
		for _, d := range dirs {
			if filepath.Base(d) == "1" {
				continue
			}
			b, _ := os.ReadFile(filepath.Join(d, "stat"))
			if f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])); len(f) > 0 && f[0] != "Z" {
				alive++
			}
		}
		if alive == 0 {
			return
		}
	}
}

// quickstartJob is a PySpark job of about half a minute, long enough for
// the 10 s reporting period the README sets.
const quickstartJob = `
import time
from pyspark.sql import SparkSession
spark = SparkSession.builder.appName("quickstart").getOrCreate()
began = time.time()
while time.time() - began < 30:
    spark.range(0, 5000000, numPartitions=8).selectExpr("id % 1000 AS k").groupBy("k").count().collect()
spark.stop()
`

// readmeRecipe is the commands of the README's "Without Docker" block,
// continuation lines joined and comments dropped.
func readmeRecipe(t *testing.T) []string {
	t.Helper()
	_, section, ok := strings.Cut(readme(t), "### Without Docker\n")
	_, block, ok2 := strings.Cut(section, "```sh\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("the README has no sh block under ### Without Docker")
	}
	var out []string
	for _, l := range strings.Split(strings.ReplaceAll(block, "\\\n", " "), "\n") {
		if i := strings.Index(l, " #"); i >= 0 {
			l = l[:i]
		}
		if l = strings.Join(strings.Fields(l), " "); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func httpOK(u string) error {
	resp, err := http.Get(u)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s: %s", u, resp.Status)
	}
	return nil
}

// loopbackUp brings up lo in a new network namespace, where it starts
// down.
func loopbackUp() error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	var ifr [40]byte // struct ifreq: the name, then the flags
	copy(ifr[:], "lo")
	*(*uint16)(unsafe.Pointer(&ifr[syscall.IFNAMSIZ])) = syscall.IFF_UP | syscall.IFF_LOOPBACK | syscall.IFF_RUNNING
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCSIFFLAGS, uintptr(unsafe.Pointer(&ifr[0]))); e != 0 {
		return e
	}
	return nil
}
