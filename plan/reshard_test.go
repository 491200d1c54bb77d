package plan

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/slot"
)

// withNewShard adds a running, met, slot-less primary pod for shard, known to every node.
func withNewShard(shard int) opt { return withNewShardPod(shard, 0) }

func moves(t *testing.T, p Plan) MoveSlots {
	t.Helper()
	if len(p.Actions) != 1 {
		t.Fatalf("want one batch of moves, got %v (waiting %q)", p.Actions, p.Waiting)
	}
	m, ok := p.Actions[0].(MoveSlots)
	if !ok {
		t.Fatalf("want MoveSlots, got %v", p.Actions[0])
	}
	return m
}

// Scale out 3 → 4: the new shard's primary takes slots from every old primary, interleaved, the
// highest of each first; the batch is bounded.
func TestReshardScaleOut(t *testing.T) {
	s := newSnapshot(fsm.Upgrading, 3, 0, formed)
	s.Shards = 4
	withNewShard(3)(&s)
	m := moves(t, run(reshard, fsm.Upgrading, s))
	if len(m.Moves) != MaxSlotsPerBatch {
		t.Fatalf("want a batch of %d moves, got %d", MaxSlotsPerBatch, len(m.Moves))
	}
	from := map[string]int{}
	for i, mv := range m.Moves {
		if mv.Target != "p3-0" || mv.TargetID != "id-p3-0" {
			t.Fatalf("move %d to %s, want the new shard's primary", i, mv.Target)
		}
		from[mv.Source]++
	}
	if len(from) != 3 {
		t.Fatalf("want slots from all three old primaries, got %v", from)
	}
	spread := slot.EvenSpread(3)
	if m.Moves[0].Source != "p0-0" || m.Moves[0].Slot != spread[0].End || m.Moves[1].Source != "p1-0" {
		t.Fatalf("want the highest slot of p0-0 first, then p1-0's: %+v", m.Moves[:3])
	}
}

// Scale in 4 → 2: the removed shards' slots go to both remaining shards in proportion, and once
// a removed shard serves nothing its nodes are retired.
func TestReshardScaleIn(t *testing.T) {
	s := newSnapshot(fsm.Upgrading, 4, 0, formed)
	s.Shards = 2
	m := moves(t, run(reshard, fsm.Upgrading, s))
	to := map[string]int{}
	for _, mv := range m.Moves {
		if mv.Source != "p2-0" && mv.Source != "p3-0" {
			t.Fatalf("a remaining shard gave slot %d", mv.Slot)
		}
		to[mv.Target]++
	}
	if len(to) != 2 {
		t.Fatalf("want both remaining shards to receive slots, got %v", to)
	}
	// Every slot moved: retire the removed shards' nodes, one per pass.
	spread := slot.EvenSpread(2)
	done := newSnapshot(fsm.Upgrading, 4, 0, formed)
	done.Shards = 2
	for i := range done.Pods {
		p := &done.Pods[i]
		switch p.Shard {
		case 0, 1:
			p.Node.MySlots = slot.Set{spread[p.Shard]}
		default:
			p.Node.MySlots = nil
		}
	}
	for i := range done.Pods {
		for j := range done.Pods {
			done.Pods[i].Node.Known[done.Pods[j].Node.ID] = done.Pods[j].Node.MySlots
		}
	}
	p := run(reshard, fsm.Upgrading, done)
	if len(p.Actions) != 1 || p.Actions[0] != (DeletePod{Pod: "p2-0", Reason: RetireRemovedShard}) {
		t.Fatalf("want p2-0 retired, got %v", p.Actions)
	}
	if why := done.Changing(); why == "" {
		t.Fatal("nodes of a removed shard are a change")
	}
}

// withVersion: the named pods' nodes run Valkey version (INFO server's valkey_version).
func withVersion(version string, names ...string) opt {
	return func(s *fsm.Snapshot) {
		for _, name := range names {
			withPod(name, func(p *fsm.Pod) { p.Node.Version = version })(s)
		}
	}
}

