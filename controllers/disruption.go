package controllers

// One PodDisruptionBudget per shard index (the original creates none): it selects the cluster's
// pods of that shard and lets an eviction through only while every other copy of the shard is
// up, so `kubectl drain` (or the cluster-autoscaler) never takes two copies of a shard at once.
// The operator's own retirements delete ValkeyNodes (the garbage collector deletes their pods):
// they are not evictions, and no budget holds them back.
//
// The budget says minAvailable = replicasPerShard, not maxUnavailable = 1. The disruption
// controller resolves maxUnavailable (and any percentage) through the scale subresource of each
// pod's controller; a ValkeyNode has none, so such a budget fails to sync ("does not implement
// the scale subresource"), allows no disruption at all, and a drain would wait for ever. An
// integer minAvailable is counted over the matching pods instead, and for a whole shard
// (replicasPerShard + 1 pods) it allows exactly one eviction. A shard without replicas gets
// minAvailable 0: its one pod may be evicted, since holding it would block every drain of its
// Kubernetes node while protecting nothing that a second copy could save.

import (
	"context"
	"fmt"
	"slices"
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
)

// buildDisruptionBudget returns the PodDisruptionBudget of shard index shard, owned by vc.
func buildDisruptionBudget(vc *v1.ValkeyCluster, shard int) *policyv1.PodDisruptionBudget {
	meta := objectMeta(vc, v1.ShardDisruptionBudgetName(vc.Name, shard))
	meta.Labels[v1.LabelShard] = strconv.Itoa(shard)
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: meta,
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(vc.Spec.ReplicasPerShard)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{
				v1.LabelCluster: vc.Name,
				v1.LabelShard:   strconv.Itoa(shard),
			}},
			// A pod that is not Ready (its container not started yet, its Kubernetes node
			// lost) serves nothing: holding its eviction back would stall a drain and
			// protect no data.
			UnhealthyPodEvictionPolicy: ptr.To(policyv1.AlwaysAllow),
		},
	}
}

// budgetChanges is what ensureDisruptionBudgets does, decided from what exists: the shard
// indices whose budget to create, to bring back to the built spec, and to delete.
type budgetChanges struct {
	create, update, remove []int
}

// planDisruptionBudgets decides the budget changes: every shard index below spec.shards has its
// budget, as built; a budget of a shard index at or above spec.shards goes once that shard has no
// live pod left (a removed shard's nodes keep their budget while they still serve).
func planDisruptionBudgets(vc *v1.ValkeyCluster, have map[int]*policyv1.PodDisruptionBudget, live []fsm.Pod) budgetChanges {
	var c budgetChanges
	for shard := range int(vc.Spec.Shards) {
		b, ok := have[shard]
		switch {
		case !ok:
			c.create = append(c.create, shard)
		case !equality.Semantic.DeepEqual(b.Spec, buildDisruptionBudget(vc, shard).Spec):
			c.update = append(c.update, shard)
		}
	}
	for shard := range have {
		if shard < int(vc.Spec.Shards) {
			continue
		}
		if !slices.ContainsFunc(live, func(p fsm.Pod) bool { return p.Shard == shard }) {
			c.remove = append(c.remove, shard)
		}
	}
	slices.Sort(c.remove)
	return c
}

// ensureDisruptionBudgets carries out planDisruptionBudgets on the budgets vc controls (read from
// the cache: a budget created on the previous pass and not cached yet is created again, and
// AlreadyExists is success). An update brings back a changed replicasPerShard or a hand edit.
func (r *ValkeyClusterReconciler) ensureDisruptionBudgets(ctx context.Context, log *zap.Logger, vc *v1.ValkeyCluster, obs *observation) error {
	var list policyv1.PodDisruptionBudgetList
	if err := r.List(ctx, &list, client.InNamespace(vc.Namespace), client.MatchingLabels{v1.LabelCluster: vc.Name}); err != nil {
		return fmt.Errorf("list PodDisruptionBudgets: %w", err)
	}
	have := map[int]*policyv1.PodDisruptionBudget{}
	for i := range list.Items {
		b := &list.Items[i]
		shard, err := strconv.Atoi(b.Labels[v1.LabelShard])
		if err != nil || !metav1.IsControlledBy(b, vc) {
			continue // not one of ours
		}
		have[shard] = b
	}
	c := planDisruptionBudgets(vc, have, obs.snapshot.LivePods())
	for _, shard := range c.create {
		err := r.Create(ctx, buildDisruptionBudget(vc, shard))
		switch {
		case apierrors.IsAlreadyExists(err):
			// Created by an earlier pass, not cached yet: said then.
		case err != nil:
			return fmt.Errorf("create PodDisruptionBudget of shard %d: %w", shard, err)
		default:
			log.Info(logging.MsgCreatingDisruptionBudget, zap.Int(logging.FieldShard, shard))
		}
	}
	for _, shard := range c.update {
		b := have[shard].DeepCopy()
		b.Spec = buildDisruptionBudget(vc, shard).Spec
		log.Info(logging.MsgUpdatingDisruptionBudget, zap.Int(logging.FieldShard, shard))
		if err := r.Update(ctx, b); err != nil {
			return fmt.Errorf("update PodDisruptionBudget of shard %d: %w", shard, err)
		}
	}
	for _, shard := range c.remove {
		b := have[shard]
		log.Info(logging.MsgDeletingDisruptionBudget, zap.Int(logging.FieldShard, shard))
		if err := r.Delete(ctx, b, client.Preconditions{UID: &b.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete PodDisruptionBudget of shard %d: %w", shard, err)
		}
	}
	return nil
}
