package plan

import (
	"strings"
	"testing"
	"time"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/slot"
)

// outdated: every pod was built from spec "old"; the spec now resolves to "new".
func outdated(s *fsm.Snapshot) {
	s.SpecHash = "new"
	for i := range s.Pods {
		s.Pods[i].SpecHash = "old"
	}
}

// withReplica adds a running pod name of the current spec to shard, a replica of the shard's
// first pod, known to every node; synced and Active when synced is true, else Joining and loading.
func withReplica(name string, shard int, synced bool) opt {
	return func(s *fsm.Snapshot) {
		primary := ""
		for _, p := range s.Pods {
			if p.Shard == shard && p.Node != nil && len(p.Node.MySlots) > 0 {
				primary = p.Node.ID
			}
		}
		p := fsm.Pod{Name: name, Shard: shard, Phase: fsm.PodRunning, IP: "10.244.9." + name[len(name)-1:], SpecHash: s.SpecHash,
			Lifecycle: string(v1.LifecycleJoining), LastNodeID: "id-" + name,
			Node: &fsm.Node{Reachable: true, ID: "id-" + name, PrimaryID: primary, ClusterStateOK: true, SlotsAssigned: slot.Count,
				Known: map[string]slot.Set{}, SyncInProgress: !synced}}
		if synced {
			p.Lifecycle, p.Node.LinkUp, p.Node.ReplOffset = string(v1.LifecycleActive), true, 1000
		}
		s.Pods = append(s.Pods, p)
		for i := range s.Pods {
			for j := range s.Pods {
				s.Pods[i].Node.Known[s.Pods[j].Node.ID] = s.Pods[j].Node.MySlots
			}
		}
		sortPods(s.Pods)
		agreeViews(s)
	}
}

// withPrimaryOffset sets every primary's replication offset (replicas are at 1000).
func withPrimaryOffset(off int64) opt {
	return func(s *fsm.Snapshot) {
		for i := range s.Pods {
			if n := s.Pods[i].Node; n != nil && n.Primary {
				n.ReplOffset = off
			}
		}
	}
}

// swapped: pod becomes its shard's primary, every other pod of the shard its replica (a
// failover landed).
func swapped(name string) opt {
	return func(s *fsm.Snapshot) {
		var to *fsm.Pod
		for i := range s.Pods {
			if s.Pods[i].Name == name {
				to = &s.Pods[i]
			}
		}
		var slots slot.Set
		for i := range s.Pods {
			if p := &s.Pods[i]; p.Shard == to.Shard && len(p.Node.MySlots) > 0 {
				slots = p.Node.MySlots
			}
		}
		for i := range s.Pods {
			p := &s.Pods[i]
			if p.Shard != to.Shard {
				continue
			}
			if p.Name == name {
				p.Node.Primary, p.Node.PrimaryID, p.Node.MySlots = true, "", slots
			} else {
				p.Node.Primary, p.Node.PrimaryID, p.Node.MySlots, p.Node.LinkUp, p.Node.ReplOffset = false, to.Node.ID, nil, true, 1000
			}
		}
		for i := range s.Pods {
			for j := range s.Pods {
				s.Pods[i].Node.Known[s.Pods[j].Node.ID] = s.Pods[j].Node.MySlots
			}
		}
	}
}

// departed: the pod left and every node forgot its id.
func departed(name string) opt {
	return func(s *fsm.Snapshot) {
		withGone(name)(s)
		for i := range s.Pods {
			if n := s.Pods[i].Node; n != nil {
				delete(n.Known, "id-"+name)
			}
		}
	}
}

func retired(t *testing.T, p Plan, want, reason string) {
	t.Helper()
	if len(p.Actions) != 1 {
		t.Fatalf("want retire %s, got %v (waiting %q, blocked %q)", want, p.Actions, p.Waiting, p.Blocked)
	}
	if d, ok := p.Actions[0].(DeletePod); !ok || d.Pod != want || d.Reason != reason {
		t.Fatalf("want retire %s (%s), got %v", want, reason, p.Actions[0])
	}
}

