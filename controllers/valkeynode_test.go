package controllers

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/resources"
	"github.com/gomomento/valkey-operator/slot"
	"github.com/gomomento/valkey-operator/valkey"
)

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// testNode is a ValkeyNode of vc named name, with a UID, in lifecycle lc.
func testNode(vc *v1.ValkeyCluster, name string, shard int, lc v1.NodeLifecycle) *v1.ValkeyNode {
	vn := resources.BuildValkeyNode(vc, newResolved(), name, shard, "")
	vn.UID = types.UID("uid-" + name)
	vn.Spec.Lifecycle = lc
	return vn
}

// testPod is a pod of vc controlled by owner, without an IP (so observe asks no Valkey node).
func testPod(vc *v1.ValkeyCluster, name string, shard int, owner metav1.OwnerReference) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: vc.Namespace,
			Labels:          map[string]string{v1.LabelCluster: vc.Name, v1.LabelShard: "0"},
			OwnerReferences: []metav1.OwnerReference{owner}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "valkey", Image: newResolved().Image.Image()}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
}

func nodeRef(vn *v1.ValkeyNode) metav1.OwnerReference {
	return *metav1.NewControllerRef(vn, v1.GroupVersion.WithKind("ValkeyNode"))
}

// observe joins ValkeyNodes and pods: a node's pod carries its lifecycle, a ValkeyNode without
// a pod is a lost (Failed) node, a pod whose ValkeyNode is gone is on its way out when the last
// status listed it (a node the operator retired), and a pod not controlled by one of the
// cluster's ValkeyNodes is not the cluster's, whatever its labels: it is never asked anything.
func TestObserveJoinsNodesAndPods(t *testing.T) {
	vc := newTestCluster()
	vc.Status.NodeDetails = []v1.NodeStatus{{Pod: "my-cluster-ccccc"}}
	joining := testNode(vc, "my-cluster-aaaaa", 0, v1.LifecycleJoining)
	lost := testNode(vc, "my-cluster-bbbbb", 1, v1.LifecycleActive)
	gone := testNode(vc, "my-cluster-ccccc", 0, v1.LifecycleActive) // never stored
	// A node of an earlier cluster of the same name (deleted, created again): not ours, nor its
	// pod, labelled with our name; nor a pod that names a ValkeyNode nobody can show.
	earlier := newTestCluster()
	earlier.UID = "earlier"
	foreign := testNode(earlier, "my-cluster-eeeee", 0, v1.LifecycleActive)
	objs := []client.Object{vc, joining, lost, foreign,
		testPod(vc, joining.Name, 0, nodeRef(joining)),
		testPod(vc, gone.Name, 0, nodeRef(gone)),
		testPod(vc, "my-cluster-ddddd", 0, resources.OwnerRef(vc)),
		testPod(vc, foreign.Name, 0, nodeRef(foreign)),
		testPod(vc, "my-cluster-fffff", 0, metav1.OwnerReference{APIVersion: v1.GroupVersion.String(), Kind: "ValkeyNode",
			Name: "my-cluster-fffff", UID: "made-up", Controller: ptr.To(true)}),
		// A pod of another name borrowing a real node's owner reference (name and UID are
		// readable by every team): not that node's pod (break test: its fake replies crashed the
		// operator, and it received the operator's password).
		testPod(vc, "evil", 0, nodeRef(joining)),
	}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).Build()
	r := &ValkeyClusterReconciler{Client: c, APIReader: c}
	obs, err := r.observe(context.Background(), vc, "", "hash", valkey.Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	// A node's spec hash is what its ValkeyNode records it was built from, pod or no pod. A pod
	// notes the keys of spec.podAnnotations it lacks (these test pods carry none).
	behind := []string{"example.com/scrape"}
	want := []fsm.Pod{
		{Name: joining.Name, Shard: 0, Phase: fsm.PodPending, Lifecycle: "Joining", SpecHash: resources.NodeSpecHash(&joining.Spec), StartHash: resources.StartSpecHash(&joining.Spec), Settings: joining.Spec.ValkeySettings, AnnotationsBehind: behind, Unrecorded: true,
			ShapeHash: resources.ShapeHash(&joining.Spec), Size: fsm.Size{CPU: joining.Spec.CPU, Memory: joining.Spec.Memory}},
		{Name: lost.Name, Shard: 1, Phase: fsm.PodFailed, Failure: "pod missing", Lifecycle: "Active", SpecHash: resources.NodeSpecHash(&lost.Spec), StartHash: resources.StartSpecHash(&lost.Spec)},
		{Name: gone.Name, Shard: 0, Phase: fsm.PodPending, Deleting: true, AnnotationsBehind: behind},
	}
	if len(obs.snapshot.Pods) != len(want) {
		t.Fatalf("snapshot pods %+v, want %+v", obs.snapshot.Pods, want)
	}
	for i := range want {
		if !reflect.DeepEqual(obs.snapshot.Pods[i], want[i]) {
			t.Errorf("pod %d: %+v, want %+v", i, obs.snapshot.Pods[i], want[i])
		}
	}
	if len(obs.nodes) != 2 || obs.nodes[joining.Name] == nil || obs.nodes[lost.Name] == nil {
		t.Errorf("nodes %v, want the cluster's two", slices.Collect(func(yield func(string) bool) {
			for k := range obs.nodes {
				if !yield(k) {
					return
				}
			}
		}))
	}
}

