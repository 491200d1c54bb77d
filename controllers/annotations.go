package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/plan"
)

// spec.podAnnotations is applied in place, as the change-impact table says: a key added or
// changed in the spec is patched onto every live pod (a merge patch of metadata.annotations
// only; no pod is replaced for it, and the annotations are not in the spec hash). A key removed
// from the spec stays on the live pods: once on a pod it cannot be told apart from one another
// controller or a person put there, so it goes only when the pod is next replaced (new pods are
// built from the spec alone). The annotations planner (plan/upkeep.go) plans the patches from the
// keys each pod lacks (annotationsBehind, observed), after the pass's steps.

// annotationsToPatch returns the annotations of want that have is missing or holds with another
// value: what a merge patch must set on a pod whose annotations are have. Keys under the
// operator's reserved prefix are never taken from the spec (admission refuses them; this keeps
// a spec that slipped past it from overwriting the operator's own, such as the spec hash).
func annotationsToPatch(want, have map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range want {
		if old, ok := have[k]; (!ok || old != v) && !v1.IsReservedKey(k) {
			out[k] = v
		}
	}
	return out
}

// annotationsBehind are the keys of spec.podAnnotations that pod lacks or holds with another
// value, sorted (fsm.Pod.AnnotationsBehind), nil when none.
func annotationsBehind(vc *v1.ValkeyCluster, pod *corev1.Pod) []string {
	set := annotationsToPatch(vc.Spec.PodAnnotations, pod.Annotations)
	if len(set) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(set))
}

// annotatePod carries out a plan.AnnotatePod: a merge patch of the keys it names, with the values
// of spec.podAnnotations, onto the pod this pass observed. A pod gone meanwhile has nothing to
// bring up to date.
func (r *ValkeyClusterReconciler) annotatePod(ctx context.Context, log *zap.Logger, vc *v1.ValkeyCluster, obs *observation, a plan.AnnotatePod) error {
	pod, ok := obs.pods[a.Pod]
	if !ok {
		return nil
	}
	set := map[string]string{}
	for _, k := range a.Keys {
		if v, ok := vc.Spec.PodAnnotations[k]; ok && !v1.IsReservedKey(k) {
			set[k] = v
		}
	}
	if len(set) == 0 {
		return nil
	}
	// Only these keys, and no resourceVersion: what else changed on the pod meanwhile (its
	// status, another controller's annotations) is not this patch's business. Pod names are
	// random and never reused, so the name is the pod.
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": set}})
	if err != nil {
		return fmt.Errorf("broken invariant: annotations patch: %w", err)
	}
	target := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
	if err := r.Patch(ctx, target, client.RawPatch(types.MergePatchType, body)); err != nil {
		if apierrors.IsNotFound(err) { // gone: nothing to bring up to date
			return nil
		}
		return fmt.Errorf("patch annotations of pod %s: %w", pod.Name, err)
	}
	log.Info(logging.MsgPatchingPodAnnotations, logging.Pod(pod.Name),
		zap.String(logging.FieldKeys, strings.Join(slices.Sorted(maps.Keys(set)), ",")))
	return nil
}
