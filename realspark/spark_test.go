package realspark

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/config/configtest"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
	"github.com/sparkpulse/sparkpulse/spark"
	"github.com/sparkpulse/sparkpulse/templates"
)

// repoRoot is the repository, from this package's folder.
const repoRoot = ".."

// versions are the pinned PySpark releases, one source for scripts/deps.sh
// and the tests.
func versions(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("testdata/pyspark-versions.txt")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// installCommand is docs/development.md's command that installs version v.
func installCommand(v string) string {
	return fmt.Sprintf("pip install --target .deps/pyspark/%s pyspark==%s", v, v)
}

// unavailable skips outside CI and fails in CI, where the suite must run.
func unavailable(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// sparkHome finds PySpark v: $SPARKPULSE_PYSPARK_DIR/<v>, else
// .deps/pyspark/<v> in the repository. It returns the folder to put on
// PYTHONPATH; Spark's home is its pyspark subfolder.
func sparkHome(t *testing.T, v string) string {
	t.Helper()
	base := os.Getenv("SPARKPULSE_PYSPARK_DIR")
	if base == "" {
		base = filepath.Join(repoRoot, ".deps", "pyspark")
	}
	dir, err := filepath.Abs(filepath.Join(base, v))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pyspark", "bin", "spark-class")); err != nil {
		unavailable(t, fmt.Sprintf("PySpark %s is not installed in %s: run `make deps` or `%s`", v, dir, installCommand(v)))
	}
	if _, err := exec.LookPath("java"); err != nil {
		unavailable(t, "java is not on PATH: Spark needs a JDK 17")
	}
	return dir
}

// sparkWork is a run's Spark version (home, as sparkHome returns it), its
// work folder (with conf/, Spark's empty configuration folder) and its
// event log folder, which a History Server reads.
type sparkWork struct{ home, dir, events string }

// newSparkWork makes a run's folders, in a temporary folder of the test,
// and extra ones below it.
func newSparkWork(t *testing.T, version string, extra ...string) sparkWork {
	t.Helper()
	w := sparkWork{home: sparkHome(t, version), dir: t.TempDir()}
	w.events = filepath.Join(w.dir, "events")
	for _, d := range append([]string{"events", "conf"}, extra...) {
		if err := os.MkdirAll(filepath.Join(w.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// sparkEnv is the environment of every Spark process: loopback only.
func sparkEnv(home, workDir string) []string {
	env := []string{}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "SPARK_HOME", "PYTHONPATH", "SPARK_LOCAL_IP", "SPARK_LOCAL_HOSTNAME", "SPARK_WORKER_DIR",
			"PYSPARK_PYTHON", "SPARK_CONF_DIR", "SPARK_HISTORY_OPTS":
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"SPARK_HOME="+filepath.Join(home, "pyspark"),
		"PYTHONPATH="+home,
		"SPARK_LOCAL_IP=127.0.0.1",
		"SPARK_LOCAL_HOSTNAME=localhost",
		"SPARK_WORKER_DIR="+workDir,
		"PYSPARK_PYTHON=python3",
		// An empty configuration folder: nothing of the machine's is read.
		"SPARK_CONF_DIR="+filepath.Join(workDir, "conf"),
	)
}

// otherAddress is Spark's warning that it binds to an address other than
// the loopback one it was given (Utils.findLocalInetAddress).
var otherAddress = regexp.MustCompile(`(?m)^.*(resolves to a loopback address.*; using|Set SPARK_LOCAL_IP if you need to bind to another address).*$`)

// checkLoopback fails the test if any log under dir, or text, says Spark
// used an address other than 127.0.0.1.
func checkLoopback(t *testing.T, what, text string) {
	t.Helper()
	if m := otherAddress.FindString(text); m != "" {
		t.Errorf("%s: Spark used another address than 127.0.0.1: %s", what, m)
	}
}

func checkLoopbackDir(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || (d.Name() != "stderr" && d.Name() != "stdout") {
			return nil
		}
		b, _ := os.ReadFile(path)
		checkLoopback(t, path, string(b))
		return nil
	})
}

// historyBound is the History Server's log line naming the port its UI
// and REST API bound (Utils.startServiceOnPort), in Spark 3.5 and 4.x.
var historyBound = regexp.MustCompile(`Successfully started service 'HistoryServerUI' on port (\d+)\.`)

// historyServer runs Spark's History Server over dir until the test ends.
// It binds port 0, and the port it got is read from its log.
func historyServer(t *testing.T, home, workDir, dir string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(home, "pyspark", "bin", "spark-class"), "org.apache.spark.deploy.history.HistoryServer")
	cmd.Env = append(sparkEnv(home, workDir), "SPARK_HISTORY_OPTS="+strings.Join([]string{
		"-Dspark.history.fs.logDirectory=file:" + dir,
		"-Dspark.history.ui.port=0",
		"-Dspark.history.fs.update.interval=1s",
		"-Dspark.ui.showConsoleProgress=false",
	}, " "))
	logs := &influxtest.Output{}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		checkLoopback(t, "History Server", logs.String())
		if t.Failed() {
			t.Logf("History Server log:\n%s", tail(logs.String(), 4000))
		}
	})
	deadline := time.NewTimer(90 * time.Second)
	defer deadline.Stop()
	var url string
	for {
		out, more := logs.From(0)
		if m := historyBound.FindStringSubmatch(out); m != nil {
			url = "http://127.0.0.1:" + m[1]
			break
		}
		select {
		case <-more:
		case <-exited:
			t.Fatalf("the History Server exited:\n%s", logs.String())
		case <-deadline.C:
			t.Fatalf("the History Server did not say which port it bound:\n%s", logs.String())
		}
	}
	// Then its REST API, polled until it answers.
	for tick := time.NewTicker(100 * time.Millisecond); ; <-tick.C {
		select {
		case <-exited:
			t.Fatalf("the History Server exited:\n%s", logs.String())
		default:
		}
		if resp, err := http.Get(url + "/api/v1/applications"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
		}
		select {
		case <-deadline.C:
			t.Fatalf("the History Server did not answer at %s:\n%s", url, logs.String())
		default:
		}
	}
}

