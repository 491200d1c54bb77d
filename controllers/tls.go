package controllers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/valkey"
)

// A TLS cluster's nodes mount its Secret at tlsMountPath, and valkey.conf points Valkey at the
// three files there. The path is beside the ACL Secret's (secretMountPath), not under
// configMountPath: a mount nested inside a ConfigMap volume needs its mount point created in a
// read-only volume.
const (
	tlsMountPath = "/etc/valkey-tls"

	tlsCertKey = "tls.crt"
	tlsKeyKey  = "tls.key"
	tlsCAKey   = "ca.crt"
)

// clusterDomain is the Kubernetes cluster's DNS domain, under which nodes announce their names
// and which the certificate's SANs name (security/tls.md).
const clusterDomain = "cluster.local"

// serviceDNSName is the name of the cluster's headless Service, {cluster}.{namespace}.svc.{domain}.
func serviceDNSName(vc *v1.ValkeyCluster) string {
	return vc.Name + "." + vc.Namespace + ".svc." + clusterDomain
}

// podDNSName is the name a TLS node announces and its certificate is verified under:
// {pod}.{cluster}.{namespace}.svc.{domain}, through the headless Service and the pod's hostname
// and subdomain.
func podDNSName(vc *v1.ValkeyCluster, pod string) string { return pod + "." + serviceDNSName(vc) }

// tlsMaterial is a TLS Secret that passed validation: its parsed content, and a digest that
// changes whenever any of the three files does.
type tlsMaterial struct {
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
func (m *tlsMaterial) Fingerprint() string { return certFingerprint(m.Leaf.Raw) }

func certFingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// validateTLSSecret checks a TLS cluster's Secret (nil when it does not exist) and returns its
// material, or the reason it cannot be used, in the words of the original's status.message
// (operations/troubleshooting.md) for the checks it makes, in its order: the Secret exists and
// has data, the three keys are there, tls.crt is PEM holding an X.509 certificate, whose SANs
// name the Service and the wildcard under it. Then the checks the original does not make,
// whose failure would otherwise show up only as nodes that cannot talk to each other: the key
// is tls.crt's, ca.crt holds certificates, tls.crt chains to them, and the certificate may
// serve and may act as a client (each node is a TLS client of its peers on the cluster bus and
// for replication). Expiry is not checked: an expired certificate does not make a cluster
// Invalid (see tlsExpiry).
func validateTLSSecret(vc *v1.ValkeyCluster, s *corev1.Secret) (*tlsMaterial, string) {
	name := vc.Spec.TLS.SecretRef
	if s == nil {
		return nil, fmt.Sprintf("TLS Secret %q not found in namespace %q", name, vc.Namespace)
	}
	if len(s.Data) == 0 {
		return nil, fmt.Sprintf("TLS Secret %q has no data", name)
	}
	for _, k := range []string{tlsCertKey, tlsKeyKey, tlsCAKey} {
		if _, ok := s.Data[k]; !ok {
			return nil, fmt.Sprintf("TLS Secret %q missing required key %q", name, k)
		}
	}
	block, _ := pem.Decode(s.Data[tlsCertKey])
	if block == nil {
		return nil, fmt.Sprintf("TLS Secret %q: tls.crt is not valid PEM", name)
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Sprintf("TLS Secret %q: tls.crt is not a valid X.509 certificate", name)
	}
	for _, san := range []string{serviceDNSName(vc), "*." + serviceDNSName(vc)} {
		if !hasDNSName(leaf, san) {
			return nil, fmt.Sprintf("TLS cert in Secret %q missing SAN %q", name, san)
		}
	}
	pair, err := tls.X509KeyPair(s.Data[tlsCertKey], s.Data[tlsKeyKey])
	if err != nil {
		if strings.Contains(err.Error(), "does not match") {
			return nil, fmt.Sprintf("TLS Secret %q: tls.key does not match the certificate in tls.crt", name)
		}
		return nil, fmt.Sprintf("TLS Secret %q: tls.key is not a valid private key", name)
	}
	cas, ok := parseCertificates(s.Data[tlsCAKey])
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
	for _, k := range []string{tlsCertKey, tlsKeyKey, tlsCAKey} {
		sum := sha256.Sum256(s.Data[k])
		h.Write(sum[:])
	}
	return &tlsMaterial{Digest: hex.EncodeToString(h.Sum(nil)), Leaf: leaf, CAs: cas, Pair: pair, Roots: roots}, ""
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

// tlsConfigs keeps one client tls.Config per cluster and Secret content, so that the pointer
// stays the same across passes while the Secret does (the connection pool compares it, and
// redials when it changes: a rotated CA or client certificate).
type tlsConfigs struct {
	mu sync.Mutex
	m  map[string]cachedTLS // cluster key -> config
}

type cachedTLS struct {
	digest string
	cfg    *tls.Config
}

// get returns the operator's client configuration for a cluster whose Secret holds m: it trusts
// ca.crt alone and presents the leaf as its client certificate. The server name is set per node
// by the Valkey client (valkey.Credentials.ServerName).
func (t *tlsConfigs) get(cluster string, m *tlsMaterial) *tls.Config {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.m[cluster]; ok && c.digest == m.Digest {
		return c.cfg
	}
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		RootCAs:      m.Roots,
		Certificates: []tls.Certificate{m.Pair},
	}
	if t.m == nil {
		t.m = map[string]cachedTLS{}
	}
	t.m[cluster] = cachedTLS{digest: m.Digest, cfg: cfg}
	return cfg
}

// forget drops a deleted cluster's configuration.
func (t *tlsConfigs) forget(cluster string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, cluster)
}

