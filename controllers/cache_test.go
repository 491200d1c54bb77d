package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fanout"
	"github.com/gomomento/valkey-operator/resources"
)

// TestListNodePodsByIndex: the pods of one cluster come from the cluster index; another
// cluster's pods in the namespace, and a pod with the cluster's label that no ValkeyNode of it
// controls, are not among them.
func TestListNodePodsByIndex(t *testing.T) {
	rc := &resources.ResolvedConfig{Image: v1.ValkeyImageSpec{Repository: "valkey/valkey", Tag: "8.0.1"}}
	mine := newPassFixture().vc
	other := mine.DeepCopy()
	other.Name, other.UID = "other", "0d7a3f3c-0000-4000-8000-0000000000bb"
	var objs []client.Object
	for _, vc := range []*v1.ValkeyCluster{mine, other} {
		for _, name := range []string{vc.Name + "-a", vc.Name + "-b"} {
			vn := resources.BuildValkeyNode(vc, rc, name, 0, "")
			objs = append(objs, vn, resources.BuildPod(vc, rc, vn, "h", v1.ZoneSpreadBestEffort))
		}
	}
	stray := &corev1.Pod{}
	stray.Name, stray.Namespace, stray.Labels = "vc-stray", "ns", map[string]string{v1.LabelCluster: "vc"}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(append(objs, stray)...).
		WithIndex(&corev1.Pod{}, IndexByCluster, clusterLabel).WithIndex(&v1.ValkeyNode{}, IndexByCluster, clusterLabel).Build()
	pods, err := listNodePods(t.Context(), c, mine)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"vc-a", "vc-b"}) {
		t.Fatalf("pods of vc: %v, want vc-a and vc-b", names)
	}
}

// inflated gives m what a team can put on any object it labels: big annotations, many labels,
// many owner references and finalizers.
func inflated(m *metav1.ObjectMeta) {
	big := strings.Repeat("x", 200<<10)
	m.Annotations = map[string]string{"team/blob": big, v1.AnnotationReplicationUser: "replication"}
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	for i := range 500 {
		m.Labels[fmt.Sprintf("team/l%d", i)] = strings.Repeat("v", 63)
	}
	for i := range 100 {
		m.OwnerReferences = append(m.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: fmt.Sprintf("o%d", i), UID: types.UID(fmt.Sprint(i))})
		m.Finalizers = append(m.Finalizers, fmt.Sprintf("team/f%d", i))
	}
}

// TestCacheKeepsWhatIsRead: every kind the caches select by the cluster label (a team can set
// it on anything) is transformed to what the operator reads of it, so an object inflated with
// 200 KiB of annotations, 500 labels and 100 owner references costs the cache under 1 KiB. With
// only the default transform (managed fields stripped) it kept the rest.
func TestCacheKeepsWhatIsRead(t *testing.T) {
	labelled := map[string]bool{}
	rc := &resources.ResolvedConfig{Image: v1.ValkeyImageSpec{Repository: "valkey/valkey", Tag: "8.0.1"}}
	vc := newPassFixture().vc
	nodePod := resources.BuildPod(vc, rc, resources.BuildValkeyNode(vc, rc, "vc-a", 0, ""), "h", v1.ZoneSpreadBestEffort)
	metaOf := func(kind string) *metav1.PartialObjectMetadata {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
		m.Name, m.Namespace, m.Labels = "vc-x", "ns", map[string]string{v1.LabelCluster: "vc"}
		return m
	}
	stray := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "stray", Namespace: "ns", Labels: map[string]string{v1.LabelCluster: "vc"}},
		Spec: *nodePod.Spec.DeepCopy()}
	objects := map[string]struct {
		obj  any
		meta *metav1.ObjectMeta
	}{
		"node pod":  {nodePod, &nodePod.ObjectMeta},
		"other pod": {stray, &stray.ObjectMeta},
		"ConfigMap": {metaOf("ConfigMap"), nil},
		"Secret":    {metaOf("Secret"), nil},
		"Service":   {resources.BuildService(vc), nil},
		"budget":    {resources.BuildDisruptionBudget(vc, 0, 0), nil},
	}
	for name, o := range objects {
		m := o.meta
		if m == nil {
			switch x := o.obj.(type) {
			case *metav1.PartialObjectMetadata:
				m = &x.ObjectMeta
			case *corev1.Service:
				m = &x.ObjectMeta
			case *policyv1.PodDisruptionBudget:
				m = &x.ObjectMeta
			}
		}
		inflated(m)
		objects[name] = o
	}
	transforms := map[string]func(any) (any, error){}
	opts := CacheOptions()
	for obj, by := range opts.ByObject {
		kind := fmt.Sprintf("%T", obj)
		if by.Label != nil {
			labelled[kind] = true
		}
		transforms[kind] = by.Transform
	}
	for name, o := range objects {
		kind := fmt.Sprintf("%T", o.obj)
		if p, ok := o.obj.(*metav1.PartialObjectMetadata); ok {
			kind = "*v1." + p.Kind // the metadata watches use the ByObject of their kind
		}
		if !labelled[kind] {
			t.Errorf("%s: %s is not selected by the cluster label", name, kind)
			continue
		}
		tr := transforms[kind]
		if tr == nil {
			tr = opts.DefaultTransform // what the cache applies then
		}
		got, err := tr(o.obj)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 1<<10 {
			t.Errorf("%s: %d bytes kept in the cache, want under 1 KiB: %s", name, len(b), b[:min(len(b), 300)])
		}
		if m, err := meta.Accessor(got); err != nil || m.GetName() == "" || m.GetLabels()[v1.LabelCluster] != "vc" {
			t.Errorf("%s: name or cluster label lost: %v", name, got)
		}
	}
}

