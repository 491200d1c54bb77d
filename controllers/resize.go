package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/plan"
	"github.com/gomomento/valkey-operator/resources"
)

// The in-place resize (plan/resize.go): what a pod says of its size, the two writes, and the
// memory of the resizes the API server refused.

// Pod resize condition types and reasons, as a v1.35+ kubelet writes them (core/v1 names them
// from 1.33 on; spelled here so the operator builds against any client-go).
const (
	podResizePending    = "PodResizePending"
	podResizeInProgress = "PodResizeInProgress"
	resizeReasonError   = "Error"
)

// sizeOf is the size a ValkeyNode records.
func sizeOf(vn *v1.ValkeyNode) fsm.Size { return fsm.Size{CPU: vn.Spec.CPU, Memory: vn.Spec.Memory} }

// resizeView is what pod says of its size (fsm.Resize), nil when its kubelet reports no
// container resources: a kubelet before in-place resize, which the API server refuses a resize
// for.
func resizeView(pod *corev1.Pod) *fsm.Resize {
	var c *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == resources.ValkeyContainer {
			c = &pod.Spec.Containers[i]
		}
	}
	if c == nil {
		return nil
	}
	var inForce *corev1.ResourceRequirements
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == c.Name {
			inForce = cs.Resources
		}
	}
	if inForce == nil {
		return nil
	}
	r := &fsm.Resize{Asked: sizeIn(c.Resources), InForce: sizeIn(*inForce)}
	for _, cond := range pod.Status.Conditions {
		switch {
		case string(cond.Type) == podResizePending && cond.Status == corev1.ConditionTrue:
			r.Pending, r.PendingMessage, r.PendingSince = cond.Reason, cond.Message, cond.LastTransitionTime.Time
		case string(cond.Type) == podResizeInProgress && cond.Status == corev1.ConditionTrue && cond.Reason == resizeReasonError:
			r.Error = cond.Message
			if r.Error == "" {
				r.Error = cond.Reason
			}
		}
	}
	for _, vol := range pod.Spec.Volumes {
		if vol.Name == resources.DataVolume && vol.EmptyDir != nil && vol.EmptyDir.SizeLimit != nil {
			r.DataLimit = vol.EmptyDir.SizeLimit.Value()
		}
	}
	return r
}

// sizeIn is the size of a container's resources: its limits, which the operator sets equal to
// its requests.
func sizeIn(r corev1.ResourceRequirements) fsm.Size {
	var z fsm.Size
	if q, ok := r.Limits[corev1.ResourceCPU]; ok {
		z.CPU = q.String()
	}
	if q, ok := r.Limits[corev1.ResourceMemory]; ok {
		z.Memory = q.String()
	}
	return z
}

// resizePod carries out a plan.ResizePod: one strategic-merge patch of the valkey container's
// requests and limits through the pod's resize subresource, which changes nothing else of the
// pod. A resize the API server refuses (a QoS class change, more than the Node can hold, a
// kubelet without resize) is remembered, said at WARN with a Warning Event, and the node is then
// replaced as before (fsm.Snapshot.InPlace); the pass goes on.
func (r *ValkeyClusterReconciler) resizePod(ctx context.Context, log *zap.Logger, vc *v1.ValkeyCluster, obs *observation, a plan.ResizePod) error {
	pod, ok := obs.pods[a.Pod]
	if !ok {
		return nil
	}
	res := map[corev1.ResourceName]string{}
	if a.To.CPU != "" {
		res[corev1.ResourceCPU] = a.To.CPU
	}
	if a.To.Memory != "" {
		res[corev1.ResourceMemory] = a.To.Memory
	}
	for name, v := range res {
		if _, err := resource.ParseQuantity(v); err != nil {
			return fmt.Errorf("broken invariant: %s %q of pod %s: %w", name, v, a.Pod, err)
		}
	}
	body, err := json.Marshal(map[string]any{"spec": map[string]any{"containers": []any{map[string]any{
		"name": resources.ValkeyContainer, "resources": map[string]any{"requests": res, "limits": res},
	}}}})
	if err != nil {
		return fmt.Errorf("broken invariant: resize patch: %w", err)
	}
	log.Info(logging.MsgResizingPod, logging.Pod(a.Pod), zap.String(logging.FieldCPU, a.To.CPU), zap.String(logging.FieldMemory, a.To.Memory), zap.String(logging.FieldFrom, a.From.String()))
	target := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
	err = r.SubResource("resize").Patch(ctx, target, client.RawPatch(types.StrategicMergePatchType, body))
	switch {
	case err == nil:
		recordRelated(r.Events, vc, pod, false, EventResizing, "Resize", "pod %s: %s, from %s, in place", a.Pod, a.To, a.From)
		return nil
	case apierrors.IsNotFound(err) && pod.DeletionTimestamp != nil:
		return nil
	case apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err):
		// Forbidden is also what RBAC says; an operator without pods/resize replaces the node,
		// as before it could resize. NotFound of a pod that exists is a server without the
		// subresource.
		why := apiMessage(err)
		if r.resizes.refuse(obs.clusterKey(), a.Pod, a.To, why) {
			log.Warn(logging.MsgResizeRefused, logging.Pod(a.Pod), zap.String(logging.FieldError, why))
			recordRelated(r.Events, vc, pod, true, EventResizeNotInPlace, "Resize", "pod %s: the API server refused the resize to %s (%s); the node is replaced instead", a.Pod, a.To, why)
		}
		return nil
	default:
		return fmt.Errorf("resize pod %s: %w", a.Pod, err)
	}
}

