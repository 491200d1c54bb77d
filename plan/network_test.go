package plan

import (
	"reflect"
	"testing"

	"github.com/gomomento/valkey-operator/fsm"
)

func TestNetworkPolicyPlanner(t *testing.T) {
	np := func(known, wanted, exists, asBuilt bool) opt {
		return func(s *fsm.Snapshot) {
			s.NetworkPolicy = fsm.NetworkPolicy{Known: known, Wanted: wanted, Exists: exists, AsBuilt: asBuilt}
		}
	}
	invalid := func(s *fsm.Snapshot) { s.SpecProblem = "ValkeyConfig \"x\" not found" }
	for _, tc := range []struct {
		name string
		s    fsm.Snapshot
		want []Action
	}{
		{"wanted, as built", newSnapshot(fsm.Active, 1, 1, formed, np(true, true, true, true)), nil},
		{"wanted, missing", newSnapshot(fsm.Bootstrapping, 1, 1, np(true, true, false, false)), []Action{SetNetworkPolicy{Create: true}}},
		{"wanted, edited", newSnapshot(fsm.Active, 1, 1, formed, np(true, true, true, false)), []Action{SetNetworkPolicy{}}},
		{"not wanted, there", newSnapshot(fsm.Active, 1, 1, formed, np(true, false, true, true)), []Action{DeleteNetworkPolicy{}}},
		{"not wanted, gone", newSnapshot(fsm.Active, 1, 1, formed, np(true, false, false, false)), nil},
		// Someone else's object of its name, or a failed look: nothing of that name is touched.
		{"not known", newSnapshot(fsm.Active, 1, 1, formed, np(false, true, false, false)), nil},
		// An Invalid cluster's pods still run: their bus stays closed.
		{"a refused spec, edited", newSnapshot(fsm.Invalid, 1, 1, formed, invalid, np(true, true, true, false)), []Action{SetNetworkPolicy{}}},
	} {
		if got := networkPolicy.Plan(Input{Snapshot: tc.s}); !reflect.DeepEqual(got.Actions, tc.want) {
			t.Errorf("%s: planned %v, want %v", tc.name, got.Actions, tc.want)
		}
	}
}

// The policy comes before the pods of the pass: a new pod never opens its bus unguarded.
func TestNetworkPolicyBeforePods(t *testing.T) {
	s := newSnapshot(fsm.Bootstrapping, 1, 0, withoutPods)
	s.NetworkPolicy = fsm.NetworkPolicy{Known: true, Wanted: true}
	p := Pass(fsm.Bootstrapping, s)
	create, policy := -1, -1
	for i, a := range p.Actions {
		if _, ok := a.(CreatePod); ok && create < 0 {
			create = i
		}
		if _, ok := a.(SetNetworkPolicy); ok {
			policy = i
		}
	}
	if policy < 0 || create < 0 || policy > create {
		t.Errorf("actions %v: want the policy created before the first pod", p.Actions)
	}
}
