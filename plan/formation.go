package plan

// The formation planner (topology) builds the Valkey cluster out of running pods, and brings
// replacements into it. Its rules, in order; each batches its harmless actions and the pass then
// waits for them to take effect:
//
//  1. Gate: every live pod runs with an IP and its node answers. Meet and slot assignment need
//     the whole picture: an unreachable node is unknown, not gone.
//  2. MEET from the seed every node the seed does not know yet and is not already in the
//     handshake with. The seed is the node that knows the most nodes (then the first by name):
//     on a new cluster the first pod, when a replacement joins a formed cluster an old member,
//     so each node is introduced once.
//  3. Until every node knows every other node, MEET from each node the nodes it does not know
//     yet (harmless; gossip alone took 8 s for 20 nodes). These mesh meets only speed things up.
//  4. ADDSLOTSRANGE the shard's even share of the 16384 slots to the primary of each shard that
//     serves none, minus any slot some node's view still gives an owner: an operator restarted
//     mid-assignment never assigns a slot twice, and a shard that lost its only node (its id
//     forgotten by cleanup) is served again, empty. In a cluster that was formed once (Active,
//     Upgrading, or status.formedAt set: see servedOnce) that assignment is a data loss, and
//     the action says so (AddSlots.Lost): on a formed cluster slots are only ever free because
//     every node that held them is gone, however it got there (pods lost while it was Active,
//     or while it was Invalid). Forming is not such a state: it is where the first assignment
//     happens. Slots no node claims
//     outside those shares (a shard that died holding slots moved into it) go, lost too, to the
//     primary of the shard whose even share holds them.
//  5. REPLICATE every other pod of a shard to the shard's primary, once that primary serves
//     slots, or at once in a fresh shard (every node an empty primary: a shard being added),
//     which must have its replicas before slots move into it. A second slot-holding primary in
//     one shard is not demoted blindly.

import (
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/slot"
)

var formation = Planner{Name: "formation", Gate: gateFormation, Plan: planFormation}

func gateFormation(in Input) string { return in.Snapshot.AllAnswer() }

func planFormation(in Input) Step {
	s := in.Snapshot
	live := s.LivePods()
	if meets, underway := planMeets(live); len(meets) > 0 || underway {
		return Step{Actions: meets, Wait: "waiting for nodes to meet"}
	}
	if mesh := planMeshMeets(live); len(mesh) > 0 {
		return Step{Actions: mesh, Wait: "waiting for every node to know every node"}
	}
	shardPods := s.ShardPods()
	if adds := planSlots(servedOnce(in), s, shardPods, live); len(adds) > 0 {
		return Step{Actions: adds, Wait: "waiting for slot assignment to propagate"}
	}
	if reps := planReplicas(shardPods); len(reps) > 0 {
		return Step{Actions: reps, Wait: "waiting for replicas to attach"}
	}
	return Step{}
}

// seed is the live node that knows the most nodes, the first by name among equals.
func seed(live []fsm.Pod) fsm.Pod {
	best := live[0]
	for _, p := range live[1:] {
		if len(p.Node.Known) > len(best.Node.Known) {
			best = p
		}
	}
	return best
}

// planMeets: MEET from the seed every node whose id the seed does not know, unless a MEET to it
// is already under way (the seed is in the handshake with its address); underway reports those.
func planMeets(live []fsm.Pod) (out []Action, underway bool) {
	from := seed(live)
	for _, pod := range live {
		if _, ok := from.Node.Known[pod.Node.ID]; ok || pod.Name == from.Name {
			continue
		}
		if from.Node.Meeting[pod.IP] {
			underway = true
			continue
		}
		out = append(out, Meet{Pod: from.Name, IP: pod.IP, NodeID: pod.Node.ID})
	}
	return out, underway
}

// planMeshMeets: every node MEETs the nodes it does not know yet.
func planMeshMeets(live []fsm.Pod) []Action {
	var out []Action
	for _, a := range live {
		for _, b := range live {
			if _, ok := a.Node.Known[b.Node.ID]; !ok {
				out = append(out, Meet{Pod: a.Name, IP: b.IP, NodeID: b.Node.ID, Mesh: true})
			}
		}
	}
	return out
}

