package controllers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// podView tells a pod whose Kubernetes node stopped reporting (the node lifecycle controller set
// Ready False, ContainersReady is still the kubelet's True) from a pod whose container is not
// ready, and from a healthy one.
func TestPodViewNodeLost(t *testing.T) {
	pod := func(phase corev1.PodPhase, ready, containersReady corev1.ConditionStatus) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: phase, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: ready}, {Type: corev1.ContainersReady, Status: containersReady}}}}
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"healthy", pod(corev1.PodRunning, corev1.ConditionTrue, corev1.ConditionTrue), false},
		{"node stopped reporting", pod(corev1.PodRunning, corev1.ConditionFalse, corev1.ConditionTrue), true},
		{"container not ready", pod(corev1.PodRunning, corev1.ConditionFalse, corev1.ConditionFalse), false},
		{"pending", pod(corev1.PodPending, corev1.ConditionFalse, corev1.ConditionFalse), false},
		{"failed", pod(corev1.PodFailed, corev1.ConditionFalse, corev1.ConditionTrue), false},
	}
	for _, tc := range tests {
		if got := podView(tc.pod).NodeLost; got != tc.want {
			t.Errorf("%s: NodeLost = %v, want %v", tc.name, got, tc.want)
		}
	}
}
