package kubelet_test

import (
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestResolvConf: a pod's containers read the resolv.conf the kubelet wrote for the pod (here
// dnsPolicy None with a dnsConfig), mounted over /etc/resolv.conf in their own mount namespace
// only: the host's file is unchanged. This kubelet has no Config.ClusterDNS, so a ClusterFirst
// pod keeps the host's file, as a kubelet without --cluster-dns does. (With CoreDNS, in the
// local cluster: tests/localcluster/dns_test.go.)
func TestResolvConf(t *testing.T) {
	requireSetup(t)
	ns := newNamespace(t)
	host, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		t.Fatal(err)
	}
	ndots := "2"
	pods := map[string]corev1.PodSpec{
		"dns-none": {DNSPolicy: corev1.DNSNone, DNSConfig: &corev1.PodDNSConfig{
			Nameservers: []string{"192.0.2.53"}, Searches: []string{"x.example"},
			Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: &ndots}}}},
		"dns-cluster-first": {},
	}
	want := map[string]string{
		"dns-none":          "nameserver 192.0.2.53\nsearch x.example\noptions ndots:2\n",
		"dns-cluster-first": string(host),
	}
	for name, spec := range pods {
		spec.NodeName, spec.RestartPolicy = "kt-c", corev1.RestartPolicyNever
		spec.Containers = []corev1.Container{{Name: "c", Image: "busybox", Command: []string{"cat", "/etc/resolv.conf"}}}
		createPod(t, ns, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec})
	}
	for name := range pods {
		waitPod(t, ns, name, 20*time.Second, "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
		path, err := kl.LogPath(ns, name, "c")
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(path); string(got) != want[name] {
			t.Errorf("%s: /etc/resolv.conf in the pod:\n%s\nwant:\n%s", name, got, want[name])
		}
	}
	if now, _ := os.ReadFile("/etc/resolv.conf"); string(now) != string(host) {
		t.Errorf("the host's resolv.conf changed:\n%s\nwas:\n%s", now, host)
	}
}
