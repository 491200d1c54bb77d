package fsm

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/slot"
	"github.com/gomomento/valkey-operator/version"
)

// Snapshot is one read-only observation of a cluster, made by the controller at the start of a
// reconcile: the spec that matters, the pods, and one view per Valkey node.
type Snapshot struct {
	// State is the persisted status.state ("" for a new object).
	State State
	// FormedAt is status.formedAt: when the operator first saw the cluster formed. Zero when it
	// never was, or when the status was written by an operator that predates the field (see
	// FormedOnce).
	FormedAt time.Time
	// SpecProblem is non-empty when the spec cannot be acted on (a ValkeyConfig or ValkeyImage
	// that does not resolve, a baseRef cycle): the reason for status.message.
	SpecProblem string
	// Shards and ReplicasPerShard are the desired topology.
	Shards, ReplicasPerShard int
	// Hostnames is true when the cluster's nodes announce a hostname and clients are sent to
	// peers by it (a TLS cluster: cluster-preferred-endpoint-type hostname). Such a cluster is
	// formed, and a node has joined it, only once every node knows every live peer's hostname
	// (HostnameGap): Valkey gossips hostnames apart from the rest of a node's record, and a node
	// that lacks one answers MOVED with "?" for an address (valkey-io/valkey#304).
	Hostnames bool
	// SpecHash is the hash of what a node created now would be built from (see Pod.SpecHash).
	SpecHash string
	// StartHash is SpecHash with the live settings too (see Pod.StartHash).
	StartHash string
	// ShapeHash is SpecHash without the CPU and memory (see Pod.ShapeHash), Size the CPU and
	// memory a node created now gets, and DataLimit (bytes, 0 for none) what the data volume of
	// a node of that size must bound at least (resources.DataSizeLimit): a pod of the same shape
	// is resized in place to Size instead of replaced (InPlace).
	ShapeHash string
	Size      Size
	DataLimit int64
	// Pods are the cluster's pods, any phase, sorted by name.
	Pods []Pod
	// Failover is the failover the operator issued on an earlier pass and has not seen land
	// (status.failover), nil when none.
	Failover *FailoverIntent
	// Now is when the snapshot was taken: the clock the planners judge an intent's age by.
	Now time.Time
	// CreateRefused says why the API server refused the last pod the operator tried to create
	// for the cluster (the pod's name and the server's reason: a quota, a LimitRange, Pod
	// Security admission, a webhook), "" when none was refused since the last one created or
	// the last change of the spec. CreateHeld is true while the back-off before the next try
	// runs: no pod is created then.
	CreateRefused string
	CreateHeld    bool
	// AtomicMoves: the cluster's image is Valkey 9 or later, so slot moves between its nodes
	// are atomic CLUSTER MIGRATESLOTS (the executor still checks each pair), and a batch may be
	// larger (plan.MaxAtomicSlotsPerBatch).
	AtomicMoves bool
	// Zones are the zones the cluster's pods may run in: the zone label of every Kubernetes
	// node its placement allows (nodeSelector and placement.zones), sorted. ZonesUp are those
	// of them with a node that takes new pods now (Ready, not cordoned, no taint the pods do
	// not tolerate). Both are nil when no node carries a zone label.
	Zones, ZonesUp []string
	// ReadySince is when the cluster's Ready condition last turned True (status.conditions),
	// zero when it is not True.
	ReadySince time.Time
	// Settings are the valkey settings a node created now gets (its ValkeyNode's
	// spec.valkeySettings), nil when the spec could not be resolved: the settings planner applies
	// their live part to the nodes that run something else.
	Settings map[string]string
	// ZoneMoveHeld says why no replica is moved to another zone now (a move found no room in
	// its zone a short while ago), "" when one may be.
	ZoneMoveHeld string
	// ZonesKnown is true when the Kubernetes nodes were read this pass, so Zones says which
	// zones there are (nil then means no node carries a zone label), not that they are unknown.
	ZonesKnown bool
	// SettingsRefused says which nodes refused the live settings this pass still sets on them,
	// with Valkey's reply (CONFIG SET refused, or a value read back otherwise), "" when none did.
	// It comes from earlier passes' attempts and is for status only: no planner reads it.
	SettingsRefused string
	// Budgets are the shards' PodDisruptionBudgets the cluster controls, by shard index, read
	// from the API server this pass. BudgetsKnown is false when they were not read (the list
	// failed, or an object of one of the cluster's names is someone else's): then no budget is
	// written.
	Budgets      map[int]Budget
	BudgetsKnown bool
	// NetworkPolicy is the cluster's NetworkPolicy, as observed and as wanted.
	NetworkPolicy NetworkPolicy
	// ACLSecretStale is true when the stored ACL Secret is missing or holds other data than the
	// one this pass renders (the controller compares them; false while the spec cannot be acted
	// on).
	ACLSecretStale bool
	// ServiceMissing is true when the cluster's headless Service does not exist; ServiceBehind
	// when it lacks the original's port names or selector (an older operator created it).
	ServiceMissing, ServiceBehind bool
	// CredentialStale is true when the operator's credential Secret is to be written: created
	// for a new cluster, adopted after a restore, or given a key it lacks.
	CredentialStale bool
	// Rotation is the rotation of the system users' passwords asked for or under way (nil:
	// neither); see rotation.go.
	Rotation *Rotation
}