// tlsDirectives are the directives of a TLS cluster's valkey.conf (reference/forced-settings.md,
// TLS mode) shared by every node: the plaintext port closed, TLS on the client port, the cluster
// bus and replication, the mounted Secret's files, no client certificates asked of clients (ACL
// users authenticate them), and hostnames in redirects so that clients verify what they reach.
// The per-node cluster-announce-hostname is added at render time (renderValkeyConf).
func tlsDirectives() [][2]string {
	return [][2]string{
		{"tls-port", fmt.Sprint(ClientPort)},
		{"tls-cluster", "yes"},
		{"tls-replication", "yes"},
		{"tls-cert-file", tlsMountPath + "/" + tlsCertKey},
		{"tls-key-file", tlsMountPath + "/" + tlsKeyKey},
		{"tls-ca-cert-file", tlsMountPath + "/" + tlsCAKey},
		{"tls-auth-clients", "no"},
		{"cluster-preferred-endpoint-type", "hostname"},
	}
}

// readTLSSecret reads and validates a TLS cluster's Secret, by name from the API server (c is an
// APIReader): the team's own Secret, which the operator does not create, so no cache holds it
// (CacheOptions). A problem is returned as the reason the cluster is Invalid; resourceVersion is
// the Secret's ("" when it does not exist); err is a transient API error.
func readTLSSecret(ctx context.Context, c client.Reader, vc *v1.ValkeyCluster) (m *tlsMaterial, problem, resourceVersion string, err error) {
	var s corev1.Secret
	err = c.Get(ctx, types.NamespacedName{Namespace: vc.Namespace, Name: vc.Spec.TLS.SecretRef}, &s)
	if apierrors.IsNotFound(err) {
		m, problem := validateTLSSecret(vc, nil)
		return m, problem, "", nil
	} else if err != nil {
		return nil, "", "", fmt.Errorf("get TLS secret: %w", err)
	}
	m, problem = validateTLSSecret(vc, &s)
	return m, problem, s.ResourceVersion, nil
}

