package controllers

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/plan"
)

// Condition reasons. Ready's reason when False is the first thing that keeps the cluster from
// Ready, in the order decideHealth checks them; Degraded carries the same reason.
const (
	ReasonReady          = "Ready"
	ReasonInvalid        = "Invalid"
	ReasonUnschedulable  = "Unschedulable"
	ReasonFailingOnStart = "PodsFailingOnStart"
	ReasonNotFormed      = "NotFormed"
	ReasonSyncing        = "ReplicasSyncing"
	// ReasonOutdated: nodes of an older spec, or a shard not at its replica count, while a
	// rolling upgrade or a replica scaling runs.
	ReasonOutdated    = "Upgrading"
	ReasonReconciling = "Reconciling"
	// ReasonCreateRefused: the API server refused a pod of the cluster (a quota, a LimitRange,
	// Pod Security admission, a webhook); the operator retries with a back-off.
	ReasonCreateRefused = "PodCreateRefused"
	// ReasonShardDataLost is the DataLost condition's reason.
	ReasonShardDataLost = "ShardDataLost"
	// ReasonSettingsRefused: Valkey refused a live setting of the ValkeyConfig (CONFIG SET), and
	// the operator retries it with a back-off until the ValkeyConfig is fixed.
	ReasonSettingsRefused = "LiveSettingsRefused"
	// ReasonSettingsUnreadable: a node answered but its live settings could not be read (CONFIG
	// GET), so they are neither checked nor applied there.
	ReasonSettingsUnreadable = "LiveSettingsUnreadable"
	// ReasonTooFewZones and ReasonZonesEnough are the ZoneSpreadDegraded condition's reasons.
	ReasonTooFewZones = "TooFewZones"
	ReasonZonesEnough = "ZonesEnough"
)

// health is how the cluster is, from one snapshot and the pass's plan: Ready, or the reason it
// is not and the message that says why. Outside is true when what keeps it from Ready is
// outside the operator (a spec problem, pods that fail on start or cannot be scheduled, nodes of
// an older spec that no planner replaces yet): the pass then waits for a watch or the tick
// instead of looking again every second.
type health struct {
	Ready   bool
	Reason  string
	Message string
	Outside bool
}

// decideHealth checks, in order: the spec is usable; every pod can be scheduled; no shard is
// blocked on pods failing on start; the API server took the last pod created; no pod that is not
// the operator's holds a node's name (identity.go); every desired
// node exists, runs, answers, and the cluster is formed and in agreement (every slot served, one
// primary per shard, the others its replicas); every replica's link is up; the nodes are what
// the spec asks for (fsm.Snapshot.Changing: every node of the current spec, each shard at its
// replica count); Valkey took the live settings (a refusal stands while the same values are set
// again); every node's live settings could be read. The first that fails is the reason. Pure.
func decideHealth(state fsm.State, problem string, s fsm.Snapshot, pl plan.Plan) health {
	if state == fsm.Invalid {
		return health{Reason: ReasonInvalid, Message: problem, Outside: true}
	}
	for _, p := range s.Pods {
		if p.Unschedulable != "" && !p.Deleting {
			return health{Reason: ReasonUnschedulable, Message: fmt.Sprintf("pod %s cannot be scheduled: %s", p.Name, p.Unschedulable), Outside: true}
		}
	}
	if pl.Blocked != "" {
		return health{Reason: ReasonFailingOnStart, Message: pl.Blocked, Outside: true}
	}
	if s.CreateRefused != "" {
		return health{Reason: ReasonCreateRefused, Message: s.CreateRefused, Outside: true}
	}
	// Not Outside, although only its creator can end it: its node is down, and the cluster is
	// looked at every second as with any node that does not answer (a lost quorum needs the
	// operator's TAKEOVER).
	if msg := foreignMessage(s); msg != "" {
		return health{Reason: ReasonForeignPod, Message: msg}
	}
	if !s.Formed() {
		msg := pl.Waiting
		if msg == "" {
			msg = "waiting for the cluster to agree"
		}
		reason := ReasonNotFormed
		if state == fsm.Bootstrapping || state == fsm.Forming {
			reason = string(state)
		}
		return health{Reason: reason, Message: msg}
	}
	if pods := s.Unsynced(); len(pods) > 0 {
		return health{Reason: ReasonSyncing, Message: "waiting for replicas to sync with their primaries: " + strings.Join(pods, ", ")}
	}
	if why := s.Changing(); why != "" {
		// The upgrade planner is on it: say what changes and what the pass waits for.
		msg := why
		if pl.Waiting != "" {
			msg += "; " + pl.Waiting
		}
		return health{Reason: ReasonOutdated, Message: msg}
	}
	// A refused or unreadable live setting comes last: the node keeps running what it runs, and
	// a cluster that is not formed, syncing or rolling must say that first.
	if s.SettingsRefused != "" {
		return health{Reason: ReasonSettingsRefused, Message: s.SettingsRefused, Outside: true}
	}
	if msg := settingsUnreadMessage(s); msg != "" {
		// The ACL controller puts back an ACL that denies it: looked at again on the tick.
		return health{Reason: ReasonSettingsUnreadable, Message: msg, Outside: true}
	}
	return health{Ready: true, Reason: ReasonReady}
}

