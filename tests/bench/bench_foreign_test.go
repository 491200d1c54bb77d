package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gomomento/valkey-operator/tests/harness"
)

// foreignSecrets and foreignSecretSize: other teams' Secrets, none of them the operator's.
const (
	foreignSecrets    = 5000
	foreignSecretSize = 100 << 10
	foreignNamespaces = 50
)

// BenchmarkForeignSecrets: the operator caches only what is its own (controllers.CacheOptions),
// so 5 000 Secrets of 100 KiB in 50 namespaces of other teams (500 MB) must not grow its memory.
// It reports the operator's RSS with one Ready cluster before the Secrets are created and 30 s
// after (MB), and the growth (goal: at most 10 MB). Reported, never asserted. Before the label-
// selected caches, the operator held every Secret of the Kubernetes cluster in its heap.
func BenchmarkForeignSecrets(b *testing.B) {
	if foreignMeasured == nil {
		foreignMeasured = measureForeignSecrets(b)
	}
	for unit, v := range foreignMeasured {
		b.ReportMetric(v, unit)
	}
	for range b.N {
		// One measurement per run of the package: the figures above are the benchmark.
	}
}

// foreignMeasured keeps the figures of the one measurement (testing runs a benchmark function
// more than once).
var foreignMeasured map[string]float64

func measureForeignSecrets(b *testing.B) map[string]float64 {
	ctx := context.Background()
	vc := benchCluster(b, "foreign-secrets", 1, 0)
	harness.WaitReady(b, vc, 1, 0, nil, harness.FormTimeout)
	time.Sleep(10 * time.Second) // the operator's steady state: caches synced, a few passes made
	before := procRSS(b, harness.Op.Pid())
	data := map[string][]byte{"blob": make([]byte, foreignSecretSize)}
	start := time.Now()
	var wg sync.WaitGroup
	work := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range work {
				ns := fmt.Sprintf("foreign-%02d", i%foreignNamespaces)
				s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("team-secret-%04d", i)}, Data: data}
				if err := harness.K8s.Create(ctx, s); err != nil && !isAlreadyExists(err) {
					b.Error(err)
				}
			}
		})
	}
	for i := range foreignNamespaces {
		if err := ensureNS(ctx, fmt.Sprintf("foreign-%02d", i)); err != nil {
			b.Fatal(err)
		}
	}
	for i := range foreignSecrets {
		work <- i
	}
	close(work)
	wg.Wait()
	created := time.Since(start)
	time.Sleep(30 * time.Second)
	after := procRSS(b, harness.Op.Pid())
	b.Logf("%d Secrets of %d KiB created in %s; operator RSS %.1f MB before, %.1f MB after", foreignSecrets, foreignSecretSize>>10, created.Round(time.Second), before, after)
	for i := range foreignNamespaces {
		_ = harness.K8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("foreign-%02d", i)}})
	}
	return map[string]float64{"MB-RSS-before": before, "MB-RSS-after": after, "MB-RSS-growth": after - before}
}
