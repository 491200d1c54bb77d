package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gomomento/valkey-operator/acl"
	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fanout"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/plan"
	"github.com/gomomento/valkey-operator/resources"
	"github.com/gomomento/valkey-operator/valkey"
)

// A rotation of the system users' passwords (fsm/rotation.go decides its phase, plan/rotation.go
// its actions) needs three things of the controller: the passwords of the phase the status
// records (rotationPhase, through resources.ForPhase: what the pass connects and renders with),
// each node's part observed (observeRotation: ACL GETUSER of the three system users, CONFIG GET
// masterauth, compared in memory, never kept), and the executor's three methods. No password
// leaves the operator except to the credential Secret, the ACL Secret (as hashes, and auth.conf)
// and CONFIG SET masterauth.

// rotationPhase is the phase of the rotation the cluster's status records ("" when none).
func rotationPhase(vc *v1.ValkeyCluster) string {
	if st := vc.Status.PasswordRotation; st != nil {
		return st.Phase
	}
	return ""
}

// rotationStep observes the rotation of vc's system passwords, decides the phase the pass
// carries it on in (said once the status records it: sayRotationPhase), and sets sys (the system users the ACL Secret is
// rendered from) to that phase's passwords; obs.snapshot.Rotation is the pass's rotation, its
// Phase the decided one, which the status write records. creds are the pass's connections
// (those of the phase the status records). A no-op, reading nothing, while no rotation is asked
// for or under way.
func (r *ValkeyClusterReconciler) rotationStep(ctx context.Context, log *zap.Logger, vc *v1.ValkeyCluster, obs *observation, creds valkey.Credentials, sys *acl.SystemUsers) error {
	rot := &fsm.Rotation{Asked: vc.Annotations[v1.AnnotationRotateSystemPasswords]}
	if st := vc.Status.PasswordRotation; st != nil {
		rot.Phase, rot.Request = st.Phase, st.Request
	}
	obs.snapshot.Rotation = rot
	if len(rot.Asked) > fsm.MaxRotationRequest && rot.Asked != rot.Request && r.ticks.due("rotation/"+clusterKey(vc), time.Now()) {
		why := fmt.Sprintf("annotation %s is %d characters long, more than %d: set a shorter value to ask for a rotation",
			v1.AnnotationRotateSystemPasswords, len(rot.Asked), fsm.MaxRotationRequest)
		log.Warn(logging.MsgPasswordRotationRefused, zap.String(logging.FieldReason, why))
		recordEvent(r.Events, vc, true, EventPasswordRotation, "Rotate", "%s", why)
	}
	if !rot.Under() && !rot.Asking() {
		return nil
	}
	s, ok, err := ownedSecret(ctx, r.APIReader, vc, resources.CredentialSecretName(vc))
	if err != nil || !ok {
		return err // ensureCredential read it a moment ago: a transient error
	}
	_, _, rot.NextStored = resources.StoredPasswords(s.Data)
	rot.NextPartial = resources.NextPartial(s.Data)
	if rot.Under() && rot.NextPartial && r.ticks.due("rotation/"+clusterKey(vc), time.Now()) {
		why := fmt.Sprintf("Secret %s holds one of %s and %s and not the other (edited by hand?): the rotation goes back to its Adding phase and writes the missing one",
			s.Name, resources.OperatorPasswordNextKey, resources.ReplPasswordNextKey)
		log.Warn(logging.MsgPasswordRotationRestarted, zap.String(logging.FieldReason, why))
		recordEvent(r.Events, vc, true, EventPasswordRotation, "Rotate", "%s", why)
	}
	if rot.Under() {
		r.observeRotation(ctx, vc, obs, creds, withPasswords(*sys, resources.ForPhase(rot.Phase, s.Data)))
	}
	phase, waiting := obs.snapshot.RotationNext()
	if waiting != "" {
		log.Debug(logging.MsgPasswordRotationWaiting, zap.String(logging.FieldPhase, phase), zap.String(logging.FieldWaiting, waiting))
	}
	obs.rotation = rotationStatus(vc.Status.PasswordRotation, rot, phase, obs.snapshot.Now)
	obs.rotationEntered = phase != rot.Phase
	rot.Phase = phase
	pp := resources.ForPhase(phase, s.Data)
	*sys = withPasswords(*sys, pp)
	obs.primaryAuth = pp.Use.Repl
	return nil
}

