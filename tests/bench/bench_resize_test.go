package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/tests/harness"
)

// BenchmarkResize measures a memory change on a 3×1 cluster under the 16-slot writer, side by
// side with the roll it replaces: "inplace" is the time from the ValkeyConfig edit (256Mi →
// 512Mi, maxmemory 300mb) until every pod's kubelet reports 512Mi in force and every node runs
// the new maxmemory; "roll" the time from a second edit (512Mi → 1Gi: past what a pod's data
// volume was sized for, so every node is replaced, as the original replaces them for any
// resources change) until every pod is replaced and the cluster is Ready again; each with its
// write errors and longest refusal. Reported, never asserted (TestResizeInPlace asserts).
// Report: go test -run '^$' -bench Resize -benchtime 1x ./tests/bench/
func BenchmarkResize(b *testing.B) {
	var inPlace, roll time.Duration
	var inPlaceErrors, rollErrors int
	var inPlaceWorst, rollWorst time.Duration
	for range b.N {
		benchRuns++
		ns := fmt.Sprintf("bench-resize-%d", benchRuns)
		vc := benchCluster(b, ns, 3, 1)
		harness.WaitReady(b, vc, 3, 1, nil, harness.FormTimeout)
		harness.WaitPrimariesSpread(b, vc)
		before := harness.PodNameSet(b, vc)

		w, opts := harness.StartClusterWriter(b, vc)
		b.ResetTimer()
		start := time.Now()
		harness.EditConfig(b, ns+"-config", func(c *v1.ValkeyConfig) {
			c.Spec.Resources.Memory = ptr.To(resource.MustParse("512Mi"))
			c.Spec.Valkey["maxmemory"] = "300mb"
		})
		waitMemoryInForce(b, vc, "512Mi")
		harness.WaitLiveSettings(b, vc, map[string]string{"maxmemory": "314572800"}, harness.LiveTimeout)
		took := time.Since(start)
		b.StopTimer()
		time.Sleep(time.Second)
		r := harness.FinishWriter(b, w, vc, opts)
		for _, s := range r.Slots {
			inPlaceErrors += s.Failures
			inPlaceWorst = max(inPlaceWorst, s.LongestRefusal)
		}
		for name := range harness.PodNameSet(b, vc) {
			if !before[name] {
				b.Errorf("%s: pod %s created by an in-place resize", ns, name)
			}
		}
		b.Logf("%s: 512Mi in force and maxmemory live on every node in %s, %d acked writes", ns, took.Round(time.Millisecond), r.Acked)
		inPlace += took

		w, opts = harness.StartWriterPrefix(b, vc, ns+":roll:")
		b.StartTimer()
		start = time.Now()
		harness.EditConfig(b, ns+"-config", func(c *v1.ValkeyConfig) { c.Spec.Resources.Memory = ptr.To(resource.MustParse("1Gi")) })
		harness.WaitRolled(b, vc, 3, 1, before, harness.RollTimeout)
		took = time.Since(start)
		b.StopTimer()
		r = harness.FinishWriter(b, w, vc, opts)
		for _, s := range r.Slots {
			rollErrors += s.Failures
			rollWorst = max(rollWorst, s.LongestRefusal)
		}
		b.Logf("%s: 1Gi rolled every pod in %s, %d acked writes", ns, took.Round(100*time.Millisecond), r.Acked)
		roll += took
		_ = harness.K8s.Delete(context.Background(), &corev1.Namespace{ObjectMeta: objectMeta(ns)})
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(inPlace.Seconds()/n, "s/inplace")
	b.ReportMetric(float64(inPlaceErrors)/n, "write-errors/inplace")
	b.ReportMetric(float64(inPlaceWorst.Milliseconds()), "ms/longest-refusal-inplace")
	b.ReportMetric(roll.Seconds()/n, "s/roll")
	b.ReportMetric(float64(rollErrors)/n, "write-errors/roll")
	b.ReportMetric(float64(rollWorst.Milliseconds()), "ms/longest-refusal-roll")
}

// waitMemoryInForce waits until every pod of vc runs memory, as its kubelet reports.
func waitMemoryInForce(b *testing.B, vc *v1.ValkeyCluster, memory string) {
	b.Helper()
	harness.WaitFor(b, "every pod at "+memory, 2*time.Minute, func() string {
		for _, p := range harness.Pods(b, vc) {
			if got := harness.MemoryInForce(p); got != memory {
				return fmt.Sprintf("%s runs %s", p.Name, got)
			}
		}
		return ""
	})
}
