package bench

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/tests/harness"
	"github.com/gomomento/valkey-operator/tests/localcluster"
)

// BenchmarkTLSRotation measures the time from a leaf rotation reaching the API server (the TLS
// Secret's data updated in place, as cert-manager renews it) until every node of a 3×1 TLS
// cluster serves the new leaf (a handshake per node, verified under its pod's name, compared
// byte for byte), split into:
//   - volume: until the kubelet has refreshed the Secret's volume in every pod (the local kubelet
//     resyncs every 2 s; a real kubelet takes up to its sync period plus its cache TTL, about a
//     minute by default);
//   - operator: the TLS controller's part, the longest time from a pod's new files to that node
//     serving them (the reload itself, and the wait for the controller's next look).
//
// Report: make bench BENCH=TLSRotation
func BenchmarkTLSRotation(b *testing.B) {
	for _, version := range []string{"8.0.1", localcluster.Valkey9Version} {
		b.Run(version, func(b *testing.B) {
			ctx := context.Background()
			benchRuns++
			ns := fmt.Sprintf("bench-tls-%d", benchRuns)
			if err := ensureNS(ctx, ns); err != nil {
				b.Fatal(err)
			}
			defer func() { _ = harness.K8s.Delete(ctx, &corev1.Namespace{ObjectMeta: objectMeta(ns)}) }()
			img := harness.NewImage(ns + "-image")
			img.Spec.Tag, img.Spec.Version = version, version
			vc := harness.NewCluster(ns, "vc", ns+"-config", harness.WithShards(3), harness.WithReplicas(1))
			vc.Spec.TLS = &v1.TLSSpec{SecretRef: "vc-tls"}
			ca := harness.NewTestCA(b, ns+"-ca")
			crt, key := harness.ClusterLeaf(b, ca, vc, harness.LeafOptions{})
			secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "vc-tls", Namespace: ns}, Type: corev1.SecretTypeTLS, Data: harness.TLSSecretData(crt, key, ca)}
			for _, o := range []client.Object{img, harness.NewConfig(ns+"-config", img.Name), secret, vc} {
				if err := harness.K8s.Create(ctx, o); err != nil && !isAlreadyExists(err) {
					b.Fatal(err)
				}
			}
			defer func() {
				_ = harness.K8s.Delete(ctx, img)
				_ = harness.K8s.Delete(ctx, harness.NewConfig(ns+"-config", img.Name))
			}()
			if _, err := harness.WaitState(ctx, harness.K8s, client.ObjectKeyFromObject(vc), v1.StateActive, harness.FormTimeout); err != nil {
				b.Fatal(err)
			}
			harness.WaitReadyTLS(b, vc, ca, 6)
			roots := x509.NewCertPool()
			roots.AddCert(ca.Cert)
			var volume, operator, total time.Duration
			b.ResetTimer()
			for range b.N {
				pods := harness.Pods(b, vc)
				crt, key := harness.ClusterLeaf(b, ca, vc, harness.LeafOptions{})
				var s corev1.Secret
				if err := harness.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vc-tls"}, &s); err != nil {
					b.Fatal(err)
				}
				s.Data = harness.TLSSecretData(crt, key, ca)
				start := time.Now()
				if err := harness.K8s.Update(ctx, &s); err != nil {
					b.Fatal(err)
				}
				mounted, served := tlsMilestones(b, vc, pods, crt, roots, start)
				var last, lag time.Duration
				for _, p := range pods {
					last = max(last, mounted[p.Name])
					lag = max(lag, served[p.Name]-mounted[p.Name])
				}
				var took time.Duration
				for _, d := range served {
					took = max(took, d)
				}
				b.Logf("%s: every node of %d serves the new leaf %s after the Secret update (volume %s, operator at most %s after a node's files)",
					version, len(pods), took.Round(time.Millisecond), last.Round(time.Millisecond), lag.Round(time.Millisecond))
				volume += last
				operator += lag
				total += took
			}
			b.StopTimer()
			n := float64(b.N)
			b.ReportMetric(total.Seconds()/n, "s/served")
			b.ReportMetric(volume.Seconds()/n, "s/volume")
			b.ReportMetric(operator.Seconds()/n, "s/operator")
		})
	}
}

// tlsMilestones polls, from start, until every pod's mounted tls.crt is certPEM and every node
// serves it: for each pod, when each happened, as a duration since start.
func tlsMilestones(b *testing.B, vc *v1.ValkeyCluster, pods []corev1.Pod, certPEM []byte, roots *x509.CertPool, start time.Time) (mounted, served map[string]time.Duration) {
	b.Helper()
	block, _ := pem.Decode(certPEM)
	mounted, served = map[string]time.Duration{}, map[string]time.Duration{}
	deadline := start.Add(2 * time.Minute)
	for len(mounted) < len(pods) || len(served) < len(pods) {
		if time.Now().After(deadline) {
			b.Fatalf("new leaf not everywhere within 2 minutes: %d/%d files, %d/%d nodes", len(mounted), len(pods), len(served), len(pods))
		}
		for _, p := range pods {
			if _, ok := mounted[p.Name]; !ok {
				dir, err := harness.Cluster.Kubelet.VolumePath(p.Namespace, p.Name, "tls")
				if err != nil {
					b.Fatal(err)
				}
				if data, err := os.ReadFile(filepath.Join(dir, "tls.crt")); err == nil && bytes.Equal(data, certPEM) {
					mounted[p.Name] = time.Since(start)
				}
			}
			if _, ok := served[p.Name]; !ok {
				if c, err := harness.ServedCert(harness.PodAddr(p), harness.PodHost(vc, p.Name), roots); err == nil && bytes.Equal(c.Raw, block.Bytes) {
					served[p.Name] = time.Since(start)
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return mounted, served
}
