package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/plan"
	"github.com/gomomento/valkey-operator/resources"
	"github.com/gomomento/valkey-operator/valkey"
)

// execute carries out the plan in order: one short loop, and one method per action (run). It
// stops at the first failing step; the next pass observes again and plans what is left.
//
// The bookkeeping actions (plan.Upkeep: the budgets, the ValkeyNodes' records, the pods'
// annotations, a rotation's steps) are harmless, idempotent and independent of the steps: a
// failure of theirs is returned with the pass's outcome and holds nothing back, and those after
// the steps (plan.After) run even when a step failed, as they did when they were side steps of
// the pass. What the pods this pass creates depend on is the exception (beforePods: the
// credential Secret, the Service, the ACL Secret): a failure to write it ends the steps. A live
// setting Valkey refuses (plan.SetConfig) holds back neither the other nodes' settings nor the
// roll that follows them: its error is the pass's (retried with back-off) once every other step
// has run.
//
// A pod the API server refuses ends the pass's creations (creates.go): the refusal is recorded,
// said at WARN, and the rest of the plan goes on.
func (r *ValkeyClusterReconciler) execute(ctx context.Context, log *zap.Logger, vc *v1.ValkeyCluster, rc *resources.ResolvedConfig, creds, migrate valkey.Credentials, obs *observation, pl plan.Plan) error {
	x := &execution{r: r, log: log, vc: vc, rc: rc, creds: creds, migrate: migrate, obs: obs}
	var deferred error // the errors of steps that hold back nothing after them
	var failed error   // the step that ended the steps: only bookkeeping runs after it
	for _, a := range pl.Actions {
		independent := plan.Upkeep(a) && !beforePods(a)
		if failed != nil && !independent {
			continue
		}
		if holdsPushes(a) {
			// The ACL and TLS controllers keep off the cluster's nodes from now until a pass
			// has observed the step's effect (fanout.Guard).
			begin := r.Guard.Begin
			if promotesLost(a) {
				begin = r.Guard.BeginNow
			}
			end := begin(ctx, clusterKey(vc), a.String())
			defer func() { end(time.Now()) }()
		}
		out, err := x.run(ctx, a)
		_, setsConfig := a.(plan.SetConfig)
		switch {
		case out.skipped:
			continue
		case err != nil && (independent || setsConfig):
			deferred = errors.Join(deferred, fmt.Errorf("%s: %w", a, err))
			continue
		case err != nil:
			failed = fmt.Errorf("%s: %w", a, err)
			continue
		}
		if !out.unrecorded {
			done := a // what was done, counted and recorded: a, or what it became
			if out.became != nil {
				done = out.became
			}
			r.recordAction(vc, done)
		}
	}
	return errors.Join(deferred, failed)
}

// execution is what every action's method needs: the pass's cluster, config, connections and
// observation. refused is set once the API server refused a pod this pass.
type execution struct {
	r              *ValkeyClusterReconciler
	log            *zap.Logger
	vc             *v1.ValkeyCluster
	rc             *resources.ResolvedConfig
	creds, migrate valkey.Credentials
	obs            *observation
	refused        bool
}

// outcome is what became of one action besides its error: skipped (not run: a pod create after
// a refusal), unrecorded (done by someone else: nothing to count), became (what was done
// instead, counted and recorded in its place).
type outcome struct {
	skipped, unrecorded bool
	became              plan.Action
}

// node is the pooled connection to the node of pod.
func (x *execution) node(pod string) (*valkey.Client, error) {
	return x.r.nodeClient(x.vc, x.obs, pod, x.creds)
}

