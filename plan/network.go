package plan

// networkPolicy keeps the cluster's NetworkPolicy {cluster}-network: only the cluster's own pods
// reach its cluster bus, which has no authentication (why, and what the policy lets in:
// resources.BuildNetworkPolicy, docs/user/network-policy.md). A bookkeeping planner (Before):
// the policy is in place before a pod this pass creates opens its bus. Its rules, in order:
//
//  1. Nothing while the policy was not looked for this pass (fsm.NetworkPolicy.Known): the look
//     failed, or an object of its name is someone else's, which is never changed (the cluster
//     is Invalid, naming it).
//  2. A cluster that wants a policy and controls none gets one; one whose spec or labels were
//     edited (by a team that may edit NetworkPolicies in its namespace) is put back as built.
//  3. A cluster that wants none (spec.network.policy, or the operator's default, Disabled) has
//     the one it controls deleted.
//
// Unlike the budgets, it acts while the spec cannot be acted on (fsm.Snapshot.SpecProblem): the
// policy depends on the cluster's name and spec.network only, none of which a spec problem is
// about, and the pods of an Invalid cluster keep running: their bus must stay closed.
var networkPolicy = Planner{Name: "network policy", Plan: func(in Input) Step {
	np := in.Snapshot.NetworkPolicy
	switch {
	case !np.Known:
		return Step{}
	case np.Wanted && !np.Exists:
		return Step{Actions: []Action{SetNetworkPolicy{Create: true}}}
	case np.Wanted && !np.AsBuilt:
		return Step{Actions: []Action{SetNetworkPolicy{}}}
	case !np.Wanted && np.Exists:
		return Step{Actions: []Action{DeleteNetworkPolicy{}}}
	}
	return Step{}
}}
