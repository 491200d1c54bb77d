package valkey

import "testing"

func TestNodeViewAccessors(t *testing.T) {
	entries, err := ParseClusterNodes(readFixture(t, "cluster_nodes_formed.txt"))
	if err != nil {
		t.Fatal(err)
	}
	v := NodeView{
		Nodes:       entries,
		ClusterInfo: ParseInfo("cluster_state:ok\r\ncluster_slots_assigned:16384\r\n"),
		Replication: ParseInfo("# Replication\r\nrole:slave\r\nmaster_link_status:up\r\nmaster_repl_offset:4242\r\n"),
	}
	if me, ok := v.Myself(); !ok || me.ID != idA {
		t.Errorf("Myself = %s, %v", me.ID, ok)
	}
	if !v.ClusterStateOK() || !v.ReplicaLinkUp() {
		t.Errorf("ClusterStateOK %v, ReplicaLinkUp %v", v.ClusterStateOK(), v.ReplicaLinkUp())
	}
	if off, ok := v.ReplicationOffset(); !ok || off != 4242 {
		t.Errorf("ReplicationOffset = %d, %v", off, ok)
	}

	// An unreachable node's view answers "no" / "unknown", never panics.
	var dead NodeView
	if _, ok := dead.Myself(); ok || dead.ClusterStateOK() || dead.ReplicaLinkUp() {
		t.Error("empty view claims something")
	}
	if _, ok := dead.ReplicationOffset(); ok {
		t.Error("empty view has an offset")
	}
	down := NodeView{ClusterInfo: map[string]string{"cluster_state": "fail"}, Replication: map[string]string{"master_link_status": "down"}}
	if down.ClusterStateOK() || down.ReplicaLinkUp() {
		t.Error("fail/down read as ok/up")
	}
}

// INFO keyspace of Valkey 9.1.2 counts the keys with expiring hash fields per database
// (keys_with_volatile_items); Valkey 8 prints no such field.
func TestVolatileItemKeys(t *testing.T) {
	v := NodeView{Replication: ParseInfo("# Keyspace\r\ndb0:keys=2007,expires=1,avg_ttl=976976,keys_with_volatile_items=2\r\n" +
		"db3:keys=4,expires=0,avg_ttl=0,keys_with_volatile_items=1\r\n# Server\r\ndbfilename:x\r\n")}
	if n := v.VolatileItemKeys(); n != 3 {
		t.Errorf("%d keys with volatile items, want 3", n)
	}
	v8 := NodeView{Replication: ParseInfo("# Keyspace\r\ndb0:keys=10,expires=0,avg_ttl=0\r\n")}
	if n := v8.VolatileItemKeys(); n != 0 {
		t.Errorf("Valkey 8: %d", n)
	}
}
