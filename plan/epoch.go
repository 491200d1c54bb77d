package plan

// The epochs planner (stability) and the takeover's epoch rule. A CLUSTER FAILOVER TAKEOVER
// makes a replica a primary without a vote and claims its shard's slots with the replica's config
// epoch; every other node accepts the claim only if that epoch is larger than the one the slots'
// owner holds in its view. Valkey bumps the replica's config epoch on TAKEOVER only when it is not
// already the largest epoch the replica knows, its current epoch included
// (clusterBumpConfigEpochWithoutConsensus). Valkey settles an epoch collision between two
// primaries only, so two nodes that collided while both were empty primaries keep the same epoch
// once one of them is made the other's replica. When that epoch is the largest the replica knows,
// its TAKEOVER claims the slots with the lost primary's very epoch, every other node keeps the lost
// primary as the slots' owner, and the shard stays down until the lost primary comes back. CI
// met it (a522f5f, TestQuorumLossByNetworkCut): formation left a replica and its primary on epoch
// 4, the largest; with two of three primaries cut, the TAKEOVER on that replica left 3 of the 4
// reachable nodes `cluster_state:fail` for the two minutes the test waited.
//
// Rules:
//
//  1. A TAKEOVER on a replica whose claim would tie with its lost primary's (claimTies) is
//     preceded by a CLUSTER BUMPEPOCH on another reachable node that Valkey will bump (raiser):
//     the cluster's current epoch rises past the tie, gossip carries it to the replica, and the
//     TAKEOVER, sent once the replica has it (Takeover.AfterEpoch), bumps the replica's epoch
//     past every other. No other node to raise it: the TAKEOVER goes alone, and rule 2 repairs.
//  2. Only a cluster formed once. A reachable primary whose claim on its slots a reachable node
//     rejects for a tie (in that node's view a node it flags failing owns some of those slots at
//     the primary's own epoch: a takeover before rule 1, or whose wait ran out) gets a CLUSTER
//     BUMPEPOCH, or, when Valkey would not bump it (its epoch is the largest it knows), another
//     reachable node does first and the next pass bumps the primary. The pass waits meanwhile.

import (
	"fmt"

	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/slot"
)

var epochs = Planner{Name: "epochs", Plan: planEpochs}

func planEpochs(in Input) Step {
	if !formedOnce(in) {
		return Step{}
	}
	live := reachable(in.Snapshot)
	for _, r := range live {
		if !r.Node.Primary || len(r.Node.MySlots) == 0 {
			continue
		}
		owner, ok := tiedOwner(live, r)
		if !ok {
			continue
		}
		wait := fmt.Sprintf("waiting for %s's claim on its slots to win over %s's equal config epoch", r.Name, owner)
		if bumps(r.Node) {
			return Step{Actions: []Action{BumpEpoch{Pod: r.Name, Reason: EpochClaimTied}}, Wait: wait}
		}
		if via := raiser(live, r.Name); via != "" {
			return Step{Actions: []Action{BumpEpoch{Pod: via, Reason: EpochClaimTied}}, Wait: wait}
		}
		return Step{Wait: wait}
	}
	return Step{}
}

// tiedOwner returns the id of a node that some reachable node other than r flags failing and
// sees owning some of r's slots at r's own config epoch: r's claim does not win there (rule 2).
func tiedOwner(live []fsm.Pod, r fsm.Pod) (string, bool) {
	e := r.Node.Epochs[r.Node.ID]
	for _, o := range live {
		if o.Name == r.Name {
			continue
		}
		for id, slots := range o.Node.Known {
			if id == r.Node.ID || (!o.Node.Failed[id] && !o.Node.Suspected[id]) {
				continue
			}
			if oe, ok := o.Node.Epochs[id]; ok && oe == e && len(slot.Intersect(slots, r.Node.MySlots)) > 0 {
				return id, true
			}
		}
	}
	return "", false
}

// maxEpoch is the largest epoch n knows: its current epoch or a node's config epoch.
func maxEpoch(n *fsm.Node) uint64 {
	m := n.CurrentEpoch
	for _, e := range n.Epochs {
		m = max(m, e)
	}
	return m
}

// bumps reports whether Valkey raises n's config epoch on a BUMPEPOCH or a TAKEOVER sent to it:
// when it is 0 or not the largest epoch n knows.
func bumps(n *fsm.Node) bool {
	e := n.Epochs[n.ID]
	return e == 0 || e != maxEpoch(n)
}

// claimTies reports whether a TAKEOVER on n, a replica of primaryID, would claim the slots at the
// lost primary's own config epoch (rule 1), and that epoch.
func claimTies(n *fsm.Node, primaryID string) (uint64, bool) {
	if n == nil || bumps(n) {
		return 0, false
	}
	e := n.Epochs[n.ID]
	pe, ok := n.Epochs[primaryID]
	return e, ok && pe == e
}

// raiser is the first reachable node (by name) other than except whose config epoch Valkey
// raises on a BUMPEPOCH, raising the cluster's current epoch with it; "" when there is none.
func raiser(live []fsm.Pod, except string) string {
	for _, p := range live {
		if p.Name != except && bumps(p.Node) {
			return p.Name
		}
	}
	return ""
}

// takeover returns the actions of the takeover t on replica r: t alone, or after a BUMPEPOCH
// that raises the cluster's epoch past the tie its claim would meet (rule 1).
func takeover(live []fsm.Pod, r *fsm.Pod, t Takeover) []Action {
	if e, tie := claimTies(r.Node, t.PrimaryID); tie {
		if via := raiser(live, r.Name); via != "" {
			t.AfterEpoch = e
			return []Action{BumpEpoch{Pod: via, Reason: EpochBeforeTakeover}, t}
		}
	}
	return []Action{t}
}
