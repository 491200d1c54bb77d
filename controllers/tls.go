package controllers

import (
	"context"
	"crypto/tls"
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
	"github.com/gomomento/valkey-operator/tlsmaterial"
	"github.com/gomomento/valkey-operator/valkey"
)

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
func (t *tlsConfigs) get(cluster string, m *tlsmaterial.Material) *tls.Config {
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

// readTLSSecret reads and validates a TLS cluster's Secret, by name from the API server (c is an
// APIReader): the team's own Secret, which the operator does not create, so no cache holds it
// (CacheOptions). A problem is returned as the reason the cluster is Invalid; resourceVersion is
// the Secret's ("" when it does not exist); err is a transient API error.
func readTLSSecret(ctx context.Context, c client.Reader, vc *v1.ValkeyCluster) (m *tlsmaterial.Material, problem, resourceVersion string, err error) {
	var s corev1.Secret
	err = c.Get(ctx, types.NamespacedName{Namespace: vc.Namespace, Name: vc.Spec.TLS.SecretRef}, &s)
	if apierrors.IsNotFound(err) {
		m, problem := tlsmaterial.Validate(vc, nil)
		return m, problem, "", nil
	} else if err != nil {
		return nil, "", "", fmt.Errorf("get TLS secret: %w", err)
	}
	m, problem = tlsmaterial.Validate(vc, &s)
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
			return tlsmaterial.PodDNSName(vc, pod)
		}
		// Unknown address: a name no certificate of the cluster covers, so the handshake fails
		// rather than trusting a node the operator cannot name.
		return "unknown." + tlsmaterial.ServiceDNSName(vc)
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

// setExpiryCondition sets CertificateExpiring on st from the Secret's material m. Pure.
func setExpiryCondition(st *v1.ValkeyClusterStatus, vc *v1.ValkeyCluster, m *tlsmaterial.Material, now time.Time) {
	c := metav1.Condition{Type: v1.ConditionCertificateExpiring, Status: metav1.ConditionFalse, Reason: ReasonCertificatesValid,
		Message: fmt.Sprintf("no certificate of TLS Secret %q expires within 14 days", vc.Spec.TLS.SecretRef), ObservedGeneration: vc.Generation}
	if exp := tlsmaterial.Expiring(m, now); len(exp) > 0 {
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
