package resources

import (
	"strconv"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// BuildDisruptionBudget returns the PodDisruptionBudget of shard index shard, owned by vc, for a
// shard of which joining live pods are not full copies yet (why minAvailable, and why it counts
// them: controllers/disruption.go).
func BuildDisruptionBudget(vc *v1.ValkeyCluster, shard int, joining int32) *policyv1.PodDisruptionBudget {
	meta := ObjectMeta(vc, v1.ShardDisruptionBudgetName(vc.Name, shard))
	meta.Labels[v1.LabelShard] = strconv.Itoa(shard)
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: meta,
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(vc.Spec.ReplicasPerShard + joining)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{
				v1.LabelCluster: vc.Name,
				v1.LabelShard:   strconv.Itoa(shard),
			}},
			// A pod that is not Ready (its container not started yet, its Kubernetes node
			// lost) serves nothing: holding its eviction back would stall a drain and
			// protect no data.
			UnhealthyPodEvictionPolicy: ptr.To(policyv1.AlwaysAllow),
		},
	}
}
