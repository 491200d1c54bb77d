package fsm

import (
	"fmt"
	"sort"
	"strings"
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
	// ActTakeover sends CLUSTER FAILOVER TAKEOVER to Pod's node, a replica of NodeID.
	ActTakeover ActionKind = "Takeover"
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
	case ActTakeover:
		return fmt.Sprintf("%s takes over from %s", a.Pod, a.NodeID)
	default:
		return fmt.Sprintf("delete pod %s", a.Pod)
	}
}

// Plan is the ordered list of actions for one pass and, when the plan is waiting on the world,
// why (for logs and status.message). Blocked is set when the operator refuses to go on until
// something outside it changes (pods that fail on start with the current spec).
type Plan struct {
	Actions []Action
	Waiting string
	Blocked string
}

// MaxFailedPerShard is how many pods of the current spec may fail in one shard before the
// operator stops creating replacements for it: a pod that fails on start (a bad directive in
// the ValkeyConfig) would otherwise be replaced every pass, without end. A new spec (another
// spec hash) or the shard becoming whole again lifts the stop.
const MaxFailedPerShard = 2

// PlanPass returns what to do on this pass for a cluster in state st. The rules, in order:
//
//  1. Invalid: nothing; nothing is ever deleted to make progress.
//  2. Create the missing pods of every shard (idempotent, batched), unless MaxFailedPerShard
//     pods of the current spec already failed in that shard.
//  3. Until every live pod runs with an IP and its node answers, wait: Valkey steps need the
//     whole picture, and an unreachable node is unknown, not gone.
//  4. MEET every node the seed node (first live pod by name) does not know yet (batched).
//  5. Wait until every node knows every other node; meanwhile MEET, from each node, the
//     nodes it does not know yet (harmless, batched): gossip alone took 8 s for 20 nodes.
//  6. ADDSLOTSRANGE the shard's even share of the 16384 slots to the primary of each shard
//     that serves none, skipping any slot some node's view still gives an owner, so an
//     operator restarted mid-assignment never assigns a slot twice, and a shard that lost its
//     only node (no replica, its id forgotten by rule 8) is served again, empty.
//  7. REPLICATE every other pod of a shard to the shard's primary (batched).
//  8. Formed once (Forming or Active), one disruptive step per pass: when the primaries that
//     still hold slots are no majority, Valkey cannot elect: CLUSTER FAILOVER TAKEOVER on the
//     most up-to-date live replica of one shard whose primary is gone. Else FORGET on every node one node id that no
//     pod owns any more, that every live node that knows it flags `fail`, and that no live
//     replica follows (while one does, Valkey's own failover must promote it first; forgetting
//     the primary would leave its slots without an owner); then delete Failed pods whose shard
//     is whole again.
func PlanPass(st State, s Snapshot) Plan {
	if st == Invalid {
		return Plan{}
	}
	var p Plan
	shardPods := s.ShardPods()
	for shard, pods := range shardPods {
		missing := s.ReplicasPerShard + 1 - len(pods)
		if missing <= 0 {
			continue
		}
		failed := s.failedPods(shard)
		if len(failed) >= MaxFailedPerShard {
			p.Blocked = fmt.Sprintf("shard %d: pods %s failed on start (%s); not creating more until the spec changes",
				shard, strings.Join(failedNames(failed), ", "), failed[len(failed)-1].Failure)
			continue
		}
		for range min(missing, MaxFailedPerShard-len(failed)) {
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
			if pod.Node != nil && pod.Node.Err != "" {
				p.Waiting += ": " + pod.Node.Err
			}
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
	if mesh := planMeshMeets(live); len(mesh) > 0 {
		p.Actions = append(p.Actions, mesh...)
		p.Waiting = "waiting for every node to know every node"
		return p
	}
	if adds := planSlots(s, shardPods, live); len(adds) > 0 {
		p.Actions = append(p.Actions, adds...)
		p.Waiting = "waiting for slot assignment to propagate"
		return p
	}
	if reps := planReplicas(shardPods); len(reps) > 0 {
		p.Actions = append(p.Actions, reps...)
		p.Waiting = "waiting for replicas to attach"
		return p
	}
	if st == Active || st == Forming {
		if takeover := planTakeover(s, live); len(takeover) > 0 {
			p.Actions = append(p.Actions, takeover...)
			p.Waiting = "waiting for the takeover"
			return p
		}
		if forgets := planForget(s, live); len(forgets) > 0 {
			p.Actions = append(p.Actions, forgets...)
			return p
		}
		if s.Formed() && s.Synced() {
			p.Actions = append(p.Actions, planDeleteFailed(s, shardPods)...)
		}
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

// planMeshMeets: every node MEETs the nodes it does not know yet.
func planMeshMeets(live []Pod) []Action {
	var out []Action
	for _, a := range live {
		for _, b := range live {
			if _, ok := a.Node.Known[b.Node.ID]; !ok {
				out = append(out, Action{Kind: ActMeet, Pod: a.Name, IP: b.IP, NodeID: b.Node.ID})
			}
		}
	}
	return out
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

// planForget picks one node id that rule 8 allows to forget, and forgets it on every live
// node that knows it.
func planForget(s Snapshot, live []Pod) []Action {
	owned := map[string]bool{}
	for _, pod := range s.Pods {
		if pod.Node != nil && pod.Node.ID != "" && pod.Phase != PodFailed && pod.Phase != PodSucceeded {
			owned[pod.Node.ID] = true
		}
	}
	followed := map[string]bool{}
	for _, pod := range live {
		followed[pod.Node.PrimaryID] = true
	}
	candidates := map[string]bool{}
	for _, pod := range live {
		for id := range pod.Node.Known {
			if !owned[id] && !followed[id] {
				candidates[id] = true
			}
		}
	}
	var gone []string
	for id := range candidates {
		agreed := true
		for _, pod := range live {
			if _, knows := pod.Node.Known[id]; knows && !pod.Node.Failed[id] {
				agreed = false
				break
			}
		}
		if agreed {
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

// planTakeover: when fewer than a majority of the slot-holding primaries are alive, pick the
// first shard awaiting failover and its live replica with the largest replication offset.
func planTakeover(s Snapshot, live []Pod) []Action {
	waits := s.AwaitingFailover()
	if len(waits) == 0 {
		return nil
	}
	owned := map[string]bool{}
	for _, pod := range live {
		owned[pod.Node.ID] = true
	}
	holders := map[string]bool{}
	for _, pod := range live {
		for id, slots := range pod.Node.Known {
			if len(slots) > 0 {
				holders[id] = true
			}
		}
	}
	alive := 0
	for id := range holders {
		if owned[id] {
			alive++
		}
	}
	if alive >= len(holders)/2+1 {
		return nil // a majority can still elect: Valkey's own failover will do it
	}
	w := waits[0]
	var best *Pod
	for i, pod := range live {
		if pod.Node.PrimaryID == w.PrimaryID && !pod.Node.Primary && (best == nil || pod.Node.ReplOffset > best.Node.ReplOffset) {
			best = &live[i]
		}
	}
	if best == nil {
		return nil
	}
	return []Action{{Kind: ActTakeover, Pod: best.Name, NodeID: w.PrimaryID, Shard: w.Shard}}
}

// failedPods are the shard's pods of the current spec that failed on start, by name.
func (s Snapshot) failedPods(shard int) []Pod {
	var out []Pod
	for _, pod := range s.Pods {
		if pod.Shard == shard && pod.Phase == PodFailed && pod.StartFailure && !pod.Deleting && pod.SpecHash == s.SpecHash {
			out = append(out, pod)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func failedNames(pods []Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
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
