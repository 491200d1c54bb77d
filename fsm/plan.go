package fsm

import (
	"fmt"
	"sort"
)

// ActionKind is one kind of step the controller knows how to execute.
type ActionKind string

// The actions a plan may contain.
const (
	// ActCreatePod creates one new pod for Shard.
	ActCreatePod ActionKind = "CreatePod"
	// ActMeet sends CLUSTER MEET <IP> from Pod's node; NodeID is the id of the node met.
	ActMeet ActionKind = "Meet"
	// ActAddSlots sends CLUSTER ADDSLOTSRANGE Slots to Pod's node.
	ActAddSlots ActionKind = "AddSlots"
	// ActReplicate sends CLUSTER REPLICATE PrimaryID to Pod's node.
	ActReplicate ActionKind = "Replicate"
	// ActForget sends CLUSTER FORGET NodeID to Pod's node.
	ActForget ActionKind = "Forget"
	// ActDeletePod deletes Pod (a Failed pod whose replacement has joined).
	ActDeletePod ActionKind = "DeletePod"
)

// Action is one planned step. Only the fields its Kind names are set.
type Action struct {
	Kind      ActionKind
	Shard     int
	Pod       string
	IP        string
	PrimaryID string
	NodeID    string
	Slots     []SlotRange
}

func (a Action) String() string {
	switch a.Kind {
	case ActCreatePod:
		return fmt.Sprintf("create pod for shard %d", a.Shard)
	case ActMeet:
		return fmt.Sprintf("meet %s from %s", a.IP, a.Pod)
	case ActAddSlots:
		return fmt.Sprintf("add %d slot ranges to %s", len(a.Slots), a.Pod)
	case ActReplicate:
		return fmt.Sprintf("%s replicates %s", a.Pod, a.PrimaryID)
	case ActForget:
		return fmt.Sprintf("%s forgets %s", a.Pod, a.NodeID)
	default:
		return fmt.Sprintf("delete pod %s", a.Pod)
	}
}

// Plan is the ordered list of actions for one pass and, when the plan is waiting on the world,
// why (for logs and status.message).
type Plan struct {
	Actions []Action
	Waiting string
}

// PlanPass returns what to do on this pass for a cluster in state st. The rules, in order:
//
//  1. Invalid: nothing; nothing is ever deleted to make progress.
//  2. Create the missing pods of every shard (idempotent, batched).
//  3. Until every live pod runs with an IP and its node answers, wait: Valkey steps need the
//     whole picture, and an unreachable node is unknown, not gone.
//  4. MEET every node the seed node (first live pod by name) does not know yet (batched).
//  5. Wait until every node knows every other node.
//  6. Forming only: ADDSLOTSRANGE the shard's even share of the 16384 slots to the primary
//     of each shard that serves none, skipping any slot some node already claims, so an
//     operator restarted mid-assignment never assigns a slot twice.
//  7. REPLICATE every other pod of a shard to the shard's primary (batched).
//  8. Active only, one disruptive step per pass: FORGET on every node a slot-less node id that
//     no live pod owns (every live pod answered in rule 3, so such an id belongs to a pod that
//     failed or was deleted); then delete Failed pods whose shard is whole again.
func PlanPass(st State, s Snapshot) Plan {
	if st == Invalid {
		return Plan{}
	}
	var p Plan
	shardPods := s.ShardPods()
	for shard, pods := range shardPods {
		for range s.ReplicasPerShard + 1 - len(pods) {
			p.Actions = append(p.Actions, Action{Kind: ActCreatePod, Shard: shard})
		}
	}
	live := s.LivePods()
	for _, pod := range live {
		switch {
		case pod.Phase != PodRunning || pod.IP == "":
			p.Waiting = "waiting for pod " + pod.Name + " to run"
			return p
		case pod.Node == nil || !pod.Node.Reachable || pod.Node.ID == "":
			p.Waiting = "waiting for node " + pod.Name + " to answer"
			return p
		}
	}
	if len(live) == 0 {
		p.Waiting = "waiting for pods"
		return p
	}
	if meets := planMeets(live); len(meets) > 0 {
		p.Actions = append(p.Actions, meets...)
		p.Waiting = "waiting for nodes to meet"
		return p
	}
	if !fullMesh(live) {
		p.Waiting = "waiting for every node to know every node"
		return p
	}
	if st == Forming || st == Bootstrapping {
		if adds := planSlots(s, shardPods, live); len(adds) > 0 {
			p.Actions = append(p.Actions, adds...)
			p.Waiting = "waiting for slot assignment to propagate"
			return p
		}
	}
	if reps := planReplicas(shardPods); len(reps) > 0 {
		p.Actions = append(p.Actions, reps...)
		p.Waiting = "waiting for replicas to attach"
		return p
	}
	if st == Active {
		if forgets := planForget(live); len(forgets) > 0 {
			p.Actions = append(p.Actions, forgets...)
			return p
		}
		p.Actions = append(p.Actions, planDeleteFailed(s, shardPods)...)
	}
	if !s.Formed() {
		p.Waiting = "waiting for the cluster to agree"
	}
	return p
}

