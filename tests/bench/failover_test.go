package bench

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/tests/harness"
)

// BenchmarkPrimaryDeletedOperatorDown reports TestPrimaryPodDeletedWithOperatorDown's figures on
// a 3x1: the longest run of refused writes on one slot, and the time from the deletion until the
// cluster is Ready again (the new operator's wait for the lease included).
// Report: go test -run '^$' -bench PrimaryDeletedOperatorDown -benchtime 3x ./tests/bench/
func BenchmarkPrimaryDeletedOperatorDown(b *testing.B) {
	var longest, ready time.Duration
	for range b.N {
		benchRuns++
		vc := harness.ActiveCluster(b, fmt.Sprintf("bench-nooperator-%d", benchRuns), 3, 1)
		harness.WaitReady(b, vc, 3, 1, nil, harness.FormTimeout)
		w, opts := harness.StartClusterWriter(b, vc)
		victim := harness.PodWithRole(b, vc, v1.NodeRolePrimary)
		start := time.Now()
		harness.Op.Kill(syscall.SIGKILL)
		if err := harness.K8s.Delete(context.Background(), &corev1.Pod{ObjectMeta: harness.ObjectMetaNS(vc.Namespace, victim)}); err != nil {
			b.Fatal(err)
		}
		harness.RestartOperator(b)
		at := harness.WaitReady(b, vc, 3, 1, map[string]bool{victim: true}, harness.HealTimeout)
		r := harness.FinishWriter(b, w, vc, opts)
		l, _ := r.LongestRefusal()
		longest += l
		ready += at.Sub(start)
	}
	n := float64(b.N)
	b.ReportMetric(longest.Seconds()/n, "s/longest-refusal")
	b.ReportMetric(ready.Seconds()/n, "s/ready-again")
}

// BenchmarkPrimaryKilledValkeyAlone is BenchmarkPrimaryKilled without the operator: it is
// stopped before the kill and started again once the writer's slots are served, so what the
// writer measures is Valkey's own failover (the replica's election after cluster-node-timeout,
// 5 s), which the original waits for ("primary unhealthy but replicas exist, waiting for
// auto-failover"), where ours promotes the synced replica with CLUSTER FAILOVER FORCE as soon as
// the primary's container is gone.
// Report: go test -run '^$' -bench 'PrimaryKilled' -benchtime 3x ./tests/bench/
func BenchmarkPrimaryKilledValkeyAlone(b *testing.B) {
	var refusal time.Duration
	lost := 0
	for range b.N {
		b.StopTimer()
		benchRuns++
		vc := benchCluster(b, fmt.Sprintf("bench-alone-%d", benchRuns), 3, 1)
		harness.WaitReady(b, vc, 3, 1, nil, harness.FormTimeout)
		w, opts := harness.StartClusterWriter(b, vc)
		victim := harness.PodWithRole(b, vc, v1.NodeRolePrimary)
		harness.Op.Kill(syscall.SIGKILL)
		b.StartTimer()
		if err := harness.Cluster.Kubelet.KillPod(vc.Namespace, victim); err != nil {
			b.Fatal(err)
		}
		// Every slot served again, by Valkey alone: the writer has acknowledged writes on each
		// of its slots since the kill.
		if err := w.WaitAcked(20, time.Minute); err != nil {
			b.Error(err)
		}
		b.StopTimer()
		r, err := w.Report(context.Background(), harness.ClusterWriterOptions(b, vc, opts.Prefix))
		if err != nil {
			b.Fatal(err)
		}
		w.Close()
		b.Log(r.String())
		d, _ := r.LongestRefusal()
		refusal += d
		lost += r.LostReplicated + r.LostUnreplicated
		harness.RestartOperator(b)
		harness.WaitReady(b, vc, 3, 1, map[string]bool{victim: true}, harness.HealTimeout)
		_ = harness.K8s.Delete(context.Background(), &corev1.Namespace{ObjectMeta: objectMeta(vc.Namespace)})
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(refusal.Seconds()/n, "s/longest-refusal")
	b.ReportMetric(float64(lost)/n, "keys-lost/kill")
}
