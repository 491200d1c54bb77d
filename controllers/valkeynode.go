package controllers

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/plan"
	"github.com/gomomento/valkey-operator/resources"
	"github.com/gomomento/valkey-operator/tlsmaterial"
	"github.com/gomomento/valkey-operator/valkey"
)

// A Valkey node is three objects: its ValkeyNode (owned by the cluster), and the pod and the
// {node}-config ConfigMap of the same name (owned by the ValkeyNode). Deleting the cluster
// deletes the ValkeyNodes, and the garbage collector deletes their pods and ConfigMaps.

// createNode creates a new node for shard: its ValkeyNode (Joining), its ConfigMap, then its
// pod. An interrupted creation leaves a ValkeyNode without a pod, which the next pass counts
// as a lost node and replaces; it is never half-created twice under one name. An object the API
// server refuses, or one of the node's names already taken by an object the node does not
// control, is returned as refused: the ValkeyNode is deleted again at once (creates.go), and err
// says only whether that deletion failed.
func (r *ValkeyClusterReconciler) createNode(ctx context.Context, log *zap.Logger, vc *v1.ValkeyCluster, rc *resources.ResolvedConfig, obs *observation, a plan.CreatePod) (refused *createRefused, err error) {
	shard := a.Shard
	if obs.heldSize != nil {
		// A shrink is refused: the new node holds what its shard holds (resize.go).
		held := *rc
		held.Resources.Memory = obs.heldSize
		rc = &held
	}
	vn := resources.BuildValkeyNode(vc, rc, resources.NewPodName(vc), shard, fsm.JoinType(obs.snapshot, shard))
	if a.MovedFrom != "" {
		if vn.Annotations == nil {
			vn.Annotations = map[string]string{}
		}
		vn.Annotations[v1.AnnotationMovedFrom] = a.MovedFrom
		log.Info(logging.MsgMovingCopy, logging.Pod(vn.Name), zap.Int(logging.FieldShard, shard), zap.String(logging.FieldZone, a.Zone), zap.String(logging.FieldFrom, a.MovedFrom))
	}
	log.Info(logging.MsgCreatingPod, logging.Pod(vn.Name), zap.Int(logging.FieldShard, shard))
	// The name is random: AlreadyExists here is a collision with another node, not a retry of
	// this one, so it is an error and the next pass draws a new name.
	if err := r.Create(ctx, vn); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create ValkeyNode %s: %w", vn.Name, err)
		}
		err = refusal(vn.Name, fmt.Errorf("ValkeyNode: %w", err))
		if errors.As(err, &refused) {
			return refused, nil // nothing was created
		}
		return nil, err
	}
	announce := ""
	if vc.Spec.TLS != nil {
		announce = tlsmaterial.PodDNSName(vc, vn.Name)
	}
	err = r.Create(ctx, resources.BuildNodeConfigMap(vc, vn, resources.RenderValkeyConf(rc, announce)))
	if apierrors.IsAlreadyExists(err) {
		err = r.checkCollision(ctx, vn, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: vn.Namespace, Name: v1.NodeConfigMapName(vn.Name)}}, "ConfigMap")
	} else if err != nil {
		err = refusal(vn.Name, fmt.Errorf("ConfigMap %s: %w", v1.NodeConfigMapName(vn.Name), err))
	}
	if err == nil {
		pod := resources.BuildPod(vc, rc, vn, obs.snapshot.SpecHash, r.DefaultZoneSpread)
		resources.PlaceInZones(pod, vc, r.DefaultZoneSpread, a.Zone, a.Avoid)
		err = r.Create(ctx, pod)
		switch {
		case apierrors.IsAlreadyExists(err):
			// The name was drawn this pass: a pod of it that exists already is not the one the
			// operator creates, whatever its owner reference says (identity.go).
			err = &createRefused{Pod: vn.Name, Reason: fmt.Sprintf("Pod %s already exists and was not created by the operator for ValkeyNode %s", vn.Name, vn.Name)}
		case err == nil:
			// The record that makes this pod, and no other of its name, the node's. If it
			// fails, the next pass records it (plan.RecordPod): the pod was created with its
			// ValkeyNode.
			err = r.writePodUID(ctx, vn, pod.UID)
			if err != nil {
				return nil, err
			}
		default:
			err = refusal(vn.Name, err)
		}
	}
	if errors.As(err, &refused) {
		return refused, r.undoNode(ctx, vn)
	}
	if err != nil {
		return nil, fmt.Errorf("create pod %s: %w", vn.Name, err)
	}
	return nil, nil
}

