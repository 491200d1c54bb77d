package controllers

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/metrics"
	"github.com/gomomento/valkey-operator/plan"
	"github.com/gomomento/valkey-operator/slot"
	"github.com/gomomento/valkey-operator/tlsmaterial"
)

// Kubernetes Events and Prometheus metrics say, in addition to the log stream (whose contract
// they do not change), what a platform team looks for with `kubectl describe` and its monitoring.
// Both come from what a pass already observed and did: no Valkey or API round trip of their own.
// An Event is recorded where the log says the same thing (a transition, a failover, a data loss,
// a refused or unschedulable pod, a stalled roll, a certificate about to expire), at the log's
// own cadence (once per change, or once per 30 s tick for a standing condition), and client-go's
// events broadcaster folds repeats into a series: rate-limited twice. Their text is the log's and
// the status's, which never carry a secret.

// Event reasons, by what happened (the Event's reason field).
const (
	EventTransition       = "Transition"
	EventInvalid          = "Invalid"
	EventFailover         = "Failover"
	EventTakeover         = "Takeover"
	EventDataLost         = "DataLost"
	EventPodCreateRefused = "PodCreateRefused"
	EventUnschedulable    = "Unschedulable"
	EventRollStalled      = "RollStalled"
	EventCertExpiring     = "CertificateExpiring"
	// EventSettingsRefused: Valkey refused a live setting (once per node and refusal).
	EventSettingsRefused = "LiveSettingsRefused"
	// EventSettingsHeld: a change of live settings that evicts keys waits for a confirmation
	// (Normal, once per cluster and change).
	EventSettingsHeld = "LiveSettingsHeld"
	// EventSettingsUnreadable: a node's live settings could not be read (once per tick).
	EventSettingsUnreadable = "LiveSettingsUnreadable"
	// EventForeignObject: an object under one of a node's names is not the operator's, and is
	// left alone (once per tick).
	EventForeignObject = "ForeignObject"
	// EventACLOversized: a node held far more ACL users, or longer rules, than its cluster
	// declares; not read, and put back (once per tick per node).
	EventACLOversized = "ACLOversized"
	// EventZoneSpreadDegraded: zoneSpread required over fewer zones than a shard has copies
	// (once per tick).
	EventZoneSpreadDegraded = "ZoneSpreadDegraded"
	// EventResizing and EventResized: a node's CPU and memory changed in place, asked and
	// applied (resize.go); EventResizeNotInPlace (Warning): a node whose CPU and memory alone
	// changed is replaced instead, and why; EventResizeRefused (Warning): a memory shrink is
	// refused (the ResizeRefused condition).
	EventResizing         = "Resizing"
	EventResized          = "Resized"
	EventResizeNotInPlace = "ResizeNotInPlace"
	EventResizeRefused    = "ResizeRefused"
	// EventPasswordRotation: a rotation of the system passwords entered a phase (Normal), or its
	// request cannot be answered (Warning).
	EventPasswordRotation = "PasswordRotation"
	// eventController is the reportingController of every Event (events.k8s.io/v1).
	eventController = "valkey-operator"
)

// EventRecorderName is the name the manager's event recorder is made with (the Events'
// reportingController).
const EventRecorderName = eventController

// recordEvent records an Event about vc when a recorder is set. action is what the operator did (or
// "Observe" when it only reports).
func recordEvent(rec events.EventRecorder, vc *v1.ValkeyCluster, warning bool, reason, action, note string, args ...any) {
	recordRelated(rec, vc, nil, warning, reason, action, note, args...)
}

// recordRelated is recordEvent with the Event's related object: a pod, for an Event said once
// per node. The broadcaster folds Events of one regarding object, reason and related object into
// a series whatever their notes, so without it a second node's Event would only count as a
// repeat of the first's.
func recordRelated(rec events.EventRecorder, vc *v1.ValkeyCluster, related runtime.Object, warning bool, reason, action, note string, args ...any) {
	if rec == nil {
		return
	}
	typ := corev1.EventTypeNormal
	if warning {
		typ = corev1.EventTypeWarning
	}
	msg := fmt.Sprintf(note, args...)
	if len(msg) > 1024 { // the API server refuses a note over 1 kB
		msg = msg[:1021] + "..."
	}
	rec.Eventf(vc, related, typ, reason, action, "%s", msg)
}

