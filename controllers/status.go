package controllers

import (
	"k8s.io/apimachinery/pkg/api/equality"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// equalStatus compares two statuses ignoring condition transition times, which
// meta.SetStatusCondition only moves when a condition's status changes.
func equalStatus(a, b *v1.ValkeyClusterStatus) bool {
	if len(a.Conditions) != len(b.Conditions) {
		return false
	}
	ac, bc := a.DeepCopy(), b.DeepCopy()
	for i := range ac.Conditions {
		ac.Conditions[i].LastTransitionTime = bc.Conditions[i].LastTransitionTime
	}
	return equality.Semantic.DeepEqual(ac, bc)
}
