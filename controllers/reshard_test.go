package controllers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/valkey"
	"github.com/gomomento/valkey-operator/valkey/mover"
)

// What the mover learns from Kubernetes: a pod's IP as observed ("" when it has none or is not
// known), and a node's pool from the maxclients its ValkeyNode records (an unreadable or unset
// value is Valkey's default).
func TestSlotMoverReadsThePassObservation(t *testing.T) {
	node := func(maxclients string) *v1.ValkeyNode {
		vn := &v1.ValkeyNode{}
		if maxclients != "" {
			vn.Spec.ValkeySettings = map[string]string{"maxclients": maxclients}
		}
		return vn
	}
	obs := &observation{
		pods: map[string]*corev1.Pod{
			"a": {Status: corev1.PodStatus{PodIP: "10.0.0.1"}},
			"b": {},
		},
		nodes: map[string]*v1.ValkeyNode{"a": node(" 200 "), "b": node("lots"), "c": node("48"), "d": node("")},
	}
	r := &ValkeyClusterReconciler{}
	m := r.slotMover(obs, nil, valkey.Credentials{Username: "op"}, valkey.Credentials{Username: "mig"})
	for pod, want := range map[string]string{"a": "10.0.0.1", "b": "", "x": ""} {
		if got := m.IP(pod); got != want {
			t.Errorf("IP(%s) = %q, want %q", pod, got, want)
		}
	}
	for pod, want := range map[string]int{"a": 25, "b": mover.PoolFor(0), "c": 6, "d": mover.PoolFor(0), "x": mover.PoolFor(0)} {
		if got := m.Pool(pod); got != want {
			t.Errorf("Pool(%s) = %d, want %d", pod, got, want)
		}
	}
	if m.Control.Username != "op" || m.Migration.Username != "mig" {
		t.Errorf("credentials: control %q, migration %q", m.Control.Username, m.Migration.Username)
	}
}
