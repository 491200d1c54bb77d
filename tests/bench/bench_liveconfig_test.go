package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/tests/harness"
)

// BenchmarkLiveConfig measures a change of a live setting on a 3×1 cluster under the 16-slot
// writer, side by side with the roll it replaces: "live" is the time from the ValkeyConfig edit
// (maxmemory) until every node's CONFIG GET reports the new value, "roll" the time from an edit
// of a setting that needs a restart (tcp-backlog) until every pod is replaced and the cluster is
// Ready again; each with its write errors and longest refusal. Reported, never asserted
// (TestLiveConfig asserts).
// Report: go test -run '^$' -bench LiveConfig -benchtime 1x ./tests/bench/
func BenchmarkLiveConfig(b *testing.B) {
	var live, roll time.Duration
	var liveErrors, rollErrors int
	var liveWorst, rollWorst time.Duration
	for range b.N {
		benchRuns++
		ns := fmt.Sprintf("bench-live-%d", benchRuns)
		vc := benchCluster(b, ns, 3, 1)
		harness.WaitReady(b, vc, 3, 1, nil, harness.FormTimeout)

		w, opts := harness.StartClusterWriter(b, vc)
		b.ResetTimer()
		start := time.Now()
		harness.EditConfig(b, ns+"-config", func(c *v1.ValkeyConfig) { c.Spec.Valkey["maxmemory"] = "120mb" })
		harness.WaitLiveSettings(b, vc, map[string]string{"maxmemory": "125829120"}, harness.LiveTimeout)
		took := time.Since(start)
		b.StopTimer()
		time.Sleep(time.Second)
		r := harness.FinishWriter(b, w, vc, opts)
		for _, s := range r.Slots {
			liveErrors += s.Failures
			liveWorst = max(liveWorst, s.LongestRefusal)
		}
		b.Logf("%s: maxmemory live on every node in %s, %d acked writes", ns, took.Round(time.Millisecond), r.Acked)
		live += took

		before := harness.PodNameSet(b, vc)
		w, opts = harness.StartWriterPrefix(b, vc, ns+":roll:")
		b.StartTimer()
		start = time.Now()
		harness.EditConfig(b, ns+"-config", func(c *v1.ValkeyConfig) { c.Spec.Valkey["tcp-backlog"] = "256" })
		harness.WaitRolled(b, vc, 3, 1, before, harness.RollTimeout)
		took = time.Since(start)
		b.StopTimer()
		r = harness.FinishWriter(b, w, vc, opts)
		for _, s := range r.Slots {
			rollErrors += s.Failures
			rollWorst = max(rollWorst, s.LongestRefusal)
		}
		b.Logf("%s: tcp-backlog rolled every pod in %s, %d acked writes", ns, took.Round(100*time.Millisecond), r.Acked)
		roll += took
		_ = harness.K8s.Delete(context.Background(), &corev1.Namespace{ObjectMeta: objectMeta(ns)})
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(live.Seconds()/n, "s/live")
	b.ReportMetric(float64(liveErrors)/n, "write-errors/live")
	b.ReportMetric(float64(liveWorst.Milliseconds()), "ms/longest-refusal-live")
	b.ReportMetric(roll.Seconds()/n, "s/roll")
	b.ReportMetric(float64(rollErrors)/n, "write-errors/roll")
	b.ReportMetric(float64(rollWorst.Milliseconds()), "ms/longest-refusal-roll")
}
