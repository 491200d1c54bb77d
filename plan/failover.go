package plan

// The failover planner (stability) replaces a primary that Kubernetes says is gone at once,
// instead of waiting for Valkey's failure detection (cluster-node-timeout), and hands over the
// slots of a primary whose pod is being deleted before its process stops. Its rules, in order:
//
//  1. Only a cluster formed once (Forming, Active, Upgrading). There is no gate on nodes
//     answering: every judgement is made from the nodes that answered and from Kubernetes.
//  2. A lost primary is a node id P that a reachable live replica follows, that holds slots in
//     that replica's view, and that no reachable live pod reports as its own id, while no
//     other reachable node serves those slots itself (a replica of P promoted already, which
//     P's other replicas have not heard of yet). Shards are
//     taken in index order, one failover per pass.
//  3. No second failover: while status.failover records a failover for P younger than
//     FailoverRetry, the pass waits for it, except:
//     a. its replica is a primary serving slots now: it landed, whatever the other replicas of P
//     still say; the next lost primary is looked at;
//     b. its replica's pod is gone (not live): it can never land; a replica is chosen again;
//     c. a graceful one (a rolling upgrade's, a drained primary's) whose primary's container is
//     gone since can never land: it is not waited for;
//     d. a FORCE whose replica still follows P forceUnlanded after it was issued did not take
//     (the executor takes over after FailoverCheck itself; this is for a pass that ended before
//     it could, an operator killed in between): TAKEOVER.
//     After FailoverRetry a failover that has not landed is issued again, a FORCE as a TAKEOVER:
//     a replica whose election was refused has its next one, Valkey's own failover included,
//     barred for four times cluster-node-timeout, and the primaries that voted for it refuse
//     every other replica of P for twice that timeout.
//  4. Who ran P decides, from Kubernetes and the last status:
//     a. a live pod (not deleting, not Failed) whose node does not answer and whose last known
//     id is P, or whose id is not known at all (it ran but never answered): it may be P and
//     still serving. Unknown is not absent: nothing is done, Valkey's failure detection (and on
//     quorum loss the quorum planner) decides;
//     b. a pod being deleted whose container still runs (a drain, `kubectl delete pod`): a
//     planned loss. A graceful CLUSTER FAILOVER on its best replica, while the old primary
//     can still take part in the handover, so that no write is refused; the pod's preStop
//     delay (8.x) gives it the time. A node that hands over by itself on SIGTERM (9.x's
//     shutdown-on-sigterm failover, handsOverItself) is left to do it: the pass waits;
//     c. otherwise its container is gone: a Failed pod, a deleted pod whose process exited, a
//     pod gone from the API. When the live slot-holding primaries are a majority, CLUSTER
//     FAILOVER FORCE on its best replica: they vote at once. Without a majority nothing here:
//     the quorum planner's TAKEOVER is the only way.
//  5. The best replica is the reachable replica of P that completed its sync (its ValkeyNode
//     is Active, which is written only once its sync was loaded, and its replication offset is
//     above 0) with the largest offset, then the first by name (bestReplica, forFailover). A
//     Joining replica holds no usable copy and is never promoted; with none, nothing is done.
//  6. The cluster's view decides FORCE or TAKEOVER (rule 4c): a primary votes from its own
//     view, and refuses a replica it still sees as a primary. Right after a graceful failover
//     (a spread's, a roll's) the old primary is a replica of the new one, but the other
//     primaries learn it only from its next heartbeat, up to half cluster-node-timeout later:
//     kill the new primary then and a FORCE on the old one is refused, which bars its next
//     election for 20 s (chaos seed 60606: 20.6 s refused). When fewer of the reachable voting
//     primaries than Valkey's quorum see the replica as one of P, TAKEOVER on it instead: P's
//     container is gone, so no write can reach P, and the takeover loses nothing the FORCE
//     would keep.

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/slot"
)

// FailoverRetry is how long an issued failover is awaited before it may be issued again: twice
// the cluster-node-timeout (5 s), time enough for the replica to collect the primaries' votes
// or for Valkey's own failover to have done it.
const FailoverRetry = 10 * time.Second

var failover = Planner{Name: "failover", Plan: planFailover}

