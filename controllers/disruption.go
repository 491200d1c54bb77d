package controllers

// One PodDisruptionBudget per shard index (the original creates none): it selects the cluster's
// pods of that shard and lets an eviction through only while the shard keeps replicasPerShard
// full copies besides the pod evicted, so `kubectl drain` (or the cluster-autoscaler) never
// takes two copies of a shard at once, nor the last full copy while a replacement still syncs.
// The operator's own retirements delete ValkeyNodes (the garbage collector deletes their pods):
// they are not evictions, and no budget holds them back.
//
// The budget says minAvailable, an integer, not maxUnavailable = 1. The disruption controller
// resolves maxUnavailable (and any percentage) through the scale subresource of each pod's
// controller; a ValkeyNode has none, so such a budget fails to sync ("does not implement the
// scale subresource"), allows no disruption at all, and a drain would wait for ever. An integer
// minAvailable is compared with the matching pods that are Ready instead.
//
// Ready is not enough, though: pods have no readiness probe, so a replacement is Ready as soon
// as its container starts, seconds before its replica holds the data (measured: a budget of
// minAvailable = replicasPerShard let the shard's last full copy go 1.7 s after its other pod
// was evicted, while the replacement was still Joining). So minAvailable is replicasPerShard
// plus the shard's live pods whose ValkeyNode is not Active (not yet a full copy: the same rule
// by which the failover planner picks a replica it may promote), counting the pods the pass is
// about to create: the budget is raised before the pod exists, so it is never Ready under the
// lower count. Then the disruptions allowed, Ready pods minus minAvailable, are the full copies
// beyond replicasPerShard: one for a whole shard, none while a replacement syncs. The budget is
// rewritten as nodes join, two updates per replaced pod, none while the cluster is settled. A shard without replicas has minAvailable 0
// once its pod is Active: its one pod may be evicted, since holding it would block every drain
// of its Kubernetes node while protecting nothing that a second copy could save.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"go.uber.org/zap"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/plan"
	"github.com/gomomento/valkey-operator/resources"
)

// budgetChanges is what ensureDisruptionBudgets writes: the budgets to create (as built), the
// existing budgets to update (copies with the built spec), and the existing budgets to delete.
type budgetChanges struct {
	create, update, remove []*policyv1.PodDisruptionBudget
}

// planDisruptionBudgets decides the budget changes from the budgets vc controls (by shard index),
// the live pods and the shards of the pods about to be created: every shard index below
// spec.shards has its budget, as built for the shard's joining pods (live and not Active, or
// about to be created); a budget of a shard index at or above spec.shards goes once that shard
// has no live pod left (a removed shard's nodes keep their budget while they still serve).
func planDisruptionBudgets(vc *v1.ValkeyCluster, have map[int]*policyv1.PodDisruptionBudget, live []fsm.Pod, creating []int) budgetChanges {
	joining := map[int]int32{}
	for _, p := range live {
		if p.Lifecycle != string(v1.LifecycleActive) {
			joining[p.Shard]++
		}
	}
	for _, shard := range creating {
		joining[shard]++
	}
	var c budgetChanges
	for shard := range int(vc.Spec.Shards) {
		want := resources.BuildDisruptionBudget(vc, shard, joining[shard])
		b, ok := have[shard]
		switch {
		case !ok:
			c.create = append(c.create, want)
		case !equality.Semantic.DeepEqual(b.Spec, want.Spec):
			b = b.DeepCopy()
			b.Spec = want.Spec
			c.update = append(c.update, b)
		}
	}
	for _, shard := range slices.Sorted(maps.Keys(have)) {
		if shard >= int(vc.Spec.Shards) && !slices.ContainsFunc(live, func(p fsm.Pod) bool { return p.Shard == shard }) {
			c.remove = append(c.remove, have[shard])
		}
	}
	return c
}

