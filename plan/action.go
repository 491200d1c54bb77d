package plan

import (
	"fmt"
	"strings"
	"time"

	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/liveconf"
	"github.com/gomomento/valkey-operator/slot"
)

// Action is one planned step: a closed set, one type per kind, each saying whether it is
// disruptive. The unexported method seals the set, so the controller's one type switch over
// actions can be checked for exhaustiveness by the gochecksumtype linter (.golangci.yml); a new
// kind that the executor does not handle fails the lint, not production.
//
//sumtype:decl
type Action interface {
	// Disruptive reports whether the action can cost availability or data (delete a pod, fail
	// over, take over, forget a node): at most one per pass, behind the planner's checks.
	// Harmless actions (create a pod, meet, assign slots on a new cluster, attach a replica) are
	// idempotent and may be batched.
	Disruptive() bool
	// String describes the action for logs and errors.
	String() string
	action()
}

// CreatePod creates one new pod for Shard. Avoid are zones the pod should not share, sorted and
// comma-separated (a zone label holds no comma; a string keeps actions comparable): those of
// its shard's live copies, set only when one of the cluster's zones holds none (avoidZones);
// a hard rule under zoneSpread required, a preference otherwise. Zone, when set, is the only
// zone the pod may run in: a copy created to spread the cluster over zones, replacing its
// shard's copy in zone MovedFrom (the spread planner).
type CreatePod struct {
	Shard     int
	Avoid     string
	Zone      string
	MovedFrom string
}

// Meet sends CLUSTER MEET IP from Pod's node; NodeID is the id of the node met. Mesh is true for
// the meets between nodes that the seed has already introduced: they only speed up gossip, so the
// executor logs them at DEBUG and one `cluster meet issued` line is logged per introduced node.
type Meet struct {
	Pod, IP, NodeID string
	Mesh            bool
}

// AddSlots sends CLUSTER ADDSLOTSRANGE Slots to Pod's node, the primary of Shard. Lost is true
// when the slots had been served before, by a cluster formed once, and no node holds them any
// more: every copy of their data is gone (the shard's nodes died and were forgotten, or every pod
// was killed at once), and serving them again, empty, must not be silent.
type AddSlots struct {
	Pod   string
	Shard int
	Slots slot.Set
	Lost  bool
}

// Replicate sends CLUSTER REPLICATE PrimaryID to Pod's node.
type Replicate struct{ Pod, PrimaryID string }

// Forget sends CLUSTER FORGET NodeID to every node in Pods. It is one step although it touches
// several nodes: forgets are not gossiped, and a node forgotten by only some nodes is learnt again
// from the others.
type Forget struct {
	NodeID string
	Pods   []string
}

// DeletePod retires Pod: its ValkeyNode is marked Leaving, then deleted, and the garbage
// collector deletes its pod. Reason is "" for a Failed or lost pod whose replacement has joined
// (cleanup), else why a live node goes (RetireOutdated, RetireSurplus, RetireStuck).
type DeletePod struct{ Pod, Reason string }

// Detach begins the retirement of Pod, a replica next to go, whose deletion is held a moment
// (MovedHold): its ValkeyNode is marked Leaving, and its node stops replicating
// (valkey.Client.Detach), so that while it still answers MOVED it acknowledges no write a client's
// WAIT would count as copied. The DeletePod that follows detaches again (idempotent).
type Detach struct{ Pod string }

// Takeover sends CLUSTER FAILOVER TAKEOVER to Pod's node, a synced replica of PrimaryID, the lost
// primary of Shard. Reason is "" for the quorum planner's takeover (no majority of primaries
// left to vote); the failover planner's, whose primary's container is gone while a majority
// lives, says why a FORCE would not do (TakeoverStaleView, TakeoverForceRefused).
//
// AfterEpoch, when set, is the config epoch the replica's claim would tie at: a BumpEpoch before
// it raised the cluster's current epoch, and the TAKEOVER is sent once the replica's current epoch
// exceeds AfterEpoch, so that Valkey bumps the replica's config epoch past the lost primary's
// (plan/epoch.go rule 1).
type Takeover struct {
	Pod, PrimaryID string
	Shard          int
	Reason         string
	AfterEpoch     uint64
}

