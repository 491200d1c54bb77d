package zones

import (
	"testing"

	"github.com/gomomento/valkey-operator/tests/harness"
)

// The zone loss drill is the package's longest test (about 2 min on a 3×1; the 6×1, 4 min more,
// runs in make bench: BenchmarkZoneLoss/6x1). Tests run in the order of their files' names and
// each lane claims the next free one, so it lives in a file that sorts early: started late, it
// left one lane running it alone for minutes after the others had ended. Its helpers are in
// zoneloss_test.go.

// TestZoneLossDrill: a cluster spread over three zones (placement.zoneSpread required) loses a
// whole zone holding a primary, under a writer acknowledging with WAIT 1, then gets it back:
//
//  1. formed and Ready, the spread holds, from Valkey's own CLUSTER NODES joined with each pod's
//     node and that node's zone: each shard's members in distinct zones, pods per zone within one
//     of each other, at most ceil(shards/3) primaries per zone;
//  2. the writer starts;
//  3. the Kubernetes node of a zone holding a primary loses power (its pods die at once, the Node
//     goes NotReady, the pods stay Running in the API);
//  4. the survivors say cluster_state:ok again through Valkey's own failover (no TAKEOVER: a
//     majority of primaries survives); the refusal window is reported, not asserted;
//  5. Ready again on the two zones left, and no shard has two live members in one zone;
//  6. the zone returns; with no manual step the spread of step 1 holds again;
//  7. every acknowledged key reads back: none that a replica acknowledged is lost.
func TestZoneLossDrill(t *testing.T) {
	harness.ZoneLossDrill(t, "zone-loss-3x1", 3)
}