// retireNode removes the node named name: it first records the intent (lifecycle Leaving), so
// that an operator restarted in between sees a node on its way out, then deletes the
// ValkeyNode; the garbage collector deletes its pod and ConfigMap. A node that is already gone
// is retired. reason is why a live node goes (plan.DeletePod.Reason), "" for a failed one.
func (r *ValkeyClusterReconciler) retireNode(ctx context.Context, log *zap.Logger, obs *observation, name, reason string) error {
	vn, ok := obs.nodes[name]
	if !ok {
		return nil
	}
	if reason == "" {
		log.Info(logging.MsgDeletingFailedPod, logging.Pod(name))
	} else {
		log.Info(logging.MsgRetiringNode, logging.Pod(name), zap.String(logging.FieldReason, reason))
	}
	if err := r.markLeaving(ctx, obs, name); err != nil {
		return err
	}
	err := r.Delete(ctx, vn, client.Preconditions{UID: &vn.UID}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err = client.IgnoreNotFound(err); err != nil {
		return fmt.Errorf("delete ValkeyNode %s: %w", name, err)
	}
	return nil
}

// markLeaving marks the ValkeyNode of pod name Leaving, the first half of its retirement: an
// operator that stops before the deletion finishes it first on its next pass (plan, rule 1b).
func (r *ValkeyClusterReconciler) markLeaving(ctx context.Context, obs *observation, name string) error {
	vn, ok := obs.nodes[name]
	if !ok || vn.Spec.Lifecycle == v1.LifecycleLeaving {
		return nil
	}
	vn = vn.DeepCopy()
	vn.Spec.Lifecycle = v1.LifecycleLeaving
	if err := r.Update(ctx, vn); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("mark ValkeyNode %s Leaving: %w", name, err)
	}
	obs.nodes[name] = vn
	return nil
}

// detachReplica detaches the node of pod name from its primary (valkey.Client.Detach) when the
// pass saw it answer as a replica: in the seconds it still answers MOVED before it stops (a
// Valkey 8 pod's preStop hold, plan.MovedHold on 9.x) it acknowledges no write that a client's
// WAIT would count as copied. A primary, a node that did not answer and a Failed pod are left
// alone; a refusal is logged at DEBUG and the retirement goes on, as it did before.
func (r *ValkeyClusterReconciler) detachReplica(ctx context.Context, log *zap.Logger, obs *observation, node func(string) (*valkey.Client, error), name string) {
	for _, p := range obs.snapshot.Pods {
		if p.Name != name || p.Node == nil || !p.Node.Reachable || p.Node.Primary || p.Node.PrimaryID == "" {
			continue
		}
		c, err := node(name)
		if err == nil {
			err = c.Detach(ctx)
		}
		if err != nil {
			log.Debug(logging.MsgDetachFailed, logging.Pod(name), zap.Error(err))
		}
	}
}