// BumpEpoch sends CLUSTER BUMPEPOCH to Pod's node: Valkey gives it a config epoch larger than any
// it knows, raising its current epoch with it (which gossip carries to every node), unless its
// config epoch is the largest already. Reason says why (EpochBeforeTakeover, EpochClaimTied).
type BumpEpoch struct{ Pod, Reason string }

// The epochs rules' reasons for a BumpEpoch (plan/epoch.go).
const (
	// EpochBeforeTakeover: the replica to take over holds its lost primary's config epoch, the
	// largest it knows, so its TAKEOVER would claim the slots at a tie.
	EpochBeforeTakeover = "a takeover's claim would tie with the lost primary's config epoch"
	// EpochClaimTied: a primary's claim on its slots ties with a failing node's config epoch.
	EpochClaimTied = "a primary's claim on its slots ties with a failing node's config epoch"
)

// The failover planner's reasons for a TAKEOVER where a majority of primaries lives.
const (
	// TakeoverStaleView: too few of the primaries that vote see the replica as a replica of the
	// lost primary yet (a graceful failover made it one a moment ago, and the news travels with
	// its next heartbeat): they would refuse it their vote.
	TakeoverStaleView = "the primaries that vote do not see it as a replica yet"
	// TakeoverForceRefused: a CLUSTER FAILOVER FORCE on it did not take, and Valkey bars its
	// next election for four times cluster-node-timeout.
	TakeoverForceRefused = "a FORCE on it did not take"
)

// FailoverForce sends CLUSTER FAILOVER FORCE to Pod's node, a synced replica of PrimaryID, the
// primary of Shard whose container Kubernetes says is gone: no handshake with the dead primary,
// but a vote of the other primaries, without waiting for cluster-node-timeout. The executor
// waits FailoverCheck for the replica to say it is a primary and, when it does not, sends it
// CLUSTER FAILOVER TAKEOVER: a refused election bars the replica's next one, Valkey's own
// failover included, for four times cluster-node-timeout (20 s), and with the old primary's
// container gone no write can reach it, so a takeover loses nothing the FORCE would keep.
type FailoverForce struct {
	Pod, PrimaryID string
	Shard          int
}

// FailoverCheck is how long the executor waits for a CLUSTER FAILOVER FORCE to take before it
// takes over (FailoverForce). An election is a round trip to each primary: on this 2-core
// machine under load a FORCE that takes has taken within a few tens of milliseconds, one that
// was refused never does.
const FailoverCheck = 500 * time.Millisecond

// Failover sends a graceful CLUSTER FAILOVER to Pod's node, a synced replica of PrimaryID, the
// primary of Shard: the old primary stops writes, the replica catches up, and they swap, so no
// acknowledged write is lost. Purpose says why (one of the FailoverPurpose values); Zone is the
// zone a spread failover's primary leaves.
type Failover struct {
	Pod, PrimaryID string
	Shard          int
	Purpose        FailoverPurpose
	Zone           string
}

// FailoverPurpose is why a graceful failover is issued: each has its own log line and Event
// (controllers' failoverMessage) and its own words in Failover.String.
type FailoverPurpose string

// The purposes of a graceful failover.
const (
	// HandOver: the primary's pod is being deleted while its process still runs (the failover
	// planner).
	HandOver FailoverPurpose = "handover"
	// Roll: a primary of an older spec hands over to an up-to-date replica in a rolling upgrade
	// (the upgrade planner).
	Roll FailoverPurpose = "roll"
	// Realign: a primary of another shard that serves Shard's slots hands them back to Shard's
	// replica (the misplaced planner); then PrimaryID's pod is not of Shard.
	Realign FailoverPurpose = "realign"
	// Spread: Shard's primary moves out of a zone holding more of the cluster's primaries than it
	// must (the spread planner); Zone is the zone it leaves.
	Spread FailoverPurpose = "spread"
)

