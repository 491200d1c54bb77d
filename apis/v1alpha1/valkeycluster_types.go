package v1alpha1

import (
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Bounds of a ValkeyCluster's topology, enforced by the CRD. The original documents no upper
// bound on shards or replicasPerShard. Ours exist because the operator is shared: every node is
// a pod the team asks of the whole Kubernetes cluster, and a tenant must not be able to ask for
// thousands of them. Each bound is also a schema maximum (not only a CEL rule): an API server
// before 1.36 drops format: int32 from CRD schemas, so only a maximum keeps it from storing a
// number the operator cannot decode.
const (
	// MaxNodes bounds the nodes of a ValkeyCluster, shards × (1 + replicasPerShard) (a CEL rule
	// on the spec): Valkey's cluster bus is a full mesh, every node pinging every other, designed
	// for at most about 1000 nodes.
	MaxNodes = 1000

	// MaxShards bounds spec.shards: each shard is at least its primary, so MaxNodes bounds the
	// shards too. It is well below Valkey's own limit of 16384 (one hash slot per shard).
	MaxShards = MaxNodes

	// MaxReplicasPerShard bounds spec.replicasPerShard: one shard, its primary and replicas, is
	// at most MaxNodes nodes.
	MaxReplicasPerShard = MaxNodes - 1

	// MaxShardIndex bounds the shard indexes the operator writes (a ValkeyNode's
	// spec.shardIndex, status.failover.shard): an index is below spec.shards, which no version
	// of this operator let exceed Valkey's 16384 hash slots. It is not MaxShards - 1 so that the
	// operator can still create and update the nodes of a cluster admitted before MaxNodes
	// existed.
	MaxShardIndex = 16383

	// MaxExactJSONInteger (2^53 - 1) bounds the int64 fields of status: the largest integer a
	// JSON number holds exactly in every client (jq and JavaScript read numbers as float64).
	MaxExactJSONInteger = 1<<53 - 1

	// MaxClusterNameLength bounds a ValkeyCluster's name: its pods are named
	// {cluster}-{5 hex}, and a pod's name is also its hostname, a DNS label of at most 63
	// characters.
	MaxClusterNameLength = 57
)

// ValkeyClusterSpec is one Valkey cluster: which config its nodes use, how many shards and
// replicas, who may connect, and where the pods go.
//
// Its deepcopy is hand-written (deepcopy.go): controller-gen's generator mishandles the
// AnnotationValue alias.
// +kubebuilder:object:generate=false
// +kubebuilder:validation:XValidation:rule="has(self.tls) == has(oldSelf.tls)",message="spec.tls cannot be added or removed after the cluster is created: TLS is chosen at creation; create a new ValkeyCluster to switch TLS on or off"
// +kubebuilder:validation:XValidation:rule="self.shards * (self.replicasPerShard + 1) <= 1000",message="shards × (replicasPerShard + 1) must be at most 1000 nodes: Valkey's cluster bus is designed for at most about 1000 nodes; use fewer shards or replicas, or split the data over several ValkeyClusters"
type ValkeyClusterSpec struct {
	// configRef names the (cluster-scoped) ValkeyConfig the nodes use.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule=`self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')`,message="configRef must name a ValkeyConfig: a lowercase DNS name such as standard"
	ConfigRef string `json:"configRef"`

	// shards is the number of primaries; the 16384 slots are spread evenly over them. At
	// least 1, at most 1000 (MaxShards), and shards × (replicasPerShard + 1) at most 1000
	// nodes (MaxNodes): Valkey's cluster bus is designed for at most about 1000 nodes, and each
	// is a pod of the shared Kubernetes cluster. Changing it on a running cluster reshards: new
	// shards are joined and take their share of the slots, keys included; removed shards are
	// drained into the others, then retired.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 1000",message="shards must be between 1 and 1000: a shard is at least one node, and a cluster at most 1000 nodes (Valkey's cluster bus is designed for about 1000)"
	Shards int32 `json:"shards"`

	// replicasPerShard is the number of replicas of each primary, not counting the primary:
	// 1 gives two nodes per shard. At least 0, at most 999 (MaxReplicasPerShard: a shard of
	// 1000 nodes), and shards × (replicasPerShard + 1) at most 1000 nodes. Raising it on a
	// running cluster adds replicas, lowering it retires replicas, one node at a time; a primary
	// is never retired.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=999
	// +kubebuilder:validation:XValidation:rule="self >= 0 && self <= 999",message="replicasPerShard must be between 0 and 999: it counts the replicas of each primary, and a cluster is at most 1000 nodes"
	ReplicasPerShard int32 `json:"replicasPerShard"`

	// acl binds Valkey users on this cluster, in addition to those of the config; a username
	// the config already binds makes the cluster Invalid. Empty (and none on the config), the
	// default user stays as Valkey ships it; as soon as one user is bound, the default user is
	// switched off. At most 64 entries, one per username. A change reaches every running node
	// within seconds (the ACL controller), without replacing any.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.exists_one(b, b.username == a.username))",message="duplicate username in ACL bindings: each username may be bound only once; merge the entries into one"
	ACL []ACLBinding `json:"acl,omitempty"`

	// tls asks for a TLS-only cluster: the plaintext port is closed, and clients, replication
	// and the cluster bus use TLS; each node announces its per-pod DNS name so that clients
	// verify it. Set at creation: it cannot be added or removed afterwards. tls.secretRef may
	// change (pointing at another Secret is a rotation).
	// +optional
	TLS *TLSSpec `json:"tls,omitempty"`

	// placement restricts and spreads the pods over zones and nodes.
	// +optional
	Placement *Placement `json:"placement,omitempty"`

	// podAnnotations are copied verbatim onto every pod the operator manages for the cluster
	// (and onto nothing else). Added or changed keys are patched onto live pods in place (no pod
	// is replaced); a removed key stays on live pods until each is next replaced. Refused, with
	// a message that says why: keys under valkey.gomomento.com/ (reserved for the operator);
	// the AppArmor and seccomp annotations (container.apparmor.security.beta.kubernetes.io/*,
	// seccomp.security.alpha.kubernetes.io/pod, container.seccomp.security.alpha.kubernetes.io/*),
	// which would override or loosen the confinement the operator gives its pods (seccomp
	// RuntimeDefault, the runtime's default AppArmor profile); and more than 131072 bytes of
	// keys and values together (MaxPodAnnotationsBytes): Kubernetes refuses a pod whose
	// annotations exceed 262144 bytes, and the other half is kept for the operator's own
	// annotations and those other controllers add. At most 64 entries. CheckPodAnnotations is
	// the same check in Go.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('valkey.gomomento.com/'))",messageExpression="'podAnnotations key ' + (self.filter(k, k.startsWith('valkey.gomomento.com/'))[0].replace('\\n', '\\\\n').replace('\\r', '\\\\r').replace('\\t', '\\\\t').matches('^[ -~]*$') ? self.filter(k, k.startsWith('valkey.gomomento.com/'))[0].replace('\\n', '\\\\n').replace('\\r', '\\\\r').replace('\\t', '\\\\t') : 'a key holding a control or non-ASCII character') + ' uses the prefix valkey.gomomento.com/, which is reserved for the operator; choose another prefix'"
	// +kubebuilder:validation:XValidation:rule=`self.all(k, k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))`,messageExpression=`'podAnnotations keys must be annotation keys: an optional DNS prefix and \'/\', then a name of at most 63 letters, digits, \'-\', \'.\' and \'_\', like example.com/scrape; not ' + (self.filter(k, !k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))[0].replace('\n', '\\n').replace('\r', '\\r').replace('\t', '\\t').matches('^[ -~]*$') ? self.filter(k, !k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))[0].replace('\n', '\\n').replace('\r', '\\r').replace('\t', '\\t') : 'a key holding a control or non-ASCII character')`
	// +kubebuilder:validation:XValidation:rule=`self.all(k, k.matches('^([^/]{0,253}/)?[^/]*$'))`,messageExpression=`"podAnnotations key prefixes (before the '/') must be at most 253 characters, as Kubernetes requires: no pod could carry the key; not " + (self.filter(k, !k.matches('^([^/]{0,253}/)?[^/]*$'))[0].replace('\n', '\\n').replace('\r', '\\r').replace('\t', '\\t').matches('^[ -~]*$') ? self.filter(k, !k.matches('^([^/]{0,253}/)?[^/]*$'))[0].replace('\n', '\\n').replace('\r', '\\r').replace('\t', '\\t') : 'a key holding a control or non-ASCII character')`
	// +kubebuilder:validation:XValidation:rule=`self.all(k, !k.startsWith('container.apparmor.security.beta.kubernetes.io/'))`,messageExpression=`"podAnnotations key " + (self.filter(k, k.startsWith('container.apparmor.security.beta.kubernetes.io/'))[0].replace('\n', '\\n').replace('\r', '\\r').replace('\t', '\\t').matches('^[ -~]*$') ? self.filter(k, k.startsWith('container.apparmor.security.beta.kubernetes.io/'))[0].replace('\n', '\\n').replace('\r', '\\r').replace('\t', '\\t') : 'a key holding a control or non-ASCII character') + " would set the AppArmor profile of the cluster's containers, which the operator leaves at the container runtime's default; an annotation may not loosen it: remove the key"`
	// +kubebuilder:validation:XValidation:rule=`self.all(k, !k.startsWith('seccomp.security.alpha.kubernetes.io/') && !k.startsWith('container.seccomp.security.alpha.kubernetes.io/'))`,messageExpression=`"podAnnotations key " + (self.filter(k, k.startsWith('seccomp.security.alpha.kubernetes.io/') || k.startsWith('container.seccomp.security.alpha.kubernetes.io/'))[0].replace('\n', '\\n').replace('\r', '\\r').replace('\t', '\\t').matches('^[ -~]*$') ? self.filter(k, k.startsWith('seccomp.security.alpha.kubernetes.io/') || k.startsWith('container.seccomp.security.alpha.kubernetes.io/'))[0].replace('\n', '\\n').replace('\r', '\\r').replace('\t', '\\t') : 'a key holding a control or non-ASCII character') + " would set the seccomp profile of the cluster's pods, which the operator sets itself (RuntimeDefault); an annotation may not override it: remove the key"`
	// +kubebuilder:validation:XValidation:rule=`self.map(k, k.size() + bytes(self[k]).size()).sum() <= 131072`,message="podAnnotations may hold at most 131072 bytes, keys and values together: Kubernetes refuses a pod whose annotations exceed 262144 bytes, and the rest is kept for the operator's own annotations and those that other controllers add; keep large data in a ConfigMap and annotate its name"
	PodAnnotations map[string]AnnotationValue `json:"podAnnotations,omitempty"`

	// network says who may reach the cluster's nodes. By default the operator keeps a
	// NetworkPolicy {cluster}-network that lets only the cluster's own pods reach the cluster
	// bus (16379), which has no authentication: a stranger that reaches it can join the cluster
	// and take its slots (docs/user/network-policy.md).
	// +optional
	Network *Network `json:"network,omitempty"`
}

// NodeCount returns the number of Valkey nodes the spec asks for: shards × (1 + replicas).
func (s ValkeyClusterSpec) NodeCount() int {
	return int(s.Shards) * (1 + int(s.ReplicasPerShard))
}

// TLSSpec names the certificate of a TLS-only cluster.
type TLSSpec struct {
	// secretRef names a kubernetes.io/tls Secret in the cluster's namespace holding tls.crt,
	// tls.key and ca.crt. The certificate must cover {cluster}.{namespace}.svc.cluster.local
	// and *.{cluster}.{namespace}.svc.cluster.local, for both server and client auth (each node
	// is a TLS client of its peers), and chain to ca.crt. It is validated on every pass; a
	// Secret that fails makes the cluster Invalid with the reason in status.message. Updating
	// the Secret's data in place rotates the certificate on every node without a restart;
	// naming another Secret here replaces the nodes one shard at a time, since a pod's volumes
	// cannot be changed.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule=`self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')`,message="tls.secretRef must name a Secret in the cluster's namespace: a lowercase DNS name such as my-cluster-tls"
	SecretRef string `json:"secretRef"`
}

// Placement restricts and spreads a cluster's pods. Its deepcopy is hand-written
// (deepcopy.go): controller-gen's generator mishandles the LabelValue alias.
// +kubebuilder:object:generate=false
type Placement struct {
	// zones restricts the pods to these zones (required node affinity on
	// topology.kubernetes.io/zone). At most 16, no duplicates.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:XValidation:rule="self.matches('^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$')",message="zones must be zone names as in the node label topology.kubernetes.io/zone, like us-east-1a"
	Zones []string `json:"zones,omitempty"`

	// nodeSelector is copied verbatim into every pod's nodeSelector: node label keys and
	// values that a node must carry. At most 32 entries; a key's prefix is at most 253
	// characters, as for any label key (the pod would be refused otherwise).
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule=`self.all(k, k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))`,messageExpression=`'placement.nodeSelector keys must be node label keys: an optional DNS prefix and \'/\', then a name of at most 63 letters, digits, \'-\', \'.\' and \'_\', like node-pool; not ' + (self.filter(k, !k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))[0].replace('\n', '\\n').replace('\r', '\\r').replace('\t', '\\t').matches('^[ -~]*$') ? self.filter(k, !k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))[0].replace('\n', '\\n').replace('\r', '\\r').replace('\t', '\\t') : 'a key holding a control or non-ASCII character')`
	// +kubebuilder:validation:XValidation:rule=`self.all(k, k.matches('^([^/]{0,253}/)?[^/]*$'))`,messageExpression=`"placement.nodeSelector key prefixes (before the '/') must be at most 253 characters, as Kubernetes requires of label keys: no pod could carry the key; not " + (self.filter(k, !k.matches('^([^/]{0,253}/)?[^/]*$'))[0].replace('\n', '\\n').replace('\r', '\\r').replace('\t', '\\t').matches('^[ -~]*$') ? self.filter(k, !k.matches('^([^/]{0,253}/)?[^/]*$'))[0].replace('\n', '\\n').replace('\r', '\\r').replace('\t', '\\t') : 'a key holding a control or non-ASCII character')`
	NodeSelector map[string]LabelValue `json:"nodeSelector,omitempty"`

	// zoneSpread is how strictly each shard's nodes are spread over zones: bestEffort
	// (ScheduleAnyway) or required (DoNotSchedule). Omitted, the operator's default applies
	// (defaultZoneSpread in ConfigMap valkey-operator-config, itself bestEffort by default).
	// +optional
	ZoneSpread ZoneSpread `json:"zoneSpread,omitempty"`
}

// Network is who may reach a cluster's nodes: the NetworkPolicy the operator keeps for it.
type Network struct {
	// policy turns the operator's NetworkPolicy {cluster}-network on (Enabled) or off
	// (Disabled: the operator deletes the one it made, and segmentation is the platform's, as
	// with the original operator). Omitted, the operator's default applies
	// (defaultNetworkPolicy in ConfigMap valkey-operator-config, itself Enabled by default).
	// +optional
	Policy NetworkPolicyMode `json:"policy,omitempty"`

	// clients are the peers that may reach the client port (6379), as in a NetworkPolicy's
	// ingress "from": pods by podSelector (in the cluster's namespace, or in the namespaces a
	// namespaceSelector beside it selects), whole namespaces by namespaceSelector, or addresses
	// by ipBlock. Omitted or empty, the client port is open to every source, as it is without a
	// policy. The cluster's own pods (replication) and the operator may always reach it. At most
	// 32 entries; each sets podSelector and/or namespaceSelector, or ipBlock alone. An entry a
	// NetworkPolicy cannot hold (a selector label that is no label, a cidr that is no CIDR), or
	// one larger than the operator takes (more than 32 matchLabels and matchExpressions in a
	// selector, 64 values in an expression, 32 CIDRs in except), makes the cluster Invalid,
	// naming it.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.all(p, has(p.podSelector) || has(p.namespaceSelector) || has(p.ipBlock))",message="network.clients entries must set podSelector, namespaceSelector or ipBlock: an empty entry selects nothing in a NetworkPolicy; use {namespaceSelector: {}} for every pod of every namespace"
	// +kubebuilder:validation:XValidation:rule="self.all(p, !has(p.ipBlock) || (!has(p.podSelector) && !has(p.namespaceSelector)))",message="network.clients entries set ipBlock alone, as a NetworkPolicy requires: put the selectors in an entry of their own"
	Clients []networkingv1.NetworkPolicyPeer `json:"clients,omitempty"`
}

// NetworkPolicyMode turns the operator's NetworkPolicy of a cluster on or off.
// +kubebuilder:validation:Enum=Enabled;Disabled
type NetworkPolicyMode string

// The NetworkPolicy modes.
const (
	// NetworkPolicyEnabled: the operator keeps the cluster's NetworkPolicy.
	NetworkPolicyEnabled NetworkPolicyMode = "Enabled"
	// NetworkPolicyDisabled: the operator keeps none (and deletes the one it made).
	NetworkPolicyDisabled NetworkPolicyMode = "Disabled"
)

// IsValid reports whether m is Enabled or Disabled. The empty value, "use the operator's
// default", is not valid as a resolved mode.
func (m NetworkPolicyMode) IsValid() bool {
	return m == NetworkPolicyEnabled || m == NetworkPolicyDisabled
}

// AnnotationValue is the value of one pod annotation. It is an alias of string, so
// spec.podAnnotations stays a map[string]string in Go; the alias carries the schema of the map's
// values: at most MaxPodAnnotationsBytes characters (no single value may exceed what all of
// them together may hold), a bound the API server needs to estimate the cost of the size rule.
// +kubebuilder:validation:MaxLength=131072
type AnnotationValue = string

// LabelValue is a Kubernetes label value: at most 63 letters, digits, '-', '_' and '.',
// starting and ending with a letter or digit, or empty. It is an alias of string, so
// placement.nodeSelector stays a map[string]string in Go; the alias carries the schema of the
// map's values.
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:XValidation:rule="self.matches('^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$')",message="placement.nodeSelector values must be node label values: at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
type LabelValue = string

// ZoneSpread is the mode of the per-shard zone topology spread constraint.
// +kubebuilder:validation:Enum=bestEffort;required
type ZoneSpread string

// The zone spread modes.
const (
	// ZoneSpreadBestEffort prefers spreading a shard over zones but schedules anyway
	// (whenUnsatisfiable: ScheduleAnyway).
	ZoneSpreadBestEffort ZoneSpread = "bestEffort"
	// ZoneSpreadRequired never puts two nodes of a shard in one zone while another zone
	// would do; pods wait Pending instead (whenUnsatisfiable: DoNotSchedule).
	ZoneSpreadRequired ZoneSpread = "required"
)

// IsValid reports whether z is bestEffort or required. The empty value, "use the operator's
// default", is not valid as a resolved mode.
func (z ZoneSpread) IsValid() bool {
	return z == ZoneSpreadBestEffort || z == ZoneSpreadRequired
}

// NodeRole is the role of a Valkey node in its shard.
// +kubebuilder:validation:Enum=primary;replica
type NodeRole string

// The node roles.
const (
	// NodeRolePrimary serves its shard's slots.
	NodeRolePrimary NodeRole = "primary"
	// NodeRoleReplica copies its shard's primary and may be promoted.
	NodeRoleReplica NodeRole = "replica"
)

// NodeStatus is what the operator last observed of one pod and its Valkey node.
type NodeStatus struct {
	// pod is the pod's name, such as my-cluster-8c04d.
	Pod string `json:"pod"`
	// shard is the index of the pod's shard, counted from 0, as its
	// valkey.gomomento.com/shard-index label says; -1 when the label is missing or not a
	// number. The label is on the pod, which the namespace's users may edit, so the schema
	// bounds this field by its Go type only (int32): a narrower bound could refuse the
	// operator's own status write and leave the cluster without status.
	// +kubebuilder:validation:Minimum=-2147483648
	// +kubebuilder:validation:Maximum=2147483647
	Shard int32 `json:"shard"`
	// role is primary or replica; empty while the node has not joined the cluster.
	// +optional
	Role NodeRole `json:"role,omitempty"`
	// nodeId is the Valkey cluster node id (40 hex characters); empty until the node was
	// observed.
	// +optional
	NodeID string `json:"nodeId,omitempty"`
	// ready is true when, at the last observation, the pod ran, its node answered, and it
	// held its place: a primary serving slots, or a replica whose replication link to its
	// primary is up. (The pods have a liveness probe only; this is not the pod's Ready
	// condition.)
	Ready bool `json:"ready"`
	// ip is the pod IP, once it has one.
	// +optional
	IP string `json:"ip,omitempty"`
}

// ValkeyClusterStatus is what the operator last did and observed. It is written once per
// reconcile, through the status subresource.
type ValkeyClusterStatus struct {
	// state is what the operator is doing: Bootstrapping, Forming, Active, Upgrading or
	// Invalid.
	// +optional
	State State `json:"state,omitempty"`
	// message is empty while the cluster is Ready (alert on it being non-empty); otherwise
	// why it is not: what the operator waits for, what blocks it, or why the spec is
	// Invalid. The same text as the Ready condition's message.
	// +optional
	Message string `json:"message,omitempty"`
	// observedGeneration is the metadata.generation of the spec the operator last acted on:
	// the spec the last pass read, decided and planned from. A pass that cannot act (the
	// operator's credential Secret is missing) leaves it as it was.
	// At most 2^53 - 1 (MaxExactJSONInteger), the largest integer every JSON client reads
	// exactly; the API server counts generations up from 1, one per spec change.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=9007199254740991
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// shards is the number of shards that currently own slots. Always written (0 included)
	// but optional in the schema, so that a status patch need not carry it. At most 16384: a
	// shard counted here serves at least one of Valkey's 16384 hash slots.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=16384
	Shards int32 `json:"shards"`
	// readyNodes is the number of nodes in nodes[] whose ready is true (the READY column).
	// Always written, optional in the schema. Bounded by its Go type (int32) only: it counts
	// the pods the operator observed, which may outnumber MaxNodes while nodes are replaced
	// (or in a cluster admitted before that bound), and a narrower bound could refuse the
	// operator's own status write.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	ReadyNodes int32 `json:"readyNodes"`
	// nodes are the names of the cluster's pods, as in the original's schema (an array of
	// strings, which the original reserves and leaves empty). nodeDetails says more of each.
	// +optional
	Nodes NodeNames `json:"nodes,omitempty"`
	// nodeDetails are the cluster's pods with their shard, role, node id and readiness, by pod
	// name.
	// +optional
	// +listType=map
	// +listMapKey=pod
	NodeDetails []NodeStatus `json:"nodeDetails,omitempty"`
	// conditions, each with its observedGeneration: Ready (every desired node exists and runs
	// the current pod spec, every replica is synced and every slot is served), Progressing (the
	// operator is working toward Ready), Degraded (a cluster formed once that is not Ready, or
	// that the operator cannot manage), and DataLost (True once a shard lost every copy of its
	// data and was served again, empty; its message names the shards, slots and time; the
	// operator never clears it).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
	// formedAt is when the operator first saw the cluster formed (Active). It is never cleared:
	// a cluster formed once is healed in place whatever state it is in later (Invalid
	// included), never bootstrapped again, and a shard that lost every copy of its data
	// meanwhile is served again empty with the DataLost condition, not silently rebuilt. A
	// cluster formed before the operator wrote this field gets it on the first pass that finds
	// it Active or Upgrading.
	// +optional
	FormedAt *metav1.Time `json:"formedAt,omitempty"`
	// targetSpec is the topology a cluster not yet formed bootstraps toward, as in the
	// original: configRef, shards and replicasPerShard, copied from spec when bootstrap starts
	// (Bootstrapping) and cleared when the cluster is first Active. An edit of spec.shards or
	// spec.replicasPerShard meanwhile waits, and is carried out once the cluster is Active.
	// Every other field is read live from spec and not copied here (spec.acl's password hashes
	// stay out of status).
	// +optional
	TargetSpec *TargetSpec `json:"targetSpec,omitempty"`
	// failover is the failover the operator issued and waits for, written before it is issued
	// so that neither the next pass nor a restarted operator issues a second one for the same
	// shard; cleared once no node follows the lost primary any more.
	// +optional
	Failover *FailoverStatus `json:"failover,omitempty"`
	// passwordRotation is the last rotation of the system users' passwords asked for with the
	// AnnotationRotateSystemPasswords annotation: which request, its phase, and when it started
	// and completed. It names no password.
	// +optional
	PasswordRotation *PasswordRotationStatus `json:"passwordRotation,omitempty"`
}

// The phases of a rotation of the system users' passwords, in order (status.passwordRotation.phase).
const (
	// RotationAdding: the next passwords are in the credential Secret and every node is given
	// them beside the current ones.
	RotationAdding = "Adding"
	// RotationSwitching: every node accepts both; replicas authenticate to their primary
	// (primaryauth) and the operator connects with the next ones.
	RotationSwitching = "Switching"
	// RotationRetiring: the next passwords are the only ones in the Secret, and the old ones are
	// taken off every node.
	RotationRetiring = "Retiring"
	// RotationComplete: every node refuses the old passwords.
	RotationComplete = "Complete"
)

// PasswordRotationStatus is status.passwordRotation: one rotation of the system users'
// passwords, recorded phase by phase, so that an operator restarted at any point carries it on
// from where it stood.
type PasswordRotationStatus struct {
	// request is the value of the rotate-system-passwords annotation this rotation answers.
	// +kubebuilder:validation:MaxLength=253
	Request string `json:"request"`
	// phase is Adding, Switching, Retiring or Complete.
	// +kubebuilder:validation:Enum=Adding;Switching;Retiring;Complete
	Phase string `json:"phase"`
	// startedAt is when the rotation started.
	StartedAt metav1.Time `json:"startedAt"`
	// completedAt is when every node refused the old passwords.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
}

// TargetSpec is status.targetSpec: the part of ValkeyClusterSpec a bootstrap takes from its
// snapshot, under the spec's own field names, so that a client of the original's schema (where
// targetSpec has the spec's shape) decodes it. It is its own type, not ValkeyClusterSpec, so the
// spec's admission rules are not evaluated again on every status write.
type TargetSpec struct {
	// configRef is spec.configRef when bootstrap started.
	// +kubebuilder:validation:MaxLength=253
	ConfigRef string `json:"configRef"`
	// shards is the number of shards the bootstrap forms.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Shards int32 `json:"shards"`
	// replicasPerShard is the replicas of each primary the bootstrap forms.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=999
	ReplicasPerShard int32 `json:"replicasPerShard"`
}

// FailoverStatus is one failover the operator issued: on which replica, for which lost primary,
// when, and how.
type FailoverStatus struct {
	// shard is the index of the shard failed over: below spec.shards, so at most
	// MaxShardIndex (16383).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=16383
	Shard int32 `json:"shard"`
	// pod is the replica's pod, the one asked to become primary.
	Pod string `json:"pod"`
	// primaryNodeId is the node id of the primary being replaced.
	PrimaryNodeID string `json:"primaryNodeId"`
	// mode is the CLUSTER FAILOVER option sent: FORCE (the primary's container is gone),
	// TAKEOVER (no majority of primaries left to vote, or the primary's container is gone and
	// a FORCE would not take), or empty (a graceful failover of a primary whose pod is being
	// deleted).
	// +optional
	Mode string `json:"mode,omitempty"`
	// startedAt is when the failover was issued.
	StartedAt metav1.Time `json:"startedAt"`
}

// ValkeyCluster is one Valkey cluster in cluster mode: its shards, replicas, users, TLS and
// placement. The operator creates a headless Service, one pod per node, the rendered config
// and ACL file, and its own credentials, all owned by the ValkeyCluster. Namespaced. Its name
// is a DNS label of at most MaxClusterNameLength characters starting with a letter, because it
// names the Service and prefixes the pods.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=vkc,categories=valkey
// +kubebuilder:printcolumn:name="Config",type=string,JSONPath=`.spec.configRef`
// +kubebuilder:printcolumn:name="Shards",type=integer,JSONPath=`.spec.shards`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicasPerShard`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyNodes`
// +kubebuilder:printcolumn:name="Message",type=string,priority=1,JSONPath=`.status.message`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 57 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="ValkeyCluster names must start with a lowercase letter, hold only lowercase letters, digits and '-', and be at most 57 characters: the name is the cluster's Service name and, with a 6-character suffix, its pods' hostnames"
type ValkeyCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired cluster.
	Spec ValkeyClusterSpec `json:"spec"`
	// status is what the operator last did and observed.
	Status ValkeyClusterStatus `json:"status,omitempty"`
}

// ValkeyClusterList is a list of ValkeyCluster.
// +kubebuilder:object:root=true
type ValkeyClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the ValkeyClusters.
	Items []ValkeyCluster `json:"items"`
}