// Retiring a node writes the intent (Leaving) before the irreversible delete, and deletes the
// ValkeyNode only: its pod and ConfigMap go by garbage collection.
func TestRetireNodeMarksLeavingThenDeletes(t *testing.T) {
	vc := newTestCluster()
	vn := testNode(vc, "my-cluster-aaaaa", 0, v1.LifecycleActive)
	var calls []string
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(vc, vn).WithInterceptorFuncs(interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if n, ok := obj.(*v1.ValkeyNode); ok {
				calls = append(calls, "update "+n.Name+" "+string(n.Spec.Lifecycle))
			}
			return c.Update(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			calls = append(calls, "delete "+obj.GetName())
			return c.Delete(ctx, obj, opts...)
		},
	}).Build()
	r := &ValkeyClusterReconciler{Client: c, APIReader: c}
	obs := &observation{nodes: map[string]*v1.ValkeyNode{vn.Name: vn}}
	if err := r.retireNode(context.Background(), zap.NewNop(), obs, vn.Name, ""); err != nil {
		t.Fatal(err)
	}
	if want := []string{"update my-cluster-aaaaa Leaving", "delete my-cluster-aaaaa"}; !slices.Equal(calls, want) {
		t.Fatalf("calls %v, want %v", calls, want)
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(vn), &v1.ValkeyNode{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the ValkeyNode is still there: %v", err)
	}
	// Resumed by a restarted operator: the node is already Leaving, or already gone.
	calls = nil
	if err := r.retireNode(context.Background(), zap.NewNop(), obs, vn.Name, ""); err != nil || len(calls) != 1 {
		t.Fatalf("retiring a node that is gone: %v, calls %v", err, calls)
	}
}

