package plan

import (
	"reflect"
	"testing"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
)

func TestACLSecretPlanner(t *testing.T) {
	s := newSnapshot(fsm.Active, 1, 0, formed)
	if got := aclSecret.Plan(Input{Snapshot: s}); len(got.Actions) != 0 {
		t.Errorf("stored Secret as rendered: %v", got.Actions)
	}
	s.ACLSecretStale = true
	if got := aclSecret.Plan(Input{Snapshot: s}); !reflect.DeepEqual(got.Actions, []Action{WriteACLSecret{}}) {
		t.Errorf("stale: %v, want one write", got.Actions)
	}
	s.SpecProblem = "role r not found"
	if got := aclSecret.Plan(Input{Snapshot: s}); len(got.Actions) != 0 {
		t.Errorf("spec problem: %v, want nothing rendered", got.Actions)
	}
}

// A Joining node that is a full member is marked Active, not one the pass retires; one still
// syncing stays Joining.
func TestJoinsPlanner(t *testing.T) {
	s := newSnapshot(fsm.Active, 2, 1, formed, withLifecycle("p0-1", v1.LifecycleJoining), withLifecycle("p1-1", v1.LifecycleJoining),
		withLifecycle("p1-0", v1.LifecycleJoining), withPod("p1-0", func(p *fsm.Pod) { p.Node.LinkUp = false }))
	got := joins.Plan(Input{Snapshot: s, Planned: []Action{DeletePod{Pod: "p1-1", Reason: RetireSurplus}}})
	if want := []Action{MarkActive{Pod: "p0-1"}, MarkActive{Pod: "p1-0"}}; !reflect.DeepEqual(got.Actions, want) {
		t.Errorf("planned %v, want %v", got.Actions, want)
	}
}

// The moved-from mark goes once the copy has joined and its shard is at its count.
func TestMovesPlanner(t *testing.T) {
	moving := func(l v1.NodeLifecycle) opt {
		return withPod("p0-1", func(p *fsm.Pod) { p.MovedFrom, p.Lifecycle = "zone-a", string(l) })
	}
	for _, tc := range []struct {
		name string
		s    fsm.Snapshot
		want []Action
	}{
		{"joined, shard at its count", newSnapshot(fsm.Active, 1, 1, formed, moving(v1.LifecycleActive)), []Action{SettleMove{Pod: "p0-1"}}},
		{"not joined yet", newSnapshot(fsm.Active, 1, 1, formed, moving(v1.LifecycleJoining)), nil},
		{"a refused spec", newSnapshot(fsm.Invalid, 1, 1, formed, moving(v1.LifecycleActive), func(s *fsm.Snapshot) { s.SpecProblem = "no such ValkeyConfig" }), nil},
		{"the copy it replaces still there", newSnapshot(fsm.Active, 1, 2, formed, moving(v1.LifecycleActive), func(s *fsm.Snapshot) { s.ReplicasPerShard = 1 }), nil},
	} {
		if got := settled.Plan(Input{Snapshot: tc.s}); !reflect.DeepEqual(got.Actions, tc.want) {
			t.Errorf("%s: planned %v, want %v", tc.name, got.Actions, tc.want)
		}
	}
}

func TestAnnotationsPlanner(t *testing.T) {
	s := newSnapshot(fsm.Active, 1, 1, formed, withPod("p0-1", func(p *fsm.Pod) { p.AnnotationsBehind = []string{"a", "b"} }),
		withDeleting("p0-0", true), withPod("p0-0", func(p *fsm.Pod) { p.AnnotationsBehind = []string{"a"} }))
	if got := annotations.Plan(Input{Snapshot: s}); !reflect.DeepEqual(got.Actions, []Action{AnnotatePod{Pod: "p0-1", Keys: []string{"a", "b"}}}) {
		t.Errorf("planned %v, want the live pod's keys only", got.Actions)
	}
	s.SpecProblem = "bad"
	if got := annotations.Plan(Input{Snapshot: s}); len(got.Actions) != 0 {
		t.Errorf("spec problem: planned %v", got.Actions)
	}
}

// The bookkeeping goes around the chain's steps: the budgets and the ACL Secret before (a pod
// this pass creates counts in its budget and mounts the Secret), the records after. A steady
// cluster plans nothing; Invalid records the joins its nodes report (the controller asks no node
// while the spec is refused), and leaves its budgets as they are (the refused spec's counts are
// no guide) and renders and annotates nothing.
func TestPassOrdersBookkeeping(t *testing.T) {
	whole := map[int]int{0: 1, 1: 1}
	steady := newSnapshot(fsm.Active, 2, 1, formed, withBudgets(whole))
	if p := Pass(fsm.Active, steady); len(p.Actions) != 0 || p.Err != nil {
		t.Fatalf("steady: %v, %v", p.Actions, p.Err)
	}
	s := newSnapshot(fsm.Active, 2, 1, formed, withBudgets(whole), withFailed("p1-1"), withLifecycle("p0-1", v1.LifecycleJoining),
		withPod("p0-0", func(p *fsm.Pod) { p.AnnotationsBehind = []string{"k"} }))
	s.ACLSecretStale = true
	p := Pass(fsm.Active, s)
	want := []Action{
		SetBudget{Shard: 0, Joining: 1}, SetBudget{Shard: 1, Joining: 1}, WriteACLSecret{},
		CreatePod{Shard: 1},
		MarkActive{Pod: "p0-1"}, AnnotatePod{Pod: "p0-0", Keys: []string{"k"}},
	}
	if p.Err != nil || !reflect.DeepEqual(p.Actions, want) {
		t.Fatalf("planned %v (err %v), want %v", p.Actions, p.Err, want)
	}
	p = Pass(fsm.Invalid, func() fsm.Snapshot { s.SpecProblem = "bad"; return s }())
	if want := []Action{MarkActive{Pod: "p0-1"}}; !reflect.DeepEqual(p.Actions, want) {
		t.Fatalf("Invalid: planned %v, want %v", p.Actions, want)
	}
}

// A bookkeeping planner that waits, has a gate, or plans a disruptive or non-bookkeeping action
// is a programming error: its actions are dropped and reported.
func TestBookkeepingInvariants(t *testing.T) {
	for _, pl := range []Planner{
		{Name: "gated", Gate: func(Input) string { return "" }, Plan: func(Input) Step { return Step{Actions: []Action{MarkActive{Pod: "a"}}} }},
		{Name: "waits", Plan: func(Input) Step { return Step{Actions: []Action{MarkActive{Pod: "a"}}, Wait: "x"} }},
		{Name: "disrupts", Plan: func(Input) Step { return Step{Actions: []Action{DeletePod{Pod: "a"}}} }},
		{Name: "a step", Plan: func(Input) Step { return Step{Actions: []Action{CreatePod{}}} }},
	} {
		if p := bookkeeping(Chain{pl}, Input{}); p.Err == nil || len(p.Actions) != 0 {
			t.Errorf("%s: planned %v, err %v", pl.Name, p.Actions, p.Err)
		}
	}
	for _, c := range []Chain{Before(), After()} {
		for _, pl := range c {
			if pl.Gate != nil {
				t.Errorf("bookkeeping planner %s has a gate", pl.Name)
			}
		}
	}
}
