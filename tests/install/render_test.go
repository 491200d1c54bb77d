package install

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/resources"
	"github.com/gomomento/valkey-operator/tests/harness"
)

// These tests need no cluster: they check that the chart and the release manifests are the
// same install, that the generated parts are up to date, and that the Deployment is hardened.

// checksumAnnotation is the one difference between the chart's Deployment and the manifest's:
// the chart rolls the operator when its ConfigMap changes.
const checksumAnnotation = "checksum/config"

func TestChartLintClean(t *testing.T) {
	out, err := exec.Command(helmBinary(t), "lint", "--strict", chartDir()).CombinedOutput()
	if err != nil {
		t.Fatalf("helm lint --strict: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "[WARNING]") || strings.Contains(string(out), "[ERROR]") {
		t.Fatalf("helm lint reports problems:\n%s", out)
	}
}

// TestChartRendersTheManifests: with the default values, `helm template` in namespace
// valkey-operator renders the same ServiceAccount, ClusterRoles (the operator's and the
// tenants'), ClusterRoleBinding, the Role and RoleBinding of the leader-election Lease,
// ConfigMap and Deployment as manifests/operator.yaml (the Namespace is helm's --create-namespace).
func TestChartRendersTheManifests(t *testing.T) {
	chart := renderChart(t)
	manifest := manifestObjects(t)
	for _, key := range []string{"ServiceAccount/valkey-operator", "ClusterRole/valkey-operator", "ClusterRoleBinding/valkey-operator",
		"Role/valkey-operator", "RoleBinding/valkey-operator", "Service/valkey-operator-metrics", "ClusterRole/valkey-operator-metrics-reader", "NetworkPolicy/valkey-operator-metrics", "ConfigMap/valkey-operator-config", "Deployment/valkey-operator",
		"ClusterRole/valkey-menu-reader", "ClusterRole/valkey-operator-view", "ClusterRole/valkey-operator-edit"} {
		m, ok := manifest[key]
		if !ok {
			t.Fatalf("manifests/operator.yaml has no %s", key)
		}
		c, ok := chart[key]
		if !ok {
			t.Fatalf("the chart renders no %s", key)
		}
		if key == "Deployment/valkey-operator" {
			if chartDep := decode[appsv1.Deployment](t, c); chartDep.Spec.Template.Annotations[checksumAnnotation] == "" {
				t.Fatalf("the chart's Deployment has no %s annotation", checksumAnnotation)
			}
			c = dropChecksum(t, c)
		}
		if !equalYAML(t, m, c) {
			t.Errorf("%s differs between manifests/operator.yaml and the chart:\n--- manifest\n%s\n--- chart\n%s", key, m, c)
		}
	}
	for key := range chart {
		if strings.HasPrefix(key, "CustomResourceDefinition/") {
			continue
		}
		if _, ok := manifest[key]; !ok {
			t.Errorf("the chart renders %s, which manifests/operator.yaml lacks", key)
		}
	}
	if _, ok := manifest["Namespace/valkey-operator"]; !ok {
		t.Error("manifests/operator.yaml does not create the valkey-operator namespace")
	}
}

// TestClusterRoleIsTheGeneratedOne: the ClusterRole and the Role shipped in operator.yaml are
// manifests/rbac/role.yaml, and that file is what controller-gen makes of the markers in
// controllers/ today.
func TestClusterRoleIsTheGeneratedOne(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("go", "tool", "controller-gen", "rbac:roleName=valkey-operator", "paths=./controllers/...", "output:rbac:artifacts:config="+dir)
	cmd.Dir = harness.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("controller-gen rbac: %v\n%s", err, out)
	}
	fresh := readFile(t, filepath.Join(dir, "role.yaml"))
	committed := readFile(t, filepath.Join(harness.RepoRoot(), "manifests", "rbac", "role.yaml"))
	if !bytes.Equal(fresh, committed) {
		t.Fatalf("manifests/rbac/role.yaml is stale: run `make manifests`\n--- generated\n%s", fresh)
	}
	objs := splitYAML(t, committed)
	if len(objs) != 2 {
		t.Fatalf("role.yaml holds %d objects, want the ClusterRole and the Role of the Lease", len(objs))
	}
	for i, key := range []string{"ClusterRole/valkey-operator", "Role/valkey-operator"} {
		if !equalYAML(t, objs[i], manifestObjects(t)[key]) {
			t.Fatalf("the %s in manifests/operator.yaml is not manifests/rbac/role.yaml: run `make manifests`", key)
		}
	}
}

