package harness

import (
	"math"
	"strconv"
	"testing"
)

// TestQuantilesOfADelta: the quantiles are those of the observations between the scrapes only,
// interpolated within a bucket as histogram_quantile does.
func TestQuantilesOfADelta(t *testing.T) {
	scrape := func(a, b, c, inf int) []byte {
		return []byte(`# HELP controller_runtime_reconcile_time_seconds Length of time per reconciliation per controller
controller_runtime_reconcile_time_seconds_bucket{controller="other",le="0.1"} 999
controller_runtime_reconcile_time_seconds_bucket{controller="valkeycluster",le="0.1"} ` + itoa(a) + `
controller_runtime_reconcile_time_seconds_bucket{controller="valkeycluster",le="0.2"} ` + itoa(b) + `
controller_runtime_reconcile_time_seconds_bucket{controller="valkeycluster",le="0.4"} ` + itoa(c) + `
controller_runtime_reconcile_time_seconds_bucket{controller="valkeycluster",le="+Inf"} ` + itoa(inf) + `
controller_runtime_reconcile_time_seconds_sum{controller="valkeycluster"} 12
`)
	}
	const sel = `controller="valkeycluster"`
	before := ParseHistogram(scrape(1000, 1000, 1000, 1000), "controller_runtime_reconcile_time_seconds", sel)
	if len(before) != 4 || before[math.Inf(1)] != 1000 {
		t.Fatalf("parsed %v", before)
	}
	// 100 more: 50 under 0.1 s, 40 in (0.1, 0.2], 10 in (0.2, 0.4].
	after := ParseHistogram(scrape(1050, 1090, 1100, 1100), "controller_runtime_reconcile_time_seconds", sel)
	p50, p99, n := Quantiles(before, after)
	if n != 100 || math.Abs(p50-100) > 1e-9 || math.Abs(p99-380) > 1e-9 {
		t.Fatalf("p50 %v ms, p99 %v ms, n %d; want 100, 380, 100", p50, p99, n)
	}
	if _, _, n := Quantiles(after, after); n != 0 {
		t.Fatalf("no observation between two equal scrapes, got %d", n)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
