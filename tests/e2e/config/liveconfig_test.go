package config

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/tests/harness"
	"github.com/gomomento/valkey-operator/tests/localcluster"
)

// TestLiveConfig: a 3×1 cluster under the writer has maxmemory raised and maxmemory-policy
// changed in its ValkeyConfig (the policy change confirmed beforehand on the config: it evicts,
// and is otherwise held, see TestEvictingChangesHeld). Every node runs the new values (CONFIG
// GET), no pod is replaced (same names and UIDs), no shard fails over (same primaries, no
// failover line), the ValkeyNodes and their ConfigMaps record the new values, no write is refused
// and every acknowledged key reads back. Then maxmemory is changed by hand on one node: the
// operator says so at WARN and puts it back.
func TestLiveConfig(t *testing.T) {
	ns := "live-config"
	vc := harness.ActiveCluster(t, ns, 3, 1)
	checkLiveConfig(t, vc)
}

// TestLiveConfigValkey9 is TestLiveConfig on Valkey 9.1.2.
func TestLiveConfigValkey9(t *testing.T) {
	ns := "live-config-9"
	vc := harness.VersionedCluster(t, ns, localcluster.Valkey9Version, 3, 1)
	checkLiveConfig(t, vc)
}

// checkLiveConfig is TestLiveConfig on vc, a 3×1 whose ValkeyConfig is {namespace}-config.
func checkLiveConfig(t *testing.T, vc *v1.ValkeyCluster) {
	ns := vc.Namespace
	harness.WaitReady(t, vc, 3, 1, nil, harness.FormTimeout)
	uids := harness.PodUIDs(t, vc)
	before := primaryPods(t, vc)
	w, opts := harness.StartClusterWriter(t, vc)
	time.Sleep(2 * time.Second) // writes before the change, as during it

	logStart := len(harness.ParseLog(t, harness.Op.Logs()))
	start := time.Now()
	harness.EditConfig(t, ns+"-config", func(c *v1.ValkeyConfig) {
		c.Annotations = map[string]string{v1.AnnotationConfirmLiveSettings: "maxmemory-policy=allkeys-lru"}
		c.Spec.Valkey["maxmemory"] = "120mb"
		c.Spec.Valkey["maxmemory-policy"] = "allkeys-lru"
	})
	want := map[string]string{"maxmemory": "125829120", "maxmemory-policy": "allkeys-lru"}
	harness.WaitLiveSettings(t, vc, want, harness.LiveTimeout)
	t.Logf("every node runs the new settings %s after the change", time.Since(start).Round(time.Millisecond))
	waitRecorded(t, vc, map[string]string{"maxmemory": "120mb", "maxmemory-policy": "allkeys-lru"}, harness.LiveTimeout)
	time.Sleep(2 * time.Second) // and writes after it

	if after := harness.PodUIDs(t, vc); !maps.Equal(uids, after) {
		t.Errorf("pods replaced by a live setting: before %v, after %v", uids, after)
	}
	if after := primaryPods(t, vc); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Errorf("primaries changed: before %v, after %v", before, after)
	}
	for _, l := range harness.ParseLog(t, harness.Op.Logs())[logStart:] {
		if strings.HasSuffix(l.Ref(), "."+ns) && (harness.FailoverLine(l.Message()) || l.Message() == logging.MsgRetiringNode || l.Message() == logging.MsgCreatingPod) {
			t.Errorf("a live setting change logged %q", l.Message())
		}
	}
	if !harness.LoggedWithPod(t, logging.MsgApplyingSettingsLive, ns) {
		t.Errorf("no %q line with a pod", logging.MsgApplyingSettingsLive)
	}
	applied, errs := 0, 0
	for _, l := range harness.ParseLog(t, harness.Op.Logs())[logStart:] {
		switch {
		case !strings.HasSuffix(l.Ref(), "."+ns):
		case l.Message() == logging.MsgApplyingSettingsLive:
			applied++
		case l.Message() == logging.MsgReconcileError:
			errs++
			t.Logf("reconcile error: %v", l.Fields[logging.FieldError])
		}
	}
	t.Logf("%d %q lines (one per node: 6), %d reconcile errors", applied, logging.MsgApplyingSettingsLive, errs)
	r := harness.FinishWriter(t, w, vc, opts)
	failures := 0
	for _, s := range r.Slots {
		failures += s.Failures
	}
	if failures > 0 || r.LostUnreplicated > 0 {
		t.Errorf("%d writes refused, %d acknowledged keys lost during a live setting change: want 0", failures, r.LostUnreplicated)
	}

	// By hand, on one node: put back, and said at WARN.
	victim := harness.Pods(t, vc)[0]
	configSet(t, victim, "maxmemory", "1mb")
	harness.WaitFor(t, victim.Name+": maxmemory set by hand put back", harness.LiveTimeout, func() string {
		if got := harness.ConfigGet(t, victim, "maxmemory"); got != want["maxmemory"] {
			return "maxmemory " + got
		}
		return ""
	})
	warned := false
	for _, l := range harness.ParseLog(t, harness.Op.Logs()) {
		if l.Message() == logging.MsgSettingDrifted && l.Level == "WARN" && l.Fields[logging.FieldPod] == victim.Name &&
			l.Fields[logging.FieldSetting] == "maxmemory" && l.Fields[logging.FieldValue] == "1048576" {
			warned = true
			t.Logf("WARN: %s", l.Raw)
		}
	}
	if !warned {
		t.Errorf("no WARN %q for %s naming maxmemory and its value", logging.MsgSettingDrifted, victim.Name)
	}
	if after := harness.PodUIDs(t, vc); !maps.Equal(uids, after) {
		t.Errorf("pods replaced after drift: before %v, after %v", uids, after)
	}

	checkRefusedLiveValue(t, vc, uids)
}

