package plan

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/slot"
)

// drainedInto: shard from's primary gave its slots to shard to's primary and, as Valkey does
// then, made itself and its replicas replicas of it.
func drainedInto(from, to int) opt {
	return func(s *fsm.Snapshot) {
		var target *fsm.Pod
		for i := range s.Pods {
			if p := &s.Pods[i]; p.Shard == to && p.Node.Primary {
				target = p
			}
		}
		for i := range s.Pods {
			p := &s.Pods[i]
			if p.Shard != from {
				continue
			}
			if p.Node.Primary {
				target.Node.MySlots = append(target.Node.MySlots, p.Node.MySlots...)
			}
			p.Node.Primary, p.Node.PrimaryID, p.Node.MySlots = false, target.Node.ID, nil
		}
		for i := range s.Pods {
			for j := range s.Pods {
				s.Pods[i].Node.Known[s.Pods[j].Node.ID] = s.Pods[j].Node.MySlots
			}
		}
	}
}

func TestMisplacedRetiresNodesOfADrainedShardThatIsWantedAgain(t *testing.T) {
	// 3 shards wanted; shard 2 was drained into shard 1 by a scale-in to 2, then raised again.
	s := newSnapshot(fsm.Active, 3, 1, formed, drainedInto(2, 1))
	p := run(misplaced, fsm.Upgrading, s)
	if len(p.Actions) != 1 {
		t.Fatalf("actions %v, want one retirement", p.Actions)
	}
	if d, ok := p.Actions[0].(DeletePod); !ok || d.Pod != "p2-0" || d.Reason != RetireMisplaced {
		t.Fatalf("action %#v, want DeletePod p2-0 (%s)", p.Actions[0], RetireMisplaced)
	}
	// The whole chain does the same: nothing before it acts on this cluster.
	if p := Pass(fsm.Upgrading, s); len(p.Actions) != 1 || p.Actions[0] != (DeletePod{Pod: "p2-0", Reason: RetireMisplaced}) {
		t.Fatalf("chain planned %v (waiting %q), want the retirement of p2-0", p.Actions, p.Waiting)
	}
}

func TestMisplacedLeavesOtherClustersAlone(t *testing.T) {
	cases := map[string]fsm.Snapshot{
		"formed": newSnapshot(fsm.Active, 3, 1, formed),
		"removed shard": func() fsm.Snapshot {
			s := newSnapshot(fsm.Active, 3, 1, formed, drainedInto(2, 1))
			s.Shards = 2
			return s
		}(),
		// A replica of a dead primary of its own shard: the failover planner's case.
		"orphan replica": newSnapshot(fsm.Active, 3, 1, formed, withGone("p1-0")),
		// A new shard: its primary serves no slot yet, its replica replicates it.
		"new shard": newSnapshot(fsm.Active, 3, 1, formed, func(s *fsm.Snapshot) {
			for i := range s.Pods {
				if s.Pods[i].Shard == 2 && s.Pods[i].Node.Primary {
					s.Pods[0].Node.MySlots = append(s.Pods[0].Node.MySlots, s.Pods[i].Node.MySlots...)
					s.Pods[i].Node.MySlots = slot.Set{}
				}
			}
		}),
	}
	for name, s := range cases {
		if p := run(misplaced, fsm.Active, s); len(p.Actions) != 0 {
			t.Errorf("%s: planned %v", name, p.Actions)
		}
	}
}