// FailoverIntent is a failover the operator issued: Pod, a replica of PrimaryID (the lost
// primary of Shard), was asked to take over at StartedAt. Force says CLUSTER FAILOVER FORCE was
// sent rather than a graceful CLUSTER FAILOVER, Takeover that CLUSTER FAILOVER TAKEOVER was.
type FailoverIntent struct {
	Shard     int
	Pod       string
	PrimaryID string
	Force     bool
	Takeover  bool
	StartedAt time.Time
}

// Phase is the part of a pod's lifecycle the decision needs.
type Phase string

// Pod phases as the decision sees them.
const (
	PodPending   Phase = "Pending"
	PodRunning   Phase = "Running"
	PodFailed    Phase = "Failed"
	PodSucceeded Phase = "Succeeded"
	PodUnknown   Phase = "Unknown"
)

// Pod is one Valkey node's pod.
type Pod struct {
	Name  string
	Shard int
	Phase Phase
	// IP is the pod IP, "" until the kubelet reports one.
	IP string
	// Ready is the pod's Ready condition. Pods have no readiness probe, so it only says the
	// container started; status reports NodeReady instead.
	Ready bool
	// NodeLost is true when the pod runs in the API but its Kubernetes node stopped reporting:
	// the node lifecycle controller turned the pod's Ready condition False while ContainersReady,
	// which only the kubelet writes, still says True. Pods carry no readiness probe, so nothing
	// else produces that pair.
	NodeLost bool
	// Deleting is true once the pod has a deletion timestamp.
	Deleting bool
	// Unschedulable is the scheduler's own message when PodScheduled is False, and
	// UnschedulableSince when that condition last changed (zero when not known).
	Unschedulable      string
	UnschedulableSince time.Time
	// Created is the pod's creation time (zero when not known).
	Created time.Time
	// ServedAt is the last time this operator saw the pod's node serve slots, or handed its
	// slots away (a failover, a slot move): clients may still send it requests for them until
	// they learn the new owner from its MOVED answers. Zero when unknown (not since this
	// operator started). Kept in memory only: it delays a deletion, never decides one.
	ServedAt time.Time
	// SpecHash is the hash of what the pod's node was built from (its ValkeyNode's spec: image,
	// resources, valkey settings, hard placement). A node whose hash is not Snapshot.SpecHash is
	// outdated and is replaced by a rolling upgrade.
	SpecHash string
	// ShapeHash is SpecHash without the CPU and memory, and Size those, as its ValkeyNode
	// records them; Resize is what the pod and its kubelet say of its size, nil when the kubelet
	// reports no container resources (it cannot resize a running pod).
	ShapeHash string
	Size      Size
	Resize    *Resize
	// StartHash is SpecHash with the node's live settings too (those a node takes at run time,
	// which SpecHash leaves out). A pod that failed on start counts against the current spec only
	// when its StartHash is the snapshot's: a live setting Valkey refused at start, fixed in the
	// spec, is a new spec for the pods to come although it replaces no running node.
	StartHash string
	// Failure says how a Failed pod's container ended ("Error, exit code 1").
	Failure string
	// StartFailure is true when the container exited by itself with an error code (1-127), as
	// valkey-server does when it refuses its config; a node killed by a signal (137, 143) or
	// lost with its node is not a start failure.
	StartFailure bool
	// Exited is true once the pod's container has terminated: its valkey-server is gone.
	Exited bool
	// Node is the Valkey view of the node in this pod; nil when it was not queried (no IP).
	Node *Node
	// LastNodeID is the node id the previous status recorded for this pod (status.nodeDetails), ""
	// when none. A pod whose node does not answer now still owns that id: unknown is not absent.
	LastNodeID string
	// Lifecycle is the spec.lifecycle of the pod's ValkeyNode (Joining, Active, Leaving). A
	// ValkeyNode whose pod is missing is listed as a Failed pod of that name.
	Lifecycle string
	// Zone is the zone of the Kubernetes node the pod is bound to, "" while it is not bound or
	// the node has no zone label.
	Zone string
	// MovedFrom is set on a replica created to move one of its shard's copies to another zone
	// (plan's spread planner) until it has joined and its shard is back to its count: the zone of
	// the copy it replaces.
	MovedFrom string
	// Settings are the valkey settings its ValkeyNode records (spec.valkeySettings): what the
	// node was started with, its live settings as last applied.
	Settings map[string]string
	// AnnotationsBehind are the keys of the cluster's spec.podAnnotations that the pod lacks or
	// holds with another value, sorted; nil when it carries them all, and for every pod while
	// the spec cannot be acted on (SpecProblem).
	AnnotationsBehind []string
	// Foreign says why the pod that holds this node's name is not the one the operator created
	// for it (another UID than its ValkeyNode records, say): "" for the node's own pod. Such a
	// node is shown as one that is down, never asked (Running, its Valkey node silent, no IP),
	// so that nothing replaces or retires it while that pod stands (retiring it would have the
	// garbage collector delete a pod the operator did not create); once the pod is gone the node
	// is a lost one, and replaced.
	Foreign string
	// Unrecorded is true for the node's own pod while its ValkeyNode does not record the pod's
	// UID yet (a node created by an operator before the record, or whose record write failed):
	// the bookkeeping records it (plan.RecordPod).
	Unrecorded bool
}

