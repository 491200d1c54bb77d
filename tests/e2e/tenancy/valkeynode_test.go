package tenancy

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/tests/harness"
)

// TestValkeyNodes: a 3x1 cluster is six ValkeyNodes, each owning its pod and {node}-config
// ConfigMap, all Active once formed. A replica killed in place is replaced by a new ValkeyNode
// that goes Joining then Active (`completed join`), and the dead node's ValkeyNode, pod and
// ConfigMap are removed. A team granted read access as the docs show can list them. Deleting
// the cluster removes every ValkeyNode, pod and ConfigMap.
func TestValkeyNodes(t *testing.T) {
	ns := "vnode"
	ctx := context.Background()
	vc := harness.ActiveCluster(t, ns, 3, 1)
	first := harness.WaitNodesActive(t, vc, 6, nil)
	checkNodeObjects(t, vc, first)

	out, err := harness.Kubectl(harness.Cluster, nil, "get", "valkeynodes", "-n", ns)
	if err != nil || !strings.Contains(string(out), "LIFECYCLE") || strings.Count(string(out), " Active") != 6 {
		t.Fatalf("kubectl get valkeynodes: %v\n%s", err, out)
	}
	checkTeamReadAccess(t, ns)

	// Kill a replica's process: its pod goes Failed, and its node is replaced.
	victim := harness.PodWithRole(t, vc, v1.NodeRoleReplica)
	if err := harness.Cluster.Kubelet.KillPod(ns, victim); err != nil {
		t.Fatal(err)
	}
	seen := map[string][]v1.NodeLifecycle{} // lifecycles of the replacement, in the order seen
	second := harness.WaitNodesActive(t, vc, 6, func(nodes []v1.ValkeyNode) bool {
		victimLeft := false
		for _, n := range nodes {
			if n.Name == victim {
				victimLeft = true
			}
			if !slices.ContainsFunc(first, func(f v1.ValkeyNode) bool { return f.Name == n.Name }) {
				if l := seen[n.Name]; len(l) == 0 || l[len(l)-1] != n.Spec.Lifecycle {
					seen[n.Name] = append(l, n.Spec.Lifecycle)
				}
			}
		}
		return !victimLeft && !objectExists(t, ns, victim, &corev1.Pod{}) && !objectExists(t, ns, v1.NodeConfigMapName(victim), &corev1.ConfigMap{})
	})
	if len(seen) != 1 {
		t.Fatalf("replacement nodes %v, want exactly one", seen)
	}
	for name, lifecycles := range seen {
		if !slices.Equal(lifecycles, []v1.NodeLifecycle{v1.LifecycleJoining, v1.LifecycleActive}) {
			t.Errorf("replacement %s went %v, want [Joining Active]", name, lifecycles)
		}
		i := slices.IndexFunc(second, func(n v1.ValkeyNode) bool { return n.Name == name })
		if got := second[i].Labels[v1.LabelJoinType]; got != string(v1.JoinTypeReplica) {
			t.Errorf("replacement %s join-type %q, want replica", name, got)
		}
		if !harness.LoggedFor(t, "completed join", ns, name) {
			t.Errorf("no `completed join` line for %s", name)
		}
	}
	checkNodeObjects(t, vc, second)
	harness.VerifyValkey(t, harness.WaitHealed(t, vc, victim, 6), 3, 1)

	// Delete the cluster: everything goes with it, through two levels of owner references.
	before := countChildren(t, ns)
	if before != [3]int{6, 6, 6} {
		t.Fatalf("before deleting: %d ValkeyNodes, %d pods, %d node ConfigMaps; want 6 of each", before[0], before[1], before[2])
	}
	if err := harness.K8s.Delete(ctx, vc, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, "every child gone after deleting the cluster", 2*time.Minute, func() string {
		if left := countChildren(t, ns); left != [3]int{} {
			return fmt.Sprintf("%d ValkeyNodes, %d pods, %d node ConfigMaps left", left[0], left[1], left[2])
		}
		return ""
	})
}

