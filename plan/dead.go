package plan

// The dead planner (stability) forgets, as soon as nothing depends on it, the node id of a
// Valkey process that Kubernetes says is gone for good. Valkey keeps such a node in every view
// until it is flagged `fail` (cluster-node-timeout and its failure reports later), and lists it
// meanwhile in CLUSTER SHARDS as a healthy member of its shard: a lost primary whose replica was
// promoted stays "master", "online" beside the new primary. Clients that read CLUSTER SHARDS
// take one primary per shard; valkey-go (on Valkey 8 and later) takes the last listed, which is
// the dead one whenever it joined its shard after the replica promoted (a replacement that had
// become primary, a graceful handover's new primary): it then sends the shard's writes to a dead
// address until the flag. Chaos seed 60606 (acl +05:19): a primary killed, its replica promoted
// by the operator 0.3 s later, and the shard refused writes for 7.5 s, until the dead id was
// flagged and forgotten. Its rules, in order:
//
//  1. Only a cluster formed once. No gate on nodes answering: the ids forgotten are those no
//     live process can own, whatever a silent node would say.
//  2. A dead id is the one a pod whose container is gone claims (a Failed pod, a pod whose
//     container exited, a ValkeyNode whose pod is gone from the API): a pod is never restarted
//     in place, so no process ever answers with that id again. No live pod may claim it.
//  3. It is forgotten, on every reachable live node that knows it (one FORGET step, one id per
//     pass, the first by id), once every reachable live node sees it as a primary serving no
//     slot and no reachable live replica follows it: its slots were taken over (by the failover
//     or quorum planner, or by Valkey) and nothing replicates from it. Forgetting a primary still
//     holding slots in some view would leave them owned by nobody there. A dead replica is left
//     to the cleanup planner: a client that reads CLUSTER SHARDS sends it no write.
//
// A node that did not answer keeps the id: the cleanup planner forgets it there once Valkey
// flags it `fail`.

import (
	"sort"

	"github.com/gomomento/valkey-operator/fsm"
)

var dead = Planner{Name: "dead", Plan: planDead}

func planDead(in Input) Step {
	s := in.Snapshot
	if !formedOnce(in) {
		return Step{}
	}
	live := reachable(s)
	claimed := map[string]bool{} // ids live pods claim, answering or not
	for _, p := range s.LivePods() {
		if id := p.ClaimedID(); id != "" {
			claimed[id] = true
		}
	}
	var ids []string
	for _, p := range s.Pods {
		id := p.ClaimedID()
		if id == "" || claimed[id] || (p.Phase != fsm.PodFailed && !p.Exited) {
			continue
		}
		if f, ok := deadForget(live, id); ok && len(f.Pods) > 0 {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return Step{}
	}
	sort.Strings(ids)
	f, _ := deadForget(live, ids[0])
	return Step{Actions: []Action{f}}
}

// deadForget is the FORGET of id on the reachable live nodes that know it, and whether rule 3
// allows it: none sees id serve a slot, none follows it.
func deadForget(live []fsm.Pod, id string) (Forget, bool) {
	f := Forget{NodeID: id}
	for _, p := range live {
		slots, knows := p.Node.Known[id]
		if len(slots) > 0 || (!p.Node.Primary && p.Node.PrimaryID == id) || p.Node.Follows[id] != "" {
			return Forget{}, false
		}
		if knows {
			f.Pods = append(f.Pods, p.Name)
		}
	}
	return f, true
}