// A 1×1 shard rolls as the docs describe: a new replica joins, an outdated replica leaves once
// the shard is over its target, the outdated primary hands over with one graceful failover to an
// up-to-date replica, and leaves as an excess replica. The shard never has fewer than two copies.
func TestRollOneShard(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	base := []opt{formed, outdated, withPrimaryOffset(1000)}
	snap := func(opts ...opt) fsm.Snapshot {
		s := newSnapshot(fsm.Upgrading, 1, 1, append(append([]opt{}, base...), opts...)...)
		s.Now = now
		return s
	}

	p := run(upgrade, fsm.Upgrading, snap())
	if len(p.Actions) != 1 || p.Actions[0] != (CreatePod{Shard: 0}) {
		t.Fatalf("step 1: want one new node, got %v", p.Actions)
	}
	if p := run(upgrade, fsm.Upgrading, snap(withReplica("p0-2", 0, false))); len(p.Actions) != 0 || !strings.Contains(p.Waiting, "p0-2") {
		t.Fatalf("step 2: a loading replica is awaited, got %v waiting %q", p.Actions, p.Waiting)
	}
	retired(t, run(upgrade, fsm.Upgrading, snap(withReplica("p0-2", 0, true))), "p0-1", RetireOutdated)

	s := snap(withReplica("p0-2", 0, true), departed("p0-1"))
	if p := run(upgrade, fsm.Upgrading, s); len(p.Actions) != 1 || p.Actions[0] != (CreatePod{Shard: 0}) {
		t.Fatalf("step 4: at its target with an outdated primary, the shard gets another new node first, got %v", p.Actions)
	}
	s = snap(withReplica("p0-2", 0, true), departed("p0-1"), withReplica("p0-3", 0, true), withOffsets(map[string]int64{"p0-3": 1010}), withPrimaryOffset(1010))
	p = run(upgrade, fsm.Upgrading, s)
	want := Failover{Pod: "p0-3", PrimaryID: "id-p0-0", Shard: 0, Purpose: Roll}
	if len(p.Actions) != 1 || p.Actions[0] != want {
		t.Fatalf("step 5: want %v, got %v", want, p.Actions)
	}
	if f := NextFailover(s, p); f == nil || f.PrimaryID != "id-p0-0" || f.Pod != "p0-3" {
		t.Fatalf("the roll's failover intent is persisted before it is issued, got %+v", f)
	}
	s.Failover = &fsm.FailoverIntent{Shard: 0, Pod: "p0-3", PrimaryID: "id-p0-0", StartedAt: now.Add(-3 * time.Second)}
	if p := run(upgrade, fsm.Upgrading, s); len(p.Actions) != 0 {
		t.Fatalf("step 6: a failover issued 3 s ago is awaited, not issued twice; got %v", p.Actions)
	}
	s = snap(withReplica("p0-2", 0, true), departed("p0-1"), withReplica("p0-3", 0, true), swapped("p0-3"))
	retired(t, run(upgrade, fsm.Upgrading, s), "p0-0", RetireOutdated)

	s = snap(withReplica("p0-2", 0, true), departed("p0-1"), withReplica("p0-3", 0, true), swapped("p0-3"), departed("p0-0"))
	if p := Pass(fsm.Upgrading, s); len(p.Actions) != 0 || s.Changing() != "" {
		t.Fatalf("done: want nothing left to do, got %v (%s)", p.Actions, s.Changing())
	}
}

