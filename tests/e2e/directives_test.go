package e2e

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/tests/harness"
)

// TestPassThroughDirectives: directives the original passes through (the rest of the
// cluster-* and tls-* families among them) reach the running node as written, while the
// forced settings keep the operator's values. A value is a valkey.conf value: one that holds
// a space and must reach Valkey as one argument is quoted, as in valkey.conf.
func TestPassThroughDirectives(t *testing.T) {
	lane(t)
	passed := map[string]string{
		"cluster-allow-reads-when-down": "yes",
		"cluster-require-full-coverage": "no",
		"tls-protocols":                 "TLSv1.2 TLSv1.3",
		"loglevel":                      "verbose",
		"save":                          "3600 1 300 100",
	}
	cfg := newConfig("passthrough-config", "passthrough-image")
	for k, v := range passed {
		cfg.Spec.Valkey[k] = v
	}
	cfg.Spec.Valkey["tls-protocols"] = `"TLSv1.2 TLSv1.3"`
	create(t, newImage("passthrough-image"), cfg)
	ns := "passthrough"
	setupNamespace(t, ns)
	vc := newCluster(ns, "vc", "passthrough-config", withShards(1), withReplicas(0))
	create(t, vc)
	got, err := harness.WaitState(context.Background(), k8s, client.ObjectKeyFromObject(vc), v1.StateActive, formTimeout)
	if err != nil {
		t.Fatal(err)
	}
	pods := clusterPods(t, got)
	if len(pods) != 1 {
		t.Fatalf("%d pods, want 1", len(pods))
	}
	for k, want := range passed {
		if v := configGet(t, pods[0], k); v != want {
			t.Errorf("CONFIG GET %s = %q, want %q", k, v, want)
		}
	}
	for k, want := range map[string]string{"port": "6379", "cluster-enabled": "yes", "cluster-node-timeout": "5000", "protected-mode": "no"} {
		if v := configGet(t, pods[0], k); v != want {
			t.Errorf("forced %s = %q, want %q", k, v, want)
		}
	}
}
