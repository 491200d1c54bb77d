package harness

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/valkey"
)

// WaitReadyTLS waits until vc is Ready and every one of its n nodes answers over TLS with
// cluster_state:ok, every replica's link up.
func WaitReadyTLS(b testing.TB, vc *v1.ValkeyCluster, ca *CA, n int) {
	b.Helper()
	WaitFor(b, vc.Namespace+"/"+vc.Name+" Ready over TLS", FormTimeout, func() string {
		problem := ""
		var cur v1.ValkeyCluster
		if err := K8s.Get(context.Background(), client.ObjectKeyFromObject(vc), &cur); err != nil {
			problem = err.Error()
		} else if !meta.IsStatusConditionTrue(cur.Status.Conditions, v1.ConditionReady) {
			problem = fmt.Sprintf("not Ready: %s %q", cur.Status.State, cur.Status.Message)
		} else {
			var addrs []string
			for _, p := range Pods(b, vc) {
				addrs = append(addrs, PodAddr(p))
			}
			if len(addrs) != n {
				problem = fmt.Sprintf("%d pods", len(addrs))
			}
			for _, v := range valkey.Observe(context.Background(), addrs, ClusterTLSCreds(b, vc, ca)) {
				me, _ := v.Myself()
				if !v.Reachable || !v.ClusterStateOK() || (me.Role == valkey.RoleReplica && !v.ReplicaLinkUp()) {
					problem = fmt.Sprintf("node %s: reachable %v, %v", v.Addr, v.Reachable, v.Err)
				}
			}
		}
		return problem
	})
}