func planFailover(in Input) Step {
	s := in.Snapshot
	if !formedOnce(in) {
		return Step{}
	}
	live := reachable(s)
	owned := s.OwnedIDs()
	// A primary handing over by itself (rule 4b on Valkey 9) holds back no other shard's
	// failover: its wait is the step's only when nothing else is to be done.
	selfWait := ""
lost:
	for _, c := range lostPrimaries(s, owned) {
		owner, ok := ownerOf(s, c.primary)
		// P's container is gone: nothing of P can take part in a handover any more.
		gone := ok && (owner == nil || owner.Phase == fsm.PodFailed || owner.Exited)
		wait := fmt.Sprintf("waiting for the failover of shard %d", c.shard)
		refused := false // rules 3d and 3's end: a FORCE that did not take
		if f := s.Failover; f != nil && f.PrimaryID == c.primary {
			age := s.Now.Sub(f.StartedAt)
			switch candidate := s.Pod(f.Pod); {
			case candidate != nil && candidate.Node != nil && candidate.Node.Reachable && candidate.Node.Primary && len(candidate.Node.MySlots) > 0:
				continue lost // rule 3a
			case age >= FailoverRetry:
				refused = f.Force
			case candidate == nil || !isLive(*candidate):
				// rule 3b: choose again
			case f.Force && gone && age >= forceUnlanded && candidate.Node != nil && candidate.Node.Reachable && candidate.Node.PrimaryID == c.primary:
				refused = true // rule 3d
			case f.Force || f.Takeover || !gone:
				return Step{Wait: wait} // rule 3, 3c for a graceful one
			}
		}
		if !ok {
			continue // rule 4a: it may be serving
		}
		best := bestReplica(live, choice{purpose: forFailover, primaryID: c.primary})
		if best == nil {
			continue
		}
		planned := owner != nil && owner.Deleting && owner.Phase == fsm.PodRunning && !owner.Exited
		if planned && handsOverItself(*owner) {
			// Rule 4b on Valkey 9: the node hands over by itself on SIGTERM.
			if selfWait == "" {
				selfWait = fmt.Sprintf("shard %d: waiting for %s to hand its slots over on its way out (shutdown-on-sigterm failover)", c.shard, owner.Name)
			}
			continue
		}
		if !planned && !majorityAlive(live, owned) {
			continue // the quorum planner takes over
		}
		var a Action
		switch {
		case planned:
			a = Failover{Pod: best.Name, PrimaryID: c.primary, Shard: c.shard, Purpose: HandOver}
		case refused:
			a = Takeover{Pod: best.Name, PrimaryID: c.primary, Shard: c.shard, Reason: TakeoverForceRefused}
		case !forceCanWin(live, *best, c.primary):
			a = Takeover{Pod: best.Name, PrimaryID: c.primary, Shard: c.shard, Reason: TakeoverStaleView} // rule 6
		default:
			a = FailoverForce{Pod: best.Name, PrimaryID: c.primary, Shard: c.shard}
		}
		if t, ok := a.(Takeover); ok {
			return Step{Actions: takeover(live, best, t), Wait: wait} // plan/epoch.go rule 1
		}
		return Step{Actions: []Action{a}, Wait: wait}
	}
	return Step{Wait: selfWait}
}

// handsOverItself reports whether p's node hands its slots to its most caught-up replica by
// itself when its pod is deleted (Valkey 9's shutdown-on-sigterm failover, the operator's
// default there, resources.shutdownFailover): it pauses its writers, waits for the replica and
// sends it CLUSTER FAILOVER before it exits. A CLUSTER FAILOVER of the operator's own sent
// meanwhile would restart the manual failover under way on the replica, abandoning its
// election (chaos seed 60606: one slot's writes unanswered for 8.8 s, where the same pods
// without the operator waited 2.5 s). A node started without it (Valkey 8, or a ValkeyConfig
// that sets shutdown-on-sigterm otherwise) is handed over by the operator during its pod's
// preStop delay (8.x), or failed over once its container is gone (rule 4c).
func handsOverItself(p fsm.Pod) bool {
	return slices.Contains(strings.Fields(p.Settings["shutdown-on-sigterm"]), "failover")
}

// forceUnlanded is how old a FORCE intent is when the pass judges it did not take (rule 3d):
// FailoverCheck, and the second status.failover.startedAt is rounded down to.
const forceUnlanded = FailoverCheck + time.Second

// isLive reports whether p is among the live pods (fsm.Snapshot.LivePods).
func isLive(p fsm.Pod) bool {
	return !p.Deleting && p.Phase != fsm.PodFailed && p.Phase != fsm.PodSucceeded && !p.Lost()
}

// forceCanWin reports whether enough of the primaries that vote, as the reachable nodes show
// them, see candidate as a replica of primaryID for a FORCE on it to win its election (rule 6):
// Valkey's quorum is a majority of the primaries holding slots (slotHolders), and a primary
// votes only for a node it sees as a replica of a primary it knows.
func forceCanWin(live []fsm.Pod, candidate fsm.Pod, primaryID string) bool {
	votes := 0
	for _, p := range live {
		n := p.Node
		if p.Name == candidate.Name || !n.Primary || len(n.MySlots) == 0 {
			continue
		}
		if n.Follows[candidate.Node.ID] == primaryID {
			votes++
		}
	}
	return votes >= len(slotHolders(live))/2+1
}

