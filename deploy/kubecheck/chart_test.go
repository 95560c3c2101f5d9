package kubecheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/pelletier/go-toml/v2"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	sigsyaml "sigs.k8s.io/yaml"
)

const (
	chart     = "../helm/sparkpulse"
	namespace = "monitoring"
	// The image repository every render is given: the chart has none.
	repository = "registry.example/sparkpulse"
	mi         = 1 << 20
	// What the chart's plan sets aside besides the queues and series
	// (templates/_helpers.tpl), and the bytes of one series in the delta
	// baseline file (delta/state.go), of which the volume must hold two
	// copies while the file is replaced.
	fixedBytes      = 96 * mi
	baselineBytes   = 40
	stateFileHeader = 16 * mi
)

// helm finds the helm binary scripts/deps.sh installs.
func helm(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	gopath, err := exec.Command("go", "env", "GOPATH").Output()
	if err != nil {
		t.Fatalf("go env GOPATH: %v", err)
	}
	p := filepath.Join(strings.TrimSpace(string(gopath)), "bin", "helm")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("helm is needed to render the chart (scripts/deps.sh installs it): %v", err)
	}
	return p
}

// render runs helm template with the image repository and the given
// arguments (-f FILE, --set K=V).
func render(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	return renderBare(t, append([]string{"--set", "image.repository=" + repository}, args...)...)
}

