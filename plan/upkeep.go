package plan

import (
	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
)

// The bookkeeping planners besides the budgets (budgets.go) and the rotation (rotation.go): the
// credential Secret, the Service and the ACL Secret (Before), and the ValkeyNodes' records and
// the pods' annotations (After). Each plans an action only for a
// difference the snapshot shows, so a steady pass plans none.

// aclSecret writes the ACL Secret every pod mounts. Its rules, in order:
//
//  1. Nothing while the spec cannot be acted on (fsm.Snapshot.SpecProblem): the nodes keep the
//     ACL they have.
//  2. The Secret is written when the stored one is missing or differs from the one this pass
//     renders (fsm.Snapshot.ACLSecretStale; the controller renders and compares it, since the
//     render needs the resolved roles and the system users' passwords, which the pure packages
//     do not hold). It depends on whether a reshard is pending (ReshardPending: the slot-import
//     rules of the migration user).
var aclSecret = Planner{Name: "acl secret", Plan: func(in Input) Step {
	if in.Snapshot.SpecProblem != "" || !in.Snapshot.ACLSecretStale {
		return Step{}
	}
	return Step{Actions: []Action{WriteACLSecret{}}}
}}

// service creates the cluster's headless Service, or brings one an older operator created up to
// date (the original's port names and selector). Its rules, in order:
//
//  1. Nothing while the spec cannot be acted on: a Service of its name the cluster does not
//     control is the problem (the controller found it).
//  2. A missing Service is created (CreateService), before the steps: a pod's DNS name is the
//     Service's.
//  3. One behind is brought up to date in place (UpdateService); its endpoints stay the same.
var service = Planner{Name: "service", Plan: func(in Input) Step {
	s := in.Snapshot
	switch {
	case s.SpecProblem != "":
	case s.ServiceMissing:
		return Step{Actions: []Action{CreateService{}}}
	case s.ServiceBehind:
		return Step{Actions: []Action{UpdateService{}}}
	}
	return Step{}
}}

// credential writes the operator's credential Secret (WriteCredential) when the controller found
// it to write (fsm.Snapshot.CredentialStale): before the ACL Secret, which holds the hashes of its
// passwords. Nothing while the spec cannot be acted on.
var credential = Planner{Name: "credential", Plan: func(in Input) Step {
	if in.Snapshot.SpecProblem != "" || !in.Snapshot.CredentialStale {
		return Step{}
	}
	return Step{Actions: []Action{WriteCredential{}}}
}}

// records pins each node's pod in its ValkeyNode (status.podUID): from then on only that pod is
// the node's (controllers/identity.go). Its rules, in order:
//
//  1. Every pod the controller found to be its node's that its ValkeyNode does not record yet
//     (fsm.Pod.Unrecorded: created by an operator before the record, or its record write failed)
//     is recorded.
//  2. Not a pod on its way out: it is nobody's node for long.
var records = Planner{Name: "records", Plan: func(in Input) Step {
	var st Step
	for _, p := range in.Snapshot.Pods {
		if p.Unrecorded && !p.Deleting {
			st.Actions = append(st.Actions, RecordPod{Pod: p.Name})
		}
	}
	return st
}}

// joins records the joins the nodes completed. Its rules, in order:
//
//  1. Every Joining node that is now a full member (fsm.CompletedJoins) is marked Active.
//  2. Not a node this pass retires (a DeletePod of Input.Planned): its ValkeyNode is Leaving or
//     gone.
var joins = Planner{Name: "joins", Plan: func(in Input) Step {
	retired := map[string]bool{}
	for _, a := range in.Planned {
		if d, ok := a.(DeletePod); ok {
			retired[d.Pod] = true
		}
	}
	var st Step
	for _, name := range fsm.CompletedJoins(in.Snapshot) {
		if !retired[name] {
			st.Actions = append(st.Actions, MarkActive{Pod: name})
		}
	}
	return st
}}

// settled settles the zone moves that are done. Its rules, in order:
//
//  1. Nothing while the spec cannot be acted on (fsm.Snapshot.SpecProblem): its replica count
//     may be one the operator refused, and a mark cleared against it is not set again.
//  2. Only in a shard with no more live nodes than wanted: the copy a moved one replaced is
//     retired (or gone), so a later surplus (a scale-down) is not taken for the same move.
//  3. Only a node that has joined (Active) loses its moved-from mark: a copy pinned to a zone
//     that cannot take it is retired (RetireNoRoom) only while marked, even once the copy it was
//     to replace died; unmarked, it would sit Pending for good and its shard stay a copy short.
var settled = Planner{Name: "settled moves", Plan: func(in Input) Step {
	s := in.Snapshot
	var st Step
	if s.SpecProblem != "" {
		return st
	}
	for _, pods := range s.ShardPods() {
		if len(pods) > s.ReplicasPerShard+1 {
			continue
		}
		for _, p := range pods {
			if p.MovedFrom != "" && p.Lifecycle == string(v1.LifecycleActive) {
				st.Actions = append(st.Actions, SettleMove{Pod: p.Name})
			}
		}
	}
	return st
}}

// annotations brings spec.podAnnotations onto the live pods (controllers/annotations.go says why
// in place, and why a key removed from the spec stays). Its rules, in order:
//
//  1. Nothing while the spec cannot be acted on (fsm.Snapshot.SpecProblem).
//  2. Every live pod that lacks a key, or holds it with another value
//     (fsm.Pod.AnnotationsBehind), is patched with those keys.
var annotations = Planner{Name: "annotations", Plan: func(in Input) Step {
	if in.Snapshot.SpecProblem != "" {
		return Step{}
	}
	var st Step
	for _, p := range in.Snapshot.LivePods() {
		if len(p.AnnotationsBehind) > 0 {
			st.Actions = append(st.Actions, AnnotatePod{Pod: p.Name, Keys: p.AnnotationsBehind})
		}
	}
	return st
}}
