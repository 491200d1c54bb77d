package plan

// The upgrade planner (updates) brings the live nodes to what the spec asks for: it replaces
// nodes built from an older spec (a rolling replacement) and removes surplus replicas (replica
// scale-down, and the surge node of a roll), strictly one shard at a time. A replica scale-up
// is the pods planner's: it creates the missing nodes. Its rules, in order:
//
//  1. Only a cluster formed once (Forming, Active, Upgrading).
//     b. A live node already marked Leaving (an operator stopped between marking and deleting
//     it) is retired first, unless it serves slots.
//  2. A live node that never joined (its pod not running, or its ValkeyNode still Joining) and
//     serves no slot is retired first when it was built from an older spec, or when its shard
//     has more live nodes than wanted and none of an older spec: a replacement stuck on a spec
//     the user since reverted or fixed, or a replica added and then scaled away. It holds no
//     data. One per pass; the first by name. A copy moving to another zone (fsm.Pod.MovedFrom,
//     the spread planner) is surplus by design until it has joined: it is retired here only
//     when the scheduler has refused it for MoveRoomWait (RetireNoRoom) or it has not joined
//     MoveJoinBound after its creation (RetireMoveStalled), and not counted as a stalled roll.
//  3. The shard in motion is the first, by index, holding nodes of both the current and an older
//     spec (a roll under way); else the one with the most surplus live nodes (then the first by
//     index); else the first holding a node of an older spec. Only it is acted on.
//  4. Stalls: a node of the current spec in that shard that the scheduler cannot place (the pass
//     waits: status and `bootstrap blocked` give the scheduler's reason), or
//     MaxFailedPerShard pods of the current spec that failed on start there, block the roll
//     with the reason; the old nodes keep serving. Reverting or fixing the spec lifts it (rule 2
//     then removes the stuck node).
//  5. Preflight: the cluster is formed and in agreement, every replica outside the shard in
//     motion has its link up, and in the shard every replica of the current spec is Active and
//     caught up with its primary (fsm.CaughtUp). Outdated replicas of the shard are not waited
//     for: a demoted 8.x primary may never sync from a 9.x one, and it is retired next anyway.
//     When the cluster is not formed nothing is planned, so cleanup can forget a retired node.
//  6. In the shard, with R replicas wanted and L live nodes:
//     a. a replica of an older spec while L > R+1: retire it (the first by name that is not
//     caught up with the primary, else the first by name: never a caught-up copy while a
//     trailing one stays), a demoted Valkey 9 primary MovedHold after its failover, detached
//     from its new primary meanwhile (Detach);
//     b. no node of an older spec while L > R+1: retire the replica a moved copy replaces (in
//     the zone it moved from, fsm.Pod.MovedFrom), else the replica with the smallest
//     replication offset (then the last by name), never the primary;
//     c. the primary of an older spec, every replica of the current spec, L > R+1: exactly one
//     graceful CLUSTER FAILOVER onto the caught-up Active replica in the zone holding fewest of
//     the other shards' primaries, then with the largest offset (then the first by name; bestReplica, forUpgrade); its intent is persisted in status.failover first, and while it is
//     younger than FailoverRetry the pass waits for it to land. Once it has, the new primary
//     serves the slots (preflight) and the old primary is a replica of an older spec (rule a).
//     It waits, first, until enough of the voting primaries see that replica as one of the
//     shard (forceCanWin): a replica that joined a moment ago is known as one only from its own
//     heartbeats, and an election they refuse bars its next one for 4 × cluster-node-timeout;
//     d. a node of an older spec while L <= R+1: create one node of the current spec (it joins
//     as a replica, so the shard never drops below its replica target) and wait for it.

import (
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
)

var upgrade = Planner{Name: "upgrade", Plan: planUpgrade}

// A copy moving to another zone is given up (retired) when the scheduler has refused it for
// MoveRoomWait, time for a cluster autoscaler to add a node to that zone (a scale-up takes a
// minute or two), or when it runs but has not joined MoveJoinBound after its creation. Before,
// the first refusal retired it, and a copy that ran and never joined was kept for good.
const (
	MoveRoomWait  = 5 * time.Minute
	MoveJoinBound = 15 * time.Minute
)

