package plan

// The reshard planner (topology) moves slots, keys included, so that the primaries of shards
// 0..shards-1 serve an even share of the 16384 slots and the primaries of shards the spec no
// longer has serve none; it then retires those shards' nodes. Its rules, in order:
//
//  1. Only a cluster formed once (Forming, Active, Upgrading), and only when every live node
//     answers: a move needs the whole picture.
//  2. Open slots are settled first, on every pass: a slot a live primary reports MIGRATING to a
//     live primary is moved on (the move's steps are idempotent); MIGRATING to a node that is not
//     a live primary is closed on the source (SETSLOT STABLE: it still holds the slot and its
//     keys); IMPORTING on a primary that serves the slot by its own view is closed by assigning
//     the slot to it (SETSLOT NODE itself); IMPORTING from a live primary that serves the slot is
//     moved on; any other IMPORTING is closed (STABLE). By slot, then pod, so every pass and a
//     restarted operator settle the same way. Settling is one disruptive step: the first open
//     slot says whether this pass resumes moves or closes slots, and every open slot settled
//     that way is in the step (resumed moves up to MaxSlotsPerBatch, once per slot).
//  3. New moves wait until every live node knows every other (a new shard's nodes were met) and
//     says cluster_state:ok, no failover is awaited, and every shard 0..shards-1 has a reachable
//     primary and all its replicas, attached to it and synced once (Active): a moved key lives
//     on the target primary alone until it replicates, so a new shard whose replica is not there
//     yet would lose every key moved into it with its primary. Then every shard that would
//     receive slots has its replicas caught up (targetsReplicated).
//  4. Each shard's target is its share of slot.EvenSpread(shards) (0 for a removed shard). Shards
//     over their target give slots (the highest first) to shards under it, by index, so a
//     removed shard's slots spread over every remaining shard in proportion to what each lacks.
//     A primary gives only to one running the same Valkey major or a later one (takesFrom): in the
//     middle of an upgrade from 8 to 9 a 9.x source cannot give to an 8.x target (MIGRATE's DUMP
//     payloads are refused, and 8.x has no atomic migration), so such a pair waits, the givers of
//     a later major pairing first, and the planner lets the upgrade replace the older target.
//     One batch of at most MaxSlotsPerBatch slot moves (MaxAtomicSlotsPerBatch on Valkey 9),
//     interleaved over the (source, target) pairs, is one disruptive step; the executor moves the
//     pairs concurrently.
//  5. Once no node of a removed shard serves a slot, its nodes are retired one per pass, the first
//     by name (RetireRemovedShard), a Valkey 9 one MovedHold after it served slots last
//     (servedRecently); cleanup forgets them at once.

import (
	"fmt"
	"sort"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/slot"
)

// MaxSlotsPerBatch bounds one batch of slot moves: enough slots in flight over several pairs to
// keep the nodes busy, few enough that a pass finishes within its budget with typical key
// counts. A batch cut short by the pass budget leaves open slots that the next pass settles.
const MaxSlotsPerBatch = 1024

// MaxAtomicSlotsPerBatch bounds one batch on a cluster whose image is Valkey 9
// (Snapshot.AtomicMoves): each pair of the batch is one CLUSTER MIGRATESLOTS, whose cost is mostly
// per job (a fork and a snapshot on the source, a pause at the end), so fewer, larger jobs move
// more keys per second (measured on 9.1.2, 3 -> 4 shards with 1.5 M keys: 1024-slot batches,
// 16.5 k keys/s; bare jobs of a whole pair's slots, 46 k keys/s). A quarter of the slot space
// moves 3 -> 4 in one batch. A pair the executor finds unable to move atomically (an 8.x node
// mid-upgrade, the grant not loaded yet) moves classically within the pass budget, and the rest
// of its moves wait for the next pass.
const MaxAtomicSlotsPerBatch = 4096

// RetireRemovedShard is why the nodes of a shard the spec no longer has are retired.
const RetireRemovedShard = "shard removed by spec.shards"

var reshard = Planner{Name: "reshard", Gate: gateReshard, Plan: planReshard}

