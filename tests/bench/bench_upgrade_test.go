package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/slot"
	"github.com/gomomento/valkey-operator/tests/harness"
	"github.com/gomomento/valkey-operator/tests/localcluster"
)

// BenchmarkUpgrade8To9 measures a rolling upgrade of a 3×1 cluster from Valkey 8.0.1 to 9.1.2
// (the ValkeyConfig's imageRef repointed) under the 16-slot writer: the time from the edit until
// every node is replaced, the cluster Active and Ready and Valkey agrees; per shard the writes
// that failed and the longest time one of its slots refused writes. The goal is 0 errors and at
// most 100 ms; reported, never asserted (the e2e tests assert the data).
// Report: go test -run '^$' -bench Upgrade8To9 -benchtime 3x ./tests/bench/
func BenchmarkUpgrade8To9(b *testing.B) {
	var total, worst time.Duration
	errors := 0
	for range b.N {
		benchRuns++
		ns := fmt.Sprintf("bench-upgrade-%d", benchRuns)
		vc := benchCluster(b, ns, 3, 1)
		harness.WaitReady(b, vc, 3, 1, nil, harness.FormTimeout)
		nine := harness.NewImage(ns + "-image9")
		nine.Spec.Tag, nine.Spec.Version = localcluster.Valkey9Version, localcluster.Valkey9Version
		if err := harness.K8s.Create(context.Background(), nine); err != nil && !isAlreadyExists(err) {
			b.Fatal(err)
		}
		before := harness.PodNameSet(b, vc)
		w, opts := harness.StartClusterWriter(b, vc)
		b.ResetTimer()
		start := time.Now()
		harness.EditConfig(b, ns+"-config", func(c *v1.ValkeyConfig) { c.Spec.ImageRef = nine.Name })
		harness.WaitRolled(b, vc, 3, 1, before, harness.RollTimeout)
		took := time.Since(start)
		b.StopTimer()
		r := harness.FinishWriter(b, w, vc, opts)
		spread := slot.EvenSpread(3)
		perShard := make([]struct {
			errors  int
			longest time.Duration
		}, 3)
		for _, s := range r.Slots {
			for i, rg := range spread {
				if s.Slot >= rg.Start && s.Slot <= rg.End {
					perShard[i].errors += s.Failures
					perShard[i].longest = max(perShard[i].longest, s.LongestRefusal)
				}
			}
			errors += s.Failures
			worst = max(worst, s.LongestRefusal)
		}
		for i, s := range perShard {
			b.Logf("%s shard %d: %d write errors, longest refusal %s", ns, i, s.errors, s.longest.Round(time.Millisecond))
		}
		b.Logf("%s: 8.0.1 -> %s in %s, %d acked writes, %d lost", ns, localcluster.Valkey9Version, took.Round(100*time.Millisecond), r.Acked, r.LostReplicated+r.LostUnreplicated)
		total += took
		_ = harness.K8s.Delete(context.Background(), &corev1.Namespace{ObjectMeta: objectMeta(ns)})
		_ = harness.K8s.Delete(context.Background(), nine)
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(total.Seconds()/n, "s/upgrade")
	b.ReportMetric(float64(errors)/n, "write-errors/upgrade")
	b.ReportMetric(float64(worst.Milliseconds()), "ms/longest-refusal")
}
