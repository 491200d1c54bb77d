package zones

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/tests/harness"
)

// TestZoneSpreadTooFewZones: a 1×1 cluster under zoneSpread required whose placement allows one
// zone is admitted and goes Ready (as in the original), but the ZoneSpreadDegraded condition
// (reason TooFewZones) and a WARN line once per tick say that its two copies share that zone and
// what to fix; with a second zone allowed, the condition turns False.
func TestZoneSpreadTooFewZones(t *testing.T) {
	ns := "zone-too-few"
	harness.SetupNamespace(t, ns)
	harness.Create(t, harness.NewImage(ns+"-image"), harness.NewConfig(ns+"-config", ns+"-image"))
	vc := harness.NewCluster(ns, "vc", ns+"-config", harness.WithShards(1), harness.WithReplicas(1))
	vc.Spec.Placement = &v1.Placement{Zones: []string{"zone-a"}, ZoneSpread: v1.ZoneSpreadRequired}
	logStart := len(harness.ParseLog(t, harness.Op.Logs()))
	created := time.Now()
	harness.Create(t, vc)
	harness.WaitReady(t, vc, 1, 1, nil, harness.FormTimeout)
	waitZoneCondition(t, vc, "True", "TooFewZones")
	cond := meta.FindStatusCondition(harness.CurrentCluster(t, vc).Status.Conditions, v1.ConditionZoneSpreadDegraded)
	t.Logf("%s %s: %s", cond.Type, cond.Reason, cond.Message)
	for _, want := range []string{"1 zone (zone-a) for the 2 copies of each shard", "give the cluster at least 2 zones"} {
		if !strings.Contains(cond.Message, want) {
			t.Errorf("condition message %q lacks %q", cond.Message, want)
		}
	}
	if msg := harness.CurrentCluster(t, vc).Status.Message; msg != "" {
		t.Errorf("status.message %q: too few zones does not keep the cluster from Ready", msg)
	}
	warned := 0
	for _, l := range harness.ParseLog(t, harness.Op.Logs())[logStart:] {
		if l.Message() == logging.MsgZoneSpreadShort && strings.HasSuffix(l.Ref(), "."+ns) {
			warned++
			if l.Level != "WARN" || l.Fields[logging.FieldZones] != "zone-a" || fmt.Sprint(l.Fields[logging.FieldCopies]) != "2" {
				t.Errorf("WARN line %s", l.Raw)
			}
		}
	}
	// Once per 30 s tick, not once per pass (a pass runs every second or so meanwhile).
	if ticks := 1 + int(time.Since(created)/(30*time.Second)); warned < 1 || warned > ticks {
		t.Errorf("%d %q lines in %s, want 1 to %d (once per tick)", warned, logging.MsgZoneSpreadShort, time.Since(created).Round(time.Second), ticks)
	}

	harness.EditCluster(t, vc, func(c *v1.ValkeyCluster) { c.Spec.Placement.Zones = []string{"zone-a", "zone-b"} })
	waitZoneCondition(t, vc, "False", "ZonesEnough")
}

// waitZoneCondition waits until vc's ZoneSpreadDegraded condition has status and reason.
func waitZoneCondition(t *testing.T, vc *v1.ValkeyCluster, status, reason string) {
	t.Helper()
	harness.WaitFor(t, fmt.Sprintf("%s %s %s", v1.ConditionZoneSpreadDegraded, status, reason), time.Minute, func() string {
		c := meta.FindStatusCondition(harness.CurrentCluster(t, vc).Status.Conditions, v1.ConditionZoneSpreadDegraded)
		if c != nil && string(c.Status) == status && c.Reason == reason {
			return ""
		}
		return fmt.Sprintf("%+v", c)
	})
}
