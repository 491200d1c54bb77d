package controllers

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// The TLS controller hears of a rotation from the cluster controller's reads of the Secret (no
// watch follows a Secret the operator does not create): a pass for the cluster on each change of
// the Secret's resourceVersion, none for the first sighting or a Secret that stayed the same.
func TestTLSSecretSeen(t *testing.T) {
	r := &TLSReconciler{rotations: make(chan event.GenericEvent, 4)}
	key := types.NamespacedName{Namespace: "team", Name: "vc"}
	for _, rv := range []string{"1", "1", "2", "2", "3"} {
		r.SecretSeen(key, rv)
	}
	r.SecretSeen(types.NamespacedName{Namespace: "team", Name: "other"}, "9")
	if len(r.rotations) != 2 {
		t.Fatalf("%d passes started, want 2 (resourceVersion 1 -> 2 -> 3)", len(r.rotations))
	}
	if e := <-r.rotations; e.Object.GetName() != "vc" || e.Object.GetNamespace() != "team" {
		t.Fatalf("a pass for %s/%s", e.Object.GetNamespace(), e.Object.GetName())
	}
}
