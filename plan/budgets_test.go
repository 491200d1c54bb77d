package plan

import (
	"reflect"
	"testing"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
)

// withBudgets: the budgets read this pass, by shard, each as built with minAvailable n.
func withBudgets(n map[int]int) opt {
	return func(s *fsm.Snapshot) {
		s.BudgetsKnown = true
		s.Budgets = map[int]fsm.Budget{}
		for shard, m := range n {
			s.Budgets[shard] = fsm.Budget{MinAvailable: m, AsBuilt: true}
		}
	}
}

func TestBudgets(t *testing.T) {
	whole := map[int]int{0: 1, 1: 1, 2: 1}
	for _, tc := range []struct {
		name    string
		s       fsm.Snapshot
		planned []Action
		want    []Action
	}{
		{name: "not read this pass: nothing", s: newSnapshot(fsm.Active, 3, 1, formed)},
		{name: "new cluster: one per shard, none evictable while every node joins",
			s:    newSnapshot(fsm.Bootstrapping, 3, 1, withBudgets(nil)),
			want: []Action{SetBudget{Shard: 0, Joining: 2, Create: true}, SetBudget{Shard: 1, Joining: 2, Create: true}, SetBudget{Shard: 2, Joining: 2, Create: true}}},
		{name: "settled: nothing", s: newSnapshot(fsm.Active, 3, 1, formed, withBudgets(whole))},
		{name: "a replacement syncing: its shard's other copy is held",
			s:    newSnapshot(fsm.Active, 3, 1, formed, withBudgets(whole), withLifecycle("p1-1", v1.LifecycleJoining)),
			want: []Action{SetBudget{Shard: 1, Joining: 1}}},
		{name: "a replacement about to be created counts before it exists",
			s:       newSnapshot(fsm.Active, 3, 1, formed, withBudgets(whole), withGone("p1-1")),
			planned: []Action{CreatePod{Shard: 1}},
			want:    []Action{SetBudget{Shard: 1, Joining: 1}}},
		{name: "edited ones brought back",
			s: newSnapshot(fsm.Active, 3, 1, formed, withBudgets(whole), func(s *fsm.Snapshot) {
				s.Budgets[1] = fsm.Budget{MinAvailable: 0, AsBuilt: true}
				s.Budgets[2] = fsm.Budget{MinAvailable: -1}
			}),
			want: []Action{SetBudget{Shard: 1}, SetBudget{Shard: 2}}},
		{name: "a refused spec: the budgets stay as they are (a count the operator refused would block every drain)",
			s: newSnapshot(fsm.Invalid, 3, 1, formed, withBudgets(whole), func(s *fsm.Snapshot) {
				s.SpecProblem = "maxclients too low"
				s.ReplicasPerShard = 2
			})},
		{name: "a removed shard's budget stays while it has pods",
			s:    newSnapshot(fsm.Active, 4, 1, formed, withBudgets(map[int]int{0: 1, 1: 1, 2: 1, 3: 1, 4: 1}), func(s *fsm.Snapshot) { s.Shards = 3 }),
			want: []Action{DeleteBudget{Shard: 4}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := budgets.Plan(Input{State: tc.s.State, Snapshot: tc.s, Planned: tc.planned})
			if !reflect.DeepEqual(got.Actions, tc.want) || got.Wait != "" || got.Hold != "" || got.Blocked != "" {
				t.Errorf("planned %v (wait %q, hold %q, blocked %q), want %v", got.Actions, got.Wait, got.Hold, got.Blocked, tc.want)
			}
		})
	}
}
