// Package kubecheck checks Kubernetes manifests the way an API server
// admits them, without a cluster: each document is decoded strictly into
// the real k8s.io/api type (an unknown or duplicate field is an error),
// defaulted, converted and validated by the API server's own create
// strategy (the same code as kube-apiserver 1.37's), and every pod
// template is evaluated against Pod Security "restricted" (latest).
//
// ServiceMonitor and PrometheusRule, custom resources, are decoded
// strictly into the Prometheus operator's Go types, their metadata
// validated as the API server validates any object's, and the fields their
// CRDs require checked; a PrometheusRule's groups are parsed and validated
// as Prometheus loads a rule file (PromQL, durations, templates). No other
// schema of their CRDs is checked.
package kubecheck

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/warning"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/apps/install"
	api "k8s.io/kubernetes/pkg/apis/core"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"
	_ "k8s.io/kubernetes/pkg/apis/networking/install"
	_ "k8s.io/kubernetes/pkg/apis/policy/install"
	"k8s.io/kubernetes/pkg/registry/apps/deployment"
	"k8s.io/kubernetes/pkg/registry/apps/statefulset"
	"k8s.io/kubernetes/pkg/registry/core/configmap"
	"k8s.io/kubernetes/pkg/registry/core/secret"
	"k8s.io/kubernetes/pkg/registry/core/service"
	"k8s.io/kubernetes/pkg/registry/networking/networkpolicy"
	"k8s.io/kubernetes/pkg/registry/policy/poddisruptionbudget"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	sigsyaml "sigs.k8s.io/yaml"
)

// strategies are the API server's create strategies of the kinds a
// manifest may hold, besides ServiceAccount (validated by the API server's
// validation function: its registry package would bring in the kubelet's);
// any other kind is an error, so that nothing goes unchecked.
var strategies = map[schema.GroupKind]rest.RESTCreateStrategy{
	{Group: "apps", Kind: "Deployment"}:                 deployment.Strategy,
	{Group: "apps", Kind: "StatefulSet"}:                statefulset.Strategy,
	{Kind: "Service"}:                                   service.Strategy,
	{Kind: "ConfigMap"}:                                 configmap.Strategy,
	{Kind: "Secret"}:                                    secret.Strategy,
	{Group: "policy", Kind: "PodDisruptionBudget"}:      poddisruptionbudget.Strategy,
	{Group: "networking.k8s.io", Kind: "NetworkPolicy"}: networkpolicy.Strategy,
}

var (
	serviceMonitorGVK = monitoringv1.SchemeGroupVersion.WithKind("ServiceMonitor")
	prometheusRuleGVK = monitoringv1.SchemeGroupVersion.WithKind("PrometheusRule")
	serviceAccountGK  = schema.GroupKind{Kind: "ServiceAccount"}
	// The CRDs' pattern of a duration (monitoringv1.Duration).
	durationRE = regexp.MustCompile(`^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$`)
)

// Object is one checked document: the versioned object as the API server
// would store it (defaulted), for callers to assert on.
type Object struct {
	Kind, Name string
	Obj        runtime.Object
}

