package resources

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/tlsmaterial"
)

func tlsTestCluster() *v1.ValkeyCluster {
	return &v1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Name: "vc", Namespace: "ns"},
		Spec: v1.ValkeyClusterSpec{TLS: &v1.TLSSpec{SecretRef: "vc-tls"}}}
}

// A TLS node's config has the original's TLS-mode settings, the plaintext port closed, and
// announces its own DNS name; that one line is per node, so it is not among the recorded
// settings (every node of one spec hashes the same). Its pod mounts the Secret whole (a subPath
// would never see a rotation) and probes over TLS.
func TestBuildTLSNode(t *testing.T) {
	vc, rc := newTestCluster(), newResolved()
	vc.Spec.TLS = &v1.TLSSpec{SecretRef: "my-cluster-tls"}
	vn := newTestNode(vc, rc)
	conf := RenderValkeyConf(rc, tlsmaterial.PodDNSName(vc, vn.Name))
	for _, line := range []string{
		"port 0", "tls-port 6379", "tls-cluster yes", "tls-replication yes",
		"tls-cert-file /etc/valkey/tls/tls.crt", "tls-key-file /etc/valkey/tls/tls.key", "tls-ca-cert-file /etc/valkey/tls/ca.crt",
		"tls-auth-clients no", "cluster-preferred-endpoint-type hostname",
		"cluster-announce-hostname my-cluster-8c04d.my-cluster.my-app.svc.cluster.local",
	} {
		if !strings.Contains(conf, "\n"+line+"\n") {
			t.Errorf("valkey.conf lacks %q:\n%s", line, conf)
		}
	}
	if strings.Contains(conf, "port 6379\n") && !strings.Contains(conf, "tls-port 6379\n") {
		t.Error("plaintext port open")
	}
	if _, ok := vn.Spec.ValkeySettings["cluster-announce-hostname"]; ok || vn.Spec.ValkeySettings["port"] != "0" || vn.Spec.TLSSecret != "my-cluster-tls" {
		t.Errorf("recorded settings %v, tlsSecret %q", vn.Spec.ValkeySettings, vn.Spec.TLSSecret)
	}
	pod := BuildPod(vc, rc, vn, "h", v1.ZoneSpreadBestEffort)
	var vol *corev1.Volume
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == "tls" {
			vol = &pod.Spec.Volumes[i]
		}
	}
	if vol == nil || vol.Secret == nil || vol.Secret.SecretName != "my-cluster-tls" {
		t.Fatalf("no TLS Secret volume: %+v", pod.Spec.Volumes)
	}
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		if m.Name == "tls" && (m.MountPath != TLSMountPath || m.SubPath != "") {
			t.Errorf("TLS mount %+v", m)
		}
	}
	probe := strings.Join(pod.Spec.Containers[0].LivenessProbe.Exec.Command, " ")
	stop := strings.Join(pod.Spec.Containers[0].Lifecycle.PreStop.Exec.Command, " ")
	for _, s := range []string{probe, stop} {
		if !strings.Contains(s, "--tls --insecure") {
			t.Errorf("not over TLS: %s", s)
		}
	}
	if *pod.Spec.SecurityContext.RunAsNonRoot != true {
		t.Error("TLS pod runs as root")
	}
}
