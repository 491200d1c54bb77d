package plan

// The quorum planner (stability) saves a cluster whose slot-holding primaries lost their
// majority: Valkey then cannot elect a replacement for a lost primary by itself, and the shard
// stays down however long one waits. Its rules, in order:
//
//  1. Only a cluster formed once (Forming, Active, Upgrading). There is no gate on nodes
//     answering: nodes that do not answer are the very case this planner exists for. Every
//     judgement below is made from the views of the nodes that did answer.
//  2. The slot holders are the nodes that hold slots in any reachable node's view. When those
//     that the snapshot finds alive (owned by a live pod that reported its id) are a majority,
//     do nothing: Valkey's own failover promotes a replica.
//  3. Otherwise take the first shard (by shard index) awaiting failover: its primary is owned by
//     no live pod while a reachable replica follows it, and no other reachable node serves its
//     slots already (a replica promoted a pass ago, whose news has not reached the others). Judge that primary gone from what the
//     reachable nodes say, not from pod existence alone: some reachable node flags it `fail` or
//     `fail?`, or every live pod that ever ran reported its id (so none of them is it). A primary
//     that only the operator cannot reach, while its replicas still can, is not gone.
//  4. CLUSTER FAILOVER TAKEOVER on the most up-to-date replica of that primary (largest
//     replication offset, then by name; bestReplica, forTakeover) among those that had synced
//     (offset > 0) and are not Leaving: a replica that never finished its sync holds no data
//     and is never promoted. One takeover per pass; the pass then waits for it. A takeover whose
//     claim would tie with the lost primary's config epoch raises the cluster's first
//     (plan/epoch.go rule 1).

import (
	"fmt"

	"github.com/gomomento/valkey-operator/fsm"
)

var quorum = Planner{Name: "quorum", Plan: planQuorum}

func planQuorum(in Input) Step {
	s := in.Snapshot
	if !formedOnce(in) {
		return Step{}
	}
	live := reachable(s)
	if majorityAlive(live, votingIDs(s, live)) {
		return Step{} // a majority can still elect: Valkey's own failover (or a FORCE) will do it
	}
	for _, w := range s.AwaitingFailover() {
		if !gone(s, live, w.PrimaryID) || promotedAlready(s, w) {
			continue
		}
		if best := bestReplica(live, choice{purpose: forTakeover, primaryID: w.PrimaryID}); best != nil {
			return Step{
				Actions: takeover(live, best, Takeover{Pod: best.Name, PrimaryID: w.PrimaryID, Shard: w.Shard}),
				Wait:    fmt.Sprintf("waiting for the takeover of shard %d", w.Shard),
			}
		}
	}
	return Step{}
}

// promotedAlready reports whether another node serves w's lost primary's slots already, as the
// replica w names still sees them: a replica of it was promoted and w's has not heard yet (a
// takeover lands at once, its news a gossip round later). Taking over a second time would make
// two primaries of the shard.
func promotedAlready(s fsm.Snapshot, w fsm.FailoverWait) bool {
	r := s.Pod(w.Replica)
	if r == nil || r.Node == nil {
		return false
	}
	return servedElsewhere(s, w.PrimaryID, r.Node.Known[w.PrimaryID])
}

// votingIDs are the node ids that can still vote, as far as the snapshot tells: those a
// reachable live pod reports as its own, and those that no reachable node flags `fail` or
// `fail?` while a live pod that ran but did not answer the operator may be them (its last known
// id is that one, or it never reported one). The operator's own connection is not Valkey's: a
// primary that only the operator cannot reach (a slow answer, a one-sided cut) still votes for
// Valkey, and counting it gone would take over a shard while Valkey's majority stands (and the
// old primary still takes writes, lost when it is demoted).
func votingIDs(s fsm.Snapshot, live []fsm.Pod) map[string]bool {
	ids := s.OwnedIDs()
	flagged := map[string]bool{}
	for _, p := range live {
		for id := range p.Node.Failed {
			flagged[id] = true
		}
		for id := range p.Node.Suspected {
			flagged[id] = true
		}
	}
	holders := slotHolders(live)
	for _, p := range s.LivePods() {
		if p.Phase == fsm.PodPending || p.Exited || (p.Node != nil && p.Node.Reachable && p.Node.ID != "") {
			continue
		}
		for id := range holders {
			if !flagged[id] && !ids[id] && (p.LastNodeID == id || p.LastNodeID == "") {
				ids[id] = true
			}
		}
	}
	return ids
}

// reachable are the live pods whose node answered, by name.
func reachable(s fsm.Snapshot) []fsm.Pod {
	var out []fsm.Pod
	for _, p := range s.LivePods() {
		if p.Node != nil && p.Node.Reachable && p.Node.ID != "" {
			out = append(out, p)
		}
	}
	return out
}

// gone reports whether the reachable views say that primary id is down, or whether every live
// pod that ran reported its id (so no live pod can be that primary). Pending pods never ran a
// server: a pod is never restarted in place, so they cannot hold an older id.
func gone(s fsm.Snapshot, live []fsm.Pod, id string) bool {
	for _, p := range live {
		if p.Node.Failed[id] || p.Node.Suspected[id] {
			return true
		}
	}
	for _, p := range s.LivePods() {
		if p.Phase != fsm.PodPending && (p.Node == nil || p.Node.ID == "") {
			return false
		}
	}
	return true
}