// renderBare runs helm template with the given arguments alone.
func renderBare(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(helm(t), append([]string{"template", "sp", chart, "-n", namespace}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("helm template %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

// rendered is a checked render, its objects by type.
type rendered struct {
	sts            *appsv1.StatefulSet
	config         *corev1.ConfigMap   // the chart's sparkpulse.toml, unless existingConfig
	dashboards     []*corev1.ConfigMap // for Grafana's sidecar
	secret         *corev1.Secret      // the chart's own, if any
	serviceAccount *corev1.ServiceAccount
	services       map[string]*corev1.Service
	pdb            *policyv1.PodDisruptionBudget
	netpol         *networkingv1.NetworkPolicy
	monitor        *monitoringv1.ServiceMonitor
	rule           *monitoringv1.PrometheusRule
	// toml is the settings sparkpulse runs with: the ConfigMap's file with
	// the container's environment laid over it, as sparkpulse does. With
	// existingConfig there is no file: known is false and only the
	// environment's settings are in it.
	toml  sparkpulseConfig
	known bool
}

// sparkpulseConfig is the part of sparkpulse.toml the chart derives.
type sparkpulseConfig struct {
	StateDir string `toml:"state-dir"`
	InfluxDB struct {
		URL               string `toml:"url"`
		MaxQueueBytes     int64  `toml:"max-queue-bytes"`
		MaxDiskQueueBytes int64  `toml:"max-disk-queue-bytes"`
	} `toml:"influxdb"`
	Admin struct {
		BindAddress string `toml:"bind-address"`
	} `toml:"admin"`
	Deltas struct {
		FirstSampleGrace  string `toml:"first-sample-grace"`
		MaxSeries         int64  `toml:"max-series"`
		MaxSeriesPerApp   int64  `toml:"max-series-per-app"`
		MaxIngestLogBytes int64  `toml:"max-ingest-log-bytes"`
	} `toml:"deltas"`
	Annotate struct {
		URLs     []string `toml:"urls"`
		Username string   `toml:"username"`
	} `toml:"annotate"`
	Graphite []graphiteBlock `toml:"graphite"`
}

type graphiteBlock struct {
	Enabled         *bool  `toml:"enabled"`
	BindAddress     string `toml:"bind-address"`
	Protocol        string `toml:"protocol"`
	MaxCachedSeries int64  `toml:"max-cached-series"`
	MaxHeldBytes    int64  `toml:"max-held-bytes"`
}

// enabledBlocks are the blocks sparkpulse listens with.
func (c *sparkpulseConfig) enabledBlocks() []graphiteBlock {
	var out []graphiteBlock
	for _, g := range c.Graphite {
		if g.Enabled == nil || *g.Enabled {
			out = append(out, g)
		}
	}
	return out
}

// writers counts sparkpulse's InfluxDB writers: one per block, its own
// metrics', and the annotations'.
func (c *sparkpulseConfig) writers() int64 {
	return int64(len(c.enabledBlocks()) + 1 + min(1, len(c.Annotate.URLs)))
}

var blockEnvRE = regexp.MustCompile(`^SPARKPULSE_GRAPHITE_([0-9]+)_(MAX_CACHED_SERIES|MAX_HELD_BYTES)$`)

// applyEnv lays the container's literal SPARKPULSE_ variables over the
// file, for the keys the chart sets that way.
func (c *sparkpulseConfig) applyEnv(t *testing.T, env []corev1.EnvVar) {
	t.Helper()
	num := func(e corev1.EnvVar) int64 {
		n, err := strconv.ParseInt(e.Value, 10, 64)
		if err != nil {
			t.Errorf("%s=%q: not a whole number", e.Name, e.Value)
		}
		return n
	}
	for _, e := range env {
		if e.ValueFrom != nil {
			continue
		}
		switch e.Name {
		case "SPARKPULSE_STATE_DIR":
			c.StateDir = e.Value
		case "SPARKPULSE_ADMIN_BIND_ADDRESS":
			c.Admin.BindAddress = e.Value
		case "SPARKPULSE_INFLUXDB_URL":
			c.InfluxDB.URL = e.Value
		case "SPARKPULSE_ANNOTATE_URLS":
			c.Annotate.URLs = nil
			if err := json.Unmarshal([]byte(e.Value), &c.Annotate.URLs); err != nil {
				t.Errorf("%s=%q: not a list: %v", e.Name, e.Value, err)
			}
		case "SPARKPULSE_INFLUXDB_MAX_QUEUE_BYTES":
			c.InfluxDB.MaxQueueBytes = num(e)
		case "SPARKPULSE_INFLUXDB_MAX_DISK_QUEUE_BYTES":
			c.InfluxDB.MaxDiskQueueBytes = num(e)
		case "SPARKPULSE_DELTAS_FIRST_SAMPLE_GRACE":
			c.Deltas.FirstSampleGrace = e.Value
		case "SPARKPULSE_DELTAS_MAX_SERIES":
			c.Deltas.MaxSeries = num(e)
		case "SPARKPULSE_DELTAS_MAX_SERIES_PER_APP":
			c.Deltas.MaxSeriesPerApp = num(e)
		case "SPARKPULSE_DELTAS_MAX_INGEST_LOG_BYTES":
			c.Deltas.MaxIngestLogBytes = num(e)
		}
		if m := blockEnvRE.FindStringSubmatch(e.Name); m != nil {
			i, _ := strconv.Atoi(m[1])
			if i < 1 || i > len(c.Graphite) {
				t.Errorf("%s: the config has no [[graphite]] #%d", e.Name, i)
				continue
			}
			if m[2] == "MAX_CACHED_SERIES" {
				c.Graphite[i-1].MaxCachedSeries = num(e)
			} else {
				c.Graphite[i-1].MaxHeldBytes = num(e)
			}
		}
	}
}

func check(t *testing.T, args ...string) rendered {
	t.Helper()
	out, err := render(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Check(out, namespace)
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(args, " "), err)
	}
	r := rendered{services: map[string]*corev1.Service{}}
	for _, o := range objs {
		switch v := o.Obj.(type) {
		case *appsv1.StatefulSet:
			r.sts = v
		case *corev1.ConfigMap:
			if _, ok := v.Data["sparkpulse.toml"]; ok {
				r.config = v
			} else {
				r.dashboards = append(r.dashboards, v)
			}
		case *corev1.Secret:
			r.secret = v
		case *corev1.ServiceAccount:
			r.serviceAccount = v
		case *corev1.Service:
			r.services[v.Name] = v
		case *policyv1.PodDisruptionBudget:
			r.pdb = v
		case *networkingv1.NetworkPolicy:
			r.netpol = v
		case *monitoringv1.ServiceMonitor:
			r.monitor = v
		case *monitoringv1.PrometheusRule:
			r.rule = v
		default:
			t.Fatalf("unexpected %T %s", v, o.Name)
		}
	}
	if r.sts == nil {
		t.Fatalf("no StatefulSet rendered")
	}
	if r.config != nil {
		dec := toml.NewDecoder(strings.NewReader(r.config.Data["sparkpulse.toml"]))
		if err := dec.Decode(&r.toml); err != nil {
			t.Fatalf("sparkpulse.toml: %v", err)
		}
		r.known = true
	}
	r.toml.applyEnv(t, r.sts.Spec.Template.Spec.Containers[0].Env)
	return r
}

var valueSets = []string{
	"", "ci/influxdb2-values.yaml", "ci/one-replica-values.yaml",
	"ci/influxdb-graphite-values.yaml", "ci/extras-values.yaml", "ci/existing-config-values.yaml",
}

func valuesArgs(v string) []string {
	if v == "" {
		return nil
	}
	return []string{"-f", filepath.Join(chart, v)}
}

// TestChart renders the chart with each value set, checks every manifest
// as an API server would (strict decoding, validation, Pod Security
// restricted), and checks the promises docs/deployment.md makes of it.
func TestChart(t *testing.T) {
	for _, v := range valueSets {
		name := "default"
		if v != "" {
			name = strings.TrimSuffix(filepath.Base(v), "-values.yaml")
		}
		t.Run(name, func(t *testing.T) {
			r := check(t, valuesArgs(v)...)
			pod := r.sts.Spec.Template.Spec
			c := pod.Containers[0]

			t.Run("memory", func(t *testing.T) {
				limit := c.Resources.Limits.Memory().Value()
				if limit == 0 {
					t.Fatal("no memory limit")
				}
				gomem := envValue(t, c, "GOMEMLIMIT")
				if want := fmt.Sprint(limit * 9 / 10); gomem != want {
					t.Errorf("GOMEMLIMIT = %s, want %s (90 %% of %d)", gomem, want, limit)
				}
				var goMemLimit int64
				fmt.Sscan(gomem, &goMemLimit)
				if r.toml.InfluxDB.MaxQueueBytes <= 0 {
					t.Fatal("max-queue-bytes not derived")
				}
				if d := r.toml.Deltas; d.MaxSeries <= 0 || d.MaxSeriesPerApp <= 0 || d.MaxSeriesPerApp > d.MaxSeries {
					t.Errorf("delta caps %+v not derived", d)
				}
				if !r.known {
					return // an existing config: its blocks are the user's to size
				}
				// Everything bounded in memory fits under GOMEMLIMIT: every
				// writer's queue, the held partial lines, the fixed part, and
				// every block's cache full at the planning figure per series.
				writers := r.toml.writers()
				var held, cached, largest int64
				for i, g := range r.toml.enabledBlocks() {
					held += g.MaxHeldBytes
					cached += g.MaxCachedSeries
					largest = max(largest, g.MaxCachedSeries)
					if g.MaxCachedSeries <= 0 {
						t.Errorf("block %d (%s): max-cached-series not derived", i+1, g.Protocol)
					}
					if g.Protocol != "udp" && g.MaxHeldBytes <= 0 {
						t.Errorf("block %d (%s): max-held-bytes not derived", i+1, g.Protocol)
					}
				}
				total := writers*r.toml.InfluxDB.MaxQueueBytes + held + fixedBytes + cached*1024
				if total > goMemLimit {
					t.Errorf("queues %d × %d + held %d + fixed %d + %d series × 1 KiB = %d > GOMEMLIMIT %d",
						writers, r.toml.InfluxDB.MaxQueueBytes, held, fixedBytes, cached, total, goMemLimit)
				}
				if d := r.toml.Deltas; d.MaxSeries > largest {
					t.Errorf("delta caps %+v exceed the largest cache, %d series", d, largest)
				}
			})

			t.Run("volume", func(t *testing.T) {
				var size int64
				if len(r.sts.Spec.VolumeClaimTemplates) > 0 {
					pvc := r.sts.Spec.VolumeClaimTemplates[0]
					if pvc.Name != "state" {
						t.Fatalf("claim template %q, want state", pvc.Name)
					}
					size = pvc.Spec.Resources.Requests.Storage().Value()
					if slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == "state" }) {
						t.Error("state is both a claim and a pod volume")
					}
				} else {
					i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == "state" })
					if i < 0 || pod.Volumes[i].EmptyDir == nil || pod.Volumes[i].EmptyDir.SizeLimit == nil {
						t.Fatal("no state volume: neither a claim nor an emptyDir with a size limit")
					}
					size = pod.Volumes[i].EmptyDir.SizeLimit.Value()
				}
				if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
					return m.Name == "state" && m.MountPath == r.toml.StateDir
				}) {
					t.Errorf("state volume not mounted at state-dir %q", r.toml.StateDir)
				}
				writers := r.toml.writers()
				if !r.known {
					// One per declared listener, and sparkpulse's own metrics'
					// (the value sets with an existing config poll no Spark).
					writers = 1
					for _, p := range c.Ports {
						if p.Name != "admin" {
							writers++
						}
					}
				}
				need := writers*r.toml.InfluxDB.MaxDiskQueueBytes + 2*r.toml.Deltas.MaxSeries*baselineBytes + stateFileHeader + r.toml.Deltas.MaxIngestLogBytes
				if r.toml.InfluxDB.MaxDiskQueueBytes <= 0 || r.toml.Deltas.MaxIngestLogBytes < 128*mi || need > size {
					t.Errorf("%d disk queues × %d + baselines + ingest log %d = %d bytes, volume %d", writers, r.toml.InfluxDB.MaxDiskQueueBytes, r.toml.Deltas.MaxIngestLogBytes, need, size)
				}
			})

			t.Run("probes and security", func(t *testing.T) {
				if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
					t.Errorf("readiness probe %+v, want GET /readyz", p)
				}
				if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
					t.Errorf("liveness probe %+v, want GET /healthz", p)
				}
				if g := pod.TerminationGracePeriodSeconds; g == nil || *g <= 30 {
					t.Errorf("termination grace %v: must exceed sparkpulse's 30 s shutdown", g)
				}
				// The probes reach the port sparkpulse's admin endpoint binds.
				i := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "admin" })
				if i < 0 {
					t.Fatal("no admin container port")
				}
				if _, port, _ := strings.Cut(r.toml.Admin.BindAddress, ":"); port != fmt.Sprint(c.Ports[i].ContainerPort) {
					t.Errorf("admin bind-address %q, container port admin %d", r.toml.Admin.BindAddress, c.Ports[i].ContainerPort)
				}
				if want := repository + ":" + appVersion(t); c.Image != want {
					t.Errorf("image %q, want %q", c.Image, want)
				}
				if a := pod.AutomountServiceAccountToken; a == nil || *a {
					t.Error("the pod mounts a service account token; sparkpulse does not use the Kubernetes API")
				}
				if sa := r.serviceAccount; sa != nil {
					if pod.ServiceAccountName != sa.Name {
						t.Errorf("pod runs as service account %q, the chart renders %q", pod.ServiceAccountName, sa.Name)
					}
					if a := sa.AutomountServiceAccountToken; a == nil || *a {
						t.Error("the service account mounts its token")
					}
				}
			})

			t.Run("listeners", func(t *testing.T) {
				if !r.known {
					return // an existing config: the ports are the values'
				}
				// One container port for each enabled block's port and
				// protocol, and no other.
				want := map[string]bool{}
				for _, g := range r.toml.enabledBlocks() {
					_, port, _ := strings.Cut(cmpOr(g.BindAddress, ":2003"), ":")
					want[port+"/"+strings.ToUpper(cmpOr(g.Protocol, "tcp"))] = true
				}
				got := map[string]bool{}
				for _, p := range c.Ports {
					if p.Name != "admin" {
						got[fmt.Sprintf("%d/%s", p.ContainerPort, p.Protocol)] = true
					}
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("container ports %v, the config's enabled blocks listen on %v", got, want)
				}
			})

			t.Run("disruption budget", func(t *testing.T) {
				if r.pdb == nil {
					t.Fatal("no PodDisruptionBudget")
				}
				replicas := int(*r.sts.Spec.Replicas)
				allowed := 0
				switch {
				case r.pdb.Spec.MaxUnavailable != nil:
					n, err := intstr.GetScaledValueFromIntOrPercent(r.pdb.Spec.MaxUnavailable, replicas, true)
					if err != nil {
						t.Fatal(err)
					}
					allowed = n
				case r.pdb.Spec.MinAvailable != nil:
					n, err := intstr.GetScaledValueFromIntOrPercent(r.pdb.Spec.MinAvailable, replicas, true)
					if err != nil {
						t.Fatal(err)
					}
					allowed = replicas - n
				}
				if allowed < 1 {
					t.Errorf("%d replicas: the budget allows %d disruptions, so a drain hangs", replicas, allowed)
				}
			})

			t.Run("secrets", func(t *testing.T) {
				for _, e := range c.Env {
					ref := e.ValueFrom
					if ref == nil || ref.SecretKeyRef == nil {
						continue
					}
					s := ref.SecretKeyRef
					if s.Name != "sp-sparkpulse" {
						continue // an existing Secret, not rendered here
					}
					if r.secret == nil || (r.secret.StringData[s.Key] == "" && len(r.secret.Data[s.Key]) == 0) {
						t.Errorf("%s reads key %q of Secret %s, which the chart does not render", e.Name, s.Key, s.Name)
					}
				}
				ann := r.sts.Spec.Template.Annotations
				if r.config != nil && ann["checksum/config"] == "" {
					t.Error("no checksum/config annotation")
				}
				if r.secret != nil && ann["checksum/secret"] == "" {
					t.Error("the chart renders a Secret but the pods carry no checksum of it")
				}
			})

			t.Run("services", func(t *testing.T) {
				headless := r.services[r.sts.Spec.ServiceName]
				if headless == nil || headless.Spec.ClusterIP != corev1.ClusterIPNone {
					t.Errorf("serviceName %q is not a rendered headless Service", r.sts.Spec.ServiceName)
				}
				svc := r.services[r.sts.Name]
				if svc == nil {
					t.Fatalf("no Service %s", r.sts.Name)
				}
				for _, s := range r.services {
					for _, p := range s.Spec.Ports {
						if !slices.ContainsFunc(c.Ports, func(cp corev1.ContainerPort) bool {
							return cp.Name == p.TargetPort.StrVal && cp.Protocol == p.Protocol
						}) {
							t.Errorf("Service %s port %s targets %q/%s, which no container port is", s.Name, p.Name, p.TargetPort.StrVal, p.Protocol)
						}
					}
				}
				// Every Graphite listener is on the Service Spark is given.
				for _, cp := range c.Ports {
					if cp.Name != "admin" && !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool {
						return p.TargetPort.StrVal == cp.Name && p.Protocol == cp.Protocol
					}) {
						t.Errorf("container port %s (%d/%s) is on no port of Service %s", cp.Name, cp.ContainerPort, cp.Protocol, svc.Name)
					}
				}
				if m := r.monitor; m != nil {
					if m.Labels["release"] == "" { // the values' default, for kube-prometheus-stack
						t.Error("ServiceMonitor has no label for Prometheus to select it by")
					}
					// Each pod is scraped once: the selector matches one
					// Service, which has the port scraped.
					var selected []*corev1.Service
					for _, s := range r.services {
						if matches(m.Spec.Selector.MatchLabels, s.Labels) {
							selected = append(selected, s)
						}
					}
					if len(selected) != 1 {
						t.Fatalf("ServiceMonitor selects %d Services, want 1 (else each pod is scraped once per Service)", len(selected))
					}
					if !slices.ContainsFunc(selected[0].Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == m.Spec.Endpoints[0].Port }) {
						t.Errorf("ServiceMonitor scrapes port %q, which Service %s lacks", m.Spec.Endpoints[0].Port, selected[0].Name)
					}
					if m.Spec.JobLabel != "" && selected[0].Labels[m.Spec.JobLabel] == "" {
						t.Errorf("ServiceMonitor's jobLabel %q: Service %s has no such label", m.Spec.JobLabel, selected[0].Name)
					}
				}
				if np := r.netpol; np != nil {
					for _, rule := range np.Spec.Ingress {
						for _, p := range rule.Ports {
							if !slices.ContainsFunc(c.Ports, func(cp corev1.ContainerPort) bool {
								return cp.Name == p.Port.StrVal && cp.Protocol == *p.Protocol
							}) {
								t.Errorf("NetworkPolicy opens %q/%s, which no container port is", p.Port.StrVal, *p.Protocol)
							}
						}
					}
				}
			})
		})
	}
}

