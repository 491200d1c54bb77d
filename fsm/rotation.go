package fsm

import (
	"fmt"
	"strings"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// A rotation of the system users' passwords spans passes: Adding, Switching, Retiring, then
// Complete (v1alpha1.PasswordRotationStatus). Each pass decides, from the phase its status
// recorded and what it observed, the phase it carries on in (Rotation.Next); the planner
// (plan/rotation.go) turns that phase into actions, and the pass writes the phase to status
// before it runs them. Each phase ends only when every node is seen to have done its part:
//
//  1. A rotation starts when the annotation asks for a request the status has not answered,
//     on an Active cluster with a spec the operator can act on.
//  2. Adding ends when the credential Secret holds the next passwords and every node's system
//     users accept exactly the current and the next ones (NodeRotation.Hashes).
//  3. Switching ends when every node also authenticates to its primary with the next
//     replication password (NodeRotation.PrimaryAuth).
//  4. Retiring ends when the Secret holds only the new passwords and every node's system users
//     accept them alone.
//  5. A Secret that lost one of the next passwords (edited by hand) while a rotation is under
//     way takes the rotation back to Adding, where the missing one is written again: carrying on
//     would take it to Complete with the old passwords.
//
// "Every node": no pod starting (Pending), and every running pod's node answered and passed.
// A pod that is gone or failed is replaced from the Secrets as they stand, and checked once it
// runs.

// Rotation is a rotation of the system passwords as a pass sees it.
type Rotation struct {
	// Phase is status.passwordRotation.phase ("" when no rotation was ever asked for).
	Phase string
	// Request is status.passwordRotation.request; Asked is the annotation's value.
	Request, Asked string
	// NextStored: the credential Secret holds next passwords. NextPartial: it holds one and not
	// the other (edited by hand).
	NextStored, NextPartial bool
}

// NodeRotation is one node's part of a rotation under way, checked against the pass's phase.
type NodeRotation struct {
	// Hashes: its system users accept exactly the passwords of the phase (ACL LIST).
	Hashes bool
	// PrimaryAuth: its masterauth is the replication password of the phase.
	PrimaryAuth bool
}

// MaxRotationRequest bounds the annotation's value (status.passwordRotation.request).
const MaxRotationRequest = 253

// Under reports whether a rotation is under way: started and not complete.
func (r *Rotation) Under() bool {
	return r != nil && r.Phase != "" && r.Phase != v1.RotationComplete
}

// Asking reports whether the annotation asks for a rotation the status has not answered.
func (r *Rotation) Asking() bool {
	return r != nil && r.Asked != "" && r.Asked != r.Request && len(r.Asked) <= MaxRotationRequest
}

// RotationNext is the phase the pass carries the rotation on in, and why it does not go further
// ("" when it does, or when there is nothing to rotate).
func (s Snapshot) RotationNext() (phase, waiting string) {
	r := s.Rotation
	if r == nil {
		return "", ""
	}
	if r.Under() && r.NextPartial {
		return v1.RotationAdding, "the credential Secret holds only one of the next passwords: the rotation adds them again"
	}
	switch r.Phase {
	case "", v1.RotationComplete:
		if r.Asking() && s.State == Active && s.SpecProblem == "" {
			return v1.RotationAdding, ""
		}
		return r.Phase, ""
	case v1.RotationAdding:
		if !r.NextStored {
			return r.Phase, "the next passwords are being written to the credential Secret"
		}
		if why := s.rotationLag(func(n *NodeRotation) bool { return n.Hashes }); why != "" {
			return r.Phase, "waiting for " + why + " to accept the next passwords beside the current ones"
		}
		return v1.RotationSwitching, ""
	case v1.RotationSwitching:
		if why := s.rotationLag(func(n *NodeRotation) bool { return n.Hashes && n.PrimaryAuth }); why != "" {
			return r.Phase, "waiting for " + why + " to authenticate to its primary with the next replication password"
		}
		return v1.RotationRetiring, ""
	case v1.RotationRetiring:
		if r.NextStored {
			return r.Phase, "the new passwords are being made the current ones in the credential Secret"
		}
		if why := s.rotationLag(func(n *NodeRotation) bool { return n.Hashes }); why != "" {
			return r.Phase, "waiting for " + why + " to refuse the old passwords"
		}
		return v1.RotationComplete, ""
	}
	return r.Phase, ""
}

// rotationLag names the nodes that do not pass ok ("" when every node does): a pod starting, or
// a running pod whose node did not answer or does not pass.
func (s Snapshot) rotationLag(ok func(*NodeRotation) bool) string {
	var lag []string
	for _, p := range s.Pods {
		switch {
		case p.Deleting || p.Phase == PodFailed || p.Phase == PodSucceeded || p.Lost():
		case p.Phase != PodRunning || p.Exited:
			lag = append(lag, p.Name)
		case p.Node == nil || !p.Node.Reachable || p.Node.Rotation == nil || !ok(p.Node.Rotation):
			lag = append(lag, p.Name)
		}
	}
	if len(lag) == 0 {
		return ""
	}
	if len(lag) > 3 {
		lag = append(lag[:3], fmt.Sprintf("%d more", len(lag)-3))
	}
	return "pod " + strings.Join(lag, ", ")
}
