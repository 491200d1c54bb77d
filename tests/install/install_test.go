package install

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/tests/harness"
	"github.com/gomomento/valkey-operator/tests/localcluster"
)

const (
	// operatorImage is the image repository of the operator; the local kubelet runs the
	// locally built binary for it.
	operatorImage = "gomomento/valkey-operator"
	// leaseName is the operator's leader-election Lease (main.go).
	leaseName = "valkey-operator.valkey.gomomento.com"
	// waitTimeout bounds each wait on a condition; a safety net, not an assertion on speed.
	waitTimeout = 5 * time.Minute
)

// sample is what a user applies once the operator runs: an image, a config and a
// one-shard cluster with one replica (a meet and a replication: a real formation).
const sample = `apiVersion: valkey.gomomento.com/v1alpha1
kind: ValkeyImage
metadata:
  name: valkey-8-0
spec:
  repository: valkey/valkey
  tag: "8.0.1"
  version: "8.0.1"
---
apiVersion: valkey.gomomento.com/v1alpha1
kind: ValkeyConfig
metadata:
  name: standard
spec:
  imageRef: valkey-8-0
  resources:
    cpu: "500m"
    memory: "256Mi"
  valkey:
    maxmemory: "100mb"
    repl-diskless-sync-delay: "0"
---
apiVersion: v1
kind: Namespace
metadata:
  name: my-app
---
apiVersion: valkey.gomomento.com/v1alpha1
kind: ValkeyCluster
metadata:
  name: my-cluster
  namespace: my-app
spec:
  configRef: standard
  shards: 1
  replicasPerShard: 1
`

var sampleKey = client.ObjectKey{Namespace: "my-app", Name: "my-cluster"}

// TestKubectlApplyInstall installs the release manifests with kubectl, waits for the rollout,
// checks that the operator is the Deployment's pod (non-root, leader through its own
// ServiceAccount), forms a cluster, reads the log through `kubectl logs ... | jq`, and checks
// that the ClusterRole is all the operator has and all it needs.
func TestKubectlApplyInstall(t *testing.T) {
	c, k8s := startCluster(t)
	user(t, c, `kubectl apply -f manifests/crds/ -f manifests/operator.yaml`)
	user(t, c, `kubectl -n valkey-operator rollout status deployment/valkey-operator --timeout=5m`)
	pod := operatorPod(t, k8s)
	checkPodProcess(t, pod)
	waitLeader(t, k8s, pod.Name)

	formSample(t, c, k8s)
	lines := operatorLog(t, c)
	checkLog(t, lines)
	if !slices.ContainsFunc(lines, func(l logLine) bool {
		return l.Fields["message"] == "cluster formed, transitioning to Active" && l.Fields["cluster_name"] == "my-cluster"
	}) {
		t.Errorf("no `cluster formed, transitioning to Active` line for my-cluster in the operator's log")
	}
	// The contract's query, verbatim.
	out := user(t, c, `kubectl -n valkey-operator logs deployment/valkey-operator | jq -c 'select(.fields.cluster_name == "my-cluster")'`)
	selected := parseLog(t, out)
	if len(selected) == 0 {
		t.Fatal("jq selected no line with fields.cluster_name == my-cluster")
	}
	for _, l := range selected {
		if l.Fields["cluster_name"] != "my-cluster" {
			t.Fatalf("jq selected a line for %v", l.Fields["cluster_name"])
		}
	}

	exerciseDay2(t, c, k8s)
	checkMetricsEndpoint(t, c, k8s)
	checkLeastPrivilege(t, c, k8s)
	checkGrantsAreCalled(t, c)
}

