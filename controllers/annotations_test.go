package controllers

import (
	"context"
	"maps"
	"testing"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/resources"
)

func TestAnnotationsToPatch(t *testing.T) {
	hash := v1.AnnotationSpecHash
	for _, tc := range []struct {
		name       string
		want, have map[string]string
		patch      map[string]string
	}{
		{"nothing wanted", nil, map[string]string{"a": "1", hash: "h"}, map[string]string{}},
		{"all there", map[string]string{"a": "1"}, map[string]string{"a": "1", hash: "h"}, map[string]string{}},
		{"added", map[string]string{"a": "1", "b": "2"}, map[string]string{"a": "1"}, map[string]string{"b": "2"}},
		{"changed", map[string]string{"a": "2"}, map[string]string{"a": "1"}, map[string]string{"a": "2"}},
		{"to empty is a change", map[string]string{"a": ""}, map[string]string{"a": "1"}, map[string]string{"a": ""}},
		{"empty value added", map[string]string{"a": ""}, nil, map[string]string{"a": ""}},
		// A key removed from the spec is never in the patch: it stays on the pod.
		{"removed key left alone", map[string]string{"a": "1"}, map[string]string{"a": "1", "gone": "x"}, map[string]string{}},
		{"reserved key never taken from the spec", map[string]string{hash: "forged", "a": "1"}, map[string]string{hash: "h"}, map[string]string{"a": "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := annotationsToPatch(tc.want, tc.have); !maps.Equal(got, tc.patch) {
				t.Errorf("got %v, want %v", got, tc.patch)
			}
		})
	}
}

// The patch touches live pods that lack a key only, merges (a key another controller put on the
// pod stays, as does one removed from the spec), and a second pass writes nothing.
func TestAnnotatePodActions(t *testing.T) {
	vc := newTestCluster()
	vc.Spec.PodAnnotations = map[string]string{"example.com/scrape": "false", "example.com/new": "1"}
	rc := newResolved()
	mk := func(name string, annotations map[string]string) *corev1.Pod {
		p := resources.BuildPod(vc, rc, resources.BuildValkeyNode(vc, rc, name, 0, ""), "h", v1.ZoneSpreadBestEffort)
		p.UID = types.UID("uid-" + name)
		p.Annotations = annotations
		return p
	}
	stale := mk("my-cluster-aaaaa", map[string]string{"example.com/scrape": "true", "example.com/removed": "x", "other.io/x": "y", v1.AnnotationSpecHash: "h"})
	current := mk("my-cluster-bbbbb", map[string]string{"example.com/scrape": "false", "example.com/new": "1"})
	deleting := mk("my-cluster-ccccc", nil)
	patched := 0
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(stale, current, deleting).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			patched++
			return c.Patch(ctx, obj, patch, opts...)
		},
	}).Build()
	r := &ValkeyClusterReconciler{Client: c, APIReader: c}
	obs := func() *observation {
		o := &observation{pods: map[string]*corev1.Pod{}}
		for _, name := range []string{stale.Name, current.Name, deleting.Name} {
			var p corev1.Pod
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: vc.Namespace, Name: name}, &p); err != nil {
				t.Fatal(err)
			}
			o.pods[name] = &p
			o.snapshot.Pods = append(o.snapshot.Pods, fsm.Pod{Name: name, Phase: fsm.PodRunning, Deleting: name == deleting.Name, AnnotationsBehind: annotationsBehind(vc, &p)})
		}
		return o
	}
	if err := upkeepPass(t, r, zap.NewNop(), vc, obs()); err != nil {
		t.Fatal(err)
	}
	if patched != 1 {
		t.Errorf("%d patches, want 1 (the stale pod only)", patched)
	}
	var got corev1.Pod
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(stale), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"example.com/scrape": "false", "example.com/new": "1", "example.com/removed": "x", "other.io/x": "y", v1.AnnotationSpecHash: "h"}
	if !maps.Equal(got.Annotations, want) {
		t.Errorf("annotations %v, want %v", got.Annotations, want)
	}
	if err := upkeepPass(t, r, zap.NewNop(), vc, obs()); err != nil || patched != 1 {
		t.Errorf("second pass: %d patches in all, err %v; want no more", patched, err)
	}
	vc.Spec.PodAnnotations["example.com/new"] = "2"
	invalid := obs()
	invalid.snapshot.SpecProblem = "a spec problem"
	if err := upkeepPass(t, r, zap.NewNop(), vc, invalid); err != nil || patched != 1 {
		t.Errorf("Invalid cluster: %d patches in all, err %v; want none", patched, err)
	}
}
