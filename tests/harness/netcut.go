package harness

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/valkey"
)

// CutCluster is one flavour of TestQuorumLossByNetworkCut's cluster: how to make it, how to
// talk to its nodes and how to check it once healed.
type CutCluster struct {
	Name string
	// make creates an Active 3×1 cluster in ns and returns it, the credentials its nodes
	// answer, the writer's options and the check of the healed cluster.
	Make func(t testing.TB, ns string) (vc *v1.ValkeyCluster, creds func(*v1.ValkeyCluster) valkey.Credentials, writer WriterOptions, verify func(*v1.ValkeyCluster))
}

// CutLasting is how long the chaos suite's cut of two primaries lasted (seed 20261201) when the
// operator never issued TAKEOVER: a TAKEOVER must come within it.
const CutLasting = 15 * time.Second

// CutTimings is what one cut measured, from the cut.
type CutTimings struct{ Takeover, Serving, Longest time.Duration }

// QuorumLossByNetworkCut cuts the network of a majority of c's primaries under a writer and
// checks the takeover and that every acknowledged key survives; it returns what it measured.
func QuorumLossByNetworkCut(t testing.TB, ns string, c CutCluster) CutTimings {
	vc, creds, wopts, verify := c.Make(t, ns)
	// WAIT 1 after every write: every key acknowledged before the cut is on a replica, and so
	// must survive the takeover. The writer also measures how long each slot refused writes.
	w, err := StartWriter(wopts)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.WaitAcked(50, 30*time.Second); err != nil {
		t.Fatal(err)
	}

	var cur v1.ValkeyCluster
	if err := K8s.Get(context.Background(), client.ObjectKeyFromObject(vc), &cur); err != nil {
		t.Fatal(err)
	}
	cut := map[string]bool{}
	for _, n := range cur.Status.NodeDetails {
		if n.Role == v1.NodeRolePrimary && len(cut) < 2 {
			cut[n.Pod] = true
		}
	}
	for p := range cut {
		if err := Cluster.Kubelet.CutPodNetwork(ns, p); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = Cluster.Kubelet.RestorePodNetwork(ns, p) })
	}
	cutAt := time.Now()

	// The reachable nodes serve every slot again while the two stay cut.
	var reachable []string
	for _, p := range Pods(t, vc) {
		if !cut[p.Name] {
			reachable = append(reachable, PodAddr(p))
		}
	}
	nodeCreds := creds(vc)
	const takeover = "no quorum \u2014 issued TAKEOVER on replica"
	var tookOver time.Duration
	for {
		if tookOver == 0 && Logged(t, takeover, ns) {
			tookOver = time.Since(cutAt)
		}
		ok := 0
		for _, v := range valkey.Observe(context.Background(), reachable, nodeCreds) {
			if v.Reachable && v.ClusterStateOK() {
				ok++
			}
		}
		if ok == len(reachable) && tookOver > 0 {
			break
		}
		if tookOver == 0 && time.Since(cutAt) > CutLasting {
			t.Fatalf("two of three primaries cut: no TAKEOVER logged %s after the cut, longer than the chaos suite's cut (%s): the operator did not act while it lasted",
				time.Since(cutAt).Round(100*time.Millisecond), CutLasting)
		}
		if time.Since(cutAt) > 2*time.Minute {
			t.Fatalf("two of three primaries cut: %d of %d reachable nodes say cluster_state:ok after %s, TAKEOVER logged: %v",
				ok, len(reachable), time.Since(cutAt), tookOver > 0)
		}
		time.Sleep(500 * time.Millisecond)
	}
	serving := time.Since(cutAt)
	t.Logf("TAKEOVER logged %s after the cut; serving again %s after the cut",
		tookOver.Round(100*time.Millisecond), serving.Round(100*time.Millisecond))
	if Logged(t, "forgetting node", ns) {
		t.Fatal("a node that was only unreachable was forgotten")
	}

	for p := range cut {
		if err := Cluster.Kubelet.RestorePodNetwork(ns, p); err != nil {
			t.Fatal(err)
		}
	}
	healed := WaitHealed(t, vc, "", 6)
	verify(healed)
	read := wopts
	if wopts.TLS == nil {
		read = ClusterWriterOptions(t, healed, wopts.Prefix)
	}
	r := ReadBackWriter(t, w, read)
	longest, _ := r.LongestRefusal()
	return CutTimings{Takeover: tookOver, Serving: serving, Longest: longest}
}
