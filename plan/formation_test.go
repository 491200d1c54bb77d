package plan

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/slot"
)

func TestFormation(t *testing.T) {
	ip := func(s fsm.Snapshot, name string) string {
		for _, p := range s.Pods {
			if p.Name == name {
				return p.IP
			}
		}
		return ""
	}
	t.Run("forming meets every node from the seed", func(t *testing.T) {
		s := newSnapshot(fsm.Forming, 3, 1)
		p := run(formation, fsm.Forming, s)
		var want []Action
		for _, name := range []string{"p0-1", "p1-0", "p1-1", "p2-0", "p2-1"} {
			want = append(want, Meet{Pod: "p0-0", IP: ip(s, name), NodeID: "id-" + name})
		}
		if !reflect.DeepEqual(p.Actions, want) || p.Waiting != "waiting for nodes to meet" {
			t.Fatalf("%v %q", p.Actions, p.Waiting)
		}
	})
	t.Run("a meet under way is not sent again", func(t *testing.T) {
		s := newSnapshot(fsm.Forming, 2, 0)
		s.Pods[0].Node.Meeting = map[string]bool{ip(s, "p1-0"): true}
		p := run(formation, fsm.Forming, s)
		if len(p.Actions) != 0 || p.Waiting != "waiting for nodes to meet" {
			t.Fatalf("%v %q", p.Actions, p.Waiting)
		}
	})
	t.Run("seed knows all: nodes meet the ones they miss", func(t *testing.T) {
		s := newSnapshot(fsm.Forming, 3, 1, meshed)
		delete(s.Pods[2].Node.Known, "id-p2-1") // p1-0 has not heard of p2-1 yet
		p := run(formation, fsm.Forming, s)
		if !reflect.DeepEqual(p.Actions, []Action{Meet{Pod: "p1-0", IP: s.Pods[5].IP, NodeID: "id-p2-1", Mesh: true}}) {
			t.Fatal(p.Actions)
		}
	})
	t.Run("a replacement is introduced once, by a member, even when it sorts first", func(t *testing.T) {
		s := newSnapshot(fsm.Active, 3, 1, formed, withFailed("p1-1"))
		s.Pods = append([]fsm.Pod{{Name: "a-new", Shard: 1, Phase: fsm.PodRunning, IP: "10.244.9.9",
			Node: &fsm.Node{Reachable: true, ID: "id-new", Primary: true, Known: map[string]slot.Set{"id-new": nil}}}}, s.Pods...)
		p := run(formation, fsm.Active, s)
		if !reflect.DeepEqual(p.Actions, []Action{Meet{Pod: "p0-0", IP: "10.244.9.9", NodeID: "id-new"}}) {
			t.Fatal(p.Actions)
		}
	})
	t.Run("meshed: slots to one pod per shard", func(t *testing.T) {
		p := run(formation, fsm.Forming, newSnapshot(fsm.Forming, 3, 1, meshed))
		want := []Action{
			AddSlots{Pod: "p0-0", Shard: 0, Slots: slot.Set{{Start: 0, End: 5461}}},
			AddSlots{Pod: "p1-0", Shard: 1, Slots: slot.Set{{Start: 5462, End: 10922}}},
			AddSlots{Pod: "p2-0", Shard: 2, Slots: slot.Set{{Start: 10923, End: 16383}}},
		}
		if !reflect.DeepEqual(p.Actions, want) || p.Waiting != "waiting for slot assignment to propagate" {
			t.Fatalf("%v", p.Actions)
		}
	})
	t.Run("restart mid-assignment never assigns a slot twice", func(t *testing.T) {
		s := newSnapshot(fsm.Forming, 3, 1, meshed)
		// p1-0 got its slots, but only p1-0 itself knows yet; p0-0 claimed part of its range on
		// another node's view (a stale gossip of an earlier attempt).
		s.Pods[2].Node.MySlots = slot.Set{{Start: 5462, End: 10922}}
		s.Pods[2].Node.Known["id-p1-0"] = slot.Set{{Start: 5462, End: 10922}}
		s.Pods[4].Node.Known["id-p0-0"] = slot.Set{{Start: 0, End: 99}}
		p := run(formation, fsm.Forming, s)
		want := []Action{
			AddSlots{Pod: "p0-0", Shard: 0, Slots: slot.Set{{Start: 100, End: 5461}}},
			AddSlots{Pod: "p2-0", Shard: 2, Slots: slot.Set{{Start: 10923, End: 16383}}},
		}
		if !reflect.DeepEqual(p.Actions, want) {
			t.Fatalf("%v", p.Actions)
		}
	})
	t.Run("slots held: replicas attach", func(t *testing.T) {
		s := newSnapshot(fsm.Forming, 2, 2, meshed)
		spread := slot.EvenSpread(2)
		for i := range s.Pods {
			if s.Pods[i].Name == "p0-0" || s.Pods[i].Name == "p1-0" {
				s.Pods[i].Node.MySlots = slot.Set{spread[s.Pods[i].Shard]}
			}
		}
		p := run(formation, fsm.Forming, s)
		want := []Action{
			Replicate{Pod: "p0-1", PrimaryID: "id-p0-0"}, Replicate{Pod: "p0-2", PrimaryID: "id-p0-0"},
			Replicate{Pod: "p1-1", PrimaryID: "id-p1-0"}, Replicate{Pod: "p1-2", PrimaryID: "id-p1-0"},
		}
		if !reflect.DeepEqual(p.Actions, want) || p.Waiting != "waiting for replicas to attach" {
			t.Fatal(p.Actions)
		}
	})
	t.Run("unreachable node closes the gate: wait, no valkey step", func(t *testing.T) {
		s := newSnapshot(fsm.Forming, 3, 1)
		s.Pods[3].Node = &fsm.Node{Reachable: false, Err: "timeout"}
		p := run(formation, fsm.Forming, s)
		if len(p.Actions) != 0 || p.Waiting != "waiting for node p1-1 to answer: timeout" {
			t.Fatal(p)
		}
	})
	t.Run("pending pod closes the gate", func(t *testing.T) {
		s := newSnapshot(fsm.Bootstrapping, 1, 1, withPod("p0-1", func(p *fsm.Pod) { p.Phase, p.IP, p.Node = fsm.PodPending, "", nil }))
		p := run(formation, fsm.Bootstrapping, s)
		if len(p.Actions) != 0 || p.Waiting != "waiting for pod p0-1 to run" {
			t.Fatal(p)
		}
	})
	t.Run("formed cluster: nothing to form", func(t *testing.T) {
		if p := run(formation, fsm.Active, newSnapshot(fsm.Active, 3, 1, formed)); len(p.Actions) != 0 || p.Waiting != "" {
			t.Fatal(p)
		}
	})
}