// TestChartCRDsAreTheManifestCRDs: chart/files/crds is a byte-for-byte copy of manifests/crds,
// and the chart renders each CRD unchanged but for the keep policy.
func TestChartCRDsAreTheManifestCRDs(t *testing.T) {
	want, _ := filepath.Glob(filepath.Join(harness.RepoRoot(), "manifests", "crds", "*.yaml"))
	got, _ := filepath.Glob(filepath.Join(chartDir(), "files", "crds", "*.yaml"))
	if len(want) == 0 || len(want) != len(got) {
		t.Fatalf("manifests/crds has %d files, chart/files/crds %d: run `make manifests`", len(want), len(got))
	}
	rendered := renderChart(t)
	for _, path := range want {
		copyPath := filepath.Join(chartDir(), "files", "crds", filepath.Base(path))
		orig := readFile(t, path)
		if !bytes.Equal(orig, readFile(t, copyPath)) {
			t.Errorf("%s differs from %s: run `make manifests`", copyPath, path)
		}
		crd := decode[apiextensionsv1.CustomResourceDefinition](t, orig)
		r, ok := rendered["CustomResourceDefinition/"+crd.Name]
		if !ok {
			t.Errorf("the chart does not render CRD %s", crd.Name)
			continue
		}
		rcrd := decode[apiextensionsv1.CustomResourceDefinition](t, r)
		if rcrd.Annotations["helm.sh/resource-policy"] != "keep" {
			t.Errorf("CRD %s: helm.sh/resource-policy is %q, want keep", crd.Name, rcrd.Annotations["helm.sh/resource-policy"])
		}
		delete(rcrd.Annotations, "helm.sh/resource-policy")
		if !equality.Semantic.DeepEqual(crd, rcrd) {
			t.Errorf("the chart renders CRD %s differently from %s", crd.Name, path)
		}
	}
}

// TestManifestDeploymentContract: what SPEC section 4 and the log contract require of the
// operator's Deployment, checked on the release manifest (the chart renders the same).
func TestManifestDeploymentContract(t *testing.T) {
	objs := manifestObjects(t)
	d := decode[appsv1.Deployment](t, objs["Deployment/valkey-operator"])
	if d.Namespace != "valkey-operator" || d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
		t.Fatalf("Deployment %s/%s with %v replicas, want valkey-operator/valkey-operator with 1", d.Namespace, d.Name, d.Spec.Replicas)
	}
	pod := d.Spec.Template.Spec
	if pod.ServiceAccountName != "valkey-operator" {
		t.Errorf("serviceAccountName %q", pod.ServiceAccountName)
	}
	if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 65532 {
		t.Errorf("pod securityContext %+v: want runAsNonRoot and runAsUser 65532", sc)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if !strings.HasPrefix(c.Image, "gomomento/valkey-operator:") || len(c.Command) != 0 {
		t.Errorf("image %q command %v: want gomomento/valkey-operator:<tag> and the image's entrypoint", c.Image, c.Command)
	}
	if sc := c.SecurityContext; sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.Capabilities == nil || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext %+v: want no privilege escalation, a read-only root file system, all capabilities dropped", sc)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("resource requests %v: want cpu and memory", c.Resources.Requests)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if env["RUST_LOG"].Value != "info" {
		t.Errorf("RUST_LOG %q, want info", env["RUST_LOG"].Value)
	}
	if ref := env["POD_NAMESPACE"].ValueFrom; ref == nil || ref.FieldRef == nil || ref.FieldRef.FieldPath != "metadata.namespace" {
		t.Errorf("POD_NAMESPACE %+v: want the downward API's metadata.namespace", env["POD_NAMESPACE"])
	}
	if want := []string{"--leader-elect=true", "--metrics-bind-address=:8443", "--health-probe-bind-address=:8081"}; !reflect.DeepEqual(c.Args, want) {
		t.Errorf("args %v: want %v (leader election on, metrics and probes served)", c.Args, want)
	}
	cm := decode[corev1.ConfigMap](t, objs["ConfigMap/valkey-operator-config"])
	if cm.Namespace != "valkey-operator" || cm.Data["defaultZoneSpread"] != "bestEffort" {
		t.Errorf("ConfigMap %s/%s data %v", cm.Namespace, cm.Name, cm.Data)
	}
	b := decode[rbacv1.ClusterRoleBinding](t, objs["ClusterRoleBinding/valkey-operator"])
	if b.RoleRef.Name != "valkey-operator" || len(b.Subjects) != 1 || b.Subjects[0].Kind != "ServiceAccount" ||
		b.Subjects[0].Name != "valkey-operator" || b.Subjects[0].Namespace != "valkey-operator" {
		t.Errorf("ClusterRoleBinding %+v: want ClusterRole valkey-operator bound to ServiceAccount valkey-operator/valkey-operator", b)
	}
}

