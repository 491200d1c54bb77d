package harness

import (
	"context"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// FormTimeout bounds a wait for Active; it is a safety net, not an assertion on speed
// (apply-to-Active times are measured by the benchmark).
const FormTimeout = 5 * time.Minute

// PodNames lists the names of vc's pods, whatever their phase, sorted.
func PodNames(t *testing.T, vc *v1.ValkeyCluster) []string {
	t.Helper()
	var list corev1.PodList
	if err := K8s.List(context.Background(), &list, client.InNamespace(vc.Namespace), client.MatchingLabels{v1.LabelCluster: vc.Name}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	sort.Strings(names)
	return names
}
