package controllers

import (
	"context"
	"crypto/tls"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/plan"
	"github.com/gomomento/valkey-operator/resources"
	"github.com/gomomento/valkey-operator/valkey"
	"github.com/gomomento/valkey-operator/valkey/valkeytest"
)

// identityNode is a ValkeyNode of vc created at created, recording podUID ("" for none), and its
// pod as the operator builds it (UID "pod-"+name, created at created), running at ip.
func identityNode(vc *v1.ValkeyCluster, name, podUID string, created time.Time, ip string) (*v1.ValkeyNode, *corev1.Pod) {
	vn := testNode(vc, name, 0, v1.LifecycleActive)
	vn.CreationTimestamp = metav1.NewTime(created)
	vn.Status.PodUID = podUID
	pod := resources.BuildPod(vc, newResolved(), vn, "h", v1.ZoneSpreadBestEffort)
	pod.UID = types.UID("pod-" + name)
	pod.CreationTimestamp = metav1.NewTime(created)
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip}
	return vn, pod
}

// TestForeignReason: the pod the node records is the node's; with no record, the pod created with
// its ValkeyNode is (a node from before the record), one created later is not; and the node's pod
// must run its node's image alone.
func TestForeignReason(t *testing.T) {
	vc := newTestCluster()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name    string
		edit    func(vn *v1.ValkeyNode, pod *corev1.Pod)
		foreign string // a part of the reason, "" for the node's own
	}{
		{"recorded", func(vn *v1.ValkeyNode, pod *corev1.Pod) { vn.Status.PodUID = string(pod.UID) }, ""},
		{"another pod than the one recorded", func(vn *v1.ValkeyNode, pod *corev1.Pod) { vn.Status.PodUID = "the-one-created" }, "UID"},
		{"recorded, created long after: still the one recorded", func(vn *v1.ValkeyNode, pod *corev1.Pod) {
			vn.Status.PodUID = string(pod.UID)
			pod.CreationTimestamp = metav1.NewTime(t0.Add(time.Hour))
		}, ""},
		{"no record, created with its node", func(*v1.ValkeyNode, *corev1.Pod) {}, ""},
		{"no record, created 10 s after its node", func(_ *v1.ValkeyNode, pod *corev1.Pod) {
			pod.CreationTimestamp = metav1.NewTime(t0.Add(10 * time.Second))
		}, ""},
		{"no record, a second before its node (clocks)", func(_ *v1.ValkeyNode, pod *corev1.Pod) {
			pod.CreationTimestamp = metav1.NewTime(t0.Add(-time.Second))
		}, ""},
		{"no record, created a minute after its node", func(_ *v1.ValkeyNode, pod *corev1.Pod) {
			pod.CreationTimestamp = metav1.NewTime(t0.Add(time.Minute))
		}, "created 1m0s after"},
		{"no record, created long before its node", func(_ *v1.ValkeyNode, pod *corev1.Pod) {
			pod.CreationTimestamp = metav1.NewTime(t0.Add(-time.Minute))
		}, "created -1m0s after"},
		{"its image changed in place", func(vn *v1.ValkeyNode, pod *corev1.Pod) {
			vn.Status.PodUID = string(pod.UID)
			pod.Spec.Containers[0].Image = "example.com/team/answers-anything:1"
		}, "image"},
		{"a container beside it", func(vn *v1.ValkeyNode, pod *corev1.Pod) {
			pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "x", Image: vn.Spec.Image})
		}, "image"},
	}
	for _, tc := range cases {
		vn, pod := identityNode(vc, "my-cluster-aaaaa", "", t0, "")
		tc.edit(vn, pod)
		got := foreignReason(pod, vn)
		if (tc.foreign == "") != (got == "") || !strings.Contains(got, tc.foreign) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.foreign)
		}
	}
}

// dialLog is a fleet's Dialer that records every address dialled.
type dialLog struct {
	mu    sync.Mutex
	addrs []string
	fleet *valkeytest.Fleet
}

func (d *dialLog) dial(ctx context.Context, addr string, tlsConf *tls.Config) (net.Conn, error) {
	d.mu.Lock()
	d.addrs = append(d.addrs, addr)
	d.mu.Unlock()
	return d.fleet.Dial(ctx, addr, tlsConf)
}

func (d *dialLog) dialled(addr string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Contains(d.addrs, addr)
}