// apiMessage is the API server's message of err, without client-go's wrapping.
func apiMessage(err error) string {
	if s, ok := err.(apierrors.APIStatus); ok && s.Status().Message != "" { //nolint:errorlint // a status error is never wrapped by the client
		return s.Status().Message
	}
	return err.Error()
}

// recordSize carries out a plan.RecordSize: the node's ValkeyNode takes the size its kubelet
// applied, so that its spec hash is the current one; said once, with a Normal Event.
func (r *ValkeyClusterReconciler) recordSize(ctx context.Context, log *zap.Logger, vc *v1.ValkeyCluster, obs *observation, a plan.RecordSize) error {
	vn, ok := obs.nodes[a.Pod]
	if !ok || vn.DeletionTimestamp != nil {
		return nil
	}
	if sizeOf(vn) == a.Size {
		return nil
	}
	vn = vn.DeepCopy()
	from := sizeOf(vn)
	vn.Spec.CPU, vn.Spec.Memory = a.Size.CPU, a.Size.Memory
	if err := r.Update(ctx, vn); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("record the size of ValkeyNode %s: %w", vn.Name, err)
	}
	r.resizes.done(obs.clusterKey(), a.Pod)
	log.Info(logging.MsgPodResized, logging.Pod(a.Pod), zap.String(logging.FieldCPU, a.Size.CPU), zap.String(logging.FieldMemory, a.Size.Memory), zap.String(logging.FieldFrom, from.String()))
	var related runtime.Object
	if pod, ok := obs.pods[a.Pod]; ok {
		related = pod
	}
	recordRelated(r.Events, vc, related, false, EventResized, "Resize", "pod %s: %s, from %s, in place", a.Pod, a.Size, from)
	return nil
}

// reportResizes says, at most once a tick per pod, why a node whose CPU and memory alone
// changed is replaced rather than resized (WARN and a Warning Event), and why a shrink is
// refused (WARN; the ResizeRefused condition holds it).
func (r *ValkeyClusterReconciler) reportResizes(log *zap.Logger, vc *v1.ValkeyCluster, obs *observation) {
	s := obs.snapshot
	now := time.Now()
	for _, p := range s.LivePods() {
		if p.Phase != fsm.PodRunning || p.Exited || p.Lifecycle != string(v1.LifecycleActive) {
			// A pod that never ran (a surge pod still Pending) is not resized either way.
			continue
		}
		if _, why := s.InPlace(p); why != "" && r.ticks.due("resize/"+clusterKey(vc)+"/"+p.Name, now) {
			log.Warn(logging.MsgResizeNotInPlace, logging.Pod(p.Name), zap.String(logging.FieldReason, why))
			var related runtime.Object
			if pod, ok := obs.pods[p.Name]; ok {
				related = pod
			}
			recordRelated(r.Events, vc, related, true, EventResizeNotInPlace, "Resize", "pod %s is replaced, not resized in place: %s", p.Name, why)
		}
	}
	if why := plan.ShrinkRefused(s); why != "" && r.ticks.due("shrink/"+clusterKey(vc), now) {
		log.Warn(logging.MsgShrinkRefused, zap.String(logging.FieldReason, why))
		recordEvent(r.Events, vc, true, EventResizeRefused, "Resize", "%s", why)
	}
}