// run carries out one action: one exhaustive switch over the closed set of actions, one method
// each (execsteps.go for the nodes' steps, the object's file for a Kubernetes write).
// gochecksumtype (.golangci.yml) fails the lint when a kind is missing, so default is only
// reached by a nil action.
func (x *execution) run(ctx context.Context, a plan.Action) (outcome, error) {
	r, log, vc, obs := x.r, x.log, x.vc, x.obs
	switch a := a.(type) {
	case plan.CreatePod:
		return x.createPod(ctx, a)
	case plan.Meet:
		return outcome{}, x.meet(ctx, a)
	case plan.AddSlots:
		return outcome{}, x.addSlots(ctx, a)
	case plan.Replicate:
		return outcome{}, x.replicate(ctx, a)
	case plan.Takeover:
		return outcome{}, x.takeover(ctx, a)
	case plan.BumpEpoch:
		return outcome{}, x.bumpEpoch(ctx, a)
	case plan.FailoverForce:
		return x.failoverForce(ctx, a)
	case plan.Failover:
		return x.failover(ctx, a)
	case plan.Forget:
		return outcome{}, x.forget(ctx, a)
	case plan.MoveSlots:
		return outcome{}, x.moveSlots(ctx, a)
	case plan.CloseSlots:
		return outcome{}, r.slotMover(obs, x.node, x.creds, x.migrate).Close(ctx, log, a)
	case plan.SetConfig:
		return outcome{}, r.setConfig(ctx, log, obs, x.node, a)
	case plan.ResizePod:
		return outcome{}, r.resizePod(ctx, log, vc, obs, a)
	case plan.RecordSize:
		return outcome{}, r.recordSize(ctx, log, vc, obs, a)
	case plan.Detach:
		return outcome{}, x.detach(ctx, a)
	case plan.DeletePod:
		return outcome{}, x.deletePod(ctx, a)
	case plan.SetBudget:
		return outcome{}, r.setBudget(ctx, log, vc, obs, a)
	case plan.DeleteBudget:
		return outcome{}, r.deleteBudget(ctx, log, obs, a)
	case plan.SetNetworkPolicy:
		return outcome{}, r.setNetworkPolicy(ctx, log, vc, obs, a)
	case plan.DeleteNetworkPolicy:
		return outcome{}, r.deleteNetworkPolicy(ctx, log, obs)
	case plan.WriteCredential:
		return outcome{}, r.writeCredential(ctx, obs.credential)
	case plan.CreateService:
		return outcome{}, r.createService(ctx, log, vc)
	case plan.UpdateService:
		return outcome{}, r.updateService(ctx, log, vc)
	case plan.WriteACLSecret:
		if obs.aclSecret == nil {
			return outcome{}, errors.New("broken invariant: no ACL Secret rendered")
		}
		return outcome{}, r.apply(ctx, obs.aclSecret)
	case plan.MarkActive:
		return outcome{}, r.markActive(ctx, log, obs, a)
	case plan.SettleMove:
		return outcome{}, r.settleMove(ctx, obs, a)
	case plan.AnnotatePod:
		return outcome{}, r.annotatePod(ctx, log, vc, obs, a)
	case plan.RecordPod:
		return outcome{}, r.recordPod(ctx, obs, a.Pod)
	case plan.WriteNextPasswords:
		return outcome{}, r.writeNextPasswords(ctx, vc)
	case plan.SetPrimaryAuth:
		return outcome{}, r.setPrimaryAuth(ctx, obs, a, x.node)
	case plan.PromotePasswords:
		return outcome{}, r.promotePasswords(ctx, vc)
	default:
		return outcome{}, fmt.Errorf("broken invariant: no executor for action %T", a)
	}
}

// beforePods reports whether a is bookkeeping the pods this pass creates depend on (the ACL
// Secret they mount, the credential Secret whose passwords it holds, the Service their DNS
// names are under): its failure ends the steps.
func beforePods(a plan.Action) bool {
	_, acl := a.(plan.WriteACLSecret)
	_, svc := a.(plan.CreateService)
	_, cred := a.(plan.WriteCredential)
	return acl || svc || cred
}

// promotesLost reports whether a promotes the replica of a lost primary: its shard refuses
// writes until it lands, so it does not wait for an ACL or TLS push under way (fanout.Guard's
// BeginNow). A push to a node that does not answer costs its dial timeout: chaos seed 60606's
// second network cut had its takeover wait 2 s for one.
func promotesLost(a plan.Action) bool {
	switch a.(type) {
	case plan.FailoverForce, plan.Takeover, plan.BumpEpoch:
		return true
	case plan.AddSlots, plan.AnnotatePod, plan.CloseSlots, plan.CreatePod, plan.DeleteBudget, plan.DeleteNetworkPolicy,
		plan.DeletePod, plan.Detach, plan.Failover, plan.Forget, plan.MarkActive, plan.Meet, plan.MoveSlots, plan.RecordPod,
		plan.Replicate, plan.SetBudget, plan.SetConfig, plan.SetNetworkPolicy, plan.SettleMove, plan.WriteACLSecret,
		plan.ResizePod, plan.RecordSize, plan.WriteNextPasswords, plan.SetPrimaryAuth, plan.PromotePasswords,
		plan.CreateService, plan.UpdateService, plan.WriteCredential:
		// A graceful failover's shard serves meanwhile; the rest promote nobody.
	}
	return false
}