// application is one run of testdata/workload.py.
type application struct {
	t      *testing.T
	name   string // scenario
	id, ui string
	done   int64 // epoch seconds when the jobs were done
	out    string
	cmd    *exec.Cmd
	stdin  io.WriteCloser // nil when the driver runs in a container: answers are files
	stdout *bufio.Reader  // likewise: its lines are in out/said
	said   int            // lines of out/said read so far
	stderr *influxtest.Output
	exited chan struct{}
}

// workloadConfig is what workload.py reads.
type workloadConfig struct {
	Master    string            `json:"master,omitempty"` // set by the script; empty under spark-submit
	AppName   string            `json:"app_name"`
	Scenario  string            `json:"scenario"`
	Out       string            `json:"out"`
	Executors int               `json:"executors"`
	Conf      map[string]string `json:"conf"`
	// Files: the driver speaks through files in Out (workload.py's
	// Channel), not stdout and stdin.
	Files bool `json:"files,omitempty"`
}

// startApplication runs the scenario with python3, which starts Spark
// itself (cfg.Master), until its jobs are done and its REST answers are
// saved; stop ends it.
func startApplication(t *testing.T, home, workDir string, cfg workloadConfig) *application {
	t.Helper()
	path := writeWorkload(t, cfg)
	script, _ := filepath.Abs("testdata/workload.py")
	a := launch(t, exec.Command("python3", script, path), sparkEnv(home, workDir), cfg)
	a.started()
	a.waitDone()
	return a
}

// submitApplication runs the scenario with spark-submit and args (the
// master, the deploy mode, …), every setting of cfg.Conf passed as
// --conf, and returns at once; started waits until the driver names its
// application, waitDone for its jobs. The driver speaks through files (cfg.Files):
// spark-submit gives a Python driver no stdin, and in YARN's cluster mode
// it runs in a container.
func submitApplication(t *testing.T, home, workDir string, env []string, args []string, cfg workloadConfig) *application {
	t.Helper()
	cfg.Files = true
	path := writeWorkload(t, cfg)
	script, _ := filepath.Abs("testdata/workload.py")
	keys := slices.Sorted(maps.Keys(cfg.Conf))
	for _, k := range keys {
		args = append(args, "--conf", k+"="+cfg.Conf[k])
	}
	args = append(args, script, path)
	cmd := exec.Command(filepath.Join(home, "pyspark", "bin", "spark-submit"), args...)
	return launch(t, cmd, append(sparkEnv(home, workDir), env...), cfg)
}

