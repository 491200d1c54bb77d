// Package metrics is what the operator tells Prometheus about the clusters it runs: per cluster
// (state, readiness, nodes, slots, failovers, data loss, slot moves, rolls, ACL and TLS reload
// failures, certificate expiry) and per node (role, memory, clients, commands, keyspace, evictions,
// replication lag and link), all from the observation each pass makes anyway: no Valkey round trip
// and no exporter of its own. It is one prometheus.Collector, registered beside controller-runtime's
// own metrics: the values are kept per cluster and turned into series at scrape time, so a deleted
// cluster's or node's series go with it (Forget, or a node missing from the next observation).
//
// Labels are bounded: namespace and cluster; shard (an index below spec.shards, at most 1000, of
// a shard that served or lost its data) and pod (of a pod observed) where they apply; the closed sets state, kind, key and role. No node id, no key, no
// message: nothing that grows without bound, and nothing secret.
package metrics

import (
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// States are the values of the state label of valkey_cluster_state, one series each.
var States = []string{"Bootstrapping", "Forming", "Active", "Upgrading", "Invalid"}

// Failover kinds, the kind label of valkey_cluster_failovers_total.
const (
	// KindGraceful is CLUSTER FAILOVER: a rolling upgrade's handover, a deleted primary's
	// handover, a shard's slots given back to its own node.
	KindGraceful = "graceful"
	// KindForced is CLUSTER FAILOVER FORCE: a primary whose container is gone.
	KindForced = "forced"
	// KindTakeover is CLUSTER FAILOVER TAKEOVER: the slot holders lost their majority.
	KindTakeover = "takeover"
)

// RecoveryBuckets are the buckets of valkey_cluster_failover_recovery_seconds: Valkey's own
// failover takes about cluster-node-timeout (5 s) and more, the operator's FORCE about a second.
var RecoveryBuckets = []float64{0.5, 1, 2, 3, 5, 8, 10, 15, 20, 30, 60, 120, 300}

// Node is what one node said in a pass, for the valkey_node_* series.
type Node struct {
	Pod     string
	Shard   int
	Up      bool // the node answered
	Primary bool
	// LinkUp is the replica's master_link_status; LagBytes how far its replication offset trails
	// its primary's (0 for a primary, or when the primary did not answer).
	LinkUp   bool
	LagBytes int64
	// From INFO memory, clients and stats.
	UsedMemory, MaxMemory, ConnectedClients                                   int64
	CommandsProcessed, KeyspaceHits, KeyspaceMisses, EvictedKeys, ExpiredKeys int64
}

// Cluster is what one pass observed of a cluster, for the gauges.
type Cluster struct {
	Namespace, Name string
	State           string
	Ready           bool
	NodesWanted     int
	NodesReady      int
	NodesOutdated   int
	SlotsServed     int
	SlotsInFlight   int
	// Shards is spec.shards; ShardsServing the shards whose slots a reachable primary of the shard
	// serves. A shard that served once and stops is down from the first pass that sees it so,
	// until the first pass that sees it serve again: a recovery (a shard being added, which never
	// served yet, is not down).
	Shards        int
	ShardsServing map[int]bool
	Nodes         []Node
	// Certificates maps tls.crt and ca.crt to their NotAfter (a TLS cluster whose Secret passed
	// validation); nil otherwise.
	Certificates map[string]time.Time
}

// cluster is everything kept of one cluster between scrapes.
type cluster struct {
	last          Cluster
	passes        float64
	failovers     map[string]float64
	lost          map[int]float64
	slotsMoved    float64
	keysMoved     float64
	aclFailures   float64
	tlsFailures   float64
	podsFailed    float64
	downSince     map[int]time.Time
	servedOnce    map[int]bool
	recoveryCount uint64
	recoverySum   float64
	recoveryHist  map[float64]uint64
}

// Registry keeps the metrics of every cluster and is their prometheus.Collector. The zero value
// is not usable: use New. Every method is safe for concurrent use, and a nil *Registry does
// nothing (the operator may run with metrics off).
type Registry struct {
	mu       sync.Mutex
	clusters map[string]*cluster
	now      func() time.Time
}

// New returns an empty Registry.
func New() *Registry { return &Registry{clusters: map[string]*cluster{}, now: time.Now} }

func key(ns, name string) string { return ns + "/" + name }

func (r *Registry) get(ns, name string) *cluster {
	c, ok := r.clusters[key(ns, name)]
	if !ok {
		c = &cluster{failovers: map[string]float64{}, lost: map[int]float64{}, downSince: map[int]time.Time{}, servedOnce: map[int]bool{}, recoveryHist: map[float64]uint64{}}
		c.last.Namespace, c.last.Name = ns, name
		r.clusters[key(ns, name)] = c
	}
	return c
}

// Observe records a pass's observation of a cluster: the gauges and node series are replaced,
// and a shard that was down and now serves again adds its downtime to the recovery histogram.
func (r *Registry) Observe(o Cluster) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.get(o.Namespace, o.Name)
	now := r.now()
	for shard := range o.Shards {
		since, down := c.downSince[shard]
		switch {
		case o.ShardsServing[shard] && down:
			delete(c.downSince, shard)
			d := now.Sub(since).Seconds()
			c.recoveryCount++
			c.recoverySum += d
			for _, b := range RecoveryBuckets {
				if d <= b {
					c.recoveryHist[b]++
				}
			}
		case o.ShardsServing[shard]:
			c.servedOnce[shard] = true
		case c.servedOnce[shard] && !down:
			c.downSince[shard] = now
		}
	}
	for shard := range c.downSince {
		if shard >= o.Shards {
			delete(c.downSince, shard) // removed by spec.shards
		}
	}
	for shard := range c.servedOnce {
		if shard >= o.Shards {
			delete(c.servedOnce, shard)
		}
	}
	c.last = o
}