func gateReshard(in Input) string {
	if !formedOnce(in) {
		return "waiting for the cluster to form before moving slots"
	}
	return in.Snapshot.AllAnswer()
}

func planReshard(in Input) Step {
	s := in.Snapshot
	live := s.LivePods()
	if a, ok := planSettle(live); ok {
		return Step{Actions: []Action{a}, Wait: "waiting for open slots to settle"}
	}
	byShard := map[int][]fsm.Pod{}
	for _, p := range live {
		byShard[p.Shard] = append(byShard[p.Shard], p)
	}
	if why := moveGate(s, live, byShard); why != "" {
		if ReshardPending(s) {
			// Said, not swallowed: a reshard held here for good (a replica that never
			// syncs) must show why in status.message. Later concerns go on.
			return Step{Hold: why}
		}
		return Step{}
	}
	if moves := planMoves(s, byShard); len(moves) > 0 {
		if why := targetsReplicated(s, byShard, moves); why != "" {
			return Step{Wait: why}
		}
		return Step{Actions: []Action{MoveSlots{Moves: moves}}, Wait: fmt.Sprintf("waiting for %d slot moves to land", len(moves))}
	}
	// No move is left, but a removed shard may still serve slots that wait for a target able to
	// take them (rule 4): its nodes, its replicas included, stay until it serves none.
	serving := map[int]bool{}
	for _, p := range live {
		if p.Shard >= s.Shards && len(p.Node.MySlots) > 0 {
			serving[p.Shard] = true
		}
	}
	for _, p := range live { // by name
		if p.Shard >= s.Shards && !serving[p.Shard] && len(p.Node.MySlots) == 0 {
			if why := servedRecently(s, p); why != "" {
				return Step{Wait: why}
			}
			return Step{Actions: []Action{DeletePod{Pod: p.Name, Reason: RetireRemovedShard}}, Wait: fmt.Sprintf("waiting for %s to leave", p.Name)}
		}
	}
	return Step{}
}

// takesFrom reports whether target's node can take slots, keys included, from source's: it runs
// the same Valkey major or a later one, or either version is unknown. A server refuses the DUMP
// payloads of a later major, which MIGRATE carries (measured: 8.0.1 answers 9.1.2's with "ERR DUMP
// payload version or checksum are wrong", and a batch that tried it failed on every pass, holding
// the upgrade that would have replaced the 8.x target), and Valkey 8 has no atomic migration.
func takesFrom(target, source fsm.Pod) bool {
	t, src := target.Node.Major(), source.Node.Major()
	return t == 0 || src == 0 || src <= t
}

// ReshardPending reports whether slots have yet to move: a live primary serves a number of slots
// other than its shard's share of slot.EvenSpread(shards) (0 for a shard the spec no longer has),
// or reports an open slot. It needs no gate and no new node: raising spec.shards makes the
// existing primaries serve more than their new share at once, so it is true from the first pass
// after the edit until the pass that finds every slot where it belongs. The Valkey 9 atomic path
// keys the replication user's wider rights on it (controllers, slotImportRules), which then reach
// the nodes while the new shard's nodes start and sync, before the first move.
func ReshardPending(s fsm.Snapshot) bool {
	if s.Shards <= 0 {
		return false
	}
	spread := slot.EvenSpread(s.Shards)
	for _, p := range s.LivePods() {
		n := p.Node
		if n == nil || !n.Reachable || !n.Primary {
			continue
		}
		if len(n.Migrating)+len(n.Importing) > 0 {
			return true
		}
		want := 0
		if p.Shard >= 0 && p.Shard < s.Shards {
			want = spread[p.Shard].Count()
		}
		if got := n.MySlots.Count(); got > 0 && got != want {
			return true
		}
	}
	return false
}

