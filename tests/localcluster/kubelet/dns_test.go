package kubelet

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPodResolvConf: a pod's resolv.conf follows the kubelet's rules for each dnsPolicy
// (pkg/kubelet/network/dns), with spec.dnsConfig merged in.
func TestPodResolvConf(t *testing.T) {
	host := parseResolvConf([]byte("# host\nnameserver 10.255.255.53\nnameserver 10.255.255.54\nsearch corp.example\noptions timeout:2 ndots:1\n"))
	two := "2"
	cases := []struct {
		name       string
		clusterDNS string
		policy     corev1.DNSPolicy
		config     *corev1.PodDNSConfig
		want       string // "" = the host's file stays
	}{
		{name: "cluster first is the default", clusterDNS: "10.246.0.1",
			want: "nameserver 10.246.0.1\nsearch team.svc.cluster.local svc.cluster.local cluster.local corp.example\noptions ndots:5\n"},
		{name: "cluster first with host net is cluster first here", clusterDNS: "10.246.0.1", policy: corev1.DNSClusterFirstWithHostNet,
			want: "nameserver 10.246.0.1\nsearch team.svc.cluster.local svc.cluster.local cluster.local corp.example\noptions ndots:5\n"},
		{name: "no cluster DNS falls back to the host's", policy: corev1.DNSClusterFirst},
		{name: "default keeps the host's", clusterDNS: "10.246.0.1", policy: corev1.DNSDefault},
		{name: "default with dnsConfig", clusterDNS: "10.246.0.1", policy: corev1.DNSDefault,
			config: &corev1.PodDNSConfig{Searches: []string{"extra.example"}},
			want:   "nameserver 10.255.255.53\nnameserver 10.255.255.54\nsearch corp.example extra.example\noptions timeout:2 ndots:1\n"},
		{name: "none takes dnsConfig only", clusterDNS: "10.246.0.1", policy: corev1.DNSNone,
			config: &corev1.PodDNSConfig{Nameservers: []string{"192.0.2.1"}, Options: []corev1.PodDNSConfigOption{{Name: "edns0"}}},
			want:   "nameserver 192.0.2.1\noptions edns0\n"},
		{name: "dnsConfig merges: nameservers capped at 3, options replaced by name", clusterDNS: "10.246.0.1",
			config: &corev1.PodDNSConfig{
				Nameservers: []string{"10.246.0.1", "192.0.2.1", "192.0.2.2", "192.0.2.3"},
				Searches:    []string{"svc.cluster.local", "extra.example"},
				Options:     []corev1.PodDNSConfigOption{{Name: "ndots", Value: &two}, {Name: "single-request"}},
			},
			want: "nameserver 10.246.0.1\nnameserver 192.0.2.1\nnameserver 192.0.2.2\n" +
				"search team.svc.cluster.local svc.cluster.local cluster.local corp.example extra.example\noptions ndots:2 single-request\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := &Kubelet{cfg: Config{ClusterDNS: tc.clusterDNS}}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "team"},
				Spec: corev1.PodSpec{DNSPolicy: tc.policy, DNSConfig: tc.config}}
			got, ok := k.podResolvConf(pod, host)
			if tc.want == "" {
				if ok {
					t.Fatalf("want the host's resolv.conf, got\n%s", got)
				}
				return
			}
			if !ok || got.String() != tc.want {
				t.Fatalf("got (%v)\n%s\nwant\n%s", ok, got, tc.want)
			}
		})
	}
}
