package resources

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// The budget is pinned like the pod: its selector must keep matching the pods' labels, and its
// count must stay an integer minAvailable (see controllers/disruption.go for why not maxUnavailable).
func TestBuildDisruptionBudgetGolden(t *testing.T) {
	vc := newTestCluster()
	b := BuildDisruptionBudget(vc, 2, 0)
	golden(t, "pdb.yaml", marshal(t, b))

	if b.Name != "my-cluster-shard-2" || !metav1.IsControlledBy(b, vc) {
		t.Errorf("name %s, owners %v: want my-cluster-shard-2 controlled by the cluster", b.Name, b.OwnerReferences)
	}
	// The selector picks exactly the pods of shard 2 of this cluster, as BuildPod labels them.
	sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	rc := newResolved()
	for shard, want := range map[int]bool{2: true, 1: false} {
		pod := BuildPod(vc, rc, BuildValkeyNode(vc, rc, "my-cluster-00000", shard, ""), "h", v1.ZoneSpreadBestEffort)
		if got := sel.Matches(labels.Set(pod.Labels)); got != want {
			t.Errorf("selector matches a pod of shard %d: %v, want %v", shard, got, want)
		}
	}
	other := newTestCluster()
	other.Name = "my-cluster-2"
	pod := BuildPod(other, rc, BuildValkeyNode(other, rc, "my-cluster-2-00000", 2, ""), "h", v1.ZoneSpreadBestEffort)
	if sel.Matches(labels.Set(pod.Labels)) {
		t.Error("selector matches a pod of another cluster")
	}
	// Every pod that is not a full copy yet raises the count, so that only full copies beyond
	// replicasPerShard may be evicted.
	if got := BuildDisruptionBudget(vc, 2, 1).Spec.MinAvailable; *got != intstr.FromInt32(2) {
		t.Errorf("minAvailable %v with one joining pod, want 2", got)
	}
	// A shard without replicas: its one pod may be evicted once it is a full copy.
	vc.Spec.ReplicasPerShard = 0
	if got := BuildDisruptionBudget(vc, 0, 0).Spec.MinAvailable; *got != intstr.FromInt32(0) {
		t.Errorf("minAvailable %v for replicasPerShard 0, want 0", got)
	}
}
