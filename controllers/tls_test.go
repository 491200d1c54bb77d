package controllers

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/tlsmaterial"
)

// pki makes the certificates of the validation tests.
type pki struct {
	t    *testing.T
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newPKI(t *testing.T, name string) *pki {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &pki{t: t, cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

type leafSpec struct {
	names     []string
	usages    []x509.ExtKeyUsage
	notBefore time.Time
	notAfter  time.Time
}

// issue returns a leaf signed by the CA and its key, as PEM.
func (p *pki) issue(l leafSpec) (certPEM, keyPEM []byte) {
	p.t.Helper()
	if l.names == nil {
		l.names = []string{"vc.ns.svc.cluster.local", "*.vc.ns.svc.cluster.local"}
	}
	if l.usages == nil {
		l.usages = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	if l.notBefore.IsZero() {
		l.notBefore = time.Now().Add(-time.Hour)
	}
	if l.notAfter.IsZero() {
		l.notAfter = time.Now().Add(90 * 24 * time.Hour)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "vc"}, DNSNames: l.names,
		NotBefore: l.notBefore, NotAfter: l.notAfter, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: l.usages}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, &key.PublicKey, p.key)
	if err != nil {
		p.t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func tlsTestCluster() *v1.ValkeyCluster {
	return &v1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Name: "vc", Namespace: "ns"},
		Spec: v1.ValkeyClusterSpec{TLS: &v1.TLSSpec{SecretRef: "vc-tls"}}}
}

// Expiry is visible two weeks ahead: a leaf or CA within 14 days (or past) is listed and turns
// CertificateExpiring True with a message naming it; otherwise the condition is False.
func TestTLSExpiry(t *testing.T) {
	now := time.Now()
	ca := newPKI(t, "ca")
	material := func(notAfter time.Time) *tlsmaterial.Material {
		crt, key := ca.issue(leafSpec{notBefore: now.Add(-30 * 24 * time.Hour), notAfter: notAfter})
		m, problem := tlsmaterial.Validate(tlsTestCluster(), &corev1.Secret{Data: map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": ca.pem}})
		if problem != "" {
			t.Fatal(problem)
		}
		return m
	}
	cases := []struct {
		name     string
		notAfter time.Time
		want     metav1.ConditionStatus
		says     string
	}{
		{"90 days", now.Add(90 * 24 * time.Hour), metav1.ConditionFalse, "no certificate"},
		{"15 days", now.Add(15 * 24 * time.Hour), metav1.ConditionFalse, "no certificate"},
		{"10 days", now.Add(10 * 24 * time.Hour), metav1.ConditionTrue, "tls.crt (vc) expires at"},
		{"expired", now.Add(-time.Hour), metav1.ConditionTrue, "tls.crt (vc) expired at"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := material(c.notAfter)
			if got := len(tlsmaterial.Expiring(m, now)) > 0; got != (c.want == metav1.ConditionTrue) {
				t.Fatalf("tlsmaterial.Expiring listed %v", tlsmaterial.Expiring(m, now))
			}
			st := &v1.ValkeyClusterStatus{}
			setExpiryCondition(st, tlsTestCluster(), m, now)
			cond := meta.FindStatusCondition(st.Conditions, v1.ConditionCertificateExpiring)
			if cond == nil || cond.Status != c.want || !strings.Contains(cond.Message, c.says) {
				t.Fatalf("condition %+v, want %s saying %q", cond, c.want, c.says)
			}
		})
	}
	// A CA that expires soon is listed under ca.crt.
	m := material(now.Add(90 * 24 * time.Hour))
	m.CAs[0].NotAfter = now.Add(5 * 24 * time.Hour)
	if exp := tlsmaterial.Expiring(m, now); len(exp) != 1 || exp[0].Key != "ca.crt" {
		t.Fatalf("an expiring CA: %+v", exp)
	}
}

// A TLS node's config has the original's TLS-mode settings, the plaintext port closed, and
// announces its own DNS name; that one line is per node, so it is not among the recorded
// settings (every node of one spec hashes the same). Its pod mounts the Secret whole (a subPath
// would never see a rotation) and probes over TLS.
func TestBuildTLSNode(t *testing.T) {
	vc, rc := newTestCluster(), newResolved()
	vc.Spec.TLS = &v1.TLSSpec{SecretRef: "my-cluster-tls"}
	vn := newTestNode(vc, rc)
	conf := renderValkeyConf(rc, tlsmaterial.PodDNSName(vc, vn.Name))
	for _, line := range []string{
		"port 0", "tls-port 6379", "tls-cluster yes", "tls-replication yes",
		"tls-cert-file /etc/valkey-tls/tls.crt", "tls-key-file /etc/valkey-tls/tls.key", "tls-ca-cert-file /etc/valkey-tls/ca.crt",
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
	pod := buildPod(vc, rc, vn, "h", v1.ZoneSpreadBestEffort)
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
		if m.Name == "tls" && (m.MountPath != tlsMountPath || m.SubPath != "") {
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
