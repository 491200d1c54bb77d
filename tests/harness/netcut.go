package harness

import (
	"context"
	"fmt"
	"slices"
	"sync"
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
	// TiedEpochs, before the cut, gives the primary of the lowest shard cut and its replica one
	// config epoch, the cluster's largest (TieEpochs): the replica's TAKEOVER would claim the slots
	// at the lost primary's own epoch unless the operator raises the cluster's epoch first.
	TiedEpochs bool
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
	nodeCreds := creds(vc)
	if c.TiedEpochs {
		first := v1.NodeStatus{Shard: -1}
		for _, n := range cur.Status.NodeDetails {
			if cut[n.Pod] && (first.Shard < 0 || n.Shard < first.Shard) {
				first = n
			}
		}
		TieEpochs(t, vc, nodeCreds, first.Shard)
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
	if c.TiedEpochs && !Logged(t, "bumping config epoch", ns) {
		t.Fatal("the takeover's claim would have tied with the lost primary's epoch, and no `bumping config epoch` was logged")
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

// TieEpochs gives shard's primary and its replica (of a 3×1 cluster's status) one config epoch,
// larger than any other node's: the state an epoch collision between two empty primaries leaves
// when one of them is made the other's replica before Valkey settled it (Valkey settles
// collisions between primaries only), which formation met in CI (a522f5f). Made here by CLUSTER
// BUMPEPOCH: on a third node until it holds the largest epoch, then, once the two know it, on
// both at once, before gossip tells either of the other's bump. Retried when gossip was faster.
func TieEpochs(t testing.TB, vc *v1.ValkeyCluster, creds valkey.Credentials, shard int32) {
	t.Helper()
	ctx := context.Background()
	addr := map[string]string{}
	for _, p := range Pods(t, vc) {
		addr[p.Name] = PodAddr(p)
	}
	var pair, ids []string
	third := ""
	for _, n := range CurrentCluster(t, vc).Status.NodeDetails {
		if n.Shard == shard {
			pair, ids = append(pair, addr[n.Pod]), append(ids, n.NodeID)
		} else if third == "" {
			third = addr[n.Pod]
		}
	}
	if len(pair) != 2 || third == "" {
		t.Fatalf("shard %d: nodes %v and a third %q, want a primary, its replica and another node", shard, pair, third)
	}
	dial := func(a string) *valkey.Client {
		c, err := valkey.NewClient(a, creds)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	x, a, b := dial(third), dial(pair[0]), dial(pair[1])
	for try := 1; ; try++ {
		var top uint64
		for {
			e, bumped, err := x.BumpEpoch(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if top = e; !bumped {
				break
			}
		}
		WaitFor(t, fmt.Sprintf("shard %d's nodes to learn epoch %d", shard, top), 30*time.Second, func() string {
			ea, erra := a.CurrentEpoch(ctx)
			eb, errb := b.CurrentEpoch(ctx)
			if erra == nil && errb == nil && ea >= top && eb >= top {
				return ""
			}
			return fmt.Sprintf("current epochs %d (%v), %d (%v)", ea, erra, eb, errb)
		})
		var got [2]uint64
		var errs [2]error
		var wg sync.WaitGroup
		for i, c := range []*valkey.Client{a, b} {
			wg.Go(func() { got[i], _, errs[i] = c.BumpEpoch(ctx) })
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			t.Fatal(errs[0], errs[1])
		}
		if got[0] == got[1] {
			// Every node must know the tie before the cut: one that still holds the primary's
			// older epoch would take the replica's claim.
			var list []string
			for _, a := range addr {
				list = append(list, a)
			}
			WaitFor(t, fmt.Sprintf("every node to see shard %d's two nodes at config epoch %d", shard, got[0]), 30*time.Second, func() string {
				for _, v := range valkey.Observe(ctx, list, creds) {
					n := 0
					for _, e := range v.Nodes {
						if slices.Contains(ids, e.ID) && e.ConfigEpoch == got[0] {
							n++
						}
					}
					if !v.Reachable || n != 2 {
						return fmt.Sprintf("%s sees %d of the two at it (reachable %v)", v.Addr, n, v.Reachable)
					}
				}
				return ""
			})
			t.Logf("shard %d's primary and replica share config epoch %d, the cluster's largest (try %d)", shard, got[0], try)
			return
		}
		if try == 5 {
			t.Fatalf("shard %d: five simultaneous bumps gave different epochs (last %v)", shard, got)
		}
	}
}