// takeOver sends CLUSTER FAILOVER TAKEOVER to a's replica and says so: the quorum planner's
// (no majority of primaries) or the failover planner's (a FORCE would not take, a.Reason). A
// replica that is a primary by now has taken the shard over already.
func takeOver(ctx context.Context, log *zap.Logger, c *valkey.Client, a plan.Takeover) error {
	err := c.Failover(ctx, valkey.FailoverTakeover)
	if alreadyPrimary(err) {
		return nil
	}
	if err != nil {
		return err
	}
	fields := []zap.Field{logging.Pod(a.Pod), logging.Node(a.PrimaryID), zap.Int(logging.FieldShard, a.Shard)}
	if a.Reason != "" {
		fields = append(fields, zap.String(logging.FieldReason, a.Reason))
	}
	log.Info(failoverMessage(a), fields...)
	return nil
}

// EpochWait bounds how long a Takeover with AfterEpoch waits for its replica to learn the
// current epoch a BumpEpoch on another node raised: gossip carries it within a heartbeat or two
// (each node pings another every 100 ms), under a second on this 2-core machine.
const EpochWait = 3 * time.Second

// epochQuery bounds one CLUSTER INFO of awaitEpoch: longer than FailoverPoll, as a node busy
// with a takeover's traffic may take more than 50 ms to answer on a loaded machine.
const epochQuery = 500 * time.Millisecond

// awaitEpoch asks c's node for its current epoch until it exceeds epoch, for up to wait.
// Running out is not an error: the TAKEOVER goes anyway, and should its claim tie, the epochs
// planner bumps it on the next pass (plan/epoch.go rule 2).
func awaitEpoch(ctx context.Context, c *valkey.Client, epoch uint64, wait time.Duration) {
	pollNode(ctx, wait, epochQuery, func(qctx context.Context) bool {
		cur, err := c.CurrentEpoch(qctx)
		return err == nil && cur > epoch
	})
}

// becamePrimary asks c's node, every FailoverPoll for up to wait, whether it is a primary now
// (its own CLUSTER NODES line): whether the FORCE sent to it took. The command's reply only says
// the request was accepted; a refused election leaves the node a replica.
func becamePrimary(ctx context.Context, c *valkey.Client, wait time.Duration) bool {
	return pollNode(ctx, wait, FailoverPoll, func(qctx context.Context) bool {
		entries, err := c.ClusterNodes(qctx)
		if err != nil {
			return false
		}
		me, ok := valkey.Myself(entries)
		return ok && me.Role == valkey.RolePrimary
	})
}

// pollNode asks ok, each time within query, every FailoverPoll for up to wait, until it says
// yes; false when wait ran out or ctx ended first.
func pollNode(ctx context.Context, wait, query time.Duration, ok func(context.Context) bool) bool {
	deadline := time.Now().Add(wait)
	for {
		qctx, cancel := context.WithTimeout(ctx, query)
		done := ok(qctx)
		cancel()
		if done {
			return true
		}
		if !time.Now().Add(FailoverPoll).Before(deadline) || ctx.Err() != nil {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(FailoverPoll):
		}
	}
}

// FailoverPoll is how often becamePrimary asks.
const FailoverPoll = 50 * time.Millisecond

// holdsPushes reports whether a keeps the ACL and TLS controllers off the cluster's nodes while
// it runs and until its effect is observed (fanout.Guard): every disruptive step but the slot
// moves. Those are a reshard's steps, one every pass for minutes, and need the pushes: an atomic
// move waits for the replication user's slot import grant, which the ACL controller loads while
// the reshard is pending (controllers/reshard.go), and a push changes no slot's state.
func holdsPushes(a plan.Action) bool {
	_, moves := a.(plan.MoveSlots)
	_, closes := a.(plan.CloseSlots)
	return a.Disruptive() && !moves && !closes
}

// tickLog remembers when each cluster last logged its heartbeat, so `active tick` keeps a
// 30 s rhythm however often other events wake the reconcile. It drives logging only, never a
// decision.
type tickLog struct {
	mu   sync.Mutex
	last map[string]time.Time
}