// TestObserveKnowsNodesByRecord: observe takes as a node's only the pod its ValkeyNode records
// (or, with no record, the one created with it); a pod of a node's name that is not that one,
// running with an address, is shown as its node down, never dialled: an impostor, one created
// long after its node, one whose image was changed, and one without the cluster label (found by
// name). A node with no pod at all is lost, as before.
func TestObserveKnowsNodesByRecord(t *testing.T) {
	vc := newTestCluster()
	vc.Status.NodeDetails = []v1.NodeStatus{{Pod: "my-cluster-bbbbb", NodeID: "id-b"}}
	t0 := time.Now().Add(-time.Hour)
	own, ownPod := identityNode(vc, "my-cluster-aaaaa", "pod-my-cluster-aaaaa", t0, "10.0.0.1")
	replaced, impostor := identityNode(vc, "my-cluster-bbbbb", "the-pod-the-operator-made", t0, "10.0.0.2")
	adopted, adoptedPod := identityNode(vc, "my-cluster-ccccc", "", t0, "10.0.0.3")
	adoptedPod.CreationTimestamp = metav1.NewTime(t0.Add(3 * time.Second))
	late, latePod := identityNode(vc, "my-cluster-ddddd", "", t0, "10.0.0.4")
	latePod.CreationTimestamp = metav1.NewTime(t0.Add(10 * time.Minute))
	reimaged, reimagedPod := identityNode(vc, "my-cluster-eeeee", "pod-my-cluster-eeeee", t0, "10.0.0.5")
	reimagedPod.Spec.Containers[0].Image = "example.com/team/answers-anything:1"
	unlabelled, unlabelledPod := identityNode(vc, "my-cluster-fffff", "another", t0, "10.0.0.6")
	unlabelledPod.Labels = nil
	lost := testNode(vc, "my-cluster-ggggg", 0, v1.LifecycleActive)

	fleet := valkeytest.New()
	for i := 1; i <= 6; i++ {
		fleet.Node("10.0.0."+string(rune('0'+i))+":6379").On("CLUSTER NODES", valkeytest.Raw("$-2\r\n"))
	}
	dl := &dialLog{fleet: fleet}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(vc, own, ownPod, replaced, impostor, adopted, adoptedPod,
		late, latePod, reimaged, reimagedPod, unlabelled, unlabelledPod, lost).Build()
	r := &ValkeyClusterReconciler{Client: c, APIReader: c}
	r.conns.Dial = dl.dial
	defer r.conns.Forget(clusterKey(vc))
	obs, err := r.observe(context.Background(), vc, "", "hash", valkey.Credentials{Username: "operator", Password: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]fsm.Pod{}
	for _, p := range obs.snapshot.Pods {
		byName[p.Name] = p
	}
	for _, name := range []string{own.Name, adopted.Name} {
		p := byName[name]
		if p.Foreign != "" || p.IP == "" || obs.pods[name] == nil || !dl.dialled(p.IP+":6379") {
			t.Errorf("%s, the node's own pod: %+v, dialled %v", name, p, dl.dialled(p.IP+":6379"))
		}
	}
	if !byName[adopted.Name].Unrecorded || byName[own.Name].Unrecorded {
		t.Errorf("unrecorded: adopted %v, own %v", byName[adopted.Name].Unrecorded, byName[own.Name].Unrecorded)
	}
	for name, ip := range map[string]string{replaced.Name: "10.0.0.2", late.Name: "10.0.0.4", reimaged.Name: "10.0.0.5", unlabelled.Name: "10.0.0.6"} {
		p := byName[name]
		if p.Foreign == "" || p.Phase != fsm.PodRunning || p.IP != "" || p.Node == nil || p.Node.Reachable || obs.pods[name] != nil {
			t.Errorf("%s, a foreign pod in its place: %+v", name, p)
		}
		if dl.dialled(ip + ":6379") {
			t.Errorf("%s: the foreign pod at %s was dialled", name, ip)
		}
	}
	if p := byName[replaced.Name]; p.LastNodeID != "id-b" || p.ClaimedID() != "id-b" {
		t.Errorf("the node down still claims its last id: %+v", p)
	}
	if p := byName[lost.Name]; p.Phase != fsm.PodFailed || p.Foreign != "" {
		t.Errorf("a node without a pod is lost: %+v", p)
	}
	// What the status says, and that nothing retires the node while the pod stands.
	h := decideHealth(fsm.Active, "", obs.snapshot, plan.Pass(fsm.Active, obs.snapshot))
	if h.Reason != ReasonForeignPod || !strings.Contains(h.Message, "(and 3 more pods)") || h.Outside {
		t.Errorf("health %+v", h)
	}
	for _, a := range plan.Pass(fsm.Active, obs.snapshot).Actions {
		if d, ok := a.(plan.DeletePod); ok && d.Pod != lost.Name {
			t.Errorf("planned %s with a foreign pod in place", a)
		}
	}
}

// TestOwnedNodePodsLeaveForeignOut: the ACL and TLS controllers push only to the pods the nodes
// record.
func TestOwnedNodePodsLeaveForeignOut(t *testing.T) {
	vc := newTestCluster()
	t0 := time.Now()
	own, ownPod := identityNode(vc, "my-cluster-aaaaa", "pod-my-cluster-aaaaa", t0, "10.0.0.1")
	replaced, impostor := identityNode(vc, "my-cluster-bbbbb", "the-pod-the-operator-made", t0, "10.0.0.2")
	got := ownedNodePods([]corev1.Pod{*ownPod, *impostor}, []v1.ValkeyNode{*own, *replaced}, vc)
	if len(got) != 1 || got[0].Name != own.Name {
		t.Fatalf("pods to push to: %v", got)
	}
}

// TestForeignPodPass: whole passes with an impostor in place of the node of a 1x0 cluster,
// answering `$-2` to everything: it is never dialled, the status says so (Ready False, reason
// ForeignPod, status.message naming it), the WARN line names it, nothing is deleted; once it is
// gone the node is replaced, and the new pod is recorded in its ValkeyNode as it is created.
func TestForeignPodPass(t *testing.T) {
	pf := newPassFixture().withCredential("pw")
	vc := pf.vc
	vc.Status.State = v1.StateActive
	vn, impostor := identityNode(vc, "vc-aaaaa", "the-pod-the-operator-made", time.Now().Add(-time.Hour), "10.0.0.9")
	vn.Spec.Image = "valkey/valkey:8.0.1"
	impostor.Spec.Containers[0].Image = "example.com/team/answers-anything:1"
	pf.objects = append(pf.objects, vn, impostor)
	var created []types.UID
	pf.funcs.Create = func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.CreateOption) error {
		if p, ok := o.(*corev1.Pod); ok {
			p.UID = types.UID("uid-of-" + p.Name)
			created = append(created, p.UID)
		}
		return c.Create(ctx, o, opts...)
	}
	r, c := pf.build(t)
	fleet := valkeytest.New()
	fleet.Node("10.0.0.9:6379").On("", valkeytest.Raw("$-2\r\n"))
	dl := &dialLog{fleet: fleet}
	r.conns.Dial = dl.dial
	defer r.conns.Forget("ns/vc")
	for range 2 {
		_, logs, err := reconcileOnce(t, r)
		if err != nil {
			t.Fatal(err)
		}
		if dl.dialled("10.0.0.9:6379") {
			t.Fatal("the impostor was dialled")
		}
		if n := len(logs.FilterMessage(logging.MsgNodePodForeign).All()); n > 1 {
			t.Errorf("%d WARN lines in one pass", n)
		}
	}
	cur := vcFor(t, c)
	ready := meta.FindStatusCondition(cur.Status.Conditions, v1.ConditionReady)
	if ready == nil || ready.Reason != ReasonForeignPod || !strings.Contains(cur.Status.Message, "pod vc-aaaaa is not the pod the operator created") {
		t.Fatalf("status %q, Ready %+v", cur.Status.Message, ready)
	}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(impostor), &corev1.Pod{}); err != nil {
		t.Fatalf("the impostor: %v", err)
	}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(vn), &v1.ValkeyNode{}); err != nil {
		t.Fatalf("the node's ValkeyNode: %v", err)
	}
	if len(created) != 0 {
		t.Fatalf("pods created while the impostor stands: %v", created)
	}
	// Gone: the node is lost, and replaced by a new one whose pod is recorded.
	if err := c.Delete(t.Context(), impostor); err != nil {
		t.Fatal(err)
	}
	if _, _, err := reconcileOnce(t, r); err != nil {
		t.Fatal(err)
	}
	if len(created) != 1 {
		t.Fatalf("pods created once the impostor is gone: %v", created)
	}
	var nodes v1.ValkeyNodeList
	if err := c.List(t.Context(), &nodes, client.InNamespace("ns")); err != nil {
		t.Fatal(err)
	}
	recorded := false
	for _, n := range nodes.Items {
		recorded = recorded || n.Status.PodUID == string(created[0])
	}
	if !recorded {
		t.Errorf("the new pod %s is recorded by none of %+v", created[0], nodes.Items)
	}
}

// TestRecordPodRecordsAdopted: a node from before the record has its pod recorded by the
// bookkeeping (plan.RecordPod), its status alone written.
func TestRecordPodRecordsAdopted(t *testing.T) {
	vc := newTestCluster()
	vn, pod := identityNode(vc, "my-cluster-aaaaa", "", time.Now(), "")
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(vc, vn, pod).WithStatusSubresource(&v1.ValkeyNode{}).
		WithInterceptorFuncs(interceptor.Funcs{Update: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.UpdateOption) error {
			t.Errorf("an update of %s: only the status is written", o.GetName())
			return c.Update(ctx, o, opts...)
		}}).Build()
	r := &ValkeyClusterReconciler{Client: c, APIReader: c}
	obs, err := r.observe(context.Background(), vc, "", "hash", valkey.Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	if err := upkeepPass(t, r, zap.NewNop(), vc, obs); err != nil {
		t.Fatal(err)
	}
	var got v1.ValkeyNode
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(vn), &got); err != nil || got.Status.PodUID != string(pod.UID) {
		t.Fatalf("status %+v, %v", got.Status, err)
	}
}