// TestChartSecretChecksum: a changed token restarts the pods.
func TestChartSecretChecksum(t *testing.T) {
	a := check(t, "--set", "influxdb.token=one")
	b := check(t, "--set", "influxdb.token=two")
	if x, y := a.sts.Spec.Template.Annotations["checksum/secret"], b.sts.Spec.Template.Annotations["checksum/secret"]; x == "" || x == y {
		t.Errorf("checksum/secret %q and %q: a new token must change it", x, y)
	}
	c := check(t, "--set", "annotate.urls={http://h:18080}", "--set", "annotate.password=one")
	d := check(t, "--set", "annotate.urls={http://h:18080}", "--set", "annotate.password=two")
	if x, y := c.sts.Spec.Template.Annotations["checksum/secret"], d.sts.Spec.Template.Annotations["checksum/secret"]; x == "" || x == y {
		t.Errorf("checksum/secret %q and %q: a new Spark password must change it", x, y)
	}
}

// TestChartRefuses: values the chart cannot keep its promises with fail
// the render, naming the value.
func TestChartRefuses(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--set", "resources.limits.memory=null"}, "resources.limits.memory is required"},
		{[]string{"--set", "resources.limits.memory=lots"}, `resources.limits.memory "lots"`},
		{[]string{"--set", "resources.limits.memory=1.5Gi"}, `resources.limits.memory "1.5Gi"`},
		{[]string{"--set", "resources.limits.memory=192Mi"}, "resources.limits.memory 192Mi: too small"},
		{[]string{"--set", "persistence.size=64Mi"}, "persistence.size 64Mi: too small"},
		{[]string{"--set", "serviceMonitor.enabled=true", "--set", "serviceMonitor.labels=null"}, "serviceMonitor.labels: empty"},
		{[]string{"--set", "prometheusRule.enabled=true", "--set", "prometheusRule.labels=null"}, "prometheusRule.labels: empty"},
		{[]string{"--set", "dashboards.enabled=true", "--set", "dashboards.labels=null"}, "dashboards.labels: empty"},
		{[]string{"--set", "config=[[graphite]\nprotocol = 'tcp'"}, "config: not valid TOML"},
		{[]string{"--set", "config=[[graphite]]\nenabled = false"}, "config: no enabled [[graphite]] block"},
		{[]string{"--set", "config=[[graphite]]\nbind-address = 'localhost'"}, `config: [[graphite]] #1 bind-address "localhost"`},
		{[]string{"--set", "config=[[graphite]]", "--set", "existingConfig.configMap=mine"}, "config and existingConfig are both set"},
		{[]string{"--set", "existingConfig.configMap=a", "--set", "existingConfig.secret=b"}, "existingConfig: give configMap or secret, not both"},
	} {
		_, err := render(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	// No image repository: the render says how to build and push one.
	_, err := renderBare(t)
	for _, want := range []string{
		"image.repository is required",
		"docker build -t REGISTRY/sparkpulse:$(cat VERSION) . && docker push REGISTRY/sparkpulse:$(cat VERSION)",
		"--set image.repository=REGISTRY/sparkpulse",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("without image.repository: error %v, want one containing %q", err, want)
		}
	}
}