// TestStripPodKeepsWhatIsRead: what the cache keeps of a node's pod answers every reader of the
// cache as the whole pod does (the ACL and TLS controllers' targets and addresses,
// legacyReplication's annotation, the index, the event handler, the owner check); another pod
// with the cluster label is in no index and enqueues nothing.
func TestStripPodKeepsWhatIsRead(t *testing.T) {
	rc := &resources.ResolvedConfig{Image: v1.ValkeyImageSpec{Repository: "valkey/valkey", Tag: "8.0.1"}}
	vc := newPassFixture().vc
	vn := resources.BuildValkeyNode(vc, rc, "vc-a", 0, "")
	vn.UID = "0d7a3f3c-0000-4000-8000-0000000000cc"
	started := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	pods := []*corev1.Pod{}
	for _, st := range []corev1.PodStatus{
		{Phase: corev1.PodRunning, PodIP: "10.244.0.7", ContainerStatuses: []corev1.ContainerStatus{{Name: "valkey", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}}},
		{Phase: corev1.PodRunning, PodIP: "10.244.0.8", ContainerStatuses: []corev1.ContainerStatus{{Name: "valkey", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}},
		{Phase: corev1.PodRunning, PodIP: "10.244.0.9", ContainerStatuses: []corev1.ContainerStatus{{Name: "valkey", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: strings.Repeat("m", 4096)}}}}},
		{Phase: corev1.PodFailed},
	} {
		p := resources.BuildPod(vc, rc, vn, "h", v1.ZoneSpreadBestEffort)
		p.Status = st
		inflated(&p.ObjectMeta)
		p.OwnerReferences = append(p.OwnerReferences, *metav1.NewControllerRef(vn, v1.GroupVersion.WithKind("ValkeyNode")))
		pods = append(pods, p)
	}
	stray := pods[0].DeepCopy()
	stray.Name = "stray"
	pods = append(pods, stray)
	for i, p := range pods {
		obj, err := stripPod(p)
		if err != nil {
			t.Fatal(err)
		}
		s := obj.(*corev1.Pod)
		if got, want := metav1.IsControlledBy(s, vn), metav1.IsControlledBy(p, vn) && nodePod(p); got != want {
			t.Errorf("pod %d: controlled by its node %v, want %v", i, got, want)
		}
		if got, want := nodePodCluster(s), nodePodCluster(p); !slices.Equal(got, want) {
			t.Errorf("pod %d: index %v, want %v", i, got, want)
		}
		if got, want := clusterOf(t.Context(), s), clusterOf(t.Context(), p); p.Name != "stray" && !slices.Equal(got, want) {
			t.Errorf("pod %d: enqueues %v, want %v", i, got, want)
		}
		if p.Name == "stray" {
			if got := clusterOf(t.Context(), s); len(got) != 0 || len(nodePodCluster(s)) != 0 {
				t.Errorf("a pod that is no node's is indexed or enqueues: %v", got)
			}
			continue
		}
		now := time.Now()
		gt, gs := fanout.Targets([]corev1.Pod{*s}, resources.ClientPort, now)
		wt, ws := fanout.Targets([]corev1.Pod{*p}, resources.ClientPort, now)
		if gs != ws || len(gt) != len(wt) || (len(gt) == 1 && gt[0].Addr != wt[0].Addr) {
			t.Errorf("pod %d: targets %v %v, want %v %v", i, gt, gs, wt, ws)
		}
		if got, want := podAddrs([]corev1.Pod{*s}), podAddrs([]corev1.Pod{*p}); !maps.Equal(got, want) {
			t.Errorf("pod %d: addresses %v, want %v", i, got, want)
		}
		if got := s.Annotations[v1.AnnotationReplicationUser]; got != p.Annotations[v1.AnnotationReplicationUser] {
			t.Errorf("pod %d: replication user %q", i, got)
		}
		if s.UID != p.UID || s.ResourceVersion != p.ResourceVersion || s.Status.Phase != p.Status.Phase {
			t.Errorf("pod %d: identity or phase lost", i)
		}
		if got, want := foreignReason(s, vn), foreignReason(p, vn); got != want {
			t.Errorf("pod %d: foreign %q, want %q", i, got, want)
		}
		if got, want := resources.TLSFileParams(s), resources.TLSFileParams(p); !maps.Equal(got, want) {
			t.Errorf("pod %d: TLS files %v, want %v", i, got, want)
		}
	}
}