// A formed cluster (Active, Upgrading) whose nodes all died and came back empty re-forms: every
// shard is served again, and each assignment says its data was lost. The same fresh nodes in
// Forming are a first formation: nothing was lost.
func TestSlotsServedAgainOnAFormedClusterAreLost(t *testing.T) {
	for _, c := range []struct {
		state fsm.State
		lost  bool
	}{{fsm.Forming, false}, {fsm.Active, true}, {fsm.Upgrading, true}} {
		t.Run(string(c.state), func(t *testing.T) {
			p := run(formation, c.state, newSnapshot(c.state, 3, 1, meshed))
			spread := slot.EvenSpread(3)
			var want []Action
			for sh := range 3 {
				want = append(want, AddSlots{Pod: fmt.Sprintf("p%d-0", sh), Shard: sh, Slots: slot.Set{spread[sh]}, Lost: c.lost})
			}
			if !reflect.DeepEqual(p.Actions, want) {
				t.Fatalf("got %v, want %v", p.Actions, want)
			}
		})
	}
}

// The break test, decided then planned: a cluster formed once (status.formedAt) lost every pod
// while Invalid, and the cause is fixed once the replacements run (empty, met). It goes back to
// Active, not Forming, and the pass serves every shard again flagged lost (DataLost and the
// WARN line), exactly as if the pods had died while it was Active.
func TestSlotsServedAgainAfterInvalidAreLost(t *testing.T) {
	s := newSnapshot(fsm.Invalid, 2, 1, meshed)
	for sh := range 2 {
		for i := range 2 {
			s.Pods = append(s.Pods, fsm.Pod{Name: fmt.Sprintf("old%d-%d", sh, i), Shard: sh, Phase: fsm.PodFailed, Exited: true,
				Failure: "Error, exit code 137", Lifecycle: string(v1.LifecycleActive)})
		}
	}
	spread := slot.EvenSpread(2)
	want := []Action{
		AddSlots{Pod: "p0-0", Shard: 0, Slots: slot.Set{spread[0]}, Lost: true},
		AddSlots{Pod: "p1-0", Shard: 1, Slots: slot.Set{spread[1]}, Lost: true},
	}
	for _, c := range []struct {
		name     string
		formedAt time.Time
	}{
		{"status.formedAt set", time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)},
		{"status from before formedAt, nodes that had joined", time.Time{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := s
			s.FormedAt = c.formedAt
			d := fsm.Decide(s)
			if d.Event != fsm.EventActivate {
				t.Fatalf("Decide = %q (%s), want %q: a formed cluster is healed in place", d.Event, d.Reason, fsm.EventActivate)
			}
			if p := Pass(fsm.Target(d.Event), s); !reflect.DeepEqual(p.Actions, want) {
				t.Fatalf("got %v, want %v", p.Actions, want)
			}
		})
	}
	// Defense in depth: a cluster with the marker is never assigned slots silently, even in a
	// state it should not be in (Forming, from a status an older operator rewrote).
	s.State, s.FormedAt = fsm.Forming, time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	if p := run(formation, fsm.Forming, s); !reflect.DeepEqual(p.Actions, want) {
		t.Fatalf("forming with the marker: got %v, want %v", p.Actions, want)
	}
}