// Check checks every document of a multi-document YAML stream (as `helm
// template` prints it) and returns them; the error lists every problem of
// every document, each naming the document's kind and name.
func Check(manifests []byte, namespace string) ([]Object, error) {
	strict := serializer.NewCodecFactory(legacyscheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		return nil, err
	}
	var (
		objs []Object
		errs []error
	)
	r := utilyaml.NewYAMLReader(bufioReader(manifests))
	for i := 1; ; i++ {
		doc, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return objs, fmt.Errorf("document %d: %w", i, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		o, err := checkDoc(doc, namespace, strict, evaluator)
		if err != nil {
			errs = append(errs, fmt.Errorf("document %d (%s %s): %w", i, o.Kind, o.Name, err))
			continue
		}
		objs = append(objs, o)
	}
	return objs, errors.Join(errs...)
}

func checkDoc(doc []byte, namespace string, strict runtime.Decoder, evaluator policy.Evaluator) (Object, error) {
	var meta struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := sigsyaml.Unmarshal(doc, &meta); err != nil {
		return Object{}, err
	}
	o := Object{Kind: meta.Kind, Name: meta.Metadata.Name}
	// An object that names its namespace is created there (as helm and
	// kubectl do); the others in the release's.
	if meta.Metadata.Namespace != "" {
		namespace = meta.Metadata.Namespace
	}
	gvk := meta.GroupVersionKind()
	switch gvk {
	case serviceMonitorGVK:
		var sm monitoringv1.ServiceMonitor
		if err := sigsyaml.UnmarshalStrict(doc, &sm); err != nil {
			return o, err
		}
		o.Obj = &sm
		return o, errors.Join(append(objectMeta(&sm.ObjectMeta, namespace), checkServiceMonitor(&sm)...)...)
	case prometheusRuleGVK:
		var pr monitoringv1.PrometheusRule
		if err := sigsyaml.UnmarshalStrict(doc, &pr); err != nil {
			return o, err
		}
		o.Obj = &pr
		return o, errors.Join(append(objectMeta(&pr.ObjectMeta, namespace), checkRules(doc)...)...)
	}
	strategy, ok := strategies[gvk.GroupKind()]
	if !ok && gvk.GroupKind() != serviceAccountGK {
		return o, fmt.Errorf("kind %s is not one this checker knows", gvk)
	}
	obj, _, err := strict.Decode(doc, nil, nil)
	if err != nil {
		return o, err
	}
	legacyscheme.Scheme.Default(obj)
	o.Obj = obj
	var errs []error
	if tmpl := podTemplate(obj); tmpl != nil {
		errs = append(errs, restricted(evaluator, tmpl)...)
	}
	internal, err := legacyscheme.Scheme.ConvertToVersion(obj.DeepCopyObject(), schema.GroupVersion{Group: gvk.Group, Version: runtime.APIVersionInternal})
	if err != nil {
		return o, err
	}
	if m, err := metaOf(internal); err == nil {
		rest.FillObjectMetaSystemFields(m)
	}
	if svc, ok := internal.(*api.Service); ok && svc.Spec.ClusterIP != "" && len(svc.Spec.ClusterIPs) == 0 {
		// As the Service storage does on create, before validation.
		svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
	}
	var warnings warningList
	ctx := genericapirequest.WithNamespace(context.Background(), namespace)
	ctx = genericapirequest.WithRequestInfo(ctx, &genericapirequest.RequestInfo{
		IsResourceRequest: true, Verb: "create", APIGroup: gvk.Group, APIVersion: gvk.Version,
		Namespace: namespace, Name: o.Name,
	})
	ctx = warning.WithWarningRecorder(ctx, &warnings)
	if sa, ok := internal.(*api.ServiceAccount); ok {
		if sa.Namespace == "" {
			sa.Namespace = namespace // as the API server fills it from the request
		}
		for _, e := range corevalidation.ValidateServiceAccount(sa) {
			errs = append(errs, e)
		}
	} else if err := rest.BeforeCreate(strategy, ctx, internal); err != nil {
		errs = append(errs, err)
	}
	for _, w := range warnings {
		errs = append(errs, fmt.Errorf("API server warning: %s", w))
	}
	return o, errors.Join(errs...)
}

// objectMeta validates a namespaced object's metadata, created in
// namespace, as the API server does every object's (name, labels,
// annotations).
func objectMeta(m *metav1.ObjectMeta, namespace string) []error {
	var errs []error
	m = m.DeepCopy()
	m.Namespace = namespace
	for _, e := range apivalidation.ValidateObjectMeta(m, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata")) {
		errs = append(errs, e)
	}
	return errs
}

// checkServiceMonitor checks what the ServiceMonitor CRD requires of the
// fields the chart uses.
func checkServiceMonitor(sm *monitoringv1.ServiceMonitor) []error {
	var errs []error
	if len(sm.Spec.Selector.MatchLabels) == 0 && len(sm.Spec.Selector.MatchExpressions) == 0 {
		errs = append(errs, errors.New("spec.selector: empty, which selects every Service of the namespace"))
	}
	if len(sm.Spec.Endpoints) == 0 {
		errs = append(errs, errors.New("spec.endpoints: none"))
	}
	for i, e := range sm.Spec.Endpoints {
		if e.Port == "" && e.TargetPort == nil {
			errs = append(errs, fmt.Errorf("spec.endpoints[%d]: neither port nor targetPort", i))
		}
		if e.Interval != "" && !durationRE.MatchString(string(e.Interval)) {
			errs = append(errs, fmt.Errorf("spec.endpoints[%d].interval %q: not a duration", i, e.Interval))
		}
	}
	return errs
}

// checkRules checks a PrometheusRule's groups as Prometheus checks a rule
// file (rulefmt: names, exactly one of alert and record, PromQL, label and
// annotation templates), and the CRD's pattern of each duration.
func checkRules(doc []byte) []error {
	var raw struct {
		Spec struct {
			Groups []any `json:"groups"`
		} `json:"spec"`
	}
	if err := sigsyaml.Unmarshal(doc, &raw); err != nil {
		return []error{err}
	}
	if len(raw.Spec.Groups) == 0 {
		return []error{errors.New("spec.groups: none")}
	}
	file, err := sigsyaml.Marshal(map[string]any{"groups": raw.Spec.Groups})
	if err != nil {
		return []error{err}
	}
	groups, errs := rulefmt.Parse(file, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	if groups == nil {
		return errs
	}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			for what, d := range map[string]string{"for": r.For.String(), "keep_firing_for": r.KeepFiringFor.String()} {
				if d != "" && !durationRE.MatchString(d) {
					errs = append(errs, fmt.Errorf("group %q rule %q%q: %s %q: not a duration the CRD accepts", g.Name, r.Alert, r.Record, what, d))
				}
			}
		}
	}
	return errs
}

// restricted evaluates a pod template against Pod Security "restricted".
func restricted(evaluator policy.Evaluator, tmpl *corev1.PodTemplateSpec) []error {
	var errs []error
	level := psapi.LevelVersion{Level: psapi.LevelRestricted, Version: psapi.LatestVersion()}
	for _, r := range evaluator.EvaluatePod(level, &tmpl.ObjectMeta, &tmpl.Spec) {
		if !r.Allowed {
			errs = append(errs, fmt.Errorf("pod security restricted: %s: %s", r.ForbiddenReason, r.ForbiddenDetail))
		}
	}
	return errs
}

func bufioReader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }

// stripComments drops comment lines, to tell a document of comments
// only (a template that rendered nothing) from one with content.
func stripComments(doc []byte) []byte {
	var out []byte
	for line := range bytes.Lines(doc) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line...)
		}
	}
	return out
}

// podTemplate is the pod template of a workload, nil for other kinds.
func podTemplate(obj runtime.Object) *corev1.PodTemplateSpec {
	switch o := obj.(type) {
	case *appsv1.StatefulSet:
		return &o.Spec.Template
	case *appsv1.Deployment:
		return &o.Spec.Template
	case *appsv1.DaemonSet:
		return &o.Spec.Template
	}
	return nil
}

func metaOf(obj runtime.Object) (metav1.Object, error) { return meta.Accessor(obj) }

// warningList records the API server's warnings on a create.
type warningList []string

func (w *warningList) AddWarning(_, text string) { *w = append(*w, text) }
