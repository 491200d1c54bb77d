package valkey

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/gomomento/valkey-operator/valkey/valkeytest"
)

// The connection's buffers (4 KiB each way) and ring (16 commands) are sized for the operator's
// usual traffic; neither may bound what a reply or the callers can be: an observation of a node
// of a 500-node cluster (a CLUSTER NODES reply of ~60 KB, an INFO of ~20 KB), and more callers at
// once than the ring holds, all read back whole.
func TestLargeRepliesAndManyCallersOnSmallBuffers(t *testing.T) {
	ctx := context.Background()
	fleet := valkeytest.New()
	const addr = "10.0.0.1:6379"
	node := valkeytest.Simulate(fleet.Node(addr), strings.Repeat("a", 40), "10.0.0.1")
	var nodes strings.Builder
	fmt.Fprintf(&nodes, "%s 10.0.0.1:6379@16379 myself,master - 0 0 1 connected 0-16383\n", strings.Repeat("a", 40))
	for i := range 499 {
		fmt.Fprintf(&nodes, "%040x 10.0.%d.%d:6379@16379 slave %s 0 1700000000000 1 connected\n", i+1, i/250, i%250+2, strings.Repeat("a", 40))
	}
	node.On("CLUSTER NODES", valkeytest.Str(nodes.String()))
	info := "# Server\r\nvalkey_version:8.0.1\r\n# Replication\r\nrole:master\r\nconnected_slaves:499\r\n"
	for i := range 499 {
		info += fmt.Sprintf("slave%d:ip=10.0.%d.%d,port=6379,state=online,offset=123456789,lag=0\r\n", i, i/250, i%250+2)
	}
	node.On("INFO", valkeytest.Str(info))

	c, err := Dialer(fleet.Dial).NewClient(addr, Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	v := observeWith(ctx, c, NodeView{Addr: addr})
	if !v.Reachable || len(v.Nodes) != 500 || v.Replication["connected_slaves"] != "499" || v.Replication["slave498"] == "" {
		t.Fatalf("observation of a 500-node cluster: reachable %v, %d nodes, %q replicas, err %v", v.Reachable, len(v.Nodes), v.Replication["connected_slaves"], v.Err)
	}

	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 64 {
		wg.Go(func() {
			entries, err := c.ClusterNodes(ctx)
			if err == nil && len(entries) != 500 {
				err = fmt.Errorf("%d entries", len(entries))
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("64 callers at once on one connection: %v", err)
		}
	}
}