// planSlots assigns each slot-less shard its even share, minus the slots any node claims; in a
// cluster that served every slot once (lost, see servedOnce) those slots are flagged lost.
func planSlots(lost bool, s fsm.Snapshot, shardPods [][]fsm.Pod, live []fsm.Pod) []Action {
	var claimed []slot.Set
	for _, pod := range live {
		claimed = append(claimed, pod.Node.MySlots)
		for _, ranges := range pod.Node.Known {
			claimed = append(claimed, ranges)
		}
	}
	taken := slot.Union(claimed...)
	spread := slot.EvenSpread(s.Shards)
	primaries := primaryZones(shardPods, -1)
	var out []Action
	for shard, pods := range shardPods {
		primary := formationPrimary(pods, primaries)
		if primary == nil || len(primary.Node.MySlots) > 0 || primary.Node.PrimaryID != "" {
			continue
		}
		if free := slot.Subtract(slot.Set{spread[shard]}, taken); len(free) > 0 {
			out = append(out, AddSlots{Pod: primary.Name, Shard: shard, Slots: free, Lost: lost})
			primaries[primary.Zone]++
		}
	}
	if len(out) > 0 || !lost {
		return out
	}
	// Slots no node claims in a formed cluster, outside every slot-less shard's share: a shard
	// that lost every copy of its data held them beyond its own share (slots moved into it
	// before it died), and its ids were forgotten. Nobody else will ever serve them, so each goes
	// to the primary of the shard whose even share holds it; resharding then evens the spread.
	orphans := slot.Subtract(slot.Set{{Start: 0, End: slot.Count - 1}}, taken)
	for shard, pods := range shardPods {
		primary := fsm.ShardPrimary(pods)
		if primary == nil || primary.Node.PrimaryID != "" {
			continue
		}
		if mine := slot.Subtract(slot.Set{spread[shard]}, slot.Subtract(slot.Set{spread[shard]}, orphans)); len(mine) > 0 {
			out = append(out, AddSlots{Pod: primary.Name, Shard: shard, Slots: mine, Lost: true})
		}
	}
	return out
}

// planReplicas attaches every non-primary pod of a shard whose primary serves slots.
func planReplicas(shardPods [][]fsm.Pod) []Action {
	var out []Action
	primaries := primaryZones(shardPods, -1)
	for _, pods := range shardPods {
		primary := formationPrimary(pods, primaries)
		if primary != nil && len(primary.Node.MySlots) == 0 {
			primaries[primary.Zone]++
		}
		if primary == nil || (len(primary.Node.MySlots) == 0 && !freshShard(pods)) {
			continue
		}
		for _, pod := range pods {
			if pod.Name == primary.Name || pod.Node.PrimaryID == primary.Node.ID {
				continue
			}
			if pod.Node.Primary && len(pod.Node.MySlots) > 0 {
				continue // a second primary with slots in one shard is not ours to demote blindly
			}
			out = append(out, Replicate{Pod: pod.Name, PrimaryID: primary.Node.ID})
		}
	}
	return out
}

// primaryZones counts, by zone, the shards' primaries that serve slots, every shard's but skip's
// (-1: none skipped).
func primaryZones(shardPods [][]fsm.Pod, skip int) map[string]int {
	m := map[string]int{}
	for shard, pods := range shardPods {
		if p := fsm.ShardPrimary(pods); shard != skip && p != nil && len(p.Node.MySlots) > 0 {
			m[p.Zone]++
		}
	}
	return m
}

// formationPrimary is the node that is, or is to become, the shard's primary: fsm.ShardPrimary,
// except in a shard whose every node is an empty primary that nobody follows (a new cluster, a
// shard being added), where it is the node in the zone holding fewest primaries so far (then the
// first by name), so that a cluster starts with its primaries spread over zones rather than
// moving them there by failovers once Active (plan/spread.go). primaries counts by zone.
func formationPrimary(pods []fsm.Pod, primaries map[string]int) *fsm.Pod {
	p := fsm.ShardPrimary(pods)
	if p == nil || len(p.Node.MySlots) > 0 {
		return p
	}
	for _, q := range pods {
		if n := q.Node; n == nil || !n.Reachable || !n.Primary || n.PrimaryID != "" || len(n.MySlots) > 0 {
			return p
		}
		for _, r := range pods {
			if r.Node.PrimaryID == q.Node.ID {
				return p
			}
		}
	}
	best := p
	for i := range pods {
		if primaries[pods[i].Zone] < primaries[best.Zone] {
			best = &pods[i]
		}
	}
	return best
}

// freshShard reports whether a shard is being added and holds no data yet: every pod's node
// answered and is either a primary serving no slot and following no one, or a replica of such a
// primary of the same shard. Replicating one of these nodes to another loses nothing. A replica
// that still follows a primary outside the shard (a lost one: it may hold the shard's data) makes
// the shard not fresh.
func freshShard(pods []fsm.Pod) bool {
	if len(pods) == 0 {
		return false
	}
	empty := map[string]bool{}
	for _, p := range pods {
		if n := p.Node; n != nil && n.Reachable && n.ID != "" && n.Primary && n.PrimaryID == "" && len(n.MySlots) == 0 {
			empty[n.ID] = true
		}
	}
	for _, p := range pods {
		n := p.Node
		if n == nil || !n.Reachable || n.ID == "" || (!empty[n.ID] && (n.Primary || !empty[n.PrimaryID])) {
			return false
		}
	}
	return true
}