func writeWorkload(t *testing.T, cfg workloadConfig) string {
	t.Helper()
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(cfg.Out, "workload.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func launch(t *testing.T, cmd *exec.Cmd, env []string, cfg workloadConfig) *application {
	t.Helper()
	a := &application{t: t, name: cfg.Scenario, out: cfg.Out, stderr: &influxtest.Output{}, exited: make(chan struct{}), cmd: cmd}
	a.cmd.Env = env
	a.cmd.Stderr = a.stderr
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var err error
	if !cfg.Files {
		if a.stdin, err = a.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		out, err := a.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		a.stdout = bufio.NewReader(out)
	}
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { a.cmd.Wait(); close(a.exited) }()
	t.Cleanup(func() {
		syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL)
		<-a.exited
		checkLoopback(t, "driver of "+cfg.Scenario, a.stderr.String())
		if t.Failed() {
			t.Logf("%s: driver log:\n%s", cfg.Scenario, tail(a.stderr.String(), 6000))
		}
	})
	return a
}

// started waits until the driver names its application and its UI.
func (a *application) started() {
	a.t.Helper()
	f := a.expect("APP", 4*time.Minute)
	a.id, a.ui = f[0], f[1]
	a.t.Logf("%s: application %s, UI %s", a.name, a.id, a.ui)
}

// waitDone waits for the driver's DONE.
func (a *application) waitDone() {
	a.t.Helper()
	a.done, _ = strconv.ParseInt(a.expect("DONE", 6*time.Minute)[0], 10, 64)
}

// expect reads what the driver says up to a line "<word> …" and returns
// the rest of its fields; the driver's exit or the timeout fails the test.
func (a *application) expect(word string, timeout time.Duration) []string {
	a.t.Helper()
	if a.stdout == nil {
		return a.expectFile(word, timeout)
	}
	type line struct {
		s   string
		err error
	}
	ch := make(chan line, 1)
	go func() {
		for {
			s, err := a.stdout.ReadString('\n')
			if err != nil || strings.HasPrefix(s, word+" ") {
				ch <- line{s, err}
				return
			}
		}
	}()
	select {
	case l := <-ch:
		if l.err != nil {
			<-a.exited
			a.t.Fatalf("%s: the driver ended before %s (%v, exit %v):\n%s", a.name, word, l.err, a.cmd.ProcessState, tail(a.stderr.String(), 6000))
		}
		return strings.Fields(l.s)[1:]
	case <-time.After(timeout):
		a.t.Fatalf("%s: no %s from the driver in %s:\n%s", a.name, word, timeout, tail(a.stderr.String(), 6000))
	}
	return nil
}

// expectFile is expect for a driver in a container, which appends its
// lines to out/said: another process's file, polled.
func (a *application) expectFile(word string, timeout time.Duration) []string {
	a.t.Helper()
	deadline := time.Now().Add(timeout)
	for tick := time.NewTicker(100 * time.Millisecond); ; <-tick.C {
		b, _ := os.ReadFile(filepath.Join(a.out, "said"))
		lines := strings.Split(string(b), "\n")
		for ; a.said < len(lines)-1; a.said++ { // the last is unfinished
			if f := strings.Fields(lines[a.said]); len(f) > 0 && f[0] == word {
				a.said++
				return f[1:]
			}
		}
		select {
		case <-a.exited:
			a.t.Fatalf("%s: spark-submit ended before the driver said %s (exit %v):\n%s", a.name, word, a.cmd.ProcessState, tail(a.stderr.String(), 6000))
		default:
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("%s: the driver did not say %s in %s:\n%s", a.name, word, timeout, tail(a.stderr.String(), 6000))
		}
	}
}

