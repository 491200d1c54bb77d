package valkey

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	valkeygo "github.com/valkey-io/valkey-go"

	"github.com/gomomento/valkey-operator/liveconf"
	"github.com/gomomento/valkey-operator/logging"
)

// NodeView is what one node said about the cluster during one Observe. A
// node that did not answer is in the result with Reachable false and the
// reason in Err: unknown is not absent, and the caller must not read a
// silent node as a node that is gone.
type NodeView struct {
	// Addr is the address that was queried, as given to Observe.
	Addr string
	// Reachable is true only when every query succeeded. When it is false
	// the fields below hold whatever did arrive and must not be trusted
	// as a whole.
	Reachable bool
	// Err is the first error met (connection, a query, or parsing).
	Err error
	// ID is the node's own id, from the "myself" entry of Nodes.
	ID string
	// Nodes is the node's CLUSTER NODES, parsed.
	Nodes []NodeEntry
	// ClusterInfo is the node's CLUSTER INFO, parsed.
	ClusterInfo map[string]string
	// Replication is the node's INFO replication, parsed (asked together with INFO server,
	// memory, clients and stats, whose fields it also holds: see Stats).
	Replication map[string]string
	// Version is the node's valkey_version (INFO server): what a slot move between two nodes
	// depends on (a server refuses the DUMP payloads of a newer major).
	Version string
	// Config is the node's CONFIG GET of the settings applied live (liveconf.Keys), nil when it
	// could not be read (ConfigErr): a node whose operator user may not CONFIG GET yet (its ACL
	// is reloaded by the ACL loop) is still reachable, its settings only unknown.
	Config    map[string]string
	ConfigErr error
}

// Myself returns the node's own CLUSTER NODES entry.
func (v NodeView) Myself() (NodeEntry, bool) { return Myself(v.Nodes) }

// ServesSlots reports whether the node answered and says it is a primary holding slots.
func (v NodeView) ServesSlots() bool {
	me, _ := v.Myself()
	return v.Reachable && me.Role == RolePrimary && len(me.Slots) > 0
}

// ClusterStateOK reports whether the node says cluster_state:ok.
func (v NodeView) ClusterStateOK() bool { return v.ClusterInfo["cluster_state"] == "ok" }

// ReplicaLinkUp reports whether the node is a replica whose link to its
// primary is up (master_link_status:up). A replica that is attached but not
// yet synced holds no data and refuses to fail over.
func (v NodeView) ReplicaLinkUp() bool { return v.Replication["master_link_status"] == "up" }

// ReplicationOffset returns master_repl_offset from INFO replication: on a
// replica, how much of its primary's stream it has applied. Of the replicas
// of one shard, the one with the largest offset is the most up to date and
// the one to promote. ok is false when the field is missing or malformed.
func (v NodeView) ReplicationOffset() (offset int64, ok bool) {
	n, err := strconv.ParseInt(v.Replication["master_repl_offset"], 10, 64)
	return n, err == nil
}

// VolatileItemKeys is the number of keys whose items expire one by one (hash fields with a TTL,
// Valkey 9), summed over the node's databases (INFO keyspace: keys_with_volatile_items): data a
// Valkey 8 node can neither load in a full sync nor receive as commands. 0 on Valkey 8, which
// has no such keys and does not print the field.
func (v NodeView) VolatileItemKeys() int64 {
	var n int64
	for k, line := range v.Replication {
		if !strings.HasPrefix(k, "db") {
			continue
		}
		for _, kv := range strings.Split(line, ",") {
			if name, val, ok := strings.Cut(kv, "="); ok && name == "keys_with_volatile_items" {
				x, _ := strconv.ParseInt(val, 10, 64)
				n += x
			}
		}
	}
	return n
}

// NodeStats are the figures of INFO memory, clients and stats that the operator's metrics report
// (package metrics, valkey_node_*). A field the node did not print is 0.
type NodeStats struct {
	UsedMemory, MaxMemory, ConnectedClients                                   int64
	CommandsProcessed, KeyspaceHits, KeyspaceMisses, EvictedKeys, ExpiredKeys int64
}