// ensureDisruptionBudgets carries out planDisruptionBudgets for the pass pl, before its actions
// run, on the budgets vc controls. They are listed from the API server, not the cache: a budget
// lowered by the previous pass and still cached at its old count would not be raised again for
// a pod this pass creates. A change is a merge patch of the spec, without the resourceVersion:
// the disruption controller rewrites the budget's status at every pod change, and an update
// would conflict with it just when the count matters.
func (r *ValkeyClusterReconciler) ensureDisruptionBudgets(ctx context.Context, log *zap.Logger, vc *v1.ValkeyCluster, obs *observation, pl plan.Plan) error {
	var list policyv1.PodDisruptionBudgetList
	if err := r.APIReader.List(ctx, &list, client.InNamespace(vc.Namespace), client.MatchingLabels{v1.LabelCluster: vc.Name}); err != nil {
		return fmt.Errorf("list PodDisruptionBudgets: %w", err)
	}
	have := map[int]*policyv1.PodDisruptionBudget{}
	for i := range list.Items {
		b := &list.Items[i]
		shard, err := strconv.Atoi(b.Labels[v1.LabelShard])
		if !metav1.IsControlledBy(b, vc) {
			if err == nil && b.Name == v1.ShardDisruptionBudgetName(vc.Name, shard) {
				// One of the names the operator needs, not its own: never patched or deleted.
				r.foreign.add(clusterKey(vc), objectRef{"PodDisruptionBudget", b.Name})
				return notControlled("PodDisruptionBudget", b.Name, vc.Name)
			}
			continue // not one of ours
		}
		if err != nil {
			continue
		}
		have[shard] = b
	}
	var creating []int
	for _, a := range pl.Actions {
		if c, ok := a.(plan.CreatePod); ok {
			creating = append(creating, c.Shard)
		}
	}
	c := planDisruptionBudgets(vc, have, obs.snapshot.LivePods(), creating)
	for _, b := range c.create {
		err := r.Create(ctx, b)
		switch {
		case apierrors.IsAlreadyExists(err):
			// Created meanwhile (by an operator that lost its lease, say): the next pass sees it.
			// Or not the operator's at all (it would not be in the list without the label).
			if err := r.checkBudget(ctx, vc, b.Name); err != nil {
				return err
			}
		case err != nil:
			return fmt.Errorf("create PodDisruptionBudget %s: %w", b.Name, err)
		default:
			log.Info(logging.MsgCreatingDisruptionBudget, budgetFields(b, true)...)
		}
	}
	for _, b := range c.update {
		log.Info(logging.MsgUpdatingDisruptionBudget, budgetFields(b, true)...)
		if err := r.Patch(ctx, b, client.MergeFrom(have[shardOf(b)])); err != nil {
			return fmt.Errorf("update PodDisruptionBudget %s: %w", b.Name, err)
		}
	}
	for _, b := range c.remove {
		log.Info(logging.MsgDeletingDisruptionBudget, budgetFields(b, false)...)
		if err := r.Delete(ctx, b, client.Preconditions{UID: &b.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete PodDisruptionBudget %s: %w", b.Name, err)
		}
	}
	return nil
}

// shardOf is the shard index of one of the cluster's budgets (its shard label).
func shardOf(b *policyv1.PodDisruptionBudget) int {
	shard, _ := strconv.Atoi(b.Labels[v1.LabelShard])
	return shard
}

// budgetFields are the log fields of a budget: its shard and, with count, its minAvailable.
func budgetFields(b *policyv1.PodDisruptionBudget, count bool) []zap.Field {
	fields := []zap.Field{zap.Int(logging.FieldShard, shardOf(b))}
	if count && b.Spec.MinAvailable != nil {
		fields = append(fields, zap.Int(logging.FieldMinAvailable, b.Spec.MinAvailable.IntValue()))
	}
	return fields
}

// checkBudget reads the PodDisruptionBudget name of vc's namespace from the API server and
// returns a *SpecProblem when it exists and vc does not control it, remembering it.
func (r *ValkeyClusterReconciler) checkBudget(ctx context.Context, vc *v1.ValkeyCluster, name string) error {
	var b policyv1.PodDisruptionBudget
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: vc.Namespace, Name: name}, &b)
	switch {
	case apierrors.IsNotFound(err), err == nil && metav1.IsControlledBy(&b, vc):
		r.foreign.drop(clusterKey(vc), objectRef{"PodDisruptionBudget", name})
		return nil
	case err != nil:
		return fmt.Errorf("get PodDisruptionBudget %s: %w", name, err)
	}
	r.foreign.add(clusterKey(vc), objectRef{"PodDisruptionBudget", name})
	return notControlled("PodDisruptionBudget", name, vc.Name)
}
