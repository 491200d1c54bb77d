package plan

import (
	"slices"
	"testing"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
)

// rotating is a rotation in phase, the next passwords stored or not, each node's part set to
// part (nil: not asked).
func rotating(phase string, stored bool, part *fsm.NodeRotation) opt {
	return func(s *fsm.Snapshot) {
		s.Rotation = &fsm.Rotation{Phase: phase, Request: "r1", Asked: "r1", NextStored: stored}
		for i := range s.Pods {
			if part != nil {
				p := *part
				s.Pods[i].Node.Rotation = &p
			}
		}
	}
}

// TestRotationPhases walks a rotation through its phases as the snapshot's observations allow
// (fsm.Snapshot.RotationNext) and checks the actions of each (the rotation planner).
func TestRotationPhases(t *testing.T) {
	both := &fsm.NodeRotation{Hashes: true}
	switched := &fsm.NodeRotation{Hashes: true, PrimaryAuth: true}
	for _, c := range []struct {
		name       string
		state      fsm.State
		opt        opt
		next       string
		waits      bool
		wantAction Action
	}{
		{"asked on an Active cluster: starts", fsm.Active, func(s *fsm.Snapshot) {
			s.Rotation = &fsm.Rotation{Asked: "r2", Request: "r1", Phase: v1.RotationComplete}
		}, v1.RotationAdding, false, WriteNextPasswords{}},
		{"asked while Upgrading: waits for Active", fsm.Upgrading, func(s *fsm.Snapshot) {
			s.Rotation = &fsm.Rotation{Asked: "r2", Request: "r1", Phase: v1.RotationComplete}
		}, v1.RotationComplete, false, nil},
		{"answered already: nothing", fsm.Active, func(s *fsm.Snapshot) {
			s.Rotation = &fsm.Rotation{Asked: "r1", Request: "r1", Phase: v1.RotationComplete}
		}, v1.RotationComplete, false, nil},
		{"Adding, next not stored: writes them", fsm.Active, rotating(v1.RotationAdding, false, nil), v1.RotationAdding, true, WriteNextPasswords{}},
		{"Adding, a node without both: waits", fsm.Active, func(s *fsm.Snapshot) {
			rotating(v1.RotationAdding, true, both)(s)
			s.Pods[1].Node.Rotation = &fsm.NodeRotation{}
		}, v1.RotationAdding, true, nil},
		{"Adding, a pod starting: waits", fsm.Active, func(s *fsm.Snapshot) {
			rotating(v1.RotationAdding, true, both)(s)
			s.Pods = append(s.Pods, fsm.Pod{Name: "new", Shard: 0, Phase: fsm.PodPending})
		}, v1.RotationAdding, true, nil},
		{"Adding, every node holds both: switches, primaryauth set everywhere", fsm.Active, rotating(v1.RotationAdding, true, both), v1.RotationSwitching, false,
			SetPrimaryAuth{Pods: []string{"p0-0", "p0-1", "p1-0", "p1-1", "p2-0", "p2-1"}}},
		{"Switching while Upgrading: goes on", fsm.Upgrading, rotating(v1.RotationSwitching, true, switched), v1.RotationRetiring, false, PromotePasswords{}},
		{"Switching, a node unreachable: waits", fsm.Active, func(s *fsm.Snapshot) {
			rotating(v1.RotationSwitching, true, switched)(s)
			s.Pods[2].Node = &fsm.Node{}
		}, v1.RotationSwitching, true, nil},
		{"Switching, one next password deleted by hand: back to Adding, written again", fsm.Active, func(s *fsm.Snapshot) {
			rotating(v1.RotationSwitching, false, switched)(s)
			s.Rotation.NextPartial = true
		}, v1.RotationAdding, true, WriteNextPasswords{}},
		{"Retiring, Secret not promoted: promotes", fsm.Active, rotating(v1.RotationRetiring, true, both), v1.RotationRetiring, true, PromotePasswords{}},
		{"Retiring, promoted, every node alone: complete", fsm.Active, rotating(v1.RotationRetiring, false, both), v1.RotationComplete, false, nil},
		{"Retiring, a failed pod: not waited for", fsm.Active, func(s *fsm.Snapshot) {
			rotating(v1.RotationRetiring, false, both)(s)
			s.Pods[0].Phase, s.Pods[0].Node = fsm.PodFailed, nil
		}, v1.RotationComplete, false, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSnapshot(c.state, 3, 1, c.opt)
			next, waiting := s.RotationNext()
			if next != c.next || (waiting != "") != c.waits {
				t.Fatalf("RotationNext = %q, %q; want %q, waiting %v", next, waiting, c.next, c.waits)
			}
			s.Rotation.Phase = next
			p := Pass(c.state, s)
			var got []Action
			for _, a := range p.Actions {
				if isRotation(a) {
					got = append(got, a)
				}
			}
			if p.Err != nil {
				t.Fatal(p.Err)
			}
			switch {
			case c.wantAction == nil && len(got) > 0:
				t.Fatalf("actions %v, want none", got)
			case c.wantAction != nil && (len(got) != 1 || got[0].String() != c.wantAction.String()):
				t.Fatalf("actions %v, want %v", got, c.wantAction)
			}
			if slices.ContainsFunc(got, Action.Disruptive) {
				t.Fatalf("a disruptive rotation action: %v", got)
			}
		})
	}
}

// isRotation reports whether a is one of the rotation planner's actions.
func isRotation(a Action) bool {
	_, w := a.(WriteNextPasswords)
	_, s := a.(SetPrimaryAuth)
	_, p := a.(PromotePasswords)
	return w || s || p
}