// SlotMove is one slot to move, keys included, from the primary in pod Source (node SourceID)
// to the primary in pod Target (node TargetID).
type SlotMove struct {
	Slot               int
	Source, Target     string
	SourceID, TargetID string
}

// MoveSlots moves a batch of slots with the classic protocol (SETSLOT IMPORTING on the target,
// MIGRATING on the source, GETKEYSINSLOT and MIGRATE until the source holds none of the slot's
// keys, then SETSLOT NODE on the target, the source and every other primary); every step is
// idempotent, so a batch cut short is resumed by settling. Settle is true when the batch resumes
// a move an earlier pass (or operator) left open.
type MoveSlots struct {
	Moves  []SlotMove
	Settle bool
}

// CloseSlot closes an open slot on Pod's node whose move cannot go on: CLUSTER SETSLOT Slot
// STABLE, or SETSLOT Slot NODE Owner when Owner is set (the node already serves the slot).
type CloseSlot struct {
	Pod   string
	Slot  int
	Owner string
}

// CloseSlots closes a batch of open slots, in order: every close is independent of the others
// (one slot on one node), so one step settles what an interrupted batch of moves left open.
type CloseSlots struct {
	Closes []CloseSlot
}

// SetConfig applies live settings to Pod's node (the settings planner): one CONFIG SET of Set,
// verified with CONFIG GET, then the node's record (its ValkeyNode's spec.valkeySettings and
// its ConfigMap) takes the live settings of the desired spec, so that it says what runs. Drift
// names the settings of Set that the node's record already held (someone changed them on the
// node), the rest are a change of the spec. With Set empty, the node already runs the desired
// values and only its record is behind.
type SetConfig struct {
	Pod   string
	Set   []liveconf.Change
	Drift []string
}

// ResizePod changes the CPU and memory of Pod's container in place, through the pod's resize
// subresource, to To (requests and limits alike); From is what its kubelet applied before.
type ResizePod struct {
	Pod      string
	To, From fsm.Size
}

// RecordSize records Size, which Pod's kubelet applied, on the pod's ValkeyNode (spec.cpu and
// spec.memory): its spec is then the current one, and a node created later agrees with it.
type RecordSize struct {
	Pod  string
	Size fsm.Size
}

// SetBudget creates (Create) or rewrites the PodDisruptionBudget of shard index Shard as built
// for a shard of which Joining live pods are not full copies yet (minAvailable is
// replicasPerShard + Joining; controllers/disruption.go says why).
type SetBudget struct {
	Shard, Joining int
	Create         bool
}

// DeleteBudget deletes the PodDisruptionBudget of shard index Shard, a removed shard with no
// live pod left.
type DeleteBudget struct{ Shard int }

// SetNetworkPolicy creates (Create) or rewrites the cluster's NetworkPolicy as built: only the
// cluster's own pods on its bus (resources.BuildNetworkPolicy).
type SetNetworkPolicy struct{ Create bool }

// DeleteNetworkPolicy deletes the cluster's NetworkPolicy: spec.network.policy (or the
// operator's default) turned it off.
type DeleteNetworkPolicy struct{}

// WriteCredential writes the operator's credential Secret the pass holds (created, adopted, or
// given a key it lacks).
type WriteCredential struct{}

// CreateService creates the cluster's headless Service.
type CreateService struct{}

// UpdateService brings the cluster's headless Service, created by an older operator, to the
// original's port names and selector.
type UpdateService struct{}

// WriteACLSecret writes the ACL Secret this pass renders (the ACL file and auth.conf every pod
// mounts) over the stored one, which is missing or differs.
type WriteACLSecret struct{}

// MarkActive marks the ValkeyNode of Pod Active: its node has joined (fsm.CompletedJoins).
type MarkActive struct{ Pod string }

// SettleMove removes the moved-from annotation of Pod's ValkeyNode: the copy it replaced in
// another zone is retired, so it is an ordinary copy again.
type SettleMove struct{ Pod string }