// TestChartValues: the values reach the objects, a ConfigMap change rolls the operator (the
// pod template's checksum changes), and an empty log level is refused.
func TestChartValues(t *testing.T) {
	base := renderChart(t)
	got := renderChart(t, "--set", "logLevel=info\\,operator=debug", "--set", "image.repository=registry.example/valkey-operator",
		"--set", "image.tag=1.2.3", "--set", "config.defaultZoneSpread=required", "--set", "resources.requests.cpu=250m")
	d := decode[appsv1.Deployment](t, got["Deployment/valkey-operator"])
	c := d.Spec.Template.Spec.Containers[0]
	if c.Image != "registry.example/valkey-operator:1.2.3" {
		t.Errorf("image %q", c.Image)
	}
	if c.Env[0].Name != "RUST_LOG" || c.Env[0].Value != "info,operator=debug" {
		t.Errorf("env %+v: want RUST_LOG=info,operator=debug", c.Env)
	}
	if q := c.Resources.Requests[corev1.ResourceCPU]; q.Cmp(resource.MustParse("250m")) != 0 {
		t.Errorf("cpu request %s", q.String())
	}
	if cm := decode[corev1.ConfigMap](t, got["ConfigMap/valkey-operator-config"]); cm.Data["defaultZoneSpread"] != "required" {
		t.Errorf("ConfigMap data %v", cm.Data)
	}
	before := decode[appsv1.Deployment](t, base["Deployment/valkey-operator"]).Spec.Template.Annotations[checksumAnnotation]
	if after := d.Spec.Template.Annotations[checksumAnnotation]; after == before {
		t.Errorf("the pod template's %s did not change with the ConfigMap", checksumAnnotation)
	}
	if _, ok := renderChart(t, "--set", "crds.install=false")["CustomResourceDefinition/valkeyclusters.valkey.gomomento.com"]; ok {
		t.Error("crds.install=false still renders the CRDs")
	}
	out, err := exec.Command(helmBinary(t), "template", "valkey-operator", chartDir(), "-n", "valkey-operator", "--set", "logLevel=").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "logLevel (RUST_LOG) must not be empty") {
		t.Errorf("an empty logLevel rendered (err %v):\n%s", err, out)
	}
}

// chartDir is the chart's directory.
func chartDir() string { return filepath.Join(harness.RepoRoot(), "chart") }

// renderChart runs `helm template` in namespace valkey-operator and returns the objects by
// "Kind/name".
func renderChart(t *testing.T, args ...string) map[string][]byte {
	t.Helper()
	cmd := exec.Command(helmBinary(t), append([]string{"template", "valkey-operator", chartDir(), "-n", "valkey-operator"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, stderr.Bytes())
	}
	return byKindName(t, out)
}

// manifestObjects returns manifests/operator.yaml's objects by "Kind/name".
func manifestObjects(t *testing.T) map[string][]byte {
	t.Helper()
	return byKindName(t, readFile(t, filepath.Join(harness.RepoRoot(), "manifests", "operator.yaml")))
}

func byKindName(t *testing.T, data []byte) map[string][]byte {
	t.Helper()
	objs := map[string][]byte{}
	for _, doc := range splitYAML(t, data) {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		key := meta.Kind + "/" + meta.Metadata.Name
		if _, dup := objs[key]; dup {
			t.Fatalf("%s appears twice", key)
		}
		objs[key] = doc
	}
	return objs
}

// splitYAML splits a multi-document stream, dropping documents with no object (comments only).
func splitYAML(t *testing.T, data []byte) [][]byte {
	t.Helper()
	var docs [][]byte
	for _, doc := range strings.Split("\n"+string(data), "\n---") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		if len(m) > 0 {
			docs = append(docs, []byte(doc))
		}
	}
	return docs
}