// In the middle of an upgrade from Valkey 8 to 9 a primary gives slots only to one running the
// same major or a later one: 8.0.1 refuses the DUMP payloads of 9.1.2 that MIGRATE carries, and
// has no atomic migration. Found by TestReshardDuringUpgrade: a 4 -> 3 revert while only shard 0
// had rolled planned the new 9.x shard's slots into the 8.x primaries too; every batch failed
// with "ERR DUMP payload version or checksum are wrong", and since a batch of moves holds the
// pass, the upgrade that would have replaced the 8.x targets never ran again.
func TestReshardNeverMovesIntoAnOlderValkey(t *testing.T) {
	nine := []string{"p0-0", "p0-1", "p3-0", "p3-1"}
	eight := []string{"p1-0", "p1-1", "p2-0", "p2-1"}
	mixed := func(shards int) fsm.Snapshot {
		s := newSnapshot(fsm.Upgrading, 4, 1, formed, withVersion(localValkey9, nine...), withVersion("8.0.1", eight...))
		s.Shards, s.AtomicMoves, s.SpecHash = shards, true, "nine"
		for i := range s.Pods {
			s.Pods[i].SpecHash = map[string]string{localValkey9: "nine", "8.0.1": "eight"}[s.Pods[i].Node.Version]
		}
		return s
	}
	// 4 -> 3: the 9.x shard 3 drains into the 9.x shard 0 only, up to its share.
	m := moves(t, run(reshard, fsm.Upgrading, mixed(3)))
	if want := slot.EvenSpread(3)[0].Count() - slot.EvenSpread(4)[0].Count(); len(m.Moves) != want {
		t.Fatalf("want shard 0's %d missing slots moved, got %d moves", want, len(m.Moves))
	}
	for _, mv := range m.Moves {
		if mv.Source != "p3-0" || mv.Target != "p0-0" {
			t.Fatalf("move %+v: only p3-0 -> p0-0 can move", mv)
		}
	}

	// Shard 0 has its share: the rest waits for the 8.x targets to be replaced. The reshard
	// planner neither moves nor retires the removed shard's nodes (its replica serves no slot
	// but its primary does), and lets the upgrade act.
	s := mixed(3)
	four := slot.EvenSpread(4)
	withPod("p0-0", func(p *fsm.Pod) { p.Node.MySlots = slot.Set{four[0], {Start: 15018, End: 16383}} })(&s)
	withPod("p3-0", func(p *fsm.Pod) { p.Node.MySlots = slot.Set{{Start: four[3].Start, End: 15017}} })(&s)
	for i := range s.Pods {
		for j := range s.Pods {
			s.Pods[i].Node.Known[s.Pods[j].Node.ID] = s.Pods[j].Node.MySlots
		}
	}
	if got, want := s.Pods[0].Node.MySlots.Count(), slot.EvenSpread(3)[0].Count(); got != want {
		t.Fatalf("fixture: p0-0 serves %d, its share is %d", got, want)
	}
	if p := run(reshard, fsm.Upgrading, s); len(p.Actions) != 0 || p.Waiting != "" {
		t.Fatalf("want no step, so that the upgrade goes on; got %v (waiting %q)", p.Actions, p.Waiting)
	}
	if p := Pass(fsm.Upgrading, s); len(p.Actions) != 1 || p.Actions[0] != (CreatePod{Shard: 1}) {
		t.Fatalf("want the upgrade to replace shard 1's nodes, got %v (waiting %q)", p.Actions, p.Waiting)
	}

	// 4 -> 2 with an 8.x and a 9.x shard removed: the 9.x giver pairs first, with the 9.x taker,
	// and the 8.x giver fills the 8.x one, so that nothing waits.
	m = moves(t, run(reshard, fsm.Upgrading, mixed(2)))
	pairs := map[string]int{}
	for _, mv := range m.Moves {
		pairs[mv.Source+"->"+mv.Target]++
	}
	if len(pairs) != 2 || pairs["p3-0->p0-0"] == 0 || pairs["p2-0->p1-0"] == 0 {
		t.Fatalf("want p3-0 -> p0-0 and p2-0 -> p1-0, got %v", pairs)
	}

	// 3 -> 4: every source, 8.x or 9.x, gives to the new 9.x shard.
	s = newSnapshot(fsm.Upgrading, 3, 1, formed, withVersion(localValkey9, "p0-0", "p0-1"), withVersion("8.0.1", "p1-0", "p1-1", "p2-0", "p2-1"))
	s.Shards = 4
	withNewShardPod(3, 0)(&s)
	withNewShardPod(3, 1)(&s)
	withVersion(localValkey9, "p3-0", "p3-1")(&s)
	withPod("p3-1", func(p *fsm.Pod) {
		p.Node.Primary, p.Node.PrimaryID, p.Node.LinkUp, p.Node.ReplOffset, p.Lifecycle = false, "id-p3-0", true, 1000, string(v1.LifecycleActive)
	})(&s)
	withLifecycle("p3-0", v1.LifecycleActive)(&s)
	from := map[string]int{}
	for _, mv := range moves(t, run(reshard, fsm.Upgrading, s)).Moves {
		from[mv.Source]++
	}
	if len(from) != 3 {
		t.Fatalf("want slots from the 9.x and both 8.x primaries, got %v", from)
	}
}

