package bench

import (
	"fmt"
	"testing"

	"github.com/gomomento/valkey-operator/tests/harness"
)

// BenchmarkZoneLoss runs the zone loss drill (harness.ZoneLossDrill, every check of
// TestZoneLossDrill included) on a 3x1 and a 6x1 (at most two primaries per zone; kept out of
// make test for its 4 min) and reports its timings: how long a slot refused writes after a zone
// was lost, until every slot took writes again, until Ready on the zones left, and until the
// spread held again once the zone returned.
// Report: go test -run '^$' -bench ZoneLoss -benchtime 1x ./tests/bench/
func BenchmarkZoneLoss(b *testing.B) {
	for _, shards := range []int32{3, 6} {
		b.Run(fmt.Sprintf("%dx1", shards), func(b *testing.B) {
			var sum harness.ZoneDrill
			for range b.N {
				benchRuns++
				d := harness.ZoneLossDrill(b, fmt.Sprintf("bench-zone-loss-%d", benchRuns), shards)
				sum.Outage.Longest += d.Outage.Longest
				sum.Outage.AllAcked += d.Outage.AllAcked
				sum.StateOK += d.StateOK
				sum.ReadyAgain += d.ReadyAgain
				sum.SpreadAgain += d.SpreadAgain
				sum.ReturnLongest += d.ReturnLongest
			}
			n := float64(b.N)
			b.ReportMetric(sum.Outage.Longest.Seconds()/n, "s/longest-refusal")
			b.ReportMetric(sum.Outage.AllAcked.Seconds()/n, "s/all-slots-acked")
			b.ReportMetric(sum.StateOK.Seconds()/n, "s/state-ok")
			b.ReportMetric(sum.ReadyAgain.Seconds()/n, "s/ready-zone-down")
			b.ReportMetric(sum.SpreadAgain.Seconds()/n, "s/spread-after-return")
			b.ReportMetric(sum.ReturnLongest.Seconds()/n, "s/longest-refusal-on-return")
		})
	}
}
