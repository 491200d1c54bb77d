package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeLifecycle is where a ValkeyNode stands in joining or leaving its Valkey cluster. It is the
// one field of a ValkeyNode the operator changes after creating it.
// +kubebuilder:validation:Enum=Active;Joining;Leaving
type NodeLifecycle string

// The node lifecycles, in the order a node goes through them.
const (
	// LifecycleJoining: the node was created and is not yet a full member: a replica whose
	// replication link is not up yet, or a primary that serves no slots yet.
	LifecycleJoining NodeLifecycle = "Joining"
	// LifecycleActive: the node is a full member of its shard.
	LifecycleActive NodeLifecycle = "Active"
	// LifecycleLeaving: the operator decided to retire the node and wrote that intent before
	// acting on it, so that an operator restarted in between finishes the retirement.
	LifecycleLeaving NodeLifecycle = "Leaving"
)

// ValkeyNodeSpec is what one Valkey node was created from. The operator writes it once; only
// lifecycle changes afterwards, and a node whose desired spec changed is replaced by a new
// ValkeyNode, never edited.
//
// The CEL rules below keep every field but lifecycle as it was created, so that the pod and the
// config file of a node always match its record; the one exception is the settings Valkey takes
// at run time (package liveconf, whose list the valkeySettings rule repeats: CEL cannot import
// it, and a test keeps the two equal), which the operator applies with CONFIG SET and then
// records here. Its deepcopy is hand-written (deepcopy.go):
// controller-gen's generator mishandles the DirectiveValue alias.
// +kubebuilder:validation:XValidation:rule="self.clusterName == oldSelf.clusterName && self.image == oldSelf.image && self.shardIndex == oldSelf.shardIndex",message="ValkeyNode spec is immutable except lifecycle: clusterName, image and shardIndex cannot change"
// +kubebuilder:validation:XValidation:rule="has(self.cpu) == has(oldSelf.cpu) && has(self.memory) == has(oldSelf.memory)",message="ValkeyNode spec is immutable except lifecycle: cpu and memory change only in value (an in-place resize), never added or removed"
// +kubebuilder:validation:XValidation:rule="has(self.tlsSecret) == has(oldSelf.tlsSecret) && (!has(self.tlsSecret) || self.tlsSecret == oldSelf.tlsSecret)",message="ValkeyNode spec is immutable except lifecycle: tlsSecret cannot change"
// +kubebuilder:validation:XValidation:rule="has(self.placement) == has(oldSelf.placement) && (!has(self.placement) || self.placement == oldSelf.placement)",message="ValkeyNode spec is immutable except lifecycle: placement cannot change"
// +kubebuilder:validation:XValidation:rule="has(self.valkeySettings) == has(oldSelf.valkeySettings) && (!has(self.valkeySettings) || (self.valkeySettings.all(k, k in ['hz', 'latency-monitor-threshold', 'lazyfree-lazy-eviction', 'lazyfree-lazy-expire', 'maxclients', 'maxmemory', 'maxmemory-policy', 'maxmemory-samples', 'slowlog-log-slower-than', 'slowlog-max-len', 'timeout'] || (k in oldSelf.valkeySettings && self.valkeySettings[k] == oldSelf.valkeySettings[k])) && oldSelf.valkeySettings.all(k, k in ['hz', 'latency-monitor-threshold', 'lazyfree-lazy-eviction', 'lazyfree-lazy-expire', 'maxclients', 'maxmemory', 'maxmemory-policy', 'maxmemory-samples', 'slowlog-log-slower-than', 'slowlog-max-len', 'timeout'] || k in self.valkeySettings)))",message="ValkeyNode spec is immutable except lifecycle: valkeySettings cannot change, but for the settings applied live"
// +kubebuilder:object:generate=false
type ValkeyNodeSpec struct {
	// clusterName is the name of the ValkeyCluster this node belongs to, in the same
	// namespace.
	// +kubebuilder:validation:MaxLength=63
	ClusterName string `json:"clusterName"`

	// image is the container image the node's pod runs, as repository:tag, resolved from the
	// cluster's ValkeyConfig and ValkeyImage when the node was created.
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image"`

	// cpu is the CPU request and limit of the node's container, as resolved when the node was
	// created or last resized in place. Empty: none.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	CPU string `json:"cpu,omitempty"`

	// memory is the memory request and limit of the node's container, as resolved when the
	// node was created or last resized in place. Empty: none.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Memory string `json:"memory,omitempty"`

	// valkeySettings are the valkey.conf directives the node was started with: the resolved
	// ValkeyConfig's together with the ones the operator sets itself. The node's {name}-config
	// ConfigMap holds them rendered as valkey.conf.
	// +optional
	// +kubebuilder:default={}
	// +kubebuilder:validation:MaxProperties=1024
	ValkeySettings map[string]DirectiveValue `json:"valkeySettings,omitempty"`

	// shardIndex is the shard the operator created this node for, counted from 0. The pod
	// carries it as the valkey.gomomento.com/shard-index label, which spreads a shard's pods
	// over hosts and zones. It is an index the operator assigns, not the Valkey shard id. It is
	// below the cluster's spec.shards, so at most MaxShardIndex (16383: no version of this
	// operator admitted more shards than Valkey's 16384 hash slots), which keeps the nodes of a
	// cluster admitted before MaxShards was lowered creatable.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=16383
	ShardIndex int32 `json:"shardIndex"`

	// tlsSecret names the TLS Secret mounted into the node's pod when its cluster uses TLS;
	// empty otherwise.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	TLSSecret string `json:"tlsSecret,omitempty"`

	// placement is the cluster's placement as it was when the node was created.
	// +optional
	Placement *Placement `json:"placement,omitempty"`

	// lifecycle is where the node stands: Joining from creation until it is a full member
	// (a primary serving slots, or a replica whose link to its primary is up), then Active;
	// Leaving once the operator decided to retire it. The only field that may change.
	// +optional
	// +kubebuilder:default=Active
	Lifecycle NodeLifecycle `json:"lifecycle,omitempty"`
}

// ValkeyNodeStatus is the operator's record of the pod it created for the node. Only the
// operator writes it: the status subresource is granted to no tenant role (valkey-operator-view
// grants get, list and watch on valkeynodes alone), so what it records holds even against a
// team that may create pods in the namespace.
type ValkeyNodeStatus struct {
	// podUID is the UID of the pod the operator created for this node. A pod of the node's name
	// with another UID is not the node's: the operator never connects to it. Empty until the
	// operator recorded the pod (nodes created by an operator before this field).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	PodUID string `json:"podUID,omitempty"`
}

// ValkeyNode is the operator's record of one Valkey node of a ValkeyCluster. The operator
// creates, updates and deletes it; users read it. It is owned by its ValkeyCluster and owns the
// pod and the {name}-config ConfigMap of the same name, so deleting the cluster deletes it and
// them. Its status records which pod is the node's (its UID, which no one else can give a pod);
// the pod of the same name and the cluster's status say how the node is. Namespaced.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories=valkey
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterName`
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`
// +kubebuilder:printcolumn:name="Lifecycle",type=string,JSONPath=`.spec.lifecycle`
type ValkeyNode struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what the node was created from, and its lifecycle.
	Spec ValkeyNodeSpec `json:"spec"`

	// status records the pod the operator created for the node.
	// +optional
	Status ValkeyNodeStatus `json:"status,omitempty"`
}

// ValkeyNodeList is a list of ValkeyNode.
// +kubebuilder:object:root=true
type ValkeyNodeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the ValkeyNodes.
	Items []ValkeyNode `json:"items"`
}
