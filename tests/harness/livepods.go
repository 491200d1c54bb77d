package harness

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// LivePods returns the cluster's pods that are not being deleted, by name.
func LivePods(t testing.TB, vc *v1.ValkeyCluster) map[string]corev1.Pod {
	t.Helper()
	var list corev1.PodList
	if err := K8s.List(context.Background(), &list, client.InNamespace(vc.Namespace), client.MatchingLabels{v1.LabelCluster: vc.Name}); err != nil {
		t.Fatal(err)
	}
	out := map[string]corev1.Pod{}
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out[p.Name] = p
		}
	}
	return out
}
