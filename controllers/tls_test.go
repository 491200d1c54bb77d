package controllers

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/tlsmaterial"
	"github.com/gomomento/valkey-operator/tlsmaterial/tlstest"
)

func tlsTestCluster() *v1.ValkeyCluster {
	return &v1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Name: "vc", Namespace: "ns"},
		Spec: v1.ValkeyClusterSpec{TLS: &v1.TLSSpec{SecretRef: "vc-tls"}}}
}

// Expiry is visible two weeks ahead: a leaf or CA within 14 days (or past) is listed and turns
// CertificateExpiring True with a message naming it; otherwise the condition is False.
func TestTLSExpiry(t *testing.T) {
	now := time.Now()
	ca := tlstest.NewPKI(t, "ca")
	material := func(notAfter time.Time) *tlsmaterial.Material {
		crt, key := ca.Issue(tlstest.Leaf{NotBefore: now.Add(-30 * 24 * time.Hour), NotAfter: notAfter})
		m, problem := tlsmaterial.Validate(tlsTestCluster(), &corev1.Secret{Data: map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": ca.PEM}})
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
