package compat

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/tests/harness"
)

// TestRestrictedNamespace: the Valkey pods pass the restricted Pod Security Standard, which the
// original's (no securityContext) fail: in a namespace that enforces it, a 1×1 forms and is
// Ready, while a pod as the original builds it (no securityContext) is refused there, which
// shows the API server enforces the standard.
func TestRestrictedNamespace(t *testing.T) {
	const ns = "restricted"
	ctx := context.Background()
	if err := harness.K8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = harness.K8s.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	unconfined := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "as-the-original"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "valkey", Image: "valkey/valkey:8.0.1", Command: []string{"valkey-server"}}}}}
	if err := harness.K8s.Create(ctx, unconfined); err == nil || !strings.Contains(err.Error(), "restricted") {
		t.Fatalf("a pod without a securityContext was not refused by the restricted standard: %v", err)
	}
	harness.Create(t, harness.NewImage(ns+"-image"), harness.NewConfig(ns+"-config", ns+"-image"))
	vc := harness.NewCluster(ns, "vc", ns+"-config", harness.WithShards(1), harness.WithReplicas(1))
	harness.Create(t, vc)
	if _, err := harness.WaitState(ctx, harness.K8s, client.ObjectKeyFromObject(vc), v1.StateActive, harness.FormTimeout); err != nil {
		t.Fatal(err)
	}
	harness.WaitReady(t, vc, 1, 1, nil, harness.FormTimeout)
	for _, p := range harness.Pods(t, vc) {
		if sc := p.Spec.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 999 {
			t.Errorf("pod %s runs as %+v", p.Name, sc)
		}
	}
}
