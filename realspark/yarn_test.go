package realspark

import (
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
	"github.com/sparkpulse/sparkpulse/sizing"
	"github.com/sparkpulse/sparkpulse/spark"
	"github.com/sparkpulse/sparkpulse/sparkapi"
	"github.com/sparkpulse/sparkpulse/templates"
)

// The YARN of the suite: what each NodeManager offers. With the suite's
// executors (512 MiB heap and Spark's 384 MiB overhead, 896 MiB that
// YARN rounds up to 1 GiB) and application masters (the same, or the
// driver's in cluster mode) each NodeManager holds three containers.
const (
	nodeMemoryMB = 3072
	nodeVcores   = 4
)

// yarnSettings are the cluster's settings (yarncluster's SETTINGS): the
// one place they are chosen. shuffleJars is the class path of the
// NodeManagers' Spark shuffle service: the Spark release under test.
func yarnSettings(sparkJars string, shufflePort int) map[string]string {
	s := map[string]string{
		"nodes": "a,b",
		// Loopback only: every server binds 127.0.0.1, and the
		// NodeManagers call their host localhost.
		"yarn.resourcemanager.hostname":  "127.0.0.1",
		"yarn.resourcemanager.bind-host": "127.0.0.1",
		"yarn.nodemanager.bind-host":     "127.0.0.1",
		"yarn.nodemanager.hostname":      "localhost",
		// Containers are rounded up to a multiple of the minimum
		// allocation, as on a production cluster (default 1024).
		"yarn.scheduler.minimum-allocation-mb": "512",
		"yarn.scheduler.maximum-allocation-mb": strconv.Itoa(nodeMemoryMB),
		// The NodeManager's memory monitor as on production YARN without
		// cgroups: the process tree's resident memory is checked every
		// 3 s (the default) and a container over its limit is killed.
		// Hadoop 3.4.1 skips that check unless
		// yarn.nodemanager.resource.memory.enforced is false, since it
		// takes that setting (default true) to mean that cgroups enforce
		// the limit, even when cgroups' memory control is off
		// (YARN-11967, fixed after 3.4.1).
		"yarn.nodemanager.pmem-check-enabled":       "true",
		"yarn.nodemanager.vmem-check-enabled":       "false",
		"yarn.nodemanager.resource.memory.enforced": "false",
		"yarn.nodemanager.resource.memory-mb":       strconv.Itoa(nodeMemoryMB),
		"yarn.nodemanager.resource.cpu-vcores":      strconv.Itoa(nodeVcores),
		// A nearly full disk must not mark the NodeManagers unhealthy.
		"yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage": "100",
		// Spark's external shuffle service, as an auxiliary service.
		"yarn.nodemanager.aux-services":                         "spark_shuffle",
		"yarn.nodemanager.aux-services.spark_shuffle.class":     "sparkpulse.yarn.ShuffleService",
		"yarn.nodemanager.aux-services.spark_shuffle.classpath": sparkJars,
		"spark.shuffle.service.port":                            strconv.Itoa(shufflePort),
		// Two queues of the capacity scheduler, each guaranteed half
		// the cluster and allowed all of it, and the preemption monitor:
		// an application over its queue's share loses containers to one
		// in the other queue that is under it.
		"yarn.scheduler.capacity.root.queues":                                         "default,etl",
		"yarn.scheduler.capacity.root.default.capacity":                               "50",
		"yarn.scheduler.capacity.root.etl.capacity":                                   "50",
		"yarn.scheduler.capacity.root.default.maximum-capacity":                       "100",
		"yarn.scheduler.capacity.root.etl.maximum-capacity":                           "100",
		"yarn.scheduler.capacity.root.default.user-limit-factor":                      "2",
		"yarn.scheduler.capacity.root.etl.user-limit-factor":                          "2",
		"yarn.resourcemanager.scheduler.monitor.enable":                               "true",
		"yarn.resourcemanager.scheduler.monitor.policies":                             "org.apache.hadoop.yarn.server.resourcemanager.monitor.capacity.ProportionalCapacityPreemptionPolicy",
		"yarn.resourcemanager.monitor.capacity.preemption.monitoring_interval":        "1000",
		"yarn.resourcemanager.monitor.capacity.preemption.max_wait_before_kill":       "1000",
		"yarn.resourcemanager.monitor.capacity.preemption.total_preemption_per_round": "1.0",
		"yarn.resourcemanager.monitor.capacity.preemption.natural_termination_factor": "1.0",
		"yarn.resourcemanager.monitor.capacity.preemption.max_ignored_over_capacity":  "0",
	}
	return s
}