// A Valkey 9 primary the roll demoted is kept MovedHold after its failover before it is retired,
// so that clients learn the new owner from its MOVED answers (9.x pods have no preStop hold); an
// 8.x one (its preStop hook holds it) and one the operator never saw serve (after a restart) go
// at once. A removed shard's emptied primary is held the same way.
func TestRetireHeldWhileClientsLearnTheNewOwner(t *testing.T) {
	now := time.Date(2026, 12, 3, 21, 0, 0, 0, time.UTC)
	snap := func(version string, served time.Duration) fsm.Snapshot {
		s := newSnapshot(fsm.Upgrading, 1, 1, formed, outdated, withPrimaryOffset(1000),
			withReplica("p0-2", 0, true), departed("p0-1"), withReplica("p0-3", 0, true), swapped("p0-3"),
			withVersion(version, "p0-0", "p0-2", "p0-3"))
		s.Now = now
		if served > 0 {
			withPod("p0-0", func(p *fsm.Pod) { p.ServedAt = now.Add(-served) })(&s)
		}
		return s
	}
	p := run(upgrade, fsm.Upgrading, snap("9.1.2", time.Second))
	if len(p.Actions) != 1 || p.Actions[0] != (Detach{Pod: "p0-0"}) || !strings.Contains(p.Waiting, "clients to learn") {
		t.Fatalf("a 9.x primary demoted 1 s ago: want it detached and held, got %v waiting %q", p.Actions, p.Waiting)
	}
	// Detach marked it Leaving: the next pass finishes its retirement, after the hold too.
	leaving := snap("9.1.2", 2*time.Second)
	withLifecycle("p0-0", v1.LifecycleLeaving)(&leaving)
	if p := run(upgrade, fsm.Upgrading, leaving); len(p.Actions) != 0 || !strings.Contains(p.Waiting, "clients to learn") {
		t.Fatalf("a detached node within the hold: want it held, got %v waiting %q", p.Actions, p.Waiting)
	}
	leaving.Now = now.Add(2 * time.Second)
	retired(t, run(upgrade, fsm.Upgrading, leaving), "p0-0", RetireOutdated)
	retired(t, run(upgrade, fsm.Upgrading, snap("9.1.2", MovedHold)), "p0-0", RetireOutdated)
	retired(t, run(upgrade, fsm.Upgrading, snap("8.0.1", time.Second)), "p0-0", RetireOutdated)
	retired(t, run(upgrade, fsm.Upgrading, snap("9.1.2", 0)), "p0-0", RetireOutdated)

	removed := newSnapshot(fsm.Upgrading, 2, 0, formed, withVersion("9.1.2", "p0-0", "p1-0"))
	removed.Shards, removed.Now = 1, now
	for i := range removed.Pods {
		p := &removed.Pods[i]
		if p.Shard == 1 {
			p.Node.MySlots, p.ServedAt = nil, now.Add(-time.Second)
		} else {
			p.Node.MySlots = slot.Set{{Start: 0, End: slot.Count - 1}}
		}
	}
	for i := range removed.Pods {
		for j := range removed.Pods {
			removed.Pods[i].Node.Known[removed.Pods[j].Node.ID] = removed.Pods[j].Node.MySlots
		}
	}
	if p := run(reshard, fsm.Upgrading, removed); len(p.Actions) != 0 || !strings.Contains(p.Waiting, "clients to learn") {
		t.Fatalf("a removed shard's primary emptied 1 s ago: want it held, got %v waiting %q", p.Actions, p.Waiting)
	}
	removed.Now = now.Add(MovedHold)
	if p := run(reshard, fsm.Upgrading, removed); len(p.Actions) != 1 || p.Actions[0] != (DeletePod{Pod: "p1-0", Reason: RetireRemovedShard}) {
		t.Fatalf("after the hold: want p1-0 retired, got %v", p.Actions)
	}
}

// A shard without replicas gets a surge replica before its primary hands over: never wiped.
func TestRollWithoutReplicas(t *testing.T) {
	s := newSnapshot(fsm.Upgrading, 2, 0, formed, outdated)
	if p := run(upgrade, fsm.Upgrading, s); len(p.Actions) != 1 || p.Actions[0] != (CreatePod{Shard: 0}) {
		t.Fatalf("want a surge node in shard 0 first, got %v", p.Actions)
	}
	s = newSnapshot(fsm.Upgrading, 2, 0, formed, outdated, withReplica("p0-9", 0, true), withPrimaryOffset(1000))
	p := run(upgrade, fsm.Upgrading, s)
	if want := (Failover{Pod: "p0-9", PrimaryID: "id-p0-0", Shard: 0, Purpose: Roll}); len(p.Actions) != 1 || p.Actions[0] != want {
		t.Fatalf("want %v, got %v", want, p.Actions)
	}
	// Shard 1 waits: one shard in motion at a time.
	for _, a := range p.Actions {
		if c, ok := a.(CreatePod); ok && c.Shard == 1 {
			t.Fatalf("shard 1 moved while shard 0 was in motion: %v", p.Actions)
		}
	}
}