// Only the free part of a shard's share is assigned, and flagged lost: a formed cluster in which
// one shard's nodes died and were forgotten serves that shard again, and only that one.
func TestOnlyTheLostShardIsFlagged(t *testing.T) {
	s := newSnapshot(fsm.Active, 3, 1, formed)
	lostSlots := slot.EvenSpread(3)[1:2]
	// Shard 1's nodes are new and empty; every node forgot the old ones.
	for i := range s.Pods {
		if s.Pods[i].Shard == 1 {
			n := s.Pods[i].Node
			n.MySlots, n.Primary, n.PrimaryID, n.LinkUp, n.ReplOffset = nil, true, "", false, 0
		}
	}
	for i := range s.Pods {
		for j := range s.Pods {
			s.Pods[i].Node.Known[s.Pods[j].Node.ID] = s.Pods[j].Node.MySlots
		}
	}
	p := run(formation, fsm.Active, s)
	want := []Action{AddSlots{Pod: "p1-0", Shard: 1, Slots: lostSlots, Lost: true}}
	if !reflect.DeepEqual(p.Actions, want) {
		t.Fatalf("got %v, want %v", p.Actions, want)
	}
	if got := want[0].String(); got != "add lost slots 5462-10922 of shard 1 to p1-0" {
		t.Errorf("String() = %q", got)
	}
}

// Slots nobody claims in a formed cluster, outside any slot-less shard's share, are served
// again (lost) by the shard whose even share holds them. Seen in TestReshardDestinationKilled
// before the new shard had its replica: the new shard's only node died holding 1024 slots moved
// into it, its replacement was given its own share back, and the slots it had taken from the
// other shards stayed unassigned for good ("waiting for the cluster to agree").
func TestOrphanSlotsAreServedAgain(t *testing.T) {
	s := newSnapshot(fsm.Upgrading, 2, 0, formed)
	share := slot.EvenSpread(2)
	orphans := slot.Set{{Start: share[0].End - 9, End: share[0].End}, {Start: share[1].Start, End: share[1].Start + 4}}
	for i := range s.Pods {
		n := s.Pods[i].Node
		n.MySlots = slot.Subtract(n.MySlots, orphans)
		for id, slots := range n.Known {
			n.Known[id] = slot.Subtract(slots, orphans)
		}
	}
	want := []Action{
		AddSlots{Pod: "p0-0", Shard: 0, Slots: orphans[:1], Lost: true},
		AddSlots{Pod: "p1-0", Shard: 1, Slots: orphans[1:], Lost: true},
	}
	if p := run(formation, fsm.Upgrading, s); !reflect.DeepEqual(p.Actions, want) {
		t.Fatalf("got %v, want %v", p.Actions, want)
	}
	// While forming, free slots are the first assignment's business, not a loss.
	s.State = fsm.Forming
	if p := run(formation, fsm.Forming, s); len(p.Actions) != 0 {
		t.Fatalf("forming: %v", p.Actions)
	}
}
