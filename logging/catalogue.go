package logging

import (
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// This file is the whole log catalogue: every target, every message string of the log contract
// (seeds/logging.txt and SPEC section 3) with its level, target and fields. The strings are a
// public interface (users grep and alert on them): change them only with the contract.
//
// Levels: the contract states WARN for the retryable errors and reserves ERROR for invalid
// configuration at startup and broken invariants; everything else it lists under "at info,
// expect…", so actions, heartbeats and the diagnostics are INFO.

// Targets: `::` module paths rooted at the original crate, never zap's dotted names.
const (
	// TargetOperator is the crate root: process startup and configuration.
	TargetOperator = "operator"
	// TargetCluster is the ValkeyCluster controller: pods, services, meet, failover, ticks.
	TargetCluster = "operator::controller::cluster"
	// TargetACL is the ACL reconcile loop.
	TargetACL = "operator::controller::acl"
	// TargetTLS is the TLS reconcile loop.
	TargetTLS = "operator::controller::tls"
	// TargetFSM is the state machine: state transitions.
	TargetFSM = "operator::fsm"

	// TargetControllerRuntime is the root target of controller-runtime's own logs; its logger
	// names are appended as path segments (controller_runtime::cache, …). It stands where
	// kube_runtime was in the original.
	TargetControllerRuntime = "controller_runtime"
	// TargetKubeClient is the target of client-go's klog output, where kube_client was.
	TargetKubeClient = "kube_client"
)

// Field names. Subjects are fields, never message text.
const (
	FieldClusterName  = "cluster_name"
	FieldPod          = "pod"
	FieldNode         = "node"
	FieldShard        = "shard"
	FieldShards       = "shards"
	FieldNodes        = "nodes"
	FieldSlots        = "slots"
	FieldEvent        = "event"
	FieldSecret       = "secret"
	FieldActions      = "actions"
	FieldStep         = "step"
	FieldWaiting      = "waiting"
	FieldHolds        = "holds"
	FieldIP           = "ip"
	FieldReason       = "reason"
	FieldError        = "error"
	FieldState        = "state"
	FieldPhase        = "phase"
	FieldRequest      = "request"
	FieldKey          = "key"
	FieldValue        = "value"
	FieldKeys         = "keys"
	FieldMinAvailable = "min_available"
	FieldTarget       = "target"
	FieldSlot         = "slot"
	FieldNotAfter     = "not_after"
	FieldZone         = "zone"
	FieldFrom         = "from"
	FieldCPU          = "cpu"
	FieldMemory       = "memory"
	FieldMethod       = "method"
	FieldSettings     = "settings"
	FieldSetting      = "setting"
	FieldWant         = "want"
	FieldConfigMap    = "configmap"
	FieldZones        = "zones"
	FieldCopies       = "copies"
	FieldStack        = "stack"
	FieldUsers        = "users"
	FieldDeclared     = "declared"
)

// Values of FieldMethod: how a pair's slots moved.
const (
	// MethodAtomic is Valkey 9's CLUSTER MIGRATESLOTS.
	MethodAtomic = "atomic"
	// MethodClassic is SETSLOT IMPORTING/MIGRATING, MIGRATE and SETSLOT NODE.
	MethodClassic = "classic"
)

// The message catalogue.
const (
	// MsgCreatingPod (INFO, TargetCluster): cluster_name, pod, shard.
	MsgCreatingPod = "creating Pod for node"
	// MsgCreatingService (INFO, TargetCluster): cluster_name.
	MsgCreatingService = "creating headless Service"
	// MsgClusterMeetIssued (INFO, TargetCluster): cluster_name, pod, node (the node id met), ip.
	// Once per node introduced through the seed.
	MsgClusterMeetIssued = "cluster meet issued"
	// MsgFailoverForUpgrade (INFO, TargetCluster): cluster_name, pod (the replica promoted),
	// node, shard.
	MsgFailoverForUpgrade = "failover to up-to-date replica for rolling upgrade"
	// MsgClusterFormed (INFO, TargetFSM): cluster_name, reason. The Forming→Active transition,
	// one line: it stands for TransitioningTo("Active") on that transition only.
	MsgClusterFormed = "cluster formed, transitioning to Active"
	// MsgTransitioningPrefix + state (INFO, TargetFSM): cluster_name. Use TransitioningTo.
	MsgTransitioningPrefix = "transitioning to "
	// MsgActiveTick (INFO, TargetCluster): cluster_name, shards, nodes (integers).
	MsgActiveTick = "active tick"
	// MsgACLTick (INFO, TargetACL): cluster_name.
	MsgACLTick = "ACL reconcile tick"
	// MsgTLSTick (INFO, TargetTLS): cluster_name.
	MsgTLSTick = "TLS reconcile tick"
	// MsgBootstrapBlocked (INFO, TargetCluster): cluster_name, pod, reason (the scheduler's own
	// message). Logged every tick while the pod stays unschedulable.
	MsgBootstrapBlocked = "bootstrap blocked: pod cannot be scheduled"
	// MsgPrimaryUnhealthyWaiting (INFO, TargetCluster): cluster_name, pod, node.
	MsgPrimaryUnhealthyWaiting = "primary unhealthy but replicas exist, waiting for auto-failover"
	// MsgNoQuorumTakeover (INFO, TargetCluster): cluster_name, pod, node (the replica). The
	// dash is U+2014.
	MsgNoQuorumTakeover = "no quorum \u2014 issued TAKEOVER on replica"
	// MsgTLSValidationFailed (INFO, TargetTLS): cluster_name, reason (the same text as
	// status.message).
	MsgTLSValidationFailed = "TLS Secret validation failed, setting cluster Invalid"
	// MsgACLLoadFailed (WARN, TargetACL): cluster_name, pod, error.
	MsgACLLoadFailed = "ACL LOAD failed, will retry next tick"
	// MsgACLApplied (INFO, TargetACL): cluster_name, pod. The node did not enforce the cluster's
	// ACL file and does after an ACL LOAD: a binding, role or config edit reached it, or a manual
	// ACL SETUSER / DELUSER on it was reverted.
	MsgACLApplied = "ACL applied"
	// MsgACLNodeOversized (WARN, TargetACL): cluster_name, pod, users (how many the node holds,
	// -1 when even their names were longer than the ACL controller reads), declared (how many
	// the cluster's ACL file has). Ours: the node holds far more ACL users, or longer rules, than
	// the file declares (someone set them by hand, through a default user left open): it is not
	// read whole, and the cluster's ACL is put back on it. Once per tick per node, with a
	// Warning Event.
	MsgACLNodeOversized = "node holds far more ACL than its cluster declares, not reading it whole"
	// MsgACLFileBehind (DEBUG, TargetACL): cluster_name, pod. After ACL LOAD the node still
	// enforces an older file: its mounted Secret volume has not caught up yet. Loaded again soon.
	MsgACLFileBehind = "ACL file not yet updated on node, reloading soon"
	// MsgACLNodeStarting (DEBUG, TargetACL): cluster_name, pod. The node refused the connection
	// within a minute of its start; it is checked again soon instead of a WARN.
	MsgACLNodeStarting = "node not accepting connections yet, loading its ACL soon"
	// MsgPushHeld (DEBUG, TargetACL or TargetTLS): cluster_name, step. The cluster controller is
	// carrying out a disruptive step on the cluster (a failover, a takeover, a forget, a
	// retirement): its nodes are given their ACL file or certificate once the step has been
	// observed, or once the push has waited 10 s.
	MsgPushHeld = "disruptive step in flight, pushing to nodes soon"
	// MsgTLSReloaded (INFO, TargetTLS): cluster_name, pod. The node served another certificate
	// than the Secret's tls.crt, was pointed at its certificate files again (CONFIG SET), and a
	// handshake showed it now serves the Secret's.
	MsgTLSReloaded = "TLS certificate reloaded"
	// MsgTLSReloadFailed (WARN, TargetTLS): cluster_name, pod, error. The node could not be
	// reached or refused the reload; tried again soon. Once per tick per node and error.
	MsgTLSReloadFailed = "TLS reload failed, will retry next tick"
	// MsgTLSFilesBehind (DEBUG, TargetTLS): cluster_name, pod. After the reload the node still
	// serves the old certificate: its mounted Secret volume has not caught up yet. Reloaded
	// again soon.
	MsgTLSFilesBehind = "TLS files not yet updated on node, reloading soon"
	// MsgTLSExpiring (WARN, TargetTLS): cluster_name, secret, key (tls.crt or ca.crt), not_after
	// (RFC 3339). A certificate of the cluster's Secret expires within 14 days, or has expired;
	// once per tick while it lasts. The CertificateExpiring condition says the same in status.
	MsgTLSExpiring = "TLS certificate expires soon"
	// MsgReconcileError (WARN, the controller's target): cluster_name, error. Logged by
	// Tracker.Reconciler for every error that is retried.
	MsgReconcileError = "reconcile error, requeuing"

	// Ours, beside the contract's "one line per resource created or step taken":

	// MsgMeshMeetIssued (DEBUG, TargetCluster): cluster_name, pod, node, ip. A meet between two
	// nodes the seed already introduced, sent only to speed up gossip: at INFO, `cluster meet
	// issued` is logged once per node introduced, not once per pair.
	MsgMeshMeetIssued = "mesh meet issued"
	// MsgAssigningSlots (INFO, TargetCluster): cluster_name, pod, slots (count).
	MsgAssigningSlots = "assigning slots"
	// MsgAttachingReplica (INFO, TargetCluster): cluster_name, pod, node (the primary's id).
	MsgAttachingReplica = "attaching replica"
	// MsgPrimaryGonePromoting (INFO, TargetCluster): cluster_name, pod (the replica promoted
	// with CLUSTER FAILOVER FORCE), node (the lost primary's id), shard.
	MsgPrimaryGonePromoting = "primary pod gone, promoting synced replica"
	// MsgPrimaryGoneTakeover (INFO, TargetCluster): cluster_name, pod (the replica promoted
	// with CLUSTER FAILOVER TAKEOVER), node (the lost primary's id), shard, reason (why a FORCE
	// would not do: it did not take, or the primaries that vote do not see the replica as one
	// yet). Ours: a primary whose container is gone while a majority of primaries lives, taken
	// over without their vote (plan/failover.go rule 6).
	MsgPrimaryGoneTakeover = "primary pod gone, synced replica taking over"
	// MsgBumpingEpoch (INFO, TargetCluster): cluster_name, pod (the node sent CLUSTER
	// BUMPEPOCH), reason. Ours: a TAKEOVER claims a shard's slots with the replica's config epoch,
	// which must be larger than the lost primary's for the other nodes to take the claim
	// (plan/epoch.go).
	MsgBumpingEpoch = "bumping config epoch"
	// MsgPrimaryLeavingHandover (INFO, TargetCluster): cluster_name, pod (the replica promoted
	// with a graceful CLUSTER FAILOVER), node (the leaving primary's id), shard.
	MsgPrimaryLeavingHandover = "primary pod deleting, handing its slots to synced replica"
	// MsgRealigningShard (INFO, TargetCluster): cluster_name, pod (the replica of the shard
	// promoted), node (the id of the primary of another shard that served the shard's slots),
	// shard. Ours: Valkey's view of the shards strayed from the operator's labels (replica
	// migration) and a graceful failover gives the slots back to the shard's own node.
	MsgRealigningShard = "failover to give a shard's slots back to its own node"
	// MsgSpreadingPrimaries (INFO, TargetCluster): cluster_name, pod (the replica promoted with
	// a graceful CLUSTER FAILOVER), node (the primary's id), shard, zone (the zone the primary
	// leaves, which held more of the cluster's primaries than it must). Ours: primaries are
	// spread over zones so a lost zone leaves a majority of them (plan/spread.go).
	MsgSpreadingPrimaries = "failover to spread primaries over zones"
	// MsgMovingCopy (INFO, TargetCluster): cluster_name, pod (the new node), shard, zone (the
	// zone it is created in), from (the zone of the copy it replaces, retired once it caught
	// up). Ours: a copy of a shard moved to spread the cluster over its zones.
	MsgMovingCopy = "creating a copy of the shard in another zone"
	// MsgForgettingNode (INFO, TargetCluster): cluster_name, node (the id forgotten), nodes (how
	// many nodes are told to forget it; one line per id, not per node told).
	MsgForgettingNode = "forgetting node"
	// MsgDeletingFailedPod (INFO, TargetCluster): cluster_name, pod.
	MsgDeletingFailedPod = "deleting failed Pod"
	// MsgMovingSlots (INFO, TargetCluster): cluster_name, pod (the source primary), target (the
	// target primary's pod), slots (how many moved in this batch, keys included), method
	// (MethodAtomic or MethodClassic).
	MsgMovingSlots = "moved slots"
	// MsgClosingSlot (INFO, TargetCluster): cluster_name, pod, slot, node (the owner it was
	// assigned to, empty for SETSLOT STABLE). An open slot whose move could not go on.
	MsgClosingSlot = "closing open slot"
	// MsgRetiringNode (INFO, TargetCluster): cluster_name, pod, reason. A live node leaves on
	// purpose: built from an older spec (rolling upgrade), beyond replicasPerShard (scale-down),
	// or a replacement that never joined and is no longer wanted.
	MsgRetiringNode = "retiring node"
	// MsgDetachFailed (DEBUG, TargetCluster): cluster_name, pod, error. A replica about to be
	// retired could not be detached from its primary (valkey.Client.Detach: an ACL from before
	// the grant, a node that stopped answering); the retirement goes on without it, as before
	// the detach existed.
	MsgDetachFailed = "replica not detached before its retirement"
	// MsgCompletedJoin (INFO, TargetCluster): cluster_name, pod. A new node became a full
	// member (a primary serving slots, a replica synced) and its ValkeyNode went Active. The
	// original's string (operations/failure-modes.md).
	MsgCompletedJoin = "completed join"

	// MsgCreatingDisruptionBudget (INFO, TargetCluster): cluster_name, shard, min_available.
	// The shard's PodDisruptionBudget was created (one per shard index, so a drain never
	// evicts two copies of a shard at once).
	MsgCreatingDisruptionBudget = "creating PodDisruptionBudget"
	// MsgUpdatingDisruptionBudget (INFO, TargetCluster): cluster_name, shard, min_available.
	// The shard's count of pods that are not full copies yet changed (a node joined, or one
	// finished its sync), or replicasPerShard did, or a hand edit is undone.
	MsgUpdatingDisruptionBudget = "updating PodDisruptionBudget"
	// MsgDeletingDisruptionBudget (INFO, TargetCluster): cluster_name, shard. The budget of a
	// shard index at or above spec.shards, once that shard has no live pod.
	MsgDeletingDisruptionBudget = "deleting PodDisruptionBudget of removed shard"
	// MsgCreatingNetworkPolicy (INFO, TargetCluster): cluster_name. The cluster's NetworkPolicy
	// {cluster}-network was created: only its own pods reach its cluster bus.
	MsgCreatingNetworkPolicy = "creating NetworkPolicy"
	// MsgUpdatingNetworkPolicy (INFO, TargetCluster): cluster_name. spec.network changed, or a
	// hand edit of the policy is undone.
	MsgUpdatingNetworkPolicy = "updating NetworkPolicy"
	// MsgDeletingNetworkPolicy (INFO, TargetCluster): cluster_name. spec.network.policy (or the
	// operator's default) turned the policy off.
	MsgDeletingNetworkPolicy = "deleting NetworkPolicy"
	// MsgPatchingPodAnnotations (INFO, TargetCluster): cluster_name, pod, keys (the annotation
	// keys added or changed, comma-separated). spec.podAnnotations brought onto a live pod in
	// place.
	MsgPatchingPodAnnotations = "patching pod annotations"
	// MsgUpdatingService (INFO, TargetCluster): cluster_name. Ours: a Service an older operator
	// created (ports client / bus, selector valkey.gomomento.com/cluster) brought in place to the
	// original's port names and selector; no pod is touched.
	MsgUpdatingService = "updating headless Service ports and selector"
	// MsgApplyingSettingsLive (INFO, TargetCluster): cluster_name, pod, settings (the names of
	// the settings set, comma-separated). Ours: a ValkeyConfig change of settings Valkey takes
	// at run time (package liveconf) is applied with CONFIG SET on every node, no pod replaced.
	// Once per node and change: a retry of the same values says nothing again. A value Valkey
	// refuses is the pass's error (`reconcile error, requeuing`, with Valkey's reply), retried
	// with back-off, and status.message says it (reason LiveSettingsRefused) until it is fixed;
	// the node is never replaced for it.
	MsgApplyingSettingsLive = "applying settings live"
	// MsgResizingPod (INFO, TargetCluster): cluster_name, pod, cpu, memory (the new size, "" when
	// not set), from (the size in force before). Ours: a ValkeyConfig change of resources alone
	// changes each node's container in place through the pod's resize subresource (plan/resize.go),
	// no pod replaced, no failover.
	MsgResizingPod = "resizing pod in place"
	// MsgPodResized (INFO, TargetCluster): cluster_name, pod, cpu, memory, from. Ours: the
	// kubelet applied the new size and the node's ValkeyNode records it.
	MsgPodResized = "pod resized in place"
	// MsgResizeNotInPlace (WARN, TargetCluster): cluster_name, pod, reason. Ours: a node whose CPU
	// and memory alone changed cannot take the change in place (a QoS class change, a kubelet
	// without resize, an infeasible or long-deferred resize, a grow past its data volume's
	// bound) and is replaced by the rolling upgrade instead. At most once a tick per pod.
	MsgResizeNotInPlace = "resize not possible in place, replacing the node"
	// MsgResizeRefused (WARN, TargetCluster): cluster_name, pod, error (the API server's
	// message). Ours: the API server refused the resize (more than the Node can hold, say); the
	// node is replaced instead. Once per pod and size.
	MsgResizeRefused = "in-place resize refused by the API server"
	// MsgShrinkRefused (WARN, TargetCluster): cluster_name, reason. Ours: a memory shrink that
	// would leave a node less than its headroom, or a maxmemory above the new limit, is refused;
	// the nodes keep their size and the ResizeRefused condition says why. At most once a tick.
	MsgShrinkRefused = "memory shrink refused"
	// MsgSettingsHeld (INFO, TargetCluster): cluster_name, settings (the names of the settings
	// held, comma-separated), want (the confirmation that applies them, as the annotation
	// valkey.gomomento.com/confirm-live-settings takes it). Ours: a ValkeyConfig change of live
	// settings that evicts keys (a lower maxmemory, another maxmemory-policy, a removed maxmemory)
	// is not applied until confirmed; the nodes keep what they run. Once per cluster and change;
	// the LiveSettingsHeld condition and a LiveSettingsHeld Event say the same.
	MsgSettingsHeld = "live settings held until confirmed"
	// MsgSettingDrifted (WARN, TargetCluster): cluster_name, pod, setting, value (what the node
	// ran), want (what it runs again). Ours: a live setting of a node differs from the one
	// applied and recorded (someone ran CONFIG SET by hand); it is put back. One line per
	// setting and node.
	MsgSettingDrifted = "live setting differs from the one applied, putting it back"
	// MsgSettingsUnreadable (WARN, TargetCluster): cluster_name, pod, error (the node's reply to
	// CONFIG GET, or why it did not come). Ours: the node answered everything else but its live
	// settings could not be read (an ACL that denies the operator's user CONFIG GET), so they are
	// neither checked nor applied there until they can be. Once per tick per node while it lasts;
	// status.message and the Ready condition (reason LiveSettingsUnreadable) say the same.
	MsgSettingsUnreadable = "live settings not readable on node, not checking or applying them"
	// MsgNodeConfigMapForeign (WARN, TargetCluster): cluster_name, pod, configmap (its name).
	// Ours: the node's {node}-config ConfigMap is not controlled by its ValkeyNode (another object
	// took the name), so the live settings applied to the node are not written into it; it is
	// never changed. When live settings are recorded for the node (a change or a drift to put
	// back), at most once per tick per node, with a Warning Event.
	MsgNodeConfigMapForeign = "node ConfigMap not controlled by its ValkeyNode, not recording live settings in it"
	// MsgNodePodForeign (WARN, TargetCluster): cluster_name, pod, reason (why it is not the
	// node's: another UID than its ValkeyNode records, say). Ours: a pod holds a node's name that
	// is not the pod the operator created for it (controllers/identity.go). It is never connected
	// to and gets no credential; the node counts as down, and is replaced once the pod is gone.
	// Once per tick per pod while it stands, with a Warning Event; the Ready and Degraded
	// conditions (reason ForeignPod) and status.message say the same.
	MsgNodePodForeign = "pod not created by the operator holds a node's name, not connecting to it"
	// MsgZoneSpreadShort (WARN, TargetCluster): cluster_name, zones (the cluster's zones,
	// comma-separated, "" when no node it may use has a zone label), copies (1 + replicasPerShard).
	// Ours: under zoneSpread required, fewer zones than a shard has copies cannot keep a shard's
	// copies apart. Once per tick while it lasts; the ZoneSpreadDegraded condition says the same.
	MsgZoneSpreadShort = "required zone spread has fewer zones than a shard has copies"

	// MsgCredentialMissing (WARN, TargetCluster): cluster_name, secret, key. The operator's
	// credential Secret of a cluster that already has pods is missing. It is not regenerated
	// (the nodes accept only the original password, and nothing can rotate it): the cluster
	// keeps serving untouched, status.message and the Degraded condition say how to recover.
	// Once per tick while it lasts. Names the Secret and key only, never a value.
	MsgCredentialMissing = "operator credential Secret missing, not regenerating"
	// MsgPasswordRotation (INFO, TargetCluster): cluster_name, phase (Adding, Switching, Retiring,
	// Complete), request (the rotate-system-passwords annotation's value). Ours: a rotation of
	// the system users' passwords entered the phase (fsm/rotation.go); no pod is replaced. Once
	// per phase. No password or hash is ever logged.
	MsgPasswordRotation = "system credentials rotation"
	// MsgPasswordRotationRefused (WARN, TargetCluster): cluster_name, reason. Ours: the
	// rotate-system-passwords annotation cannot be answered (longer than 253 characters); nothing
	// is rotated. At most once a tick.
	MsgPasswordRotationRefused = "system credentials rotation refused"
	// MsgPasswordRotationRestarted (WARN, TargetCluster): cluster_name, reason. Ours: the
	// credential Secret lost one of the next passwords during a rotation (edited by hand); the
	// rotation goes back to Adding and writes the missing one. At most once a tick.
	MsgPasswordRotationRestarted = "system credentials rotation restarted"
	// MsgPasswordRotationWaiting (DEBUG, TargetCluster): cluster_name, phase, waiting (the pods
	// that hold the phase, and what for). Ours: a rotation stays in its phase this pass.
	MsgPasswordRotationWaiting = "system credentials rotation waiting"

	// MsgPodsFailingOnStart (WARN, TargetCluster): cluster_name, reason (the same text as
	// status.message). Pods of the current spec exit on start; no more are created until the
	// spec changes. Once per tick.
	MsgPodsFailingOnStart = "pods fail on start, not replacing until the spec changes"

	// MsgShardDataLost (WARN, TargetCluster): cluster_name, shard (its index), slots (the ranges
	// served again, as "5462-10922"). A shard of a formed cluster lost every copy of its data
	// (its nodes died and were forgotten, or every pod was killed at once) and its slots were
	// assigned again, empty. Once per loss, after the slots were assigned; the DataLost
	// condition says the same in status.
	MsgShardDataLost = "shard lost every copy of its data, serving its slots again empty"

	// MsgReconcilePass (DEBUG, TargetCluster): cluster_name, state, event, actions, waiting. One
	// line per reconcile: what was decided and planned.
	MsgReconcilePass = "reconcile pass"

	// MsgReconcileErrorNoRetry (WARN, the controller's target): cluster_name, error. Ours: a
	// reconcile.TerminalError, which controller-runtime does not retry.
	MsgReconcileErrorNoRetry = "reconcile error, not retrying"

	// MsgInvalidConfig (ERROR, TargetOperator): key, value, error. Not named by the contract,
	// which only says invalid configuration at startup is one ERROR line before a non-zero
	// exit.
	MsgInvalidConfig = "invalid operator configuration"
	// MsgReconcilePanicked (ERROR, the controller's target): cluster_name, error. A broken
	// invariant: the reconcile panicked and is retried.
	MsgReconcilePanicked = "reconcile panicked"
	// MsgNodeStepPanicked (ERROR, the controller's target): cluster_name, pod, error, stack.
	// Ours, a broken invariant: a goroutine talking to one node (a push of the ACL or TLS
	// controller, a slot move) panicked. That node's step fails with the panic as its error (and
	// is tried again as any failed step is); the other nodes and the process go on.
	MsgNodeStepPanicked = "node step panicked, failing that node's step"
)

// TransitioningTo is the transition message for a state: "transitioning to Active".
func TransitioningTo(state string) string { return MsgTransitioningPrefix + state }

// Entry describes one catalogue message.
type Entry struct {
	Message string
	Level   zapcore.Level
	Target  string // empty: the target of the controller that logs it
	Fields  []string
}

// Catalogue lists every message with its level, target and fields, in the contract's order.
// TransitioningTo's messages appear once per state.
var Catalogue = []Entry{
	{MsgACLTick, zapcore.InfoLevel, TargetACL, []string{FieldClusterName}},
	{MsgTLSTick, zapcore.InfoLevel, TargetTLS, []string{FieldClusterName}},
	{MsgActiveTick, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName, FieldShards, FieldNodes}},
	{MsgCreatingPod, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName, FieldPod, FieldShard}},
	{MsgCreatingService, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName}},
	{MsgClusterMeetIssued, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName, FieldPod, FieldNode}},
	{MsgFailoverForUpgrade, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName, FieldPod, FieldNode}},
	{MsgClusterFormed, zapcore.InfoLevel, TargetFSM, []string{FieldClusterName, FieldReason}},
	{TransitioningTo("Bootstrapping"), zapcore.InfoLevel, TargetFSM, []string{FieldClusterName}},
	{TransitioningTo("Forming"), zapcore.InfoLevel, TargetFSM, []string{FieldClusterName}},
	{TransitioningTo("Active"), zapcore.InfoLevel, TargetFSM, []string{FieldClusterName}},
	{TransitioningTo("Upgrading"), zapcore.InfoLevel, TargetFSM, []string{FieldClusterName}},
	{TransitioningTo("Invalid"), zapcore.InfoLevel, TargetFSM, []string{FieldClusterName}},
	{MsgBootstrapBlocked, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName, FieldPod, FieldReason}},
	{MsgPrimaryUnhealthyWaiting, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName, FieldPod, FieldNode}},
	{MsgNoQuorumTakeover, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName, FieldPod, FieldNode}},
	{MsgTLSValidationFailed, zapcore.InfoLevel, TargetTLS, []string{FieldClusterName, FieldReason}},
	{MsgACLLoadFailed, zapcore.WarnLevel, TargetACL, []string{FieldClusterName, FieldPod, FieldError}},
	{MsgACLApplied, zapcore.InfoLevel, TargetACL, []string{FieldClusterName, FieldPod}},
	{MsgACLNodeOversized, zapcore.WarnLevel, TargetACL, []string{FieldClusterName, FieldPod, FieldUsers, FieldDeclared}},
	{MsgACLFileBehind, zapcore.DebugLevel, TargetACL, []string{FieldClusterName, FieldPod}},
	{MsgACLNodeStarting, zapcore.DebugLevel, TargetACL, []string{FieldClusterName, FieldPod}},
	{MsgPushHeld, zapcore.DebugLevel, TargetACL, []string{FieldClusterName, FieldStep}},
	{MsgTLSReloaded, zapcore.InfoLevel, TargetTLS, []string{FieldClusterName, FieldPod}},
	{MsgTLSReloadFailed, zapcore.WarnLevel, TargetTLS, []string{FieldClusterName, FieldPod, FieldError}},
	{MsgTLSFilesBehind, zapcore.DebugLevel, TargetTLS, []string{FieldClusterName, FieldPod}},
	{MsgTLSExpiring, zapcore.WarnLevel, TargetTLS, []string{FieldClusterName, FieldSecret, FieldKey, FieldNotAfter}},
	{MsgMeshMeetIssued, zapcore.DebugLevel, TargetCluster, []string{FieldClusterName, FieldPod, FieldNode, FieldIP}},
	{MsgAssigningSlots, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName, FieldPod, FieldSlots}},
	{MsgAttachingReplica, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName, FieldPod, FieldNode}},
	{MsgPrimaryGonePromoting, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName, FieldPod, FieldNode, FieldShard}},
	{MsgPrimaryGoneTakeover, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName, FieldPod, FieldNode, FieldShard, FieldReason}},
	{MsgBumpingEpoch, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName, FieldPod, FieldReason}},
	{MsgPrimaryLeavingHandover, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName, FieldPod, FieldNode, FieldShard}},
	{MsgRealigningShard, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName, FieldPod, FieldNode, FieldShard}},
	{MsgSpreadingPrimaries, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName, FieldPod, FieldNode, FieldShard, FieldZone}},
	{MsgMovingCopy, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName, FieldPod, FieldShard, FieldZone, FieldFrom}},
	{MsgForgettingNode, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName, FieldNode, FieldNodes}},
	{MsgDeletingFailedPod, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName, FieldPod}},
	{MsgMovingSlots, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName, FieldPod, FieldTarget, FieldSlots, FieldMethod}},
	{MsgClosingSlot, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName, FieldPod, FieldSlot, FieldNode}},
	{MsgRetiringNode, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName, FieldPod, FieldReason}},
	{MsgCompletedJoin, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName, FieldPod}},
	{MsgCreatingDisruptionBudget, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName, FieldShard, FieldMinAvailable}},
	{MsgUpdatingDisruptionBudget, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName, FieldShard, FieldMinAvailable}},
	{MsgDeletingDisruptionBudget, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName, FieldShard}},
	{MsgCreatingNetworkPolicy, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName}},
	{MsgUpdatingNetworkPolicy, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName}},
	{MsgDeletingNetworkPolicy, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName}},
	{MsgPatchingPodAnnotations, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName, FieldPod, FieldKeys}},
	{MsgUpdatingService, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName}},
	{MsgApplyingSettingsLive, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName, FieldPod, FieldSettings}},
	{MsgResizingPod, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName, FieldPod, FieldCPU, FieldMemory, FieldFrom}},
	{MsgPodResized, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName, FieldPod, FieldCPU, FieldMemory, FieldFrom}},
	{MsgResizeNotInPlace, zapcore.WarnLevel, TargetCluster, []string{FieldClusterName, FieldPod, FieldReason}},
	{MsgResizeRefused, zapcore.WarnLevel, TargetCluster, []string{FieldClusterName, FieldPod, FieldError}},
	{MsgShrinkRefused, zapcore.WarnLevel, TargetCluster, []string{FieldClusterName, FieldReason}},
	{MsgSettingsHeld, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName, FieldSettings, FieldWant}},
	{MsgSettingDrifted, zapcore.WarnLevel, TargetCluster, []string{FieldClusterName, FieldPod, FieldSetting, FieldValue, FieldWant}},
	{MsgSettingsUnreadable, zapcore.WarnLevel, TargetCluster, []string{FieldClusterName, FieldPod, FieldError}},
	{MsgNodeConfigMapForeign, zapcore.WarnLevel, TargetCluster, []string{FieldClusterName, FieldPod, FieldConfigMap}},
	{MsgNodePodForeign, zapcore.WarnLevel, TargetCluster, []string{FieldClusterName, FieldPod, FieldReason}},
	{MsgZoneSpreadShort, zapcore.WarnLevel, TargetCluster, []string{FieldClusterName, FieldZones, FieldCopies}},
	{MsgCredentialMissing, zapcore.WarnLevel, TargetCluster, []string{FieldClusterName, FieldSecret, FieldKey}},
	{MsgPasswordRotation, zapcore.InfoLevel, TargetCluster, []string{FieldClusterName, FieldPhase, FieldRequest}},
	{MsgPasswordRotationRefused, zapcore.WarnLevel, TargetCluster, []string{FieldClusterName, FieldReason}},
	{MsgPasswordRotationRestarted, zapcore.WarnLevel, TargetCluster, []string{FieldClusterName, FieldReason}},
	{MsgPasswordRotationWaiting, zapcore.DebugLevel, TargetCluster, []string{FieldClusterName, FieldPhase, FieldWaiting}},
	{MsgPodsFailingOnStart, zapcore.WarnLevel, TargetCluster, []string{FieldClusterName, FieldReason}},
	{MsgShardDataLost, zapcore.WarnLevel, TargetCluster, []string{FieldClusterName, FieldShard, FieldSlots}},
	{MsgDetachFailed, zapcore.DebugLevel, TargetCluster, []string{FieldClusterName, FieldPod, FieldError}},
	{MsgReconcilePass, zapcore.DebugLevel, TargetCluster, []string{FieldClusterName, FieldState, FieldEvent, FieldActions, FieldWaiting, FieldHolds}},
	{MsgReconcileError, zapcore.WarnLevel, "", []string{FieldClusterName, FieldError}},
	{MsgReconcileErrorNoRetry, zapcore.WarnLevel, "", []string{FieldClusterName, FieldError}},
	{MsgInvalidConfig, zapcore.ErrorLevel, TargetOperator, []string{FieldKey, FieldValue, FieldError}},
	{MsgReconcilePanicked, zapcore.ErrorLevel, "", []string{FieldClusterName, FieldError}},
	{MsgNodeStepPanicked, zapcore.ErrorLevel, "", []string{FieldClusterName, FieldPod, FieldError, FieldStack}},
}

// ClusterName is the cluster_name field carried by every reconcile-path event.
func ClusterName(name string) zap.Field { return zap.String(FieldClusterName, name) }

// Pod is the pod field of per-pod events.
func Pod(name string) zap.Field { return zap.String(FieldPod, name) }

// Node is the node field (a Valkey node id) of per-node events.
func Node(id string) zap.Field { return zap.String(FieldNode, id) }

// Err is the error field, written as the error's message.
func Err(err error) zap.Field { return zap.NamedError(FieldError, err) }