// planMeets: MEET from the seed every node whose id the seed does not know.
func planMeets(live []Pod) []Action {
	seed := live[0]
	var out []Action
	for _, pod := range live[1:] {
		if _, ok := seed.Node.Known[pod.Node.ID]; !ok {
			out = append(out, Action{Kind: ActMeet, Pod: seed.Name, IP: pod.IP, NodeID: pod.Node.ID})
		}
	}
	return out
}

func fullMesh(live []Pod) bool {
	for _, a := range live {
		for _, b := range live {
			if _, ok := a.Node.Known[b.Node.ID]; !ok {
				return false
			}
		}
	}
	return true
}

// planSlots assigns each slot-less shard its even share, minus slots any node already claims.
func planSlots(s Snapshot, shardPods [][]Pod, live []Pod) []Action {
	claimed := make([]bool, TotalSlots)
	for _, pod := range live {
		mark := func(ranges []SlotRange) {
			for _, r := range ranges {
				for slot := max(r.Start, 0); slot <= r.End && slot < TotalSlots; slot++ {
					claimed[slot] = true
				}
			}
		}
		mark(pod.Node.MySlots)
		for _, ranges := range pod.Node.Known {
			mark(ranges)
		}
	}
	spread := EvenSlotSpread(s.Shards)
	var out []Action
	for shard, pods := range shardPods {
		primary := ShardPrimary(pods)
		if primary == nil || len(primary.Node.MySlots) > 0 || primary.Node.PrimaryID != "" {
			continue
		}
		if free := unclaimed(spread[shard], claimed); len(free) > 0 {
			out = append(out, Action{Kind: ActAddSlots, Pod: primary.Name, Slots: free})
		}
	}
	return out
}

func unclaimed(r SlotRange, claimed []bool) []SlotRange {
	var out []SlotRange
	for slot := r.Start; slot <= r.End; slot++ {
		if claimed[slot] {
			continue
		}
		if n := len(out); n > 0 && out[n-1].End == slot-1 {
			out[n-1].End = slot
		} else {
			out = append(out, SlotRange{Start: slot, End: slot})
		}
	}
	return out
}

// planReplicas attaches every non-primary pod of a shard whose primary serves slots.
func planReplicas(shardPods [][]Pod) []Action {
	var out []Action
	for _, pods := range shardPods {
		primary := ShardPrimary(pods)
		if primary == nil || len(primary.Node.MySlots) == 0 {
			continue
		}
		for _, pod := range pods {
			if pod.Name == primary.Name || pod.Node.PrimaryID == primary.Node.ID {
				continue
			}
			if pod.Node.Primary && len(pod.Node.MySlots) > 0 {
				continue // a second primary with slots in one shard is not ours to demote blindly
			}
			out = append(out, Action{Kind: ActReplicate, Pod: pod.Name, PrimaryID: primary.Node.ID})
		}
	}
	return out
}

// planForget picks one node id known to the cluster but owned by no live pod, and forgets it
// on every live node. Only ids without slots are forgotten: a gone primary that still holds
// slots is Valkey's to fail over first.
func planForget(live []Pod) []Action {
	owned := map[string]bool{}
	for _, pod := range live {
		owned[pod.Node.ID] = true
	}
	var gone []string
	for id, slots := range live[0].Node.Known {
		if !owned[id] && len(slots) == 0 {
			gone = append(gone, id)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	sort.Strings(gone)
	var out []Action
	for _, pod := range live {
		if _, ok := pod.Node.Known[gone[0]]; ok {
			out = append(out, Action{Kind: ActForget, Pod: pod.Name, NodeID: gone[0]})
		}
	}
	return out
}

// planDeleteFailed deletes Failed pods of shards that have all their pods live again.
func planDeleteFailed(s Snapshot, shardPods [][]Pod) []Action {
	var out []Action
	for _, pod := range s.Pods {
		if pod.Deleting || (pod.Phase != PodFailed && pod.Phase != PodSucceeded) {
			continue
		}
		if pod.Shard >= 0 && pod.Shard < len(shardPods) && len(shardPods[pod.Shard]) < s.ReplicasPerShard+1 {
			continue
		}
		out = append(out, Action{Kind: ActDeletePod, Pod: pod.Name})
	}
	return out
}
