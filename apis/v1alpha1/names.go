package v1alpha1

import (
	"strconv"
	"strings"
)

// KeyPrefix starts every label and annotation key the operator owns. Keys under it are
// reserved: spec.podAnnotations may not use them (the CRD refuses them), so that a user's
// annotation can never pass for, or overwrite, one the operator relies on.
const KeyPrefix = Group + "/"

// Labels and annotations the operator puts on the objects it creates.
const (
	// LabelCluster is the label on every Pod (and other child object) of a ValkeyCluster; its
	// value is the ValkeyCluster's name. Selectors for the headless Service and for listing a
	// cluster's pods use it.
	LabelCluster = KeyPrefix + "cluster"

	// LabelShard (valkey.gomomento.com/shard-index) is the label on every Pod with the index
	// of the shard it was created for, in decimal, counted from 0: its ValkeyNode's
	// spec.shardIndex. A pod keeps its shard for life: a node moved to another shard is a new
	// node. The per-shard topology spread constraints select on it.
	LabelShard = KeyPrefix + "shard-index"

	// LabelJoinType is on ValkeyNodes (not Pods) created to replace a lost node or to add a
	// shard: how the node joined, one of the JoinType values. The nodes a cluster is first
	// formed with do not carry it. JoinTypeShard is removed once the node is Active; the
	// other values stay.
	LabelJoinType = KeyPrefix + "join-type"

	// AnnotationSpecHash is the annotation on every Pod with the hash of its desired spec
	// (image, resources, rendered config, hard placement). A pod whose hash differs from the
	// one the operator computes now is out of date and is replaced during Upgrading.
	AnnotationSpecHash = KeyPrefix + "spec-hash"
	// AnnotationReplicationUser is on every Pod: the Valkey user its node authenticates to its
	// primary with (masteruser, read once when the node starts). A pod without it predates the
	// replication user and replicates as the operator's user.
	AnnotationReplicationUser = KeyPrefix + "replication-user"
	// AnnotationMovedFrom is on a ValkeyNode created to move a copy of its shard to another
	// zone (the spread of the cluster over zones): the zone of the copy it replaces, which is
	// retired once the new node has caught up. Removed once the node has joined and its shard is
	// back to its count (plan/upkeep.go, settled).
	AnnotationMovedFrom = KeyPrefix + "moved-from"
	// AnnotationConfirmLiveSettings, on a ValkeyCluster (that cluster only) or a ValkeyConfig
	// (every cluster whose chain holds it), confirms live settings changes that evict and are held
	// until confirmed (a lower maxmemory, another maxmemory-policy, a removed maxmemory): key=value
	// pairs separated by commas, each the setting and the value it goes to
	// ("maxmemory=4mb,maxmemory-policy=allkeys-lru"; a removed maxmemory is maxmemory=0). A
	// confirmation of another value confirms nothing. Written by people, read by the operator.
	AnnotationConfirmLiveSettings = KeyPrefix + "confirm-live-settings"
	// AnnotationRotateSystemPasswords, on a ValkeyCluster, asks for a rotation of its system
	// users' passwords (the operator's, the replication user's and the migration user's): each
	// new value (a date, a ticket number; at most 253 characters) asks for one more rotation,
	// carried out without a restart (status.passwordRotation). Written by people, read by the
	// operator.
	AnnotationRotateSystemPasswords = KeyPrefix + "rotate-system-passwords"
)

// JoinType is the value of LabelJoinType.
type JoinType string

// The join types.
const (
	// JoinTypeReplica: the node replaces a lost node of a shard whose primary was serving.
	JoinTypeReplica JoinType = "replica"
	// JoinTypePrimary: the node replaces a lost node of a shard that had no serving primary
	// left when the node was created (its primary died).
	JoinTypePrimary JoinType = "primary"
	// JoinTypeShard: the node is a member of a shard the cluster did not have yet.
	JoinTypeShard JoinType = "shard"
)

// Names of the objects the operator creates for a cluster and its nodes.

// OperatorAuthSecretName is the name of the Secret holding the operator's generated
// credentials for the ValkeyCluster named cluster: {cluster}-operator-auth. It is generated
// once; the nodes' ACL and replication settings derive from it.
func OperatorAuthSecretName(cluster string) string { return cluster + "-operator-auth" }

// NodeConfigMapName is the name of the ConfigMap holding the rendered valkey.conf of the
// ValkeyNode (and pod) named node: {node}-config.
func NodeConfigMapName(node string) string { return node + "-config" }

// ShardDisruptionBudgetName is the name of the PodDisruptionBudget that covers the pods of shard
// index shard of the ValkeyCluster named cluster: {cluster}-shard-{shard}. There is one per
// shard index below spec.shards, so that `kubectl drain` never evicts two copies of a shard at
// once.
func ShardDisruptionBudgetName(cluster string, shard int) string {
	return cluster + "-shard-" + strconv.Itoa(shard)
}

// NetworkPolicyName is the name of the NetworkPolicy that keeps everyone but the pods of the
// ValkeyCluster named cluster off its cluster bus: {cluster}-network.
func NetworkPolicyName(cluster string) string { return cluster + "-network" }

