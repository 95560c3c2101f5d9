package realspark

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/influx/influxtest"
)

// yarnDir is where scripts/deps.sh builds the YARN harness
// (realspark/yarncluster): its jar and every jar it runs with.
func yarnDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join(repoRoot, ".deps", "yarn"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sparkpulse-yarncluster.jar")); err != nil {
		unavailable(t, fmt.Sprintf("the YARN harness is not built in %s: run `make deps`", dir))
	}
	return dir
}

// jdk17Opens are the packages Hadoop 3.4's ResourceManager and
// NodeManager reach into on JDK 17.
var jdk17Opens = []string{"java.lang", "java.util", "java.lang.reflect", "java.io", "java.net", "java.nio", "sun.nio.ch", "java.util.concurrent"}

// yarnCluster is a real YARN on loopback: Hadoop's ResourceManager and
// NodeManagers in one JVM (realspark/yarncluster), started and stopped by
// the test.
type yarnCluster struct {
	t      *testing.T
	dir    string
	conf   string // HADOOP_CONF_DIR
	web    string // the ResourceManager's web address, http://host:port
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	logs   *influxtest.Output
	exited chan struct{}

	mu    sync.Mutex
	nodes map[string]string // NodeManager name → node id (host:port)
}

// startYARN starts the cluster with settings (the ResourceManager's and
// every NodeManager's, and node.<name>.<key> for one NodeManager; nodes
// names those started at once) and waits until they have registered.
func startYARN(t *testing.T, dir string, settings map[string]string) *yarnCluster {
	t.Helper()
	jars := yarnDir(t)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var props strings.Builder
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&props, "%s=%s\n", k, strings.ReplaceAll(settings[k], `\`, `\\`))
	}
	path := filepath.Join(dir, "settings.properties")
	if err := os.WriteFile(path, []byte(props.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{}
	for _, p := range jdk17Opens {
		args = append(args, "--add-opens", "java.base/"+p+"=ALL-UNNAMED")
	}
	args = append(args, "-Xmx1g", "-cp", filepath.Join(jars, "sparkpulse-yarncluster.jar")+":"+filepath.Join(jars, "lib", "*"),
		"sparkpulse.yarn.YarnCluster", dir, path)
	y := &yarnCluster{t: t, dir: dir, conf: filepath.Join(dir, "conf"), logs: &influxtest.Output{}, exited: make(chan struct{}),
		lines: make(chan string, 16), nodes: map[string]string{}}
	y.cmd = exec.Command("java", args...)
	y.cmd.Dir = dir
	y.cmd.Stderr = y.logs
	y.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var err error
	if y.stdin, err = y.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := y.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := y.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			y.lines <- sc.Text()
		}
		close(y.lines)
	}()
	go func() { y.cmd.Wait(); close(y.exited) }()
	t.Cleanup(func() {
		y.stdin.Close()
		select {
		case <-y.exited:
		case <-time.After(30 * time.Second):
			syscall.Kill(-y.cmd.Process.Pid, syscall.SIGKILL)
			<-y.exited
		}
		checkLoopback(t, "YARN", y.logs.String())
		checkLoopbackDir(t, dir)
		if t.Failed() {
			t.Logf("YARN log:\n%s", tail(y.logs.String(), 6000))
			// The first container of each application is its application
			// master: in cluster mode, the driver and the workload.
			ams, _ := filepath.Glob(filepath.Join(dir, "nm-*", "log", "application_*", "container_*_01_000001", "stderr"))
			for _, am := range ams {
				b, _ := os.ReadFile(am)
				t.Logf("%s:\n%s", am, tail(string(b), 4000))
			}
		}
	})
	for {
		f := y.next("READY", 3*time.Minute)
		if f[0] == "READY" {
			y.web = "http://" + f[1]
			break
		}
	}
	t.Logf("YARN: ResourceManager %s, NodeManagers %v", y.web, y.nodes)
	return y
}

// next reads the harness's lines up to one starting with word (NODE
// lines on the way are noted) and returns its fields.
func (y *yarnCluster) next(word string, timeout time.Duration) []string {
	y.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-y.lines:
			if !ok {
				<-y.exited
				y.t.Fatalf("the YARN harness exited (%v):\n%s", y.cmd.ProcessState, tail(y.logs.String(), 6000))
			}
			f := strings.Fields(l)
			if len(f) == 3 && f[0] == "NODE" {
				y.mu.Lock()
				y.nodes[f[1]] = f[2]
				y.mu.Unlock()
			}
			if len(f) > 0 && f[0] == word {
				return f
			}
		case <-deadline:
			y.t.Fatalf("no %s from the YARN harness in %s:\n%s", word, timeout, tail(y.logs.String(), 6000))
		}
	}
}

// startNode starts NodeManager name (with its node.<name>.* settings).
func (y *yarnCluster) startNode(name string) {
	y.t.Helper()
	fmt.Fprintf(y.stdin, "start %s\n", name)
	y.next("NODE", 2*time.Minute)
}

// stopNode stops NodeManager name and returns the state the
// ResourceManager then gives its node.
func (y *yarnCluster) stopNode(name string) string {
	y.t.Helper()
	fmt.Fprintf(y.stdin, "stop %s\n", name)
	return y.next("STOPPED", 2*time.Minute)[2]
}

// nodeOf is the name of the NodeManager with node id id.
func (y *yarnCluster) nodeOf(id string) string {
	y.mu.Lock()
	defer y.mu.Unlock()
	for n, i := range y.nodes {
		if i == id {
			return n
		}
	}
	return ""
}

// yarnApp is what the ResourceManager's REST API says of an application
// (/ws/v1/cluster/apps/{id}).
type yarnApp struct {
	ID                  string  `json:"id"`
	User                string  `json:"user"`
	Queue               string  `json:"queue"`
	State               string  `json:"state"`
	FinalStatus         string  `json:"finalStatus"`
	Diagnostics         string  `json:"diagnostics"`
	ApplicationType     string  `json:"applicationType"`
	MemorySeconds       int64   `json:"memorySeconds"`
	VcoreSeconds        int64   `json:"vcoreSeconds"`
	PreemptedResourceMB int64   `json:"preemptedResourceMB"`
	PreemptedContainers int64   `json:"numNonAMContainerPreempted"`
	StartedTime         int64   `json:"startedTime"`
	FinishedTime        int64   `json:"finishedTime"`
	Progress            float64 `json:"progress"`
}

func (y *yarnCluster) app(id string) yarnApp {
	y.t.Helper()
	var v struct{ App yarnApp }
	getJSON(y.t, y.web+"/ws/v1/cluster/apps/"+id, &v)
	return v.App
}

// amNode is the name of the NodeManager running the application's
// master (its current attempt's first container).
func (y *yarnCluster) amNode(id string) string {
	y.t.Helper()
	var v struct {
		AppAttempts struct {
			AppAttempt []struct{ NodeID string }
		}
	}
	getJSON(y.t, y.web+"/ws/v1/cluster/apps/"+id+"/appattempts", &v)
	a := v.AppAttempts.AppAttempt
	if len(a) == 0 {
		y.t.Fatalf("YARN lists no attempt of %s", id)
	}
	return y.nodeOf(a[len(a)-1].NodeID)
}

// webTap is a reverse proxy in front of the ResourceManager's web
// address, which sparkpulse is given instead: it records each request's
// path and the status it was answered with, so that a test can tell
// what was read through YARN's proxy.
type webTap struct {
	srv  *http.Server
	url  string
	mu   sync.Mutex
	seen []tapped
}

type tapped struct {
	path   string
	status int
}

func startWebTap(t *testing.T, target string) *webTap {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	tap := &webTap{}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(r *http.Response) error {
		tap.mu.Lock()
		tap.seen = append(tap.seen, tapped{r.Request.URL.Path, r.StatusCode})
		tap.mu.Unlock()
		return nil
	}
	rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		tap.mu.Lock()
		tap.seen = append(tap.seen, tapped{r.URL.Path, 0}) // no answer
		tap.mu.Unlock()
		w.WriteHeader(http.StatusBadGateway)
	}
	ln := listen(t)
	tap.srv = &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	go tap.srv.Serve(ln)
	t.Cleanup(func() { tap.srv.Close() })
	tap.url = "http://" + ln.Addr().String()
	return tap
}

// answered counts the requests under prefix answered with status.
func (w *webTap) answered(prefix string, status int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, s := range w.seen {
		if strings.HasPrefix(s.path, prefix) && s.status == status {
			n++
		}
	}
	return n
}

// statuses are the statuses of the requests under prefix, with counts.
func (w *webTap) statuses(prefix string) map[int]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[int]int{}
	for _, s := range w.seen {
		if strings.HasPrefix(s.path, prefix) {
			out[s.status]++
		}
	}
	return out
}

// listen listens on a free loopback port.
func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}