// TestChartConfig: a pasted config reaches sparkpulse as written, and the
// chart fills in by environment only what it leaves out.
func TestChartConfig(t *testing.T) {
	r := check(t, "-f", filepath.Join(chart, "ci/influxdb-graphite-values.yaml"))
	values, err := os.ReadFile(filepath.Join(chart, "ci/influxdb-graphite-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Config string `json:"config"`
	}
	if err := sigsyaml.Unmarshal(values, &v); err != nil {
		t.Fatal(err)
	}
	if got := r.config.Data["sparkpulse.toml"]; got != v.Config {
		t.Errorf("sparkpulse.toml differs from the config value:\n%s\nwant:\n%s", got, v.Config)
	}
	c := r.sts.Spec.Template.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	for name, want := range map[string]string{
		"SPARKPULSE_INFLUXDB_URL":                  "http://influxdb:8086", // the config has none
		"SPARKPULSE_GRAPHITE_1_MAX_CACHED_SERIES":  fmt.Sprint(r.toml.Graphite[0].MaxCachedSeries),
		"SPARKPULSE_DELTAS_FIRST_SAMPLE_GRACE":     "8760h",
		"SPARKPULSE_INFLUXDB_MAX_DISK_QUEUE_BYTES": fmt.Sprint(r.toml.InfluxDB.MaxDiskQueueBytes),
		"SPARKPULSE_ANNOTATE_URLS":                 `["http://history-server.spark:18080"]`,
	} {
		if env[name] != want {
			t.Errorf("%s=%q, want %q", name, env[name], want)
		}
	}
	// The config's own settings are not overridden: the UDP block's cap,
	// the log level, and no variable for the disabled third block.
	for _, name := range []string{"SPARKPULSE_GRAPHITE_2_MAX_CACHED_SERIES", "SPARKPULSE_GRAPHITE_3_MAX_CACHED_SERIES", "SPARKPULSE_LOG_LEVEL", "SPARKPULSE_INFLUXDB_TLS_INSECURE_SKIP_VERIFY"} {
		if _, ok := env[name]; ok {
			t.Errorf("%s set, over the config's own value", name)
		}
	}
	if r.toml.Graphite[1].MaxCachedSeries != 200000 {
		t.Errorf("UDP block's max-cached-series %d, the config says 200000", r.toml.Graphite[1].MaxCachedSeries)
	}
}

// buildDir holds the sparkpulse built here, removed by TestMain.
var buildDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// sparkpulseBinary is the repository's sparkpulse: $SPARKPULSE_BIN
// (scripts/check-deploy.sh builds it once), or built here.
var sparkpulseBinary = sync.OnceValues(func() (string, error) {
	if p := os.Getenv("SPARKPULSE_BIN"); p != "" {
		return p, nil
	}
	dir, err := os.MkdirTemp("", "kubecheck")
	if err != nil {
		return "", err
	}
	buildDir = dir
	p := filepath.Join(dir, "sparkpulse")
	cmd := exec.Command("go", "build", "-o", p, "./cmd/sparkpulse")
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/sparkpulse: %v: %s", err, out)
	}
	return p, nil
})

