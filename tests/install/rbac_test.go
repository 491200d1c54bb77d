package install

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/gomomento/valkey-operator/tests/harness"
)

// The tenancy of platform-guide/multi-tenancy-and-rbac.md on a real kube-apiserver with its
// RBAC authorizer: the shipped ClusterRoles (valkey-menu-reader, and the two aggregated into
// the built-in view / edit / admin roles by kube-controller-manager's clusterrole-aggregation
// controller, run here for that one controller) give a team exactly what the guide promises.

const (
	teamNamespace  = "checkout-team"
	otherNamespace = "other-team"
	teamGroup      = "checkout-team-engineers"
)

// guideBindings are the guide's per-team objects: a Role and RoleBinding for the team's
// namespace, a ClusterRoleBinding to the shipped valkey-menu-reader.
const guideBindings = `
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: checkout-team-clusters
  namespace: checkout-team
rules:
  - apiGroups: ["valkey.gomomento.com"]
    resources: ["valkeyclusters"]
    verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
  - apiGroups: ["valkey.gomomento.com"]
    resources: ["valkeynodes"]
    verbs: ["get", "list", "watch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: checkout-team-clusters
  namespace: checkout-team
subjects:
  - kind: Group
    name: checkout-team-engineers
    apiGroup: rbac.authorization.k8s.io
roleRef:
  kind: Role
  name: checkout-team-clusters
  apiGroup: rbac.authorization.k8s.io
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: checkout-team-menu-reader
subjects:
  - kind: Group
    name: checkout-team-engineers
    apiGroup: rbac.authorization.k8s.io
roleRef:
  kind: ClusterRole
  name: valkey-menu-reader
  apiGroup: rbac.authorization.k8s.io
`

