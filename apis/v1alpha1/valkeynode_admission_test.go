package v1alpha1_test

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// node is a ValkeyNode manifest as the operator writes it (the reference's example), named
// name, with extra spec lines.
func node(name, extraSpec string) string {
	return `
apiVersion: valkey.gomomento.com/v1alpha1
kind: ValkeyNode
metadata:
  name: ` + name + `
  namespace: my-app
spec:
  clusterName: my-cluster
  image: valkey/valkey:9.0.0
  cpu: "1"
  memory: "2Gi"
  shardIndex: 0
  placement:
    zones:
      - us-east-1a
      - us-east-1b
    zoneSpread: required
  valkeySettings:
    cluster-enabled: "yes"
    maxmemory: "1500mb"
` + extraSpec
}

func TestAdmissionValkeyNode(t *testing.T) {
	runAdmissionCases(t, []admissionCase{
		{name: "the reference example", manifest: node("my-cluster-3f9a1", "  tlsSecret: my-cluster-tls\n  lifecycle: Active\n")},
		{name: "joining", manifest: node("my-cluster-8c04d", "  lifecycle: Joining\n")},
		{name: "leaving", manifest: node("my-cluster-b52e7", "  lifecycle: Leaving\n")},
		{name: "an unknown lifecycle", manifest: node("my-cluster-00001", "  lifecycle: Draining\n"),
			wantErr: `Unsupported value: "Draining"`},
		{name: "a negative shard index", manifest: strings.Replace(node("my-cluster-00002", ""), "shardIndex: 0", "shardIndex: -1", 1),
			wantErr: "should be greater than or equal to 0"},
		{name: "the last shard index", manifest: strings.Replace(node("my-cluster-00006", ""), "shardIndex: 0", "shardIndex: 16383", 1)},
		{name: "a shard index past the slots", manifest: strings.Replace(node("my-cluster-00007", ""), "shardIndex: 0", "shardIndex: 16384", 1),
			wantErr: "spec.shardIndex in body should be less than or equal to 16383"},
		{name: "a shard index past int32", manifest: strings.Replace(node("my-cluster-00008", ""), "shardIndex: 0", "shardIndex: 2147483648", 1),
			wantErr: "spec.shardIndex in body should be less than or equal to 16383"},
		{name: "no cluster name", manifest: strings.Replace(node("my-cluster-00003", ""), "  clusterName: my-cluster\n", "", 1),
			wantErr: "spec.clusterName: Required value"},
		{name: "no image", manifest: strings.Replace(node("my-cluster-00004", ""), "  image: valkey/valkey:9.0.0\n", "", 1),
			wantErr: "spec.image: Required value"},
		{name: "a setting over two lines", manifest: node("my-cluster-00005", "    save: \"\\ninclude /tmp/x\"\n"),
			wantErr: "valkey directive values must be one line"},
	})
}

// The defaults of the reference: lifecycle Active, valkeySettings {}.
func TestAdmissionValkeyNodeDefaults(t *testing.T) {
	c := apiServer(t)
	ensureNamespace(t, c)
	obj := decode(t, strings.Replace(node("my-cluster-d0000", ""), "  valkeySettings:\n    cluster-enabled: \"yes\"\n    maxmemory: \"1500mb\"\n", "", 1))[0]
	if err := c.Create(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(t.Context(), obj) })
	var got v1alpha1.ValkeyNode
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(obj), &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Lifecycle != v1alpha1.LifecycleActive {
		t.Errorf("lifecycle defaulted to %q, want Active", got.Spec.Lifecycle)
	}
	if got.Spec.ValkeySettings == nil || len(got.Spec.ValkeySettings) != 0 {
		t.Errorf("valkeySettings defaulted to %#v, want {}", got.Spec.ValkeySettings)
	}
}