// TestHelmInstallUpgrade installs the chart, forms a cluster at the default log level (no
// DEBUG line), then `helm upgrade --set logLevel=debug`: the rollout replaces the operator's
// pod and the new one writes DEBUG lines. The CRDs belong to the release and survive
// `helm uninstall`.
func TestHelmInstallUpgrade(t *testing.T) {
	c, k8s := startCluster(t)
	user(t, c, `helm install valkey-operator ./chart -n valkey-operator --create-namespace`)
	user(t, c, `kubectl -n valkey-operator rollout status deployment/valkey-operator --timeout=5m`)
	first := operatorPod(t, k8s)
	checkPodProcess(t, first)
	waitLeader(t, k8s, first.Name)

	var crd apiextensionsv1.CustomResourceDefinition
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: "valkeyclusters.valkey.gomomento.com"}, &crd); err != nil {
		t.Fatal(err)
	}
	if crd.Annotations["meta.helm.sh/release-name"] != "valkey-operator" {
		t.Fatalf("CRD annotations %v: the CRDs are not part of the release, helm upgrade would not update them", crd.Annotations)
	}

	formSample(t, c, k8s)
	lines := operatorLog(t, c)
	checkLog(t, lines)
	if i := slices.IndexFunc(lines, func(l logLine) bool { return l.Level == "DEBUG" || l.Level == "TRACE" }); i >= 0 {
		t.Fatalf("a %s line at logLevel info: %s", lines[i].Level, lines[i].raw)
	}

	user(t, c, `helm upgrade valkey-operator ./chart -n valkey-operator --reuse-values --set logLevel=debug`)
	user(t, c, `kubectl -n valkey-operator rollout status deployment/valkey-operator --timeout=5m`)
	waitGone(t, k8s, first)
	second := operatorPod(t, k8s)
	if second.Name == first.Name {
		t.Fatalf("the upgrade did not replace the operator's pod %s", first.Name)
	}
	if env := second.Spec.Containers[0].Env; env[0].Name != "RUST_LOG" || env[0].Value != "debug" {
		t.Fatalf("the new pod's env %+v: want RUST_LOG=debug", env)
	}
	waitLeader(t, k8s, second.Name)
	// The new operator reconciles the existing cluster at debug: wait for its DEBUG lines
	// (the catalogue's per-pass `reconcile pass` line, about my-cluster).
	waitFor(t, "a DEBUG line in the upgraded operator's log", func() (bool, string) {
		lines := operatorLog(t, c)
		checkLog(t, lines)
		return slices.ContainsFunc(lines, func(l logLine) bool {
			return l.Level == "DEBUG" && l.Fields["cluster_name"] == "my-cluster"
		}), fmt.Sprintf("%d lines, none DEBUG about my-cluster", len(lines))
	})
	if _, err := harness.WaitState(context.Background(), k8s, sampleKey, v1.StateActive, waitTimeout); err != nil {
		t.Fatal(err)
	}

	user(t, c, `helm uninstall valkey-operator -n valkey-operator --wait`)
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: "valkeyclusters.valkey.gomomento.com"}, &crd); err != nil {
		t.Fatalf("the CRD after helm uninstall: %v (it must be kept, deleting it deletes every cluster)", err)
	}
	var vc v1.ValkeyCluster
	if err := k8s.Get(context.Background(), sampleKey, &vc); err != nil {
		t.Fatalf("the ValkeyCluster after helm uninstall: %v", err)
	}
}

// grant is one (API group, resource) and its verbs, as `kubectl describe clusterrole` lists it.
type grant struct{ group, resource, verbs string }

// wantGrants is everything the operator may do, cluster-wide (the ClusterRole; the Lease is in
// its own Role). Events: create and patch (a series) of events.k8s.io, never the core ones;
// tokenreviews and subjectaccessreviews: create, to let a scrape of its metrics in. Nodes: list
// and watch only, for their zones (the spread of a cluster over zones). No deletion of Pods, Services, ConfigMaps or Secrets, nor of its users' kinds (owner references and the garbage collector remove them; the kinds it deletes
// are its own ValkeyNode, whose pod and ConfigMap go with it, and the PodDisruptionBudget of a
// removed shard, and the cluster's NetworkPolicy once turned off), no Deployments or
// StatefulSets. Pods: patch, for spec.podAnnotations only; their resize subresource: patch, for a
// CPU or memory change in place. NetworkPolicies: get by name when the
// cache has none (one without the cluster label is still found), patch back to as built.
// Namespaces: get only, to leave alone the clusters of a namespace being deleted. Services: patch,
// for a Service an earlier version made, brought to the original's ports and selector.
// ValkeyNodes' status: patch, to record which pod is each node's (controllers/identity.go).
var wantGrants = []grant{
	{"", "configmaps", "create,get,list,update,watch"},
	{"", "namespaces", "get"},
	{"", "nodes", "list,watch"},
	{"", "pods", "create,get,list,patch,watch"},
	{"", "pods/resize", "patch"},
	{"", "secrets", "create,get,list,update,watch"},
	{"", "services", "create,get,list,patch,watch"},
	{"authentication.k8s.io", "tokenreviews", "create"},
	{"authorization.k8s.io", "subjectaccessreviews", "create"},
	{"events.k8s.io", "events", "create,patch"},
	{"networking.k8s.io", "networkpolicies", "create,delete,get,list,patch,watch"},
	{"policy", "poddisruptionbudgets", "create,delete,list,patch,watch"},
	{"valkey.gomomento.com", "valkeyclusters", "get,list,watch"},
	{"valkey.gomomento.com", "valkeyclusters/status", "patch"},
	{"valkey.gomomento.com", "valkeyconfigs", "list,watch"},
	{"valkey.gomomento.com", "valkeyimages", "list,watch"},
	{"valkey.gomomento.com", "valkeynodes", "create,delete,list,update,watch"},
	{"valkey.gomomento.com", "valkeynodes/status", "patch"},
	{"valkey.gomomento.com", "valkeyroles", "list,watch"},
}

