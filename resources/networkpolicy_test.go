package resources

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// The policy is pinned like the budget: its selectors must keep matching the pods' labels, and
// a change to what it lets in is a reviewed decision.
func TestBuildNetworkPolicyGolden(t *testing.T) {
	vc := newTestCluster()
	np := BuildNetworkPolicy(vc, "valkey-operator")
	golden(t, "networkpolicy.yaml", marshal(t, np))

	if np.Name != "my-cluster-network" || !metav1.IsControlledBy(np, vc) {
		t.Errorf("name %s, owners %v: want my-cluster-network controlled by the cluster", np.Name, np.OwnerReferences)
	}
	// The policy applies to, and the bus rule lets in, exactly the pods BuildPod makes for this
	// cluster, every shard; not another cluster's.
	rc := newResolved()
	own := BuildPod(vc, rc, BuildValkeyNode(vc, rc, "my-cluster-00000", 2, ""), "h", v1.ZoneSpreadBestEffort)
	other := newTestCluster()
	other.Name = "my-cluster-2"
	stranger := BuildPod(other, rc, BuildValkeyNode(other, rc, "my-cluster-2-00000", 2, ""), "h", v1.ZoneSpreadBestEffort)
	for _, sel := range []metav1.LabelSelector{np.Spec.PodSelector, *np.Spec.Ingress[0].From[0].PodSelector} {
		s, err := metav1.LabelSelectorAsSelector(&sel)
		if err != nil {
			t.Fatal(err)
		}
		if !s.Matches(labels.Set(own.Labels)) || s.Matches(labels.Set(stranger.Labels)) {
			t.Errorf("selector %v: matches own pod %v, another cluster's %v; want true, false", sel, s.Matches(labels.Set(own.Labels)), s.Matches(labels.Set(stranger.Labels)))
		}
	}
	// Only the first rule opens the bus.
	for i, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			if p.Port.IntValue() == BusPort && i != 0 {
				t.Errorf("rule %d opens the bus to %v", i, rule.From)
			}
		}
	}
	// No clients: the last rule lets every source reach the client port.
	if last := np.Spec.Ingress[2]; last.From != nil || len(last.Ports) != 1 || last.Ports[0].Port.IntValue() != ClientPort {
		t.Errorf("client rule %+v: want every source on %d", last, ClientPort)
	}
}

func TestBuildNetworkPolicyClients(t *testing.T) {
	vc := newTestCluster()
	peer := networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "app"}}}
	vc.Spec.Network = &v1.Network{Clients: []networkingv1.NetworkPolicyPeer{peer}}
	np := BuildNetworkPolicy(vc, "ops")
	got := np.Spec.Ingress[2]
	if len(got.From) != 1 || got.From[0].PodSelector.MatchLabels["role"] != "app" {
		t.Fatalf("client rule from %v, want the spec's peer", got.From)
	}
	// A copy: the policy never shares memory with the cluster's spec.
	got.From[0].PodSelector.MatchLabels["role"] = "changed"
	if peer.PodSelector.MatchLabels["role"] != "app" {
		t.Error("the built policy shares the spec's selector")
	}
	if ns := np.Spec.Ingress[1].From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"]; ns != "ops" {
		t.Errorf("operator rule selects namespace %q, want ops", ns)
	}
}
