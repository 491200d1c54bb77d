package formation

import (
	"context"
	"testing"
	"time"

	"github.com/gomomento/valkey-operator/tests/harness"
	"github.com/gomomento/valkey-operator/tests/localcluster"
	"github.com/gomomento/valkey-operator/valkey"
)

// TestValkey9Formation: a cluster whose ValkeyImage is valkey/valkey:9.1.2 (version 9.1.2) forms
// and becomes Ready on real Valkey 9.1.2 servers, which the local cluster runs for that tag; the
// rendered config carries the 9.x-only shutdown-on-sigterm failover, which 8.0.1 would refuse.
// Valkey itself is asked: every node reports valkey_version 9.1.2 and cluster_state ok, and keys
// written through a cluster client are read back (verifyValkey).
func TestValkey9Formation(t *testing.T) {
	const ns = "valkey9"
	version := localcluster.Valkey9Version
	got := harness.ActiveCluster(t, ns, 3, 1, version)
	harness.VerifyValkey(t, got, 3, 1)
	harness.WaitReady(t, got, 3, 1, nil, time.Minute)

	creds := harness.Creds(t, got)
	pods := harness.Pods(t, got)
	for _, p := range pods {
		c, err := valkey.NewClient(harness.PodAddr(p), creds)
		if err != nil {
			t.Fatal(err)
		}
		info, err := c.Info(context.Background(), "server")
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if info["valkey_version"] != version {
			t.Errorf("pod %s (image %s): valkey_version %q, want %s", p.Name, p.Spec.Containers[0].Image, info["valkey_version"], version)
		}
	}
	t.Logf("%d pods of image %s run Valkey %s", len(pods), pods[0].Spec.Containers[0].Image, version)
}
