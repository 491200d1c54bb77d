package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/resources"
)

// Zones: the operator reads the Kubernetes nodes (from its cache, stripped to what is used
// here: labels, taints, cordon, the Ready condition) to know which zone each pod runs in and
// which zones can take a new pod, for the spread planner (plan/spread.go) and for placing a
// replacement away from its shard's surviving copies.

// zonesTimeout bounds the wait for the Node cache within a pass.
const zonesTimeout = 2 * time.Second

// stripNode is the cache transform for Nodes: a node's images and most of its status are
// kilobytes the operator never reads, times every node of the Kubernetes cluster.
func stripNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	out := &corev1.Node{TypeMeta: n.TypeMeta}
	out.Name, out.UID, out.ResourceVersion, out.Labels = n.Name, n.UID, n.ResourceVersion, n.Labels
	out.DeletionTimestamp = n.DeletionTimestamp
	out.Spec.Unschedulable, out.Spec.Taints = n.Spec.Unschedulable, n.Spec.Taints
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	return out, nil
}

// nodeZones is what the operator knows of the Kubernetes nodes for one cluster: the zone of
// every node, the zones its placement allows, and those that take new pods now.
type nodeZones struct {
	zoneOf         map[string]string
	zones, zonesUp []string
}

// observeZones lists the nodes from the cache. A cluster's zones are those of the nodes its
// placement allows (nodeSelector, placement.zones); a zone is up when one of them is Ready, not
// cordoned, not being deleted, and carries no NoSchedule or NoExecute taint the pods do not
// tolerate (they tolerate only resources.Arm64Toleration).
func (r *ValkeyClusterReconciler) observeZones(ctx context.Context, vc *v1.ValkeyCluster) (nodeZones, error) {
	var list corev1.NodeList
	if err := r.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nodeZones{}, fmt.Errorf("list nodes: %w", err)
	}
	out := nodeZones{zoneOf: map[string]string{}}
	var sel labels.Selector
	var allowed []string
	if p := vc.Spec.Placement; p != nil {
		if len(p.NodeSelector) > 0 {
			sel = labels.SelectorFromSet(p.NodeSelector)
		}
		allowed = p.Zones
	}
	for i := range list.Items {
		n := &list.Items[i]
		zone := n.Labels[corev1.LabelTopologyZone]
		if zone == "" {
			continue
		}
		out.zoneOf[n.Name] = zone
		if (sel != nil && !sel.Matches(labels.Set(n.Labels))) || (len(allowed) > 0 && !slices.Contains(allowed, zone)) {
			continue
		}
		if !slices.Contains(out.zones, zone) {
			out.zones = append(out.zones, zone)
		}
		if takesPods(n) && !slices.Contains(out.zonesUp, zone) {
			out.zonesUp = append(out.zonesUp, zone)
		}
	}
	slices.Sort(out.zones)
	slices.Sort(out.zonesUp)
	return out, nil
}

// takesPods reports whether the scheduler may put a new Valkey pod on n now.
func takesPods(n *corev1.Node) bool {
	if n.Spec.Unschedulable || n.DeletionTimestamp != nil {
		return false
	}
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	if !ready {
		return false
	}
	for i := range n.Spec.Taints {
		t := &n.Spec.Taints[i]
		if t.Effect != corev1.TaintEffectPreferNoSchedule && !resources.Arm64Toleration.ToleratesTaint(klog.Background(), t, false) {
			return false
		}
	}
	return true
}

// applyZones fills the snapshot's zones and each pod's zone.
func applyZones(s *fsm.Snapshot, z nodeZones, pods map[string]*corev1.Pod) {
	s.Zones, s.ZonesUp, s.ZonesKnown = z.zones, z.zonesUp, true
	for i := range s.Pods {
		if pod, ok := pods[s.Pods[i].Name]; ok && pod.Spec.NodeName != "" {
			s.Pods[i].Zone = z.zoneOf[pod.Spec.NodeName]
		}
	}
}

// zoneMoveHold is how long no copy of a cluster is moved to another zone after one found no room
// there: the zone's capacity is for an autoscaler or a person to add, and without the hold a
// copy would be created and retired every pass.
const zoneMoveHold = 5 * time.Minute

// zoneMoveHolds is, per cluster ("namespace/name"), until when moves are held and why.
type zoneMoveHolds struct {
	mu sync.Mutex
	m  map[string]zoneMoveHeld
}

type zoneMoveHeld struct {
	until time.Time
	why   string
}

func (h *zoneMoveHolds) hold(key, why string, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[string]zoneMoveHeld{}
	}
	h.m[key] = zoneMoveHeld{until: now.Add(zoneMoveHold), why: why}
}