// quickJVM are Java options for the Spark JVMs of the YARN and
// standalone runs. On 2 cores a dozen JVMs start at once; compiling
// with C1 only starts them sooner (TestYARN took 235 s, not 307-346 s)
// and changes nothing that is checked: heap, containers and the Python
// workers' memory are the same.
const quickJVM = "-XX:TieredStopAtLevel=1"

// sinkConf is the README's Spark settings ("Spark in 5 minutes"), read
// from it, so that every real Spark of the suite runs as the README tells
// users to run theirs: the sink at 127.0.0.1:port, and every 1 s instead
// of 10 s (executor metrics polled every 1 s too) for the tests' speed.
func sinkConf(t *testing.T, port string) map[string]string {
	t.Helper()
	c := readmeSparkConf(t)
	for k, v := range map[string]string{
		"spark.metrics.conf.*.sink.graphite.host": "127.0.0.1",
		"spark.metrics.conf.*.sink.graphite.port": port,
		// The period, and ExecutorMetrics polled at this interval instead
		// of at each heartbeat: short-lived Python workers are seen.
		"spark.metrics.conf.*.sink.graphite.period": "1",
		"spark.executor.metrics.pollingInterval":    "1s",
	} {
		if _, ok := c[k]; !ok {
			t.Fatalf("the README's Spark settings have no %s", k)
		}
		c[k] = v
	}
	return c
}

// readme is the README's text.
func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// readmeSparkConf is every --conf of the README's spark-submit example.
func readmeSparkConf(t *testing.T) map[string]string {
	t.Helper()
	_, block, ok := strings.Cut(readme(t), "```sh\nspark-submit \\\n")
	block, _, _ = strings.Cut(block, "```")
	c := map[string]string{}
	for _, m := range readmeConf.FindAllStringSubmatch(block, -1) {
		c[m[1]] = m[2]
	}
	if !ok || len(c) < 9 {
		t.Fatalf("the README's spark-submit example: %d settings read", len(c))
	}
	return c
}

var readmeConf = regexp.MustCompile(`--conf "([^="]+)=([^"]*)"`)

// The README's settings are read whole, without Spark: the sink, the JVM
// source, and the three Spark settings, the test's overrides applied.
func TestReadmeSparkConf(t *testing.T) {
	c := sinkConf(t, "2999")
	for k, v := range map[string]string{
		"spark.metrics.conf.*.sink.graphite.class":  "org.apache.spark.metrics.sink.GraphiteSink",
		"spark.metrics.conf.*.sink.graphite.port":   "2999",
		"spark.metrics.conf.*.source.jvm.class":     "org.apache.spark.metrics.source.JvmSource",
		"spark.metrics.appStatusSource.enabled":     "true",
		"spark.executor.processTreeMetrics.enabled": "true",
	} {
		if c[k] != v {
			t.Errorf("%s = %q, want %q", k, c[k], v)
		}
	}
}

// yarnRun is one Spark version's run on YARN, for the checks.
type yarnRun struct {
	version string
	srv     *influxtest.Server
	y       *yarnCluster
	tap     *webTap
	hs      string
	apps    []*application // client, cluster, preempt
	// What the test did, by application and executor: the removal kind
	// each executor's end must read as.
	causes    map[string]map[string]string
	lostNode  string
	lostExecs []string           // the client's executors on it
	yarn      map[string]yarnApp // what YARN said of each application at its end
	lines     []string
	from, to  time.Time
}

// TestYARN runs each pinned Spark on a real YARN: the ResourceManager,
// NodeManagers that enforce their containers' memory, the capacity
// scheduler with preemption and Spark's shuffle service, with sparkpulse
// reading the live UIs through the ResourceManager's proxy, as users on
// YARN configure it, and then the History Server:
//
//   - in client mode, a PySpark application whose Python worker outgrows
//     its container (YARN kills it), whose executors run out of heap,
//     and that loses a NodeManager while its tasks run;
//   - in cluster mode, an application with dynamic allocation and the
//     external shuffle service that scales up to the whole cluster, loses
//     executors to a second application's preemption, releases them all
//     when idle and reads its shuffle again from the shuffle service;
//   - the second application, in the other queue.
func TestYARN(t *testing.T) {
	t.Parallel() // beside TestStandalone
	for _, v := range versions(t) {
		t.Run(v, func(t *testing.T) { runYARN(t, v) })
	}
}

