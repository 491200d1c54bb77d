package controllers

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
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
