package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gomomento/valkey-operator/acl"
	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/plan"
	"github.com/gomomento/valkey-operator/resources"
	"github.com/gomomento/valkey-operator/tlsmaterial"
	"github.com/gomomento/valkey-operator/valkey"
	"github.com/gomomento/valkey-operator/version"
)

// clusterPass is one pass of the cluster controller as one value: each stage reads what the
// stages before it left in it and leaves what the stages after it need, so that reconcilePass
// reads as the pass's table of contents.
type clusterPass struct {
	r     *ValkeyClusterReconciler
	req   ctrl.Request
	log   *zap.Logger
	start time.Time
	vc    v1.ValkeyCluster

	// load: the TLS Secret's material, why the spec cannot be acted on ("" when it can), the
	// resolved config chain and ACL, the system users and the operator's connections.
	tm             *tlsmaterial.Material
	problem        string
	rc             *resources.ResolvedConfig
	users          *resolvedACL
	credential     *corev1.Secret
	serviceMissing bool
	serviceBehind  bool
	sys            acl.SystemUsers
	creds, migrate valkey.Credentials
	// nodeSpec: the spec a node created now gets (nil while the spec cannot be acted on) and
	// its hash.
	desired *v1.ValkeyNodeSpec
	hash    string
	// observe, desire: what the nodes and Kubernetes said, and what the pass wants of them.
	obs         *observation
	refusedWait time.Duration
	// decide, plan, status.
	state  fsm.State
	event  fsm.Event
	plan   plan.Plan
	health health
}

// reconcilePass is one level-triggered pass: load → node spec → observe → desire → decide →
// plan → one status write → execute → requeue. Reconcile (pass.go) runs it under the pass
// budget.
func (r *ValkeyClusterReconciler) reconcilePass(ctx context.Context, req ctrl.Request) (_ ctrl.Result, passErr error) {
	p := &clusterPass{r: r, req: req, start: time.Now(), log: logging.FromContext(ctx).With(logging.ClusterName(req.Name))}
	if found, err := p.loadCluster(ctx); !found || err != nil {
		return ctrl.Result{}, err
	}
	// The version the pass ends with, its own status write included, is what the next pass may
	// read from the cache.
	defer func() { r.versions.end(req.String(), p.vc.ResourceVersion, passErr == nil) }()
	if stop, err := p.leaveAlone(ctx); stop || err != nil {
		return ctrl.Result{}, err
	}
	missing, err := p.load(ctx)
	switch {
	case missing != nil:
		return r.holdWithoutCredential(ctx, p.log, &p.vc, missing)
	case err != nil:
		return ctrl.Result{}, err
	}
	p.nodeSpec()
	if err := p.observe(ctx); err != nil {
		return ctrl.Result{}, err
	}
	if err := p.desire(ctx); err != nil {
		return ctrl.Result{}, err
	}
	if err := p.decide(); err != nil {
		return ctrl.Result{}, err
	}
	p.planSteps()
	if err := p.writeStatus(ctx); err != nil {
		return ctrl.Result{}, err
	}
	if err := p.execute(ctx); err != nil {
		return ctrl.Result{}, err
	}
	return p.requeue(), nil
}

// loadCluster reads the cluster (found false when it is gone: what the reconciler keeps of it
// is dropped).
func (p *clusterPass) loadCluster(ctx context.Context) (bool, error) {
	r := p.r
	if err := r.versions.load(ctx, r.Client, r.APIReader, p.req.NamespacedName, &p.vc); err != nil {
		if apierrors.IsNotFound(err) {
			r.forgetCluster(p.req.String())
		}
		return false, client.IgnoreNotFound(err)
	}
	return true, nil
}

// leaveAlone reports whether the pass stops here: the cluster is being deleted (owner
// references and the garbage collector remove the rest), or so is its namespace (pods
// re-created there would be refused, and its Secrets going first must not read as a credential
// to regenerate).
func (p *clusterPass) leaveAlone(ctx context.Context) (bool, error) {
	r, vc := p.r, &p.vc
	if vc.DeletionTimestamp != nil {
		r.forgetCluster(p.req.String())
		return true, nil
	}
	r.Metrics.Pass(vc.Namespace, vc.Name)
	gone, err := r.namespaceGoingAway(ctx, vc.Namespace)
	if gone {
		r.conns.Forget(p.req.String())
	}
	return gone || err != nil, err
}

// load validates the TLS Secret, resolves the cluster's references and ensures the objects the
// pods need before they start (ensureObjects). A problem with any of them is p.problem (the
// cluster goes Invalid); a missing credential Secret under a cluster with nodes is returned
// as such (the pass holds).
func (p *clusterPass) load(ctx context.Context) (*credentialMissing, error) {
	r, vc := p.r, &p.vc
	var err error
	if p.tm, p.problem, err = r.validateTLS(ctx, p.log, vc); err != nil || p.problem != "" {
		return nil, err
	}
	if p.rc, p.users, p.problem, err = r.load(ctx, vc); err != nil || p.problem != "" {
		return nil, err
	}
	p.sys, p.creds, p.migrate, p.credential, err = r.ensureObjects(ctx, vc, p.rc)
	if err == nil {
		p.serviceMissing, p.serviceBehind, err = r.serviceState(ctx, vc)
	}
	var sp *SpecProblem
	switch missing := (*credentialMissing)(nil); {
	case errors.As(err, &missing):
		return missing, nil
	case errors.As(err, &sp):
		p.problem, p.creds, p.migrate = sp.Reason, valkey.Credentials{}, valkey.Credentials{}
	case err != nil:
		return nil, err
	}
	return nil, nil
}