func runYARN(t *testing.T, version string) {
	w := newSparkWork(t, version, "staging")
	home, work, events := w.home, w.dir, w.events
	began := time.Now()
	step := func(what string) { t.Logf("%5.1f s: %s", time.Since(began).Seconds(), what) }
	r := &yarnRun{version: version, srv: influxtest.Start(t), from: time.Now().Add(-time.Minute),
		causes: map[string]map[string]string{}, yarn: map[string]yarnApp{}}
	r.hs = historyServer(t, home, work, events)

	// The shuffle service's port must be known to the NodeManagers and to
	// Spark beforehand: one free a moment ago; taken in between, the
	// NodeManagers fail to start and say so.
	shufflePort := freePort(t)
	sparkJars := filepath.Join(home, "pyspark", "jars", "*")
	r.y = startYARN(t, filepath.Join(work, "yarn"), yarnSettings(filepath.Join(yarnDir(t), "sparkpulse-yarncluster.jar")+":"+sparkJars, shufflePort))
	r.tap = startWebTap(t, r.y.web)
	step("YARN up")

	sp := startSparkpulse(t, r.srv.URL, config.Config{
		Internal: config.InternalConfig{Interval: config.Duration(2 * time.Second)},
		Deltas:   config.DeltaSettings{FirstSampleGrace: new(config.Duration(0))},
		Annotate: config.AnnotateConfig{
			URLs:                    []string{r.tap.url + "/proxy/{app_id}", r.hs},
			Interval:                config.Duration(time.Second),
			UsageDelay:              config.Duration(10 * time.Second), // YARN's own figures are final once its last containers ended
			StageDetailsMinDuration: config.SignedDuration(-time.Second),
		},
		Graphite: []config.GraphiteConfig{{Protocol: "tcp", Database: db}},
	})
	tee := startTee(t, sp.graphite(t, 0), nil)

	hsURL, _ := strings.CutPrefix(r.hs, "http://")
	conf := func(extra map[string]string) map[string]string {
		c := sinkConf(t, tee.port())
		for k, v := range map[string]string{
			"spark.driver.host":            "127.0.0.1",
			"spark.driver.bindAddress":     "127.0.0.1",
			"spark.ui.port":                "0", // read through YARN's proxy, wherever it is
			"spark.ui.showConsoleProgress": "false",
			"spark.executor.memory":        "512m",
			"spark.driver.memory":          "512m",
			"spark.eventLog.enabled":       "true",
			"spark.eventLog.dir":           "file:" + events,
			"spark.sql.shuffle.partitions": "8",
			// Spark's jars are on every node: nothing to upload.
			"spark.yarn.jars":           "local:" + filepath.Join(home, "pyspark", "jars", "*"),
			"spark.yarn.stagingDir":     "file://" + filepath.Join(work, "staging"),
			"spark.yarn.maxAppAttempts": "1",
			// The application master asks YARN every second, not every
			// 3 s: containers it got and lost reach Spark sooner.
			"spark.yarn.scheduler.heartbeat.interval-ms": "1000",
			"spark.driver.extraJavaOptions":              quickJVM,
			"spark.executor.extraJavaOptions":            quickJVM,
			"spark.yarn.am.extraJavaOptions":             quickJVM,
			"spark.yarn.historyServer.address":           hsURL,
			// Containers start with the NodeManager's environment, not
			// the test's: Python and loopback are given to them.
			"spark.yarn.appMasterEnv.PYSPARK_PYTHON":       "python3",
			"spark.executorEnv.PYSPARK_PYTHON":             "python3",
			"spark.yarn.appMasterEnv.SPARK_LOCAL_IP":       "127.0.0.1",
			"spark.executorEnv.SPARK_LOCAL_IP":             "127.0.0.1",
			"spark.yarn.appMasterEnv.SPARK_LOCAL_HOSTNAME": "localhost",
			"spark.executorEnv.SPARK_LOCAL_HOSTNAME":       "localhost",
		} {
			c[k] = v
		}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	env := []string{"HADOOP_CONF_DIR=" + r.y.conf}
	submit := func(mode, queue string, cfg workloadConfig) *application {
		cfg.Out = filepath.Join(work, "app-"+cfg.Scenario)
		return submitApplication(t, home, work, env, []string{"--master", "yarn", "--deploy-mode", mode, "--queue", queue}, cfg)
	}

	// Client mode: a Python worker over its container, executors out of
	// heap, a node lost.
	client := submit("client", "etl", workloadConfig{AppName: "sparkpulse yarn client", Scenario: "yarn", Executors: 3,
		Conf: conf(map[string]string{"spark.executor.instances": "3", "spark.task.maxFailures": "2"})})
	client.started()
	lose := client.expect("LOSE", 6*time.Minute)
	step("client: every executor busy")
	r.lostNode, r.lostExecs = r.loseNode(t, client, strings.Join(lose, " "))
	step("client: a node lost")

	// Cluster mode, dynamic allocation on a fresh node and the one left,
	// submitted while the client application goes on; once it has the
	// whole cluster, a second application in the other queue preempts
	// some of its executors.
	r.y.startNode("c")
	// Executors 0: the workload does not wait for the initial executor,
	// which the 2 s idle timeout may release before the wait sees it
	// (minExecutors is 0); its job asks for executors itself.
	dynamic := submit("cluster", "default", workloadConfig{AppName: "sparkpulse yarn dynamic", Scenario: "dynamic", Executors: 0,
		Conf: conf(map[string]string{
			"spark.dynamicAllocation.enabled":                 "true",
			"spark.shuffle.service.enabled":                   "true",
			"spark.shuffle.service.port":                      strconv.Itoa(shufflePort),
			"spark.dynamicAllocation.minExecutors":            "0",
			"spark.dynamicAllocation.initialExecutors":        "1",
			"spark.dynamicAllocation.maxExecutors":            "5",
			"spark.dynamicAllocation.executorIdleTimeout":     "2s",
			"spark.dynamicAllocation.schedulerBacklogTimeout": "1s",
		})})
	client.answer("lost")
	client.waitDone()
	tee.waitReports(t, client.id, func() []string { return liveProcesses(t, client) }, client.done)
	client.stop()
	step("client: ended")

	dynamic.started()
	dynamic.expect("FULL", 6*time.Minute)
	step("dynamic: the whole cluster")
	preempt := submit("client", "etl", workloadConfig{AppName: "sparkpulse yarn preempt", Scenario: "small", Executors: 1,
		Conf: conf(map[string]string{"spark.executor.instances": "1"})})
	preempt.started()
	eventually(t, 3*time.Minute, "an executor of "+dynamic.id+" preempted", func() error {
		var execs []sparkapi.Executor
		getJSON(t, dynamic.ui+"/api/v1/applications/"+dynamic.id+"/allexecutors", &execs)
		for _, x := range execs {
			if strings.Contains(x.RemoveReason, "preempted") {
				return nil
			}
		}
		return errNotYet
	})
	dynamic.answer("preempted")
	step("dynamic: executors preempted")
	preempt.waitDone()
	tee.waitReports(t, preempt.id, func() []string { return liveProcesses(t, preempt) }, preempt.done)
	preempt.stop()
	dynamic.waitDone()
	tee.waitReports(t, dynamic.id, func() []string { return liveProcesses(t, dynamic) }, dynamic.done)
	dynamic.stop()
	r.apps = []*application{client, dynamic, preempt}
	step("dynamic and preempt: ended")

	for _, a := range r.apps {
		waitReconciled(t, r.srv, a.id)
	}
	// What YARN says of each application now that sparkpulse read it.
	for _, a := range r.apps {
		r.yarn[a.id] = r.y.app(a.id)
	}
	r.lines, _ = tee.taken()
	step("accounted")
	sp.stop(t)
	r.to = time.Now()
	checkLoopbackDir(t, work)
	r.causes = r.expectedCauses(t)
	if *update {
		r.record(t)
	}
	t.Run("paths", func(t *testing.T) { checkPaths(t, r.lines) })
	t.Run("removals", func(t *testing.T) { checkYARNRemovals(t, r) })
	t.Run("proxy", func(t *testing.T) { checkProxy(t, r) })
	t.Run("usage", func(t *testing.T) { checkYARNUsage(t, r) })
	t.Run("advice", func(t *testing.T) { checkYARNAdvice(t, r) })
	t.Run("shuffle service", func(t *testing.T) { checkShuffleService(t, r) })
}

// liveProcesses are the driver and the executors a's live UI lists as
// active now.
func liveProcesses(t *testing.T, a *application) []string {
	t.Helper()
	var execs []sparkapi.Executor
	getJSON(t, a.ui+"/api/v1/applications/"+a.id+"/executors", &execs)
	var out []string
	for _, x := range execs {
		if x.IsActive {
			out = append(out, x.ID)
		}
	}
	return out
}

// loseNode stops the NodeManager that runs executors of a but not its
// application master, and waits until Spark lists those executors as
// removed; it returns the node's name and the executors.
func (r *yarnRun) loseNode(t *testing.T, a *application, said string) (string, []string) {
	t.Helper()
	var ports map[string]string // executor → its NodeManager's port
	if err := json.Unmarshal([]byte(said), &ports); err != nil {
		t.Fatalf("LOSE %s: %v", said, err)
	}
	am := r.y.amNode(a.id)
	var victim string
	var lost []string
	for name, id := range r.y.nodes {
		if name == am {
			continue
		}
		_, port, _ := net.SplitHostPort(id)
		var on []string
		for x, p := range ports {
			if p == port {
				on = append(on, x)
			}
		}
		if len(on) > 0 {
			victim, lost = name, on
		}
	}
	if victim == "" {
		t.Fatalf("every executor %v runs beside the application master on %s", ports, am)
	}
	sort.Strings(lost)
	state := r.y.stopNode(victim)
	t.Logf("NodeManager %s stopped (%s): executors %v on it, the application master on %s", victim, state, lost, am)
	eventually(t, 3*time.Minute, "executors "+strings.Join(lost, ",")+" removed", func() error {
		var execs []sparkapi.Executor
		getJSON(t, a.ui+"/api/v1/applications/"+a.id+"/allexecutors", &execs)
		for _, x := range execs {
			if slices.Contains(lost, x.ID) && x.RemoveReason == "" {
				return fmt.Errorf("executor %s still listed as active", x.ID)
			}
		}
		return nil
	})
	return victim, lost
}

// expectedCauses works out, from what the test did and what Spark and
// YARN said of it, how each removed executor's end must read:
//
//   - client: the executor that ran the first attempt of the Python job's
//     hungry task: container_oom; those that ran the heap job's tasks:
//     heap_oom; those on the stopped NodeManager: lost;
//   - dynamic: as many preempted as YARN says it preempted, every other
//     one removed before the end released by the driver;
//   - preempt: none before its end.
func (r *yarnRun) expectedCauses(t *testing.T) map[string]map[string]string {
	out := map[string]map[string]string{}
	client, dynamic := r.apps[0], r.apps[1]
	c := map[string]string{}
	var stages []sparkapi.Stage
	client.rest("stages", &stages)
	var failed map[string][]sparkapi.TaskData
	client.rest("failed-tasks", &failed)
	for _, st := range stages {
		kind := ""
		switch st.Description {
		case "python over its container":
			kind = sizing.RemovedContainerOOM
		case "heap out of memory":
			kind = sizing.RemovedHeapOOM
		default:
			continue
		}
		for _, task := range failed[fmt.Sprintf("%d.%d", st.StageID, st.AttemptID)] {
			if task.Status == "FAILED" {
				c[task.ExecutorID] = kind
			}
		}
	}
	for _, x := range r.lostExecs {
		if k, ok := c[x]; ok {
			t.Fatalf("executor %s: both %s and on the lost node", x, k)
		}
		c[x] = sizing.RemovedLost
	}
	out[client.name] = c

	d := map[string]string{}
	var execs []sparkapi.Executor
	dynamic.rest("allexecutors", &execs)
	preempted := r.yarn[dynamic.id].PreemptedContainers
	for _, x := range execs {
		if x.ID == "driver" || x.RemoveReason == "" {
			continue
		}
		// Which executors YARN took is told by its own words only; how
		// many, by YARN's count, checked below.
		if strings.Contains(x.RemoveReason, "was preempted") {
			d[x.ID] = sizing.RemovedPreempted
			preempted--
		} else {
			d[x.ID] = sizing.RemovedReleased
		}
	}
	if preempted != 0 {
		t.Errorf("YARN preempted %d containers of %s, Spark names %d", r.yarn[dynamic.id].PreemptedContainers, dynamic.id, r.yarn[dynamic.id].PreemptedContainers-preempted)
	}
	out[dynamic.name] = d
	out[r.apps[2].name] = map[string]string{}
	return out
}

// checkYARNRemovals: every executor's removal is written with the kind
// its cause gives, from the reason YARN and Spark gave.
func checkYARNRemovals(t *testing.T, r *yarnRun) {
	for _, a := range r.apps {
		want := r.causes[a.name]
		got := map[string]string{}
		for _, s := range r.srv.Query(t, db, fmt.Sprintf(`SELECT "executor_id", "remove_kind", "remove_reason" FROM "spark_executor_removal" WHERE "applicationid" = '%s'`, a.id)) {
			for _, row := range s.Values {
				got[fmt.Sprint(row[1])] = fmt.Sprint(row[2])
				t.Logf("%s: executor %v: %v: %v", a.name, row[1], row[2], row[3])
			}
		}
		for x, k := range want {
			if got[x] != k {
				t.Errorf("%s: executor %s removed as %q, the test caused %s", a.name, x, got[x], k)
			}
		}
		if len(want) == 0 && len(got) > 0 {
			t.Errorf("%s: removals %v, the test caused none", a.name, got)
		}
	}
	if n := len(r.causes[r.apps[0].name]); n < 4 {
		t.Errorf("client: %d executors removed by the test's causes, want at least 4 (one over its container, two out of heap, one with its node): %v", n, r.causes[r.apps[0].name])
	}
}

// record writes the run under testdata/spark-real/<version>/yarn: each
// application's REST answers, what YARN said of it, and the causes.
func (r *yarnRun) record(t *testing.T) {
	dir := filepath.Join(repoRoot, "testdata", "spark-real", r.version, "yarn")
	for _, a := range r.apps {
		a.record(t, filepath.Join(dir, a.name), map[string]any{"application": a.id, "metrics_key": a.id, "yarn": r.yarn[a.id],
			"removed": r.causes[a.name]})
	}
}

// checkProxy: sparkpulse read each application's live UI through the
// ResourceManager's proxy (the tap in front of it saw answers of Spark's
// REST API), and the History Server closed each one out.
func checkProxy(t *testing.T, r *yarnRun) {
	for _, a := range r.apps {
		prefix := "/proxy/" + a.id + "/api/v1/"
		t.Logf("%s: through YARN's proxy: %v", a.name, r.tap.statuses(prefix))
		if r.tap.answered(prefix, 200) == 0 {
			t.Errorf("%s: no answer of Spark's REST API through YARN's proxy: %v", a.name, r.tap.statuses(prefix))
		}
		row := one(t, r.srv, db, fmt.Sprintf(`SELECT "status" FROM "spark_app" WHERE "app_id" = '%s' AND "fact" = 'end'`, a.id))
		if row["status"] != "COMPLETED" {
			t.Errorf("%s: spark_app end fact %v", a.name, row)
		}
	}
}

// historyApp is the History Server's word on an ended application.
func (r *yarnRun) historyApp(t *testing.T, id string) sparkapi.Application {
	t.Helper()
	var app sparkapi.Application
	getJSON(t, r.hs+"/api/v1/applications/"+id, &app)
	return app
}

// coreSeconds is Σ cores × lifetime over Spark's executors (the driver
// aside), each up to its removal or endMs, and their cores. An executor
// YARN started while the driver was stopping registers after the end: it
// held nothing in Spark's view (YARN's figures count its container).
func coreSeconds(execs []sparkapi.Executor, endMs int64) (seconds float64, cores int) {
	for _, x := range execs {
		if x.ID == "driver" || x.AddTime == nil {
			continue
		}
		until := endMs
		if x.RemoveTime != nil && x.RemoveTime.UnixMilli() < endMs {
			until = x.RemoveTime.UnixMilli()
		}
		seconds += float64(x.TotalCores) * float64(max(until-x.AddTime.UnixMilli(), 0)) / 1000
		cores += x.TotalCores
	}
	return seconds, cores
}

// checkYARNUsage: each application's accounting, against what Spark and
// YARN said: the queue and user YARN reports in its tags; what the
// cluster held for the driver side (YARN's application master in client
// mode, the driver's container in cluster mode); executor core-seconds,
// Σ cores × lifetime over Spark's executors, exact under dynamic
// allocation, preemption and a lost node.
func checkYARNUsage(t *testing.T, r *yarnRun) {
	for _, a := range r.apps {
		y := r.yarn[a.id]
		res := r.srv.Query(t, db, fmt.Sprintf(`SELECT * FROM "spark_app_usage" WHERE "app_id" = '%s' AND "fact" = 'end' GROUP BY "queue", "user"`, a.id))
		if len(res) != 1 || len(res[0].Values) != 1 {
			t.Errorf("%s: %d series of end usage", a.name, len(res))
			continue
		}
		if q, u := res[0].Tags["queue"], res[0].Tags["user"]; q != y.Queue || u != y.User {
			t.Errorf("%s: usage tagged queue %q, user %q; YARN reports queue %q, user %q", a.name, q, u, y.Queue, y.User)
		}
		row := map[string]any{}
		for i, c := range res[0].Columns {
			row[c] = res[0].Values[0][i]
		}
		// Nothing real Spark on YARN sends is set aside as implausible:
		// executors YARN killed included.
		if num(row["set_aside_count"]) != 0 {
			t.Errorf("%s: real Spark's stream set aside: %v", a.name, row["set_aside"])
		}
		att := r.historyApp(t, a.id).Attempts
		if len(att) != 1 {
			t.Fatalf("%s: %d attempts", a.name, len(att))
		}
		start, end := att[0].StartTime.UnixMilli(), att[0].EndTime.UnixMilli()
		var execs []sparkapi.Executor
		getJSON(t, r.hs+"/api/v1/applications/"+a.id+"/"+attemptPath(att[0])+"allexecutors", &execs)
		want, _ := coreSeconds(execs, end)
		if got := num(row["executor_core_seconds"]); !near(got, want) {
			t.Errorf("%s: executor_core_seconds %v, Σ cores × lifetime over Spark's executors %v", a.name, got, want)
			for _, x := range execs { // which lifetime to look at
				t.Logf("%s: executor %s: %d cores, added %v, removed %v (%s)", a.name, x.ID, x.TotalCores, x.AddTime, x.RemoveTime, x.RemoveReason)
			}
		}
		held, wantHeld := row["driver_held"], sizing.DriverYARNAM
		if a.name == "dynamic" {
			wantHeld = sizing.DriverInCluster
		}
		if held != wantHeld {
			t.Errorf("%s: driver_held %v, want %s", a.name, held, wantHeld)
		}
		// One core for the application master (spark.yarn.am.cores) or
		// the driver (spark.driver.cores), from the driver's registration
		// (after YARN started the application master) to the end.
		for _, x := range execs {
			if x.ID == "driver" {
				if got, want := num(row["driver_core_seconds"]), float64(end-x.AddTime.UnixMilli())/1000; !near(got, want) {
					t.Errorf("%s: driver_core_seconds %v, one core from the driver's registration to the end: %v", a.name, got, want)
				}
			}
		}
		// YARN held at least what Spark saw: each container from its
		// allocation, rounded up.
		if spark := num(row["executor_core_seconds"]) + num(row["driver_core_seconds"]); float64(y.VcoreSeconds) < spark-1 {
			t.Errorf("%s: YARN reports %d vcore-seconds, less than the %.1f Spark's view counts", a.name, y.VcoreSeconds, spark)
		}
		// Memory too, now that Spark's view is rounded as YARN's scheduler
		// rounds (yarn.scheduler.minimum-allocation-mb, 512 here: the
		// 896 MiB executor is a 1 GiB container); YARN's figure is whole
		// MB-seconds per container.
		if spark := num(row["executor_memory_byte_seconds"]) + num(row["driver_memory_byte_seconds"]); float64(y.MemorySeconds)*(1<<20) < 0.999*spark-(1<<20) {
			t.Errorf("%s: YARN reports %d MB-s, less than the %.0f MB-s Spark's view counts, rounded as YARN rounds", a.name, y.MemorySeconds, spark/(1<<20))
		}
		t.Logf("%s: run %d ms", a.name, end-start)
		// YARN's own figures, as its ResourceManager reports them at the
		// end: what it held, from each container's allocation.
		if got := integer(row["yarn_vcore_seconds"]); got != y.VcoreSeconds {
			t.Errorf("%s: yarn_vcore_seconds %v, YARN reports %d", a.name, row["yarn_vcore_seconds"], y.VcoreSeconds)
		}
		if got := num(row["yarn_memory_byte_seconds"]); got != float64(y.MemorySeconds)*(1<<20) {
			t.Errorf("%s: yarn_memory_byte_seconds %v, YARN reports %d MB-s", a.name, row["yarn_memory_byte_seconds"], y.MemorySeconds)
		}
		spark := num(row["executor_core_seconds"]) + num(row["driver_core_seconds"])
		t.Logf("%s: executors %.1f core-s, driver side %.1f (%v); YARN: %d vcore-s (%.2f × Spark's view), %d MB-s (%.2f ×)", a.name,
			num(row["executor_core_seconds"]), num(row["driver_core_seconds"]), held, y.VcoreSeconds, float64(y.VcoreSeconds)/spark,
			y.MemorySeconds, float64(y.MemorySeconds<<20)/(num(row["executor_memory_byte_seconds"])+num(row["driver_memory_byte_seconds"])))
	}
}

// checkYARNAdvice: the client application's advice sizes the container
// for the Python peak Spark measured before YARN killed it, and the
// dynamic one's idle rules stay quiet.
func checkYARNAdvice(t *testing.T, r *yarnRun) {
	client := r.apps[0]
	usage := one(t, r.srv, db, fmt.Sprintf(`SELECT "peak_python_rss_bytes", "peak_rss_bytes" FROM "spark_app_usage" WHERE "app_id" = '%s' AND "fact" = 'end'`, client.id))
	python, rss := integer(usage["peak_python_rss_bytes"]), integer(usage["peak_rss_bytes"])
	// The largest Python peak Spark sent before YARN's kill, and listed.
	var sent int64
	for _, l := range r.lines {
		f := strings.Fields(l)
		if len(f) == 3 && strings.HasPrefix(f[0], client.id+".") && strings.HasSuffix(f[0], ".ProcessTreePythonRSSMemory") {
			v, _ := strconv.ParseFloat(f[1], 64)
			sent = max(sent, int64(v))
		}
	}
	var execs []sparkapi.Executor
	client.rest("allexecutors", &execs)
	for _, x := range execs {
		sent = max(sent, x.PeakMemoryMetrics["ProcessTreePythonRSSMemory"])
	}
	if python != sent {
		t.Errorf("client: peak_python_rss_bytes %d; Spark's largest, sent and listed, %d", python, sent)
	}
	// Spark samples every few seconds: YARN may kill the worker that grew
	// over the overhead (384 MiB) before a sample shows it.
	if python <= 384<<20 {
		t.Logf("client: Spark's samples saw Python workers at %d bytes at most, within the overhead; YARN killed the container before one showed more", python)
	}
	settings := map[string]map[string]any{}
	for _, s := range r.srv.Query(t, db, fmt.Sprintf(`SELECT * FROM "spark_sizing" WHERE "applicationid" = '%s'`, client.id)) {
		for _, v := range s.Values {
			row := map[string]any{}
			for i, c := range s.Columns {
				row[c] = v[i]
			}
			t.Logf("client: sizing %v %v %v %v", row["kind"], row["rule"], row["property"], row["text"])
			if row["kind"] == "setting" {
				settings[fmt.Sprint(row["property"])] = row
			}
		}
	}
	over := settings["spark.executor.memoryOverhead"]
	if over == nil {
		t.Fatalf("client: no spark.executor.memoryOverhead advised after YARN killed a container over its limit")
	}
	v, err := sizing.ParseSize(fmt.Sprint(over["value"]), 1<<20)
	if err != nil {
		t.Fatalf("client: memoryOverhead %v: %v", over["value"], err)
	}
	// The advised container (512 MiB heap and the overhead) holds the
	// largest resident memory measured with a tenth to spare.
	if container := 512<<20 + v; float64(rss) > 0.9*float64(container) {
		t.Errorf("client: advised container %d bytes, the measured peak %d is over 90 %% of it", container, rss)
	}
	if !strings.Contains(fmt.Sprint(over["reason"]), "YARN") {
		t.Logf("client: the overhead's reason does not name YARN's limit: %v", over["reason"])
	}
	if heap := settings["spark.executor.memory"]; heap == nil || heap["rule"] != "heap" {
		t.Errorf("client: executors out of heap, and no heap advised: %v", heap)
	}

	for _, s := range r.srv.Query(t, db, fmt.Sprintf(`SELECT "rule", "property" FROM "spark_sizing" WHERE "applicationid" = '%s' AND "kind" = 'setting'`, r.apps[1].id)) {
		for _, v := range s.Values {
			if v[1] == "idle" || v[1] == "idle-timeout" {
				t.Errorf("dynamic: the %v rule fired on an application whose executors were released when idle: %v", v[1], v)
			}
		}
	}
}

// attemptPath is "<attempt id>/" for an attempt that has one (YARN's
// cluster mode), else "".
func attemptPath(a sparkapi.Attempt) string {
	if a.AttemptID == "" {
		return ""
	}
	return a.AttemptID + "/"
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b)) }

