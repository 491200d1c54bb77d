package bench

import (
	"fmt"
	"testing"
	"time"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/tests/harness"
	"github.com/gomomento/valkey-operator/valkey"
)

// BenchmarkTwoPrimariesCut reports TestQuorumLossByNetworkCut's timings on the plaintext 3x1:
// from the cut to the operator's TAKEOVER line, to every reachable node saying cluster_state:ok,
// and the longest run of refused writes on one slot. Valkey itself sets a floor under the last
// two: the reachable nodes flag the cut primaries only cluster-node-timeout (5 s) after the cut,
// and a primary that was in the minority waits that long again (its rejoin delay, at most 5 s)
// before it serves once the majority is back.
// Report: go test -run '^$' -bench TwoPrimariesCut -benchtime 3x ./tests/bench/
func BenchmarkTwoPrimariesCut(b *testing.B) {
	var takeover, serving, longest time.Duration
	for range b.N {
		benchRuns++
		c := harness.CutCluster{Name: "plaintext", Make: func(t testing.TB, ns string) (*v1.ValkeyCluster, func(*v1.ValkeyCluster) valkey.Credentials, harness.WriterOptions, func(*v1.ValkeyCluster)) {
			vc := harness.ActiveCluster(t, ns, 3, 1)
			creds := func(vc *v1.ValkeyCluster) valkey.Credentials { return harness.Creds(t, vc) }
			return vc, creds, harness.ClusterWriterOptions(t, vc, "cut:"), func(vc *v1.ValkeyCluster) { harness.VerifyValkey(t, vc, 3, 1) }
		}}
		m := harness.QuorumLossByNetworkCut(b, fmt.Sprintf("bench-cut-%d", benchRuns), c)
		takeover += m.Takeover
		serving += m.Serving
		longest += m.Longest
	}
	n := float64(b.N)
	b.ReportMetric(takeover.Seconds()/n, "s/takeover")
	b.ReportMetric(serving.Seconds()/n, "s/serving-again")
	b.ReportMetric(longest.Seconds()/n, "s/longest-refusal")
}