// localValkey9 is the Valkey 9 the local cluster runs.
const localValkey9 = "9.1.2"

// Open slots are settled before any new move, deterministically.
func TestReshardSettlesOpenSlots(t *testing.T) {
	s := newSnapshot(fsm.Active, 2, 0, formed)
	slot0 := slot.EvenSpread(2)[0].End
	s.Pods[0].Node.Migrating = map[int]string{slot0: "id-p1-0"}
	m := moves(t, run(reshard, fsm.Active, s))
	if !m.Settle || len(m.Moves) != 1 || m.Moves[0] != (SlotMove{Slot: slot0, Source: "p0-0", SourceID: "id-p0-0", Target: "p1-0", TargetID: "id-p1-0"}) {
		t.Fatalf("want the open move resumed, got %+v", m)
	}
	s.Pods[0].Node.Migrating = map[int]string{slot0: "id-gone"}
	if p := run(reshard, fsm.Active, s); len(p.Actions) != 1 || !closes(p.Actions[0], CloseSlot{Pod: "p0-0", Slot: slot0}) {
		t.Fatalf("a move to a node that is gone is closed on the source, got %v", p.Actions)
	}
	s.Pods[0].Node.Migrating = nil
	s.Pods[0].Node.Importing = map[int]string{slot0: "id-p1-0"}
	if p := run(reshard, fsm.Active, s); len(p.Actions) != 1 || !closes(p.Actions[0], CloseSlot{Pod: "p0-0", Slot: slot0, Owner: "id-p0-0"}) {
		t.Fatalf("an import on the slot's owner is closed by assigning it, got %v", p.Actions)
	}
	s.Pods[0].Node.Importing = nil
	s.Pods[1].Node.Importing = map[int]string{slot0: "id-p0-0"}
	m = moves(t, run(reshard, fsm.Active, s))
	if m.Moves[0].Source != "p0-0" || m.Moves[0].Target != "p1-0" {
		t.Fatalf("an import from the live owner is resumed, got %+v", m)
	}
	// A balanced cluster with nothing open: nothing to do.
	if p := run(reshard, fsm.Active, newSnapshot(fsm.Active, 3, 1, formed)); len(p.Actions) != 0 {
		t.Fatalf("balanced: %v", p.Actions)
	}
}

// withNewShardPod adds a running, met pod i of a new shard, an empty primary known to every node,
// Joining; the second and later pods of a new shard are added the same way, then attached.
func withNewShardPod(shard, i int) opt {
	return func(s *fsm.Snapshot) {
		name := fmt.Sprintf("p%d-%d", shard, i)
		p := fsm.Pod{Name: name, Shard: shard, Phase: fsm.PodRunning, IP: fmt.Sprintf("10.244.9.%d", i+2), Lifecycle: string(v1.LifecycleJoining),
			Node: &fsm.Node{Reachable: true, ID: "id-" + name, Primary: true, ClusterStateOK: true, SlotsAssigned: slot.Count, Known: map[string]slot.Set{}}}
		s.Pods = append(s.Pods, p)
		for i := range s.Pods {
			for j := range s.Pods {
				s.Pods[i].Node.Known[s.Pods[j].Node.ID] = s.Pods[j].Node.MySlots
			}
		}
		sortPods(s.Pods)
	}
}