// AnnotatePod brings spec.podAnnotations onto Pod: Keys, sorted, are those it lacks or holds
// with another value (a merge patch of those keys only).
type AnnotatePod struct {
	Pod  string
	Keys []string
}

// RecordPod records in Pod's ValkeyNode (status.podUID) that the pod of that name now is the
// one the operator created for it.
type RecordPod struct{ Pod string }

func (SetBudget) action()           {}
func (DeleteBudget) action()        {}
func (SetNetworkPolicy) action()    {}
func (DeleteNetworkPolicy) action() {}
func (WriteACLSecret) action()      {}
func (CreateService) action()       {}
func (WriteCredential) action()     {}
func (UpdateService) action()       {}
func (MarkActive) action()          {}
func (SettleMove) action()          {}
func (AnnotatePod) action()         {}
func (RecordPod) action()           {}

// upkeep marks the actions that keep the objects beside the Valkey cluster in step with it
// (budgets, the ACL Secret, the ValkeyNodes' records, pod annotations): they change nothing in
// Valkey, so the status does not report them as progress (Upkeep).
func (SetBudget) upkeep()           {}
func (DeleteBudget) upkeep()        {}
func (SetNetworkPolicy) upkeep()    {}
func (DeleteNetworkPolicy) upkeep() {}
func (WriteACLSecret) upkeep()      {}
func (CreateService) upkeep()       {}
func (WriteCredential) upkeep()     {}
func (UpdateService) upkeep()       {}
func (MarkActive) upkeep()          {}
func (SettleMove) upkeep()          {}
func (AnnotatePod) upkeep()         {}
func (RecordPod) upkeep()           {}

// Upkeep reports whether a is one of the bookkeeping planners' actions (Before, After): a write
// to an object beside the Valkey cluster, not a step of its change.
func Upkeep(a Action) bool {
	_, ok := a.(interface{ upkeep() })
	return ok
}

func (SetConfig) action()     {}
func (ResizePod) action()     {}
func (RecordSize) action()    {}
func (MoveSlots) action()     {}
func (CloseSlots) action()    {}
func (CreatePod) action()     {}
func (Meet) action()          {}
func (AddSlots) action()      {}
func (Replicate) action()     {}
func (Forget) action()        {}
func (DeletePod) action()     {}
func (Detach) action()        {}
func (Takeover) action()      {}
func (BumpEpoch) action()     {}
func (FailoverForce) action() {}
func (Failover) action()      {}

// Disruptive: a config epoch only ranks claims on slots; a node's own claim wins more, and
// nobody else's changes. Harmless.
func (BumpEpoch) Disruptive() bool { return false }

// Disruptive: a budget only says which evictions Kubernetes lets through; harmless.
func (SetBudget) Disruptive() bool { return false }

// Disruptive: only a removed shard's budget, once none of its pods is left; harmless.
func (DeleteBudget) Disruptive() bool { return false }

// Disruptive: the policy lets in every connection the cluster's own pods, the operator and its
// clients make; harmless.
func (SetNetworkPolicy) Disruptive() bool { return false }

// Disruptive: without the policy, the pods are as open as the platform leaves them; harmless.
func (DeleteNetworkPolicy) Disruptive() bool { return false }

// Disruptive: the Secret is read by a pod as it starts and by the ACL controller, which loads it
// into the nodes by its own rules; harmless.
func (WriteACLSecret) Disruptive() bool  { return false }
func (CreateService) Disruptive() bool   { return false }
func (WriteCredential) Disruptive() bool { return false }
func (UpdateService) Disruptive() bool   { return false }

// Disruptive: a record of what the nodes already said; harmless.
func (MarkActive) Disruptive() bool { return false }

// Disruptive: a record of what the nodes already said; harmless.
func (SettleMove) Disruptive() bool { return false }

// Disruptive: annotations are metadata; no pod is replaced for them. Harmless.
func (AnnotatePod) Disruptive() bool { return false }