// nodeSpec builds the spec a node created now gets: its hash (outdated or not), its settings
// and its start hash, built once per pass; and the connections' TLS.
func (p *clusterPass) nodeSpec() {
	if p.problem != "" {
		return
	}
	p.desired = &resources.BuildValkeyNode(&p.vc, p.rc, "", 0, "").Spec
	p.hash = resources.NodeSpecHash(p.desired)
	if p.tm != nil {
		p.creds.TLS = p.r.tls.get(clusterKey(&p.vc), p.tm)
		p.migrate.TLS = p.creds.TLS
	}
}

// observe asks Kubernetes and every node (controllers/observe.go), then checks what only an
// observation can say about the spec: a policy name taken by another's object, a category or
// command a node does not know, a downgrade Valkey cannot take.
func (p *clusterPass) observe(ctx context.Context) error {
	r, vc := p.r, &p.vc
	observing := time.Now()
	obs, err := r.observe(ctx, vc, p.problem, p.hash, p.creds)
	if err != nil {
		return err
	}
	p.obs = obs
	r.reportForeign(p.log, vc, obs.snapshot)
	if sp := (*SpecProblem)(nil); errors.As(obs.networkErr, &sp) {
		// A policy name taken by an object the cluster does not control: Invalid from this
		// pass on, like a taken Service or Secret name, so that no pod opens its bus under
		// another's policy, and no pass retries what the status already says.
		if p.problem == "" {
			p.problem, obs.snapshot.SpecProblem, p.desired = sp.Reason, sp.Reason, nil
		}
		obs.networkErr = nil
	}
	// A disruptive step of an earlier pass has now been observed: the ACL and TLS controllers
	// may touch the nodes again. Not while a failover the operator issued has not been seen to
	// land (a coordinated failover takes up to a few seconds after the command returned).
	if obs.snapshot.Failover == nil {
		r.Guard.Observed(p.req.String(), observing)
	}
	p.creds, p.migrate = withTLS(vc, p.creds, p.creds.TLS, obs.addrs), withTLS(vc, p.migrate, p.migrate.TLS, obs.addrs)
	obs.tls = p.tm
	r.retainConnections(vc, obs)
	if p.problem == "" {
		// A category or command a node does not know (rolenames.go): Invalid, before the ACL
		// Secret is rendered with it.
		if p.problem = r.roleNamesProblem(ctx, vc, p.users, obs, p.creds); p.problem != "" {
			obs.snapshot.SpecProblem = p.problem
		} else if p.problem = downgradeProblem(p.rc.Image.Version, obs.snapshot); p.problem != "" {
			obs.snapshot.SpecProblem = p.problem // downgrade.go
		}
	}
	obs.snapshot.AtomicMoves = p.rc != nil && version.Parse(p.rc.Image.Version).AtomicSlotMigration()
	obs.snapshot.ServiceMissing, obs.snapshot.ServiceBehind = p.serviceMissing, p.serviceBehind
	obs.credential, obs.snapshot.CredentialStale = p.credential, p.credential != nil
	return nil
}

// desire completes the snapshot with what the pass wants of the nodes, given what they said:
// the live settings (evicting changes held until confirmed), the sizes, the memories of earlier
// passes, the rotation's phase and the ACL Secret rendered for it.
func (p *clusterPass) desire(ctx context.Context) error {
	r, vc, obs := p.r, &p.vc, p.obs
	if p.desired != nil {
		// A live settings change that evicts keys waits for a confirmation: the pass builds from
		// the values the nodes run for it (held.go). The spec hash leaves live settings out, so
		// hash is the same either way.
		if kept := r.holdEvictions(p.log, vc, p.rc, obs); kept != p.rc {
			p.rc = kept
			p.desired = &resources.BuildValkeyNode(vc, p.rc, "", 0, "").Spec
		}
		obs.snapshot.Settings = p.desired.ValkeySettings
		obs.snapshot.StartHash = resources.StartSpecHash(p.desired)
		r.observeSize(obs, p.desired)
		r.reportResizes(p.log, vc, obs)
	}
	obs.snapshot.CreateRefused, obs.snapshot.CreateHeld, p.refusedWait = r.creates.state(clusterKey(vc), vc.Generation, obs.snapshot.Now)
	obs.snapshot.ZoneMoveHeld = r.moves.state(clusterKey(vc), obs.snapshot.Now)
	if p.problem != "" {
		return nil
	}
	// The ACL Secret is rendered from this pass's observation, which says whether a reshard is
	// pending (SlotImport) and the rotation's phase; the acl secret planner writes it, before
	// the steps (a pod this pass creates mounts it), when the stored one differs.
	if err := r.rotationStep(ctx, p.log, vc, obs, p.creds, &p.sys); err != nil {
		return err
	}
	p.sys.SlotImport = p.sys.Atomic && plan.ReshardPending(obs.snapshot)
	obs.aclSecret = resources.BuildACLSecret(vc, acl.Render(p.users.bindings, p.users.roles, p.sys), p.sys.ReplPassword)
	var err error
	obs.snapshot.ACLSecretStale, err = r.secretStale(ctx, obs.aclSecret)
	return err
}

