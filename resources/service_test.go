package resources

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// The Service is the original's (security/networking.md, reference/labels-annotations.md): ports
// valkey 6379 and valkey-bus 16379, selecting the cluster's pods by app.kubernetes.io/instance;
// one an older operator created (client / bus, valkey.gomomento.com/cluster) is behind, and
// UpdateService brings it up to date, leaving what the API server set (clusterIP) alone.
func TestServiceIsTheOriginals(t *testing.T) {
	vc := newTestCluster()
	svc := BuildService(vc)
	if got := svc.Spec.Selector; len(got) != 2 || got["app.kubernetes.io/instance"] != vc.Name || got["app.kubernetes.io/name"] != "valkey" {
		t.Errorf("selector %v", got)
	}
	names := map[string]int32{}
	for _, p := range svc.Spec.Ports {
		names[p.Name] = p.Port
	}
	if len(names) != 2 || names["valkey"] != 6379 || names["valkey-bus"] != 16379 {
		t.Errorf("ports %v", names)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("not headless with every address: %+v", svc.Spec)
	}
	// Every pod carries what the Service selects.
	pod := BuildPod(vc, newResolved(), newTestNode(vc, newResolved()), "h", v1.ZoneSpreadBestEffort)
	for k, v := range svc.Spec.Selector {
		if pod.Labels[k] != v {
			t.Errorf("the pod lacks the Service's selector %s=%s: %v", k, v, pod.Labels)
		}
	}
	for i, p := range pod.Spec.Containers[0].Ports {
		if p.Name != svc.Spec.Ports[i].Name || p.ContainerPort != svc.Spec.Ports[i].Port {
			t.Errorf("pod port %+v, Service port %+v", p, svc.Spec.Ports[i])
		}
	}

	stored := BuildService(vc)
	stored.Spec.Ports[0].Protocol, stored.Spec.Ports[1].Protocol = "", "" // as written by the older builder
	if ServiceBehind(vc, stored) {
		t.Error("a Service as built is behind")
	}
	older := &corev1.Service{ObjectMeta: ObjectMeta(vc, ServiceName(vc)), Spec: corev1.ServiceSpec{
		ClusterIP: corev1.ClusterIPNone, ClusterIPs: []string{corev1.ClusterIPNone}, PublishNotReadyAddresses: true,
		Selector: map[string]string{v1.LabelCluster: vc.Name},
		Ports: []corev1.ServicePort{
			{Name: "client", Protocol: corev1.ProtocolTCP, Port: ClientPort, TargetPort: intstr.FromInt32(ClientPort)},
			{Name: "bus", Protocol: corev1.ProtocolTCP, Port: BusPort, TargetPort: intstr.FromInt32(BusPort)},
		},
	}}
	if !ServiceBehind(vc, older) {
		t.Fatal("an older operator's Service is not behind")
	}
	UpdateService(vc, older)
	if ServiceBehind(vc, older) || len(older.Spec.ClusterIPs) != 1 || older.Spec.Ports[0].Name != "valkey" {
		t.Errorf("updated to %+v", older.Spec)
	}
	onlySelector := BuildService(vc)
	onlySelector.Spec.Selector = map[string]string{v1.LabelCluster: vc.Name}
	if !ServiceBehind(vc, onlySelector) {
		t.Error("a Service with the older selector alone is not behind")
	}
}
