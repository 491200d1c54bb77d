package harness

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// WaitNodesActive waits until vc has want ValkeyNodes, all Active, and until (when given) more
// holds; more sees every poll's list. It returns the nodes by name.
func WaitNodesActive(t *testing.T, vc *v1.ValkeyCluster, want int, more func([]v1.ValkeyNode) bool) []v1.ValkeyNode {
	t.Helper()
	var list v1.ValkeyNodeList
	WaitFor(t, fmt.Sprintf("%d Active ValkeyNodes", want), FormTimeout, func() string {
		if err := K8s.List(context.Background(), &list, client.InNamespace(vc.Namespace)); err != nil {
			t.Fatal(err)
		}
		active := 0
		for _, n := range list.Items {
			if n.Spec.Lifecycle == v1.LifecycleActive {
				active++
			}
		}
		done := more == nil || more(list.Items)
		if done && active == want && len(list.Items) == want {
			return ""
		}
		var got []string
		for _, n := range list.Items {
			got = append(got, n.Name+"="+string(n.Spec.Lifecycle))
		}
		return fmt.Sprintf("ValkeyNodes %v, more %v", got, done)
	})
	slices.SortFunc(list.Items, func(a, b v1.ValkeyNode) int { return strings.Compare(a.Name, b.Name) })
	return list.Items
}

// LoggedFor reports whether the operator logged message for a cluster in ns with field pod.
func LoggedFor(t *testing.T, message, ns, pod string) bool {
	t.Helper()
	for _, l := range ParseLog(t, Op.Logs()) {
		if l.Message() == message && strings.HasSuffix(l.Ref(), "."+ns) && l.Fields["pod"] == pod {
			return true
		}
	}
	return false
}
