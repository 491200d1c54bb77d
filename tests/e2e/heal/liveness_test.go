package heal

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/tests/harness"
)

// TestHungNodeIsReplaced: a node whose valkey-server hangs (SIGSTOP: its sockets stay open,
// nothing answers, the process never exits) is turned into a dead pod by its liveness probe
// (the authenticated PING of concepts/pod-management.md), the pod goes Failed, the operator
// replaces it, and the cluster is whole again with every acknowledged key.
func TestHungNodeIsReplaced(t *testing.T) {
	ns := "hung"
	vc := harness.ActiveCluster(t, ns, 1, 1)
	keys := harness.WriteAcknowledged(t, vc, 50)
	victim := harness.PodWithRole(t, vc, v1.NodeRoleReplica)
	var pod corev1.Pod
	if err := harness.K8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: victim}, &pod); err != nil {
		t.Fatal(err)
	}
	if pod.Spec.Containers[0].LivenessProbe == nil || pod.Spec.Containers[0].ReadinessProbe != nil {
		t.Fatalf("pod probes: liveness %v, readiness %v; want a liveness probe only",
			pod.Spec.Containers[0].LivenessProbe, pod.Spec.Containers[0].ReadinessProbe)
	}

	if err := harness.Cluster.Kubelet.FreezePod(ns, victim); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	// The probe kills after five misses 10 s apart (resources/probe.go): about 50 s.
	harness.WaitFor(t, "the frozen pod killed by its liveness probe", 2*time.Minute, func() string {
		err := harness.K8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: victim}, &pod)
		if err != nil {
			t.Fatalf("the frozen pod went away before it was seen Failed: %v", err)
		}
		if pod.Status.Phase == corev1.PodFailed {
			return ""
		}
		return "the frozen pod is still " + string(pod.Status.Phase)
	})
	t.Logf("frozen → pod Failed in %s", time.Since(frozen).Round(100*time.Millisecond))
	if term := pod.Status.ContainerStatuses[0].State.Terminated; term == nil || term.Message != "liveness probe failed" {
		t.Fatalf("the pod failed, but not by its liveness probe: %+v", pod.Status.ContainerStatuses[0].State)
	}

	healed := harness.WaitHealed(t, vc, victim, 2)
	t.Logf("frozen → healed in %s", time.Since(frozen).Round(100*time.Millisecond))
	harness.VerifyValkey(t, healed, 1, 1)
	harness.ReadBack(t, healed, keys)
}
