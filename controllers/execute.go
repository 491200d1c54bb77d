package controllers

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	"github.com/gomomento/valkey-operator/valkey"
)

// execute carries out the plan in order: a thin switch over action kinds. It stops at the
// first failing step; the next pass observes again and plans what is left.
func (r *ValkeyClusterReconciler) execute(ctx context.Context, log *zap.Logger, vc *v1.ValkeyCluster, rc *ResolvedConfig, creds valkey.Credentials, obs *observation, plan fsm.Plan) error {
	node := func(pod string) (*valkey.Client, error) { return r.nodeClient(vc, obs, pod, creds) }
	for _, a := range plan.Actions {
		var err error
		switch a.Kind {
		case fsm.ActCreatePod:
			name := newPodName(vc)
			log.Info(logging.MsgCreatingPod, logging.Pod(name), zap.Int(logging.FieldShard, a.Shard))
			pod := buildPod(vc, rc, name, a.Shard, obs.snapshot.SpecHash, r.DefaultZoneSpread)
			if err = r.Create(ctx, pod); apierrors.IsAlreadyExists(err) {
				err = nil
			}
		case fsm.ActMeet:
			var c *valkey.Client
			if c, err = node(a.Pod); err == nil {
				log.Info(logging.MsgClusterMeetIssued, logging.Pod(a.Pod), logging.Node(a.NodeID), zap.String(logging.FieldIP, a.IP))
				err = c.Meet(ctx, a.IP, ClientPort, BusPort)
			}
		case fsm.ActAddSlots:
			var c *valkey.Client
			if c, err = node(a.Pod); err == nil {
				ranges := make(valkey.SlotRanges, len(a.Slots))
				count := 0
				for i, s := range a.Slots {
					ranges[i] = valkey.SlotRange{Start: s.Start, End: s.End}
					count += s.Len()
				}
				log.Info(logging.MsgAssigningSlots, logging.Pod(a.Pod), zap.Int(logging.FieldSlots, count))
				err = c.AddSlotsRange(ctx, ranges)
			}
		case fsm.ActReplicate:
			var c *valkey.Client
			if c, err = node(a.Pod); err == nil {
				log.Info(logging.MsgAttachingReplica, logging.Pod(a.Pod), logging.Node(a.PrimaryID))
				err = c.Replicate(ctx, a.PrimaryID)
			}
		case fsm.ActTakeover:
			var c *valkey.Client
			if c, err = node(a.Pod); err == nil {
				if err = c.Failover(ctx, valkey.FailoverTakeover); err == nil {
					log.Info(logging.MsgNoQuorumTakeover, logging.Pod(a.Pod), logging.Node(a.NodeID), zap.Int(logging.FieldShard, a.Shard))
				}
			}
		case fsm.ActForget:
			var c *valkey.Client
			if c, err = node(a.Pod); err == nil {
				log.Info(logging.MsgForgettingNode, logging.Pod(a.Pod), logging.Node(a.NodeID))
				err = c.Forget(ctx, a.NodeID)
			}
		case fsm.ActDeletePod:
			log.Info(logging.MsgDeletingFailedPod, logging.Pod(a.Pod))
			if p, ok := obs.pods[a.Pod]; ok {
				err = client.IgnoreNotFound(r.Delete(ctx, p, client.Preconditions{UID: &p.UID}))
			}
		}
		if err != nil {
			return fmt.Errorf("%s: %w", a, err)
		}
	}
	return nil
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

// logHeartbeat logs, once per tick however often passes run: `active tick` for an Active
// cluster, `bootstrap blocked` for every pod the scheduler cannot place, `primary unhealthy
// but replicas exist, waiting for auto-failover` for every shard that lost its primary, and
// at WARN that pods fail on start and are no longer replaced.
func (r *ValkeyClusterReconciler) logHeartbeat(log *zap.Logger, vc *v1.ValkeyCluster, state fsm.State, obs *observation, plan fsm.Plan) {
	for _, p := range obs.snapshot.Pods {
		if p.Unschedulable != "" && !p.Deleting && r.ticks.due("blocked/"+vc.Namespace+"/"+p.Name, time.Now()) {
			log.Info(logging.MsgBootstrapBlocked, logging.Pod(p.Name), zap.String(logging.FieldReason, p.Unschedulable))
		}
	}
	if plan.Blocked != "" && r.ticks.due("blocked-start/"+vc.Namespace+"/"+vc.Name, time.Now()) {
		log.Warn(logging.MsgPodsFailingOnStart, zap.String(logging.FieldReason, plan.Blocked))
	}
	if state == fsm.Active {
		for _, w := range obs.snapshot.AwaitingFailover() {
			if !r.ticks.due(fmt.Sprintf("failover/%s/%s/%d", vc.Namespace, vc.Name, w.Shard), time.Now()) {
				continue
			}
			log.Info(logging.MsgPrimaryUnhealthyWaiting, logging.Pod(w.Replica), logging.Node(w.PrimaryID), zap.Int(logging.FieldShard, w.Shard))
		}
	}
	if state == fsm.Active && r.ticks.due(vc.Namespace+"/"+vc.Name, time.Now()) {
		log.Info(logging.MsgActiveTick, zap.Int(logging.FieldShards, int(vc.Spec.Shards)), zap.Int(logging.FieldNodes, len(obs.snapshot.LivePods())))
	}
}

// writeStatus computes the status from the observation and writes it once, skipping the
// write when nothing changed.
func (r *ValkeyClusterReconciler) writeStatus(ctx context.Context, vc *v1.ValkeyCluster, state fsm.State, problem string, obs *observation, plan fsm.Plan) error {
	st := vc.Status.DeepCopy()
	st.State = state
	st.ObservedGeneration = vc.Generation
	st.Nodes = nil
	st.ReadyNodes = 0
	shards := map[int]bool{}
	for _, p := range obs.snapshot.Pods {
		if p.Deleting || p.Phase == fsm.PodFailed || p.Phase == fsm.PodSucceeded {
			continue
		}
		ns := v1.NodeStatus{Pod: p.Name, Shard: int32(p.Shard), Ready: p.Ready, IP: p.IP}
		if n := p.Node; n != nil && n.Reachable {
			ns.NodeID = n.ID
			ns.Role = v1.NodeRoleReplica
			if n.Primary {
				ns.Role = v1.NodeRolePrimary
				if len(n.MySlots) > 0 {
					shards[p.Shard] = true
				}
			}
		}
		if p.Ready {
			st.ReadyNodes++
		}
		st.Nodes = append(st.Nodes, ns)
	}
	st.Shards = int32(len(shards))

	formed := obs.snapshot.Formed() && obs.snapshot.Synced()
	blocked := ""
	for _, p := range obs.snapshot.Pods {
		if p.Unschedulable != "" && !p.Deleting {
			blocked = fmt.Sprintf("pod %s cannot be scheduled: %s", p.Name, p.Unschedulable)
			break
		}
	}
	switch {
	case state == fsm.Invalid:
		st.Message = problem
	case blocked != "":
		st.Message = blocked
	case plan.Blocked != "":
		st.Message = plan.Blocked
	case plan.Waiting != "":
		st.Message = plan.Waiting
	case formed:
		st.Message = fmt.Sprintf("cluster formed: %d shards, %d nodes", vc.Spec.Shards, vc.Spec.NodeCount())
	case obs.snapshot.Formed():
		st.Message = "waiting for replicas to sync with their primaries"
	default:
		st.Message = ""
	}
	gen := vc.Generation
	setCond := func(t string, ok bool, reason, msg string) {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen})
	}
	switch {
	case state == fsm.Invalid:
		setCond(v1.ConditionReady, formed, "Invalid", problem)
		setCond(v1.ConditionProgressing, false, "Invalid", problem)
	case formed:
		setCond(v1.ConditionReady, true, "ClusterFormed", "every slot is served and every node agrees")
		setCond(v1.ConditionProgressing, state != fsm.Active, string(state), st.Message)
	default:
		setCond(v1.ConditionReady, false, string(state), st.Message)
		setCond(v1.ConditionProgressing, true, string(state), st.Message)
	}
	degraded := state == fsm.Active && !formed
	if degraded {
		setCond(v1.ConditionDegraded, true, "NodesMissing", st.Message)
	} else {
		setCond(v1.ConditionDegraded, false, "AsExpected", "")
	}

	if equalStatus(&vc.Status, st) {
		return nil
	}
	patch := client.MergeFrom(vc.DeepCopy())
	vc.Status = *st
	if err := r.Status().Patch(ctx, vc, patch); err != nil {
		return fmt.Errorf("patch status: %w", err)
	}
	return nil
}