// decide fires the state machine's event for the snapshot (fsm.Decide), one line and one Event
// per transition.
func (p *clusterPass) decide() error {
	r, vc := p.r, &p.vc
	p.state = vc.Status.State
	decision := fsm.Decide(p.obs.snapshot)
	p.event = decision.Event
	if decision.Event == "" {
		return nil
	}
	next, err := fsm.New(p.state).Fire(decision.Event)
	if err != nil {
		return fmt.Errorf("broken invariant: %w", err)
	}
	if next == p.state {
		return nil
	}
	// One line per transition; Forming→Active is the contract's own line.
	msg := logging.TransitioningTo(string(next))
	if next == fsm.Active && p.state == fsm.Forming {
		msg = logging.MsgClusterFormed
	}
	logging.Target(p.log, logging.TargetFSM).Info(msg, zap.String(logging.FieldReason, decision.Reason))
	if next == fsm.Invalid {
		recordEvent(r.Events, vc, true, EventInvalid, "Validate", "%s: %s", msg, decision.Reason)
	} else {
		recordEvent(r.Events, vc, false, EventTransition, "Reconcile", "%s: %s", msg, decision.Reason)
	}
	p.state = next
	return nil
}

// planSteps runs the planners (plan.Pass) on the snapshot in the pass's state.
func (p *clusterPass) planSteps() {
	obs := p.obs
	p.plan = plan.Pass(p.state, obs.snapshot)
	// For status only (no planner reads it): the live values Valkey refused on an earlier pass
	// that this pass sets again, unchanged.
	obs.snapshot.SettingsRefused = p.r.live.standing(clusterKey(&p.vc), p.plan)
	p.log.Debug(logging.MsgReconcilePass, zap.String(logging.FieldState, string(p.state)), zap.String(logging.FieldEvent, string(p.event)),
		zap.Int(logging.FieldActions, len(p.plan.Actions)), zap.String(logging.FieldWaiting, p.plan.Waiting), zap.Strings(logging.FieldHolds, p.plan.Holds))
}

// writeStatus is the pass's one status write, before its steps. The status is computed from
// this pass's observation and plan, so it is the same before or after them; written first, it
// records the intent of an irreversible step (the failover to issue, in status.failover;
// DataLost, before a lost shard's slots are served again empty; a rotation's phase), and an
// operator that dies in between still said so.
func (p *clusterPass) writeStatus(ctx context.Context) error {
	var err error
	if p.health, err = p.r.writeStatus(ctx, &p.vc, p.state, p.problem, p.obs, p.plan); err != nil {
		return err
	}
	p.r.sayRotationPhase(p.log, &p.vc, p.obs)
	return nil
}

// execute carries out the plan. A broken invariant of the planners (plan.Err) dropped its
// offending actions; the rest of the pass is safe to run, and the error is returned with the
// pass's outcome. So is a failure to read the disruption budgets (obs.budgetErr): they are
// harmless bookkeeping and hold nothing back. Every write of the pass, bookkeeping included, is
// one of its actions.
func (p *clusterPass) execute(ctx context.Context) error {
	r, vc, obs := p.r, &p.vc, p.obs
	err := errors.Join(obs.budgetErr, obs.networkErr, r.execute(ctx, p.log, vc, p.rc, p.creds, p.migrate, obs, p.plan), p.plan.Err)
	r.logHeartbeat(p.log, vc, p.state, obs, p.plan)
	r.recordPass(vc, p.state, obs, p.health, obs.snapshot.Now)
	return err
}

// requeue says when the next pass looks (requeueAfter), and remembers a quiet pass.
func (p *clusterPass) requeue() ctrl.Result {
	r, vc, obs, h := p.r, &p.vc, p.obs, p.health
	after := requeueAfter(h, p.plan)
	if obs.snapshot.Rotation.Under() && after > waitInterval {
		after = waitInterval // each phase waits on the nodes, which no watch reports
	}
	if obs.snapshot.CreateHeld && p.refusedWait < after && !h.Ready {
		after = p.refusedWait // the next try of a refused pod
	}
	quiet := after == healthyInterval && p.problem == "" && !changesCluster(p.plan)
	r.rememberQuiet(p.start, vc, p.state, obs, h, p.creds, quiet)
	if after == healthyInterval {
		after = jittered(after)
	}
	return ctrl.Result{RequeueAfter: after}
}
