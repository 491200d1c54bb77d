package plan

import (
	"fmt"

	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/slot"
)

// The misplaced planner brings the cluster's shards, as Valkey sees them, back in line with the
// operator's. A node's shard is its label: its pod's placement, its shard's budget and its
// replacement are all per label. Valkey's view can stray from it: a misplaced replica X (of
// shard a by its label) follows the primary P of another shard b. Valkey puts it there by itself
// when replica migration is on (cluster-allow-replica-migration yes, Valkey's default, which the
// operator keeps: see resources/conf.go): a replica moves to a primary left without working replicas, and when that primary then dies
// the replica promoted in its place serves the slots of a shard it is not labelled with, while
// the shard's own nodes follow it. A scale-in does it too: a primary that gives away its last
// slot makes itself, and its replicas, replicas of the node that took it.
//
// The safety argument: X may hold a copy of P's slots that nothing else holds. The chaos run of
// seed 4242 lost a shard because the one caught-up replica of such a migrated primary was
// retired as the leftover of a drained shard (its own shard had no primary serving slots), and
// the primary, the last copy, was killed next. So X goes only when P keeps, without it, as many
// caught-up replicas as the spec asks for; otherwise X's shard takes P's slots back by a
// graceful failover, which loses no write. Unknown is not absent: a replica that did not answer,
// or is not caught up, is not counted as a copy. Its rules, in order, one disruptive step per
// pass, the first misplaced replica by name:
//
//  1. Only a cluster formed once whose live nodes all answer (the planner is silent otherwise),
//     and not while a failover the operator issued on P is awaited (status.failover).
//  2. Realign: when X's shard has no primary serving slots while P's shard has another one, P
//     serves the slots of X's shard (Valkey promoted a migrated replica). A graceful CLUSTER
//     FAILOVER on X's shard's caught-up replica of P (bestReplica, forMisplaced) with the largest offset (then the first by
//     name) gives them back to the shard; P becomes its replica, which rule 3 then retires.
//  3. Retire: otherwise, when P serves slots and keeps at least replicasPerShard caught-up
//     replicas besides X, X holds no copy the cluster needs (a drained shard's nodes: the reshard
//     planner then moves their shard's share back into a new node), and it is retired; the pods
//     planner gives its shard a new node.
//  4. Hold: otherwise X stays, and the hold is reported while the later planners go on: a
//     replacement replica joins P, or X catches up, and rule 2 or 3 applies then.
//  5. Adopt: a shard a whose every node is gone (its replacements are empty primaries) while a
//     primary P of another shard b, which has another primary serving slots, serves slots of a's
//     even share: P is a's only copy, and no node of a follows it for rule 2 to hand the slots
//     back to. The first empty node of a, by name, replicates P (harmless: it holds nothing);
//     once caught up, rule 2 fails over to it. Without this the cluster sat for good with a's
//     data on a single node, which a routine eviction then took (break test: 2004 of 3000 keys
//     left).
var misplaced = Planner{Name: "misplaced", Plan: planMisplaced}

// RetireMisplaced is why a misplaced replica is retired.
const RetireMisplaced = "replicates another shard's primary, which keeps enough replicas without it"

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
	serving := map[int]int{} // shard -> its live primaries serving slots
	for _, p := range live {
		byID[p.Node.ID] = p
		if p.Node.Primary && len(p.Node.MySlots) > 0 {
			serving[p.Shard]++
		}
	}
	var hold string
	for _, x := range live { // by name
		n := x.Node
		if n.Primary || n.PrimaryID == "" || x.Shard < 0 || x.Shard >= s.Shards {
			continue
		}
		p, ok := byID[n.PrimaryID]
		if !ok || p.Shard == x.Shard || !p.Node.Primary || len(p.Node.MySlots) == 0 {
			continue
		}
		if f := s.Failover; f != nil && f.PrimaryID == p.Node.ID && s.Now.Sub(f.StartedAt) < FailoverRetry {
			return Step{Wait: fmt.Sprintf("shard %d: waiting for the failover to %s", f.Shard, f.Pod)}
		}
		if serving[x.Shard] == 0 && serving[p.Shard] > 1 {
			if best := bestReplica(live, choice{purpose: forMisplaced, primaryID: p.Node.ID, primary: &p, shard: x.Shard}); best != nil {
				if !forceCanWin(reachable(s), *best, p.Node.ID) {
					return Step{Wait: fmt.Sprintf("shard %d: waiting for the primaries to see %s as a replica", x.Shard, best.Name)}
				}
				a := Failover{Pod: best.Name, PrimaryID: p.Node.ID, Shard: x.Shard, Purpose: Realign}
				return Step{Actions: []Action{a}, Wait: fmt.Sprintf("shard %d: waiting for the failover to %s", x.Shard, best.Name)}
			}
			if hold == "" {
				hold = fmt.Sprintf("shard %d: %s serves its slots; waiting for a replica of the shard to catch up with it", x.Shard, p.Name)
			}
			continue
		}
		if caughtUpReplicas(live, p, x.Name) >= s.ReplicasPerShard {
			return retireStep(s, x.Shard, x, RetireMisplaced)
		}
		if hold == "" {
			hold = fmt.Sprintf("shard %d: %s replicates %s of shard %d, which has too few other caught-up replicas to let it go", x.Shard, x.Name, p.Name, p.Shard)
		}
	}
	if hold == "" {
		if a, ok := planAdopt(s, live, serving); ok {
			return Step{Actions: []Action{a}, Wait: fmt.Sprintf("waiting for %s to replicate the node that serves its shard's slots", a.Pod)}
		}
	}
	return Step{Hold: hold}
}

// planAdopt applies rule 5.
func planAdopt(s fsm.Snapshot, live []fsm.Pod, serving map[int]int) (Replicate, bool) {
	spread := slot.EvenSpread(s.Shards)
	for shard := range s.Shards {
		if serving[shard] > 0 {
			continue
		}
		var empty *fsm.Pod
		for i, p := range live { // by name
			if p.Shard != shard {
				continue
			}
			if !p.Node.Primary || len(p.Node.MySlots) > 0 {
				// A node of the shard that follows someone, or serves: not a lost shard.
				if !p.Node.Primary && p.Node.PrimaryID != "" && !emptyPrimary(live, p.Node.PrimaryID) {
					empty = nil
					break
				}
				continue
			}
			if empty == nil {
				empty = &live[i]
			}
		}
		if empty == nil {
			continue
		}
		share := slot.Set{spread[shard]}
		for _, p := range live {
			n := p.Node
			if p.Shard == shard || !n.Primary || len(n.MySlots) == 0 || serving[p.Shard] < 2 {
				continue
			}
			if len(slot.Subtract(share, slot.Subtract(share, n.MySlots))) > 0 {
				return Replicate{Pod: empty.Name, PrimaryID: n.ID}, true
			}
		}
	}
	return Replicate{}, false
}

// emptyPrimary reports whether id is a live primary serving no slot.
func emptyPrimary(live []fsm.Pod, id string) bool {
	for _, p := range live {
		if p.Node.ID == id {
			return p.Node.Primary && len(p.Node.MySlots) == 0
		}
	}
	return false
}

// caughtUpReplicas counts primary's replicas, other than the pod named except, that are caught
// up with it.
func caughtUpReplicas(live []fsm.Pod, primary fsm.Pod, except string) int {
	n := 0
	for _, r := range live {
		if r.Name != except && fsm.CaughtUp(r, primary) {
			n++
		}
	}
	return n
}