// resizeRefusals remembers, per cluster and pod, the size the API server refused to resize the
// pod to and why: the node is replaced instead while the spec asks for that size. Kept in memory:
// an operator restarted asks once more, and is refused once more.
type resizeRefusals struct {
	mu sync.Mutex
	m  map[string]map[string]resizeRefusal
}

type resizeRefusal struct {
	to  fsm.Size
	why string
}

// refuse remembers the refusal; it reports whether it is news (not the same size and reason).
func (z *resizeRefusals) refuse(cluster, pod string, to fsm.Size, why string) bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.m == nil {
		z.m = map[string]map[string]resizeRefusal{}
	}
	if z.m[cluster] == nil {
		z.m[cluster] = map[string]resizeRefusal{}
	}
	prev, had := z.m[cluster][pod]
	z.m[cluster][pod] = resizeRefusal{to: to, why: why}
	return !had || prev.to != to || prev.why != why
}

// refused is why the API server refused to resize pod to size, "" when it did not.
func (z *resizeRefusals) refused(cluster, pod string, to fsm.Size) string {
	z.mu.Lock()
	defer z.mu.Unlock()
	if f, ok := z.m[cluster][pod]; ok && f.to.Equal(to) {
		return f.why
	}
	return ""
}

// done forgets pod: its resize was applied.
func (z *resizeRefusals) done(cluster, pod string) {
	z.mu.Lock()
	defer z.mu.Unlock()
	delete(z.m[cluster], pod)
}

// keep drops the refusals of pods the snapshot no longer has.
func (z *resizeRefusals) keep(cluster string, s fsm.Snapshot) {
	z.mu.Lock()
	defer z.mu.Unlock()
	for pod := range z.m[cluster] {
		if s.Pod(pod) == nil {
			delete(z.m[cluster], pod)
		}
	}
}

// forget drops everything kept about a cluster.
func (z *resizeRefusals) forget(cluster string) {
	z.mu.Lock()
	defer z.mu.Unlock()
	delete(z.m, cluster)
}

// observeSize fills the snapshot's target size (from the spec a node created now gets) and each
// pod's remembered refusal.
func (r *ValkeyClusterReconciler) observeSize(obs *observation, desired *v1.ValkeyNodeSpec) {
	s := &obs.snapshot
	s.ShapeHash = resources.ShapeHash(desired)
	s.Size = fsm.Size{CPU: desired.CPU, Memory: desired.Memory}
	if q := resources.DataSizeLimit(desired); q != nil {
		s.DataLimit = q.Value()
	}
	r.resizes.keep(obs.clusterKey(), *s)
	obs.heldSize = nil
	for i := range s.Pods {
		if p := &s.Pods[i]; p.Resize != nil {
			p.Resize.Refused = r.resizes.refused(obs.clusterKey(), p.Name, s.Size)
		}
	}
	if held, ok := plan.HeldSize(*s); ok {
		if q, err := resource.ParseQuantity(held.Memory); err == nil {
			obs.heldSize = &q
		}
	}
}

// ReasonShrinkRefused is the ResizeRefused condition's reason.
const ReasonShrinkRefused = "ShrinkRefused"

// setResizeCondition sets ResizeRefused on st: True with the reasons while a memory shrink is
// refused (plan.ShrinkRefused), absent otherwise. Left as it was when the pass could not tell
// (the spec did not resolve). Pure.
func setResizeCondition(st *v1.ValkeyClusterStatus, gen int64, s fsm.Snapshot) {
	if s.ShapeHash == "" {
		return
	}
	if why := plan.ShrinkRefused(s); why != "" {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1.ConditionResizeRefused, Status: metav1.ConditionTrue,
			Reason: ReasonShrinkRefused, Message: why, ObservedGeneration: gen})
		return
	}
	meta.RemoveStatusCondition(&st.Conditions, v1.ConditionResizeRefused)
}