// checkLeastPrivilege lists what the installed ClusterRole grants and checks it is wantGrants,
// that no other binding gives the operator's ServiceAccount anything, and that the API server
// refuses the rest. The operator having formed a cluster with a log free of "forbidden" is the
// proof that it needs no more.
func checkLeastPrivilege(t *testing.T, c *localcluster.Cluster, k8s client.Client) {
	t.Helper()
	ctx := context.Background()
	var role rbacv1.ClusterRole
	if err := k8s.Get(ctx, client.ObjectKey{Name: "valkey-operator"}, &role); err != nil {
		t.Fatal(err)
	}
	var got []grant
	for _, r := range role.Rules {
		if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			t.Fatalf("unexpected rule %+v", r)
		}
		verbs := slices.Sorted(slices.Values(r.Verbs))
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				got = append(got, grant{g, res, strings.Join(verbs, ",")})
			}
		}
	}
	slices.SortFunc(got, func(a, b grant) int { return strings.Compare(a.group+"/"+a.resource, b.group+"/"+b.resource) })
	if !slices.Equal(got, wantGrants) {
		t.Fatalf("the ClusterRole grants\n%v\nwant\n%v", got, wantGrants)
	}

	var bindings []string
	var crbs rbacv1.ClusterRoleBindingList
	if err := k8s.List(ctx, &crbs); err != nil {
		t.Fatal(err)
	}
	for _, b := range crbs.Items {
		// Kubernetes' own default bindings (discovery for every ServiceAccount) are in every
		// cluster; they are not part of the install.
		if b.Labels["kubernetes.io/bootstrapping"] == "rbac-defaults" {
			continue
		}
		if bindsOperator(b.Subjects) {
			bindings = append(bindings, "ClusterRoleBinding/"+b.Name+"->"+b.RoleRef.Kind+"/"+b.RoleRef.Name)
		}
	}
	var rbs rbacv1.RoleBindingList
	if err := k8s.List(ctx, &rbs); err != nil {
		t.Fatal(err)
	}
	for _, b := range rbs.Items {
		if b.Labels["kubernetes.io/bootstrapping"] == "rbac-defaults" {
			continue
		}
		if bindsOperator(b.Subjects) {
			bindings = append(bindings, "RoleBinding/"+b.Namespace+"/"+b.Name+"->"+b.RoleRef.Kind+"/"+b.RoleRef.Name)
		}
	}
	var lease rbacv1.Role
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "valkey-operator", Name: "valkey-operator"}, &lease); err != nil {
		t.Fatal(err)
	}
	if len(lease.Rules) != 1 || !slices.Equal(lease.Rules[0].APIGroups, []string{"coordination.k8s.io"}) ||
		!slices.Equal(lease.Rules[0].Resources, []string{"leases"}) || strings.Join(slices.Sorted(slices.Values(lease.Rules[0].Verbs)), ",") != "create,get,update" {
		t.Fatalf("the Role valkey-operator/valkey-operator grants %+v, want create, get and update of leases", lease.Rules)
	}
	if want := []string{"ClusterRoleBinding/valkey-operator->ClusterRole/valkey-operator", "RoleBinding/valkey-operator/valkey-operator->Role/valkey-operator"}; !slices.Equal(bindings, want) {
		t.Fatalf("bindings of the operator's ServiceAccount: %v, want %v", bindings, want)
	}

	as := "--as=system:serviceaccount:valkey-operator:valkey-operator"
	for _, check := range []struct {
		args string
		want string
	}{
		{"create pods -n my-app", "yes"},
		{"patch valkeyclusters.valkey.gomomento.com --subresource=status -n my-app", "yes"},
		{"patch valkeyclusters.valkey.gomomento.com -n my-app", "no"},
		{"patch pods -n my-app", "yes"},
		{"create poddisruptionbudgets.policy -n my-app", "yes"},
		{"create pods --subresource=eviction -n my-app", "no"},
		{"delete pods -n my-app", "no"},
		{"delete valkeynodes.valkey.gomomento.com -n my-app", "yes"},
		{"create leases.coordination.k8s.io -n valkey-operator", "yes"},
		{"update leases.coordination.k8s.io -n kube-system", "no"},
		{"update leases.coordination.k8s.io -n kube-node-lease", "no"},
		{"create leases.coordination.k8s.io -n my-app", "no"},
		{"create events -n valkey-operator", "no"},
		{"create events.events.k8s.io -n my-app", "yes"},
		{"delete events.events.k8s.io -n my-app", "no"},
		{"get nodes", "no"},
		{"get namespaces", "yes"},
		{"list namespaces", "no"},
		{"delete namespaces", "no"},
		{"delete valkeyclusters.valkey.gomomento.com -n my-app", "no"},
		{"delete secrets -n my-app", "no"},
		{"create deployments.apps -n my-app", "no"},
		{"update clusterroles.rbac.authorization.k8s.io", "no"},
	} {
		args := append([]string{"auth", "can-i", as}, strings.Fields(check.args)...)
		out, _ := harness.Kubectl(c, nil, args...) // exit status 1 means "no"
		// The answer is the last line (a warning may precede it).
		got := ""
		if fields := strings.Fields(string(out)); len(fields) > 0 {
			got = fields[len(fields)-1]
		}
		if got != check.want {
			t.Errorf("kubectl auth can-i %s as the operator: %q, want %q", check.args, out, check.want)
		}
	}
}

