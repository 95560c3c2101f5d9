package kubecheck

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const (
	chart     = "../helm/sparkpulse"
	namespace = "monitoring"
	mi        = 1 << 20
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

// render runs helm template with the given arguments (-f FILE, --set K=V).
func render(t *testing.T, args ...string) ([]byte, error) {
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
	sts      *appsv1.StatefulSet
	config   *corev1.ConfigMap
	secret   *corev1.Secret // the chart's own, if any
	services map[string]*corev1.Service
	pdb      *policyv1.PodDisruptionBudget
	netpol   *networkingv1.NetworkPolicy
	monitor  *monitoringv1.ServiceMonitor
	toml     sparkpulseConfig
}

// sparkpulseConfig is the part of sparkpulse.toml the chart derives.
type sparkpulseConfig struct {
	StateDir string `toml:"state-dir"`
	InfluxDB struct {
		MaxQueueBytes     int64 `toml:"max-queue-bytes"`
		MaxDiskQueueBytes int64 `toml:"max-disk-queue-bytes"`
	} `toml:"influxdb"`
	Deltas struct {
		MaxSeries       int64 `toml:"max-series"`
		MaxSeriesPerApp int64 `toml:"max-series-per-app"`
	} `toml:"deltas"`
	Annotate struct {
		URLs     []string `toml:"urls"`
		Username string   `toml:"username"`
	} `toml:"annotate"`
	Graphite []struct {
		Protocol        string `toml:"protocol"`
		MaxCachedSeries int64  `toml:"max-cached-series"`
		MaxHeldBytes    int64  `toml:"max-held-bytes"`
	} `toml:"graphite"`
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
			r.config = v
		case *corev1.Secret:
			r.secret = v
		case *corev1.Service:
			r.services[v.Name] = v
		case *policyv1.PodDisruptionBudget:
			r.pdb = v
		case *networkingv1.NetworkPolicy:
			r.netpol = v
		case *monitoringv1.ServiceMonitor:
			r.monitor = v
		default:
			t.Fatalf("unexpected %T %s", v, o.Name)
		}
	}
	if r.sts == nil || r.config == nil {
		t.Fatalf("no StatefulSet or ConfigMap rendered")
	}
	dec := toml.NewDecoder(strings.NewReader(r.config.Data["sparkpulse.toml"]))
	if err := dec.Decode(&r.toml); err != nil {
		t.Fatalf("sparkpulse.toml: %v", err)
	}
	return r
}

var valueSets = []string{"", "ci/influxdb2-values.yaml", "ci/one-replica-values.yaml"}

func valuesArgs(v string) []string {
	if v == "" {
		return nil
	}
	return []string{"-f", filepath.Join(chart, v)}
}

// TestChart renders the chart with each value set, checks every manifest
// as an API server would (strict decoding, validation, Pod Security
// restricted), and checks the promises the README makes of it.
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
				// Everything bounded in memory fits under GOMEMLIMIT: every
				// writer's queue, the held partial lines, the fixed part, and
				// both blocks' caches full at the planning figure per series.
				writers := int64(3 + min(1, len(r.toml.Annotate.URLs)))
				var held, cached int64
				for _, g := range r.toml.Graphite {
					held += g.MaxHeldBytes
					cached += g.MaxCachedSeries
					if g.MaxCachedSeries <= 0 {
						t.Errorf("%s block: max-cached-series not derived", g.Protocol)
					}
				}
				if held <= 0 {
					t.Error("max-held-bytes not derived")
				}
				total := writers*r.toml.InfluxDB.MaxQueueBytes + held + fixedBytes + cached*1024
				if total > goMemLimit {
					t.Errorf("queues %d × %d + held %d + fixed %d + %d series × 1 KiB = %d > GOMEMLIMIT %d",
						writers, r.toml.InfluxDB.MaxQueueBytes, held, fixedBytes, cached, total, goMemLimit)
				}
				if d := r.toml.Deltas; d.MaxSeries <= 0 || d.MaxSeries > r.toml.Graphite[0].MaxCachedSeries || d.MaxSeriesPerApp <= 0 || d.MaxSeriesPerApp > d.MaxSeries {
					t.Errorf("delta caps %+v do not fit the cache of %d series", d, r.toml.Graphite[0].MaxCachedSeries)
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
				writers := int64(3 + min(1, len(r.toml.Annotate.URLs)))
				need := writers*r.toml.InfluxDB.MaxDiskQueueBytes + 2*r.toml.Deltas.MaxSeries*baselineBytes + stateFileHeader
				if r.toml.InfluxDB.MaxDiskQueueBytes <= 0 || need > size {
					t.Errorf("%d disk queues × %d + baselines = %d bytes, volume %d", writers, r.toml.InfluxDB.MaxDiskQueueBytes, need, size)
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
				if ann["checksum/config"] == "" {
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
				svc := r.services["sp-sparkpulse"]
				if svc == nil {
					t.Fatal("no Service sp-sparkpulse")
				}
				for _, p := range svc.Spec.Ports {
					if !slices.ContainsFunc(c.Ports, func(cp corev1.ContainerPort) bool {
						return cp.Name == p.TargetPort.StrVal && cp.Protocol == p.Protocol
					}) {
						t.Errorf("Service port %s targets %q/%s, which no container port is", p.Name, p.TargetPort.StrVal, p.Protocol)
					}
				}
				if m := r.monitor; m != nil {
					if m.Labels["release"] == "" { // the values' default, for kube-prometheus-stack
						t.Error("ServiceMonitor has no label for Prometheus to select it by")
					}
					for k, v := range m.Spec.Selector.MatchLabels {
						if svc.Labels[k] != v {
							t.Errorf("ServiceMonitor selects %s=%s, which the Service lacks", k, v)
						}
					}
					if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == m.Spec.Endpoints[0].Port }) {
						t.Errorf("ServiceMonitor scrapes port %q, which the Service lacks", m.Spec.Endpoints[0].Port)
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
	} {
		_, err := render(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

// TestCheckCatches: the checker itself finds what it promises to find.
func TestCheckCatches(t *testing.T) {
	good, err := render(t)
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
