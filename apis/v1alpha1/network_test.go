package v1alpha1

import (
	"fmt"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCheckNetworkClients(t *testing.T) {
	sel := func(k, v string) *metav1.LabelSelector { return &metav1.LabelSelector{MatchLabels: map[string]string{k: v}} }
	for _, tc := range []struct {
		name   string
		peer   networkingv1.NetworkPolicyPeer
		wantIn string
	}{
		{"pods", networkingv1.NetworkPolicyPeer{PodSelector: sel("app", "checkout")}, ""},
		{"addresses", networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.20.0.0/16", Except: []string{"10.20.1.0/24"}}}, ""},
		{"a label key that is none", networkingv1.NetworkPolicyPeer{PodSelector: sel("not a key", "x")}, "spec.network.clients[0].podSelector"},
		{"a label value that is none", networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("team", "a b")}, "spec.network.clients[0].namespaceSelector"},
		{"no CIDR", networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "banana"}}, `"banana" is not a CIDR`},
		{"too many excepts", networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: excepts(MaxClientExcepts + 1)}}, "spec.network.clients[0].ipBlock.except: 33 CIDRs, at most 32"},
		{"excepts at the bound", networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: excepts(MaxClientExcepts)}}, ""},
		{"too many labels", networkingv1.NetworkPolicyPeer{PodSelector: labels(MaxSelectorTerms + 1)}, "spec.network.clients[0].podSelector: 33 matchLabels and matchExpressions, at most 32"},
		{"too many values", networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: values(MaxExpressionValues + 1)}}}}, "spec.network.clients[0].namespaceSelector.matchExpressions[0].values: 65 values, at most 64"},
		{"an except outside", networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.20.0.0/16", Except: []string{"10.30.0.0/24"}}}, "strictly inside 10.20.0.0/16"},
	} {
		err := CheckNetworkClients(&Network{Clients: []networkingv1.NetworkPolicyPeer{tc.peer}})
		switch {
		case tc.wantIn == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.wantIn != "" && (err == nil || !strings.Contains(err.Error(), tc.wantIn)):
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.wantIn)
		}
	}
	if err := CheckNetworkClients(nil); err != nil {
		t.Error(err)
	}
}

func excepts(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("10.%d.0.0/16", i+1))
	}
	return out
}

func labels(n int) *metav1.LabelSelector {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := range n {
		sel.MatchLabels[fmt.Sprintf("k%d", i)] = "v"
	}
	return sel
}

func values(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("v%d", i))
	}
	return out
}