// checkRefusedLiveValue sets a maxclients that passes admission (every value Valkey's syntax
// takes does) but that Valkey refuses, more clients than the node's file-descriptor limit allows:
// status.message and the Ready condition (reason LiveSettingsRefused) quote Valkey's reply while
// it stands, `applying settings live` is said once per node however often the pass retries, the
// nodes keep the value they ran and no pod is replaced; once the ValkeyConfig is fixed, the
// message clears and the cluster is Ready again.
func checkRefusedLiveValue(t *testing.T, vc *v1.ValkeyCluster, uids map[string]types.UID) {
	ns := vc.Namespace
	logStart := len(harness.ParseLog(t, harness.Op.Logs()))
	ran := map[string]string{}
	for _, p := range harness.Pods(t, vc) {
		ran[p.Name] = harness.ConfigGet(t, p, "maxclients")
	}
	harness.EditConfig(t, ns+"-config", func(c *v1.ValkeyConfig) { c.Spec.Valkey["maxclients"] = "10000000" })
	start := time.Now()
	var cur *v1.ValkeyCluster
	for {
		cur = harness.CurrentCluster(t, vc)
		ready := meta.FindStatusCondition(cur.Status.Conditions, v1.ConditionReady)
		if ready != nil && ready.Status == metav1.ConditionFalse && ready.Reason == "LiveSettingsRefused" && ready.Message == cur.Status.Message {
			break
		}
		if time.Since(start) > harness.LiveTimeout {
			t.Fatalf("a refused live value did not reach status within %s: message %q, conditions %+v", harness.LiveTimeout, cur.Status.Message, cur.Status.Conditions)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("status.message %s after the change: %q", time.Since(start).Round(time.Millisecond), cur.Status.Message)
	for _, want := range []string{"Valkey refused the live settings maxclients=10000000 on pod ", "config set maxclients on ", "fix the value in the ValkeyConfig"} {
		if !strings.Contains(cur.Status.Message, want) {
			t.Errorf("status.message %q lacks %q", cur.Status.Message, want)
		}
	}
	if !meta.IsStatusConditionTrue(cur.Status.Conditions, v1.ConditionDegraded) {
		t.Errorf("Degraded not True while a live value is refused: %+v", cur.Status.Conditions)
	}
	// Let the retries run: the message stays, the nodes keep what they ran. The pass mark proves
	// the operator looked again meanwhile.
	passed := harness.PassMark(t, vc)
	time.Sleep(5 * time.Second)
	passed(1)
	if cur = harness.CurrentCluster(t, vc); !strings.HasPrefix(cur.Status.Message, "Valkey refused the live settings") {
		t.Errorf("status.message while the refusal stands: %q", cur.Status.Message)
	}
	for _, p := range harness.Pods(t, vc) {
		if got := harness.ConfigGet(t, p, "maxclients"); got != ran[p.Name] {
			t.Errorf("%s runs maxclients %q, want the value it ran (%s)", p.Name, got, ran[p.Name])
		}
	}
	applied, retries := map[string]int{}, 0
	for _, l := range harness.ParseLog(t, harness.Op.Logs())[logStart:] {
		switch {
		case !strings.HasSuffix(l.Ref(), "."+ns):
		case l.Message() == logging.MsgApplyingSettingsLive:
			pod, _ := l.Fields[logging.FieldPod].(string)
			applied[pod]++
		case l.Message() == logging.MsgReconcileError && strings.Contains(fmt.Sprint(l.Fields[logging.FieldError]), "maxclients"):
			retries++
		}
	}
	t.Logf("%d %q lines for %d pods over %d refused passes", len(applied), logging.MsgApplyingSettingsLive, len(harness.Pods(t, vc)), retries)
	if retries < 2 {
		t.Errorf("%d refused passes logged: want the refusal retried", retries)
	}
	for pod, n := range applied {
		if n != 1 {
			t.Errorf("%q said %d times for %s: want once per node and change", logging.MsgApplyingSettingsLive, n, pod)
		}
	}
	if len(applied) != len(harness.Pods(t, vc)) {
		t.Errorf("%q said for %d pods, want every one of %d", logging.MsgApplyingSettingsLive, len(applied), len(harness.Pods(t, vc)))
	}

	// Fixed: the message clears, Ready again, nothing replaced.
	harness.EditConfig(t, ns+"-config", func(c *v1.ValkeyConfig) { delete(c.Spec.Valkey, "maxclients") })
	start = time.Now()
	for {
		cur = harness.CurrentCluster(t, vc)
		if cur.Status.Message == "" && meta.IsStatusConditionTrue(cur.Status.Conditions, v1.ConditionReady) {
			break
		}
		if time.Since(start) > harness.LiveTimeout {
			t.Fatalf("status not cleared within %s of the fix: message %q", harness.LiveTimeout, cur.Status.Message)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("status.message cleared and Ready %s after the fix", time.Since(start).Round(time.Millisecond))
	if after := harness.PodUIDs(t, vc); !maps.Equal(uids, after) {
		t.Errorf("pods replaced by a refused live value: before %v, after %v", uids, after)
	}
}

// primaryPods are the names of the pods whose node serves slots, sorted (status.nodeDetails).
func primaryPods(t *testing.T, vc *v1.ValkeyCluster) []string {
	t.Helper()
	var out []string
	for _, n := range harness.Primaries(t, vc) {
		out = append(out, n.Pod)
	}
	return out
}

// waitRecorded waits until every ValkeyNode of vc records want in spec.valkeySettings and its
// ConfigMap's valkey.conf holds the same lines.
func waitRecorded(t *testing.T, vc *v1.ValkeyCluster, want map[string]string, timeout time.Duration) {
	t.Helper()
	harness.WaitFor(t, "live settings recorded", timeout, func() string {
		miss := ""
		var nodes v1.ValkeyNodeList
		if err := harness.K8s.List(context.Background(), &nodes, client.InNamespace(vc.Namespace)); err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes.Items {
			var cm corev1.ConfigMap
			if err := harness.K8s.Get(context.Background(), client.ObjectKey{Namespace: vc.Namespace, Name: v1.NodeConfigMapName(n.Name)}, &cm); err != nil {
				t.Fatal(err)
			}
			for k, v := range want {
				if n.Spec.ValkeySettings[k] != v {
					miss = "ValkeyNode " + n.Name + ": " + k + " = " + n.Spec.ValkeySettings[k]
				}
				if !strings.Contains(cm.Data["valkey.conf"], "\n"+k+" "+v+"\n") {
					miss = "ConfigMap of " + n.Name + " lacks " + k + " " + v
				}
			}
		}
		return miss
	})
}

// configSet runs CONFIG SET key value on p's node as the default user: a change by hand.
func configSet(t *testing.T, p corev1.Pod, key, value string) {
	t.Helper()
	c := harness.DefaultUserClient(t, p)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Do(ctx, c.B().ConfigSet().ParameterValue().ParameterValue(key, value).Build()).Error(); err != nil {
		t.Fatalf("%s: CONFIG SET %s: %v", p.Name, key, err)
	}
}
