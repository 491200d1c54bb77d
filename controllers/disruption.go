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
//
// Those rules are the budgets planner's (plan/budgets.go), a bookkeeping planner whose actions
// run before the pass's steps; this file observes the budgets and writes them.

import (
	"context"
	"fmt"
	"strconv"

	"go.uber.org/zap"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/plan"
	"github.com/gomomento/valkey-operator/resources"
)

// budgetListSlack is how many budgets beyond the cluster's shards one page of the budgets' list
// holds.
const budgetListSlack = 16

// observeBudgets reads the budgets vc controls into the snapshot (fsm.Snapshot.Budgets), by
// shard index, for the budgets planner; obs.budgets keeps them for the executor. They are listed
// from the API server, not the cache: a budget lowered by the previous pass and still cached at
// its old count would not be raised again for a pod this pass creates. Not listed while an
// object of one of the cluster's names is someone else's: nothing of the cluster's is changed
// until it is cleared up. A list that fails, or a budget of one of the cluster's names that it
// does not control, leaves them unknown (no budget is written this pass) and is returned, for the
// pass to return with its outcome: the budgets are harmless and hold nothing back.
func (r *ValkeyClusterReconciler) observeBudgets(ctx context.Context, vc *v1.ValkeyCluster, obs *observation) error {
	if len(r.foreign.list(clusterKey(vc))) > 0 {
		return nil
	}
	// In pages, keeping only the cluster's own: a team may label any number of budgets with the
	// cluster's label, and a pass holds one page of them at a time.
	have := map[int]*policyv1.PodDisruptionBudget{}
	for cont := ""; ; {
		var list policyv1.PodDisruptionBudgetList
		if err := r.APIReader.List(ctx, &list, client.InNamespace(vc.Namespace), client.MatchingLabels{v1.LabelCluster: vc.Name},
			client.Limit(int64(vc.Spec.Shards)+budgetListSlack), client.Continue(cont)); err != nil {
			return fmt.Errorf("list PodDisruptionBudgets: %w", err)
		}
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
			have[shard] = b.DeepCopy() // not the page's: the page goes
		}
		if cont = list.Continue; cont == "" {
			break
		}
	}
	obs.budgets = have
	obs.snapshot.Budgets = map[int]fsm.Budget{}
	for shard, b := range have {
		obs.snapshot.Budgets[shard] = budgetView(vc, shard, b)
	}
	obs.snapshot.BudgetsKnown = true
	return nil
}

// budgetView is the part of budget b of shard the budgets planner needs: its integer
// minAvailable, and whether the rest of its spec is as built.
func budgetView(vc *v1.ValkeyCluster, shard int, b *policyv1.PodDisruptionBudget) fsm.Budget {
	v := fsm.Budget{MinAvailable: -1}
	if m := b.Spec.MinAvailable; m != nil && m.Type == intstr.Int {
		v.MinAvailable = m.IntValue()
	}
	built := resources.BuildDisruptionBudget(vc, shard, 0).Spec
	built.MinAvailable = b.Spec.MinAvailable
	v.AsBuilt = equality.Semantic.DeepEqual(b.Spec, built)
	return v
}

// setBudget carries out a plan.SetBudget: the budget of a.Shard as built for a.Joining joining
// pods, created, or written over the observed one. A change is a merge patch of the spec, without
// the resourceVersion: the disruption controller rewrites the budget's status at every pod
// change, and an update would conflict with it just when the count matters. A budget found
// created meanwhile is checked to be the cluster's (checkBudget) and left to the next pass.
func (r *ValkeyClusterReconciler) setBudget(ctx context.Context, log *zap.Logger, vc *v1.ValkeyCluster, obs *observation, a plan.SetBudget) error {
	want := resources.BuildDisruptionBudget(vc, a.Shard, int32(a.Joining))
	// The replicas the pass works toward: a bootstrap's target, not an edit waiting for it.
	want.Spec.MinAvailable = ptr.To(intstr.FromInt32(int32(obs.snapshot.ReplicasPerShard + a.Joining)))
	if a.Create {
		err := r.Create(ctx, want)
		switch {
		case apierrors.IsAlreadyExists(err):
			// Created meanwhile (by an operator that lost its lease, say): the next pass sees it.
			// Or not the operator's at all (it would not be in the list without the label).
			return r.checkBudget(ctx, vc, want.Name)
		case err != nil:
			return fmt.Errorf("create PodDisruptionBudget %s: %w", want.Name, err)
		}
		log.Info(logging.MsgCreatingDisruptionBudget, budgetFields(want, true)...)
		return nil
	}
	have, ok := obs.budgets[a.Shard]
	if !ok {
		return fmt.Errorf("broken invariant: %s: no budget of shard %d observed", a, a.Shard)
	}
	b := have.DeepCopy()
	b.Spec = want.Spec
	log.Info(logging.MsgUpdatingDisruptionBudget, budgetFields(b, true)...)
	if err := r.Patch(ctx, b, client.MergeFrom(have)); err != nil {
		return fmt.Errorf("update PodDisruptionBudget %s: %w", b.Name, err)
	}
	return nil
}

// deleteBudget carries out a plan.DeleteBudget on the observed budget (by its UID: never one
// created since under the same name).
func (r *ValkeyClusterReconciler) deleteBudget(ctx context.Context, log *zap.Logger, obs *observation, a plan.DeleteBudget) error {
	b, ok := obs.budgets[a.Shard]
	if !ok {
		return fmt.Errorf("broken invariant: %s: no budget of shard %d observed", a, a.Shard)
	}
	log.Info(logging.MsgDeletingDisruptionBudget, budgetFields(b, false)...)
	if err := r.Delete(ctx, b, client.Preconditions{UID: &b.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete PodDisruptionBudget %s: %w", b.Name, err)
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
