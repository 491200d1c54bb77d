package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRegistry(t *testing.T) {
	r := New()
	t0 := time.Unix(1000, 0)
	r.now = func() time.Time { return t0 }
	up := func(down map[int]bool) Cluster {
		return Cluster{Namespace: "team", Name: "vc", State: "Active", Ready: len(down) == 0, NodesWanted: 2, NodesReady: 2, SlotsServed: 16384,
			Shards: 1, ShardsServing: map[int]bool{0: !down[0]},
			Nodes: []Node{
				{Pod: "vc-a", Shard: 0, Up: true, Primary: true, UsedMemory: 1 << 20, MaxMemory: 100 << 20, CommandsProcessed: 42},
				{Pod: "vc-b", Shard: 0, Up: true, LinkUp: true, LagBytes: 7},
			}}
	}
	forming := up(map[int]bool{0: true}) // never served yet: not a recovery
	r.Observe(forming)
	r.Observe(up(nil))
	r.Observe(up(map[int]bool{0: true}))
	t0 = t0.Add(3 * time.Second)
	r.Observe(up(map[int]bool{0: true}))
	t0 = t0.Add(1500 * time.Millisecond)
	r.Observe(up(nil))
	r.Failover("team", "vc", KindForced)
	r.ShardLost("team", "vc", 0)
	r.SlotsMoved("team", "vc", 10, 300)
	r.Pass("team", "vc")
	r.Pass("team", "vc")
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(r); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP valkey_cluster_failover_recovery_seconds Seconds from a shard's slots last being served by a reachable primary of the shard to their being served again, as the operator's passes saw it (about a second apart while a cluster heals).
# TYPE valkey_cluster_failover_recovery_seconds histogram
valkey_cluster_failover_recovery_seconds_bucket{cluster="vc",namespace="team",le="0.5"} 0
valkey_cluster_failover_recovery_seconds_bucket{cluster="vc",namespace="team",le="1"} 0
valkey_cluster_failover_recovery_seconds_bucket{cluster="vc",namespace="team",le="2"} 0
valkey_cluster_failover_recovery_seconds_bucket{cluster="vc",namespace="team",le="3"} 0
valkey_cluster_failover_recovery_seconds_bucket{cluster="vc",namespace="team",le="5"} 1
valkey_cluster_failover_recovery_seconds_bucket{cluster="vc",namespace="team",le="8"} 1
valkey_cluster_failover_recovery_seconds_bucket{cluster="vc",namespace="team",le="10"} 1
valkey_cluster_failover_recovery_seconds_bucket{cluster="vc",namespace="team",le="15"} 1
valkey_cluster_failover_recovery_seconds_bucket{cluster="vc",namespace="team",le="20"} 1
valkey_cluster_failover_recovery_seconds_bucket{cluster="vc",namespace="team",le="30"} 1
valkey_cluster_failover_recovery_seconds_bucket{cluster="vc",namespace="team",le="60"} 1
valkey_cluster_failover_recovery_seconds_bucket{cluster="vc",namespace="team",le="120"} 1
valkey_cluster_failover_recovery_seconds_bucket{cluster="vc",namespace="team",le="300"} 1
valkey_cluster_failover_recovery_seconds_bucket{cluster="vc",namespace="team",le="+Inf"} 1
valkey_cluster_failover_recovery_seconds_sum{cluster="vc",namespace="team"} 4.5
valkey_cluster_failover_recovery_seconds_count{cluster="vc",namespace="team"} 1
# HELP valkey_cluster_reconcile_passes_total Reconcile passes that read the cluster, whatever they did: how often the operator looks at it.
# TYPE valkey_cluster_reconcile_passes_total counter
valkey_cluster_reconcile_passes_total{cluster="vc",namespace="team"} 2
# HELP valkey_cluster_failovers_total Failovers the operator issued, by kind: graceful (CLUSTER FAILOVER), forced (FORCE), takeover (TAKEOVER).
# TYPE valkey_cluster_failovers_total counter
valkey_cluster_failovers_total{cluster="vc",kind="forced",namespace="team"} 1
valkey_cluster_failovers_total{cluster="vc",kind="graceful",namespace="team"} 0
valkey_cluster_failovers_total{cluster="vc",kind="takeover",namespace="team"} 0
# HELP valkey_node_replication_lag_bytes How far a replica's replication offset trails its primary's (replicas only).
# TYPE valkey_node_replication_lag_bytes gauge
valkey_node_replication_lag_bytes{cluster="vc",namespace="team",pod="vc-b",shard="0"} 7
`
	if err := testutil.CollectAndCompare(r, strings.NewReader(want), "valkey_cluster_failover_recovery_seconds", "valkey_cluster_failovers_total", "valkey_cluster_reconcile_passes_total", "valkey_node_replication_lag_bytes"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(r, "valkey_cluster_state"); n != len(States) {
		t.Fatalf("%d state series", n)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
	// A node gone from the observation takes its series with it; a deleted cluster, all of them.
	o := up(nil)
	o.Nodes = o.Nodes[:1]
	r.Observe(o)
	if n := testutil.CollectAndCount(r, "valkey_node_up"); n != 1 {
		t.Fatalf("%d valkey_node_up series after a node left", n)
	}
	r.Forget("team", "vc")
	if n := testutil.CollectAndCount(r); n != 0 {
		t.Fatalf("%d series after the cluster was deleted", n)
	}
	var nilRegistry *Registry
	nilRegistry.Observe(o) // metrics off: no panic
	nilRegistry.Failover("team", "vc", KindForced)
	if got := Names(); len(got) != len(allDescriptions) || got[0] != "valkey_cluster_acl_reload_failures_total" {
		t.Fatalf("names %v", got)
	}
}

// TestShardSeriesOnlyForShardsThatServed: spec.shards alone adds no series. An Invalid cluster
// of 1 000 shards with no pod, and a cluster still forming, have no per-shard series; a formed
// cluster has one per shard that served, from its first pass, at 0; a shard that lost its data
// keeps its series after it is removed; a removed shard that lost nothing loses its series.
func TestShardSeriesOnlyForShardsThatServed(t *testing.T) {
	r := New()
	lost := "valkey_cluster_shards_data_lost_total"
	r.Observe(Cluster{Namespace: "team", Name: "invalid", State: "Invalid", Shards: 1000})
	r.Pass("team", "invalid")
	r.Observe(Cluster{Namespace: "team", Name: "forming", State: "Forming", Shards: 3, ShardsServing: map[int]bool{},
		Nodes: []Node{{Pod: "forming-a", Shard: 0, Up: true, Primary: true}}})
	if n := testutil.CollectAndCount(r, lost); n != 0 {
		t.Fatalf("%d per-shard series for an Invalid and a forming cluster, want none", n)
	}
	if n := testutil.CollectAndCount(r); n > 80 {
		t.Fatalf("%d series for two clusters that serve nothing", n)
	}
	r.Observe(Cluster{Namespace: "team", Name: "vc", State: "Active", Shards: 3, ShardsServing: map[int]bool{0: true, 1: true, 2: true}})
	want := `
# HELP valkey_cluster_shards_data_lost_total Times a shard lost every copy of its data and served its slots again empty.
# TYPE valkey_cluster_shards_data_lost_total counter
valkey_cluster_shards_data_lost_total{cluster="vc",namespace="team",shard="0"} 0
valkey_cluster_shards_data_lost_total{cluster="vc",namespace="team",shard="1"} 0
valkey_cluster_shards_data_lost_total{cluster="vc",namespace="team",shard="2"} 0
`
	if err := testutil.CollectAndCompare(r, strings.NewReader(want), lost); err != nil {
		t.Fatal(err)
	}
	r.ShardLost("team", "vc", 2)
	r.Observe(Cluster{Namespace: "team", Name: "vc", State: "Active", Shards: 1, ShardsServing: map[int]bool{0: true}})
	want = `
# HELP valkey_cluster_shards_data_lost_total Times a shard lost every copy of its data and served its slots again empty.
# TYPE valkey_cluster_shards_data_lost_total counter
valkey_cluster_shards_data_lost_total{cluster="vc",namespace="team",shard="0"} 0
valkey_cluster_shards_data_lost_total{cluster="vc",namespace="team",shard="2"} 1
`
	if err := testutil.CollectAndCompare(r, strings.NewReader(want), lost); err != nil {
		t.Fatal(err)
	}
}