// Every spec field but lifecycle is immutable: a changed config means a new node.
func TestAdmissionValkeyNodeIsImmutableButLifecycle(t *testing.T) {
	c := apiServer(t)
	ensureNamespace(t, c)
	const immutable = "ValkeyNode spec is immutable except lifecycle"
	tests := []struct {
		name    string
		extra   string
		patch   string
		wantErr string
		want    v1alpha1.NodeLifecycle // the lifecycle read back after an accepted patch
	}{
		{name: "Joining to Active", extra: "  lifecycle: Joining\n", patch: `{"spec":{"lifecycle":"Active"}}`, want: v1alpha1.LifecycleActive},
		{name: "Active to Leaving", patch: `{"spec":{"lifecycle":"Leaving"}}`, want: v1alpha1.LifecycleLeaving},
		{name: "labels may change", patch: `{"metadata":{"labels":{"valkey.gomomento.com/join-type":null}}}`, want: v1alpha1.LifecycleActive},
		{name: "lifecycle stays an enum", patch: `{"spec":{"lifecycle":"Gone"}}`, wantErr: `Unsupported value: "Gone"`},
		{name: "clusterName", patch: `{"spec":{"clusterName":"other"}}`, wantErr: immutable},
		{name: "image", patch: `{"spec":{"image":"valkey/valkey:9.1.2"}}`, wantErr: immutable},
		{name: "shardIndex", patch: `{"spec":{"shardIndex":1}}`, wantErr: immutable},
		{name: "cpu resized", patch: `{"spec":{"cpu":"2"}}`, want: v1alpha1.LifecycleActive},
		{name: "memory resized", patch: `{"spec":{"memory":"4Gi"}}`, want: v1alpha1.LifecycleActive},
		{name: "removing memory", patch: `{"spec":{"memory":null}}`, wantErr: immutable},
		{name: "adding tlsSecret", patch: `{"spec":{"tlsSecret":"my-cluster-tls"}}`, wantErr: immutable},
		{name: "a restart setting", patch: `{"spec":{"valkeySettings":{"cluster-enabled":"no"}}}`, wantErr: immutable},
		{name: "a new restart setting", patch: `{"spec":{"valkeySettings":{"appendonly":"yes"}}}`, wantErr: immutable},
		{name: "removing a restart setting", patch: `{"spec":{"valkeySettings":{"cluster-enabled":null}}}`, wantErr: immutable},
		// The settings applied live are recorded once they run (package liveconf).
		{name: "a live setting", patch: `{"spec":{"valkeySettings":{"maxmemory":"1gb"}}}`, want: v1alpha1.LifecycleActive},
		{name: "a new live setting", patch: `{"spec":{"valkeySettings":{"maxmemory-policy":"allkeys-lru","hz":"20"}}}`, want: v1alpha1.LifecycleActive},
		{name: "removing a live setting", patch: `{"spec":{"valkeySettings":{"maxmemory":null}}}`, want: v1alpha1.LifecycleActive},
		{name: "a live and a restart setting", patch: `{"spec":{"valkeySettings":{"maxmemory":"1gb","appendonly":"yes"}}}`, wantErr: immutable},
		{name: "placement", patch: `{"spec":{"placement":{"zoneSpread":"bestEffort"}}}`, wantErr: immutable},
		{name: "removing placement", patch: `{"spec":{"placement":null}}`, wantErr: immutable},
		{name: "lifecycle together with image", patch: `{"spec":{"lifecycle":"Leaving","image":"valkey/valkey:9.1.2"}}`, wantErr: immutable},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			text := node(fmt.Sprintf("my-cluster-u%04d", i), tc.extra)
			if tc.name == "labels may change" {
				text = strings.Replace(text, "  namespace: my-app\n", "  namespace: my-app\n  labels:\n    valkey.gomomento.com/join-type: shard\n", 1)
			}
			obj := decode(t, text)[0]
			if err := c.Create(t.Context(), obj); err != nil {
				t.Fatalf("create: %v", err)
			}
			t.Cleanup(func() { _ = c.Delete(t.Context(), obj) })
			err := c.Patch(t.Context(), obj, client.RawPatch(types.MergePatchType, []byte(tc.patch)))
			checkAdmission(t, obj, err, tc.wantErr)
			if tc.wantErr == "" {
				checkPatched(t, c, obj, tc.want)
			}
		})
	}
}

// checkPatched reads obj back: an accepted patch must have been stored, not dropped.
func checkPatched(t *testing.T, c client.Client, obj *unstructured.Unstructured, want v1alpha1.NodeLifecycle) {
	t.Helper()
	var got v1alpha1.ValkeyNode
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(obj), &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Lifecycle != want {
		t.Errorf("lifecycle %q after the patch, want %q", got.Spec.Lifecycle, want)
	}
	if _, ok := got.Labels[v1alpha1.LabelJoinType]; ok {
		t.Errorf("join-type label still present after the patch")
	}
}
