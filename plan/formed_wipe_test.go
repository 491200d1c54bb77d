package plan

import (
	"testing"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/slot"
)

// TestStatusWipedLossIsReported: a formed 2x1 cluster whose status was wiped (kubectl edit
// --subresource=status, a restore without status). Meanwhile shard 1 lost both its pods; their
// replacements run, empty and met. Shard 0's nodes still serve their slots and their ValkeyNodes
// say Active (completed join, recorded in the ValkeyNode's spec): the cluster was formed and held
// data. It must not be bootstrapped again in silence: shard 1's slots are served again as a
// loss (AddSlots.Lost: DataLost and the WARN line).
func TestStatusWipedLossIsReported(t *testing.T) {
	s := newSnapshot(fsm.State(""), 2, 1, formed)
	// shard 1's two pods replaced by fresh empty primaries that know the others
	for i := range s.Pods {
		p := &s.Pods[i]
		if p.Shard == 1 {
			p.Name = "new" + p.Name
			p.Node.ID = "id-" + p.Name
			p.Node.MySlots, p.Node.Primary, p.Node.PrimaryID, p.Node.LinkUp, p.Node.ReplOffset = nil, true, "", false, 0
			p.Node.ClusterStateOK = false
			p.Lifecycle = string(v1.LifecycleJoining)
			p.LastNodeID = ""
		}
	}
	for i := range s.Pods {
		s.Pods[i].Node.Known = map[string]slot.Set{}
	}
	for i := range s.Pods {
		for j := range s.Pods {
			s.Pods[i].Node.Known[s.Pods[j].Node.ID] = s.Pods[j].Node.MySlots
		}
	}
	var lostFlagged, served bool
	for step := 0; step < 6; step++ {
		d := fsm.Decide(s)
		st := s.State
		if d.Event != "" {
			st = fsm.Target(d.Event)
			t.Logf("pass %d: %q -> %s (%s)", step, s.State, st, d.Reason)
		}
		p := Pass(st, s)
		t.Logf("pass %d in %s: actions %v", step, st, p.Actions)
		for _, a := range p.Actions {
			if add, ok := a.(AddSlots); ok && add.Shard == 1 {
				served = true
				lostFlagged = lostFlagged || add.Lost
			}
		}
		s.State = st
		if served {
			break
		}
	}
	if !served {
		t.Fatalf("shard 1 never served again")
	}
	if !lostFlagged {
		t.Errorf("shard 1's slots (held data in a formed cluster) were served again empty without AddSlots.Lost: no DataLost, no WARN")
	}
}

// TestNeverFormedNotFlaggedLost: a 2x0 cluster with cluster-require-full-coverage no (an
// allowed directive) while Forming: shard 0 got its slots (cluster_state is ok without full
// coverage), shard 1's primary has none yet (its pod was replaced, or the ADDSLOTS failed). The
// config reference breaks (Invalid) and is fixed. No key was ever stored in shard 1's slots:
// shard 0's node must not have completed its join (a join completes only once every slot is
// served), so the cluster does not count as formed and shard 1's first assignment is not a loss.
func TestNeverFormedNotFlaggedLost(t *testing.T) {
	s := newSnapshot(fsm.Forming, 2, 0, meshed)
	spread := slot.EvenSpread(2)
	for i := range s.Pods {
		p := &s.Pods[i]
		p.Node.ClusterStateOK = true
		p.Lifecycle = string(v1.LifecycleJoining)
		if p.Shard == 0 {
			p.Node.MySlots = slot.Set{spread[0]}
		}
	}
	for i := range s.Pods {
		s.Pods[i].Node.SlotsAssigned = spread[0].Count()
		for j := range s.Pods {
			s.Pods[i].Node.Known[s.Pods[j].Node.ID] = s.Pods[j].Node.MySlots
		}
	}
	// What the controller records while Forming.
	if done := fsm.CompletedJoins(s); len(done) != 0 {
		t.Fatalf("joins completed with half the slots unassigned: %v", done)
	}
	s.State = fsm.Invalid
	d := fsm.Decide(s)
	t.Logf("Invalid, cause fixed: %s (%s)", d.Event, d.Reason)
	st := s.State
	if d.Event != "" {
		st = fsm.Target(d.Event)
	}
	p := Pass(st, s)
	t.Logf("pass in %s: %v", st, p.Actions)
	for _, a := range p.Actions {
		if add, ok := a.(AddSlots); ok && add.Shard == 1 && add.Lost {
			t.Errorf("never-formed shard 1's first slot assignment flagged lost: %v", add)
		}
	}
}
