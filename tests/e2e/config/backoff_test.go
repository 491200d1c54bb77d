package config

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/tests/harness"
)

// refusedMaxclients is a maxclients Valkey refuses at run time on any node of the local cluster:
// more clients than the kernel lets a process open files (fs.nr_open, 1 048 576 here), which no
// schema can judge. CONFIG SET answers "The operating system is not able to handle the specified
// number of clients".
const refusedMaxclients = "2000000"

// TestRefusedLiveValueKeepsTheLooks: a live value that Valkey refuses makes every pass fail, and
// the status says why; the cluster is still looked at at the health-look interval. The passes
// are counted (valkey_cluster_reconcile_passes_total, sampled every half second) from 30 s to
// 100 s after the refusal first stood: no two more than passGapBound apart. With
// controller-runtime's default back-off (5 ms doubling to 1 000 s), they were 41 s apart by then
// and 82 s after five minutes, and the looks that catch a majority of primaries cut off stopped
// with them. The five-minute figure is BenchmarkRefusedLiveValue's.
func TestRefusedLiveValueKeepsTheLooks(t *testing.T) {
	const passGapBound = 20 * time.Second // the look interval is 5 s
	ns := "backoff"
	vc := harness.ActiveCluster(t, ns, 1, 0)
	harness.WaitReady(t, vc, 1, 0, nil, harness.FormTimeout)
	harness.EditConfig(t, ns+"-config", func(c *v1.ValkeyConfig) {
		if c.Spec.Valkey == nil {
			c.Spec.Valkey = map[string]string{}
		}
		c.Spec.Valkey["maxclients"] = refusedMaxclients
	})
	harness.WaitFor(t, "the refusal in status", harness.LiveTimeout, func() string {
		cur := harness.CurrentCluster(t, vc)
		if ready := meta.FindStatusCondition(cur.Status.Conditions, v1.ConditionReady); ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != "LiveSettingsRefused" {
			return "status.message " + cur.Status.Message
		}
		return ""
	})
	refused := time.Now()
	t.Logf("refused: %s", harness.CurrentCluster(t, vc).Status.Message)
	gaps := harness.PassGaps(t, vc, refused.Add(30*time.Second), refused.Add(100*time.Second))
	longest := time.Duration(0)
	for _, g := range gaps {
		longest = max(longest, g)
	}
	t.Logf("%d passes between 30 s and 100 s after the refusal, the longest gap %s", len(gaps), longest.Round(time.Millisecond))
	if longest > passGapBound {
		t.Errorf("passes %s apart while a refused live value stands: the back-off outgrew the health looks (gaps %v)", longest.Round(time.Second), gaps)
	}

	// Fixed: Ready again, the nodes run the value they ran.
	harness.EditConfig(t, ns+"-config", func(c *v1.ValkeyConfig) { delete(c.Spec.Valkey, "maxclients") })
	harness.WaitReady(t, vc, 1, 0, nil, harness.LiveTimeout)
}