// sayRotationPhase says the phase a rotation entered this pass, once the status that records it
// is written; and, after an operator restart, the phase of a rotation under way that this
// operator has not said yet: one killed between the status write and its line left the phase
// unsaid. So each phase is said at least once, twice only across a restart.
func (r *ValkeyClusterReconciler) sayRotationPhase(log *zap.Logger, vc *v1.ValkeyCluster, obs *observation) {
	st := obs.rotation
	if st == nil {
		return
	}
	fresh := r.rotationsSaid.announce(clusterKey(vc), st.Phase)
	if !obs.rotationEntered && (!fresh || st.Phase == v1.RotationComplete) {
		return
	}
	log.Info(logging.MsgPasswordRotation, zap.String(logging.FieldPhase, st.Phase), zap.String(logging.FieldRequest, st.Request))
	recordEvent(r.Events, vc, false, EventPasswordRotation, "Rotate", "rotation of the system passwords (request %q): %s", st.Request, st.Phase)
}

// withPasswords is sys with the passwords of pp.
func withPasswords(sys acl.SystemUsers, pp resources.PhasePasswords) acl.SystemUsers {
	p := pp.SystemUsers()
	sys.OperatorPassword, sys.ReplPassword, sys.MigratePassword = p.OperatorPassword, p.ReplPassword, p.MigratePassword
	sys.OperatorAlso, sys.ReplAlso, sys.MigrateAlso = p.OperatorAlso, p.ReplAlso, p.MigrateAlso
	return sys
}

// rotationStatus is status.passwordRotation once the pass carries rot on in phase: a new record
// when a rotation starts, the phase (and completedAt once Complete) otherwise.
func rotationStatus(prev *v1.PasswordRotationStatus, rot *fsm.Rotation, phase string, now time.Time) *v1.PasswordRotationStatus {
	at := metav1.NewTime(now.UTC().Truncate(time.Second))
	if !rot.Under() && phase == v1.RotationAdding {
		return &v1.PasswordRotationStatus{Request: rot.Asked, Phase: phase, StartedAt: at}
	}
	st := prev.DeepCopy()
	if st == nil {
		return nil
	}
	st.Phase = phase
	if phase == v1.RotationComplete && st.CompletedAt == nil {
		st.CompletedAt = &at
	}
	return st
}

// observeRotation asks every node the pass observed for its part of the rotation, against the
// passwords of the phase the status records (want): the password hashes of the three system
// users (ACL GETUSER), and while Switching its masterauth (CONFIG GET, compared here and
// dropped). It asks them as the pushes do (fanout.Each: at most fanout.Limit at once, a panic
// logged as that node's failure). A node that does not answer is left without a part (it holds
// the rotation back).
func (r *ValkeyClusterReconciler) observeRotation(ctx context.Context, vc *v1.ValkeyCluster, obs *observation, creds valkey.Credentials, want acl.SystemUsers) {
	hashes := acl.SystemHashes(want)
	phase := obs.snapshot.Rotation.Phase
	var targets []fanout.Target
	index := map[string]int{} // a target's pod's index in the snapshot
	for i, p := range obs.snapshot.Pods {
		if pod := obs.pods[p.Name]; pod != nil && p.Node != nil && p.Node.Reachable {
			targets = append(targets, fanout.Target{Pod: pod, Addr: nodeAddr(pod.Status.PodIP)})
			index[p.Name] = i
		}
	}
	parts := fanout.Each(ctx, targets, func(ctx context.Context, t fanout.Target) *fsm.NodeRotation {
		c, err := r.conns.Client(clusterKey(vc), t.Addr, creds)
		if err != nil {
			return nil
		}
		nr := &fsm.NodeRotation{Hashes: true}
		for user, h := range hashes {
			got, err := c.ACLPasswords(ctx, user)
			if err != nil {
				return nil
			}
			slices.Sort(got)
			nr.Hashes = nr.Hashes && slices.Equal(got, h)
		}
		if phase == v1.RotationSwitching {
			cfg, err := c.ConfigGet(ctx, "masterauth")
			if err != nil {
				return nil
			}
			nr.PrimaryAuth = cfg["masterauth"] == want.ReplPassword
		}
		return nr
	}, func(t fanout.Target, p *logging.PanicError) *fsm.NodeRotation {
		logging.LogPanic(logging.FromContext(ctx), t.Pod.Name, p)
		return nil
	})
	for i, t := range targets {
		obs.snapshot.Pods[index[t.Pod.Name]].Node.Rotation = parts[i]
	}
}