// markActive carries out a plan.MarkActive: the node's ValkeyNode goes Active, logging
// `completed join`. A scale-out node's join-type label (shard) is removed at the same time; the
// other join types stay, as in the original.
func (r *ValkeyClusterReconciler) markActive(ctx context.Context, log *zap.Logger, obs *observation, a plan.MarkActive) error {
	vn, ok := obs.nodes[a.Pod]
	if !ok {
		return nil
	}
	vn = vn.DeepCopy()
	vn.Spec.Lifecycle = v1.LifecycleActive
	if vn.Labels[v1.LabelJoinType] == string(v1.JoinTypeShard) {
		delete(vn.Labels, v1.LabelJoinType)
	}
	if err := r.Update(ctx, vn); err != nil {
		return fmt.Errorf("mark ValkeyNode %s Active: %w", a.Pod, err)
	}
	log.Info(logging.MsgCompletedJoin, logging.Pod(a.Pod))
	return nil
}

// settleMove carries out a plan.SettleMove: the moved-from annotation (v1.AnnotationMovedFrom)
// of the node's ValkeyNode is removed (the rules: plan/upkeep.go, moves).
func (r *ValkeyClusterReconciler) settleMove(ctx context.Context, obs *observation, a plan.SettleMove) error {
	vn, ok := obs.nodes[a.Pod]
	if !ok {
		return nil
	}
	vn = vn.DeepCopy()
	delete(vn.Annotations, v1.AnnotationMovedFrom)
	if err := r.Update(ctx, vn); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("settle the move of ValkeyNode %s: %w", a.Pod, err)
	}
	return nil
}

// observeNodes lists the cluster's ValkeyNodes from the API server (not the cache: a node
// created on the previous pass must be seen, or it would be created again), by name.
func (r *ValkeyClusterReconciler) observeNodes(ctx context.Context, vc *v1.ValkeyCluster) (map[string]*v1.ValkeyNode, error) {
	var list v1.ValkeyNodeList
	if err := r.APIReader.List(ctx, &list, client.InNamespace(vc.Namespace), client.MatchingLabels{v1.LabelCluster: vc.Name}); err != nil {
		return nil, fmt.Errorf("list ValkeyNodes: %w", err)
	}
	nodes := map[string]*v1.ValkeyNode{}
	for i := range list.Items {
		if vn := &list.Items[i]; metav1.IsControlledBy(vn, vc) {
			nodes[vn.Name] = vn
		}
	}
	return nodes, nil
}

// nodeOf returns the ValkeyNode that controls pod among nodes, and whether pod is controlled
// by a ValkeyNode at all (one that may be gone). A node's pod has its ValkeyNode's name: a pod
// of another name that names a ValkeyNode as its controller is anybody's (its owner reference
// is the creator's to write, and a ValkeyNode's UID is readable by every team), and no node's.
func nodeOf(pod *corev1.Pod, nodes map[string]*v1.ValkeyNode) (vn *v1.ValkeyNode, byNode bool) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "ValkeyNode" || ref.APIVersion != v1.GroupVersion.String() || ref.Name != pod.Name {
		return nil, false
	}
	if vn, ok := nodes[ref.Name]; ok && vn.UID == ref.UID {
		return vn, true
	}
	return nil, true
}

// lostNode is the view of a ValkeyNode whose pod does not exist (deleted, evicted, never
// created): a Failed pod of that name, so that the planners replace it and, once its shard is
// whole again, retire it like any dead node.
func lostNode(vn *v1.ValkeyNode) fsm.Pod {
	return fsm.Pod{
		Name:      vn.Name,
		Shard:     int(vn.Spec.ShardIndex),
		Phase:     fsm.PodFailed,
		Failure:   "pod missing",
		Lifecycle: string(vn.Spec.Lifecycle),
	}
}

// clusterOf maps a pod or ConfigMap of a Valkey node (controlled by a ValkeyNode, or by a
// ValkeyCluster) to its cluster, named by the cluster label: the owner chain ends there.
func clusterOf(_ context.Context, obj client.Object) []reconcile.Request {
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.APIVersion != v1.GroupVersion.String() || (ref.Kind != "ValkeyNode" && ref.Kind != "ValkeyCluster") {
		return nil
	}
	name := obj.GetLabels()[v1.LabelCluster]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}}
}
