package plan

import (
	"maps"
	"slices"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// budgets keeps one PodDisruptionBudget per shard index (why one, and why minAvailable counts
// the joining pods: controllers/disruption.go). A bookkeeping planner (Before): its actions run
// before the chain's. Its rules, in order:
//
//  1. Nothing while the budgets were not read this pass (fsm.Snapshot.BudgetsKnown): a list that
//     failed, or an object of one of the cluster's names that is someone else's, which nothing
//     of the cluster's may touch until it is cleared up. Nothing either while the spec cannot be
//     acted on (fsm.Snapshot.SpecProblem): its shard and replica counts may be the ones the
//     operator refused (a budget asking for 2 copies of 2-pod shards blocks every drain), so the
//     budgets stay as they are.
//  2. Every shard index below spec.shards has its budget, asking for minAvailable =
//     replicasPerShard + its joining pods: its live pods whose ValkeyNode is not Active, and the
//     pods this pass creates for it (Input.Planned), counted before they exist. A budget that
//     asks for another count, or whose spec was edited (fsm.Budget.AsBuilt), is rewritten.
//  3. The budget of a shard index at or above spec.shards goes once that shard has no live pod
//     left: a removed shard's nodes keep their budget while they still serve.
var budgets = Planner{Name: "budgets", Plan: planBudgets}

func planBudgets(in Input) Step {
	s := in.Snapshot
	if !s.BudgetsKnown || s.SpecProblem != "" {
		return Step{}
	}
	joining := map[int]int{}
	live := map[int]bool{}
	for _, p := range s.LivePods() {
		live[p.Shard] = true
		if p.Lifecycle != string(v1.LifecycleActive) {
			joining[p.Shard]++
		}
	}
	for _, a := range in.Planned {
		if c, ok := a.(CreatePod); ok {
			joining[c.Shard]++
		}
	}
	var st Step
	for shard := range s.Shards {
		b, ok := s.Budgets[shard]
		switch {
		case !ok:
			st.Actions = append(st.Actions, SetBudget{Shard: shard, Joining: joining[shard], Create: true})
		case !b.AsBuilt || b.MinAvailable != s.ReplicasPerShard+joining[shard]:
			st.Actions = append(st.Actions, SetBudget{Shard: shard, Joining: joining[shard]})
		}
	}
	for _, shard := range slices.Sorted(maps.Keys(s.Budgets)) {
		if shard >= s.Shards && !live[shard] {
			st.Actions = append(st.Actions, DeleteBudget{Shard: shard})
		}
	}
	return st
}
