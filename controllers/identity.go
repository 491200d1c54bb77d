package controllers

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/resources"
)

// Node identity. A node is the pod the operator created for its ValkeyNode, and nothing else of
// that name. A pod's name, labels and owner reference are its creator's to write, and a team
// that may create pods in its namespace (the built-in edit role) can delete a node's pod and
// create one of the same name, labels and controller reference (a ValkeyNode's name and UID are
// readable by every team) that runs a program of its own. The cluster, ACL and TLS controllers
// would then connect to it with the operator's credentials, and read what it answers.
//
// So the operator records the UID of the pod it creates in the ValkeyNode's status
// (status.podUID), which no tenant role may write (docs/user/installing.md: valkey-operator-view
// grants get, list and watch on valkeynodes; the status subresource is granted to no one but
// the operator), and which the API server, not the creator, gives a pod. A pod of the node's
// name whose UID is another is foreign (foreignReason). A foreign pod is never connected to by
// any controller, gets no credential from the operator, and is reported (WARN, a Warning Event,
// the Ready and Degraded conditions with reason ForeignPod, status.message); its node is shown
// as one that is down (foreignNode), and is replaced once the pod is gone. What such a pod can
// mount is what its creator could read anyway: the Secrets of its namespace, under the same
// edit role.
//
// Nodes created before the record, and a node whose record write failed (the operator stopped
// between creating the pod and recording it), have none. Their pod is taken as the node's when
// the API server created it within podAdoptWindow of the ValkeyNode, and recorded then
// (plan.RecordPod). The argument: every operator version since ValkeyNodes exist creates the
// ValkeyNode, its ConfigMap and its pod one after the other in one pass (createNode), under the
// pass budget (DefaultPassBudget, 10 s), and never creates a pod for an existing ValkeyNode
// again (a lost pod is replaced by a new ValkeyNode of a new name). Both creation timestamps are
// the API server's (a client cannot set them). So the pods of clusters from before the record
// are adopted with no pod replaced, and a pod made later under a node's name, an impostor, is
// not: it would have to replace the node's own pod within seconds of its creation, in the one
// pass where the operator failed to record it, to be adopted.
//
// The pod must run its node's image too: a pod's container image is the one field of its spec a
// team can change in place (the kubelet then restarts the container with it), and the UID stays.

// podAdoptWindow bounds how long after its ValkeyNode a pod with no record may have been created
// to be taken as the node's: a pass (10 s) and a margin for the API servers' clocks.
const podAdoptWindow = 30 * time.Second

// podAdoptSkew is how much earlier than its ValkeyNode a pod may seem created: timestamps are
// whole seconds, and an HA control plane's servers' clocks differ a little.
const podAdoptSkew = 5 * time.Second

// ReasonForeignPod is the Ready (and Degraded) condition's reason while a pod that is not the
// operator's holds a node's name.
const ReasonForeignPod = "ForeignPod"

// foreignReason says why pod, whose controller reference names vn (nodeOf), is not the pod the
// operator created for vn; "" when it is. Pure.
func foreignReason(pod *corev1.Pod, vn *v1.ValkeyNode) string {
	if rec := vn.Status.PodUID; rec != "" {
		if string(pod.UID) != rec {
			return "its UID is not the one the operator recorded for the node: the pod it created is gone"
		}
	} else if d := pod.CreationTimestamp.Sub(vn.CreationTimestamp.Time); d < -podAdoptSkew || d > podAdoptWindow {
		return fmt.Sprintf("it was created %s after its ValkeyNode, not with it", d.Round(time.Second))
	}
	if len(pod.Spec.Containers) != 1 || len(pod.Spec.InitContainers) != 0 || pod.Spec.Containers[0].Image != vn.Spec.Image {
		return fmt.Sprintf("it does not run its ValkeyNode's image %s alone", vn.Spec.Image)
	}
	return ""
}

