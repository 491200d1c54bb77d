package resources

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// Port names, on every pod and on the cluster's Service, as the original names them
// (security/networking.md): a ServiceMonitor or a NetworkPolicy written for the original refers
// to them by these names.
const (
	// ClientPortName names ClientPort.
	ClientPortName = "valkey"
	// BusPortName names BusPort.
	BusPortName = "valkey-bus"
)

// BuildService returns the headless Service that gives every pod a DNS name
// {pod}.{cluster}.{namespace}.svc.cluster.local, ready or not. It selects the cluster's pods by
// app.kubernetes.io/instance, as the original's does (reference/labels-annotations.md), with
// app.kubernetes.io/name=valkey beside it, so that another application's pods labelled with the
// cluster's name as their instance (a Helm release of that name) do not join its DNS records.
func BuildService(vc *v1.ValkeyCluster) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: ObjectMeta(vc, ServiceName(vc)),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 serviceSelector(vc),
			Ports:                    servicePorts(),
		},
	}
}

func serviceSelector(vc *v1.ValkeyCluster) map[string]string {
	return map[string]string{LabelName: LabelNameValue, LabelInstance: vc.Name}
}

func servicePorts() []corev1.ServicePort {
	return []corev1.ServicePort{
		{Name: ClientPortName, Protocol: corev1.ProtocolTCP, Port: ClientPort, TargetPort: intstr.FromInt32(ClientPort)},
		{Name: BusPortName, Protocol: corev1.ProtocolTCP, Port: BusPort, TargetPort: intstr.FromInt32(BusPort)},
	}
}

// ServiceBehind reports whether have, the cluster's Service as stored, lacks the ports or the
// selector BuildService gives it now: a Service an operator before the original's port names
// (client / bus) and selector (valkey.gomomento.com/cluster) created. Its pods carry both
// labels, so bringing it up to date in place changes neither its endpoints nor any pod.
func ServiceBehind(vc *v1.ValkeyCluster, have *corev1.Service) bool {
	if !maps.Equal(have.Spec.Selector, serviceSelector(vc)) {
		return true
	}
	return !slices.EqualFunc(have.Spec.Ports, servicePorts(), func(a, b corev1.ServicePort) bool {
		return a.Name == b.Name && a.Port == b.Port && a.TargetPort == b.TargetPort &&
			(a.Protocol == b.Protocol || a.Protocol == "")
	})
}

// UpdateService brings have's selector and ports to what BuildService builds, leaving the rest
// (clusterIP, labels, owner references) as stored.
func UpdateService(vc *v1.ValkeyCluster, have *corev1.Service) {
	have.Spec.Selector = serviceSelector(vc)
	have.Spec.Ports = servicePorts()
}