// Pass counts a reconcile pass that read the cluster, whatever it then did (an Invalid cluster's,
// one that stopped at an error): how often the operator looks at each cluster, and what an
// "it did nothing more" check waits on to know that it looked.
func (r *Registry) Pass(ns, name string) {
	r.add(ns, name, func(c *cluster) { c.passes++ })
}

// Failover counts a failover the operator issued (KindGraceful, KindForced, KindTakeover).
func (r *Registry) Failover(ns, name, kind string) {
	r.add(ns, name, func(c *cluster) { c.failovers[kind]++ })
}

// ShardLost counts a shard that lost every copy of its data and serves its slots again empty.
func (r *Registry) ShardLost(ns, name string, shard int) {
	r.add(ns, name, func(c *cluster) { c.lost[shard]++ })
}

// SlotsMoved counts slots (and their keys) moved between primaries.
func (r *Registry) SlotsMoved(ns, name string, slots, keys int) {
	r.add(ns, name, func(c *cluster) { c.slotsMoved += float64(slots); c.keysMoved += float64(keys) })
}

// ACLReloadFailed counts a node that could not be given the cluster's ACL.
func (r *Registry) ACLReloadFailed(ns, name string) {
	r.add(ns, name, func(c *cluster) { c.aclFailures++ })
}

// TLSReloadFailed counts a node that could not reload its certificate.
func (r *Registry) TLSReloadFailed(ns, name string) {
	r.add(ns, name, func(c *cluster) { c.tlsFailures++ })
}

// PodFailed counts a dead pod (Failed, or lost with its Kubernetes node) the operator replaced
// and deleted: pod churn.
func (r *Registry) PodFailed(ns, name string) { r.add(ns, name, func(c *cluster) { c.podsFailed++ }) }

func (r *Registry) add(ns, name string, f func(*cluster)) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r.get(ns, name))
}

// Forget drops every series of a cluster that was deleted.
func (r *Registry) Forget(ns, name string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.clusters, key(ns, name))
}