// A Joining node that became a full member is written Active and logged once; the scale-out
// join type is cleared, the others stay.
func TestMarkActiveWritesActive(t *testing.T) {
	vc := newTestCluster()
	scaleOut := testNode(vc, "my-cluster-aaaaa", 0, v1.LifecycleJoining)
	scaleOut.Labels[v1.LabelJoinType] = string(v1.JoinTypeShard)
	replacement := testNode(vc, "my-cluster-bbbbb", 0, v1.LifecycleJoining)
	replacement.Labels[v1.LabelJoinType] = string(v1.JoinTypeReplica)
	syncing := testNode(vc, "my-cluster-ccccc", 0, v1.LifecycleJoining)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(vc, scaleOut, replacement, syncing).Build()
	r := &ValkeyClusterReconciler{Client: c, APIReader: c}
	running := func(name string, n *fsm.Node) fsm.Pod {
		return fsm.Pod{Name: name, Phase: fsm.PodRunning, IP: "10.0.0.1", Lifecycle: "Joining", Node: n}
	}
	obs := &observation{
		nodes: map[string]*v1.ValkeyNode{scaleOut.Name: scaleOut, replacement.Name: replacement, syncing.Name: syncing},
		snapshot: fsm.Snapshot{Shards: 1, ReplicasPerShard: 2, Pods: []fsm.Pod{
			running(scaleOut.Name, &fsm.Node{Reachable: true, ClusterStateOK: true, SlotsAssigned: slot.Count, Primary: true, MySlots: slot.Set{{Start: 0, End: 16383}}}),
			running(replacement.Name, &fsm.Node{Reachable: true, ClusterStateOK: true, SlotsAssigned: slot.Count, PrimaryID: "p", LinkUp: true}),
			running(syncing.Name, &fsm.Node{Reachable: true, ClusterStateOK: true, SlotsAssigned: slot.Count, PrimaryID: "p", LinkUp: false}),
		}},
	}
	core, logs := observer.New(zap.InfoLevel)
	if err := upkeepPass(t, r, zap.New(core), vc, obs); err != nil {
		t.Fatal(err)
	}
	get := func(name string) *v1.ValkeyNode {
		var vn v1.ValkeyNode
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: vc.Namespace, Name: name}, &vn); err != nil {
			t.Fatal(err)
		}
		return &vn
	}
	if vn := get(scaleOut.Name); vn.Spec.Lifecycle != v1.LifecycleActive || vn.Labels[v1.LabelJoinType] != "" {
		t.Errorf("scale-out node: %s, labels %v", vn.Spec.Lifecycle, vn.Labels)
	}
	if vn := get(replacement.Name); vn.Spec.Lifecycle != v1.LifecycleActive || vn.Labels[v1.LabelJoinType] != "replica" {
		t.Errorf("replacement node: %s, labels %v", vn.Spec.Lifecycle, vn.Labels)
	}
	if vn := get(syncing.Name); vn.Spec.Lifecycle != v1.LifecycleJoining {
		t.Errorf("a replica still syncing went %s", vn.Spec.Lifecycle)
	}
	var pods []string
	for _, e := range logs.FilterMessage(logging.MsgCompletedJoin).All() {
		pods = append(pods, e.ContextMap()[logging.FieldPod].(string))
	}
	slices.Sort(pods)
	if want := []string{scaleOut.Name, replacement.Name}; !slices.Equal(pods, want) {
		t.Errorf("completed join logged for %v, want %v", pods, want)
	}
}

// Pods and ConfigMaps of a node enqueue their cluster (named by the cluster label); other
// objects with the label do not.
func TestClusterOf(t *testing.T) {
	vc := newTestCluster()
	vn := testNode(vc, "my-cluster-aaaaa", 0, v1.LifecycleActive)
	want := []string{"my-app/my-cluster"}
	names := func(obj client.Object) []string {
		var out []string
		for _, r := range clusterOf(context.Background(), obj) {
			out = append(out, r.String())
		}
		return out
	}
	if got := names(testPod(vc, vn.Name, 0, nodeRef(vn))); !slices.Equal(got, want) {
		t.Errorf("node pod -> %v", got)
	}
	if got := names(resources.BuildNodeConfigMap(vc, vn, "")); !slices.Equal(got, want) {
		t.Errorf("node ConfigMap -> %v", got)
	}
	stranger := testPod(vc, "x", 0, metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "x", Controller: ptrTrue()})
	if got := names(stranger); len(got) != 0 {
		t.Errorf("a pod of a ReplicaSet with the cluster label -> %v", got)
	}
}

func ptrTrue() *bool { b := true; return &b }
