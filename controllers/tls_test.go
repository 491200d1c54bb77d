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

	"github.com/gomomento/valkey-operator/acl"
	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
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

// intermediate returns a CA signed by p.
func (p *pki) intermediate(name string) *pki {
	p.t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, &key.PublicKey, p.key)
	if err != nil {
		p.t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &pki{t: p.t, cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
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

// Each check of the Secret has its own message: the original's six word for word
// (operations/troubleshooting.md), then ours in the same style; a good Secret passes, and so
// does an expired certificate (expiry is a warning, never Invalid).
func TestValidateTLSSecret(t *testing.T) {
	ca, other := newPKI(t, "ca"), newPKI(t, "other")
	crt, key := ca.issue(leafSpec{})
	_, otherKey := ca.issue(leafSpec{})
	noWildcard, nwKey := ca.issue(leafSpec{names: []string{"vc.ns.svc.cluster.local"}})
	noService, nsKey := ca.issue(leafSpec{names: []string{"*.vc.ns.svc.cluster.local"}})
	foreign, foreignKey := other.issue(leafSpec{})
	serverOnly, soKey := ca.issue(leafSpec{usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	clientOnly, coKey := ca.issue(leafSpec{usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	expired, exKey := ca.issue(leafSpec{notBefore: time.Now().Add(-48 * time.Hour), notAfter: time.Now().Add(-24 * time.Hour)})
	garbageDER := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("not a certificate")})
	inter := ca.intermediate("intermediate")
	viaInter, viKey := inter.issue(leafSpec{})
	viaInterChain := append(append([]byte{}, viaInter...), inter.pem...)

	data := func(crt, key, ca []byte) map[string][]byte {
		return map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": ca}
	}
	without := func(k string) map[string][]byte {
		d := data(crt, key, ca.pem)
		delete(d, k)
		return d
	}
	cases := []struct {
		name    string
		data    map[string][]byte
		missing bool
		want    string
	}{
		{name: "missing", missing: true, want: `TLS Secret "vc-tls" not found in namespace "ns"`},
		{name: "no data", data: map[string][]byte{}, want: `TLS Secret "vc-tls" has no data`},
		{name: "no tls.crt", data: without("tls.crt"), want: `TLS Secret "vc-tls" missing required key "tls.crt"`},
		{name: "no tls.key", data: without("tls.key"), want: `TLS Secret "vc-tls" missing required key "tls.key"`},
		{name: "no ca.crt", data: without("ca.crt"), want: `TLS Secret "vc-tls" missing required key "ca.crt"`},
		{name: "not PEM", data: data([]byte("hello"), key, ca.pem), want: `TLS Secret "vc-tls": tls.crt is not valid PEM`},
		{name: "not X.509", data: data(garbageDER, key, ca.pem), want: `TLS Secret "vc-tls": tls.crt is not a valid X.509 certificate`},
		{name: "no service SAN", data: data(noService, nsKey, ca.pem), want: `TLS cert in Secret "vc-tls" missing SAN "vc.ns.svc.cluster.local"`},
		{name: "no wildcard SAN", data: data(noWildcard, nwKey, ca.pem), want: `TLS cert in Secret "vc-tls" missing SAN "*.vc.ns.svc.cluster.local"`},
		{name: "key of another certificate", data: data(crt, otherKey, ca.pem), want: `TLS Secret "vc-tls": tls.key does not match the certificate in tls.crt`},
		{name: "key not a key", data: data(crt, []byte("nope"), ca.pem), want: `TLS Secret "vc-tls": tls.key is not a valid private key`},
		{name: "ca.crt not PEM", data: data(crt, key, []byte("nope")), want: `TLS Secret "vc-tls": ca.crt is not valid PEM holding X.509 certificates`},
		{name: "signed by another CA", data: data(foreign, foreignKey, ca.pem), want: `TLS cert in Secret "vc-tls" is not signed by a CA in ca.crt`},
		{name: "server auth only", data: data(serverOnly, soKey, ca.pem), want: `TLS cert in Secret "vc-tls" lacks the client auth usage (nodes are TLS clients of their peers)`},
		{name: "client auth only", data: data(clientOnly, coKey, ca.pem), want: `TLS cert in Secret "vc-tls" lacks the server auth usage`},
		{name: "valid", data: data(crt, key, ca.pem)},
		{name: "valid, two CAs", data: data(crt, key, append(append([]byte{}, other.pem...), ca.pem...))},
		{name: "expired is not invalid", data: data(expired, exKey, ca.pem)},
		// An intermediate: in tls.crt after the leaf, with the root in ca.crt, as OpenSSL needs.
		{name: "valid, intermediate in tls.crt", data: data(viaInterChain, viKey, ca.pem)},
		{name: "valid, intermediate and root in ca.crt", data: data(viaInter, viKey, append(append([]byte{}, inter.pem...), ca.pem...))},
		// The intermediate alone in ca.crt: Go's x509 takes it as a root, OpenSSL (every node,
		// valkey-cli) does not, and every handshake fails with "unknown ca".
		{name: "intermediate alone in ca.crt", data: data(viaInter, viKey, inter.pem),
			want: `TLS cert in Secret "vc-tls" does not chain to a self-signed root CA in ca.crt (Valkey trusts no intermediate as a root: add the root CA to ca.crt)`},
		{name: "intermediate alone in ca.crt, chain in tls.crt", data: data(viaInterChain, viKey, inter.pem),
			want: `TLS cert in Secret "vc-tls" does not chain to a self-signed root CA in ca.crt (Valkey trusts no intermediate as a root: add the root CA to ca.crt)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var s *corev1.Secret
			if !c.missing {
				s = &corev1.Secret{Data: c.data}
			}
			m, got := validateTLSSecret(tlsTestCluster(), s)
			if got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
			if (m == nil) == (c.want == "") {
				t.Fatalf("material %v with problem %q", m != nil, got)
			}
		})
	}
}

// The digest changes with any of the three files and with nothing else; the fingerprint is the
// leaf's alone.
func TestTLSMaterialDigest(t *testing.T) {
	ca, other := newPKI(t, "ca"), newPKI(t, "other")
	crt, key := ca.issue(leafSpec{})
	crt2, key2 := ca.issue(leafSpec{})
	get := func(crt, key, bundle []byte) *tlsMaterial {
		m, problem := validateTLSSecret(tlsTestCluster(), &corev1.Secret{Data: map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": bundle}})
		if problem != "" {
			t.Fatal(problem)
		}
		return m
	}
	a, b := get(crt, key, ca.pem), get(crt, key, ca.pem)
	if a.Digest != b.Digest || a.Fingerprint() != b.Fingerprint() {
		t.Fatal("the same Secret gave two digests")
	}
	if c := get(crt2, key2, ca.pem); c.Digest == a.Digest || c.Fingerprint() == a.Fingerprint() {
		t.Error("a new leaf kept the digest or the fingerprint")
	}
	if c := get(crt, key, append(append([]byte{}, ca.pem...), other.pem...)); c.Digest == a.Digest || c.Fingerprint() != a.Fingerprint() {
		t.Error("a new CA bundle kept the digest, or changed the leaf's fingerprint")
	}
}

// Expiry is visible two weeks ahead: a leaf or CA within 14 days (or past) is listed and turns
// CertificateExpiring True with a message naming it; otherwise the condition is False.
func TestTLSExpiry(t *testing.T) {
	now := time.Now()
	ca := newPKI(t, "ca")
	material := func(notAfter time.Time) *tlsMaterial {
		crt, key := ca.issue(leafSpec{notBefore: now.Add(-30 * 24 * time.Hour), notAfter: notAfter})
		m, problem := validateTLSSecret(tlsTestCluster(), &corev1.Secret{Data: map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": ca.pem}})
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
			if got := len(tlsExpiring(m, now)) > 0; got != (c.want == metav1.ConditionTrue) {
				t.Fatalf("tlsExpiring listed %v", tlsExpiring(m, now))
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
	if exp := tlsExpiring(m, now); len(exp) != 1 || exp[0].Key != "ca.crt" {
		t.Fatalf("an expiring CA: %+v", exp)
	}
}

// Every cluster's operator user may CONFIG SET, CONFIG GET and CLIENT KILL: the reload of a TLS
// cluster's certificate files, the detach of a replica it retires (valkey.Client.Detach), and the
// settings applied live, set and read back.
func TestRenderACLConfigSet(t *testing.T) {
	sys := acl.SystemUsers{OperatorPassword: "op", ReplPassword: "repl", MigratePassword: "mig"}
	for _, l := range strings.Split(acl.Render(nil, nil, sys), "\n") {
		if strings.HasPrefix(l, "user "+acl.OperatorUser+" ") {
			if !strings.Contains(l, "+config|set") || !strings.Contains(l, "+config|get") || !strings.Contains(l, "+client|kill") {
				t.Errorf("operator user may not CONFIG SET, CONFIG GET or CLIENT KILL: %s", l)
			}
			return
		}
	}
	t.Fatal("no operator user")
}

// A TLS node's config has the original's TLS-mode settings, the plaintext port closed, and
// announces its own DNS name; that one line is per node, so it is not among the recorded
// settings (every node of one spec hashes the same). Its pod mounts the Secret whole (a subPath
// would never see a rotation) and probes over TLS.
func TestBuildTLSNode(t *testing.T) {
	vc, rc := newTestCluster(), newResolved()
	vc.Spec.TLS = &v1.TLSSpec{SecretRef: "my-cluster-tls"}
	vn := newTestNode(vc, rc)
	conf := renderValkeyConf(rc, podDNSName(vc, vn.Name))
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