func (t *tickLog) due(key string, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.last == nil {
		t.last = map[string]time.Time{}
	}
	if now.Sub(t.last[key]) < TickInterval-time.Second {
		return false
	}
	t.last[key] = now
	// Keys name pods and shards that come and go; an entry older than a tick decides nothing
	// (it would be due anyway), so drop those rather than keep every pod ever seen.
	for k, at := range t.last {
		if now.Sub(at) >= TickInterval {
			delete(t.last, k)
		}
	}
	return true
}

// logHeartbeat logs, once per tick however often passes run: `active tick` for a formed cluster
// (Active or Upgrading), `bootstrap blocked` for every pod the scheduler cannot place, `primary unhealthy
// but replicas exist, waiting for auto-failover` for every shard that lost its primary while a
// live, reachable replica that synced still follows it (AwaitingFailover: a shard with no such
// replica lost its data, which MsgShardDataLost says when it is served again), and at WARN
// that pods fail on start and are no longer replaced, that a node's live settings cannot be read
// (warnSettingsUnread), and that zoneSpread required has too few zones (warnZoneSpread).
func (r *ValkeyClusterReconciler) logHeartbeat(log *zap.Logger, vc *v1.ValkeyCluster, state fsm.State, obs *observation, pl plan.Plan) {
	for _, p := range obs.snapshot.Pods {
		if p.Unschedulable != "" && !p.Deleting && r.ticks.due("blocked/"+vc.Namespace+"/"+p.Name, time.Now()) {
			log.Info(logging.MsgBootstrapBlocked, logging.Pod(p.Name), zap.String(logging.FieldReason, p.Unschedulable))
			recordEvent(r.Events, vc, true, EventUnschedulable, "Schedule", "pod %s cannot be scheduled: %s", p.Name, p.Unschedulable)
		}
	}
	if pl.Blocked != "" && r.ticks.due("blocked-start/"+vc.Namespace+"/"+vc.Name, time.Now()) {
		log.Warn(logging.MsgPodsFailingOnStart, zap.String(logging.FieldReason, pl.Blocked))
		recordEvent(r.Events, vc, true, EventRollStalled, "Create", "%s", pl.Blocked)
	}
	// A formed cluster keeps its heartbeat and its failover signal through an upgrade: alerts key
	// on both, and a rolling upgrade is no reason for them to fire.
	formed := state == fsm.Active || state == fsm.Upgrading
	if formed {
		for _, w := range obs.snapshot.AwaitingFailover() {
			// Logged even when the operator promotes the replica itself on this pass: the line is
			// the log contract's signal that a shard lost its primary, which runbooks and alerts
			// key on; the promotion has its own line beside it.
			if !r.ticks.due(fmt.Sprintf("failover/%s/%s/%d", vc.Namespace, vc.Name, w.Shard), time.Now()) {
				continue
			}
			log.Info(logging.MsgPrimaryUnhealthyWaiting, logging.Pod(w.Replica), logging.Node(w.PrimaryID), zap.Int(logging.FieldShard, w.Shard))
		}
	}
	if formed {
		r.warnSettingsUnread(log, vc, obs)
	}
	r.warnZoneSpread(log, vc, obs)
	if formed && r.ticks.due(vc.Namespace+"/"+vc.Name, time.Now()) {
		log.Info(logging.MsgActiveTick, zap.Int(logging.FieldShards, int(vc.Spec.Shards)), zap.Int(logging.FieldNodes, len(obs.snapshot.LivePods())))
	}
}

// writeStatus computes the status of the pass (buildStatus) and writes it once, skipping the
// write when nothing changed. It returns the cluster's health, on which the pass requeues.
func (r *ValkeyClusterReconciler) writeStatus(ctx context.Context, vc *v1.ValkeyCluster, state fsm.State, problem string, obs *observation, pl plan.Plan) (health, error) {
	now := time.Now()
	st, h := buildStatus(&vc.Status, vc.Generation, state, problem, obs.snapshot, pl, now)
	setTargetSpec(st, vc, state)
	if obs.tls != nil {
		setExpiryCondition(st, vc, obs.tls, now)
	}
	setZoneSpreadCondition(st, vc.Generation, resources.SpreadMode(vc, r.DefaultZoneSpread), obs.snapshot)
	setHeldCondition(st, vc.Generation, obs.heldKnown, obs.held)
	setResizeCondition(st, vc.Generation, obs.snapshot)
	if obs.rotation != nil {
		st.PasswordRotation = obs.rotation
	}
	return h, r.patchStatus(ctx, vc, st)
}