type lostPrimary struct {
	shard   int
	primary string
}

// lostPrimaries lists, by shard index then id, the primaries that a reachable live replica
// follows and sees holding slots, and that no reachable live pod owns (rule 2).
func lostPrimaries(s fsm.Snapshot, owned map[string]bool) []lostPrimary {
	var out []lostPrimary
	for shard, pods := range s.ShardPods() {
		seen := map[string]bool{}
		for _, p := range pods {
			n := p.Node
			if n == nil || !n.Reachable || n.Primary || n.PrimaryID == "" || owned[n.PrimaryID] || seen[n.PrimaryID] {
				continue
			}
			if held := n.Known[n.PrimaryID]; len(held) > 0 && !servedElsewhere(s, n.PrimaryID, held) {
				seen[n.PrimaryID] = true
				out = append(out, lostPrimary{shard: shard, primary: n.PrimaryID})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].shard != out[j].shard {
			return out[i].shard < out[j].shard
		}
		return out[i].primary < out[j].primary
	})
	return out
}

// servedElsewhere reports whether a reachable live node other than id says it serves some of
// slots itself: a replica of id was promoted already (by the operator or by Valkey), and the
// replicas that still follow id have not heard of it yet. Promoting one of them too would make
// two primaries of the shard, the later one taking the slots and dropping the writes the
// earlier one took meanwhile.
func servedElsewhere(s fsm.Snapshot, id string, slots slot.Set) bool {
	for _, p := range reachable(s) {
		if p.Node.ID != id && p.Node.Primary && len(slot.Intersect(slots, p.Node.MySlots)) > 0 {
			return true
		}
	}
	return false
}

// ownerOf returns the pod that ran primary id (nil when no pod claims it: gone from the API),
// and false when a live pod whose node does not answer may be it (rule 4a). A pod claims the id
// its node reports now or, when it does not answer, the one the last status recorded for it.
func ownerOf(s fsm.Snapshot, id string) (*fsm.Pod, bool) {
	var owner *fsm.Pod
	for i, p := range s.Pods {
		live := !p.Deleting && p.Phase != fsm.PodFailed && p.Phase != fsm.PodSucceeded
		answered := p.Node != nil && p.Node.Reachable && p.Node.ID != ""
		claims := p.ClaimedID() == id
		switch {
		case live && !answered && claims:
			return nil, false // its pod runs; only its node is silent
		case live && !answered && p.LastNodeID == "" && p.Phase != fsm.PodPending:
			return nil, false // it ran and never said which node it is: it may be this one
		case claims && owner == nil:
			owner = &s.Pods[i]
		}
	}
	return owner, true
}

// majorityAlive reports whether the slot holders (the nodes holding slots in any reachable
// node's view) that live pods own are a majority of them: then the survivors can elect, by
// Valkey's own failover or on a FORCE.
func majorityAlive(live []fsm.Pod, owned map[string]bool) bool {
	holders := slotHolders(live)
	alive := 0
	for id := range holders {
		if owned[id] {
			alive++
		}
	}
	return len(holders) > 0 && alive > len(holders)/2
}

// slotHolders are the node ids that hold slots in any of the reachable nodes' views (live).
func slotHolders(live []fsm.Pod) map[string]bool {
	holders := map[string]bool{}
	for _, p := range live {
		for id, slots := range p.Node.Known {
			if len(slots) > 0 {
				holders[id] = true
			}
		}
	}
	return holders
}

// NextFailover is the failover intent to persist for this pass, before its actions run: the
// pass's own failover (started now), else the earlier one while a reachable live replica still
// follows its lost primary (the promotion has not landed), else nil. Written before the
// failover is issued, it is what keeps the next pass, or a restarted operator, from issuing a
// second one (rule 3).
func NextFailover(s fsm.Snapshot, p Plan) *fsm.FailoverIntent {
	for _, a := range p.Actions {
		if f, ok := a.(Takeover); ok {
			return &fsm.FailoverIntent{Shard: f.Shard, Pod: f.Pod, PrimaryID: f.PrimaryID, Takeover: true, StartedAt: s.Now}
		}
		if f, ok := a.(FailoverForce); ok {
			return &fsm.FailoverIntent{Shard: f.Shard, Pod: f.Pod, PrimaryID: f.PrimaryID, Force: true, StartedAt: s.Now}
		}
		if f, ok := a.(Failover); ok {
			return &fsm.FailoverIntent{Shard: f.Shard, Pod: f.Pod, PrimaryID: f.PrimaryID, StartedAt: s.Now}
		}
	}
	f := s.Failover
	if f == nil {
		return nil
	}
	for _, p := range reachable(s) {
		if !p.Node.Primary && p.Node.PrimaryID == f.PrimaryID {
			return f
		}
	}
	return nil
}