// Why a node is retired, for the log and the action's description.
const (
	RetireStuck    = "never joined and no longer wanted"
	RetireOutdated = "built from an older spec"
	RetireSurplus  = "replica beyond replicasPerShard"
	// RetireInterrupted: the node was marked Leaving and the operator stopped before deleting it.
	RetireInterrupted = "finishing an interrupted retirement"
	// RetireMoved: a copy of the shard created in another zone has caught up (the spread planner).
	RetireMoved = "its shard's copy moved to another zone"
	// RetireNoRoom: a copy created to move its shard to another zone cannot be scheduled there.
	RetireNoRoom = "no room in the zone its copy was moving to"
	// RetireMoveStalled: a copy created to move its shard to another zone runs but has not
	// joined within MoveJoinBound.
	RetireMoveStalled = "its copy moving to another zone did not join in time"
)

func planUpgrade(in Input) Step {
	s := in.Snapshot
	if !formedOnce(in) || s.SpecHash == "" {
		return Step{}
	}
	shardPods := s.ShardPods()
	if p, ok := planFinishLeaving(s); ok {
		d := DeletePod{Pod: p.Name, Reason: RetireInterrupted}
		if !p.ServedAt.IsZero() {
			// A demoted primary this operator detached (Detach marks it Leaving) and held
			// (MovedHold): its retirement is the roll's, not an interrupted one.
			if why := servedRecently(s, p); why != "" {
				return Step{Wait: why}
			}
			if s.Replaced(p) && p.Node.Valkey().HandsOverOnSIGTERM() {
				d.Reason = RetireOutdated // only a 9.x node is held; an 8.x one was interrupted
			}
		}
		return Step{Actions: []Action{d}, Wait: fmt.Sprintf("waiting for %s to leave", d.Pod)}
	}
	if d, ok := planRetireStuck(s, shardPods); ok {
		return Step{Actions: []Action{d}, Wait: fmt.Sprintf("waiting for %s to leave", d.Pod)}
	}
	shard, ok := shardInMotion(s, shardPods)
	if !ok {
		return Step{}
	}
	pods := shardPods[shard]
	if why := unschedulable(s, shard, pods); why != "" {
		return Step{Wait: why}
	}
	if why := failingOnStart(s, shard); why != "" {
		return Step{Blocked: why}
	}
	if !s.Formed() || s.AllAnswer() != "" {
		return Step{}
	}
	primary := fsm.ShardPrimary(pods)
	if why := preflight(s, shard, shardPods, *primary); why != "" {
		return Step{Wait: why}
	}
	var outdatedReplicas []fsm.Pod
	outdatedPrimary := s.Replaced(*primary)
	for _, p := range pods {
		if p.Name != primary.Name && s.Replaced(p) {
			outdatedReplicas = append(outdatedReplicas, p)
		}
	}
	surplus := len(pods) > s.ReplicasPerShard+1
	switch {
	case surplus && len(outdatedReplicas) > 0:
		x := outdatedToRetire(outdatedReplicas, *primary)
		return retireStep(s, shard, x, RetireOutdated)
	case surplus && !outdatedPrimary:
		if x, ok := retireMoved(pods, primary.Name); ok {
			return retireStep(s, shard, x, RetireMoved)
		}
		return retireStep(s, shard, leastCaughtUp(pods, primary.Name), RetireSurplus)
	case surplus && outdatedPrimary:
		if f := s.Failover; f != nil && f.PrimaryID == primary.Node.ID && s.Now.Sub(f.StartedAt) < FailoverRetry {
			return Step{Wait: fmt.Sprintf("shard %d: waiting for the failover to %s", shard, f.Pod)}
		}
		best := bestReplica(pods, choice{purpose: forUpgrade, primaryID: primary.Node.ID, primary: primary, primaries: primaryZones(shardPods, shard)})
		if best == nil {
			return Step{Wait: fmt.Sprintf("shard %d: waiting for an up-to-date replica to catch up", shard)}
		}
		if !forceCanWin(reachable(s), *best, primary.Node.ID) {
			// The handover is an election too: until enough primaries have heard that the new
			// node replicates this shard, they would refuse it their vote, and Valkey would bar
			// its next election for 4 x cluster-node-timeout (a 2x2's roll stalled 24 s so).
			return Step{Wait: fmt.Sprintf("shard %d: waiting for the primaries to see %s as a replica", shard, best.Name)}
		}
		a := Failover{Pod: best.Name, PrimaryID: primary.Node.ID, Shard: shard, Purpose: Roll}
		return Step{Actions: []Action{a}, Wait: fmt.Sprintf("shard %d: waiting for the failover to %s", shard, best.Name)}
	case outdatedPrimary || len(outdatedReplicas) > 0:
		return Step{Actions: []Action{CreatePod{Shard: shard, Avoid: avoidZones(s.Zones, pods)}}, Wait: fmt.Sprintf("shard %d: waiting for an up-to-date replica to join", shard)}
	}
	return Step{}
}