// Budget is one of the shards' PodDisruptionBudgets that the cluster controls, as observed.
type Budget struct {
	// MinAvailable is its spec.minAvailable, -1 when that is not an integer (unset, a
	// percentage).
	MinAvailable int
	// AsBuilt is true when the rest of its spec (selector, unhealthy-pod eviction policy,
	// maxUnavailable) is what the operator builds.
	AsBuilt bool
}

// NetworkPolicy is the cluster's NetworkPolicy (resources.BuildNetworkPolicy): whether the
// cluster wants one, and the one it controls, as observed.
type NetworkPolicy struct {
	// Known is true when it was looked for this pass: false while an object of its name is
	// someone else's (nothing of that name is touched) or the look failed.
	Known bool
	// Wanted is true when the cluster keeps a policy: spec.network.policy, or the operator's
	// default where the spec says nothing, is Enabled.
	Wanted bool
	// Exists is true when the cluster controls a policy of its name.
	Exists bool
	// AsBuilt is true when that policy's spec and labels are the ones the operator builds.
	AsBuilt bool
}

// Node is what one Valkey node said about the cluster (CLUSTER NODES, CLUSTER INFO, INFO
// replication). Unknown is not absent: Reachable=false means the node did not answer, not that
// it is gone.
type Node struct {
	Reachable bool
	// Err is why the node did not answer (no secret material).
	Err string
	// ID is the node id (CLUSTER MYID).
	ID string
	// ClusterStateOK is cluster_state:ok in CLUSTER INFO.
	ClusterStateOK bool
	// SlotsAssigned is cluster_slots_assigned in CLUSTER INFO.
	SlotsAssigned int
	// Primary is true when the node's own CLUSTER NODES line says it is a primary.
	Primary bool
	// PrimaryID is the id of the primary a replica follows ("" for a primary).
	PrimaryID string
	// MySlots are the slots this node serves according to its own view.
	MySlots slot.Set
	// Known are the node ids in this node's CLUSTER NODES (itself included) that completed the
	// handshake, with their slots as this node sees them.
	Known map[string]slot.Set
	// Meeting are the IPs of the nodes this node is in the handshake with: a MEET it was sent is
	// under way, and sending it again would only log a second `cluster meet issued`.
	Meeting map[string]bool
	// NoHostname are the ids this node knows (Known) without a hostname (CLUSTER NODES prints
	// none): in a cluster whose nodes announce one (Snapshot.Hostnames), it would answer MOVED
	// and ASK for their slots with "?" for an address.
	NoHostname map[string]bool
	// Failed are the ids this node flags `fail` (the cluster agreed they are down).
	Failed map[string]bool
	// Suspected are the ids this node flags `fail?`: it cannot reach them, but too few primaries
	// agree to turn the suspicion into `fail`, which is exactly what happens when most primaries
	// are gone. Only the quorum planner reads it; forgetting needs `fail`.
	Suspected map[string]bool
	// Follows are, for each node this node knows as a replica, the primary it follows in this
	// node's view (the ids of Known). A primary votes on a failover from its own view: it refuses
	// a replica it still sees as a primary (ReplicaInViews).
	Follows map[string]string
	// CurrentEpoch is cluster_current_epoch (CLUSTER INFO), and Epochs the config epoch of each
	// node of Known (itself included) as this node sees it: a TAKEOVER claims the shard's slots
	// with the replica's config epoch, which Valkey bumps only when it is not already the largest
	// the replica knows (plan/epoch.go).
	CurrentEpoch uint64
	Epochs       map[string]uint64
	// LinkUp is master_link_status:up (replicas only).
	LinkUp bool
	// ReplOffset is master_repl_offset: how much of the replication stream the node applied.
	ReplOffset int64
	// SyncInProgress is master_sync_in_progress:1 (replicas only): a full sync is under way.
	SyncInProgress bool
	// Migrating and Importing are this node's open slots by its own CLUSTER NODES line: slot ->
	// the node id it migrates to, or imports from. An interrupted slot move leaves them.
	Migrating, Importing map[int]string
	// Version is the node's valkey_version (INFO server); "" when unknown.
	Version string
	// VolatileItemKeys counts the node's keys with expiring hash fields (Valkey 9, INFO
	// keyspace), which a Valkey 8 node cannot take (controllers/downgrade.go).
	VolatileItemKeys int64
	// UsedMemoryRSS is used_memory_rss (INFO memory): what the process holds, in bytes.
	UsedMemoryRSS int64
	// Config is the node's live settings (CONFIG GET of liveconf.Keys), nil when unknown.
	Config map[string]string
	// ConfigErr is why Config could not be read (the node answered everything else: an ACL
	// that denies the operator's user CONFIG GET, say), "" when it was read.
	ConfigErr string
	// Rotation is what the node holds of a rotation of the system passwords under way (nil when
	// none is, or the node was not asked).
	Rotation *NodeRotation
}

