// Package plan decides what one reconcile pass does, as a chain of pure planners: each owns one
// concern (pods, quorum, formation, cleanup, …), has its own gate, and returns a step. The runner
// assembles the pass: harmless actions batched, at most one disruptive action, and it stops at the
// first step that waits or is blocked. It imports neither the Kubernetes client nor valkey-go
// (depguard keeps it so): the controller observes, this package decides, the controller executes.
package plan

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gomomento/valkey-operator/fsm"
)

// Input is what every planner sees: the state the cluster is in after this pass's transition and
// the pass's one snapshot.
type Input struct {
	State    fsm.State
	Snapshot fsm.Snapshot
	// Planned are the actions the chain (Default) planned this pass: set for the bookkeeping
	// planners (Before, After) only, which keep the objects beside the cluster in step with
	// them (a budget raised for a pod about to be created, no node marked Active as it goes).
	Planned []Action
}

// Step is one planner's answer. Actions run in order. Wait says what the planner waits for after
// its actions (nodes to meet, a takeover to land); Blocked says why it refuses to go on until
// something outside the operator changes. Either one ends the pass: a later concern must not act
// on a cluster an earlier one is still changing. Hold says why the planner holds back a step of
// its own while later concerns may go on (they may be what it waits for): it is reported as a
// closed gate is.
type Step struct {
	Actions []Action
	Wait    string
	Blocked string
	Hold    string
}

// Planner owns one concern. Gate returns "" when the concern may act on this input, otherwise why
// not; a closed gate skips this planner only, so a node that does not answer holds back the steps
// that need its answer and nothing else. A nil Gate is always open. Plan is called only when the
// gate is open.
type Planner struct {
	Name string
	Gate func(Input) string
	Plan func(Input) Step
}

// Chain is a list of planners in priority order: stability, topology, updates, cleanup
// (concepts/reconciliation.md). The first applicable concern wins the pass.
type Chain []Planner

// Plan is the ordered list of actions for one pass and, when the pass is waiting on the world,
// why (for logs and status.message). Blocked is set when the operator refuses to go on until
// something outside it changes (pods that fail on start with the current spec). Err is a broken
// invariant found by the runner (a planner that planned a second disruptive action); the
// offending actions are not in Actions.
type Plan struct {
	Actions []Action
	Waiting string
	Blocked string
	// Holds are every reason a planner held back this pass, closed gates and steps' Hold alike,
	// in chain order, each as "planner: reason": Waiting carries only the first (it becomes
	// status.message), and the pass's DEBUG line carries them all.
	Holds []string
	Err   error
}

// Disruptive returns the plan's disruptive action, nil when there is none.
func (p Plan) Disruptive() Action {
	for _, a := range p.Actions {
		if a.Disruptive() {
			return a
		}
	}
	return nil
}

// Run asks each planner in order. A closed gate is noted (the first reason becomes Waiting when
// nothing else is awaited) and the chain goes on, as is a step that would retire a node a foreign
// pod stands in for (retiresForeign). A step's actions are appended; the pass ends at
// the first step that waits or is blocked, and right after the step that holds the pass's one
// disruptive action: what follows it in priority order is planned again once its effect is
// observed. A second disruptive action within a step is a programming error: Run drops it and
// reports it in Err, so the controller never executes two in one pass.
func (c Chain) Run(in Input) Plan {
	var p Plan
	for _, pl := range c {
		if pl.Gate != nil {
			if why := pl.Gate(in); why != "" {
				if p.Waiting == "" {
					p.Waiting = why
				}
				p.Holds = append(p.Holds, pl.Name+": "+why)
				continue
			}
		}
		st := pl.Plan(in)
		if why := retiresForeign(in.Snapshot, st.Actions); why != "" {
			st = Step{Hold: why}
		}
		disrupted := false
		for _, a := range st.Actions {
			if a == nil {
				p.Err = errors.Join(p.Err, fmt.Errorf("broken invariant: planner %s planned a nil action", pl.Name))
				continue
			}
			if a.Disruptive() {
				if first := p.Disruptive(); first != nil {
					p.Err = errors.Join(p.Err, fmt.Errorf("broken invariant: planner %s planned %q after %q: one disruptive action per pass; dropped", pl.Name, a, first))
					continue
				}
				disrupted = true
			}
			p.Actions = append(p.Actions, a)
		}
		if st.Hold != "" {
			if p.Waiting == "" {
				p.Waiting = st.Hold
			}
			p.Holds = append(p.Holds, pl.Name+": "+st.Hold)
		}
		switch {
		case st.Blocked != "":
			p.Blocked = st.Blocked
			return p
		case st.Wait != "":
			p.Waiting = st.Wait
			return p
		case disrupted:
			return p
		}
	}
	return p
}

// retiresForeign says why actions may not run when one of them retires (or detaches, on the way to
// retiring) a node whose name a pod that is not the operator's holds (fsm.Pod.Foreign): "" when
// none does. Whatever the concern, such a node is not retired while that pod stands: retiring it
// deletes its ValkeyNode, and the garbage collector would delete that pod, which names the
// ValkeyNode as its owner, with it; the operator deletes no pod it did not create. The runner
// turns the whole step into a hold (its other actions and its wait were that retirement's), so
// that later concerns go on; once the pod is gone, the node is a lost one and retired as such.
func retiresForeign(s fsm.Snapshot, actions []Action) string {
	foreign := map[string]bool{}
	for _, p := range s.Pods {
		if p.Foreign != "" {
			foreign[p.Name] = true
		}
	}
	if len(foreign) == 0 {
		return ""
	}
	for _, a := range actions {
		pod := ""
		if d, ok := a.(DeletePod); ok {
			pod = d.Pod
		} else if d, ok := a.(Detach); ok {
			pod = d.Pod
		}
		if foreign[pod] {
			return fmt.Sprintf("not retiring %s while a pod that is not the operator's holds its name", pod)
		}
	}
	return ""
}

