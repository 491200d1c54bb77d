package plan

// The cleanup planner removes what is gone for good. Both of its actions are disruptive, so it
// plans at most one per pass. Its rules, in order:
//
//  1. Gate: only a cluster formed once (Forming, Active, Upgrading), and only when every live pod
//     runs and its node answered with its id. Forgetting needs every id that live pods own:
//     unknown is not absent, and a node that merely does not answer is never forgotten.
//  2. FORGET, on every live node that knows it, one node id (the first by id) that no live pod
//     owns, that no live replica follows (while one does, Valkey's own failover or the quorum
//     planner must promote it first: forgetting the primary would leave its slots without an
//     owner), and that either every live node knowing it flags `fail`, or is the id of a pod
//     being deleted that serves no slot in any live node's view (a retired replica, a demoted
//     primary drained away): valkey-cli del-node forgets such a node at once too. A node that
//     is not yet gone ignores it: only a MEET adds a node, and FORGET bans the id for 60 s.
//     When the slot holders lost their majority, Valkey cannot flag a dead primary `fail`
//     (a 2-shard cluster that lost a whole shard: one primary's report is not a majority of
//     two; a new empty primary never learns of a node it cannot reach), and its slots would
//     stay claimed by nobody alive for ever. Then `fail?` from every live node that knows it
//     is enough, provided no pod that may still run can own it (a pod being deleted whose
//     container runs, a pod on a lost Kubernetes node): every live pod answered with another
//     id (the gate), so no live process is it.
//  3. Once the cluster is formed and every replica synced, delete one Failed pod, or one pod
//     lost with its Kubernetes node (fsm.Pod.Lost), by name, whose shard is whole again.

import (
	"sort"

	"github.com/gomomento/valkey-operator/fsm"
)

var cleanup = Planner{Name: "cleanup", Gate: gateCleanup, Plan: planCleanup}

func gateCleanup(in Input) string {
	if !formedOnce(in) {
		return "waiting for the cluster to form before cleaning up"
	}
	return in.Snapshot.AllAnswer()
}

func planCleanup(in Input) Step {
	s := in.Snapshot
	if f, ok := planForget(s); ok {
		return Step{Actions: []Action{f}}
	}
	if s.Formed() && s.Synced() {
		if d, ok := planDeleteFailed(s); ok {
			return Step{Actions: []Action{d}}
		}
	}
	return Step{}
}

// planForget picks one node id that rule 2 allows to forget.
func planForget(s fsm.Snapshot) (Forget, bool) {
	live := s.LivePods()
	owned := s.OwnedIDs()
	followed := map[string]bool{}
	for _, pod := range live {
		followed[pod.Node.PrimaryID] = true
	}
	leaving := leavingIDs(s, live)
	noQuorum := !majorityAlive(live, owned)
	var gone []string
	seen := map[string]bool{}
	for _, pod := range live {
		for id := range pod.Node.Known {
			if owned[id] || followed[id] || seen[id] {
				continue
			}
			seen[id] = true
			if leaving[id] || flaggedByAllThatKnow(live, id, false) || (noQuorum && flaggedByAllThatKnow(live, id, true) && !mayRun(s, id)) {
				gone = append(gone, id)
			}
		}
	}
	if len(gone) == 0 {
		return Forget{}, false
	}
	sort.Strings(gone)
	f := Forget{NodeID: gone[0]}
	for _, pod := range live {
		if _, ok := pod.Node.Known[f.NodeID]; ok {
			f.Pods = append(f.Pods, pod.Name)
		}
	}
	return f, true
}

// leavingIDs are the node ids of pods being deleted (by what their node said, or the last status)
// that hold no slot in any live node's view.
func leavingIDs(s fsm.Snapshot, live []fsm.Pod) map[string]bool {
	out := map[string]bool{}
	for _, p := range s.Pods {
		if !p.Deleting {
			continue
		}
		id := p.ClaimedID()
		if id == "" {
			continue
		}
		holds := false
		for _, l := range live {
			holds = holds || len(l.Node.Known[id]) > 0
		}
		if !holds {
			out[id] = true
		}
	}
	return out
}

// flaggedByAllThatKnow reports whether every live node that knows id flags it `fail` (or, with
// suspected, `fail?`: none of them can reach it).
func flaggedByAllThatKnow(live []fsm.Pod, id string, suspected bool) bool {
	for _, pod := range live {
		if _, knows := pod.Node.Known[id]; knows && !pod.Node.Failed[id] && (!suspected || !pod.Node.Suspected[id]) {
			return false
		}
	}
	return true
}

// planDeleteFailed picks the first Failed (or Succeeded, or lost) pod by name whose shard has all its
// pods live again.
func planDeleteFailed(s fsm.Snapshot) (DeletePod, bool) {
	shardPods := s.ShardPods()
	for _, pod := range s.Pods { // sorted by name
		if pod.Deleting || (pod.Phase != fsm.PodFailed && pod.Phase != fsm.PodSucceeded && !pod.Lost()) {
			continue
		}
		if pod.Shard >= 0 && pod.Shard < len(shardPods) && len(shardPods[pod.Shard]) < s.ReplicasPerShard+1 {
			continue
		}
		return DeletePod{Pod: pod.Name}, true
	}
	return DeletePod{}, false
}

// mayRun reports whether a pod outside the live ones may still run the node id: a pod being
// deleted whose container has not exited, or a pod on a lost Kubernetes node, that says (or
// last said) it is id, or whose id is not known at all.
func mayRun(s fsm.Snapshot, id string) bool {
	for _, p := range s.Pods {
		running := (p.Deleting && !p.Exited && p.Phase != fsm.PodFailed && p.Phase != fsm.PodSucceeded) || p.Lost()
		if !running {
			continue
		}
		if claims := p.ClaimedID(); claims == id || claims == "" {
			return true
		}
	}
	return false
}
