package controllers

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/resources"
)

// Against the (fake) API server: the first pass creates the policy, a second writes nothing, a
// hand edit (a rule that opens everything, a label removed) is patched back, a deletion is
// undone, spec.network.clients is followed, and turning the policy off deletes it.
func TestNetworkPolicyActions(t *testing.T) {
	vc := newTestCluster()
	var writes []string
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(vc).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			writes = append(writes, "create "+obj.GetName())
			return c.Create(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			writes = append(writes, "patch "+obj.GetName())
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			writes = append(writes, "delete "+obj.GetName())
			return c.Delete(ctx, obj, opts...)
		},
	}).Build()
	r := &ValkeyClusterReconciler{Client: c, APIReader: c, OperatorNamespace: "ops"}
	core, logs := observer.New(zap.InfoLevel)
	log := zap.New(core)
	pass := func() []string {
		t.Helper()
		writes = nil
		obs := &observation{snapshot: fsm.Snapshot{Shards: int(vc.Spec.Shards), ReplicasPerShard: int(vc.Spec.ReplicasPerShard)}}
		if err := r.observeNetworkPolicy(context.Background(), vc, obs); err != nil {
			t.Fatal(err)
		}
		if err := upkeepPass(t, r, log, vc, obs); err != nil {
			t.Fatal(err)
		}
		return writes
	}
	key := client.ObjectKey{Namespace: vc.Namespace, Name: "my-cluster-network"}
	get := func() *networkingv1.NetworkPolicy {
		t.Helper()
		var np networkingv1.NetworkPolicy
		if err := c.Get(context.Background(), key, &np); err != nil {
			t.Fatal(err)
		}
		return &np
	}

	if got := pass(); !slices.Equal(got, []string{"create my-cluster-network"}) {
		t.Fatalf("first pass: %v", got)
	}
	if n := logs.FilterMessage(logging.MsgCreatingNetworkPolicy).Len(); n != 1 {
		t.Errorf("%d %q lines, want 1", n, logging.MsgCreatingNetworkPolicy)
	}
	if ns := get().Spec.Ingress[1].From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"]; ns != "ops" {
		t.Errorf("the operator's rule selects namespace %q, want the operator's own, ops", ns)
	}
	if got := pass(); len(got) != 0 {
		t.Errorf("second pass wrote %v", got)
	}
	// A team opens the bus to everyone and removes the cluster label (the cache would lose it).
	np := get()
	np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{})
	delete(np.Labels, v1.LabelCluster)
	np.Labels["team"] = "theirs"
	if err := c.Update(context.Background(), np); err != nil {
		t.Fatal(err)
	}
	if got := pass(); !slices.Equal(got, []string{"patch my-cluster-network"}) {
		t.Errorf("after a hand edit: %v", got)
	}
	np = get()
	if len(np.Spec.Ingress) != 3 || np.Labels[v1.LabelCluster] != vc.Name || np.Labels["team"] != "theirs" {
		t.Errorf("after the edit was undone: %d rules, labels %v; want 3 rules, the cluster label back, the team's kept", len(np.Spec.Ingress), np.Labels)
	}
	if err := c.Delete(context.Background(), np); err != nil {
		t.Fatal(err)
	}
	if got := pass(); !slices.Equal(got, []string{"create my-cluster-network"}) {
		t.Errorf("after a deletion: %v", got)
	}
	vc.Spec.Network = &v1.Network{Clients: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}}}}
	if got := pass(); !slices.Equal(got, []string{"patch my-cluster-network"}) {
		t.Errorf("clients set: %v", got)
	}
	if from := get().Spec.Ingress[2].From; len(from) != 1 || from[0].IPBlock == nil || from[0].IPBlock.CIDR != "10.0.0.0/8" {
		t.Errorf("client rule from %v, want the spec's ipBlock", from)
	}
	// A client entry the API server would refuse: nothing is written (the cluster is Invalid).
	vc.Spec.Network.Clients[0].IPBlock.CIDR = "banana"
	if got := pass(); len(got) != 0 {
		t.Errorf("a refused ipBlock: %v", got)
	}
	vc.Spec.Network.Clients[0].IPBlock.CIDR = "10.0.0.0/8"
	vc.Spec.Network.Policy = v1.NetworkPolicyDisabled
	if got := pass(); !slices.Equal(got, []string{"delete my-cluster-network"}) {
		t.Errorf("turned off: %v", got)
	}
	if got := pass(); len(got) != 0 {
		t.Errorf("turned off, second pass: %v", got)
	}
	// The operator-wide default, where the spec says nothing.
	vc.Spec.Network = nil
	r.DefaultNetworkPolicy = v1.NetworkPolicyDisabled
	if got := pass(); len(got) != 0 {
		t.Errorf("off by default: %v", got)
	}
	r.DefaultNetworkPolicy = ""
	if got := pass(); !slices.Equal(got, []string{"create my-cluster-network"}) {
		t.Errorf("default unset (Enabled): %v", got)
	}
}

// A NetworkPolicy of the cluster's name that it does not control is never touched: the
// observation leaves the policy unknown (nothing is planned) and says why, and the next pass's
// recheck makes the cluster Invalid naming it. Turned off, the name is no longer the cluster's
// concern: the recheck drops it.
func TestForeignNetworkPolicyIsLeftAlone(t *testing.T) {
	vc := newTestCluster()
	theirs := resources.BuildNetworkPolicy(vc, "valkey-operator")
	theirs.OwnerReferences = nil
	theirs.Labels = nil // not in the operator's cache: found by a read of the API server
	theirs.Spec.Ingress = nil
	var writes int
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(vc, theirs).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			writes++
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			writes++
			return c.Delete(ctx, obj, opts...)
		},
	}).Build()
	r := &ValkeyClusterReconciler{Client: c, APIReader: c}
	obs := &observation{}
	err := r.observeNetworkPolicy(context.Background(), vc, obs)
	var sp *SpecProblem
	if !errors.As(err, &sp) || !strings.Contains(sp.Reason, "NetworkPolicy my-cluster-network is not controlled by ValkeyCluster my-cluster") {
		t.Fatalf("a foreign policy: %v", err)
	}
	if obs.snapshot.NetworkPolicy.Known {
		t.Fatal("the policy known beside a foreign one")
	}
	if err := upkeepPass(t, r, zap.NewNop(), vc, obs); err != nil || writes != 0 {
		t.Fatalf("a pass beside a foreign policy: %v, %d writes", err, writes)
	}
	if err := r.recheckForeign(context.Background(), vc); !errors.As(err, &sp) {
		t.Fatalf("next pass's recheck: %v, want the spec problem", err)
	}
	vc.Spec.Network = &v1.Network{Policy: v1.NetworkPolicyDisabled}
	if err := r.recheckForeign(context.Background(), vc); err != nil {
		t.Fatalf("turned off: %v", err)
	}
	obs = &observation{}
	if err := r.observeNetworkPolicy(context.Background(), vc, obs); err != nil || !obs.snapshot.NetworkPolicy.Known {
		t.Fatalf("turned off: %v, known %v", err, obs.snapshot.NetworkPolicy.Known)
	}
	if err := upkeepPass(t, r, zap.NewNop(), vc, obs); err != nil || writes != 0 {
		t.Fatalf("turned off beside a foreign policy: %v, %d writes", err, writes)
	}
}