// A new shard of a 3×1 cluster grows its replica while its primary is still empty (and so still
// Joining), the replica is attached to it, and slots move in only once that replica synced: the
// keys moved into the new primary then have a second copy. Before, the replica was created only
// once the primary served slots, so a primary killed mid-move lost every key moved into it
// (TestReshardDestinationKilled: "shard lost every copy of its data").
func TestReshardNewShardGetsItsReplicaFirst(t *testing.T) {
	s := newSnapshot(fsm.Upgrading, 3, 1, formed)
	s.Shards = 4
	withNewShardPod(3, 0)(&s)
	// The pods planner grows the new shard although its primary is Joining.
	if p := run(pods, fsm.Upgrading, s); len(p.Actions) != 1 || p.Actions[0] != (CreatePod{Shard: 3}) {
		t.Fatalf("want the new shard's replica created, got %v (waiting %q)", p.Actions, p.Waiting)
	}
	if p := run(reshard, fsm.Upgrading, s); len(p.Actions) != 0 {
		t.Fatalf("moved slots into a shard without its replica: %v", p.Actions)
	}
	// Its second pod, met, is attached to the empty primary (the first by name).
	withNewShardPod(3, 1)(&s)
	p := run(formation, fsm.Upgrading, s)
	if len(p.Actions) != 1 || p.Actions[0] != (Replicate{Pod: "p3-1", PrimaryID: "id-p3-0"}) {
		t.Fatalf("want p3-1 attached to p3-0, got %v (waiting %q)", p.Actions, p.Waiting)
	}
	if p := run(reshard, fsm.Upgrading, s); len(p.Actions) != 0 {
		t.Fatalf("moved slots into a shard whose replica is not attached: %v", p.Actions)
	}
	// Attached but still syncing (Joining): still no move.
	withPod("p3-1", func(p *fsm.Pod) { p.Node.Primary, p.Node.PrimaryID = false, "id-p3-0" })(&s)
	if p := run(reshard, fsm.Upgrading, s); len(p.Actions) != 0 {
		t.Fatalf("moved slots into a shard whose replica has not synced: %v", p.Actions)
	}
	// Synced: the slots move.
	withPod("p3-1", func(p *fsm.Pod) {
		p.Node.LinkUp, p.Node.ReplOffset, p.Lifecycle = true, 1000, string(v1.LifecycleActive)
	})(&s)
	for _, mv := range moves(t, run(reshard, fsm.Upgrading, s)).Moves {
		if mv.Target != "p3-0" {
			t.Fatalf("move to %s, want the new shard's primary", mv.Target)
		}
	}
	// A replica of another shard being replaced (Joining, syncing) holds new moves back too.
	withLifecycle("p0-1", v1.LifecycleJoining)(&s)
	if p := run(reshard, fsm.Upgrading, s); len(p.Actions) != 0 {
		t.Fatalf("moved slots while shard 0's replica syncs: %v", p.Actions)
	}
}

// A replica that still follows its lost primary may hold the shard's data: the shard is not
// fresh, and the replica is never attached to an empty replacement.
func TestReplicaOfLostPrimaryIsNotAttachedToAnEmptyNode(t *testing.T) {
	s := newSnapshot(fsm.Active, 2, 1, formed, withFailed("p0-0"))
	s.Pods = append(s.Pods, fsm.Pod{Name: "p0-2", Shard: 0, Phase: fsm.PodRunning, IP: "10.244.0.9", Lifecycle: string(v1.LifecycleJoining),
		Node: &fsm.Node{Reachable: true, ID: "id-p0-2", Primary: true, ClusterStateOK: true, SlotsAssigned: slot.Count, Known: map[string]slot.Set{}}})
	for _, a := range run(formation, fsm.Active, s).Actions {
		if r, ok := a.(Replicate); ok && r.Pod == "p0-1" {
			t.Fatalf("the lost primary's replica attached to an empty node: %v", a)
		}
	}
}