// SetupWithManager registers the reconciler: it owns the cluster's Pods, Services,
// ConfigMaps and Secrets, and follows the cluster-scoped ValkeyConfig / ValkeyImage /
// ValkeyRole objects the clusters reference. Every handler goes through the reason tracker,
// so each reconcile's span says why it ran; log is the operator's root logger.
func (r *ValkeyClusterReconciler) SetupWithManager(mgr ctrl.Manager, log *zap.Logger) error {
	t := logging.NewTracker(v1.GroupVersion.WithKind("ValkeyCluster"), mgr.GetScheme())
	owned := t.Owned(&v1.ValkeyCluster{}, mgr.GetRESTMapper())
	all := t.Related(handler.EnqueueRequestsFromMapFunc(r.allClusters))
	return ctrl.NewControllerManagedBy(mgr).
		Named("valkeycluster").
		WithOptions(controller.Options{MaxConcurrentReconciles: MaxConcurrentReconciles}).
		Watches(&v1.ValkeyCluster{}, t.Primary(), builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&corev1.Pod{}, owned).
		Watches(&corev1.Service{}, owned).
		Watches(&corev1.ConfigMap{}, owned).
		Watches(&corev1.Secret{}, owned).
		Watches(&v1.ValkeyConfig{}, all, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
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