// forget drops the cluster's hold.
func (h *zoneMoveHolds) forget(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.m, key)
}

// state says why moves are held for the cluster now, "" when they are not.
func (h *zoneMoveHolds) state(key string, now time.Time) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	held, ok := h.m[key]
	if !ok {
		return ""
	}
	if !now.Before(held.until) {
		delete(h.m, key)
		return ""
	}
	return fmt.Sprintf("%s; no copy moved to another zone for %s", held.why, held.until.Sub(now).Round(time.Second))
}

// zoneSpreadShort says why zoneSpread required cannot keep each shard's copies in zones of their
// own: the cluster's zones (those of the nodes its placement allows) are fewer than 1 +
// replicasPerShard, so the scheduler puts two copies of a shard in one zone, whose loss costs the
// shard both. "" when they are enough, when the spread is bestEffort, or when the zones are
// unknown this pass. Pure.
func zoneSpreadShort(mode v1.ZoneSpread, s fsm.Snapshot) string {
	copies := 1 + s.ReplicasPerShard
	if mode != v1.ZoneSpreadRequired || !s.ZonesKnown || len(s.Zones) >= copies {
		return ""
	}
	have := "no zone: no node the cluster may use has a " + corev1.LabelTopologyZone + " label"
	switch len(s.Zones) {
	case 0:
	case 1:
		have = "1 zone (" + s.Zones[0] + ")"
	default:
		have = fmt.Sprintf("%d zones (%s)", len(s.Zones), strings.Join(s.Zones, ", "))
	}
	if len(s.Zones) == 0 {
		// Under required (DoNotSchedule) a pod needs a zone-labelled node: nothing is placed.
		return fmt.Sprintf("zoneSpread is required but the cluster has %s: its pods cannot be scheduled; "+
			"label the nodes %s (or list them in placement.zones), or use zoneSpread bestEffort", have, corev1.LabelTopologyZone)
	}
	return fmt.Sprintf("zoneSpread is required but the cluster has %s for the %d copies of each shard (1 + replicasPerShard %d): "+
		"copies of a shard share a zone, and that zone's loss costs the shard every copy there; "+
		"give the cluster at least %d zones (placement.zones, or nodes labelled %s) or lower replicasPerShard",
		have, copies, s.ReplicasPerShard, copies, corev1.LabelTopologyZone)
}

// warnZoneSpread says, once per tick, that the cluster's zones are too few for zoneSpread
// required to keep its shards' copies apart (zoneSpreadShort); the ZoneSpreadDegraded condition
// says the same.
func (r *ValkeyClusterReconciler) warnZoneSpread(log *zap.Logger, vc *v1.ValkeyCluster, obs *observation) {
	msg := zoneSpreadShort(resources.SpreadMode(vc, r.DefaultZoneSpread), obs.snapshot)
	if msg == "" || !r.ticks.due("zones/"+clusterKey(vc), time.Now()) {
		return
	}
	log.Warn(logging.MsgZoneSpreadShort, zap.String(logging.FieldZones, strings.Join(obs.snapshot.Zones, ",")), zap.Int(logging.FieldCopies, 1+obs.snapshot.ReplicasPerShard))
	recordEvent(r.Events, vc, true, EventZoneSpreadDegraded, "Observe", "%s", msg)
}

// setZoneSpreadCondition sets ZoneSpreadDegraded on st for a cluster under zoneSpread required:
// True with zoneSpreadShort's message while its zones are fewer than a shard's copies, False
// once they are enough. A cluster under bestEffort has no such condition, and one whose zones
// are unknown this pass keeps the condition it had (unknown is not absent). Pure.
func setZoneSpreadCondition(st *v1.ValkeyClusterStatus, gen int64, mode v1.ZoneSpread, s fsm.Snapshot) {
	if mode != v1.ZoneSpreadRequired {
		meta.RemoveStatusCondition(&st.Conditions, v1.ConditionZoneSpreadDegraded)
		return
	}
	if !s.ZonesKnown {
		return
	}
	c := metav1.Condition{Type: v1.ConditionZoneSpreadDegraded, Status: metav1.ConditionFalse, Reason: ReasonZonesEnough, ObservedGeneration: gen,
		Message: fmt.Sprintf("each shard's %d copies are kept in zones of their own (%s)", 1+s.ReplicasPerShard, strings.Join(s.Zones, ", "))}
	if msg := zoneSpreadShort(mode, s); msg != "" {
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonTooFewZones, msg
	}
	meta.SetStatusCondition(&st.Conditions, c)
}