// closes reports whether a is a CloseSlots of exactly want.
func closes(a Action, want ...CloseSlot) bool {
	c, ok := a.(CloseSlots)
	return ok && slices.Equal(c.Closes, want)
}

// An interrupted batch leaves many slots open: they are settled in one step, not one per pass
// (TestReshardSourceKilled: the promoted replica of a killed source reported 340 slots MIGRATING,
// resumed one per pass, about a second each). Moves resumed first (the lowest open slot says
// which kind), once per slot; the closes in the next pass.
func TestReshardSettlesOpenSlotsInOneStep(t *testing.T) {
	s := newSnapshot(fsm.Active, 2, 0, formed)
	end := slot.EvenSpread(2)[0].End
	s.Pods[0].Node.Migrating = map[int]string{end - 2: "id-p1-0", end - 1: "id-p1-0", end: "id-gone"}
	s.Pods[1].Node.Importing = map[int]string{end - 2: "id-p0-0", end - 1: "id-p0-0"}
	m := moves(t, run(reshard, fsm.Active, s))
	if !m.Settle || len(m.Moves) != 2 || m.Moves[0].Slot != end-2 || m.Moves[1].Slot != end-1 {
		t.Fatalf("want both open moves resumed in one step, once each, got %+v", m)
	}
	s.Pods[0].Node.Migrating = map[int]string{end - 1: "id-gone", end: "id-gone"}
	s.Pods[1].Node.Importing = nil
	if p := run(reshard, fsm.Active, s); len(p.Actions) != 1 || !closes(p.Actions[0], CloseSlot{Pod: "p0-0", Slot: end - 1}, CloseSlot{Pod: "p0-0", Slot: end}) {
		t.Fatalf("want both moves to a gone node closed in one step, got %v", p.Actions)
	}
}

// With two replicas per shard, the new shard's second replica is created while the first one is
// attached to the still empty primary: that primary's Joining must not hold growth back, or no
// slot would ever move in (moves wait for every replica).
func TestNewShardGrowsToTwoReplicas(t *testing.T) {
	s := newSnapshot(fsm.Upgrading, 2, 2, formed)
	s.Shards = 3
	withNewShardPod(2, 0)(&s)
	withNewShardPod(2, 1)(&s)
	withPod("p2-1", func(p *fsm.Pod) {
		p.Node.Primary, p.Node.PrimaryID, p.Node.LinkUp, p.Lifecycle = false, "id-p2-0", true, string(v1.LifecycleActive)
	})(&s)
	if p := run(pods, fsm.Upgrading, s); len(p.Actions) != 1 || p.Actions[0] != (CreatePod{Shard: 2}) {
		t.Fatalf("want the new shard's second replica created, got %v (waiting %q)", p.Actions, p.Waiting)
	}
	withNewShardPod(2, 2)(&s)
	p := run(formation, fsm.Upgrading, s)
	if len(p.Actions) != 1 || p.Actions[0] != (Replicate{Pod: "p2-2", PrimaryID: "id-p2-0"}) {
		t.Fatalf("want p2-2 attached to p2-0, got %v (waiting %q)", p.Actions, p.Waiting)
	}
}

