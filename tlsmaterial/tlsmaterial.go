// Package tlsmaterial checks a TLS cluster's Secret before the operator uses it: the three
// keys, the certificate's names, key, chain and usages, in the words of the original's
// status.message, and which certificates expire soon. Pure: controllers reads the Secret,
// dials the nodes and reloads them.
package tlsmaterial

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// The keys of a TLS cluster's Secret: the node's certificate (with any intermediates after
// it), its key, and the CAs its peers and the operator trust.
const (
	CertKey = "tls.crt"
	KeyKey  = "tls.key"
	CAKey   = "ca.crt"
)

// ClusterDomain is the Kubernetes cluster's DNS domain, under which nodes announce their names
// and which the certificate's SANs name (security/tls.md).
const ClusterDomain = "cluster.local"

// ServiceDNSName is the name of the cluster's headless Service, {cluster}.{namespace}.svc.{domain}.
func ServiceDNSName(vc *v1.ValkeyCluster) string {
	return vc.Name + "." + vc.Namespace + ".svc." + ClusterDomain
}

// PodDNSName is the name a TLS node announces and its certificate is verified under:
// {pod}.{cluster}.{namespace}.svc.{domain}, through the headless Service and the pod's hostname
// and subdomain.
func PodDNSName(vc *v1.ValkeyCluster, pod string) string { return pod + "." + ServiceDNSName(vc) }

// Material is a TLS Secret that passed validation: its parsed content, and a digest that
// changes whenever any of the three files does.
type Material struct {
	// Digest is the SHA-256 of the three keys' data: the TLS controller reloads the nodes when it
	// changes.
	Digest string
	// Leaf is tls.crt's first certificate; CAs are ca.crt's certificates.
	Leaf *x509.Certificate
	CAs  []*x509.Certificate
	// Pair is the leaf and its key, as the operator presents them to the nodes.
	Pair tls.Certificate
	// Roots is ca.crt as a pool, the only roots the operator trusts for the cluster.
	Roots *x509.CertPool
}

// Fingerprint is the SHA-256 of the leaf's DER, in hex: what a handshake compares to prove a
// node serves this certificate.
func (m *Material) Fingerprint() string { return Fingerprint(m.Leaf.Raw) }

// Fingerprint is the SHA-256 of a certificate's DER, in hex (the form Material.Fingerprint
// compares).
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// Validate checks a TLS cluster's Secret (nil when it does not exist) and returns its
// material, or the reason it cannot be used, in the words of the original's status.message
// (operations/troubleshooting.md) for the checks it makes, in its order: the Secret exists and
// has data, the three keys are there, tls.crt is PEM holding an X.509 certificate, whose SANs
// name the Service and the wildcard under it. Then the checks the original does not make,
// whose failure would otherwise show up only as nodes that cannot talk to each other: the key
// is tls.crt's, ca.crt holds certificates, tls.crt chains to them, and the certificate may
// serve and may act as a client (each node is a TLS client of its peers on the cluster bus and
// for replication). Expiry is not checked: an expired certificate does not make a cluster
// Invalid (see Expiring).
func Validate(vc *v1.ValkeyCluster, s *corev1.Secret) (*Material, string) {
	name := vc.Spec.TLS.SecretRef
	if s == nil {
		return nil, fmt.Sprintf("TLS Secret %q not found in namespace %q", name, vc.Namespace)
	}
	if len(s.Data) == 0 {
		return nil, fmt.Sprintf("TLS Secret %q has no data", name)
	}
	for _, k := range []string{CertKey, KeyKey, CAKey} {
		if _, ok := s.Data[k]; !ok {
			return nil, fmt.Sprintf("TLS Secret %q missing required key %q", name, k)
		}
	}
	block, _ := pem.Decode(s.Data[CertKey])
	if block == nil {
		return nil, fmt.Sprintf("TLS Secret %q: tls.crt is not valid PEM", name)
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Sprintf("TLS Secret %q: tls.crt is not a valid X.509 certificate", name)
	}
	for _, san := range []string{ServiceDNSName(vc), "*." + ServiceDNSName(vc)} {
		if !hasDNSName(leaf, san) {
			return nil, fmt.Sprintf("TLS cert in Secret %q missing SAN %q", name, san)
		}
	}
	pair, err := tls.X509KeyPair(s.Data[CertKey], s.Data[KeyKey])
	if err != nil {
		if strings.Contains(err.Error(), "does not match") {
			return nil, fmt.Sprintf("TLS Secret %q: tls.key does not match the certificate in tls.crt", name)
		}
		return nil, fmt.Sprintf("TLS Secret %q: tls.key is not a valid private key", name)
	}
	cas, ok := parseCertificates(s.Data[CAKey])
	if !ok {
		return nil, fmt.Sprintf("TLS Secret %q: ca.crt is not valid PEM holding X.509 certificates", name)
	}
	roots := x509.NewCertPool()
	for _, ca := range cas {
		roots.AddCert(ca)
	}
	if !chainsTo(leaf, pair.Certificate[1:], roots, cas) {
		return nil, fmt.Sprintf("TLS cert in Secret %q is not signed by a CA in ca.crt", name)
	}
	// OpenSSL also takes the intermediates it needs from ca.crt.
	withCAs := append(append([][]byte{}, pair.Certificate[1:]...), rawCerts(cas)...)
	if !chainsTo(leaf, withCAs, selfSignedPool(cas), selfSigned(cas)) {
		return nil, fmt.Sprintf("TLS cert in Secret %q does not chain to a self-signed root CA in ca.crt (Valkey trusts no intermediate as a root: add the root CA to ca.crt)", name)
	}
	if !hasUsage(leaf, x509.ExtKeyUsageServerAuth) {
		return nil, fmt.Sprintf("TLS cert in Secret %q lacks the server auth usage", name)
	}
	if !hasUsage(leaf, x509.ExtKeyUsageClientAuth) {
		return nil, fmt.Sprintf("TLS cert in Secret %q lacks the client auth usage (nodes are TLS clients of their peers)", name)
	}
	pair.Leaf = leaf
	h := sha256.New()
	for _, k := range []string{CertKey, KeyKey, CAKey} {
		sum := sha256.Sum256(s.Data[k])
		h.Write(sum[:])
	}
	return &Material{Digest: hex.EncodeToString(h.Sum(nil)), Leaf: leaf, CAs: cas, Pair: pair, Roots: roots}, ""
}

