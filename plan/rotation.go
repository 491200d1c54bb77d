package plan

import (
	"fmt"
	"strings"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
)

// rotation carries out the phase of a rotation of the system passwords that the pass is in
// (fsm.Snapshot.Rotation, its Phase the one fsm.Snapshot.RotationNext chose, which the pass's
// status write records before these actions run). Its rules, in order:
//
//  1. Nothing while the spec cannot be acted on, or no rotation is under way.
//  2. Adding: the next passwords are written to the credential Secret, once (WriteNextPasswords):
//     before any node is given them, so that the Secret always holds every password a node
//     accepts. The ACL Secret the pass renders gives every system user both (acl secret planner).
//  3. Switching: every running node whose primaryauth is not the next replication password is
//     given it (SetPrimaryAuth, CONFIG SET masterauth: the replication link stays up, and the
//     next reconnect uses it). The pass connects with the next passwords.
//  4. Retiring: the credential Secret makes the next passwords the current ones
//     (PromotePasswords); the ACL Secret the pass renders gives every system user those alone.
//
// Every action is harmless and idempotent: a pass that repeats one after a restart changes
// nothing more.
var rotation = Planner{Name: "rotation", Plan: func(in Input) Step {
	s := in.Snapshot
	r := s.Rotation
	if s.SpecProblem != "" || !r.Under() {
		return Step{}
	}
	switch r.Phase {
	case v1.RotationAdding:
		if !r.NextStored {
			return Step{Actions: []Action{WriteNextPasswords{}}}
		}
	case v1.RotationSwitching:
		var pods []string
		for _, p := range s.Pods {
			if p.Deleting || p.Phase != fsm.PodRunning || p.Exited || p.Node == nil || !p.Node.Reachable {
				continue
			}
			if p.Node.Rotation == nil || !p.Node.Rotation.PrimaryAuth {
				pods = append(pods, p.Name)
			}
		}
		if len(pods) > 0 {
			return Step{Actions: []Action{SetPrimaryAuth{Pods: pods}}}
		}
	case v1.RotationRetiring:
		if r.NextStored {
			return Step{Actions: []Action{PromotePasswords{}}}
		}
	}
	return Step{}
}}

// WriteNextPasswords adds fresh next passwords to the credential Secret, unless it holds some.
type WriteNextPasswords struct{}

// SetPrimaryAuth sets masterauth to the next replication password on the nodes of Pods.
type SetPrimaryAuth struct{ Pods []string }

// PromotePasswords makes the credential Secret's next passwords its current ones.
type PromotePasswords struct{}

func (WriteNextPasswords) action() {}
func (SetPrimaryAuth) action()     {}
func (PromotePasswords) action()   {}

func (WriteNextPasswords) upkeep() {}
func (SetPrimaryAuth) upkeep()     {}
func (PromotePasswords) upkeep()   {}

func (WriteNextPasswords) Disruptive() bool { return false }
func (SetPrimaryAuth) Disruptive() bool     { return false }
func (PromotePasswords) Disruptive() bool   { return false }

func (WriteNextPasswords) String() string { return "write the next system passwords" }
func (a SetPrimaryAuth) String() string {
	return fmt.Sprintf("set the next replication password as primaryauth on %s", strings.Join(a.Pods, ", "))
}
func (PromotePasswords) String() string { return "make the next system passwords the current ones" }