// checkPaths: every path the cluster's Spark processes sent (the
// application master's included) maps to a documented measurement.
func checkPaths(t *testing.T, lines []string) {
	m := spark.NewMapper(spark.Options{})
	var res templates.Result
	unmapped := map[string]bool{}
	names := map[string]bool{}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) != 3 {
			t.Fatalf("not a Graphite line: %q", l)
		}
		if err := m.Apply([]byte(f[0]), &res); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		if n := spark.InventoryName(&res); n != "" {
			names[n] = true
		} else {
			unmapped[f[0]] = true
		}
	}
	if len(unmapped) > 0 {
		keys := sortedKeys(unmapped)
		t.Errorf("%d paths fell into \"anything else\": %v", len(keys), keys[:min(len(keys), 20)])
	}
	t.Logf("%d lines, %d metric names", len(lines), len(names))
}

// checkShuffleService: the dynamic application read its shuffle again
// after every executor that wrote it was gone, from the NodeManagers'
// shuffle service: Spark skipped the map stage, and nothing failed.
func checkShuffleService(t *testing.T, r *yarnRun) {
	var jobs []sparkapi.Job
	r.apps[1].rest("jobs", &jobs)
	for _, j := range jobs {
		if j.Description != "shuffle read from the shuffle service" {
			continue
		}
		t.Logf("job %d: %s, %d stages skipped, %d failed", j.JobID, j.Status, j.NumSkippedStages, j.NumFailedStages)
		if j.Status != "SUCCEEDED" || j.NumSkippedStages == 0 || j.NumFailedStages != 0 || j.NumFailedTasks != 0 {
			t.Errorf("the shuffle read again: %+v", j)
		}
		return
	}
	t.Errorf("no job read the shuffle again: %v", jobs)
}
