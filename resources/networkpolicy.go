package resources

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// OperatorPodLabels are the labels of the operator's own pods that its clusters' NetworkPolicies
// let reach the client port: app: valkey-operator, the label the original's documentation
// selects the operator by (security/networking.md), set by manifests/operator.yaml and chart/.
var OperatorPodLabels = map[string]string{"app": "valkey-operator"}

// namespaceNameLabel is the label Kubernetes sets on every Namespace to its own name.
const namespaceNameLabel = "kubernetes.io/metadata.name"

// BuildNetworkPolicy returns the NetworkPolicy {cluster}-network, owned by vc, for an operator
// whose pods run in operatorNamespace. It selects the cluster's pods and lets in, and only in:
//
//  1. the cluster's own pods, on the client port (replication) and the cluster bus (gossip,
//     failover votes, slot migration on Valkey 9);
//  2. the operator's pods (OperatorPodLabels in operatorNamespace), on the client port: the
//     operator never opens the bus (CLUSTER MEET names the bus port to the node, which dials
//     it);
//  3. spec.network.clients on the client port, or every source when there are none: the
//     client port is as open as Kubernetes leaves a pod no policy selects.
//
// Ports are numbers, not the Service's or the pod's port names, which the operator may rename.
// Every other port and source is refused, the bus above all: it has no authentication, and a
// node that reaches it can join the cluster (CLUSTER MEET) and claim its slots.
//
// Pods are selected by the cluster label, which a team can put on a pod of its own in the same
// namespace; what that means, and how a platform closes it, is in docs/user/network-policy.md.
func BuildNetworkPolicy(vc *v1.ValkeyCluster, operatorNamespace string) *networkingv1.NetworkPolicy {
	pods := metav1.LabelSelector{MatchLabels: map[string]string{v1.LabelCluster: vc.Name}}
	client := []networkingv1.NetworkPolicyPort{tcpPort(ClientPort)}
	var clients []networkingv1.NetworkPolicyPeer
	if vc.Spec.Network != nil {
		for _, p := range vc.Spec.Network.Clients {
			clients = append(clients, *p.DeepCopy())
		}
	}
	return &networkingv1.NetworkPolicy{
		ObjectMeta: ObjectMeta(vc, v1.NetworkPolicyName(vc.Name)),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: *pods.DeepCopy(),
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{
				{
					From:  []networkingv1.NetworkPolicyPeer{{PodSelector: pods.DeepCopy()}},
					Ports: []networkingv1.NetworkPolicyPort{tcpPort(ClientPort), tcpPort(BusPort)},
				},
				{
					From: []networkingv1.NetworkPolicyPeer{{
						NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{namespaceNameLabel: operatorNamespace}},
						PodSelector:       &metav1.LabelSelector{MatchLabels: OperatorPodLabels},
					}},
					Ports: client,
				},
				// No From: every source.
				{From: clients, Ports: []networkingv1.NetworkPolicyPort{tcpPort(ClientPort)}},
			},
		},
	}
}

func tcpPort(port int32) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(port))}
}

// PolicyMode is whether vc keeps its NetworkPolicy: spec.network.policy, else the operator's
// default def (defaultNetworkPolicy), else Enabled.
func PolicyMode(vc *v1.ValkeyCluster, def v1.NetworkPolicyMode) v1.NetworkPolicyMode {
	if n := vc.Spec.Network; n != nil && n.Policy.IsValid() {
		return n.Policy
	}
	if def.IsValid() {
		return def
	}
	return v1.NetworkPolicyEnabled
}