// answer gives the driver the word it waits for.
func (a *application) answer(word string) {
	a.t.Helper()
	if a.stdin != nil {
		if _, err := io.WriteString(a.stdin, word+"\n"); err != nil {
			a.t.Fatalf("%s: %v", a.name, err)
		}
		return
	}
	if err := os.WriteFile(filepath.Join(a.out, word), nil, 0o644); err != nil {
		a.t.Fatal(err)
	}
}

// stop lets the driver stop its SparkSession and waits for it (or, in
// cluster mode, spark-submit) to exit.
func (a *application) stop() {
	a.t.Helper()
	a.answer("stop")
	if a.stdin != nil {
		a.stdin.Close()
	}
	select {
	case <-a.exited:
	case <-time.After(3 * time.Minute):
		a.t.Fatalf("%s: the driver did not stop", a.name)
	}
	if !a.cmd.ProcessState.Success() {
		a.t.Fatalf("%s: the driver exited with %v:\n%s", a.name, a.cmd.ProcessState, tail(a.stderr.String(), 6000))
	}
}

// record copies the REST answers the driver saved into dir, with
// app.json: meta, which names the application.
func (a *application) record(t *testing.T, dir string, meta map[string]any) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(a.out, "rest"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(a.out, "rest", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, e.Name()), b)
	}
	b, _ := json.MarshalIndent(meta, "", " ")
	writeFile(t, filepath.Join(dir, "app.json"), append(b, '\n'))
}

// waitReconciled waits until sparkpulse has written the reconciliation of
// application id: its accounting is done.
func waitReconciled(t *testing.T, srv *influxtest.Server, id string) {
	t.Helper()
	eventually(t, 3*time.Minute, "reconciliation of "+id, func() error {
		res, err := srv.TryQuery(db, fmt.Sprintf(`SELECT "verdict" FROM "spark_reconcile" WHERE "app_id" = '%s'`, id))
		if err != nil {
			return err
		}
		if len(res) == 0 {
			return errNotYet
		}
		return nil
	})
}

// rest decodes a REST answer the driver saved before it stopped.
func (a *application) rest(name string, v any) {
	a.t.Helper()
	b, err := os.ReadFile(filepath.Join(a.out, "rest", name+".json"))
	if err != nil {
		a.t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		a.t.Fatalf("%s.json: %v", name, err)
	}
}

// tee is a Graphite TCP proxy: it forwards every connection to target and
// keeps the lines that went through, whole reports at a time (Dropwizard's
// reporter opens a connection per report).
type tee struct {
	ln     net.Listener
	target string
	mapper *spark.Mapper

	mu      sync.Mutex
	mirror  string           // a second target that gets each report once it is whole ("": none)
	lines   []string         // complete lines
	cut     int              // last lines without '\n': the sender died mid-report
	reports map[string]int64 // applicationid/process → newest timestamp of a report that went through
	changed chan struct{}    // closed and replaced at each report
	wg      sync.WaitGroup
}

