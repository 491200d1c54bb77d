package resize

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/tests/harness"
)

// TestInfeasibleResizeRolls: a 3×1 under the 16-slot writer has its memory doubled on nodes
// whose kubelet says a Guaranteed pod's memory resize is Infeasible. The operator asks each pod
// for the resize, reads the kubelet's answer, says why it replaces the node instead
// (`resize not possible in place, replacing the node`, naming the kubelet's reason) and rolls as
// before: every pod replaced by one of 512Mi, one failover per shard, no acknowledged write lost.
func TestInfeasibleResizeRolls(t *testing.T) {
	ns := "resize-infeasible"
	vc := harness.ActiveCluster(t, ns, 3, 1)
	harness.WaitReady(t, vc, 3, 1, nil, harness.FormTimeout)
	harness.WaitPrimariesSpread(t, vc)
	before := harness.PodNameSet(t, vc)
	w, opts := harness.StartClusterWriter(t, vc)
	logStart := len(harness.ParseLog(t, harness.Op.Logs()))
	harness.EditConfig(t, ns+"-config", func(c *v1.ValkeyConfig) { c.Spec.Resources.Memory = ptr.To(resource.MustParse("512Mi")) })
	harness.WaitRolled(t, vc, 3, 1, before, harness.RollTimeout)
	for _, p := range harness.Pods(t, vc) {
		if got := p.Spec.Containers[0].Resources.Limits.Memory().String(); got != "512Mi" {
			t.Errorf("%s: memory limit %s, want 512Mi", p.Name, got)
		}
	}
	said := map[string]bool{}
	for _, l := range harness.ParseLog(t, harness.Op.Logs())[logStart:] {
		if strings.HasSuffix(l.Ref(), "."+ns) && l.Message() == logging.MsgResizeNotInPlace && strings.Contains(fmt.Sprint(l.Fields[logging.FieldReason]), "infeasible") {
			said[fmt.Sprint(l.Fields[logging.FieldPod])] = true
		}
	}
	for name := range before {
		if !said[name] {
			t.Errorf("no %q line saying the kubelet's infeasible for %s", logging.MsgResizeNotInPlace, name)
		}
	}
	r := harness.FinishWriter(t, w, vc, opts)
	if r.LostReplicated > 0 || r.LostUnreplicated > 0 {
		t.Errorf("%d+%d acknowledged keys lost in the roll", r.LostReplicated, r.LostUnreplicated)
	}
	harness.CheckFailoversPerShard(t, vc, 3)
}