func equalYAML(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := yaml.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

// dropChecksum removes the chart's config checksum from a Deployment (and the annotations map
// if that empties it).
func dropChecksum(t *testing.T, doc []byte) []byte {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	meta := m["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)
	if ann, ok := meta["annotations"].(map[string]any); ok {
		delete(ann, checksumAnnotation)
		if len(ann) == 0 {
			delete(meta, "annotations")
		}
	}
	out, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func decode[T any](t *testing.T, doc []byte) *T {
	t.Helper()
	var obj T
	if err := yaml.UnmarshalStrict(doc, &obj); err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	return &obj
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The docs' NetworkPolicy (security/networking.md) admits the operator to Valkey pods with a
// namespaceSelector on kubernetes.io/metadata.name: valkey-operator and a podSelector on
// app: valkey-operator. Both must select the operator's pods as shipped, by manifests and by
// the chart, or following the docs cuts the operator off from every cluster.
func TestDocsNetworkPolicySelectsTheOperator(t *testing.T) {
	podSelector := labels.SelectorFromSet(labels.Set{"app": "valkey-operator"})
	namespaceSelector := labels.SelectorFromSet(labels.Set{"kubernetes.io/metadata.name": "valkey-operator"})
	for source, objs := range map[string]map[string][]byte{"manifests/operator.yaml": manifestObjects(t), "the chart": renderChart(t)} {
		d := decode[appsv1.Deployment](t, objs["Deployment/valkey-operator"])
		// The API server labels every namespace with its name.
		if ns := (labels.Set{"kubernetes.io/metadata.name": d.Namespace}); !namespaceSelector.Matches(ns) {
			t.Errorf("%s: the operator runs in namespace %q, which the docs' namespaceSelector does not select", source, d.Namespace)
		}
		if !podSelector.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("%s: the operator's pod labels %v do not match the docs' podSelector %s", source, d.Spec.Template.Labels, podSelector)
		}
		// And the rule of every cluster's own NetworkPolicy that lets the operator in.
		vc := &v1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "team"}}
		from := resources.BuildNetworkPolicy(vc, d.Namespace).Spec.Ingress[1].From[0]
		ns, _ := metav1.LabelSelectorAsSelector(from.NamespaceSelector)
		pods, _ := metav1.LabelSelectorAsSelector(from.PodSelector)
		if !ns.Matches(labels.Set{"kubernetes.io/metadata.name": d.Namespace}) || !pods.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("%s: a cluster's NetworkPolicy does not let the operator's pods (%v in %s) in: %+v", source, d.Spec.Template.Labels, d.Namespace, from)
		}
	}
}

// DEFAULT_ZONE_SPREAD comes from the ConfigMap's defaultZoneSpread, optional, so that a
// missing ConfigMap or key falls back to bestEffort (reference/operator-configuration.md);
// DEFAULT_NETWORK_POLICY from defaultNetworkPolicy the same way (missing: Enabled).
func TestZoneSpreadWiredFromTheConfigMap(t *testing.T) {
	for source, objs := range map[string]map[string][]byte{"manifests/operator.yaml": manifestObjects(t), "the chart": renderChart(t)} {
		d := decode[appsv1.Deployment](t, objs["Deployment/valkey-operator"])
		cm := decode[corev1.ConfigMap](t, objs["ConfigMap/valkey-operator-config"])
		for env, key := range map[string]string{"DEFAULT_ZONE_SPREAD": "defaultZoneSpread", "DEFAULT_NETWORK_POLICY": "defaultNetworkPolicy"} {
			var ref *corev1.ConfigMapKeySelector
			for _, e := range d.Spec.Template.Spec.Containers[0].Env {
				if e.Name == env && e.ValueFrom != nil {
					ref = e.ValueFrom.ConfigMapKeyRef
				}
			}
			if ref == nil || ref.Name != "valkey-operator-config" || ref.Key != key || ref.Optional == nil || !*ref.Optional {
				t.Errorf("%s: %s from %+v, want the optional key %s of ConfigMap valkey-operator-config", source, env, ref, key)
			}
			if _, ok := cm.Data[key]; !ok {
				t.Errorf("%s: ConfigMap valkey-operator-config has no %s", source, key)
			}
		}
	}
}