// planFinishLeaving applies rule 1b: a live node whose ValkeyNode is Leaving was being retired
// when the operator stopped between marking it and deleting it; the retirement is finished
// first (the first by name), unless the node serves slots (it was promoted since: then it is
// not what was retired, and the planners above decide). It returns the node to retire.
func planFinishLeaving(s fsm.Snapshot) (fsm.Pod, bool) {
	for _, p := range s.LivePods() {
		if p.Lifecycle == string(v1.LifecycleLeaving) && (p.Node == nil || !p.Node.Reachable || len(p.Node.MySlots) == 0) {
			return p, true
		}
	}
	return fsm.Pod{}, false
}

// joined reports whether p's node ever became a member: its pod runs and its ValkeyNode left
// Joining, or its node serves slots.
func joined(p fsm.Pod) bool {
	if p.Node != nil && p.Node.Reachable && len(p.Node.MySlots) > 0 {
		return true
	}
	return p.Phase == fsm.PodRunning && p.Lifecycle != string(v1.LifecycleJoining)
}

// planRetireStuck applies rule 2.
func planRetireStuck(s fsm.Snapshot, shardPods [][]fsm.Pod) (DeletePod, bool) {
	for _, p := range s.LivePods() { // by name
		if joined(p) || p.Shard < 0 || p.Shard >= len(shardPods) {
			continue
		}
		outdated := s.Replaced(p)
		if p.MovedFrom != "" && !outdated {
			switch {
			case p.Unschedulable != "" && s.Now.Sub(p.UnschedulableSince) >= MoveRoomWait:
				return DeletePod{Pod: p.Name, Reason: RetireNoRoom}, true
			case p.Unschedulable == "" && !p.Created.IsZero() && s.Now.Sub(p.Created) >= MoveJoinBound:
				return DeletePod{Pod: p.Name, Reason: RetireMoveStalled}, true
			}
			continue // a copy moving to another zone: surplus until it has joined
		}
		pods := shardPods[p.Shard]
		if outdated || (len(pods) > s.ReplicasPerShard+1 && !anyOutdated(s, pods)) {
			return DeletePod{Pod: p.Name, Reason: RetireStuck}, true
		}
	}
	return DeletePod{}, false
}

func anyOutdated(s fsm.Snapshot, pods []fsm.Pod) bool {
	for _, p := range pods {
		if s.Replaced(p) {
			return true
		}
	}
	return false
}

// shardInMotion applies rule 3.
func shardInMotion(s fsm.Snapshot, shardPods [][]fsm.Pod) (int, bool) {
	for shard, pods := range shardPods {
		current, outdated := false, false
		for _, p := range pods {
			current = current || !s.Replaced(p)
			outdated = outdated || s.Replaced(p)
		}
		if current && outdated {
			return shard, true
		}
	}
	most, at := 0, -1
	for shard, pods := range shardPods {
		if extra := len(pods) - (s.ReplicasPerShard + 1); extra > most {
			most, at = extra, shard
		}
	}
	if at >= 0 {
		return at, true
	}
	for shard, pods := range shardPods {
		if anyOutdated(s, pods) {
			return shard, true
		}
	}
	return 0, false
}

// unschedulable applies rule 4 to the shard in motion: a replacement the scheduler cannot place.
// The pass waits (the status and the `bootstrap blocked` line name the pod and the scheduler's
// reason); it is not a start failure.
func unschedulable(s fsm.Snapshot, shard int, pods []fsm.Pod) string {
	for _, p := range pods {
		if !s.Replaced(p) && p.Unschedulable != "" && p.MovedFrom == "" {
			return fmt.Sprintf("shard %d: rolling upgrade stalled: pod %s cannot be scheduled: %s", shard, p.Name, p.Unschedulable)
		}
	}
	return ""
}

// failingOnStart applies rule 4 to the shard in motion: pods of the current spec that exit on
// start block the roll.
func failingOnStart(s fsm.Snapshot, shard int) string {
	if failed := failedOnStart(s, shard); len(failed) >= MaxFailedPerShard {
		return fmt.Sprintf("shard %d: rolling upgrade stalled: pods %s failed on start (%s); not creating more until the spec changes",
			shard, strings.Join(failed, ", "), failureOf(s, failed[len(failed)-1]))
	}
	return ""
}