// TestListPodsBounded: a namespace where a team labelled 500 pods with the cluster's label,
// named to come first, and an API server that pages (a continuation past the limit): the pass
// reads one page and the cluster's own pods by name, and gets exactly those.
func TestListPodsBounded(t *testing.T) {
	f := newPassFixture().withPod("vc-a", "10.244.0.7").withPod("vc-b", "10.244.0.8")
	for i := range 500 {
		f.objects = append(f.objects, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("a-team-%03d", i), Namespace: "ns", Labels: map[string]string{v1.LabelCluster: "vc"}}})
	}
	// A pod of a node's name without the label is not the cluster's, as for the list.
	f.objects = append(f.objects, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "vc-c", Namespace: "ns"}})
	listed, gets := 0, 0
	f.funcs.List = func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		lo := (&client.ListOptions{}).ApplyOptions(opts)
		if err := c.List(ctx, list, opts...); err != nil {
			return err
		}
		if pl, ok := list.(*corev1.PodList); ok && lo.Limit > 0 && int64(len(pl.Items)) > lo.Limit {
			pl.Items, pl.Continue = pl.Items[:lo.Limit], "more"
		}
		if pl, ok := list.(*corev1.PodList); ok {
			listed += len(pl.Items)
		}
		return nil
	}
	f.funcs.Get = func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if _, ok := obj.(*corev1.Pod); ok {
			gets++
		}
		return c.Get(ctx, key, obj, opts...)
	}
	r, _ := f.build(t)
	vc := f.vc.DeepCopy()
	vc.Status.Nodes = v1.NodeNames{"vc-c"}
	nodes, err := r.observeNodes(t.Context(), vc)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := listPods(t.Context(), r.APIReader, vc, podNames(vc, nodes))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, []string{"vc-a", "vc-b"}) {
		t.Errorf("pods %v, want vc-a and vc-b", names)
	}
	if want := 3 + podListSlack; listed != want || gets != 3 {
		t.Errorf("read %d pods by list and %d by name, want one page of %d and 3", listed, gets, want)
	}
}

// TestStripServiceKeepsPortsAndSelector: what the cache keeps of the cluster's own Service reads
// as up to date (resources.ServiceBehind), or every pass patches it again (CI, 2026-12-07: 42
// "updating headless Service ports and selector" lines in 45 s after an operator upgrade); one
// of an older operator reads as behind; a team's labelled Service with a large spec keeps no spec.
func TestStripServiceKeepsPortsAndSelector(t *testing.T) {
	vc := newPassFixture().vc
	got, err := stripService(resources.BuildService(vc))
	if err != nil {
		t.Fatal(err)
	}
	if resources.ServiceBehind(vc, got.(*corev1.Service)) {
		t.Errorf("the operator's own Service reads as behind after the cache transform: %+v", got.(*corev1.Service).Spec)
	}
	old := resources.BuildService(vc)
	old.Spec.Selector = map[string]string{v1.LabelCluster: vc.Name}
	old.Spec.Ports[0].Name, old.Spec.Ports[1].Name = "client", "bus"
	got, _ = stripService(old)
	if !resources.ServiceBehind(vc, got.(*corev1.Service)) {
		t.Errorf("an older operator's Service reads as up to date after the cache transform")
	}
	big := resources.BuildService(vc)
	for i := range 100 {
		big.Spec.Ports = append(big.Spec.Ports, corev1.ServicePort{Name: fmt.Sprintf("p%d", i), Port: int32(1000 + i)})
	}
	got, _ = stripService(big)
	if s := got.(*corev1.Service); len(s.Spec.Ports) != 0 || len(s.Spec.Selector) != 0 {
		t.Errorf("a Service of 102 ports kept %d ports and %d selector keys", len(s.Spec.Ports), len(s.Spec.Selector))
	}
}
