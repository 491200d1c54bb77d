package plan

import (
	"fmt"

	"github.com/gomomento/valkey-operator/fsm"
)

// The misplaced planner retires a node that replicates the primary of another shard than its
// own, when its own shard has no primary serving slots. That happens when a scale-in drains a
// shard's primary and spec.shards is raised again before the drained shard's nodes are retired:
// a primary that gives away its last slot makes itself a replica of the node that took it, and
// its replicas follow (Valkey's cluster-allow-replica-migration, on 8.x and 9.x alike). Such a
// node holds none of its own shard's data (it has none left) and cannot take its slots back, so
// waiting can never help: it goes, one per pass, first by name; the pods planner then creates
// the shard afresh and the reshard planner moves its share of the slots into it. Removing it
// costs nothing: it replicates a primary whose own shard keeps its own replicas.
var misplaced = Planner{Name: "misplaced", Plan: planMisplaced}

// RetireMisplaced is why such a node is retired.
const RetireMisplaced = "replicates another shard's primary after its own shard was drained"

// planMisplaced has no gate of its own (a gate's reason would stand in the status for the later
// planners' own): it acts only on a cluster formed once whose nodes all answer, and is silent
// otherwise.
func planMisplaced(in Input) Step {
	s := in.Snapshot
	if !formedOnce(in) || s.AllAnswer() != "" {
		return Step{}
	}
	live := s.LivePods()
	byID := map[string]fsm.Pod{}
	serving := map[int]bool{} // shards with a primary that serves slots
	for _, p := range live {
		if p.Node == nil {
			continue
		}
		byID[p.Node.ID] = p
		if p.Node.Primary && len(p.Node.MySlots) > 0 {
			serving[p.Shard] = true
		}
	}
	for _, p := range live { // by name
		n := p.Node
		if n == nil || n.Primary || n.PrimaryID == "" || p.Shard < 0 || p.Shard >= s.Shards || serving[p.Shard] {
			continue
		}
		owner, ok := byID[n.PrimaryID]
		if !ok || owner.Shard == p.Shard || !owner.Node.Primary || len(owner.Node.MySlots) == 0 {
			continue
		}
		d := DeletePod{Pod: p.Name, Reason: RetireMisplaced}
		return Step{Actions: []Action{d}, Wait: fmt.Sprintf("shard %d: waiting for %s to leave", p.Shard, p.Name)}
	}
	return Step{}
}