func startTee(t *testing.T, target string, prefixes []string) *tee {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tee{ln: ln, target: target, mapper: spark.NewMapper(spark.Options{Prefixes: prefixes}),
		reports: map[string]int64{}, changed: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

// alsoTo sends each report, once it is whole, to addr too: a second
// sparkpulse gets the same stream.
func (p *tee) alsoTo(addr string) {
	p.mu.Lock()
	p.mirror = addr
	p.mu.Unlock()
}

func (p *tee) port() string {
	_, port, _ := net.SplitHostPort(p.ln.Addr().String())
	return port
}

func (p *tee) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *tee) serve(c net.Conn) {
	defer p.wg.Done()
	defer c.Close()
	var report bytes.Buffer
	up, err := net.Dial("tcp", p.target)
	if err == nil {
		_, err = io.Copy(up, io.TeeReader(c, &report))
		up.Close()
	}
	p.mu.Lock()
	mirror := p.mirror
	p.mu.Unlock()
	if err == nil && mirror != "" {
		var m net.Conn
		if m, err = net.Dial("tcp", mirror); err == nil {
			_, err = m.Write(report.Bytes())
			m.Close()
		}
	}
	if err != nil {
		// A proxy that drops a report would make the test's ground truth
		// wrong: say so loudly, in the report's place.
		p.mu.Lock()
		p.lines = append(p.lines, "# tee: "+err.Error())
		p.mu.Unlock()
		return
	}
	var r templates.Result
	newest := map[string]int64{}
	var lines []string
	text, cut := report.String(), 0
	if i := strings.LastIndexByte(text, '\n'); i < len(text)-1 {
		text, cut = text[:i+1], 1
	}
	for _, l := range strings.Split(text, "\n") {
		if l == "" {
			continue
		}
		lines = append(lines, l)
		f := strings.Fields(l)
		if len(f) != 3 || p.mapper.Apply([]byte(f[0]), &r) != nil {
			continue
		}
		ts, _ := strconv.ParseInt(f[2], 10, 64)
		key := tagOf(&r, "applicationid") + "/" + tagOf(&r, "process")
		newest[key] = max(newest[key], ts)
	}
	p.mu.Lock()
	p.lines = append(p.lines, lines...)
	p.cut += cut
	for k, ts := range newest {
		p.reports[k] = max(p.reports[k], ts)
	}
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

// waitReports waits until each of processes of app has sent a report
// stamped after the epoch second since. processes is asked again at
// every report: under dynamic allocation an executor may be released
// meanwhile, and is then waited for no more.
func (p *tee) waitReports(t *testing.T, app string, processes func() []string, since int64) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		procs := processes()
		p.mu.Lock()
		var missing []string
		for _, proc := range procs {
			if p.reports[app+"/"+proc] <= since {
				missing = append(missing, proc)
			}
		}
		changed := p.changed
		p.mu.Unlock()
		if len(missing) == 0 {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("%s: no report after %d from processes %v", app, since, missing)
		}
	}
}

// taken returns the complete lines that went through so far, forgetting
// them, and how many reports ended in a cut line.
func (p *tee) taken() ([]string, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l, cut := p.lines, p.cut
	p.lines, p.cut = nil, 0
	return l, cut
}

func tagOf(r *templates.Result, key string) string {
	for _, tg := range r.Tags {
		if string(tg.Key) == key {
			return string(tg.Value)
		}
	}
	return ""
}

// sparkpulseProc is the real binary, run with a config file.
type sparkpulseProc struct {
	cmd    *exec.Cmd
	logs   *influxtest.Output
	exited chan struct{}
	bound  boundAddrs
}

// boundAddrs is what run --ready-file writes: the addresses sparkpulse
// bound, its ports 0 replaced by those the kernel gave.
type boundAddrs struct {
	Graphite []struct{ Protocol, Address string }
	Admin    string
}

var buildOnce struct {
	sync.Once
	bin   string
	built bool // by this test process, in a folder of its own: removed at its end
	err   error
}

// binary is $SPARKPULSE_BIN, the binary `make check` builds once for
// every package's tests, or cmd/sparkpulse built once per test process.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if p := os.Getenv("SPARKPULSE_BIN"); p != "" {
			buildOnce.bin = p
			return
		}
		dir, err := os.MkdirTemp("", "sparkpulse-bin")
		if err != nil {
			buildOnce.err = err
			return
		}
		buildOnce.bin, buildOnce.built = filepath.Join(dir, "sparkpulse"), true
		out, err := exec.Command("go", "build", "-o", buildOnce.bin, "../cmd/sparkpulse").CombinedOutput()
		if err != nil {
			buildOnce.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildOnce.err != nil {
		t.Fatal(buildOnce.err)
	}
	return buildOnce.bin
}

// startSparkpulse runs the binary with cfg writing to the InfluxDB at
// influxURL, written by configtest.Write (the admin endpoint and the
// listeners on port 0, [internal] off unless cfg sets it), and waits until
// it is ready: p.bound holds the addresses it bound, read from run
// --ready-file, so that no port is picked beforehand for another process
// to take.
func startSparkpulse(t *testing.T, influxURL string, cfg config.Config) *sparkpulseProc {
	t.Helper()
	cfg.InfluxDB.URL = influxURL
	path, readyFile := configtest.Write(t, cfg), filepath.Join(t.TempDir(), "ready.json")
	p := &sparkpulseProc{logs: &influxtest.Output{}, exited: make(chan struct{})}
	p.cmd = exec.Command(binary(t), "run", "--config", path, "--ready-file", readyFile)
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("sparkpulse log:\n%s", tail(p.logs.String(), 8000))
		}
	})
	// The file is renamed into place whole once every listener serves;
	// sparkpulse is another process, so its existence is polled.
	deadline := time.Now().Add(60 * time.Second)
	for tick := time.NewTicker(20 * time.Millisecond); ; <-tick.C {
		if data, err := os.ReadFile(readyFile); err == nil {
			if err := json.Unmarshal(data, &p.bound); err != nil {
				t.Fatalf("%s: %v", readyFile, err)
			}
			return p
		}
		select {
		case <-p.exited:
			t.Fatalf("sparkpulse exited at start:\n%s", p.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("sparkpulse not ready:\n%s", p.logs.String())
		}
	}
}

