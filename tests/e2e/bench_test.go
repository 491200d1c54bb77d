package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// BenchmarkApplyToActive measures, on the local cluster with the real operator, the time from
// creating a ValkeyCluster to status.state Active, split into pod start (create until every
// desired pod is Running with an IP: scheduler + kubelet + process start, with the operator's
// pod creation in it) and operator time (the rest: meet, slots, replicas, agreement, status).
// Report: go test -run '^$' -bench ApplyToActive -benchtime 3x ./tests/e2e/
func BenchmarkApplyToActive(b *testing.B) {
	ctx := context.Background()
	img, cfg := newImage("bench-image"), newConfig("bench-config", "bench-image")
	for _, o := range []client.Object{img, cfg} {
		if err := k8s.Create(ctx, o); err != nil && !isAlreadyExists(err) {
			b.Fatal(err)
		}
	}
	for _, shape := range []struct{ shards, replicas int32 }{{3, 1}, {10, 1}} {
		b.Run(fmt.Sprintf("%dx%d", shape.shards, shape.replicas), func(b *testing.B) {
			var pods, total time.Duration
			for range b.N {
				benchRuns++
				ns := fmt.Sprintf("bench-%dx%d-%d", shape.shards, shape.replicas, benchRuns)
				if err := ensureNS(ctx, ns); err != nil {
					b.Fatal(err)
				}
				vc := newCluster(ns, "vc", "bench-config", withShards(shape.shards), withReplicas(shape.replicas))
				start := time.Now()
				if err := k8s.Create(ctx, vc); err != nil {
					b.Fatal(err)
				}
				want := int(shape.shards * (shape.replicas + 1))
				var podsUp time.Duration
				deadline := start.Add(formTimeout)
				for {
					if podsUp == 0 && runningPods(ctx, vc) == want {
						podsUp = time.Since(start)
					}
					var got v1.ValkeyCluster
					if err := k8s.Get(ctx, client.ObjectKeyFromObject(vc), &got); err == nil && got.Status.State == v1.StateActive {
						break
					}
					if time.Now().After(deadline) {
						b.Fatalf("%s not Active after %s", ns, formTimeout)
					}
					time.Sleep(50 * time.Millisecond)
				}
				elapsed := time.Since(start)
				total += elapsed
				pods += podsUp
				b.StopTimer()
				_ = k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: objectMeta(ns)})
				b.StartTimer()
			}
			b.ReportMetric(total.Seconds()/float64(b.N), "s/active")
			b.ReportMetric(pods.Seconds()/float64(b.N), "s/pods-running")
			b.ReportMetric((total-pods).Seconds()/float64(b.N), "s/operator")
		})
	}
}

// benchRuns numbers the benchmark's namespaces: the framework calls a benchmark more than
// once, and a namespace being deleted cannot be reused.
var benchRuns int

func runningPods(ctx context.Context, vc *v1.ValkeyCluster) int {
	var list corev1.PodList
	if err := k8s.List(ctx, &list, client.InNamespace(vc.Namespace), client.MatchingLabels{v1.LabelCluster: vc.Name}); err != nil {
		return -1
	}
	n := 0
	for _, p := range list.Items {
		if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
			n++
		}
	}
	return n
}