// patchStatus is the operator's one write of a cluster's status: st, capped (capTexts), by merge
// patch through the status subresource, and nothing when it is what the cluster holds already.
func (r *ValkeyClusterReconciler) patchStatus(ctx context.Context, vc *v1.ValkeyCluster, st *v1.ValkeyClusterStatus) error {
	capTexts(st)
	if equalStatus(&vc.Status, st) {
		return nil
	}
	base := vc.DeepCopy()
	// status.nodes is always in the patch: a status an older operator wrote holds objects there,
	// which decode to the same names (v1.NodeNames) and would leave the stored objects in place,
	// where an API server without validation ratcheting (before 1.30) refuses the whole write.
	base.Status.Nodes = v1.NodeNames{""}
	patch := client.MergeFrom(base)
	vc.Status = *st
	if err := r.Status().Patch(ctx, vc, patch); err != nil {
		return fmt.Errorf("patch status: %w", err)
	}
	return nil
}

// SetupWithManager registers the reconciler: it owns the cluster's ValkeyNodes, Services,
// Secrets and PodDisruptionBudgets, follows the pods and ConfigMaps of its ValkeyNodes (by the
// cluster label, see clusterOf), and follows the cluster-scoped ValkeyConfig / ValkeyImage /
// ValkeyRole objects the clusters reference. Every handler goes through the reason tracker,
// so each reconcile's span says why it ran; log is the operator's root logger.
func (r *ValkeyClusterReconciler) SetupWithManager(mgr ctrl.Manager, log *zap.Logger) error {
	r.conns.Dial = r.Dial
	t := logging.NewTracker(v1.GroupVersion.WithKind("ValkeyCluster"), mgr.GetScheme())
	r.changes = t
	owned := t.Owned(&v1.ValkeyCluster{}, mgr.GetRESTMapper())
	all := t.Related(handler.EnqueueRequestsFromMapFunc(r.allClusters))
	byNode := t.Related(handler.EnqueueRequestsFromMapFunc(clusterOf))
	r.backoff = newBackoff()
	primary := t.Wrap(&firstLookHandler{}, func(client.Object) string { return logging.ReasonObjectUpdated })
	return ctrl.NewControllerManagedBy(mgr).
		Named("valkeycluster").
		WithOptions(controller.Options{MaxConcurrentReconciles: MaxConcurrentReconciles, RateLimiter: r.backoff}).
		Watches(&v1.ValkeyCluster{}, primary, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&v1.ValkeyNode{}, owned).
		Watches(&corev1.Pod{}, byNode).
		Watches(&corev1.Service{}, owned).
		// Metadata only: the operator caches neither Secrets nor ConfigMaps (CacheOptions).
		WatchesMetadata(&corev1.ConfigMap{}, byNode).
		WatchesMetadata(&corev1.Secret{}, owned).
		// Not on status: the disruption controller rewrites a budget's status at every pod change.
		Watches(&policyv1.PodDisruptionBudget{}, owned, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&networkingv1.NetworkPolicy{}, owned).
		// Annotations too: a confirmation of held live settings (held.go) is one.
		Watches(&v1.ValkeyConfig{}, all, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&v1.ValkeyImage{}, all, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1.ValkeyRole{}, all, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(t.Reconciler(logging.Target(log, logging.TargetCluster), r))
}

// allClusters maps a change of a cluster-scoped object to every ValkeyCluster: configs chain
// through baseRef, so deciding which clusters use one would mean resolving every chain here.
func (r *ValkeyClusterReconciler) allClusters(ctx context.Context, _ client.Object) []reconcile.Request {
	var list v1.ValkeyClusterList
	if err := r.List(ctx, &list); err != nil {
		return nil
	}
	out := make([]reconcile.Request, len(list.Items))
	for i, vc := range list.Items {
		out[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&vc)}
	}
	return out
}

// alreadyPrimary reports whether err is CLUSTER FAILOVER refused because the node is a primary
// ("You should send CLUSTER FAILOVER to a replica").
func alreadyPrimary(err error) bool {
	return err != nil && strings.Contains(err.Error(), "send CLUSTER FAILOVER to a replica")
}
