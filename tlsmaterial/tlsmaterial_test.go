package tlsmaterial

import (
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/tlsmaterial/tlstest"
)

func tlsTestCluster() *v1.ValkeyCluster {
	return &v1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Name: "vc", Namespace: "ns"},
		Spec: v1.ValkeyClusterSpec{TLS: &v1.TLSSpec{SecretRef: "vc-tls"}}}
}

// Each check of the Secret has its own message: the original's six word for word
// (operations/troubleshooting.md), then ours in the same style; a good Secret passes, and so
// does an expired certificate (expiry is a warning, never Invalid).
func TestValidateTLSSecret(t *testing.T) {
	ca, other := tlstest.NewPKI(t, "ca"), tlstest.NewPKI(t, "other")
	crt, key := ca.Issue(tlstest.Leaf{})
	_, otherKey := ca.Issue(tlstest.Leaf{})
	noWildcard, nwKey := ca.Issue(tlstest.Leaf{Names: []string{"vc.ns.svc.cluster.local"}})
	noService, nsKey := ca.Issue(tlstest.Leaf{Names: []string{"*.vc.ns.svc.cluster.local"}})
	foreign, foreignKey := other.Issue(tlstest.Leaf{})
	serverOnly, soKey := ca.Issue(tlstest.Leaf{Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	clientOnly, coKey := ca.Issue(tlstest.Leaf{Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	expired, exKey := ca.Issue(tlstest.Leaf{NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
	garbageDER := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("not a certificate")})
	inter := ca.Intermediate("intermediate")
	viaInter, viKey := inter.Issue(tlstest.Leaf{})
	viaInterChain := append(append([]byte{}, viaInter...), inter.PEM...)

	data := func(crt, key, ca []byte) map[string][]byte {
		return map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": ca}
	}
	without := func(k string) map[string][]byte {
		d := data(crt, key, ca.PEM)
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
		{name: "not PEM", data: data([]byte("hello"), key, ca.PEM), want: `TLS Secret "vc-tls": tls.crt is not valid PEM`},
		{name: "not X.509", data: data(garbageDER, key, ca.PEM), want: `TLS Secret "vc-tls": tls.crt is not a valid X.509 certificate`},
		{name: "no service SAN", data: data(noService, nsKey, ca.PEM), want: `TLS cert in Secret "vc-tls" missing SAN "vc.ns.svc.cluster.local"`},
		{name: "no wildcard SAN", data: data(noWildcard, nwKey, ca.PEM), want: `TLS cert in Secret "vc-tls" missing SAN "*.vc.ns.svc.cluster.local"`},
		{name: "key of another certificate", data: data(crt, otherKey, ca.PEM), want: `TLS Secret "vc-tls": tls.key does not match the certificate in tls.crt`},
		{name: "key not a key", data: data(crt, []byte("nope"), ca.PEM), want: `TLS Secret "vc-tls": tls.key is not a valid private key`},
		{name: "ca.crt not PEM", data: data(crt, key, []byte("nope")), want: `TLS Secret "vc-tls": ca.crt is not valid PEM holding X.509 certificates`},
		{name: "signed by another CA", data: data(foreign, foreignKey, ca.PEM), want: `TLS cert in Secret "vc-tls" is not signed by a CA in ca.crt`},
		{name: "server auth only", data: data(serverOnly, soKey, ca.PEM), want: `TLS cert in Secret "vc-tls" lacks the client auth usage (nodes are TLS clients of their peers)`},
		{name: "client auth only", data: data(clientOnly, coKey, ca.PEM), want: `TLS cert in Secret "vc-tls" lacks the server auth usage`},
		{name: "valid", data: data(crt, key, ca.PEM)},
		{name: "valid, two CAs", data: data(crt, key, append(append([]byte{}, other.PEM...), ca.PEM...))},
		{name: "expired is not invalid", data: data(expired, exKey, ca.PEM)},
		// An intermediate: in tls.crt after the leaf, with the root in ca.crt, as OpenSSL needs.
		{name: "valid, intermediate in tls.crt", data: data(viaInterChain, viKey, ca.PEM)},
		{name: "valid, intermediate and root in ca.crt", data: data(viaInter, viKey, append(append([]byte{}, inter.PEM...), ca.PEM...))},
		// The intermediate alone in ca.crt: Go's x509 takes it as a root, OpenSSL (every node,
		// valkey-cli) does not, and every handshake fails with "unknown ca".
		{name: "intermediate alone in ca.crt", data: data(viaInter, viKey, inter.PEM),
			want: `TLS cert in Secret "vc-tls" does not chain to a self-signed root CA in ca.crt (Valkey trusts no intermediate as a root: add the root CA to ca.crt)`},
		{name: "intermediate alone in ca.crt, chain in tls.crt", data: data(viaInterChain, viKey, inter.PEM),
			want: `TLS cert in Secret "vc-tls" does not chain to a self-signed root CA in ca.crt (Valkey trusts no intermediate as a root: add the root CA to ca.crt)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var s *corev1.Secret
			if !c.missing {
				s = &corev1.Secret{Data: c.data}
			}
			m, got := Validate(tlsTestCluster(), s)
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
	ca, other := tlstest.NewPKI(t, "ca"), tlstest.NewPKI(t, "other")
	crt, key := ca.Issue(tlstest.Leaf{})
	crt2, key2 := ca.Issue(tlstest.Leaf{})
	get := func(crt, key, bundle []byte) *Material {
		m, problem := Validate(tlsTestCluster(), &corev1.Secret{Data: map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": bundle}})
		if problem != "" {
			t.Fatal(problem)
		}
		return m
	}
	a, b := get(crt, key, ca.PEM), get(crt, key, ca.PEM)
	if a.Digest != b.Digest || a.Fingerprint() != b.Fingerprint() {
		t.Fatal("the same Secret gave two digests")
	}
	if c := get(crt2, key2, ca.PEM); c.Digest == a.Digest || c.Fingerprint() == a.Fingerprint() {
		t.Error("a new leaf kept the digest or the fingerprint")
	}
	if c := get(crt, key, append(append([]byte{}, ca.PEM...), other.PEM...)); c.Digest == a.Digest || c.Fingerprint() != a.Fingerprint() {
		t.Error("a new CA bundle kept the digest, or changed the leaf's fingerprint")
	}
}