// buildStatus computes the status a pass writes: the state, the generation acted on, the nodes
// as observed, the message (empty while Ready: users alert on it) and the conditions. prev is
// the status the pass read; conditions keep their transition times, DataLost, once set, stays
// as the record of the latest loss, and formedAt, once set, stays. now stamps a data loss and
// formedAt. Pure.
func buildStatus(prev *v1.ValkeyClusterStatus, gen int64, state fsm.State, problem string, s fsm.Snapshot, pl plan.Plan, now time.Time) (*v1.ValkeyClusterStatus, health) {
	st := prev.DeepCopy()
	st.State = state
	st.ObservedGeneration = gen
	// The marker that the cluster was formed, written the first time it is Active (or found
	// Active or Upgrading with a status from an operator that predates the marker) and never
	// cleared: Invalid does not forget it (fsm.Snapshot.FormedOnce).
	if st.FormedAt == nil && (state == fsm.Active || state == fsm.Upgrading) {
		at := metav1.NewTime(now.UTC().Truncate(time.Second))
		st.FormedAt = &at
	}
	// The intent of a failover is written before it is issued, so a restarted operator does
	// not issue a second one.
	st.Failover = failoverStatus(plan.NextFailover(s, pl))
	setNodes(st, s)
	h := decideHealth(state, problem, s, pl)
	st.Message = h.Message
	set := func(t string, ok bool, reason, msg string) {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen})
	}
	if h.Ready {
		set(v1.ConditionReady, true, ReasonReady, "every node is up to date, every replica synced and every slot served")
	} else {
		set(v1.ConditionReady, false, h.Reason, h.Message)
	}
	// Progress is a change of the Valkey cluster: the bookkeeping that keeps the objects beside
	// it in step (plan.Upkeep) is not reported as such.
	step := slices.IndexFunc(pl.Actions, func(a plan.Action) bool { return !plan.Upkeep(a) })
	switch {
	case !h.Ready && !h.Outside:
		set(v1.ConditionProgressing, true, h.Reason, h.Message)
	case h.Ready && step >= 0:
		set(v1.ConditionProgressing, true, ReasonReconciling, pl.Actions[step].String())
	case h.Ready:
		set(v1.ConditionProgressing, false, ReasonReady, "")
	default:
		set(v1.ConditionProgressing, false, h.Reason, h.Message)
	}
	// Degraded: a cluster formed once (Active, Upgrading) that is not Ready serves with less
	// than its spec asks for. So does one formed once and Invalid now, as far as anyone knows:
	// the operator neither reads its nodes nor heals them (a lost pod is not replaced) until the
	// spec is fixed.
	switch {
	case (state == fsm.Active || state == fsm.Upgrading) && !h.Ready:
		set(v1.ConditionDegraded, true, h.Reason, h.Message)
	case state == fsm.Invalid && st.FormedAt != nil:
		set(v1.ConditionDegraded, true, h.Reason, h.Message+"; "+invalidUnhealed)
	case h.Ready:
		set(v1.ConditionDegraded, false, ReasonReady, "")
	default:
		// Not formed yet (Bootstrapping, Forming, or Invalid before it ever formed): nothing
		// serves less than it did, and the reason says why it is not Ready either.
		set(v1.ConditionDegraded, false, h.Reason, "")
	}
	if msg := lostMessage(pl, now); msg != "" {
		set(v1.ConditionDataLost, true, ReasonShardDataLost, msg)
	}
	return st, h
}

