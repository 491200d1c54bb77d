package config

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/tests/harness"
)

func withPodAnnotations(a map[string]string) harness.ClusterOpt {
	return func(c *v1.ValkeyCluster) { c.Spec.PodAnnotations = a }
}

// annotationsApplied bounds the wait for spec.podAnnotations to reach the live pods: a pass runs
// on the spec change itself, so a few seconds is generous.
const annotationsApplied = 10 * time.Second

// TestPodAnnotationsInPlace: spec.podAnnotations changed on an Active 3x1 reaches every live pod
// in place (the change-impact table: in place). No pod is replaced (same UIDs), added and
// changed keys are on every pod within a few seconds, and a key removed from the spec stays on
// the live pods (it goes when a pod is next replaced). A settled cluster is not patched again.
func TestPodAnnotationsInPlace(t *testing.T) {
	ns := "annotations"
	harness.SetupNamespace(t, ns)
	harness.Create(t, harness.NewImage(ns+"-image"), harness.NewConfig(ns+"-config", ns+"-image"))
	vc := harness.NewCluster(ns, "vc", ns+"-config", withPodAnnotations(map[string]string{
		"example.com/keep": "1", "example.com/change": "a", "example.com/remove": "x"}))
	harness.Create(t, vc)
	if _, err := harness.WaitState(context.Background(), harness.K8s, client.ObjectKeyFromObject(vc), v1.StateActive, harness.FormTimeout); err != nil {
		t.Fatal(err)
	}
	harness.WaitReady(t, vc, 3, 1, nil, harness.FormTimeout)
	before := harness.PodUIDs(t, vc)
	for name, p := range harness.LivePods(t, vc) {
		if p.Annotations["example.com/change"] != "a" || p.Annotations["example.com/remove"] != "x" {
			t.Fatalf("pod %s created without spec.podAnnotations: %v", name, p.Annotations)
		}
	}

	cur := harness.CurrentCluster(t, vc)
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.PodAnnotations = map[string]string{"example.com/keep": "1", "example.com/change": "b", "example.com/add": "new"}
	if err := harness.K8s.Patch(context.Background(), cur, patch); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	want := map[string]string{"example.com/keep": "1", "example.com/change": "b", "example.com/add": "new", "example.com/remove": "x"}
	var problem string
	for {
		problem = ""
		for name, p := range harness.LivePods(t, vc) {
			for k, v := range want {
				if got, ok := p.Annotations[k]; !ok || got != v {
					problem = fmt.Sprintf("pod %s: %s=%q (present %v), want %q", name, k, got, ok, v)
				}
			}
		}
		if problem == "" || time.Since(start) > annotationsApplied {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if problem != "" {
		t.Fatalf("not applied within %s: %s", annotationsApplied, problem)
	}
	t.Logf("annotations on every live pod %s after the spec change", time.Since(start).Round(time.Millisecond))
	if after := harness.PodUIDs(t, vc); !maps.Equal(after, before) {
		t.Errorf("pods replaced for an annotation change: before %v, after %v", before, after)
	}
	harness.WaitReady(t, vc, 3, 1, nil, harness.FormTimeout)

	// One patch per pod, and none once they carry the keys (the passes on the tick and on the
	// pods' own update events find nothing to do).
	harness.PassMark(t, vc)(2)
	patched := map[string]int{}
	for _, l := range harness.ParseLog(t, harness.Op.Logs()) {
		if l.Message() == logging.MsgPatchingPodAnnotations && l.Ref() == "ValkeyCluster.v1alpha1.valkey.gomomento.com/vc."+ns {
			pod, _ := l.Fields[logging.FieldPod].(string)
			patched[pod]++
		}
	}
	if len(patched) != len(before) {
		t.Errorf("%q logged for pods %v, want each of the %d pods", logging.MsgPatchingPodAnnotations, slices.Sorted(maps.Keys(patched)), len(before))
	}
	for pod, n := range patched {
		if n != 1 {
			t.Errorf("pod %s patched %d times, want once", pod, n)
		}
	}
	if after := harness.PodUIDs(t, vc); !maps.Equal(after, before) {
		t.Errorf("pods replaced for an annotation change: before %v, after %v", before, after)
	}
}