var (
	clusterLabels = []string{"namespace", "cluster"}
	nodeLabels    = []string{"namespace", "cluster", "shard", "pod"}

	descState         = newDesc("valkey_cluster_state", "The cluster's status.state: 1 for the state it is in, 0 for the others.", append(clusterLabels, "state"))
	descReady         = newDesc("valkey_cluster_ready", "1 when the cluster's Ready condition is True.", clusterLabels)
	descNodesWanted   = newDesc("valkey_cluster_nodes_wanted", "Nodes the spec asks for: shards x (1 + replicasPerShard).", clusterLabels)
	descNodesReady    = newDesc("valkey_cluster_nodes_ready", "Nodes that hold their place: a primary serving slots, or a replica whose link to its primary is up.", clusterLabels)
	descNodesOutdated = newDesc("valkey_cluster_nodes_outdated", "Live nodes built from an older spec: a rolling upgrade's progress.", clusterLabels)
	descSlotsServed   = newDesc("valkey_cluster_slots_served", "Hash slots (of 16384) a reachable primary serves.", clusterLabels)
	descSlotsInFlight = newDesc("valkey_cluster_slots_in_flight", "Slots open for a move (MIGRATING or IMPORTING) on a reachable primary.", clusterLabels)
	descPasses        = newDesc("valkey_cluster_reconcile_passes_total", "Reconcile passes that read the cluster, whatever they did: how often the operator looks at it.", clusterLabels)
	descFailovers     = newDesc("valkey_cluster_failovers_total", "Failovers the operator issued, by kind: graceful (CLUSTER FAILOVER), forced (FORCE), takeover (TAKEOVER).", append(clusterLabels, "kind"))
	descLost          = newDesc("valkey_cluster_shards_data_lost_total", "Times a shard lost every copy of its data and served its slots again empty.", append(clusterLabels, "shard"))
	descRecovery      = newDesc("valkey_cluster_failover_recovery_seconds", "Seconds from a shard's slots last being served by a reachable primary of the shard to their being served again, as the operator's passes saw it (about a second apart while a cluster heals).", clusterLabels)
	descSlotsMoved    = newDesc("valkey_cluster_slots_moved_total", "Hash slots moved between primaries, keys included.", clusterLabels)
	descKeysMoved     = newDesc("valkey_cluster_keys_moved_total", "Keys moved with their slots (classic moves; an atomic move on Valkey 9 counts none).", clusterLabels)
	descACLFailures   = newDesc("valkey_cluster_acl_reload_failures_total", "Times a node could not be given the cluster's ACL (it is retried).", clusterLabels)
	descTLSFailures   = newDesc("valkey_cluster_tls_reload_failures_total", "Times a node could not reload its TLS certificate (it is retried).", clusterLabels)
	descPodsFailed    = newDesc("valkey_cluster_pods_failed_total", "Dead pods (Failed, or lost with their Kubernetes node) the operator replaced and deleted.", clusterLabels)
	descCertExpiry    = newDesc("valkey_cluster_certificate_expiry_timestamp_seconds", "When the certificate of the TLS Secret expires (Unix time), for tls.crt and the earliest of ca.crt.", append(clusterLabels, "key"))

	descNodeUp      = newDesc("valkey_node_up", "1 when the node answered the operator's last observation.", nodeLabels)
	descNodeRole    = newDesc("valkey_node_role", "The node's role by its own view: 1 for the role it has.", append(nodeLabels, "role"))
	descUsedMemory  = newDesc("valkey_node_used_memory_bytes", "used_memory of INFO memory.", nodeLabels)
	descMaxMemory   = newDesc("valkey_node_maxmemory_bytes", "maxmemory of INFO memory (0: no limit).", nodeLabels)
	descClients     = newDesc("valkey_node_connected_clients", "connected_clients of INFO clients.", nodeLabels)
	descCommands    = newDesc("valkey_node_commands_processed_total", "total_commands_processed of INFO stats.", nodeLabels)
	descHits        = newDesc("valkey_node_keyspace_hits_total", "keyspace_hits of INFO stats.", nodeLabels)
	descMisses      = newDesc("valkey_node_keyspace_misses_total", "keyspace_misses of INFO stats.", nodeLabels)
	descEvicted     = newDesc("valkey_node_evicted_keys_total", "evicted_keys of INFO stats.", nodeLabels)
	descExpired     = newDesc("valkey_node_expired_keys_total", "expired_keys of INFO stats.", nodeLabels)
	descLag         = newDesc("valkey_node_replication_lag_bytes", "How far a replica's replication offset trails its primary's (replicas only).", nodeLabels)
	descLinkUp      = newDesc("valkey_node_replication_link_up", "1 when a replica's link to its primary is up (replicas only).", nodeLabels)
	allDescriptions = []*prometheus.Desc{descState, descReady, descNodesWanted, descNodesReady, descNodesOutdated, descSlotsServed, descSlotsInFlight,
		descPasses, descFailovers, descLost, descRecovery, descSlotsMoved, descKeysMoved, descACLFailures, descTLSFailures, descPodsFailed, descCertExpiry,
		descNodeUp, descNodeRole, descUsedMemory, descMaxMemory, descClients, descCommands, descHits, descMisses, descEvicted, descExpired, descLag, descLinkUp}
)

// Describe sends every metric's description.
func (r *Registry) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescriptions {
		ch <- d
	}
}

// Collect sends every series of every cluster.
func (r *Registry) Collect(ch chan<- prometheus.Metric) {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := make([]string, 0, len(r.clusters))
	for k := range r.clusters {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		r.clusters[k].collect(ch)
	}
}