// invalidUnhealed is what Degraded adds for a formed cluster that is Invalid.
const invalidUnhealed = "nothing is healed (a lost pod is not replaced) and the nodes are not read until the spec is fixed"

// lostMessage names the shards this pass serves again empty, with their slots and the time; ""
// when there are none.
func lostMessage(pl plan.Plan, now time.Time) string {
	var parts []string
	for _, a := range pl.Actions {
		if a, ok := a.(plan.AddSlots); ok && a.Lost {
			parts = append(parts, fmt.Sprintf("%d (slots %s)", a.Shard, a.Slots))
		}
	}
	at := now.UTC().Format(time.RFC3339)
	switch len(parts) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf("shard %s lost every copy of its data and was served again, empty, at %s", parts[0], at)
	default:
		return fmt.Sprintf("shards %s lost every copy of their data and were served again, empty, at %s", strings.Join(parts, ", "), at)
	}
}

// capTexts caps status.message and every condition's message (logging.Cap): they quote nodes'
// replies and errors (a refused live value, unreadable settings, a pod's exit), which are text of
// the node's choosing, and a condition message over the API server's limit would fail every
// status write of the cluster. The pass's one status write calls it last, after every condition
// is set. Pure.
func capTexts(st *v1.ValkeyClusterStatus) {
	st.Message = logging.Cap(st.Message)
	for i := range st.Conditions {
		st.Conditions[i].Message = logging.Cap(st.Conditions[i].Message)
	}
}

// setNodes sets the nodes' part of st from s: status.nodes, nodeDetails, readyNodes and shards
// (those whose primary serves slots).
func setNodes(st *v1.ValkeyClusterStatus, s fsm.Snapshot) {
	st.Nodes, st.NodeDetails = nil, nil
	st.ReadyNodes = 0
	shards := map[int]bool{}
	for _, p := range s.LivePods() {
		// A node that does not answer keeps its last known id: the failover planner tells by it
		// which node ids live pods own.
		ns := v1.NodeStatus{Pod: p.Name, Shard: int32(p.Shard), Ready: fsm.NodeReady(p), IP: p.IP, NodeID: p.LastNodeID}
		if n := p.Node; n != nil && n.Reachable {
			ns.NodeID = n.ID
			ns.Role = v1.NodeRoleReplica
			if n.Primary {
				ns.Role = v1.NodeRolePrimary
				if len(n.MySlots) > 0 {
					shards[p.Shard] = true
				}
			}
		}
		if ns.Ready {
			st.ReadyNodes++
		}
		st.Nodes = append(st.Nodes, ns.Pod)
		st.NodeDetails = append(st.NodeDetails, ns)
	}
	st.Shards = int32(len(shards))
}

// equalStatus compares two statuses ignoring condition transition times, which
// meta.SetStatusCondition only moves when a condition's status changes.
func equalStatus(a, b *v1.ValkeyClusterStatus) bool {
	if len(a.Conditions) != len(b.Conditions) {
		return false
	}
	ac, bc := a.DeepCopy(), b.DeepCopy()
	for i := range ac.Conditions {
		ac.Conditions[i].LastTransitionTime = bc.Conditions[i].LastTransitionTime
	}
	return equality.Semantic.DeepEqual(ac, bc)
}

// settingsUnreadMessage says which nodes' live settings could not be read, "" when every node's
// could. Pure.
func settingsUnreadMessage(s fsm.Snapshot) string {
	unread := s.SettingsUnread()
	if len(unread) == 0 {
		return ""
	}
	who := "pod " + unread[0].Name
	if len(unread) > 1 {
		who += fmt.Sprintf(" (and %d more)", len(unread)-1)
	}
	return fmt.Sprintf("live settings of %s cannot be read (%s): they are neither checked nor applied there; "+
		"the operator's user needs CONFIG GET on the node (the ACL controller restores it; check the node's ACL if this lasts)", who, unread[0].Node.ConfigErr)
}