// TestMetricsNetworkPolicy: manifests and chart ship a NetworkPolicy on the operator's pods (the
// docs' label, app: valkey-operator) that admits the metrics port only from the configured peers
// (the platform's Prometheus) and the probes port from any peer, and nothing else: a made-up
// token from any pod costs the operator a TokenReview. The ports it names are the Deployment's.
// The chart's peers come from metrics.networkPolicy.from; metrics.networkPolicy.enabled=false or
// metrics.enabled=false render none.
func TestMetricsNetworkPolicy(t *testing.T) {
	prometheus := []networkingv1.NetworkPolicyPeer{{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "prometheus"}},
	}}
	custom := []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "observability"}}}}
	for source, tc := range map[string]struct {
		objs map[string][]byte
		from []networkingv1.NetworkPolicyPeer
	}{
		"manifests/operator.yaml": {manifestObjects(t), prometheus},
		"the chart":               {renderChart(t), prometheus},
		"the chart with metrics.networkPolicy.from": {renderChart(t, "--set-json", `metrics.networkPolicy.from=[{"namespaceSelector":{"matchLabels":{"team":"observability"}}}]`), custom},
	} {
		doc, ok := tc.objs["NetworkPolicy/valkey-operator-metrics"]
		if !ok {
			t.Errorf("%s: no NetworkPolicy valkey-operator-metrics", source)
			continue
		}
		p := decode[networkingv1.NetworkPolicy](t, doc)
		d := decode[appsv1.Deployment](t, tc.objs["Deployment/valkey-operator"])
		sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
		if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) || p.Namespace != d.Namespace {
			t.Errorf("%s: the policy (%s in %s) does not select the operator's pods %v in %s", source, sel, p.Namespace, d.Spec.Template.Labels, d.Namespace)
		}
		if p.Spec.PodSelector.MatchLabels["app"] != "valkey-operator" {
			t.Errorf("%s: the policy selects %v, not the docs' app: valkey-operator", source, p.Spec.PodSelector)
		}
		if !reflect.DeepEqual(p.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
			t.Errorf("%s: policy types %v, want Ingress", source, p.Spec.PolicyTypes)
		}
		ports := map[string]int32{}
		for _, cp := range d.Spec.Template.Spec.Containers[0].Ports {
			ports[cp.Name] = cp.ContainerPort
		}
		admitted := map[int32][]networkingv1.NetworkPolicyPeer{}
		for _, rule := range p.Spec.Ingress {
			if len(rule.Ports) == 0 {
				t.Errorf("%s: a rule admits every port: %+v", source, rule)
			}
			for _, port := range rule.Ports {
				n, ok := ports[port.Port.String()]
				if !ok {
					t.Errorf("%s: the policy names port %s, which the operator's container does not", source, port.Port.String())
				}
				admitted[n] = rule.From
			}
		}
		if from, ok := admitted[8443]; !ok || !reflect.DeepEqual(from, tc.from) {
			t.Errorf("%s: the metrics port admits %+v, want only %+v", source, from, tc.from)
		}
		if from, ok := admitted[8081]; !ok || len(from) != 0 {
			t.Errorf("%s: the probes port admits %+v, want every peer (the kubelet's probes)", source, from)
		}
		if len(admitted) != 2 {
			t.Errorf("%s: the policy admits ports %v, want the metrics and probes ports only", source, admitted)
		}
	}
	for _, set := range []string{"metrics.networkPolicy.enabled=false", "metrics.enabled=false"} {
		if _, ok := renderChart(t, "--set", set)["NetworkPolicy/valkey-operator-metrics"]; ok {
			t.Errorf("%s still renders the NetworkPolicy", set)
		}
	}
}