// A replica that trails its primary by more than CatchUpBytes, or still loads its sync, is not
// failed over to and lets no other copy leave.
func TestRollWaitsForCatchUp(t *testing.T) {
	s := newSnapshot(fsm.Upgrading, 1, 0, formed, outdated, withReplica("p0-9", 0, true), withPrimaryOffset(1000+fsm.CatchUpBytes+1))
	if p := run(upgrade, fsm.Upgrading, s); len(p.Actions) != 0 || p.Waiting == "" {
		t.Fatalf("a lagging replica must be awaited, got %v", p.Actions)
	}
}

// The shard in motion is finished before another starts, even when the spec changes again.
func TestShardInMotion(t *testing.T) {
	s := newSnapshot(fsm.Upgrading, 3, 1, formed, outdated, withPrimaryOffset(1000), withReplica("p2-9", 2, true))
	retired(t, run(upgrade, fsm.Upgrading, s), "p2-1", RetireOutdated)
	// Scale-down: the shard with the most surplus first, then by index; never a primary.
	s = newSnapshot(fsm.Active, 2, 2, formed, withOffsets(map[string]int64{"p1-1": 5}))
	s.ReplicasPerShard, s.SpecHash = 0, "h"
	for i := range s.Pods {
		s.Pods[i].SpecHash = "h"
	}
	retired(t, run(upgrade, fsm.Active, s), "p0-2", RetireSurplus)
	s = newSnapshot(fsm.Active, 2, 2, formed, departed("p0-2"), withOffsets(map[string]int64{"p1-1": 5}))
	s.ReplicasPerShard, s.SpecHash = 0, "h"
	for i := range s.Pods {
		s.Pods[i].SpecHash = "h"
	}
	retired(t, run(upgrade, fsm.Active, s), "p1-1", RetireSurplus)
}

// A replacement that cannot be scheduled or fails on start stalls the roll with the reason; once
// the spec is reverted (the stuck node is then the outdated one), it is removed first.
func TestRollStalls(t *testing.T) {
	pending := func(hash, reason string) opt {
		return func(s *fsm.Snapshot) {
			s.Pods = append(s.Pods, fsm.Pod{Name: "p0-9", Shard: 0, Phase: fsm.PodPending, SpecHash: hash, Unschedulable: reason, Lifecycle: string(v1.LifecycleJoining)})
		}
	}
	s := newSnapshot(fsm.Upgrading, 1, 1, formed, outdated, pending("new", "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."))
	p := Pass(fsm.Upgrading, s)
	if !strings.Contains(p.Waiting, "p0-9 cannot be scheduled: 0/3 nodes are available") || len(p.Actions) != 0 || p.Blocked != "" {
		t.Fatalf("want the roll stalled on the scheduler's reason (not a start failure), got %v waiting %q blocked %q", p.Actions, p.Waiting, p.Blocked)
	}
	reverted := newSnapshot(fsm.Upgrading, 1, 1, formed, pending("bad", "0/3 nodes are available"))
	reverted.SpecHash = ""
	for i := range reverted.Pods {
		if reverted.Pods[i].SpecHash == "" {
			reverted.Pods[i].SpecHash = "good"
		}
	}
	reverted.SpecHash = "good"
	retired(t, Pass(fsm.Upgrading, reverted), "p0-9", RetireStuck)

	failed := func(name string) opt {
		return func(s *fsm.Snapshot) {
			s.Pods = append(s.Pods, fsm.Pod{Name: name, Shard: 0, Phase: fsm.PodFailed, SpecHash: "new", StartFailure: true, Exited: true, Failure: "Error, exit code 1"})
		}
	}
	s = newSnapshot(fsm.Upgrading, 1, 1, formed, outdated, failed("p0-7"), failed("p0-8"))
	if p := Pass(fsm.Upgrading, s); !strings.Contains(p.Blocked, "exit code 1") || len(p.Actions) != 0 {
		t.Fatalf("want the roll blocked with the exit code, got %v blocked %q", p.Actions, p.Blocked)
	}
}

