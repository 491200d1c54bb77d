package formation

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
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
	harness.SetupNamespace(t, ns)
	img := harness.NewImage(ns + "-image")
	img.Spec.Tag, img.Spec.Version = version, version
	harness.Create(t, img, harness.NewConfig(ns+"-config", ns+"-image"))
	vc := harness.NewCluster(ns, "vc", ns+"-config", harness.WithShards(3), harness.WithReplicas(1))
	harness.Create(t, vc)
	got, err := harness.WaitState(context.Background(), harness.K8s, client.ObjectKeyFromObject(vc), v1.StateActive, harness.FormTimeout)
	if err != nil {
		t.Fatal(err)
	}
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
	t.Logf("%d pods of image %s run Valkey %s", len(pods), img.Spec.Image(), version)
}
