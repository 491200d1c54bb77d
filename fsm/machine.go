// Package fsm holds the ValkeyCluster state machine: its states, events, the transition table
// (github.com/looplab/fsm), the pure decision of which event fires on an observed snapshot, and
// the snapshot queries (live pods, shard primary, owned node ids, …) that the decision and the
// planners of package plan share.
//
// Nothing here does I/O or imports the Kubernetes client or valkey-go: the controller observes
// the world into a Snapshot, asks Decide and plan.Pass, and executes the actions. The machine is
// rebuilt on every reconcile from the persisted status.state; it is never the operator's memory.
package fsm

import (
	"context"
	"errors"
	"fmt"

	lfsm "github.com/looplab/fsm"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// State is the persisted status.state (apis owns the names; the machine owns the moves).
type State = v1.State

// The five states of SPEC section 3, and Initial: the empty status.state of an object the
// operator has not yet reconciled, so that a new cluster's first move is a logged transition.
const (
	Initial       State = ""
	Bootstrapping       = v1.StateBootstrapping
	Forming             = v1.StateForming
	Active              = v1.StateActive
	Upgrading           = v1.StateUpgrading
	Invalid             = v1.StateInvalid
)

// Event names a transition. Events are named after what they do; the table below says from
// which states each is legal.
type Event string

// The events of the transition table.
const (
	// EventBootstrap starts (or restarts, after Invalid) creating the cluster's objects and pods.
	EventBootstrap Event = "bootstrap"
	// EventForm: every pod runs and has an IP; meet, assign slots, attach replicas.
	EventForm Event = "form"
	// EventActivate: the cluster is formed and in agreement.
	EventActivate Event = "activate"
	// EventUpgrade: pods are out of date or the topology changed.
	EventUpgrade Event = "upgrade"
	// EventInvalidate: a reference does not resolve or the spec is unusable.
	EventInvalidate Event = "invalidate"
)

// transitions is the legal transition table. A formed cluster never goes back to Bootstrapping
// or Forming: Active heals it in place. Bootstrapping may jump to Active and Invalid may return
// to any working state, because the decision is made from what is observed (an operator
// restarted after the cluster formed, a cause fixed on a cluster that kept serving).
var transitions = []lfsm.EventDesc{
	{Name: string(EventBootstrap), Src: states(Bootstrapping, Initial, Invalid), Dst: string(Bootstrapping)},
	{Name: string(EventForm), Src: states(Forming, Bootstrapping, Invalid), Dst: string(Forming)},
	{Name: string(EventActivate), Src: states(Active, Bootstrapping, Forming, Upgrading, Invalid), Dst: string(Active)},
	{Name: string(EventUpgrade), Src: states(Upgrading, Active, Invalid), Dst: string(Upgrading)},
	{Name: string(EventInvalidate), Src: states(Invalid, Initial, Bootstrapping, Forming, Active, Upgrading), Dst: string(Invalid)},
}

// states lists source states; each event lists its own destination first, because a
// self-transition (deciding the state the cluster is already in) is legal and a no-op.
func states(ss ...State) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

// ErrIllegalTransition is returned by Fire when the table does not allow the event from the
// current state: a broken invariant of the decision, never a user error.
var ErrIllegalTransition = errors.New("illegal transition")

// Machine is one cluster's state machine, rebuilt on each reconcile from status.state.
type Machine struct {
	f *lfsm.FSM
}

// New returns a machine in state current (Initial for a new object).
func New(current State) *Machine {
	return &Machine{f: lfsm.NewFSM(string(current), transitions, nil)}
}

// Current is the machine's state.
func (m *Machine) Current() State { return State(m.f.Current()) }

// Fire applies event e. It returns the new state; a self-transition is not an error and
// returns the unchanged state. An event the table does not allow from the current state
// wraps ErrIllegalTransition.
func (m *Machine) Fire(e Event) (State, error) {
	err := m.f.Event(context.Background(), string(e))
	var noTransition lfsm.NoTransitionError
	switch {
	case err == nil, errors.As(err, &noTransition):
		return m.Current(), nil
	default:
		return m.Current(), fmt.Errorf("%w: %s from %s: %w", ErrIllegalTransition, e, m.Current(), err)
	}
}

// Target is the state event e leads to.
func Target(e Event) State {
	for _, t := range transitions {
		if t.Name == string(e) {
			return State(t.Dst)
		}
	}
	return ""
}

// eventTo returns the event whose destination is s.
func eventTo(s State) Event {
	for _, t := range transitions {
		if t.Dst == string(s) {
			return Event(t.Name)
		}
	}
	return ""
}