func bindsOperator(subjects []rbacv1.Subject) bool {
	return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
		return (s.Kind == "ServiceAccount" && s.Namespace == "valkey-operator" && s.Name == "valkey-operator") ||
			(s.Kind == "Group" && (s.Name == "system:serviceaccounts" || s.Name == "system:serviceaccounts:valkey-operator"))
	})
}

// startCluster starts a local cluster whose kubelet runs the operator binary for the
// operator's image, and stops it at the end of the test.
func startCluster(t *testing.T) (*localcluster.Cluster, client.Client) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the local cluster")
	}
	bin := operatorBinary(t)
	helmBinary(t)
	// The local cluster is one per machine: Start first waits for other test packages' turn.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	c, err := localcluster.Start(ctx, localcluster.Options{Images: map[string]string{operatorImage: bin}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			if out, err := harness.Kubectl(c, nil, "-n", "valkey-operator", "get", "deploy,rs,pods,lease", "-o", "wide"); err == nil {
				t.Logf("valkey-operator namespace:\n%s", out)
			}
			if out, err := harness.Kubectl(c, nil, "-n", "valkey-operator", "logs", "deployment/valkey-operator", "--tail=60"); err == nil {
				t.Logf("last operator log lines:\n%s", out)
			}
		}
		// Teardown is the local cluster's business, not what these tests check (tests/e2e
		// reports it the same way).
		if err := c.Stop(); err != nil {
			t.Logf("stop local cluster: %v", err)
		}
	})
	scheme := harness.Scheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	k8s, err := client.New(c.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c, k8s
}

// user runs a command line as a user would type it, in bash at the repository root, with
// kubectl pointed at c and the pinned helm on PATH, and returns its stdout.
func user(t *testing.T, c *localcluster.Cluster, line string) string {
	t.Helper()
	cmd := exec.Command("bash", "-o", "pipefail", "-c", line)
	cmd.Dir = harness.RepoRoot()
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig, "PATH="+filepath.Dir(helmPath)+":"+os.Getenv("PATH"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", line, err, out, stderr.String())
	}
	return string(out)
}

// formSample waits for the CRDs, applies the sample and waits for the cluster to be Active.
func formSample(t *testing.T, c *localcluster.Cluster, k8s client.Client) {
	t.Helper()
	user(t, c, `kubectl wait --for condition=established --timeout=2m crd/valkeyclusters.valkey.gomomento.com crd/valkeyconfigs.valkey.gomomento.com crd/valkeyimages.valkey.gomomento.com crd/valkeyroles.valkey.gomomento.com crd/valkeynodes.valkey.gomomento.com`)
	if _, err := harness.Kubectl(c, []byte(sample), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	if _, err := harness.WaitState(context.Background(), k8s, sampleKey, v1.StateActive, waitTimeout); err != nil {
		t.Fatal(err)
	}
}

// operatorPod returns the one live pod of the operator's Deployment.
func operatorPod(t *testing.T, k8s client.Client) *corev1.Pod {
	t.Helper()
	var list corev1.PodList
	if err := k8s.List(context.Background(), &list, client.InNamespace("valkey-operator"), client.MatchingLabels{"app.kubernetes.io/name": "valkey-operator"}); err != nil {
		t.Fatal(err)
	}
	var live []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			live = append(live, p)
		}
	}
	if len(live) != 1 {
		t.Fatalf("%d running operator pods, want 1", len(live))
	}
	return &live[0]
}

