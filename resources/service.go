package resources

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// BuildService returns the headless Service that gives every pod a DNS name
// {pod}.{cluster}.{namespace}.svc.cluster.local, ready or not.
func BuildService(vc *v1.ValkeyCluster) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: ObjectMeta(vc, ServiceName(vc)),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 map[string]string{v1.LabelCluster: vc.Name},
			Ports: []corev1.ServicePort{
				{Name: "client", Port: ClientPort, TargetPort: intstr.FromInt32(ClientPort)},
				{Name: "bus", Port: BusPort, TargetPort: intstr.FromInt32(BusPort)},
			},
		},
	}
}
