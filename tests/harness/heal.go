package harness

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// PodWithRole returns a pod whose node has role, from status.nodeDetails.
func PodWithRole(t testing.TB, vc *v1.ValkeyCluster, role v1.NodeRole) string {
	t.Helper()
	var cur v1.ValkeyCluster
	if err := K8s.Get(context.Background(), client.ObjectKeyFromObject(vc), &cur); err != nil {
		t.Fatal(err)
	}
	for _, n := range cur.Status.NodeDetails {
		if n.Role == role {
			return n.Pod
		}
	}
	t.Fatalf("no %s in status.nodeDetails %+v", role, cur.Status.NodeDetails)
	return ""
}

// WaitHealed waits until the cluster is Ready again with `want` running pods, none of them
// victim, and no Failed pod left.
func WaitHealed(t testing.TB, vc *v1.ValkeyCluster, victim string, want int) *v1.ValkeyCluster {
	t.Helper()
	var cur v1.ValkeyCluster
	WaitFor(t, "healed after killing "+victim, FormTimeout, func() string {
		var pods corev1.PodList
		err1 := K8s.Get(context.Background(), client.ObjectKeyFromObject(vc), &cur)
		err2 := K8s.List(context.Background(), &pods, client.InNamespace(vc.Namespace), client.MatchingLabels{v1.LabelCluster: vc.Name})
		if err := errors.Join(err1, err2); err != nil {
			return err.Error()
		}
		running, others := 0, 0
		for _, p := range pods.Items {
			if p.Name == victim {
				others++
			} else if p.Status.Phase == corev1.PodRunning {
				running++
			} else {
				others++
			}
		}
		if running == want && others == 0 && cur.Status.State == v1.StateActive && meta.IsStatusConditionTrue(cur.Status.Conditions, v1.ConditionReady) && int(cur.Status.ReadyNodes) == want {
			return ""
		}
		return fmt.Sprintf("state %s, message %q, %d pods", cur.Status.State, cur.Status.Message, len(pods.Items))
	})
	return &cur
}

// WriteAcknowledged writes n keys through a cluster client and waits, per key, until a replica
// acknowledged it (WAIT 1), so the data survives the loss of its primary.
func WriteAcknowledged(t *testing.T, vc *v1.ValkeyCluster, n int) map[string]string {
	t.Helper()
	ctx := context.Background()
	pods := Pods(t, vc)
	c, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: []string{PodAddr(pods[0])}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	keys := map[string]string{}
	for i := range n {
		k, v := fmt.Sprintf("heal:{%d}:k", i), strconv.Itoa(i*7)
		// SET and WAIT go to the same node because they share the hash tag's slot.
		res := c.DoMulti(ctx, c.B().Set().Key(k).Value(v).Build(), c.B().Wait().Numreplicas(1).Timeout(5000).Build())
		for _, r := range res {
			if err := r.Error(); err != nil {
				t.Fatalf("SET/WAIT %s: %v", k, err)
			}
		}
		if acked, _ := res[1].AsInt64(); acked < 1 {
			t.Fatalf("WAIT for %s: %d replicas acknowledged", k, acked)
		}
		keys[k] = v
	}
	return keys
}

// ReadBack reads every key of keys through a cluster client and fails t on a missing or
// different value.
func ReadBack(t *testing.T, vc *v1.ValkeyCluster, keys map[string]string) {
	t.Helper()
	pods := Pods(t, vc)
	c, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: []string{PodAddr(pods[len(pods)-1])}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for k, v := range keys {
		got, err := c.Do(context.Background(), c.B().Get().Key(k).Build()).ToString()
		if err != nil || got != v {
			t.Fatalf("GET %s: %q, %v (want %q)", k, got, err, v)
		}
	}
}

// Logged reports whether the operator's log has a line with message for a cluster in ns.
func Logged(t testing.TB, message, ns string) bool {
	t.Helper()
	return !LoggedAt(t, message, ns).IsZero()
}

// LoggedAt is when the operator first logged a line with message for a cluster in ns, the zero
// time if it has not.
func LoggedAt(t testing.TB, message, ns string) time.Time {
	t.Helper()
	for _, l := range ParseLog(t, Op.Logs()) {
		if l.Message() == message && strings.HasSuffix(l.Ref(), "."+ns) {
			at, err := time.Parse(time.RFC3339Nano, l.Timestamp)
			if err != nil {
				t.Fatalf("log timestamp %q: %v", l.Timestamp, err)
			}
			return at
		}
	}
	return time.Time{}
}