// foreignNode is the view of the node of vn while a pod that is not the operator's holds its
// name (why): a node that is down. Its pod runs as far as the planners know, so nothing replaces
// or retires it while that pod stands, and its Valkey node is silent (never asked: no IP). It
// still claims the node id the last status recorded for it (lastID): unknown is not absent.
func foreignNode(vn *v1.ValkeyNode, why, lastID string) fsm.Pod {
	return fsm.Pod{
		Name:       vn.Name,
		Shard:      int(vn.Spec.ShardIndex),
		Phase:      fsm.PodRunning,
		Created:    vn.CreationTimestamp.Time,
		Lifecycle:  string(vn.Spec.Lifecycle),
		SpecHash:   resources.NodeSpecHash(&vn.Spec),
		StartHash:  resources.StartSpecHash(&vn.Spec),
		Settings:   vn.Spec.ValkeySettings,
		MovedFrom:  vn.Annotations[v1.AnnotationMovedFrom],
		LastNodeID: lastID,
		Foreign:    why,
		Node:       &fsm.Node{Err: "not connected to: pod " + vn.Name + " is not the operator's (" + why + ")"},
	}
}

// foreignMessage is status.message while foreign pods hold node names, "" when none do. Pure.
func foreignMessage(s fsm.Snapshot) string {
	var first *fsm.Pod
	n := 0
	for i, p := range s.Pods {
		if p.Foreign != "" {
			if first == nil {
				first = &s.Pods[i]
			}
			n++
		}
	}
	if first == nil {
		return ""
	}
	more := ""
	if n > 1 {
		more = fmt.Sprintf(" (and %d more pods)", n-1)
	}
	return fmt.Sprintf("pod %s is not the pod the operator created for its node%s: %s. The operator never connects to it "+
		"and gives it no credential; the node counts as down until the pod is deleted, then it is replaced", first.Name, more, first.Foreign)
}

// reportForeign says, once per tick per pod, each foreign pod of the pass: WARN and a Warning
// Event, as for the other objects found under a node's name that the operator does not own.
func (r *ValkeyClusterReconciler) reportForeign(log *zap.Logger, vc *v1.ValkeyCluster, s fsm.Snapshot) {
	for _, p := range s.Pods {
		if p.Foreign == "" || !r.ticks.due("foreign-pod/"+clusterKey(vc)+"/"+p.Name, time.Now()) {
			continue
		}
		log.Warn(logging.MsgNodePodForeign, logging.Pod(p.Name), zap.String(logging.FieldReason, p.Foreign))
		recordEvent(r.Events, vc, true, EventForeignObject, "Observe",
			"pod %s is not the pod the operator created for ValkeyNode %s (%s): it is never connected to and gets no credential; "+
				"the node counts as down until the pod is deleted, then it is replaced", p.Name, p.Name, p.Foreign)
	}
}

// unlistedPods reads, by name, the pod of each of nodes (not being deleted) that the list by the
// cluster label did not return: a pod without the label still holds its node's name, and one
// that is not the operator's must be reported, not taken for a lost node (whose ValkeyNode is
// retired, and the garbage collector would delete that pod with it).
func (r *ValkeyClusterReconciler) unlistedPods(ctx context.Context, nodes map[string]*v1.ValkeyNode, listed []corev1.Pod) ([]corev1.Pod, error) {
	seen := map[string]bool{}
	for i := range listed {
		seen[listed[i].Name] = true
	}
	var out []corev1.Pod
	for name, vn := range nodes {
		if seen[name] || vn.DeletionTimestamp != nil {
			continue
		}
		var pod corev1.Pod
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: vn.Namespace, Name: name}, &pod)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("get pod %s: %w", name, err)
		default:
			out = append(out, pod)
		}
	}
	return out, nil
}

// recordPod carries out a plan.RecordPod: the ValkeyNode of a.Pod records the UID of the pod of
// that name this pass found to be its (observe). Only its status is written.
func (r *ValkeyClusterReconciler) recordPod(ctx context.Context, obs *observation, name string) error {
	vn, ok := obs.nodes[name]
	pod, found := obs.pods[name]
	if !ok || !found {
		return nil
	}
	return r.writePodUID(ctx, vn, pod.UID)
}

// writePodUID records uid as the pod of vn (status.podUID).
func (r *ValkeyClusterReconciler) writePodUID(ctx context.Context, vn *v1.ValkeyNode, uid types.UID) error {
	if vn.Status.PodUID == string(uid) {
		return nil
	}
	patch := client.MergeFrom(vn.DeepCopy())
	vn.Status.PodUID = string(uid)
	if err := r.Status().Patch(ctx, vn, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("record pod of ValkeyNode %s: %w", vn.Name, err)
	}
	return nil
}