// seed4242 is the TLS cluster of the chaos run of seed 4242 on the pass that retired vc-fdf29
// (09:20:44, ../shared/evidence/chaos-seed-4242), as its log tells it. A 3×1 in a roll: shard
// 0's new primary vc-bd2c1 had the new vc-fdf29 as its replica, and shard 1 had two replicas
// (the old vc-83e8c and the roll's surge node vc-8f224). vc-fdf29's network was cut for 15 s:
// with no working replica left, vc-bd2c1 was an orphaned primary, and Valkey moved vc-8f224 (a
// replica of shard 1, which had two) to it. Kubernetes node-b then stopped with vc-bd2c1,
// vc-83e8c and vc-d65cd; Valkey promoted vc-8f224, which served shard 0's slots 0-5461 with
// vc-fdf29, back from its cut, as its one replica. The operator retired vc-fdf29 ("its own shard
// was drained"); two minutes later the chaos run killed vc-8f224, the last copy of 0-5461.
func seed4242(fdf29 func(*fsm.Node)) fsm.Snapshot {
	s := fsm.Snapshot{State: fsm.Upgrading, Shards: 3, ReplicasPerShard: 1, SpecHash: "new", FormedAt: time.Unix(1, 0), Now: time.Unix(1000, 0)}
	spread := slot.EvenSpread(3)
	node := func(id string, slots slot.Set) *fsm.Node {
		return &fsm.Node{Reachable: true, ID: id, Primary: len(slots) > 0, MySlots: slots, ClusterStateOK: true, SlotsAssigned: slot.Count, ReplOffset: 90_000}
	}
	live := []fsm.Pod{
		{Name: "vc-2a538", Shard: 1, SpecHash: "old", Node: node("9b82f0e3", slot.Set{spread[1]})},
		{Name: "vc-3da7d", Shard: 2, SpecHash: "old", Node: node("9859d441", slot.Set{spread[2]})},
		{Name: "vc-8f224", Shard: 1, SpecHash: "new", Node: node("7069445f", slot.Set{spread[0]})},
		{Name: "vc-fdf29", Shard: 0, SpecHash: "new", Node: node("786086b5", nil)},
	}
	fdf := live[3].Node
	fdf.PrimaryID, fdf.LinkUp, fdf.ReplOffset = "7069445f", true, 89_900
	if fdf29 != nil {
		fdf29(fdf)
	}
	lost := []fsm.Pod{
		{Name: "vc-83e8c", Shard: 1, SpecHash: "old", LastNodeID: "9933e269"},
		{Name: "vc-bd2c1", Shard: 0, SpecHash: "new", LastNodeID: "b039f05b"},
		{Name: "vc-d65cd", Shard: 2, SpecHash: "old", LastNodeID: "2a3f90a1"},
	}
	known := map[string]slot.Set{}
	for _, p := range live {
		known[p.Node.ID] = p.Node.MySlots
	}
	for _, p := range lost {
		known[p.LastNodeID] = nil
	}
	for i := range live {
		live[i].Phase, live[i].IP, live[i].Lifecycle, live[i].LastNodeID = fsm.PodRunning, fmt.Sprintf("10.246.0.%d", 20+i), string(v1.LifecycleActive), live[i].Node.ID
		live[i].Node.Known = known
	}
	for i := range lost {
		lost[i].Phase, lost[i].NodeLost, lost[i].Lifecycle = fsm.PodRunning, true, string(v1.LifecycleActive)
		lost[i].Node = &fsm.Node{Reachable: false, Err: "connect: connection refused"}
	}
	s.Pods = append(live, lost...)
	sort.Slice(s.Pods, func(i, j int) bool { return s.Pods[i].Name < s.Pods[j].Name })
	agreeViews(&s)
	return s
}

// The snapshot that led to the loss: vc-fdf29 is never retired. Its shard's slots are served by a
// node of shard 1, which has a primary of its own: a graceful failover gives them back to
// vc-fdf29, and vc-8f224, a replica then, holds the second copy.
func TestMisplacedSeed4242RealignsInsteadOfRetiringTheLastReplica(t *testing.T) {
	s := seed4242(nil)
	want := Failover{Pod: "vc-fdf29", PrimaryID: "7069445f", Shard: 0, Purpose: Realign}
	if p := run(misplaced, fsm.Upgrading, s); len(p.Actions) != 1 || p.Actions[0] != want {
		t.Fatalf("planned %v (waiting %q), want %v", p.Actions, p.Waiting, want)
	}
	// The whole pass: the lost pods' replacements, then the failover, and no retirement.
	p := Pass(fsm.Upgrading, s)
	if p.Err != nil {
		t.Fatal(p.Err)
	}
	if d := p.Disruptive(); d != want {
		t.Fatalf("the pass's disruptive action is %v, want %v (actions %v)", d, want, p.Actions)
	}
	if f := NextFailover(s, p); f == nil || f.Pod != "vc-fdf29" || f.PrimaryID != "7069445f" {
		t.Fatalf("intent to persist %+v, want the failover to vc-fdf29", f)
	}
	// While the intent is young and vc-fdf29 still follows vc-8f224, nothing more.
	s.Failover = &fsm.FailoverIntent{Shard: 0, Pod: "vc-fdf29", PrimaryID: "7069445f", StartedAt: s.Now.Add(-2 * time.Second)}
	if p := run(misplaced, fsm.Upgrading, s); len(p.Actions) != 0 || p.Waiting == "" {
		t.Fatalf("with the failover in flight: planned %v (waiting %q)", p.Actions, p.Waiting)
	}
}