func (c *cluster) collect(ch chan<- prometheus.Metric) {
	o := c.last
	ns, name := o.Namespace, o.Name
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{ns, name}, labels...)...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, append([]string{ns, name}, labels...)...)
	}
	if o.State != "" {
		for _, s := range States {
			gauge(descState, b2f(o.State == s), s)
		}
		gauge(descReady, b2f(o.Ready))
		gauge(descNodesWanted, float64(o.NodesWanted))
		gauge(descNodesReady, float64(o.NodesReady))
		gauge(descNodesOutdated, float64(o.NodesOutdated))
		gauge(descSlotsServed, float64(o.SlotsServed))
		gauge(descSlotsInFlight, float64(o.SlotsInFlight))
	}
	counter(descPasses, c.passes)
	for _, kind := range []string{KindGraceful, KindForced, KindTakeover} {
		counter(descFailovers, c.failovers[kind], kind)
	}
	// A shard has its series from the first pass that saw it serve, at 0, so that increase() sees
	// a first loss, and a shard that lost its data keeps its series; a shard that never served
	// has none. spec.shards alone adds no series: it is a team's to write (up to 1 000), and an
	// Invalid or never-formed cluster would have added one series per shard of its manifest.
	shards := make([]int, 0, len(c.lost)+len(c.servedOnce))
	for s := range c.servedOnce {
		shards = append(shards, s)
	}
	for s := range c.lost {
		if !c.servedOnce[s] {
			shards = append(shards, s)
		}
	}
	sort.Ints(shards)
	for _, s := range shards {
		counter(descLost, c.lost[s], strconv.Itoa(s))
	}
	buckets := map[float64]uint64{}
	for _, b := range RecoveryBuckets {
		buckets[b] = c.recoveryHist[b]
	}
	ch <- prometheus.MustNewConstHistogram(descRecovery, c.recoveryCount, c.recoverySum, buckets, ns, name)
	counter(descSlotsMoved, c.slotsMoved)
	counter(descKeysMoved, c.keysMoved)
	counter(descACLFailures, c.aclFailures)
	counter(descTLSFailures, c.tlsFailures)
	counter(descPodsFailed, c.podsFailed)
	for _, k := range []string{"tls.crt", "ca.crt"} {
		if t, ok := o.Certificates[k]; ok {
			gauge(descCertExpiry, float64(t.Unix()), k)
		}
	}
	for _, n := range o.Nodes {
		l := []string{ns, name, strconv.Itoa(n.Shard), n.Pod}
		ch <- prometheus.MustNewConstMetric(descNodeUp, prometheus.GaugeValue, b2f(n.Up), l...)
		if !n.Up {
			continue
		}
		role := "replica"
		if n.Primary {
			role = "primary"
		}
		ch <- prometheus.MustNewConstMetric(descNodeRole, prometheus.GaugeValue, 1, append(l, role)...)
		for _, m := range []struct {
			d *prometheus.Desc
			t prometheus.ValueType
			v int64
		}{
			{descUsedMemory, prometheus.GaugeValue, n.UsedMemory},
			{descMaxMemory, prometheus.GaugeValue, n.MaxMemory},
			{descClients, prometheus.GaugeValue, n.ConnectedClients},
			{descCommands, prometheus.CounterValue, n.CommandsProcessed},
			{descHits, prometheus.CounterValue, n.KeyspaceHits},
			{descMisses, prometheus.CounterValue, n.KeyspaceMisses},
			{descEvicted, prometheus.CounterValue, n.EvictedKeys},
			{descExpired, prometheus.CounterValue, n.ExpiredKeys},
		} {
			ch <- prometheus.MustNewConstMetric(m.d, m.t, float64(m.v), l...)
		}
		if !n.Primary {
			ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, float64(n.LagBytes), l...)
			ch <- prometheus.MustNewConstMetric(descLinkUp, prometheus.GaugeValue, b2f(n.LinkUp), l...)
		}
	}
}

// names are the metrics' names, in the order of their descriptions.
var names []string

func newDesc(name, help string, labels []string) *prometheus.Desc {
	names = append(names, name)
	return prometheus.NewDesc(name, help, labels, nil)
}

// Names lists the names of every metric the Registry exports (for the dashboard and the alert
// rules' tests, which must query only metrics that exist).
func Names() []string {
	out := append([]string(nil), names...)
	sort.Strings(out)
	return out
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