// preflight applies rule 5; "" when the shard may take its next step.
func preflight(s fsm.Snapshot, shard int, shardPods [][]fsm.Pod, primary fsm.Pod) string {
	for i, pods := range shardPods {
		if i == shard {
			continue
		}
		for _, p := range pods {
			if !p.Node.Primary && !p.Node.LinkUp {
				return fmt.Sprintf("waiting for replica %s to sync before the next upgrade step", p.Name)
			}
		}
	}
	for _, p := range shardPods[shard] {
		if p.Name == primary.Name || s.Replaced(p) {
			continue
		}
		if p.Lifecycle != string(v1.LifecycleActive) || !fsm.CaughtUp(p, primary) {
			return fmt.Sprintf("shard %d: waiting for replica %s to sync", shard, p.Name)
		}
	}
	return ""
}

// retireMoved applies rule 6b to a shard with a copy moved to another zone (CreatePod.MovedFrom)
// that has joined and caught up (preflight): the replica it replaces, in the zone it moved from
// (the least caught up there, then the last by name), never the primary nor a moved copy.
func retireMoved(pods []fsm.Pod, primary string) (fsm.Pod, bool) {
	from := map[string]bool{}
	for _, p := range pods {
		if p.MovedFrom != "" && joined(p) {
			from[p.MovedFrom] = true
		}
	}
	var in []fsm.Pod
	for _, p := range pods {
		if p.Name != primary && p.MovedFrom == "" && from[p.Zone] {
			in = append(in, p)
		}
	}
	if len(in) == 0 {
		return fsm.Pod{}, false
	}
	// The primary is not among them: leastCaughtUp's primary "" excludes none.
	return leastCaughtUp(in, ""), true
}

// outdatedToRetire applies rule 6a: the first outdated replica by name that is not caught up
// with the primary, else the first by name. Outdated replicas are not waited for (preflight),
// so one of them may trail (a moved copy that joined just before the spec changed, under
// writes): retiring the first by name could take the one caught-up copy and keep it.
func outdatedToRetire(outdated []fsm.Pod, primary fsm.Pod) fsm.Pod {
	for _, p := range outdated {
		if !fsm.CaughtUp(p, primary) {
			return p
		}
	}
	return outdated[0]
}

// leastCaughtUp is the replica with the smallest replication offset, then the last by name.
func leastCaughtUp(pods []fsm.Pod, primary string) fsm.Pod {
	var replicas []fsm.Pod
	for _, p := range pods {
		if p.Name != primary {
			replicas = append(replicas, p)
		}
	}
	sort.SliceStable(replicas, func(i, j int) bool {
		if a, b := replicas[i].Node.ReplOffset, replicas[j].Node.ReplOffset; a != b {
			return a < b
		}
		return replicas[i].Name > replicas[j].Name
	})
	return replicas[0]
}

// retireStep retires p, a replica of shard, for reason, or first detaches it and waits out
// MovedHold when it served slots a moment ago (servedRecently).
func retireStep(s fsm.Snapshot, shard int, p fsm.Pod, reason string) Step {
	if why := servedRecently(s, p); why != "" {
		return Step{Actions: []Action{Detach{Pod: p.Name}}, Wait: fmt.Sprintf("shard %d: %s", shard, why)}
	}
	return Step{Actions: []Action{DeletePod{Pod: p.Name, Reason: reason}}, Wait: fmt.Sprintf("shard %d: waiting for %s to leave", shard, p.Name)}
}

// MovedHold is how long a node that handed its slots over (a failover, a slot move) is kept before
// it is deleted, so that clients still sending it requests for them learn the new owner from its
// MOVED answers, not from dialling an address that is gone: measured, a Valkey 9 primary of a
// removed shard deleted 65 ms after its last slots moved left two of them refusing writes for
// 1.2 s, the writer's dials to the vanished pod IP timing out. A Valkey 8 pod's preStop hook holds
// every deleted pod 5 s already (resources/probe.go); a Valkey 9 pod has no hook (it hands over
// by itself on SIGTERM), so the hold is the operator's.
const MovedHold = 3 * time.Second

// servedRecently says why p, next to be retired, is kept a little longer (MovedHold), "" when it
// may go: it runs Valkey 9 or later, serves no slot now, and this operator saw it serve slots, or
// hand them over, less than MovedHold ago (fsm.Pod.ServedAt; unknown after a restart, when the
// lease alone took longer).
func servedRecently(s fsm.Snapshot, p fsm.Pod) string {
	if p.Node == nil || !p.Node.Valkey().HandsOverOnSIGTERM() || p.ServedAt.IsZero() || len(p.Node.MySlots) > 0 {
		return ""
	}
	if left := MovedHold - s.Now.Sub(p.ServedAt); left > 0 {
		return fmt.Sprintf("waiting %s for clients to learn from %s where its slots went", left.Round(100*time.Millisecond), p.Name)
	}
	return ""
}