// recordPass gives the metrics registry what this pass observed of vc.
func (r *ValkeyClusterReconciler) recordPass(vc *v1.ValkeyCluster, state fsm.State, obs *observation, h health, now time.Time) {
	if r.Metrics == nil {
		return
	}
	s := obs.snapshot
	o := metrics.Cluster{
		Namespace: vc.Namespace, Name: vc.Name, State: string(state), Ready: h.Ready,
		NodesWanted: s.DesiredNodes(), NodesOutdated: len(s.Outdated()), Shards: s.Shards, ShardsServing: map[int]bool{},
	}
	var served []slot.Set
	offsets := map[string]int64{}
	for _, p := range s.LivePods() {
		if n := p.Node; n != nil && n.Reachable && n.Primary {
			offsets[n.ID] = n.ReplOffset
			served = append(served, n.MySlots)
			o.SlotsInFlight += len(n.Migrating) + len(n.Importing)
		}
	}
	o.SlotsServed = slot.Union(served...).Count()
	for shard, pods := range s.ShardPods() {
		if p := fsm.ShardPrimary(pods); p != nil && p.Node.Primary && len(p.Node.MySlots) > 0 {
			o.ShardsServing[shard] = true
		}
	}
	for _, p := range s.LivePods() {
		if fsm.NodeReady(p) {
			o.NodesReady++
		}
		n := metrics.Node{Pod: p.Name, Shard: p.Shard}
		if v := p.Node; v != nil && v.Reachable {
			st := obs.stats[p.Name]
			n.Up, n.Primary, n.LinkUp = true, v.Primary, v.LinkUp
			if off, ok := offsets[v.PrimaryID]; ok && !v.Primary {
				n.LagBytes = max(off-v.ReplOffset, 0)
			}
			n.UsedMemory, n.MaxMemory, n.ConnectedClients = st.UsedMemory, st.MaxMemory, st.ConnectedClients
			n.CommandsProcessed, n.KeyspaceHits, n.KeyspaceMisses = st.CommandsProcessed, st.KeyspaceHits, st.KeyspaceMisses
			n.EvictedKeys, n.ExpiredKeys = st.EvictedKeys, st.ExpiredKeys
		}
		o.Nodes = append(o.Nodes, n)
	}
	if tm := obs.tls; tm != nil {
		o.Certificates = map[string]time.Time{tlsmaterial.CertKey: tm.Leaf.NotAfter}
		for _, ca := range tm.CAs {
			if t, ok := o.Certificates[tlsmaterial.CAKey]; !ok || ca.NotAfter.Before(t) {
				o.Certificates[tlsmaterial.CAKey] = ca.NotAfter
			}
		}
	}
	r.Metrics.Observe(o)
}

// recordAction counts and reports an action of the pass that succeeded.
func (r *ValkeyClusterReconciler) recordAction(vc *v1.ValkeyCluster, a plan.Action) {
	ns, name := vc.Namespace, vc.Name
	switch a := a.(type) {
	case plan.Failover:
		r.Metrics.Failover(ns, name, metrics.KindGraceful)
		recordEvent(r.Events, vc, false, EventFailover, "Failover", "%s", failoverNote(a))
	case plan.FailoverForce:
		r.Metrics.Failover(ns, name, metrics.KindForced)
		recordEvent(r.Events, vc, true, EventFailover, "Failover", "%s", failoverNote(a))
	case plan.Takeover:
		r.Metrics.Failover(ns, name, metrics.KindTakeover)
		recordEvent(r.Events, vc, true, EventTakeover, "Takeover", "%s", failoverNote(a))
	case plan.AddSlots:
		if a.Lost {
			r.Metrics.ShardLost(ns, name, a.Shard)
			recordEvent(r.Events, vc, true, EventDataLost, "Recover", "shard %d lost every copy of its data; its slots %s are served again, empty", a.Shard, a.Slots)
		}
	case plan.DeletePod:
		if a.Reason == "" {
			r.Metrics.PodFailed(ns, name)
		}
	case plan.BumpEpoch, plan.CreatePod, plan.Meet, plan.Replicate, plan.Forget, plan.MoveSlots, plan.CloseSlots, plan.Detach, plan.SetConfig,
		plan.SetBudget, plan.DeleteBudget, plan.SetNetworkPolicy, plan.DeleteNetworkPolicy, plan.WriteACLSecret, plan.MarkActive,
		plan.SettleMove, plan.AnnotatePod, plan.RecordPod, plan.ResizePod, plan.RecordSize,
		plan.WriteNextPasswords, plan.SetPrimaryAuth, plan.PromotePasswords, plan.CreateService, plan.UpdateService, plan.WriteCredential:
		// Nothing to count or say (a resize says its own Events): slot moves are counted as they land (mover.Tally).
	}
}

// failoverMessage is the log message of a failover the operator issues (the catalogue's line for
// its kind): the one source of its words, which its Event repeats (failoverNote). "" for an action
// that is not a failover.
func failoverMessage(a plan.Action) string {
	if f, ok := a.(plan.Failover); ok {
		switch f.Purpose {
		case plan.Roll:
			return logging.MsgFailoverForUpgrade
		case plan.Realign:
			return logging.MsgRealigningShard
		case plan.Spread:
			return logging.MsgSpreadingPrimaries
		case plan.HandOver:
		}
		return logging.MsgPrimaryLeavingHandover
	}
	if _, ok := a.(plan.FailoverForce); ok {
		return logging.MsgPrimaryGonePromoting
	}
	if t, ok := a.(plan.Takeover); ok {
		if t.Reason != "" {
			return logging.MsgPrimaryGoneTakeover
		}
		return logging.MsgNoQuorumTakeover
	}
	return ""
}

// failoverNote is the Event of a failover: its shard, its log message and the fields of its log
// line (the replica promoted, the zone a spread leaves, why a takeover where a FORCE would do).
func failoverNote(a plan.Action) string {
	var shard int
	var pod, zone, reason string
	if f, ok := a.(plan.Failover); ok {
		shard, pod = f.Shard, f.Pod
		if f.Purpose == plan.Spread {
			zone = f.Zone
		}
	}
	if f, ok := a.(plan.FailoverForce); ok {
		shard, pod = f.Shard, f.Pod
	}
	if f, ok := a.(plan.Takeover); ok {
		shard, pod, reason = f.Shard, f.Pod, f.Reason
	}
	note := fmt.Sprintf("shard %d: %s (pod %s", shard, failoverMessage(a), pod)
	if zone != "" {
		note += ", leaving zone " + zone
	}
	if reason != "" {
		note += ", " + reason
	}
	return note + ")"
}