// Default returns the operator's chain in priority order. Stability first: replace missing pods,
// promote the replica of a primary whose container is gone (or hand over a leaving primary's
// slots), then save a shard whose primaries lost their majority, and a takeover whose claim
// tied. Then topology: form the cluster (meet, slots, replicas) and reshard it (slot moves to an
// even spread, removed shards retired).
// Then updates: apply the settings Valkey takes at run time to every node (harmless, batched),
// resize in place the nodes whose CPU and memory alone changed (harmless, batched), replace
// nodes of an older spec and remove surplus
// replicas, one shard at a time. Cleanup: forget departed nodes, delete failed pods. Placement
// last, on a cluster with nothing else to do: spread primaries and copies over the zones. A new
// concern is one new file and one line here.
func Default() Chain {
	return Chain{
		pods,
		failover,
		quorum,
		epochs,
		dead,
		misplaced,
		formation,
		reshard,
		settings,
		resize,
		upgrade,
		cleanup,
		spread,
	}
}

// Before returns the bookkeeping planners whose actions run before the chain's: the credential
// Secret (the ACL Secret holds its passwords' hashes), the Service (a pod's DNS name is under it),
// the shards' disruption budgets (a pod this pass creates counts as not yet a full copy before it
// exists, so its shard's budget is raised first), the NetworkPolicy (in place before a pod this
// pass creates opens its bus), the ACL Secret (a pod this pass creates mounts it) and a password
// rotation's steps.
func Before() Chain { return Chain{credential, service, budgets, networkPolicy, aclSecret, rotation} }

// After returns the bookkeeping planners whose actions run after the chain's: they record what
// the nodes already said (a join completed, a zone move settled) and bring spec.podAnnotations
// onto the live pods. After the steps, so that a step that fails holds them back in nothing; the
// executor runs them whatever the steps did.
func After() Chain { return Chain{records, joins, settled, annotations} }

// Pass plans one reconcile pass for a cluster in state st: the chain's steps (Default), between
// the bookkeeping planners' actions (Before, After). Those are not links of the chain: the chain
// ends at the first step that waits, is blocked or disrupts, and bookkeeping is due on every
// pass (a join completes while a pod of another shard still starts); and they must see every
// step the chain planned (the pods it creates, the nodes it retires). They never wait, hold or
// disrupt, and plan nothing on a cluster with nothing to change: a steady pass has no action.
//
// Invalid runs no chain: nothing is ever created or deleted to make progress on a spec the
// operator refused. Its bookkeeping planners each decide for themselves: the joins its nodes
// report are recorded; the budgets and zone-move marks stay as they are, and nothing is rendered
// or annotated, from a refused spec. A pass that plans no
// step and awaits nothing on a cluster that is not formed yet waits for the nodes to agree.
func Pass(st fsm.State, s fsm.Snapshot) Plan {
	in := Input{State: st, Snapshot: s}
	var p Plan
	if st != fsm.Invalid {
		p = Default().Run(in)
		if p.Waiting == "" && p.Blocked == "" {
			if why := s.Unformed(); why != "" {
				p.Waiting = "waiting for the cluster to agree: " + why
				if gap := s.HostnameGap(""); gap != "" {
					p.Waiting = "waiting for every node to know every peer's hostname: " + gap
				}
			}
		}
	}
	in.Planned = p.Actions
	before, after := bookkeeping(Before(), in), bookkeeping(After(), in)
	p.Actions = slices.Concat(before.Actions, p.Actions, after.Actions)
	p.Err = errors.Join(p.Err, before.Err, after.Err)
	return p
}

// bookkeeping runs the bookkeeping planners c on in. They have no gate (each plans only the
// differences its snapshot shows): a gate, or a step that waits, holds, is blocked or disrupts,
// is a programming error, reported in Err with its actions dropped.
func bookkeeping(c Chain, in Input) Plan {
	var p Plan
	for _, pl := range c {
		if pl.Gate != nil {
			p.Err = errors.Join(p.Err, fmt.Errorf("broken invariant: bookkeeping planner %s has a gate", pl.Name))
			continue
		}
		st := pl.Plan(in)
		if st.Wait != "" || st.Hold != "" || st.Blocked != "" {
			p.Err = errors.Join(p.Err, fmt.Errorf("broken invariant: bookkeeping planner %s waits: %s%s%s", pl.Name, st.Wait, st.Hold, st.Blocked))
			continue
		}
		for _, a := range st.Actions {
			if a == nil || a.Disruptive() || !Upkeep(a) {
				p.Err = errors.Join(p.Err, fmt.Errorf("broken invariant: bookkeeping planner %s planned %v", pl.Name, a))
				continue
			}
			p.Actions = append(p.Actions, a)
		}
	}
	return p
}

// formedOnce reports whether the operator heals the cluster rather than builds it: the pass's
// state is Forming, Active or Upgrading, or the cluster was formed once (fsm.Snapshot.FormedOnce,
// status.formedAt). Never while Invalid: nothing is done on a spec the operator refused.
func formedOnce(in Input) bool {
	return in.State != fsm.Invalid && (in.State == fsm.Forming || servedOnce(in))
}

// servedOnce reports whether the cluster served every slot once: it was formed once
// (fsm.Snapshot.FormedOnce: status.formedAt, which Invalid does not forget), or the pass's state
// is Active or Upgrading. In such a cluster a slot that no node claims was lost with every copy
// of its data. Forming is not such a state: it is where the first assignment happens.
func servedOnce(in Input) bool {
	return in.State == fsm.Active || in.State == fsm.Upgrading || in.Snapshot.FormedOnce()
}