// Changing is what Upgrading means: nodes of an older spec, a shard over or under its replica
// count; a failed node waiting for its replacement is healing, not a change.
func TestChanging(t *testing.T) {
	for name, c := range map[string]struct {
		s    fsm.Snapshot
		want string
	}{
		"steady":        {newSnapshot(fsm.Active, 2, 1, formed), ""},
		"healing":       {newSnapshot(fsm.Active, 2, 1, formed, withFailed("p0-1")), ""},
		"outdated":      {newSnapshot(fsm.Active, 2, 1, formed, outdated), "rolling upgrade"},
		"scaled down":   {func() fsm.Snapshot { s := newSnapshot(fsm.Active, 2, 1, formed); s.ReplicasPerShard = 0; return s }(), "shard 0 has 2 nodes, 1 wanted"},
		"scaled up":     {func() fsm.Snapshot { s := newSnapshot(fsm.Active, 2, 1, formed); s.ReplicasPerShard = 2; return s }(), "shard 0 has 2 nodes, 3 wanted"},
		"shard removed": {func() fsm.Snapshot { s := newSnapshot(fsm.Active, 2, 1, formed); s.Shards = 1; return s }(), "belongs to shard 1"},
	} {
		if got := c.s.Changing(); (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: Changing() = %q, want %q", name, got, c.want)
		}
	}
}

// An operator stopped between marking a node Leaving and deleting it: the next pass finishes the
// retirement before anything else of the roll, and never retires a node that serves slots.
func TestInterruptedRetirementIsFinished(t *testing.T) {
	s := newSnapshot(fsm.Upgrading, 1, 2, formed, withLifecycle("p0-2", v1.LifecycleLeaving))
	s.ReplicasPerShard, s.SpecHash = 1, "h"
	for i := range s.Pods {
		s.Pods[i].SpecHash = "h"
	}
	retired(t, run(upgrade, fsm.Upgrading, s), "p0-2", RetireInterrupted)
	// Leaving but promoted since (it serves the slots): not retired here.
	s = newSnapshot(fsm.Upgrading, 1, 1, formed, withLifecycle("p0-0", v1.LifecycleLeaving))
	s.SpecHash = "h"
	for i := range s.Pods {
		s.Pods[i].SpecHash = "h"
	}
	if p := run(upgrade, fsm.Upgrading, s); len(p.Actions) != 0 {
		t.Fatalf("a Leaving node that serves slots was retired: %v", p.Actions)
	}
}

// A roll's handover is an election too: while a voting primary still sees the new replica as
// anything but a replica of the shard's primary (it joined a moment ago), the handover waits
// rather than be refused and have the replica's next election barred for 20 s.
func TestRollHandoverWaitsForTheViews(t *testing.T) {
	s := newSnapshot(fsm.Upgrading, 2, 0, formed, outdated, withReplica("p0-9", 0, true), withPrimaryOffset(1000))
	for i := range s.Pods {
		if s.Pods[i].Name == "p1-0" {
			delete(s.Pods[i].Node.Follows, "id-p0-9")
		}
	}
	p := run(upgrade, fsm.Upgrading, s)
	if len(p.Actions) != 0 || !strings.Contains(p.Waiting, "waiting for the primaries to see p0-9 as a replica") {
		t.Fatalf("got %v (waiting %q), want a wait for the views", p.Actions, p.Waiting)
	}
}
