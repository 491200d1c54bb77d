package formation

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/tests/harness"
	"github.com/gomomento/valkey-operator/tests/localcluster"
)

// verifyDNS checks the names that TLS nodes will announce and clients will verify, through the
// local cluster's CoreDNS: every pod is {pod}.{cluster}.{namespace}.svc.cluster.local (the
// operator's headless Service and the pods' hostname and subdomain), and a valkey-go cluster
// client seeded with the Service's name alone, dialling through the cluster DNS, reaches the
// cluster.
func verifyDNS(t *testing.T, vc *v1.ValkeyCluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := harness.Cluster.Resolver()
	for _, p := range harness.Pods(t, vc) {
		name := p.Name + "." + vc.Name + "." + vc.Namespace + ".svc." + localcluster.ClusterDomain
		got, err := r.LookupHost(ctx, name)
		if err != nil || len(got) != 1 || got[0] != p.Status.PodIP {
			t.Fatalf("%s: %v, %v; want the pod's IP %s", name, got, err, p.Status.PodIP)
		}
	}
	creds := harness.Creds(t, vc)
	c, err := valkeygo.NewClient(valkeygo.ClientOption{
		InitAddress: []string{net.JoinHostPort(vc.Name+"."+vc.Namespace+".svc."+localcluster.ClusterDomain, "6379")},
		Username:    creds.Username, Password: creds.Password,
		DisableCache: true, Dialer: *harness.Cluster.Dialer(),
	})
	if err != nil {
		t.Fatalf("cluster client through the Service's name: %v", err)
	}
	defer c.Close()
	if info, err := c.Do(ctx, c.B().ClusterInfo().Build()).ToString(); err != nil || !strings.Contains(info, "cluster_state:ok") {
		t.Fatalf("CLUSTER INFO through the Service's name: %v\n%s", err, info)
	}
}
