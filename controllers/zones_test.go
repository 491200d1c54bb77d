package controllers

import (
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/plan"
)

// zoneSpread required keeps a shard's copies apart only over at least 1 + replicasPerShard zones:
// with fewer, ZoneSpreadDegraded is True and says what to fix; with enough it is False; under
// bestEffort there is none; zones unknown this pass leave the condition as it was.
func TestZoneSpreadCondition(t *testing.T) {
	snap := func(replicas int, known bool, zones ...string) fsm.Snapshot {
		return fsm.Snapshot{Shards: 3, ReplicasPerShard: replicas, ZonesKnown: known, Zones: zones}
	}
	cases := []struct {
		name    string
		mode    v1.ZoneSpread
		s       fsm.Snapshot
		prev    *metav1.Condition
		want    metav1.ConditionStatus // "" = no condition
		reason  string
		message string // prefix
	}{
		{name: "required, 2 zones for 3 copies", mode: v1.ZoneSpreadRequired, s: snap(2, true, "zone-a", "zone-b"),
			want: metav1.ConditionTrue, reason: ReasonTooFewZones,
			message: "zoneSpread is required but the cluster has 2 zones (zone-a, zone-b) for the 3 copies of each shard (1 + replicasPerShard 2): " +
				"copies of a shard share a zone, and that zone's loss costs the shard every copy there; give the cluster at least 3 zones (placement.zones, or nodes labelled topology.kubernetes.io/zone) or lower replicasPerShard"},
		{name: "required, one zone", mode: v1.ZoneSpreadRequired, s: snap(1, true, "zone-a"),
			want: metav1.ConditionTrue, reason: ReasonTooFewZones, message: "zoneSpread is required but the cluster has 1 zone (zone-a) for the 2 copies"},
		{name: "required, no zone label", mode: v1.ZoneSpreadRequired, s: snap(1, true),
			want: metav1.ConditionTrue, reason: ReasonTooFewZones, message: "zoneSpread is required but the cluster has no zone: no node the cluster may use has a topology.kubernetes.io/zone label"},
		{name: "required, enough zones", mode: v1.ZoneSpreadRequired, s: snap(1, true, "zone-a", "zone-b"),
			want: metav1.ConditionFalse, reason: ReasonZonesEnough, message: "each shard's 2 copies are kept in zones of their own (zone-a, zone-b)"},
		{name: "bestEffort: none, a former one removed", mode: v1.ZoneSpreadBestEffort, s: snap(2, true, "zone-a"),
			prev: &metav1.Condition{Type: v1.ConditionZoneSpreadDegraded, Status: metav1.ConditionTrue, Reason: ReasonTooFewZones}},
		{name: "zones unknown: kept as it was", mode: v1.ZoneSpreadRequired, s: snap(2, false),
			prev: &metav1.Condition{Type: v1.ConditionZoneSpreadDegraded, Status: metav1.ConditionTrue, Reason: ReasonTooFewZones, Message: "before"},
			want: metav1.ConditionTrue, reason: ReasonTooFewZones, message: "before"},
		{name: "zones unknown, none before: none", mode: v1.ZoneSpreadRequired, s: snap(2, false)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := &v1.ValkeyClusterStatus{}
			if c.prev != nil {
				meta.SetStatusCondition(&st.Conditions, *c.prev)
			}
			setZoneSpreadCondition(st, 4, c.mode, c.s)
			got := meta.FindStatusCondition(st.Conditions, v1.ConditionZoneSpreadDegraded)
			if c.want == "" {
				if got != nil {
					t.Fatalf("condition %+v, want none", got)
				}
				return
			}
			if got == nil || got.Status != c.want || got.Reason != c.reason || !strings.HasPrefix(got.Message, c.message) {
				t.Fatalf("condition %+v, want %s %s %q…", got, c.want, c.reason, c.message)
			}
			// The WARN line says the same while the condition is True.
			if short := zoneSpreadShort(c.mode, c.s); (short != "") != (c.want == metav1.ConditionTrue && c.s.ZonesKnown) {
				t.Errorf("zoneSpreadShort %q with condition %s", short, got.Status)
			}
		})
	}
}

// The standing warnings of a pass (too few zones for required spread, a node whose live settings
// cannot be read) are said once per tick, however often passes run.
func TestStandingWarningsOncePerTick(t *testing.T) {
	vc := newTestCluster() // zoneSpread required, replicasPerShard 1
	s := formedSnapshot(1, 1)
	s.ReplicasPerShard, s.ZonesKnown, s.Zones = 1, true, []string{"zone-a"}
	for i := range s.Pods {
		s.Pods[i].Lifecycle = string(v1.LifecycleActive)
	}
	s.Pods[1].Node.ConfigErr = "NOPERM"
	r := &ValkeyClusterReconciler{}
	core, logs := observer.New(zap.InfoLevel)
	for range 5 {
		r.logHeartbeat(zap.New(core), vc, fsm.Active, &observation{snapshot: s}, plan.Plan{})
	}
	zones := logs.FilterMessage(logging.MsgZoneSpreadShort).All()
	if len(zones) != 1 || zones[0].Level != zap.WarnLevel || zones[0].ContextMap()[logging.FieldZones] != "zone-a" || zones[0].ContextMap()[logging.FieldCopies] != int64(2) {
		t.Errorf("want one WARN %q with zones and copies, got %v", logging.MsgZoneSpreadShort, zones)
	}
	unread := logs.FilterMessage(logging.MsgSettingsUnreadable).All()
	if len(unread) != 1 || unread[0].Level != zap.WarnLevel || unread[0].ContextMap()[logging.FieldPod] != "p0-1" || unread[0].ContextMap()[logging.FieldError] != "NOPERM" {
		t.Errorf("want one WARN %q naming p0-1, got %v", logging.MsgSettingsUnreadable, unread)
	}
}