// checkPodProcess checks the process the kubelet started for the pod: the operator binary,
// as user 65532, with no_new_privs.
func checkPodProcess(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	if len(pod.Status.ContainerStatuses) != 1 || pod.Status.ContainerStatuses[0].State.Running == nil {
		t.Fatalf("pod %s container statuses %+v", pod.Name, pod.Status.ContainerStatuses)
	}
	pid, ok := strings.CutPrefix(pod.Status.ContainerStatuses[0].ContainerID, "local://")
	if !ok {
		t.Fatalf("container ID %q", pod.Status.ContainerStatuses[0].ContainerID)
	}
	// The container's process starts as the kubelet's small exec chain (shell, setpriv) that
	// ends in the operator binary.
	waitFor(t, "pod "+pod.Name+" to exec the operator binary "+binPath, func() (bool, string) {
		exe, err := os.Readlink("/proc/" + pid + "/exe")
		if err != nil {
			t.Fatalf("pod %s process %s: %v", pod.Name, pid, err)
		}
		return exe == binPath, "runs " + exe
	})
	status := string(readFile(t, "/proc/"+pid+"/status"))
	for _, want := range []string{"Uid:\t65532\t65532\t65532\t65532", "Gid:\t65532\t65532\t65532\t65532", "NoNewPrivs:\t1"} {
		if !strings.Contains(status, want+"\n") {
			t.Errorf("operator process %s: no %q in /proc/%s/status", pid, want, pid)
		}
	}
}

// waitLeader waits until the pod holds the leader lease: it reached the API server with its
// in-cluster configuration and ServiceAccount token, in the namespace of POD_NAMESPACE, and holds
// the lease by its pod's name (POD_NAME from the downward API: main.go leaderIdentity).
func waitLeader(t *testing.T, k8s client.Client, pod string) {
	t.Helper()
	waitFor(t, "pod "+pod+" to hold the leader lease", func() (bool, string) {
		var lease coordinationv1.Lease
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "valkey-operator", Name: leaseName}, &lease); err != nil {
			return false, err.Error()
		}
		holder := ""
		if lease.Spec.HolderIdentity != nil {
			holder = *lease.Spec.HolderIdentity
		}
		return holder == pod, "holder " + holder
	})
}

// waitGone waits until the pod object is deleted.
func waitGone(t *testing.T, k8s client.Client, pod *corev1.Pod) {
	t.Helper()
	waitFor(t, "old pod "+pod.Name+" to be deleted", func() (bool, string) {
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(pod), &corev1.Pod{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// waitFor polls cond until it holds or waitTimeout passes.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %s", what, last)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// logLine is one line of the operator's log stream.
type logLine struct {
	Timestamp string         `json:"timestamp"`
	Level     string         `json:"level"`
	Fields    map[string]any `json:"fields"`
	Target    string         `json:"target"`
	raw       string
}

// operatorLog reads the log with the contract's command.
func operatorLog(t *testing.T, c *localcluster.Cluster) []logLine {
	t.Helper()
	return parseLog(t, user(t, c, `kubectl -n valkey-operator logs deployment/valkey-operator`))
}

func parseLog(t *testing.T, out string) []logLine {
	t.Helper()
	var lines []logLine
	for _, raw := range strings.Split(strings.TrimSpace(out), "\n") {
		if raw == "" {
			continue
		}
		var l logLine
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("a log line is not JSON: %v\n%s", err, raw)
		}
		l.raw = raw
		lines = append(lines, l)
	}
	return lines
}

// checkLog checks every line against the contract's shape, and that the operator met no
// refusal from the API server (its RBAC suffices) and logged no ERROR.
func checkLog(t *testing.T, lines []logLine) {
	t.Helper()
	for _, l := range lines {
		if _, err := time.Parse(time.RFC3339Nano, l.Timestamp); err != nil || !strings.HasSuffix(l.Timestamp, "Z") {
			t.Fatalf("timestamp %q is not RFC 3339 UTC: %s", l.Timestamp, l.raw)
		}
		if !slices.Contains([]string{"ERROR", "WARN", "INFO", "DEBUG", "TRACE"}, l.Level) || l.Fields["message"] == nil || l.Target == "" {
			t.Fatalf("a line without level, fields.message or target: %s", l.raw)
		}
		if l.Level == "ERROR" {
			t.Errorf("an ERROR line: %s", l.raw)
		}
		if strings.Contains(strings.ToLower(l.raw), "forbidden") {
			t.Errorf("the API server refused the operator something: %s", l.raw)
		}
	}
}