// withTLS returns creds for the nodes of a TLS cluster: the cluster's client configuration,
// and each node's certificate verified under its pod's DNS name. pods maps a node's address
// (nodeAddr of its IP) to its pod's name. creds is returned as it is when cfg is nil.
func withTLS(vc *v1.ValkeyCluster, creds valkey.Credentials, cfg *tls.Config, pods map[string]string) valkey.Credentials {
	if cfg == nil {
		return creds
	}
	creds.TLS = cfg
	creds.ServerName = func(addr string) string {
		if pod, ok := pods[addr]; ok {
			return podDNSName(vc, pod)
		}
		// Unknown address: a name no certificate of the cluster covers, so the handshake fails
		// rather than trusting a node the operator cannot name.
		return "unknown." + serviceDNSName(vc)
	}
	return creds
}

// podAddrs maps each pod's node address to the pod's name.
func podAddrs(pods []corev1.Pod) map[string]string {
	out := make(map[string]string, len(pods))
	for _, p := range pods {
		if p.Status.PodIP != "" {
			out[nodeAddr(p.Status.PodIP)] = p.Name
		}
	}
	return out
}

// Reasons of the CertificateExpiring condition.
const (
	ReasonCertificateExpiring = "CertificateExpiring"
	ReasonCertificatesValid   = "CertificatesValid"
)

// tlsExpiryWarning is how long before a certificate of the Secret expires the operator starts
// saying so (a WARN line per tick and the CertificateExpiring condition): two weeks, longer than
// a cert-manager renewal window's usual last retry, shorter than the usual renewBefore.
const tlsExpiryWarning = 14 * 24 * time.Hour

// expiringCert is a certificate of the Secret that expires within tlsExpiryWarning.
type expiringCert struct {
	Key      string // tls.crt or ca.crt
	Subject  string
	NotAfter time.Time
}

// tlsExpiring lists the leaf and the CAs of m that expire within tlsExpiryWarning of now (or
// have expired), the soonest first for each key.
func tlsExpiring(m *tlsMaterial, now time.Time) []expiringCert {
	var out []expiringCert
	if m.Leaf.NotAfter.Sub(now) < tlsExpiryWarning {
		out = append(out, expiringCert{Key: tlsCertKey, Subject: m.Leaf.Subject.CommonName, NotAfter: m.Leaf.NotAfter})
	}
	for _, ca := range m.CAs {
		if ca.NotAfter.Sub(now) < tlsExpiryWarning {
			out = append(out, expiringCert{Key: tlsCAKey, Subject: ca.Subject.CommonName, NotAfter: ca.NotAfter})
		}
	}
	return out
}

// setExpiryCondition sets CertificateExpiring on st from the Secret's material m. Pure.
func setExpiryCondition(st *v1.ValkeyClusterStatus, vc *v1.ValkeyCluster, m *tlsMaterial, now time.Time) {
	c := metav1.Condition{Type: v1.ConditionCertificateExpiring, Status: metav1.ConditionFalse, Reason: ReasonCertificatesValid,
		Message: fmt.Sprintf("no certificate of TLS Secret %q expires within 14 days", vc.Spec.TLS.SecretRef), ObservedGeneration: vc.Generation}
	if exp := tlsExpiring(m, now); len(exp) > 0 {
		var parts []string
		for _, e := range exp {
			verb := "expires"
			if !e.NotAfter.After(now) {
				verb = "expired"
			}
			parts = append(parts, fmt.Sprintf("%s (%s) %s at %s", e.Key, e.Subject, verb, e.NotAfter.UTC().Format(time.RFC3339)))
		}
		c.Status, c.Reason = metav1.ConditionTrue, ReasonCertificateExpiring
		c.Message = fmt.Sprintf("TLS Secret %q: %s; rotate it (the cluster stays Active, clients fail once it has expired)", vc.Spec.TLS.SecretRef, strings.Join(parts, ", "))
	}
	meta.SetStatusCondition(&st.Conditions, c)
}