// rewriteCredential rewrites vc's credential Secret's data with change (false: nothing to
// write), against the version read, so that two passes never write two different ones. what
// names the change in the error.
func (r *ValkeyClusterReconciler) rewriteCredential(ctx context.Context, vc *v1.ValkeyCluster, what string, change func(map[string][]byte) (map[string][]byte, bool, error)) error {
	s, ok, err := ownedSecret(ctx, r.APIReader, vc, resources.CredentialSecretName(vc))
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("credential Secret not found")
	}
	data, changed, err := change(s.Data)
	if err != nil || !changed {
		return err
	}
	s.Data = data
	if err := r.Update(ctx, s); err != nil {
		return fmt.Errorf("%s in %s: %w", what, s.Name, err)
	}
	return nil
}

// writeNextPasswords adds next passwords to vc's credential Secret (plan.WriteNextPasswords),
// unless it holds some.
func (r *ValkeyClusterReconciler) writeNextPasswords(ctx context.Context, vc *v1.ValkeyCluster) error {
	return r.rewriteCredential(ctx, vc, "write the next passwords", resources.WithNextPasswords)
}

// promotePasswords makes the next passwords of vc's credential Secret its current ones
// (plan.PromotePasswords).
func (r *ValkeyClusterReconciler) promotePasswords(ctx context.Context, vc *v1.ValkeyCluster) error {
	return r.rewriteCredential(ctx, vc, "make the next passwords current", func(data map[string][]byte) (map[string][]byte, bool, error) {
		out, changed := resources.PromotedPasswords(data)
		return out, changed, nil
	})
}

// setPrimaryAuth sets masterauth on the nodes of a (plan.SetPrimaryAuth) to the pass's
// replication password: the link each replica has stays up, and its next one authenticates
// with it. Every node is asked; the failures are returned together.
func (r *ValkeyClusterReconciler) setPrimaryAuth(ctx context.Context, obs *observation, a plan.SetPrimaryAuth, node func(string) (*valkey.Client, error)) error {
	if obs.primaryAuth == "" {
		return errors.New("broken invariant: no replication password for the phase")
	}
	var errs []error
	for _, pod := range a.Pods {
		c, err := node(pod)
		if err == nil {
			err = c.ConfigSet(ctx, map[string]string{"masterauth": obs.primaryAuth})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("pod %s: %w", pod, err))
		}
	}
	return errors.Join(errs...)
}

// operatorPasswordFor is the password the ACL controller connects with to push file: the
// current one in the credential Secret's data, unless file no longer lets it in (a rotation
// retiring it), then the next one. "" when file lets neither in (acl.KeepsOperator).
func operatorPasswordFor(file string, data map[string][]byte) string {
	current, next, ok := resources.StoredPasswords(data)
	switch {
	case current.Operator != "" && acl.KeepsOperator(file, current.Operator):
		return current.Operator
	case ok && acl.KeepsOperator(file, next.Operator):
		return next.Operator
	}
	return ""
}