// Valkey is the node's release, for what it can do (package version): the zero (unknown)
// Valkey when the node or its version is unknown.
func (n *Node) Valkey() version.Valkey {
	if n == nil {
		return version.Valkey{}
	}
	return version.Parse(n.Version)
}

// Major is the major number of the node's Valkey version; 0 when it is unknown or does not
// parse.
func (n *Node) Major() int { return n.Valkey().Major() }

// DesiredNodes is shards × (replicas + 1).
func (s Snapshot) DesiredNodes() int { return s.Shards * (s.ReplicasPerShard + 1) }

// LivePods are the pods that are not deleting and not Failed or Succeeded, by name.
func (s Snapshot) LivePods() []Pod {
	var out []Pod
	for _, p := range s.Pods {
		if p.Deleting || p.Phase == PodFailed || p.Phase == PodSucceeded || p.Lost() {
			continue
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Pod is the pod of that name, any phase; nil when the snapshot has none.
func (s Snapshot) Pod(name string) *Pod {
	for i := range s.Pods {
		if s.Pods[i].Name == name {
			return &s.Pods[i]
		}
	}
	return nil
}

// Lost reports whether Kubernetes says the pod's node is gone (NodeLost) and its Valkey node does
// not answer either. Such a pod is treated as a dead one: its shard gets a replacement at once
// instead of after the eviction timeout, and it is retired once the shard is whole again. A pod
// on a NotReady node that still answers is alive (only the control plane lost it), and its id
// is still forgotten only when Valkey itself flags it `fail`.
func (p Pod) Lost() bool {
	return p.NodeLost && !p.Deleting && (p.Node == nil || !p.Node.Reachable)
}

// ClaimedID is the node id p's pod claims: the one its node reports now when it answers with
// one (what it says now wins over the last status), else the one the last status recorded for
// it; "" when neither is known. A silent node is not taken to be gone: it still claims its id.
func (p Pod) ClaimedID() string {
	if p.Node != nil && p.Node.Reachable && p.Node.ID != "" {
		return p.Node.ID
	}
	return p.LastNodeID
}

// ShardPods returns the live pods of each shard 0..Shards-1.
func (s Snapshot) ShardPods() [][]Pod {
	out := make([][]Pod, s.Shards)
	for _, p := range s.LivePods() {
		if p.Shard >= 0 && p.Shard < s.Shards {
			out[p.Shard] = append(out[p.Shard], p)
		}
	}
	return out
}

// PodsUp reports whether every desired pod exists, runs and has an IP.
func (s Snapshot) PodsUp() bool { return s.podsGap() == "" }

// podsGap says which desired pod is missing or does not run yet, "" when none.
func (s Snapshot) podsGap() string {
	for shard, pods := range s.ShardPods() {
		if len(pods) < s.ReplicasPerShard+1 {
			return fmt.Sprintf("shard %d has %d of its %d pods", shard, len(pods), s.ReplicasPerShard+1)
		}
		for _, p := range pods {
			if p.Phase != PodRunning || p.IP == "" {
				return fmt.Sprintf("pod %s does not run yet", p.Name)
			}
		}
	}
	return ""
}

// Formed reports whether the cluster is formed and in agreement (Unformed says nothing).
func (s Snapshot) Formed() bool { return s.Unformed() == "" }

// Unformed says what keeps the cluster from being formed and in agreement, "" when nothing:
// every desired pod runs, every node answers, says cluster_state:ok with all 16384 slots
// assigned, knows exactly the live nodes (every one of them, and no node that is gone or that no
// pod of the cluster runs: a stranger met by hand is named, to be forgotten), and each shard has
// exactly one primary holding slots with every other pod of the shard attached to it as a
// replica. The first finding, in that order.
func (s Snapshot) Unformed() string {
	if gap := s.podsGap(); gap != "" {
		return gap
	}
	ids := map[string]string{} // node id -> pod
	for _, p := range s.LivePods() {
		if p.Node == nil || !p.Node.Reachable || p.Node.ID == "" {
			return fmt.Sprintf("the node of pod %s does not answer", p.Name)
		}
		ids[p.Node.ID] = p.Name
	}
	for _, p := range s.LivePods() {
		n := p.Node
		if n.SlotsAssigned != slot.Count {
			return fmt.Sprintf("pod %s sees %d of %d slots assigned", p.Name, n.SlotsAssigned, slot.Count)
		}
		if !n.ClusterStateOK {
			return fmt.Sprintf("pod %s says cluster_state is not ok", p.Name)
		}
		if len(n.Known) == len(ids) && knowsAll(n.Known, ids) {
			continue // the usual case, on every pass: no sorting, no message
		}
		for _, id := range slices.Sorted(maps.Keys(ids)) {
			if _, ok := n.Known[id]; !ok {
				return fmt.Sprintf("pod %s does not know pod %s's node %s", p.Name, ids[id], id)
			}
		}
		for _, id := range slices.Sorted(maps.Keys(n.Known)) {
			if _, ok := ids[id]; !ok {
				return fmt.Sprintf("pod %s knows node %s, which no pod of the cluster runs (gone, or met from outside)", p.Name, id)
			}
		}
	}
	if gap := s.HostnameGap(""); gap != "" {
		return gap
	}
	for shard, pods := range s.ShardPods() {
		primary := ShardPrimary(pods)
		if primary == nil || len(primary.Node.MySlots) == 0 {
			return fmt.Sprintf("shard %d has no primary serving slots", shard)
		}
		for _, p := range pods {
			if p.Name != primary.Name && (p.Node.Primary || p.Node.PrimaryID != primary.Node.ID) {
				return fmt.Sprintf("pod %s is not a replica of shard %d's primary %s", p.Name, shard, primary.Name)
			}
		}
	}
	return ""
}

// knowsAll reports whether known holds every id of ids.
func knowsAll[V any](known map[string]V, ids map[string]string) bool {
	for id := range ids {
		if _, ok := known[id]; !ok {
			return false
		}
	}
	return true
}

// HostnameGap says which live node does not know which live peer's hostname, "" when none (or
// when the cluster does not announce hostnames, Snapshot.Hostnames). With pod set, only gaps that
// involve pod count: its own view of its peers, and its peers' view of it.
func (s Snapshot) HostnameGap(pod string) string {
	if !s.Hostnames {
		return ""
	}
	live := s.LivePods()
	names := map[string]string{}
	for _, p := range live {
		if p.Node != nil && p.Node.ID != "" {
			names[p.Node.ID] = p.Name
		}
	}
	for _, p := range live {
		if p.Node == nil {
			continue
		}
		for id := range p.Node.NoHostname {
			peer, isLive := names[id]
			if isLive && (pod == "" || pod == p.Name || pod == peer) {
				return fmt.Sprintf("%s does not know %s's hostname yet", p.Name, peer)
			}
		}
	}
	return ""
}

// FormedOnce reports whether the cluster was formed at some point in its life, whatever it is
// now: such a cluster is healed in place and never bootstrapped again, and slots that no node
// serves in it were lost with every copy of their data. It is the one answer to "was this
// cluster formed" for the decision, the join types and the planners:
//
//   - status.formedAt is set (FormedAt): the marker survives every state, Invalid included;
//   - or the persisted state is Active or Upgrading: a status written before the marker
//     existed (the controller writes the marker on this pass);
//   - or, for a status that is Invalid, new or Bootstrapping, a node of the cluster completed
//     its join (ValkeyNode lifecycle Active, dead pods included; CompletedJoins waits for every
//     slot to be served): it was a full member of a cluster that served every slot, so the
//     cluster could hold data. That record is in the ValkeyNodes' spec, so it survives a status
//     written by an older operator, emptied by hand (kubectl edit --subresource=status) or
//     lost in a restore without status: such a cluster is healed, and a shard that lost every
//     copy meanwhile is reported (DataLost), not bootstrapped again in silence. Forming is left
//     out: in the first formation the primaries complete their joins before the replicas
//     attach, and the persisted Forming must not turn Active before they do. A status emptied
//     after those joins does read as formed (it comes back as new): the cluster served every
//     slot by then, so it could hold data (break test: healed, no false DataLost).
func (s Snapshot) FormedOnce() bool {
	switch {
	case !s.FormedAt.IsZero(), s.State == Active, s.State == Upgrading:
		return true
	case s.State == Invalid, s.State == Initial, s.State == Bootstrapping:
		for _, p := range s.Pods {
			if p.Lifecycle == string(v1.LifecycleActive) {
				return true
			}
		}
	}
	return false
}

// RolesDisagree says which reachable live node still sees another as other than that node says
// it is (a replica as a primary, or as the replica of another primary), "" when every view
// agrees. A node's role reaches the others with its own heartbeats, up to half
// cluster-node-timeout after it changed: right after a graceful failover the other primaries
// may still see the old primary as one, and would refuse it their vote if the new primary died
// (chaos seed 60606).
func (s Snapshot) RolesDisagree() string {
	live := s.LivePods()
	for _, y := range live {
		if y.Node == nil || !y.Node.Reachable || y.Node.ID == "" {
			continue
		}
		want := ""
		if !y.Node.Primary {
			want = y.Node.PrimaryID
		}
		for _, x := range live {
			if x.Name == y.Name || x.Node == nil || !x.Node.Reachable {
				continue
			}
			if _, knows := x.Node.Known[y.Node.ID]; !knows {
				continue
			}
			if got := x.Node.Follows[y.Node.ID]; got != want {
				role := "a primary"
				if got != "" {
					role = "a replica of " + got
				}
				return fmt.Sprintf("%s still sees %s as %s", x.Name, y.Name, role)
			}
		}
	}
	return ""
}

// Synced reports whether every replica's link to its primary is up: a replica that is
// attached but not yet synced holds no data and cannot take over its shard.
func (s Snapshot) Synced() bool { return len(s.Unsynced()) == 0 }

// Serving reports whether some reachable node says cluster_state:ok with every slot assigned:
// the cluster was formed once and still serves, whatever else drifted.
func (s Snapshot) Serving() bool {
	for _, p := range s.LivePods() {
		if n := p.Node; n != nil && n.Reachable && n.ClusterStateOK && n.SlotsAssigned == slot.Count {
			return true
		}
	}
	return false
}

// ShardPrimary picks the shard's primary among its pods: the pod whose node serves slots
// (by its own view), else the one that other pods of the shard replicate, else the first
// reachable pod by name. Nil when no pod has a reachable node.
func ShardPrimary(pods []Pod) *Pod {
	for i := range pods {
		if n := pods[i].Node; n != nil && n.Reachable && n.Primary && len(n.MySlots) > 0 {
			return &pods[i]
		}
	}
	for i := range pods {
		n := pods[i].Node
		if n == nil || !n.Reachable || !n.Primary {
			continue
		}
		for _, q := range pods {
			if q.Node != nil && q.Node.PrimaryID == n.ID {
				return &pods[i]
			}
		}
	}
	for i := range pods {
		if n := pods[i].Node; n != nil && n.Reachable && n.Primary && n.ID != "" {
			return &pods[i]
		}
	}
	return nil
}

// OwnedIDs are the node ids that live pods own: the id each live pod's node reported. It is the
// one definition the planners and AwaitingFailover share. A live pod whose node did not answer
// owns an id the snapshot cannot name, so a caller that must know every owned id (to forget the
// others) also checks AllAnswer.
func (s Snapshot) OwnedIDs() map[string]bool {
	owned := map[string]bool{}
	for _, p := range s.LivePods() {
		if p.Node != nil && p.Node.ID != "" {
			owned[p.Node.ID] = true
		}
	}
	return owned
}

// AllAnswer returns "" when every live pod runs with an IP and its node answered with its id;
// otherwise what is awaited, naming the first pod (by name) that is not there yet. Steps that
// need the whole picture (meet, slots, forget) are gated on it: an unreachable node is unknown,
// not gone.
func (s Snapshot) AllAnswer() string {
	live := s.LivePods()
	if len(live) == 0 {
		return "waiting for pods"
	}
	for _, pod := range live {
		switch {
		case pod.Phase != PodRunning || pod.IP == "":
			return "waiting for pod " + pod.Name + " to run"
		case pod.Node == nil || !pod.Node.Reachable || pod.Node.ID == "":
			msg := "waiting for node " + pod.Name + " to answer"
			if pod.Node != nil && pod.Node.Err != "" {
				msg += ": " + pod.Node.Err
			}
			return msg
		}
	}
	return ""
}

// FailoverWait is a shard whose primary is gone while a replica that can take over is alive.
type FailoverWait struct {
	Shard int
	// Replica is the pod of a live replica of the lost primary.
	Replica string
	// PrimaryID is the lost primary's node id.
	PrimaryID string
}

// AwaitingFailover lists the shards whose slots are held by a primary that no live pod owns
// while a live, reachable replica that can take over still follows it: Valkey's own failover will
// promote that replica, so the operator waits instead of acting. A replica that never synced
// (replication offset 0) holds no data and cannot take over: a shard whose only replicas are such
// is not awaiting a failover, it lost its data.
func (s Snapshot) AwaitingFailover() []FailoverWait {
	owned := s.OwnedIDs()
	var out []FailoverWait
	for shard, pods := range s.ShardPods() {
		for _, p := range pods {
			n := p.Node
			if p.Phase != PodRunning || n == nil || !n.Reachable || n.Primary || n.PrimaryID == "" || owned[n.PrimaryID] || n.ReplOffset <= 0 {
				continue
			}
			if len(n.Known[n.PrimaryID]) > 0 {
				out = append(out, FailoverWait{Shard: shard, Replica: p.Name, PrimaryID: n.PrimaryID})
				break
			}
		}
	}
	return out
}

// Outdated names the live pods (by name) that must be replaced to run what the operator would
// create now: an older image, config, hard placement, or resources they cannot take in place
// (Replaced). Nothing is outdated while the current hash is unknown ("": the spec could not be
// resolved).
func (s Snapshot) Outdated() []string {
	if s.SpecHash == "" {
		return nil
	}
	var out []string
	for _, p := range s.LivePods() {
		if s.Replaced(p) {
			out = append(out, p.Name)
		}
	}
	return out
}

// Unsynced names the live replicas (by name) whose link to their primary is not up: attached,
// but still loading their first sync, or cut from their primary. A node being retired (Leaving)
// is not waited for: the operator detached it from its primary on purpose.
func (s Snapshot) Unsynced() []string {
	var out []string
	for _, p := range s.LivePods() {
		if p.Lifecycle == string(v1.LifecycleLeaving) {
			continue
		}
		if n := p.Node; n != nil && n.Reachable && !n.Primary && !n.LinkUp {
			out = append(out, p.Name)
		}
	}
	return out
}

// SettingsUnread are the live, Active pods whose node answered but whose live settings could not
// be read (Node.ConfigErr): the settings planner neither checks nor applies them there, so they
// are said rather than skipped in silence. Joining and Leaving nodes are not the planner's.
func (s Snapshot) SettingsUnread() []Pod {
	var out []Pod
	for _, p := range s.LivePods() {
		if n := p.Node; p.Lifecycle == string(v1.LifecycleActive) && n != nil && n.Reachable && n.ConfigErr != "" {
			out = append(out, p)
		}
	}
	return out
}

// NodeReady reports whether p's node holds its place in the cluster, as far as the last
// observation tells: its pod runs, its node answered, and it is a primary serving slots or a
// replica whose link to its primary is up. Pods have no readiness probe (liveness only), so this,
// not the pod's Ready condition, is what status.nodeDetails[].ready and readyNodes report.
func NodeReady(p Pod) bool {
	n := p.Node
	if p.Deleting || p.Phase != PodRunning || n == nil || !n.Reachable || n.ID == "" {
		return false
	}
	if n.Primary {
		return len(n.MySlots) > 0
	}
	return n.PrimaryID != "" && n.LinkUp
}

// CatchUpBytes is how far a replica's replication offset may trail its primary's and still count
// as caught up. The two offsets are read a few milliseconds apart from a primary that takes
// writes, so they are rarely equal; a replica still loading its first sync or cut from its
// primary trails by far more.
const CatchUpBytes = 1 << 20

// CaughtUp reports whether replica holds a current copy of primary's data: its link is up, no
// full sync is in progress, and its offset trails the primary's by at most CatchUpBytes. Only a
// caught-up replica is a safe place for a rolling upgrade to fail over to, or lets one retire
// another copy of the shard. A replica at offset 0 has applied nothing yet, unless its primary
// has never sent a byte of stream either (a new, empty primary: both stay at 0 until the
// primary's first replication PING, repl-ping-replica-period, 10 s; measured on 8.0.1): its
// link being up with no sync in progress then means it loaded the primary's whole snapshot. A
// new shard's replica counts at once, instead of slots waiting up to 10 s to move into it.
func CaughtUp(replica, primary Pod) bool {
	r, p := replica.Node, primary.Node
	if r == nil || p == nil || !r.Reachable || !p.Reachable || r.Primary || r.PrimaryID != p.ID {
		return false
	}
	return r.LinkUp && !r.SyncInProgress && (r.ReplOffset > 0 || p.ReplOffset == 0) && p.ReplOffset-r.ReplOffset <= CatchUpBytes
}

// Changing says why the cluster's nodes are not yet what the spec asks for, "" when they are:
// nodes of an older spec are still live, a shard has more live nodes than wanted, fewer nodes of
// any kind than wanted (replicas or shards were added: a pod that merely failed still has its
// record and is not a change), nodes of a shard the spec no longer has, or a shard's primary
// does not serve its even share of the slots. It is what Upgrading
// means (SPEC.md §2.1): pods replaced, shards or replicas added or removed. Healing a failed
// node is not a change.
func (s Snapshot) Changing() string {
	if out := s.Outdated(); len(out) > 0 {
		return fmt.Sprintf("rolling upgrade: %d of %d nodes run an older spec (%s)", len(out), len(s.LivePods()), strings.Join(out, ", "))
	}
	records := make([]int, s.Shards)
	for _, p := range s.Pods {
		switch {
		case p.Deleting && (p.Shard >= s.Shards || p.Shard < 0):
		case p.Deleting:
			// A pod being deleted (a drain) is a record until it is gone: its loss is healed,
			// not a change of the spec.
			records[p.Shard]++
		case p.Shard >= s.Shards || p.Shard < 0:
			if !p.Deleting && p.Phase != PodFailed && p.Phase != PodSucceeded {
				return fmt.Sprintf("node %s belongs to shard %d, which the spec no longer has", p.Name, p.Shard)
			}
		default:
			records[p.Shard]++
		}
	}
	want := s.ReplicasPerShard + 1
	for shard, pods := range s.ShardPods() {
		switch {
		case len(pods) > want:
			for _, p := range pods {
				if p.MovedFrom != "" {
					return fmt.Sprintf("shard %d: moving a copy out of zone %s", shard, p.MovedFrom)
				}
			}
			return fmt.Sprintf("shard %d has %d nodes, %d wanted", shard, len(pods), want)
		case records[shard] < want:
			return fmt.Sprintf("shard %d has %d nodes, %d wanted", shard, records[shard], want)
		}
	}
	// Slots: while every slot is served, each shard's primary serves its even share. (Slots
	// nobody serves are a loss that formation assigns again, not a change; nor is a shard whose
	// primary was lost while a replica that can take over follows it: its pod's replacement, an
	// empty primary until it is attached, would read as a shard serving no slot, and the cluster
	// turned Upgrading for the seconds of a failover (chaos seed 60606).)
	if s.Serving() {
		spread := slot.EvenSpread(s.Shards)
		healing := map[int]bool{}
		for _, w := range s.AwaitingFailover() {
			healing[w.Shard] = true
		}
		for shard, pods := range s.ShardPods() {
			if healing[shard] {
				continue
			}
			if p := ShardPrimary(pods); p != nil && p.Node.MySlots.Count() != spread[shard].Count() {
				return fmt.Sprintf("resharding: shard %d serves %d slots, %d wanted", shard, p.Node.MySlots.Count(), spread[shard].Count())
			}
		}
	}
	return ""
}