// TestChartConfigChecks runs `sparkpulse check` on the config each value
// set renders, with the container's environment, as the pod would start.
func TestChartConfigChecks(t *testing.T) {
	bin, err := sparkpulseBinary()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedURL := "http://" + l.Addr().String()
	l.Close()
	for _, v := range valueSets {
		r := check(t, valuesArgs(v)...)
		if r.config == nil {
			continue // an existing config, not rendered here
		}
		file := filepath.Join(t.TempDir(), "sparkpulse.toml")
		if err := os.WriteFile(file, []byte(r.config.Data["sparkpulse.toml"]), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "check", "--config", file)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
		for _, e := range r.sts.Spec.Template.Spec.Containers[0].Env {
			if e.ValueFrom == nil {
				cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
			}
		}
		// check looks at InfluxDB: at a closed local port, which it only
		// notes, rather than at the cluster's name.
		cmd.Env = append(cmd.Env, "SPARKPULSE_INFLUXDB_URL="+closedURL)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: sparkpulse check: %v\n%s", cmpOr(v, "default values"), err, out)
		}
	}
}

// TestChartExtras: the values for names, the service account, pod
// metadata, extra environment, pull secrets, dashboards and alert rules.
func TestChartExtras(t *testing.T) {
	r := check(t, "-f", filepath.Join(chart, "ci/extras-values.yaml"))
	pod := r.sts.Spec.Template
	c := pod.Spec.Containers[0]
	if r.sts.Name != "spark-metrics" || r.sts.Labels["app.kubernetes.io/name"] != "pulse" {
		t.Errorf("StatefulSet %s labelled %v: fullnameOverride and nameOverride not applied", r.sts.Name, r.sts.Labels)
	}
	if sa := r.serviceAccount; sa == nil || sa.Name != "spark-metrics-sa" || sa.Annotations["example.com/role"] != "metrics" || pod.Spec.ServiceAccountName != sa.Name {
		t.Errorf("service account %+v, pod's %q", sa, pod.Spec.ServiceAccountName)
	}
	if pod.Labels["team"] != "data" || pod.Annotations["example.com/owner"] != "data-platform" || pod.Annotations["checksum/config"] == "" {
		t.Errorf("pod labels %v, annotations %v", pod.Labels, pod.Annotations)
	}
	if envValue(t, c, "SPARKPULSE_LOG_LEVEL") != "debug" || len(c.EnvFrom) != 1 || c.EnvFrom[0].ConfigMapRef == nil {
		t.Errorf("extraEnv/extraEnvFrom not applied: %v %v", c.Env, c.EnvFrom)
	}
	if len(pod.Spec.ImagePullSecrets) != 1 || pod.Spec.ImagePullSecrets[0].Name != "registry-credentials" {
		t.Errorf("imagePullSecrets %v", pod.Spec.ImagePullSecrets)
	}

	// One dashboard ConfigMap per dashboard, for the sidecar, as the chart
	// holds it.
	files, _ := filepath.Glob(filepath.Join(chart, "dashboards", "*.json"))
	if len(files) == 0 || len(r.dashboards) != len(files) {
		t.Fatalf("%d dashboard ConfigMaps for %d dashboards", len(r.dashboards), len(files))
	}
	for _, cm := range r.dashboards {
		if cm.Labels["grafana_dashboard"] != "1" || cm.Namespace != "grafana" || cm.Annotations["grafana_folder"] != "Spark" {
			t.Errorf("dashboard ConfigMap %s: labels %v, namespace %q, annotations %v", cm.Name, cm.Labels, cm.Namespace, cm.Annotations)
		}
		if len(cm.Data) != 1 {
			t.Errorf("dashboard ConfigMap %s: %d keys, want 1", cm.Name, len(cm.Data))
		}
		for key, text := range cm.Data {
			want, err := os.ReadFile(filepath.Join(chart, "dashboards", key))
			if err != nil || text != string(want) {
				t.Errorf("dashboard ConfigMap %s: key %s is not dashboards/%s (%v)", cm.Name, key, key, err)
			}
		}
	}

	// The alert rules, every one of files/alerts.yml, labelled for Prometheus.
	if r.rule == nil {
		t.Fatal("no PrometheusRule")
	}
	if r.rule.Labels["release"] != "monitoring" || r.rule.Labels["role"] != "alert-rules" {
		t.Errorf("PrometheusRule labels %v", r.rule.Labels)
	}
	var file struct {
		Groups []monitoringv1.RuleGroup `json:"groups"`
	}
	b, err := os.ReadFile(filepath.Join(chart, "files", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sigsyaml.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(r.rule.Spec.Groups)
	want, _ := json.Marshal(file.Groups)
	if len(file.Groups) == 0 || !bytes.Equal(got, want) {
		t.Errorf("PrometheusRule groups differ from files/alerts.yml:\n%s\nwant:\n%s", got, want)
	}
}

// The chart's copies of files outside it (Helm reads only its own
// directory), and the command that refreshes them.
const refresh = "bash scripts/check-deploy.sh --refresh-chart"

// TestChartCopies: the chart's dashboards and alert rules are those of
// the repository.
func TestChartCopies(t *testing.T) {
	sources, _ := filepath.Glob("../../grafana/dashboards/*.json")
	copies, _ := filepath.Glob(filepath.Join(chart, "dashboards", "*.json"))
	if len(sources) == 0 {
		t.Fatal("no dashboards in grafana/dashboards")
	}
	names := func(paths []string) []string {
		var out []string
		for _, p := range paths {
			out = append(out, filepath.Base(p))
		}
		return out
	}
	if a, b := names(sources), names(copies); !slices.Equal(a, b) {
		t.Errorf("the chart's dashboards %v are not grafana/dashboards' %v: run %s", b, a, refresh)
	}
	pairs := map[string]string{"../prometheus/alerts.yml": filepath.Join(chart, "files", "alerts.yml")}
	for _, s := range sources {
		pairs[s] = filepath.Join(chart, "dashboards", filepath.Base(s))
	}
	for src, cp := range pairs {
		want, err := os.ReadFile(src)
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		if got, err := os.ReadFile(cp); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is not a copy of %s: run %s", repoPath(cp), repoPath(src), refresh)
		}
	}
}

// TestChartVersion: the chart's appVersion, the default image tag, is
// the repository's VERSION.
func TestChartVersion(t *testing.T) {
	b, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	if v := strings.TrimSpace(string(b)); appVersion(t) != v {
		t.Errorf("deploy/helm/sparkpulse/Chart.yaml appVersion %q, VERSION %q: set appVersion to VERSION", appVersion(t), v)
	}
}

func appVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chart, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	if err := sigsyaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c.AppVersion
}