// IsReservedKey reports whether a label or annotation key is under KeyPrefix, the operator's
// own prefix.
func IsReservedKey(key string) bool {
	return strings.HasPrefix(key, KeyPrefix)
}

// State is what the operator is doing with a ValkeyCluster, as shown in status.state and in
// the STATE column. It is a summary written at the end of a reconcile, never the source of
// truth: every reconcile decides again from what it observes.
// +kubebuilder:validation:Enum=Bootstrapping;Forming;Active;Upgrading;Invalid
type State string

// The states of a ValkeyCluster, in the order a new cluster goes through them.
const (
	// StateBootstrapping: creating the Service, the config objects and one pod per node, and
	// waiting until every pod runs and has an IP.
	StateBootstrapping State = "Bootstrapping"

	// StateForming: meeting the nodes, assigning the 16384 slots to the primaries, attaching
	// the replicas, and waiting until every node agrees.
	StateForming State = "Forming"

	// StateActive: the cluster was formed; the operator heals it in place (replaces lost
	// nodes, forgets dead ones, serves lost slots again). Whether it is whole right now is the
	// Ready condition.
	StateActive State = "Active"

	// StateUpgrading: pods are out of date or the shard / replica counts changed; pods are
	// replaced one shard at a time. Not entered yet: rolling replacement and resharding are
	// not built, so an out-of-date cluster stays Active and its Ready condition says why.
	StateUpgrading State = "Upgrading"

	// StateInvalid: the spec cannot be carried out (a reference that does not resolve, a
	// config cycle, a missing role, a TLS Secret that fails validation); status.message says
	// why. Nothing is deleted, and the cluster leaves Invalid on its own once the cause is fixed:
	// a cluster formed once (status.formedAt) goes back to Active, healed in place, never
	// through Bootstrapping.
	StateInvalid State = "Invalid"
)

// States lists every State, in the order a new cluster goes through them, Invalid last.
func States() []State {
	return []State{StateBootstrapping, StateForming, StateActive, StateUpgrading, StateInvalid}
}

// IsValid reports whether s is one of the States.
func (s State) IsValid() bool {
	for _, known := range States() {
		if s == known {
			return true
		}
	}
	return false
}

// Condition types in ValkeyCluster status.conditions. The state says what the operator is
// doing; the conditions, each with its observedGeneration, say how the cluster is.
const (
	// ConditionReady is True when every node the spec asks for exists and runs the current pod
	// spec, every node answers and agrees on the topology, every slot is served and every
	// replica's link to its primary is up. While False, its reason and message (the same as
	// status.message) say what is awaited.
	ConditionReady = "Ready"

	// ConditionProgressing is True while the operator is working toward Ready (creating pods,
	// forming the cluster, waiting for replicas to sync, healing) or carrying out a step on a
	// Ready cluster; False when there is nothing to do or when only a change outside the
	// operator can help (the reason says which).
	ConditionProgressing = "Progressing"

	// ConditionDegraded is True when a cluster that was formed (Active or Upgrading) is not
	// Ready: a node missing, unreachable or not synced, a slot not served, a pod that cannot be
	// scheduled or fails on start, a node of an older pod spec; or when the operator cannot
	// manage it (its credential Secret is missing). The reason and message say which.
	ConditionDegraded = "Degraded"

	// ConditionDataLost is True once a shard of a formed cluster lost every copy of its data and
	// its slots were served again, empty. Its message names the shards, their slots and when;
	// the operator never sets it back (it is the record of the latest loss, not a state).
	ConditionDataLost = "DataLost"

	// ConditionCertificateExpiring is on TLS clusters only: True while the leaf or a CA of the
	// TLS Secret expires within 14 days (or has expired; the cluster stays Active: expiry never
	// makes it Invalid), its message naming which and when; False otherwise. It is left as it
	// was while the Secret fails validation.
	ConditionCertificateExpiring = "CertificateExpiring"

	// ConditionZoneSpreadDegraded is on clusters under zoneSpread required only: True while the
	// zones the cluster may use are fewer than a shard's copies (1 + replicasPerShard), so two
	// copies of a shard share a zone; False once there are enough.
	ConditionZoneSpreadDegraded = "ZoneSpreadDegraded"

	// ConditionLiveSettingsHeld is True while a change of the ValkeyConfig's live settings that
	// evicts keys (a lower maxmemory, another maxmemory-policy, a removed maxmemory) is held until
	// confirmed with AnnotationConfirmLiveSettings; its message names the settings, the values the
	// nodes keep and the confirmation to write. Absent when nothing is held. The cluster stays
	// Ready meanwhile: it serves as before.
	ConditionLiveSettingsHeld = "LiveSettingsHeld"

	// ConditionResizeRefused is True while a change of the ValkeyConfig's memory that the nodes
	// would take in place is refused: a shrink below what a node holds (with headroom) or below
	// the maxmemory the spec wants. Its message names the pods and what to do; the nodes keep
	// their size and the cluster serves as before. Absent otherwise.
	ConditionResizeRefused = "ResizeRefused"
)