// hasDNSName reports whether name is literally one of the certificate's DNS SANs: the original
// asks for both names exactly, and a broader wildcard would not be what it checks.
func hasDNSName(c *x509.Certificate, name string) bool {
	for _, n := range c.DNSNames {
		if strings.EqualFold(strings.TrimSuffix(n, "."), name) {
			return true
		}
	}
	return false
}

// hasUsage reports whether the certificate may be used for u: no extended key usage at all
// means any use, as in x509.
func hasUsage(c *x509.Certificate, u x509.ExtKeyUsage) bool {
	if len(c.ExtKeyUsage) == 0 {
		return true
	}
	for _, have := range c.ExtKeyUsage {
		if have == u || have == x509.ExtKeyUsageAny {
			return true
		}
	}
	return false
}

// parseCertificates reads every CERTIFICATE block of data; false when there is none or one
// does not parse.
func parseCertificates(data []byte) ([]*x509.Certificate, bool) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, false
		}
		out = append(out, c)
	}
	return out, len(out) > 0
}

// chainsTo reports whether leaf (with the intermediates that follow it in tls.crt) chains to
// roots at some moment of the leaf's life: now, or, for a certificate that has expired or is
// not valid yet, the start or end of its validity; or, failing those, whether one of cas signed
// it directly. Expiry is a warning, never a reason for Invalid, so it must not fail this check.
func chainsTo(leaf *x509.Certificate, rest [][]byte, roots *x509.CertPool, cas []*x509.Certificate) bool {
	inter := x509.NewCertPool()
	for _, der := range rest {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	for _, at := range []time.Time{time.Now(), leaf.NotBefore.Add(time.Second), leaf.NotAfter.Add(-time.Second)} {
		_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: at,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
		if err == nil {
			return true
		}
		var invalid x509.CertificateInvalidError
		if !errors.As(err, &invalid) || invalid.Reason != x509.Expired {
			return false
		}
	}
	for _, ca := range cas {
		if leaf.CheckSignatureFrom(ca) == nil {
			return true
		}
	}
	return false
}

// selfSigned returns the certificates of cas that are self-signed roots. OpenSSL, with which
// every node and valkey-cli verify their peers, builds a chain up to a self-signed certificate
// in the trust file and accepts no intermediate as the anchor (Go's x509 does): a ca.crt that
// holds the leaf's intermediate alone passes Go's check and fails every node's handshakes
// (break test: with ca.crt = the intermediate, `tlsv1 alert unknown ca` on every node, the
// liveness probes failed and every pod was replaced, again and again).
func selfSigned(cas []*x509.Certificate) []*x509.Certificate {
	var out []*x509.Certificate
	for _, c := range cas {
		if bytes.Equal(c.RawSubject, c.RawIssuer) && c.CheckSignatureFrom(c) == nil {
			out = append(out, c)
		}
	}
	return out
}

func rawCerts(cs []*x509.Certificate) [][]byte {
	out := make([][]byte, len(cs))
	for i, c := range cs {
		out[i] = c.Raw
	}
	return out
}

func selfSignedPool(cas []*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range selfSigned(cas) {
		p.AddCert(c)
	}
	return p
}

// ExpiryWarning is how long before a certificate of the Secret expires the operator starts
// saying so (a WARN line per tick and the CertificateExpiring condition): two weeks, longer than
// a cert-manager renewal window's usual last retry, shorter than the usual renewBefore.
const ExpiryWarning = 14 * 24 * time.Hour

// ExpiringCert is a certificate of the Secret that expires within ExpiryWarning.
type ExpiringCert struct {
	Key      string // tls.crt or ca.crt
	Subject  string
	NotAfter time.Time
}

// Expiring lists the leaf and the CAs of m that expire within ExpiryWarning of now (or
// have expired), the soonest first for each key.
func Expiring(m *Material, now time.Time) []ExpiringCert {
	var out []ExpiringCert
	if m.Leaf.NotAfter.Sub(now) < ExpiryWarning {
		out = append(out, ExpiringCert{Key: CertKey, Subject: m.Leaf.Subject.CommonName, NotAfter: m.Leaf.NotAfter})
	}
	for _, ca := range m.CAs {
		if ca.NotAfter.Sub(now) < ExpiryWarning {
			out = append(out, ExpiringCert{Key: CAKey, Subject: ca.Subject.CommonName, NotAfter: ca.NotAfter})
		}
	}
	return out
}
