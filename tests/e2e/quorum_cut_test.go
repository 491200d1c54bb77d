package e2e

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/valkey"
)

// TestQuorumLossByNetworkCut: the network of two of three primaries is cut while their pods keep
// running. One primary of three cannot elect, and the operator cannot reach the two: it must
// judge them gone from what the reachable nodes say and issue TAKEOVER (it used to wait for every
// node to answer, and the cluster stayed down for as long as the cut lasted). The cut nodes are
// never forgotten. Once the network is back the cluster is Ready with every acknowledged key.
func TestQuorumLossByNetworkCut(t *testing.T) {
	ns := "cut"
	vc := activeCluster(t, ns, 3, 1)
	verifyValkey(t, vc, 3, 1)
	keys := writeAcknowledged(t, vc, 300)

	var cur v1.ValkeyCluster
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(vc), &cur); err != nil {
		t.Fatal(err)
	}
	cut := map[string]bool{}
	for _, n := range cur.Status.Nodes {
		if n.Role == v1.NodeRolePrimary && len(cut) < 2 {
			cut[n.Pod] = true
		}
	}
	for p := range cut {
		if err := cluster.Kubelet.CutPodNetwork(ns, p); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cluster.Kubelet.RestorePodNetwork(ns, p) })
	}
	cutAt := time.Now()

	// The reachable nodes serve every slot again while the two stay cut.
	var reachable []string
	for _, p := range clusterPods(t, vc) {
		if !cut[p.Name] {
			reachable = append(reachable, addr(p))
		}
	}
	creds := operatorCreds(t, vc)
	for {
		ok := 0
		for _, v := range valkey.Observe(context.Background(), reachable, creds) {
			if v.Reachable && v.ClusterStateOK() {
				ok++
			}
		}
		if ok == len(reachable) && logged(t, "no quorum \u2014 issued TAKEOVER on replica", ns) {
			break
		}
		if time.Since(cutAt) > 2*time.Minute {
			t.Fatalf("two of three primaries cut: %d of %d reachable nodes say cluster_state:ok after %s, TAKEOVER logged: %v",
				ok, len(reachable), time.Since(cutAt), logged(t, "no quorum \u2014 issued TAKEOVER on replica", ns))
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("serving again %s after the cut", time.Since(cutAt).Round(100*time.Millisecond))
	if logged(t, "forgetting node", ns) {
		t.Fatal("a node that was only unreachable was forgotten")
	}

	for p := range cut {
		if err := cluster.Kubelet.RestorePodNetwork(ns, p); err != nil {
			t.Fatal(err)
		}
	}
	healed := waitHealed(t, vc, "", 6)
	verifyValkey(t, healed, 3, 1)
	readBack(t, healed, keys)
}
