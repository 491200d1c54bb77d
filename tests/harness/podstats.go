package harness

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// PodUIDs returns the UID of every pod of the cluster (deleting ones included), by name: compare
// two with maps.Equal to tell whether a change replaced a pod.
func PodUIDs(t testing.TB, vc *v1.ValkeyCluster) map[string]types.UID {
	t.Helper()
	var list corev1.PodList
	if err := K8s.List(context.Background(), &list, client.InNamespace(vc.Namespace), client.MatchingLabels{v1.LabelCluster: vc.Name}); err != nil {
		t.Fatal(err)
	}
	out := map[string]types.UID{}
	for _, p := range list.Items {
		out[p.Name] = p.UID
	}
	return out
}

// StatsSum sums an INFO stats counter (sync_full: full resyncs a node served as a primary,
// sync_partial_ok, …) over vc's nodes, asked as the default user.
func StatsSum(t testing.TB, vc *v1.ValkeyCluster, field string) int {
	t.Helper()
	n := 0
	for _, p := range Pods(t, vc) {
		c := DefaultUserClient(t, p)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		info, err := c.Do(ctx, c.B().Info().Section("stats").Build()).ToString()
		cancel()
		c.Close()
		if err != nil {
			t.Fatalf("%s: INFO stats: %v", p.Name, err)
		}
		for line := range strings.SplitSeq(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
				x, _ := strconv.Atoi(v)
				n += x
			}
		}
	}
	return n
}
