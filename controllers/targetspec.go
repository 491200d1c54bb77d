package controllers

import (
	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
)

// The bootstrap's target, status.targetSpec, as the original keeps it
// (concepts/reconciliation.md, reference/cluster-status.md):
//
//  1. A cluster not yet formed (no status.formedAt) that bootstraps (Bootstrapping, Forming, or
//     a new cluster with no state yet) works toward status.targetSpec's shards and
//     replicasPerShard, copied from spec the first time a pass finds none.
//  2. An edit of spec.shards or spec.replicasPerShard meanwhile changes nothing until the
//     cluster is Active: then targetSpec is cleared, and the next pass reads spec (a reshard or
//     a replica change, as on any formed cluster). Forming toward a topology that changes under
//     it could leave slots assigned to a shard that is then drained, or a replica attached to a
//     primary of a shard that goes away, before the cluster ever served.
//  3. Invalid keeps the target as it was (a cluster Invalid before it had one has none; it gets
//     one when it bootstraps again). A formed cluster never has one.
//  4. Only the topology is copied: every other field is read live, as the original does, and
//     spec.acl (password hashes) stays out of status.

// bootstrapTarget is the target a pass of vc works toward (rule 1), nil when the cluster
// follows its live spec.
func bootstrapTarget(vc *v1.ValkeyCluster) *v1.TargetSpec {
	if vc.Status.FormedAt != nil {
		return nil
	}
	switch vc.Status.State {
	case fsm.Active, fsm.Upgrading:
		return nil
	case fsm.Invalid:
		return vc.Status.TargetSpec
	}
	if t := vc.Status.TargetSpec; t != nil {
		return t
	}
	return topologyOf(&vc.Spec)
}

// topologyOf is the part of spec that targetSpec holds (rule 4).
func topologyOf(spec *v1.ValkeyClusterSpec) *v1.TargetSpec {
	return &v1.TargetSpec{ConfigRef: spec.ConfigRef, Shards: spec.Shards, ReplicasPerShard: spec.ReplicasPerShard}
}

// setTargetSpec writes the pass's target into st, the status it writes with state: the target
// the pass worked toward while bootstrapping (a copy of spec's topology if it had none), nothing
// once the cluster is formed, as it was while Invalid. Pure.
func setTargetSpec(st *v1.ValkeyClusterStatus, vc *v1.ValkeyCluster, state fsm.State) {
	switch {
	case st.FormedAt != nil || state == fsm.Active || state == fsm.Upgrading:
		st.TargetSpec = nil
	case state == fsm.Bootstrapping || state == fsm.Forming:
		if t := bootstrapTarget(vc); t != nil {
			st.TargetSpec = t.DeepCopy()
		} else {
			st.TargetSpec = topologyOf(&vc.Spec)
		}
	}
}