// Disruptive: a record of which pod is the node's; harmless.
func (RecordPod) Disruptive() bool { return false }

// Disruptive: a setting Valkey takes at run time replaces no pod and moves no slot; harmless.
func (SetConfig) Disruptive() bool { return false }

// Disruptive: the kubelet changes the container's cgroup while its process runs; a memory limit
// below what the process holds is never asked (the resize planner) and never written (the
// kubelet). Harmless.
func (ResizePod) Disruptive() bool { return false }

// Disruptive: a record of what the kubelet already applied; harmless.
func (RecordSize) Disruptive() bool { return false }

// Disruptive: a new pod joins nobody until it is met; harmless.
func (CreatePod) Disruptive() bool { return false }

// Disruptive: meeting a node that is already known is a no-op; harmless.
func (Meet) Disruptive() bool { return false }

// Disruptive: slots are only ever added where no node's view gives them an owner; harmless.
func (AddSlots) Disruptive() bool { return false }

// Disruptive: only slot-less nodes are attached, so no data is flushed; harmless.
func (Replicate) Disruptive() bool { return false }

// Disruptive: a node forgotten by mistake loses its place in the cluster.
func (Forget) Disruptive() bool { return true }

// Disruptive: slots change owner; a client is redirected, and a move cut short must be settled.
func (MoveSlots) Disruptive() bool { return true }

// Disruptive: slots' migration states change on their nodes.
func (CloseSlots) Disruptive() bool { return true }

// Disruptive: a deleted pod is gone for good.
func (DeletePod) Disruptive() bool { return true }

// Disruptive: only a replica already chosen for retirement (its shard's other copies caught up)
// is detached; it loses no data and serves no slot. Harmless.
func (Detach) Disruptive() bool { return false }

// Disruptive: a takeover changes who serves a shard without the cluster's agreement.
func (Takeover) Disruptive() bool { return true }

// Disruptive: the shard changes primary; a second one issued before the first lands would
// elect twice.
func (FailoverForce) Disruptive() bool { return true }

// Disruptive: the shard changes primary.
func (Failover) Disruptive() bool { return true }

// String describes the action.
func (a CreatePod) String() string {
	if a.Zone != "" {
		return fmt.Sprintf("create pod for shard %d in zone %s (from %s)", a.Shard, a.Zone, a.MovedFrom)
	}
	return fmt.Sprintf("create pod for shard %d", a.Shard)
}

// String describes the action.
func (a Meet) String() string {
	if a.Mesh {
		return fmt.Sprintf("mesh meet %s from %s", a.IP, a.Pod)
	}
	return fmt.Sprintf("meet %s from %s", a.IP, a.Pod)
}

// String describes the action.
func (a AddSlots) String() string {
	if a.Lost {
		return fmt.Sprintf("add lost slots %s of shard %d to %s", a.Slots, a.Shard, a.Pod)
	}
	return fmt.Sprintf("add slots %s to %s", a.Slots, a.Pod)
}

// String describes the action.
func (a Replicate) String() string { return fmt.Sprintf("%s replicates %s", a.Pod, a.PrimaryID) }

// String describes the action.
func (a Forget) String() string { return fmt.Sprintf("%d nodes forget %s", len(a.Pods), a.NodeID) }

// String describes the action.
func (a MoveSlots) String() string {
	pairs := map[string]bool{}
	for _, m := range a.Moves {
		pairs[m.Source+">"+m.Target] = true
	}
	if a.Settle {
		return fmt.Sprintf("resume the move of %d slots", len(a.Moves))
	}
	return fmt.Sprintf("move %d slots over %d source/target pairs", len(a.Moves), len(pairs))
}

// String describes the close.
func (a CloseSlot) String() string {
	if a.Owner != "" {
		return fmt.Sprintf("close slot %d on %s, which serves it", a.Slot, a.Pod)
	}
	return fmt.Sprintf("close slot %d on %s", a.Slot, a.Pod)
}