// Stats reads NodeStats from the node's INFO.
func (v NodeView) Stats() NodeStats {
	n := func(k string) int64 {
		x, _ := strconv.ParseInt(v.Replication[k], 10, 64)
		return x
	}
	return NodeStats{
		UsedMemory: n("used_memory"), MaxMemory: n("maxmemory"), ConnectedClients: n("connected_clients"),
		CommandsProcessed: n("total_commands_processed"), KeyspaceHits: n("keyspace_hits"), KeyspaceMisses: n("keyspace_misses"),
		EvictedKeys: n("evicted_keys"), ExpiredKeys: n("expired_keys"),
	}
}

// Observe queries every address concurrently, each over its own short-lived
// Client (Pool.Observe keeps them open across calls), with CLUSTER NODES, CLUSTER INFO and INFO server and replication, and
// returns one NodeView per address in the order given. It never fails as a
// whole: each view carries its own outcome. Duplicate addresses are
// queried once per occurrence.
func Observe(ctx context.Context, addrs []string, creds Credentials) []NodeView {
	views := make([]NodeView, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Go(func() {
			defer func() {
				if r := recover(); r != nil { // see Pool.Observe
					views[i] = NodeView{Addr: addr, Err: fmt.Errorf("observe %s: %w", addr, logging.Recovered(r))}
				}
			}()
			views[i] = observeNode(ctx, addr, creds)
		})
	}
	wg.Wait()
	return views
}

// errNoMyself means CLUSTER NODES had no "myself" line: the reply is not
// what a cluster-enabled node prints.
var errNoMyself = errors.New("cluster nodes: no myself entry")

func observeNode(ctx context.Context, addr string, creds Credentials) NodeView {
	v := NodeView{Addr: addr}
	if err := ctx.Err(); err != nil {
		v.Err = fmt.Errorf("observe %s: %w", addr, err)
		return v
	}
	c, err := NewClient(addr, creds)
	if err != nil {
		v.Err = err
		return v
	}
	defer c.Close()
	return observeWith(ctx, c, v)
}

// observeSections are the INFO sections an observation asks for: replication for the operator's
// decisions, the rest for its metrics (Stats), so the metrics cost no round trip of their own.
var observeSections = []string{"server", "replication", "memory", "clients", "stats", "keyspace"}

// observeWith runs the queries of Observe over an open Client and fills v. The four are sent
// together and their replies read in order (valkey-go pipelines the batch): one round trip per
// node instead of four, which at fleet scale is most of what a look costs (a write and a read
// system call per query, and four waits on a loaded machine). A reply is read as if its query
// had been sent alone: the first failure among the first three ends the view, as it did when a
// failed query stopped the next from being sent (those are reads, so asking them anyway is
// harmless).
func observeWith(ctx context.Context, c *Client, v NodeView) NodeView {
	addr := v.Addr
	keys := liveconf.Keys()
	cmds := []valkeygo.Completed{
		c.c.B().ClusterNodes().Build(),
		c.c.B().ClusterInfo().Build(),
		c.c.B().Info().Section(observeSections...).Build(),
	}
	if len(keys) > 0 {
		cmds = append(cmds, c.c.B().ConfigGet().Parameter(keys...).Build())
	}
	res := c.doMulti(ctx, cmds...)
	text, err := c.stringOf("cluster nodes", res[0])
	if err == nil {
		v.Nodes, err = ParseClusterNodes(text)
		err = c.wrap("cluster nodes", err)
	}
	if err != nil {
		v.Err = err
		return v
	}
	me, ok := Myself(v.Nodes)
	if !ok {
		v.Err = fmt.Errorf("observe %s: %w", addr, errNoMyself)
		return v
	}
	v.ID = me.ID
	if text, err = c.stringOf("cluster info", res[1]); err != nil {
		v.Err = err
		return v
	}
	v.ClusterInfo = ParseInfo(text)
	if text, err = c.stringOf("info "+strings.Join(observeSections, " "), res[2]); err != nil {
		v.Err = err
		return v
	}
	v.Replication = ParseInfo(text)
	v.Version = v.Replication["valkey_version"]
	v.Reachable = true
	// The CONFIG GET of every live setting (the settings planner's input). Its failure costs only
	// the settings: the node answered everything its place in the cluster depends on.
	v.Config = map[string]string{}
	if len(res) > 3 {
		if m, err := res[3].AsStrMap(); err != nil {
			v.Config, v.ConfigErr = nil, c.wrap("config get", err)
		} else {
			v.Config = m
		}
	}
	return v
}