// checkNodeObjects checks each node against the reference: owned by the cluster, owning its
// pod and {node}-config ConfigMap of the same name, the shard index on the pod, the join type on
// the node only, the documented port names, the pod reading its own ConfigMap.
func checkNodeObjects(t *testing.T, vc *v1.ValkeyCluster, nodes []v1.ValkeyNode) {
	t.Helper()
	ctx := context.Background()
	var cur v1.ValkeyCluster
	if err := harness.K8s.Get(ctx, client.ObjectKeyFromObject(vc), &cur); err != nil {
		t.Fatal(err)
	}
	shards := map[int32]int{}
	for _, n := range nodes {
		if !metav1.IsControlledBy(&n, &cur) || n.Spec.ClusterName != vc.Name {
			t.Errorf("%s: owners %+v, clusterName %q", n.Name, n.OwnerReferences, n.Spec.ClusterName)
		}
		if n.Spec.Image != "valkey/valkey:8.0.1" || n.Spec.ValkeySettings["cluster-enabled"] != "yes" || n.Spec.ValkeySettings["maxmemory"] != "100mb" {
			t.Errorf("%s: spec %+v", n.Name, n.Spec)
		}
		shards[n.Spec.ShardIndex]++
		var pod corev1.Pod
		if err := harness.K8s.Get(ctx, client.ObjectKey{Namespace: n.Namespace, Name: n.Name}, &pod); err != nil {
			t.Fatalf("pod of %s: %v", n.Name, err)
		}
		var cm corev1.ConfigMap
		if err := harness.K8s.Get(ctx, client.ObjectKey{Namespace: n.Namespace, Name: n.Name + "-config"}, &cm); err != nil {
			t.Fatalf("ConfigMap of %s: %v", n.Name, err)
		}
		for _, obj := range []metav1.Object{&pod, &cm} {
			if !metav1.IsControlledBy(obj, &n) {
				t.Errorf("%s is not controlled by ValkeyNode %s: %+v", obj.GetName(), n.Name, obj.GetOwnerReferences())
			}
		}
		if !strings.Contains(cm.Data["valkey.conf"], "cluster-enabled yes") || strings.Contains(cm.Data["valkey.conf"], "masterauth") {
			t.Errorf("%s: valkey.conf %q", cm.Name, cm.Data["valkey.conf"])
		}
		if pod.Labels[v1.LabelShard] != strconv.Itoa(int(n.Spec.ShardIndex)) || pod.Labels["app.kubernetes.io/instance"] != vc.Name || pod.Labels["app.kubernetes.io/name"] != "valkey" {
			t.Errorf("pod %s labels %v", pod.Name, pod.Labels)
		}
		if _, ok := pod.Labels[v1.LabelJoinType]; ok {
			t.Errorf("pod %s carries the join-type label, which belongs on its ValkeyNode", pod.Name)
		}
		var ports []string
		for _, p := range pod.Spec.Containers[0].Ports {
			ports = append(ports, p.Name)
		}
		if strings.Join(ports, ",") != "valkey,valkey-bus" {
			t.Errorf("pod %s port names %v", pod.Name, ports)
		}
		if v := pod.Spec.Volumes[0].ConfigMap; v == nil || v.Name != cm.Name {
			t.Errorf("pod %s mounts %+v, want %s", pod.Name, pod.Spec.Volumes[0], cm.Name)
		}
	}
	if len(shards) != 3 || shards[0] != 2 || shards[1] != 2 || shards[2] != 2 {
		t.Errorf("nodes per shard index %v, want 2 in each of 0..2", shards)
	}
}

// checkTeamReadAccess grants a team what platform-guide/multi-tenancy-and-rbac.md grants (a
// Role with read access to valkeynodes, nothing on core resources) and lists as that team.
func checkTeamReadAccess(t *testing.T, ns string) {
	t.Helper()
	role := fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: team-clusters
  namespace: %[1]s
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
  name: team-clusters
  namespace: %[1]s
subjects:
  - kind: Group
    name: team-engineers
    apiGroup: rbac.authorization.k8s.io
roleRef:
  kind: Role
  name: team-clusters
  apiGroup: rbac.authorization.k8s.io
`, ns)
	if out, err := harness.Kubectl(harness.Cluster, []byte(role), "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	as := []string{"--as=alice", "--as-group=team-engineers"}
	// RBAC caches catch up within a second or two.
	harness.WaitFor(t, "the team listing valkeynodes", 30*time.Second, func() string {
		out, err := harness.Kubectl(harness.Cluster, nil, append([]string{"get", "valkeynodes", "-n", ns}, as...)...)
		if err == nil && strings.Count(string(out), " Active") == 6 {
			return ""
		}
		return fmt.Sprintf("%v\n%s", err, out)
	})
	if out, err := harness.Kubectl(harness.Cluster, nil, append([]string{"delete", "valkeynodes", "--all", "-n", ns, "--dry-run=server"}, as...)...); err == nil || !strings.Contains(string(out), "forbidden") {
		t.Fatalf("the team may delete valkeynodes: %v\n%s", err, out)
	}
	if out, err := harness.Kubectl(harness.Cluster, nil, append([]string{"get", "configmaps", "-n", ns}, as...)...); err == nil || !strings.Contains(string(out), "forbidden") {
		t.Fatalf("the team may read ConfigMaps: %v\n%s", err, out)
	}
}

func objectExists(t *testing.T, ns, name string, obj client.Object) bool {
	t.Helper()
	err := harness.K8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// countChildren counts, in ns, the ValkeyNodes, the pods and the per-node ConfigMaps.
func countChildren(t *testing.T, ns string) [3]int {
	t.Helper()
	ctx := context.Background()
	var nodes v1.ValkeyNodeList
	var pods corev1.PodList
	var cms corev1.ConfigMapList
	for _, l := range []client.ObjectList{&nodes, &pods, &cms} {
		if err := harness.K8s.List(ctx, l, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
	}
	nodeCMs := 0
	for _, cm := range cms.Items {
		if ref := metav1.GetControllerOf(&cm); ref != nil && ref.Kind == "ValkeyNode" {
			nodeCMs++
		}
	}
	return [3]int{len(nodes.Items), len(pods.Items), nodeCMs}
}