// Scale out 3×1 → 4×1: no slot moves into the new shard until its replica has caught up; then
// they do.
func TestReshardWaitsForTargetReplicas(t *testing.T) {
	s := newSnapshot(fsm.Upgrading, 3, 1, formed)
	s.Shards = 4
	withNewShard(3)(&s)
	// The move gate (every shard has all its replicas, Active) holds first, silently: later
	// planners (cleanup) still run.
	if p := run(reshard, fsm.Upgrading, s); len(p.Actions) != 0 {
		t.Fatalf("moves into a shard without its replica: %v (waiting %q)", p.Actions, p.Waiting)
	}
	withNewShardPod(3, 1)(&s)
	withPod("p3-1", func(p *fsm.Pod) { p.Node.Primary, p.Node.PrimaryID = false, "id-p3-0" })(&s)
	if p := run(reshard, fsm.Upgrading, s); len(p.Actions) != 0 {
		t.Fatalf("moves while the new replica has not synced (link down): %v", p.Actions)
	}
	for i := range s.Pods {
		if s.Pods[i].Name == "p3-1" {
			s.Pods[i].Node.LinkUp, s.Pods[i].Node.ReplOffset = true, 100
		}
	}
	// Synced once (Active, as the joins planner marks it with its link up) but not caught up: the
	// target gate waits, and says why.
	withLifecycle("p3-1", v1.LifecycleActive)(&s)
	withPod("p3-0", func(p *fsm.Pod) { p.Node.ReplOffset = 100 + 2<<20 })(&s)
	if p := run(reshard, fsm.Upgrading, s); len(p.Actions) != 0 || !strings.Contains(p.Waiting, "caught-up replicas") {
		t.Fatalf("moves into a shard whose replica is behind: %v (waiting %q)", p.Actions, p.Waiting)
	}
	withPod("p3-0", func(p *fsm.Pod) { p.Node.ReplOffset = 100 })(&s)
	m := moves(t, run(reshard, fsm.Upgrading, s))
	if m.Moves[0].Target != "p3-0" {
		t.Fatalf("want moves into p3-0, got %+v", m.Moves[0])
	}
}

// ReshardPending is true from the edit on (before the new shard's nodes exist), while a removed
// shard still serves slots or a slot is open, and false on an even spread and on a cluster still
// being assigned its first slots.
func TestReshardPending(t *testing.T) {
	even := newSnapshot(fsm.Active, 3, 1, formed)
	if ReshardPending(even) {
		t.Fatal("pending on an even spread")
	}
	raised := newSnapshot(fsm.Active, 3, 1, formed)
	raised.Shards = 4
	if !ReshardPending(raised) {
		t.Fatal("not pending right after shards went 3 -> 4")
	}
	lowered := newSnapshot(fsm.Active, 4, 1, formed)
	lowered.Shards = 2
	if !ReshardPending(lowered) {
		t.Fatal("not pending right after shards went 4 -> 2")
	}
	open := newSnapshot(fsm.Active, 3, 1, formed, withPod("p0-0", func(p *fsm.Pod) { p.Node.Migrating = map[int]string{5: "id-p1-0"} }))
	if !ReshardPending(open) {
		t.Fatal("not pending with an open slot")
	}
	fresh := newSnapshot(fsm.Forming, 3, 1, meshed)
	if ReshardPending(fresh) {
		t.Fatal("pending on a cluster with no slot assigned yet")
	}
}

// On Valkey 9 (AtomicMoves) a batch is up to MaxAtomicSlotsPerBatch: 3 -> 4 in one batch, a
// quarter of the slots, from all three old primaries.
func TestReshardAtomicBatch(t *testing.T) {
	s := newSnapshot(fsm.Upgrading, 3, 0, formed)
	s.Shards, s.AtomicMoves = 4, true
	withNewShard(3)(&s)
	m := moves(t, run(reshard, fsm.Upgrading, s))
	if len(m.Moves) != slot.Count/4 {
		t.Fatalf("want every move of 3 -> 4 (%d) in one batch, got %d", slot.Count/4, len(m.Moves))
	}
}

// A reshard held by its move gate says why (status.message), rather than leaving the cluster
// "waiting for the cluster to agree": CI once stalled 8 minutes with no reason given.
func TestReshardHeldSaysWhy(t *testing.T) {
	s := newSnapshot(fsm.Upgrading, 2, 1, formed, withLifecycle("p1-1", v1.LifecycleJoining))
	s.Shards = 3 // a reshard is pending: every primary serves more than its new share
	p := run(reshard, fsm.Upgrading, s)
	if len(p.Actions) != 0 || !strings.Contains(p.Waiting, "p1-1 to sync before moving slots") {
		t.Fatalf("want the move held with its reason, got %v waiting %q", p.Actions, p.Waiting)
	}
}