// planSettle applies rule 2: one action for the first open slot found, by slot then pod.
func planSettle(live []fsm.Pod) (Action, bool) {
	primaries := map[string]fsm.Pod{}
	for _, p := range live {
		if p.Node.Primary {
			primaries[p.Node.ID] = p
		}
	}
	type open struct {
		slot      int
		pod       fsm.Pod
		migrating bool
		other     string
	}
	var opens []open
	for _, p := range live {
		if !p.Node.Primary {
			continue // replicas follow their primary's SETSLOT
		}
		for sl, id := range p.Node.Migrating {
			opens = append(opens, open{sl, p, true, id})
		}
		for sl, id := range p.Node.Importing {
			opens = append(opens, open{sl, p, false, id})
		}
	}
	if len(opens) == 0 {
		return nil, false
	}
	sort.Slice(opens, func(i, j int) bool {
		if opens[i].slot != opens[j].slot {
			return opens[i].slot < opens[j].slot
		}
		if opens[i].pod.Name != opens[j].pod.Name {
			return opens[i].pod.Name < opens[j].pod.Name
		}
		return opens[i].migrating && !opens[j].migrating
	})
	// settle is the one way each open slot is settled: a move resumed (move true) or a close.
	settle := func(o open) (m SlotMove, move bool, c CloseSlot) {
		other, otherLive := primaries[o.other]
		if o.migrating {
			if otherLive {
				return SlotMove{Slot: o.slot, Source: o.pod.Name, SourceID: o.pod.Node.ID, Target: other.Name, TargetID: other.Node.ID}, true, c
			}
			return m, false, CloseSlot{Pod: o.pod.Name, Slot: o.slot}
		}
		if o.pod.Node.MySlots.Contains(o.slot) {
			return m, false, CloseSlot{Pod: o.pod.Name, Slot: o.slot, Owner: o.pod.Node.ID}
		}
		if otherLive && other.Node.MySlots.Contains(o.slot) {
			return SlotMove{Slot: o.slot, Source: other.Name, SourceID: other.Node.ID, Target: o.pod.Name, TargetID: o.pod.Node.ID}, true, c
		}
		return m, false, CloseSlot{Pod: o.pod.Name, Slot: o.slot}
	}
	// The first open slot says which kind this pass settles; every open slot settled the same
	// way joins the batch (a resumed move once per slot, the first by pod), so a batch of moves
	// cut short, or a failed-over source whose replica inherited hundreds of MIGRATING slots, is
	// settled in one step rather than one slot per pass.
	_, resume, _ := settle(opens[0])
	var resumes []SlotMove
	var closes []CloseSlot
	seen := map[int]bool{}
	for _, o := range opens {
		m, move, c := settle(o)
		switch {
		case move != resume:
		case move && !seen[o.slot] && len(resumes) < MaxSlotsPerBatch:
			seen[o.slot] = true
			resumes = append(resumes, m)
		case !move:
			closes = append(closes, c)
		}
	}
	if resume {
		return MoveSlots{Moves: resumes, Settle: true}, true
	}
	return CloseSlots{Closes: closes}, true
}

// moveGate applies rule 3.
func moveGate(s fsm.Snapshot, live []fsm.Pod, byShard map[int][]fsm.Pod) string {
	for _, p := range live {
		if len(p.Node.Known) != len(live) || len(p.Node.Meeting) > 0 {
			return "waiting for every node to know every node"
		}
		// A node that just joined says cluster_state:fail until it learnt every slot's owner,
		// and as a target it refuses MIGRATE with CLUSTERDOWN meanwhile.
		if !p.Node.ClusterStateOK {
			return "waiting for node " + p.Name + " to see the cluster ok"
		}
	}
	if f := s.Failover; f != nil && s.Now.Sub(f.StartedAt) < FailoverRetry {
		return "waiting for a failover"
	}
	for shard := range s.Shards {
		pods := byShard[shard]
		primary := fsm.ShardPrimary(pods)
		if primary == nil {
			return fmt.Sprintf("waiting for shard %d to have a primary", shard)
		}
		// A key moved into a primary is on that one node until it replicates: a shard takes
		// or gives slots only with all its replicas attached and synced once (Active), so that
		// losing its primary mid-move loses at most what a crash failover loses anyway.
		if len(pods) < s.ReplicasPerShard+1 {
			return fmt.Sprintf("waiting for shard %d to have its %d nodes before moving slots", shard, s.ReplicasPerShard+1)
		}
		for _, p := range pods {
			if p.Name != primary.Name && (p.Node.Primary || p.Node.PrimaryID != primary.Node.ID || p.Lifecycle != string(v1.LifecycleActive)) {
				return fmt.Sprintf("waiting for shard %d's replica %s to sync before moving slots", shard, p.Name)
			}
		}
	}
	return ""
}