// graphite is the address bound by the n-th [[graphite]] block, from 0.
func (p *sparkpulseProc) graphite(t *testing.T, n int) string {
	t.Helper()
	if n >= len(p.bound.Graphite) {
		t.Fatalf("%d listeners bound, want at least %d", len(p.bound.Graphite), n+1)
	}
	return p.bound.Graphite[n].Address
}

// stop sends SIGTERM and expects a clean exit, which delivers every point.
func (p *sparkpulseProc) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("sparkpulse did not stop:\n%s", tail(p.logs.String(), 4000))
	}
	if !p.cmd.ProcessState.Success() {
		t.Errorf("sparkpulse exited with %v:\n%s", p.cmd.ProcessState, tail(p.logs.String(), 4000))
	}
}

var freePort = influxtest.FreePort

// fixedPort is a free port below the kernel's ephemeral range, for a
// server whose port must be known before it starts (Spark's UI, with
// spark.port.maxRetries=0): a port from freePort can be taken meanwhile
// by any connection's or server's ephemeral port, these cannot.
func fixedPort(t *testing.T) int {
	t.Helper()
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				low = n
			}
		}
	}
	const from = 20000
	for range 100 {
		port := from + rand.IntN(max(low-from, 1))
		if ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			ln.Close()
			return port
		}
	}
	t.Fatalf("no free port in [%d, %d)", from, low)
	return 0
}

// eventually polls f every 250 ms until it returns nil, for at most d;
// then the last error fails the test. sparkpulse and Spark are other
// processes, so their state is read, not signalled.
func eventually(t *testing.T, d time.Duration, what string, f func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		err := f()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within %s: %v", what, d, err)
		case <-tick.C:
		}
	}
}

var errNotYet = errors.New("not yet")

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// The loopback check recognises Spark's warnings (Utils.findLocalInetAddress)
// and nothing else.
func TestOtherAddressWarning(t *testing.T) {
	for _, l := range []string{
		"26/11/25 15:53:10 WARN Utils: Your hostname, vm resolves to a loopback address: 127.0.0.1; using 10.0.2.15 instead (on interface eth0)",
		"26/11/25 15:53:10 WARN Utils: Set SPARK_LOCAL_IP if you need to bind to another address",
	} {
		if !otherAddress.MatchString(l) {
			t.Errorf("not recognised: %q", l)
		}
	}
	for _, l := range []string{
		"26/11/25 15:53:10 INFO Utils: Successfully started service 'sparkDriver' on port 40123.",
		"26/11/25 15:53:10 INFO HistoryServer: Bound HistoryServer to 127.0.0.1, and started at http://localhost:39467",
	} {
		if otherAddress.MatchString(l) {
			t.Errorf("taken for a warning: %q", l)
		}
	}
}

// metric sums the samples of a counter in sparkpulse's /metrics whose
// labels contain label (e.g. `reason="cut"`).
func metric(t *testing.T, admin, name, label string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, name+"{") || !strings.Contains(l, label) {
			continue
		}
		if i := strings.LastIndexByte(l, ' '); i > 0 {
			v, _ := strconv.ParseFloat(l[i+1:], 64)
			sum += v
		}
	}
	return sum
}

// TestMain removes the binary the tests built, if they did; never the
// one SPARKPULSE_BIN names (make's bin/).
func TestMain(m *testing.M) {
	code := m.Run()
	if buildOnce.built {
		os.RemoveAll(filepath.Dir(buildOnce.bin))
	}
	os.Exit(code)
}