// repoPath is a path of this directory's as from the repository's root.
func repoPath(p string) string { return filepath.Join("deploy/kubecheck", p) }

// matches says whether a label selector's matchLabels select labels.
func matches(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestCheckCatches: the checker itself finds what it promises to find.
func TestCheckCatches(t *testing.T) {
	good, err := render(t, "--set", "serviceMonitor.enabled=true", "--set", "prometheusRule.enabled=true")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"unknown field", "podManagementPolicy: Parallel", "podManagementPolicy: Parallel\n  podManagmentPolicy: Parallel", "unknown field"},
		{"API validation", "podManagementPolicy: Parallel", "podManagementPolicy: Sometimes", "podManagementPolicy"},
		{"pod security", "type: RuntimeDefault", "type: Unconfined", "seccompProfile"},
		{"wrong type", "maxUnavailable: 1", "maxUnavailable: [1]", "maxUnavailable"},
		{"unknown kind", "kind: PodDisruptionBudget", "kind: PodDisruptionBudgetX", "PodDisruptionBudgetX"},
		{"service account", "kind: ServiceAccount\nmetadata:\n  name: sp-sparkpulse", "kind: ServiceAccount\nmetadata:\n  name: Not_A_Name", "Not_A_Name"},
		{"rule PromQL", "expr: absent(sparkpulse_build_info)", "expr: absent(sparkpulse_build_info", "unclosed"},
		{"rule unknown field", "- alert: SparkpulseAbsent", "- alert: SparkpulseAbsent\n      severity: critical", "unknown field"},
		{"rule duration", "for: 15m", "for: 15 minutes", `duration "15 minutes"`},
		{"rule both alert and record", "- alert: SparkpulseAbsent", "- alert: SparkpulseAbsent\n      record: sparkpulse:absent", "record"},
		{"monitor selector", "jobLabel: app.kubernetes.io/name\n  selector:\n    matchLabels:", "jobLabel: app.kubernetes.io/name\n  selector:\n    matchLabels: {}\n    matchLabelz:", "matchLabelz"},
		{"monitor metadata", "kind: ServiceMonitor\nmetadata:\n  name: sp-sparkpulse", "kind: ServiceMonitor\nmetadata:\n  name: Sp_Sparkpulse", "metadata.name"},
		{"monitor interval", "interval: 30s", "interval: half a minute", "interval"},
	} {
		bad := strings.Replace(string(good), tc.old, tc.new, 1)
		if bad == string(good) {
			t.Fatalf("%s: %q not in the rendered chart", tc.name, tc.old)
		}
		if _, err := Check([]byte(bad), namespace); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func envValue(t *testing.T, c corev1.Container, name string) string {
	t.Helper()
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	t.Fatalf("container has no %s", name)
	return ""
}
