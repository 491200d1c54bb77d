package formation

import (
	"testing"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/tests/harness"
)

// TestMaxclientsTooLow: a ValkeyConfig whose maxclients cannot hold the cluster's own bus links
// (Valkey counts them in it) makes the cluster Invalid with the reason, before any pod exists;
// raising it brings the cluster up. Seen by the break test before: maxclients 16 and a 3 -> 4
// reshard, every node refusing every new connection and then every pod killed.
func TestMaxclientsTooLow(t *testing.T) {
	const ns = "maxclients-low"
	harness.SetupNamespace(t, ns)
	cfg := harness.NewConfig(ns+"-config", ns+"-image")
	cfg.Spec.Valkey["maxclients"] = "20"
	harness.Create(t, harness.NewImage(ns+"-image"), cfg)
	vc := harness.NewCluster(ns, "vc", ns+"-config", harness.WithShards(2), harness.WithReplicas(1))
	harness.Create(t, vc)
	harness.WaitStateMessage(t, vc, v1.StateInvalid, "maxclients 20 is too low for 4 nodes: Valkey counts the cluster bus links (2 per other node) in it; set at least 38")
	if pods := harness.Pods(t, vc); len(pods) != 0 {
		t.Fatalf("%d pods created for an Invalid cluster", len(pods))
	}
	harness.EditConfig(t, ns+"-config", func(c *v1.ValkeyConfig) { c.Spec.Valkey["maxclients"] = "64" })
	harness.WaitReady(t, vc, 2, 1, nil, harness.FormTimeout)
}