// The same snapshot with vc-fdf29 not caught up (just back from its cut, its link down): it is
// not a copy to fail over to, and still never retired. The hold is reported, and the later
// planners go on.
func TestMisplacedSeed4242HoldsWhileTheReplicaCatchesUp(t *testing.T) {
	s := seed4242(func(n *fsm.Node) { n.LinkUp = false })
	p := run(misplaced, fsm.Upgrading, s)
	if len(p.Actions) != 0 || !strings.Contains(p.Waiting, "vc-8f224 serves its slots") {
		t.Fatalf("planned %v (waiting %q), want a hold naming vc-8f224", p.Actions, p.Waiting)
	}
	later := Planner{Name: "later", Plan: func(Input) Step { return Step{Actions: []Action{CreatePod{Shard: 2}}} }}
	if p := (Chain{misplaced, later}).Run(Input{State: fsm.Upgrading, Snapshot: s}); len(p.Actions) != 1 {
		t.Fatalf("a hold stopped the chain: %v", p.Actions)
	}
	for _, a := range Pass(fsm.Upgrading, s).Actions {
		if a.Disruptive() {
			t.Fatalf("planned %v", a)
		}
	}
}

// After the realignment: vc-fdf29 serves shard 0's slots and vc-8f224 (shard 1) replicates it.
// vc-8f224 leaves only once shard 0 has another caught-up replica (its replacement, vc-a09aa).
func TestMisplacedRetiresTheFormerPrimaryOnceItsCopyIsNotNeeded(t *testing.T) {
	realigned := func(a09aa func(*fsm.Node)) fsm.Snapshot {
		s := seed4242(nil)
		for i := range s.Pods {
			switch n := s.Pods[i].Node; s.Pods[i].Name {
			case "vc-fdf29":
				n.Primary, n.PrimaryID, n.MySlots, n.LinkUp = true, "", slot.Set{slot.EvenSpread(3)[0]}, false
			case "vc-8f224":
				n.Primary, n.PrimaryID, n.MySlots, n.LinkUp = false, "786086b5", nil, true
			}
		}
		n := &fsm.Node{Reachable: true, ID: "81241dbe", PrimaryID: "786086b5", LinkUp: true, ReplOffset: 89_950, Known: s.Pods[0].Node.Known}
		a09aa(n)
		s.Pods = append(s.Pods, fsm.Pod{Name: "vc-a09aa", Shard: 0, Phase: fsm.PodRunning, IP: "10.246.0.27", SpecHash: "new", Lifecycle: string(v1.LifecycleActive), Node: n})
		for i := range s.Pods {
			if s.Pods[i].Node.Reachable {
				s.Pods[i].Node.Known["81241dbe"], s.Pods[i].Node.Known["786086b5"], s.Pods[i].Node.Known["7069445f"] = nil, slot.Set{slot.EvenSpread(3)[0]}, nil
			}
		}
		sort.Slice(s.Pods, func(i, j int) bool { return s.Pods[i].Name < s.Pods[j].Name })
		return s
	}
	syncing := realigned(func(n *fsm.Node) { n.LinkUp, n.SyncInProgress, n.ReplOffset = false, true, 0 })
	if p := run(misplaced, fsm.Upgrading, syncing); len(p.Actions) != 0 || !strings.Contains(p.Waiting, "too few other caught-up replicas") {
		t.Fatalf("with vc-a09aa syncing: planned %v (waiting %q), want a hold", p.Actions, p.Waiting)
	}
	synced := realigned(func(*fsm.Node) {})
	want := DeletePod{Pod: "vc-8f224", Reason: RetireMisplaced}
	if p := run(misplaced, fsm.Upgrading, synced); len(p.Actions) != 1 || p.Actions[0] != want {
		t.Fatalf("with vc-a09aa caught up: planned %v (waiting %q), want %v", p.Actions, p.Waiting, want)
	}
}

