package simkubelet

import (
	"context"
	"net"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gomomento/valkey-operator/valkey"
	"github.com/gomomento/valkey-operator/valkey/valkeytest"
)

// TestLoopbackIP: addresses count up through 127.10.0.0/16 and on, never .0 or .255.
func TestLoopbackIP(t *testing.T) {
	for n, want := range map[int]string{1: "127.10.0.1", 254: "127.10.0.254", 255: "127.10.1.1", 254*256 + 1: "127.11.0.1"} {
		if got := loopbackIP(n); got != want {
			t.Errorf("loopbackIP(%d) = %s, want %s", n, got, want)
		}
	}
}

// TestPodNode: a pod's simulated node listens on the pod's own address and answers as a node
// of its own; a pod of the same name but another UID gets a new address and a fresh node, and
// a released pod's address refuses connections.
func TestPodNode(t *testing.T) {
	fleet := valkeytest.New()
	l, err := net.Listen("tcp", ":"+Port)
	if err != nil {
		t.Skipf("port %s is taken (a simulated fleet runs on this machine): %v", Port, err)
	}
	defer func() { _ = l.Close() }()
	go func() { _ = fleet.Serve(l) }()
	k := &Kubelet{fleet: fleet, running: map[string]*simPod{}}
	p, err := k.start("ns/vc-0", "uid-1")
	if err != nil {
		t.Fatal(err)
	}
	addr := p.ip + ":6379"
	v := valkey.Observe(context.Background(), []string{addr}, valkey.Credentials{})[0]
	if !v.Reachable || v.ID == "" || v.ClusterInfo["cluster_known_nodes"] != "1" {
		t.Fatalf("observed %+v, want a node of its own", v)
	}
	if again, _ := k.start("ns/vc-0", "uid-1"); again != p {
		t.Fatal("the same pod got a second node")
	}
	q, err := k.start("ns/vc-0", "uid-2")
	if err != nil || q.ip == p.ip {
		t.Fatalf("a new pod of the same name: %v, %v; want a new address", q, err)
	}
	k.release("ns/vc-0", "")
	if v := valkey.Observe(context.Background(), []string{q.ip + ":6379"}, valkey.Credentials{})[0]; v.Reachable {
		t.Fatal("a released pod's node still answers")
	}
}

// TestRunning: the status reads as Running and Ready to the operator's pod view.
func TestRunning(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "valkey", Image: "valkey/valkey:8.0.1"}}}}
	got := running(pod, "127.10.0.7")
	if got.Status.Phase != corev1.PodRunning || got.Status.PodIP != "127.10.0.7" || len(got.Status.ContainerStatuses) != 1 || !got.Status.ContainerStatuses[0].Ready {
		t.Fatalf("status %+v", got.Status)
	}
	if pod.Status.Phase != "" {
		t.Fatal("the pod given was changed")
	}
}
