package fsm

import (
	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/slot"
)

// CompletedJoins returns the pods whose ValkeyNode is Joining and whose node is now a full
// member, by name: the controller moves them to Active. A full member answers, says
// cluster_state:ok with every slot assigned, and is either a primary serving slots or a replica
// whose link to its primary is up (master_link_status:up, which Valkey reports only once the
// initial sync is loaded). A replica that is attached but still syncing holds no usable copy,
// so it stays Joining. In a cluster that announces hostnames, so does a node that does not know
// every live peer's hostname yet, or whose own hostname a live peer does not know yet.
func CompletedJoins(s Snapshot) []string {
	var out []string
	for _, p := range s.LivePods() {
		if p.Lifecycle != string(v1.LifecycleJoining) || p.Phase != PodRunning {
			continue
		}
		n := p.Node
		// cluster_state is ok without every slot served under cluster-require-full-coverage
		// no: a join completes only in a cluster that serves them all (FormedOnce reads it so).
		if n == nil || !n.Reachable || !n.ClusterStateOK || n.SlotsAssigned != slot.Count {
			continue
		}
		if s.HostnameGap(p.Name) != "" {
			continue // a client sent to it, or by it, would get MOVED to "?"
		}
		if (n.Primary && len(n.MySlots) > 0) || (!n.Primary && n.PrimaryID != "" && n.LinkUp) {
			out = append(out, p.Name)
		}
	}
	return out
}

// JoinType says how a node created now for shard joins the cluster, as the
// valkey.gomomento.com/join-type label records it ("" for none). The rules, in order:
//
//  1. Before the cluster was first formed (not Snapshot.FormedOnce), nodes are founding
//     members: no label, even when one replaces a pod lost during bootstrap. A cluster formed
//     once stays so through Invalid: a node created as it comes back replaces a lost one.
//  2. A shard with no pod at all, in any phase, is new to the cluster: shard.
//  3. A shard whose live pods include a reachable primary serving slots gets a replacement
//     replica: replica.
//  4. Otherwise the shard lost its serving primary (a replica may yet be promoted): primary.
func JoinType(s Snapshot, shard int) v1.JoinType {
	if !s.FormedOnce() {
		return ""
	}
	had := false
	for _, p := range s.Pods {
		had = had || p.Shard == shard
	}
	if !had {
		return v1.JoinTypeShard
	}
	if shard >= 0 && shard < s.Shards {
		for _, p := range s.ShardPods()[shard] {
			if n := p.Node; n != nil && n.Reachable && n.Primary && len(n.MySlots) > 0 {
				return v1.JoinTypeReplica
			}
		}
	}
	return v1.JoinTypePrimary
}
