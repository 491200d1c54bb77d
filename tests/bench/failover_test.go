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
