package harness

import (
	"context"
	"strconv"
	"testing"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/valkey"
)

// CheckShardsAgree: by Valkey's own CLUSTER NODES, every replica follows a primary labelled with
// its own shard, and each shard has exactly one primary serving slots.
func CheckShardsAgree(t *testing.T, vc *v1.ValkeyCluster) {
	t.Helper()
	shardOf := map[string]string{} // node id -> shard label
	type view struct {
		pod, shard, primaryID string
		serving               bool
	}
	var views []view
	creds := Creds(t, vc)
	for _, p := range Pods(t, vc) {
		v := valkey.Observe(context.Background(), []string{PodAddr(p)}, creds)[0]
		me, ok := v.Myself()
		if !ok {
			t.Fatalf("%s: %v", p.Name, v.Err)
		}
		shardOf[me.ID] = p.Labels[v1.LabelShard]
		views = append(views, view{p.Name, p.Labels[v1.LabelShard], me.PrimaryID, me.Role == valkey.RolePrimary && len(me.Slots) > 0})
	}
	serving := map[string]int{}
	for _, v := range views {
		if v.serving {
			serving[v.shard]++
		} else if shardOf[v.primaryID] != v.shard {
			t.Errorf("%s of shard %s replicates %.8s of shard %q", v.pod, v.shard, v.primaryID, shardOf[v.primaryID])
		}
	}
	for shard := range int(vc.Spec.Shards) {
		if n := serving[strconv.Itoa(shard)]; n != 1 {
			t.Errorf("shard %d has %d primaries serving slots", shard, n)
		}
	}
}