func TestTenantRBAC(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real kube-apiserver (envtest); not run with -short")
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: this test needs etcd, kube-apiserver and kube-controller-manager (`make control-plane`)")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(harness.RepoRoot(), "manifests", "crds")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
		// make test runs several control planes at once on 2 cores; the default 20 s start
		// timeout failed there (kube-apiserver at load 40).
		ControlPlaneStartTimeout: 2 * time.Minute,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	admin, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	startAggregation(t, env, assets)
	ctx := t.Context()

	// The shipped tenant ClusterRoles, from manifests/operator.yaml (the chart renders the same,
	// TestChartRendersTheManifests), then the guide's objects.
	manifest := manifestObjects(t)
	for _, key := range []string{"ClusterRole/valkey-menu-reader", "ClusterRole/valkey-operator-view", "ClusterRole/valkey-operator-edit"} {
		doc, ok := manifest[key]
		if !ok {
			t.Fatalf("manifests/operator.yaml ships no %s", key)
		}
		apply(t, admin, doc)
	}
	for _, ns := range []string{teamNamespace, otherNamespace} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, doc := range splitYAML(t, []byte(guideBindings)) {
		apply(t, admin, doc)
	}
	// The built-in roles, as the aggregation controller fills them, to the team's namespace.
	for user, role := range map[string]string{"viewer": "view", "editor": "edit", "owner": "admin"} {
		if err := admin.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: teamNamespace},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: user, APIGroup: rbacv1.GroupName}},
			RoleRef:    rbacv1.RoleRef{Kind: "ClusterRole", Name: role, APIGroup: rbacv1.GroupName},
		}); err != nil {
			t.Fatal(err)
		}
	}
	waitAggregated(t, admin)

	t.Run("the guide's team member creates a ValkeyCluster", func(t *testing.T) {
		alice := impersonate(t, cfg, scheme, "alice", teamGroup)
		vc := &unstructured.Unstructured{}
		vc.SetAPIVersion("valkey.gomomento.com/v1alpha1")
		vc.SetKind("ValkeyCluster")
		vc.SetNamespace(teamNamespace)
		vc.SetName("my-cluster")
		_ = unstructured.SetNestedField(vc.Object, map[string]any{"configRef": "standard", "shards": int64(3), "replicasPerShard": int64(1)}, "spec")
		if err := alice.Create(ctx, vc); err != nil {
			t.Fatalf("create ValkeyCluster in %s: %v", teamNamespace, err)
		}
		other := vc.DeepCopy()
		other.SetNamespace(otherNamespace)
		other.SetResourceVersion("")
		if err := alice.Create(ctx, other); !apierrors.IsForbidden(err) {
			t.Fatalf("create ValkeyCluster in %s: %v, want Forbidden", otherNamespace, err)
		}
		var nodes unstructured.UnstructuredList
		nodes.SetAPIVersion("valkey.gomomento.com/v1alpha1")
		nodes.SetKind("ValkeyNodeList")
		if err := alice.List(ctx, &nodes, client.InNamespace(teamNamespace)); err != nil {
			t.Fatalf("list ValkeyNodes in %s: %v", teamNamespace, err)
		}
		var secrets corev1.SecretList
		if err := alice.List(ctx, &secrets, client.InNamespace(teamNamespace)); !apierrors.IsForbidden(err) {
			t.Fatalf("list Secrets in %s: %v, want Forbidden", teamNamespace, err)
		}
	})

	t.Run("the guide's team member may do exactly what the guide lists", func(t *testing.T) {
		alice := impersonate(t, cfg, scheme, "alice", teamGroup)
		review := &authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: teamNamespace}}
		if err := alice.Create(ctx, review); err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, rule := range review.Status.ResourceRules {
			// Every authenticated user may review its own access (system:basic-user).
			if slices.Equal(rule.APIGroups, []string{"authorization.k8s.io"}) || slices.Equal(rule.APIGroups, []string{"authentication.k8s.io"}) {
				continue
			}
			for _, g := range rule.APIGroups {
				for _, r := range rule.Resources {
					for _, v := range rule.Verbs {
						got[g+"/"+r+":"+v] = true
					}
				}
			}
		}
		want := map[string]bool{}
		for _, v := range []string{"get", "list", "watch", "create", "update", "patch", "delete"} {
			want["valkey.gomomento.com/valkeyclusters:"+v] = true
		}
		for _, r := range []string{"valkeynodes", "valkeyimages", "valkeyconfigs", "valkeyroles"} {
			for _, v := range []string{"get", "list", "watch"} {
				want["valkey.gomomento.com/"+r+":"+v] = true
			}
		}
		for k := range got {
			if !want[k] {
				t.Errorf("the team may %s, which the guide does not grant", k)
			}
		}
		for k := range want {
			if !got[k] {
				t.Errorf("the team may not %s, which the guide grants", k)
			}
		}
	})

	type check struct {
		user      string
		groups    []string
		verb      string
		resource  string
		namespace string
		allowed   bool
	}
	team := []string{teamGroup}
	checks := []check{
		// The guide's team: its namespace's clusters, its nodes read-only, the menu read-only.
		{"alice", team, "delete", "valkeyclusters", teamNamespace, true},
		{"alice", team, "watch", "valkeynodes", teamNamespace, true},
		{"alice", team, "get", "valkeyconfigs", "", true},
		{"alice", team, "list", "valkeyimages", "", true},
		{"alice", team, "watch", "valkeyroles", "", true},
		{"alice", team, "create", "valkeynodes", teamNamespace, false},
		{"alice", team, "delete", "valkeynodes", teamNamespace, false},
		{"alice", team, "patch", "valkeyclusters/status", teamNamespace, false},
		{"alice", team, "create", "valkeyconfigs", "", false},
		{"alice", team, "update", "valkeyimages", "", false},
		{"alice", team, "delete", "valkeyroles", "", false},
		{"alice", team, "list", "valkeyclusters", otherNamespace, false},
		{"alice", team, "list", "valkeyclusters", "", false},
		{"alice", team, "list", "valkeynodes", otherNamespace, false},
		{"alice", team, "get", "valkeynodes", "", false},
		{"alice", team, "get", "configmaps", teamNamespace, false},
		{"alice", team, "get", "pods", teamNamespace, false},
		{"alice", team, "list", "services", teamNamespace, false},
		// The built-in roles, with ours aggregated into them.
		{"viewer", nil, "list", "valkeyclusters", teamNamespace, true},
		{"viewer", nil, "get", "valkeynodes", teamNamespace, true},
		{"viewer", nil, "create", "valkeyclusters", teamNamespace, false},
		{"viewer", nil, "list", "valkeyclusters", otherNamespace, false},
		{"editor", nil, "create", "valkeyclusters", teamNamespace, true},
		{"editor", nil, "patch", "valkeyclusters", teamNamespace, true},
		{"editor", nil, "list", "valkeynodes", teamNamespace, true},
		{"editor", nil, "delete", "valkeynodes", teamNamespace, false},
		{"owner", nil, "delete", "valkeyclusters", teamNamespace, true},
		{"owner", nil, "get", "valkeynodes", teamNamespace, true},
		{"owner", nil, "update", "valkeynodes", teamNamespace, false},
		// The record of which pod is a node's (controllers/identity.go) is the operator's alone.
		{"alice", team, "patch", "valkeynodes/status", teamNamespace, false},
		{"editor", nil, "patch", "valkeynodes/status", teamNamespace, false},
		{"owner", nil, "update", "valkeynodes/status", teamNamespace, false},
		{"owner", nil, "create", "valkeyclusters", otherNamespace, false},
	}
	for _, c := range checks {
		resource, sub, _ := strings.Cut(c.resource, "/")
		group := "valkey.gomomento.com"
		if !strings.HasPrefix(resource, "valkey") {
			group = ""
		}
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   c.user,
			Groups: append(slices.Clone(c.groups), "system:authenticated"),
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: c.namespace, Verb: c.verb, Group: group, Resource: resource, Subresource: sub,
			},
		}}
		if err := admin.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != c.allowed {
			t.Errorf("%s may %s %s in %q: %v, want %v", c.user, c.verb, c.resource, c.namespace, sar.Status.Allowed, c.allowed)
		}
	}
}

// startAggregation runs kube-controller-manager with only its clusterrole-aggregation
// controller against env's API server, for the life of the test.
func startAggregation(t *testing.T, env *envtest.Environment, assets string) {
	t.Helper()
	user, err := env.AddUser(envtest.User{Name: "kube-controller-manager", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, filepath.Join(assets, "kube-controller-manager"),
		"--kubeconfig="+path, "--controllers=clusterrole-aggregation", "--leader-elect=false", "--secure-port=0")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start kube-controller-manager: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("kube-controller-manager output:\n%s", out.String())
		}
	})
}

// waitAggregated waits until the built-in edit role holds the rules of valkey-operator-edit.
func waitAggregated(t *testing.T, c client.Client) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var edit rbacv1.ClusterRole
		if err := c.Get(t.Context(), client.ObjectKey{Name: "edit"}, &edit); err == nil {
			for _, rule := range edit.Rules {
				if slices.Contains(rule.Resources, "valkeyclusters") && slices.Contains(rule.Verbs, "create") {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the built-in edit ClusterRole never aggregated valkey-operator-edit")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// impersonate is a client that acts as user in groups.
func impersonate(t *testing.T, cfg *rest.Config, scheme *runtime.Scheme, user string, groups ...string) client.Client {
	t.Helper()
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	cl, err := client.New(c, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// apply creates the object of the YAML document doc.
func apply(t *testing.T, c client.Client, doc []byte) {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(t.Context(), obj); err != nil {
		t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
}