// targetsReplicated applies the last part of rule 3: slots move only into a shard whose primary
// has its replicasPerShard replicas caught up, so that no key lands where a single crash loses
// it (a newcomer saw a new shard take slots 37 s before its replica had even started).
func targetsReplicated(s fsm.Snapshot, byShard map[int][]fsm.Pod, moves []SlotMove) string {
	checked := map[string]bool{}
	for _, m := range moves {
		if checked[m.Target] {
			continue
		}
		checked[m.Target] = true
		var primary fsm.Pod
		var shard int
		for sh, pods := range byShard {
			for _, p := range pods {
				if p.Name == m.Target {
					primary, shard = p, sh
				}
			}
		}
		synced := 0
		for _, p := range byShard[shard] {
			if p.Name != primary.Name && fsm.CaughtUp(p, primary) {
				synced++
			}
		}
		if synced < s.ReplicasPerShard {
			return fmt.Sprintf("waiting for shard %d to have %d caught-up replicas before slots move into it (%d)", shard, s.ReplicasPerShard, synced)
		}
	}
	return ""
}

// planMoves applies rule 4.
func planMoves(s fsm.Snapshot, byShard map[int][]fsm.Pod) []SlotMove {
	spread := slot.EvenSpread(s.Shards)
	type holder struct {
		shard int
		pod   fsm.Pod
		slots []int // ascending
		want  int
	}
	var shards []int
	for shard := range byShard {
		shards = append(shards, shard)
	}
	sort.Ints(shards)
	var give, take []*holder
	for _, shard := range shards {
		primary := fsm.ShardPrimary(byShard[shard])
		if primary == nil {
			continue
		}
		h := &holder{shard: shard, pod: *primary}
		if shard >= 0 && shard < s.Shards {
			h.want = spread[shard].Count()
		}
		for _, r := range primary.Node.MySlots {
			for sl := r.Start; sl <= r.End; sl++ {
				h.slots = append(h.slots, sl)
			}
		}
		switch {
		case len(h.slots) > h.want:
			give = append(give, h)
		case len(h.slots) < h.want && shard < s.Shards:
			take = append(take, h)
		}
	}
	// Pair each giver's surplus with the takers' deficits, then interleave the pairs so a batch
	// spreads over every pair. A giver gives only to takers that can take its keys (takesFrom);
	// the givers of a later Valkey major pair first, so that they get the takers as recent as
	// they are before the older givers, which may give to any, fill them.
	sort.SliceStable(give, func(i, j int) bool { return give[i].pod.Node.Major() > give[j].pod.Node.Major() })
	type pair struct{ moves []SlotMove }
	var pairs []*pair
	deficit := func(h *holder) int { return h.want - len(h.slots) }
	for _, g := range give {
		surplus := len(g.slots) - g.want
		for _, t := range take {
			n := min(surplus, deficit(t))
			if n <= 0 || !takesFrom(t.pod, g.pod) {
				continue
			}
			p := &pair{}
			for range n {
				sl := g.slots[len(g.slots)-1]
				g.slots = g.slots[:len(g.slots)-1]
				t.slots = append(t.slots, sl)
				p.moves = append(p.moves, SlotMove{Slot: sl, Source: g.pod.Name, SourceID: g.pod.Node.ID, Target: t.pod.Name, TargetID: t.pod.Node.ID})
			}
			pairs = append(pairs, p)
			surplus -= n
		}
	}
	limit := MaxSlotsPerBatch
	if s.AtomicMoves {
		limit = MaxAtomicSlotsPerBatch
	}
	var out []SlotMove
	for i := 0; len(out) < limit; i++ {
		added := false
		for _, p := range pairs {
			if i < len(p.moves) && len(out) < limit {
				out = append(out, p.moves[i])
				added = true
			}
		}
		if !added {
			break
		}
	}
	return out
}