// String describes the action.
func (a CloseSlots) String() string {
	if len(a.Closes) == 1 {
		return a.Closes[0].String()
	}
	return fmt.Sprintf("close %d open slots", len(a.Closes))
}

// String describes the action.
func (a DeletePod) String() string {
	if a.Reason != "" {
		return fmt.Sprintf("retire %s (%s)", a.Pod, a.Reason)
	}
	return "delete pod " + a.Pod
}

// String describes the action.
func (a Detach) String() string { return "detach " + a.Pod + " from its primary" }

// String describes the action.
func (a BumpEpoch) String() string {
	return fmt.Sprintf("bump the config epoch of %s (%s)", a.Pod, a.Reason)
}

func (a Takeover) String() string {
	if a.Reason != "" {
		return fmt.Sprintf("%s takes over shard %d from %s (%s)", a.Pod, a.Shard, a.PrimaryID, a.Reason)
	}
	return fmt.Sprintf("%s takes over shard %d from %s", a.Pod, a.Shard, a.PrimaryID)
}

// String describes the action.
func (a FailoverForce) String() string {
	return fmt.Sprintf("%s forces the failover of shard %d from %s", a.Pod, a.Shard, a.PrimaryID)
}

// String describes the action.
func (a Failover) String() string {
	switch a.Purpose {
	case Roll:
		return fmt.Sprintf("%s takes over shard %d from %s for the rolling upgrade", a.Pod, a.Shard, a.PrimaryID)
	case Realign:
		return fmt.Sprintf("%s takes shard %d's slots back from %s of another shard", a.Pod, a.Shard, a.PrimaryID)
	case Spread:
		return fmt.Sprintf("%s takes over shard %d from %s to leave zone %s", a.Pod, a.Shard, a.PrimaryID, a.Zone)
	}
	return fmt.Sprintf("%s fails over shard %d from %s", a.Pod, a.Shard, a.PrimaryID)
}

// String describes the action.
func (a SetConfig) String() string {
	if len(a.Set) == 0 {
		return "record the live settings of " + a.Pod
	}
	keys := make([]string, len(a.Set))
	for i, c := range a.Set {
		keys[i] = c.Key
	}
	return fmt.Sprintf("set %s live on %s", strings.Join(keys, ", "), a.Pod)
}

// String describes the action.
func (a ResizePod) String() string {
	return fmt.Sprintf("resize %s in place from %s to %s", a.Pod, a.From, a.To)
}

// String describes the action.
func (a RecordSize) String() string { return fmt.Sprintf("record the size of %s (%s)", a.Pod, a.Size) }

// String describes the action.
func (a SetBudget) String() string {
	if a.Create {
		return fmt.Sprintf("create the disruption budget of shard %d", a.Shard)
	}
	return fmt.Sprintf("update the disruption budget of shard %d", a.Shard)
}

// String describes the action.
func (a DeleteBudget) String() string {
	return fmt.Sprintf("delete the disruption budget of shard %d", a.Shard)
}

// String describes the action.
func (a SetNetworkPolicy) String() string {
	if a.Create {
		return "create the network policy"
	}
	return "update the network policy"
}

// String describes the action.
func (DeleteNetworkPolicy) String() string { return "delete the network policy" }

// String describes the action.
func (WriteACLSecret) String() string  { return "write the ACL Secret" }
func (CreateService) String() string   { return "create the headless Service" }
func (WriteCredential) String() string { return "write the operator's credential Secret" }
func (UpdateService) String() string   { return "update the headless Service's ports and selector" }

// String describes the action.
func (a MarkActive) String() string { return "mark " + a.Pod + " Active" }

// String describes the action.
func (a SettleMove) String() string { return "settle the zone move of " + a.Pod }

// String describes the action.
func (a RecordPod) String() string { return "record " + a.Pod + " as its node's pod" }

// String describes the action.
func (a AnnotatePod) String() string {
	return fmt.Sprintf("annotate %s with %s", a.Pod, strings.Join(a.Keys, ", "))
}
