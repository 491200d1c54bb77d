package config

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
	passed := map[string]string{
		"cluster-allow-reads-when-down": "yes",
		"cluster-require-full-coverage": "no",
		"tls-protocols":                 "TLSv1.2 TLSv1.3",
		"loglevel":                      "verbose",
		"save":                          "3600 1 300 100",
	}
	cfg := harness.NewConfig("passthrough-config", "passthrough-image")
	for k, v := range passed {
		cfg.Spec.Valkey[k] = v
	}
	cfg.Spec.Valkey["tls-protocols"] = `"TLSv1.2 TLSv1.3"`
	harness.Create(t, harness.NewImage("passthrough-image"), cfg)
	ns := "passthrough"
	harness.SetupNamespace(t, ns)
	vc := harness.NewCluster(ns, "vc", "passthrough-config", harness.WithShards(1), harness.WithReplicas(0))
	harness.Create(t, vc)
	got, err := harness.WaitState(context.Background(), harness.K8s, client.ObjectKeyFromObject(vc), v1.StateActive, harness.FormTimeout)
	if err != nil {
		t.Fatal(err)
	}
	pods := harness.Pods(t, got)
	if len(pods) != 1 {
		t.Fatalf("%d pods, want 1", len(pods))
	}
	for k, want := range passed {
		if v := harness.ConfigGet(t, pods[0], k); v != want {
			t.Errorf("CONFIG GET %s = %q, want %q", k, v, want)
		}
	}
	for k, want := range map[string]string{"port": "6379", "cluster-enabled": "yes", "cluster-node-timeout": "5000", "protected-mode": "no"} {
		if v := harness.ConfigGet(t, pods[0], k); v != want {
			t.Errorf("forced %s = %q, want %q", k, v, want)
		}
	}
}