// A replica that moved to another shard's primary while its own shard still serves (Valkey's
// replica migration to an orphaned primary) goes home by retirement, but only while the primary
// it follows keeps a caught-up replica of its own.
func TestMisplacedMigratedReplica(t *testing.T) {
	migrated := func(opts ...opt) fsm.Snapshot {
		// 2×2: p1-2 follows shard 0's primary.
		return newSnapshot(fsm.Active, 2, 2, append([]opt{formed, withPod("p1-2", func(p *fsm.Pod) { p.Node.PrimaryID = "id-p0-0" })}, opts...)...)
	}
	want := DeletePod{Pod: "p1-2", Reason: RetireMisplaced}
	if p := run(misplaced, fsm.Active, migrated()); len(p.Actions) != 1 || p.Actions[0] != want {
		t.Fatalf("planned %v (waiting %q), want %v", p.Actions, p.Waiting, want)
	}
	// One of shard 0's own replicas is cut from its primary: without p1-2, shard 0 would have one
	// caught-up copy besides its primary where replicasPerShard asks for two. p1-2 stays until it
	// catches up again.
	down := func(name string) opt { return withPod(name, func(p *fsm.Pod) { p.Node.LinkUp = false }) }
	if p := run(misplaced, fsm.Active, migrated(down("p0-1"))); len(p.Actions) != 0 || !strings.Contains(p.Waiting, "too few") {
		t.Fatalf("one of shard 0's replicas down: planned %v (waiting %q), want a hold", p.Actions, p.Waiting)
	}
	// Unknown is not absent: a node that does not answer holds the planner back.
	if p := run(misplaced, fsm.Active, migrated(withCut("p0-1"))); len(p.Actions) != 0 {
		t.Fatalf("a node silent: planned %v", p.Actions)
	}
}

// Break test: a replica of shard 1 promoted over shard 0's slots, then both nodes of shard 0
// killed. Shard 0's replacements are empty; p1-1 (shard 1) serves shard 0's slots alone, and
// nothing of shard 0 follows it. The first empty node of shard 0 replicates it (rule 5), then
// takes the slots back (rule 2).
func TestMisplacedAdoptsAShardWhoseNodesAreGone(t *testing.T) {
	s := newSnapshot(fsm.Active, 3, 1, formed, func(s *fsm.Snapshot) {
		spread := slot.EvenSpread(3)
		for i := range s.Pods {
			p := &s.Pods[i]
			switch p.Name {
			case "p1-1": // promoted over shard 0's slots
				p.Node.Primary, p.Node.PrimaryID, p.Node.MySlots, p.Node.LinkUp = true, "", slot.Set{spread[0]}, false
			case "p0-0", "p0-1": // replacements: empty, the second attached to the first
				p.Node.MySlots, p.Lifecycle = nil, string(v1.LifecycleJoining)
				p.Node.Primary, p.Node.PrimaryID = p.Name == "p0-0", map[bool]string{true: "", false: "id-p0-0"}[p.Name == "p0-0"]
			}
		}
		for i := range s.Pods {
			for j := range s.Pods {
				s.Pods[i].Node.Known[s.Pods[j].Node.ID] = s.Pods[j].Node.MySlots
			}
		}
	})
	want := Replicate{Pod: "p0-0", PrimaryID: "id-p1-1"}
	if p := run(misplaced, fsm.Upgrading, s); len(p.Actions) != 1 || p.Actions[0] != want {
		t.Fatalf("planned %v (waiting %q), want %v", p.Actions, p.Waiting, want)
	}
	// Attached and caught up: the graceful failover gives the slots back.
	for i := range s.Pods {
		if s.Pods[i].Name == "p0-0" {
			s.Pods[i].Node.Primary, s.Pods[i].Node.PrimaryID, s.Pods[i].Node.LinkUp, s.Pods[i].Node.ReplOffset = false, "id-p1-1", true, 500
		}
	}
	agreeViews(&s)
	if p := run(misplaced, fsm.Upgrading, s); len(p.Actions) != 1 || p.Actions[0] != (Failover{Pod: "p0-0", PrimaryID: "id-p1-1", Shard: 0, Purpose: Realign}) {
		t.Fatalf("planned %v (waiting %q), want the failover to p0-0", p.Actions, p.Waiting)
	}
	// A new shard (scale-out) whose slots nobody else serves twice is left to the reshard
	// planner.
	if p := run(misplaced, fsm.Active, newSnapshot(fsm.Active, 3, 1, formed)); len(p.Actions) != 0 {
		t.Fatalf("planned %v on a formed cluster", p.Actions)
	}
}
