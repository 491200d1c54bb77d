package heal

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/controllers"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/tests/harness"
)

// TestActiveHealsFailedPods kills a replica, then a primary, of an Active 3x1 cluster: each
// time the operator replaces the failed node with a new one, joins it to its shard, forgets the
// dead node and deletes its ValkeyNode and Failed pod; keys acknowledged by a replica before the
// primary died are all still readable afterwards, and every ValkeyNode ends Active.
func TestActiveHealsFailedPods(t *testing.T) {
	ns := "heal"
	vc := harness.ActiveCluster(t, ns, 3, 1)
	harness.VerifyValkey(t, vc, 3, 1)
	keys := harness.WriteAcknowledged(t, vc, 300)

	for _, role := range []v1.NodeRole{v1.NodeRoleReplica, v1.NodeRolePrimary} {
		t.Run("kill "+string(role), func(t *testing.T) {
			victim := harness.PodWithRole(t, vc, role)
			if err := harness.Cluster.Kubelet.KillPod(ns, victim); err != nil {
				t.Fatal(err)
			}
			healed := harness.WaitHealed(t, vc, victim, 6)
			harness.VerifyValkey(t, healed, 3, 1)
			harness.ReadBack(t, healed, keys)
			// The dead node's record is gone and its replacement finished joining.
			for _, n := range harness.WaitNodesActive(t, vc, 6, nil) {
				if n.Name == victim {
					t.Fatalf("the ValkeyNode of the killed pod %s is still there", victim)
				}
			}
		})
	}
	if role := string(v1.NodeRolePrimary); !harness.Logged(t, "primary unhealthy but replicas exist, waiting for auto-failover", ns) {
		t.Errorf("no %q line after the %s was killed", "primary unhealthy but replicas exist, waiting for auto-failover", role)
	}
}

// TestSoleNodeShardIsServedAgain: with no replicas, losing a primary loses its keys, but the
// operator must bring the shard back: a new pod, the dead node forgotten once the cluster
// agrees it failed, the shard's slots assigned to the new node, cluster_state:ok again.
func TestSoleNodeShardIsServedAgain(t *testing.T) {
	ns := "sole"
	vc := harness.ActiveCluster(t, ns, 2, 0)
	victim := harness.PodWithRole(t, vc, v1.NodeRolePrimary)
	if err := harness.Cluster.Kubelet.KillPod(ns, victim); err != nil {
		t.Fatal(err)
	}
	var shard int32 = -1
	for _, n := range vc.Status.NodeDetails {
		if n.Pod == victim {
			shard = n.Shard
		}
	}
	harness.VerifyValkey(t, harness.WaitHealed(t, vc, victim, 2), 2, 0)
	checkDataLost(t, vc, shard)
}

// checkDataLost checks that the operator said shard lost its data: a WARN line naming the shard
// and its slots, and the DataLost condition naming the shard; and that no other shard was said to.
func checkDataLost(t *testing.T, vc *v1.ValkeyCluster, shard int32) {
	t.Helper()
	var warned []string
	for _, l := range harness.ParseLog(t, harness.Op.Logs()) {
		if l.Message() == logging.MsgShardDataLost && strings.HasSuffix(l.Ref(), "."+vc.Namespace) {
			if l.Level != "WARN" {
				t.Errorf("data loss at %s: %s", l.Level, l.Raw)
			}
			warned = append(warned, fmt.Sprintf("shard %v slots %v", l.Fields[logging.FieldShard], l.Fields[logging.FieldSlots]))
			if fmt.Sprint(l.Fields[logging.FieldShard]) != fmt.Sprint(shard) {
				t.Errorf("data-loss WARN for shard %v, want only shard %d: %s", l.Fields[logging.FieldShard], shard, l.Raw)
			}
		}
	}
	if len(warned) == 0 {
		t.Errorf("no %q WARN line for shard %d", logging.MsgShardDataLost, shard)
	}
	var cur v1.ValkeyCluster
	if err := harness.K8s.Get(context.Background(), client.ObjectKeyFromObject(vc), &cur); err != nil {
		t.Fatal(err)
	}
	c := meta.FindStatusCondition(cur.Status.Conditions, v1.ConditionDataLost)
	if c == nil || c.Status != "True" || !strings.Contains(c.Message, fmt.Sprintf("shard %d ", shard)) {
		t.Errorf("DataLost condition %+v does not name shard %d", c, shard)
	} else {
		t.Logf("WARN %v; %s: %s", warned, c.Type, c.Message)
	}
}

// TestPodsFailingOnStartAreNotReplacedWithoutEnd: a directive valkey-server rejects makes
// every pod exit at start; the operator stops after MaxFailedPerShard pods per shard, says so
// in status.message, and forms the cluster once the config is fixed.
func TestPodsFailingOnStartAreNotReplacedWithoutEnd(t *testing.T) {
	ns := "crashing"
	harness.SetupNamespace(t, ns)
	cfg := harness.NewConfig("crashing-config", "crashing-image")
	// A value admission takes (loglevel is no live setting, whose values it checks) and
	// valkey-server refuses at start.
	cfg.Spec.Valkey["loglevel"] = "banana"
	harness.Create(t, harness.NewImage("crashing-image"), cfg)
	vc := harness.NewCluster(ns, "vc", "crashing-config", harness.WithShards(1), harness.WithReplicas(0))
	harness.Create(t, vc)
	harness.WaitFor(t, "a stop after failing pods", 2*time.Minute, func() string {
		cur := harness.CurrentCluster(t, vc)
		if strings.Contains(cur.Status.Message, "not creating more until the spec changes") {
			return ""
		}
		return fmt.Sprintf("state %s, message %q", cur.Status.State, cur.Status.Message)
	})
	// Two more passes: still exactly two pods.
	harness.PassMark(t, vc)(2)
	if n := len(harness.PodNames(t, vc)); n != 2 {
		t.Fatalf("%d pods, want the 2 that failed", n)
	}
	var fixed v1.ValkeyConfig
	if err := harness.K8s.Get(context.Background(), client.ObjectKey{Name: "crashing-config"}, &fixed); err != nil {
		t.Fatal(err)
	}
	fixed.Spec.Valkey["loglevel"] = "notice"
	if err := harness.K8s.Update(context.Background(), &fixed); err != nil {
		t.Fatal(err)
	}
	got, err := harness.WaitState(context.Background(), harness.K8s, client.ObjectKeyFromObject(vc), v1.StateActive, harness.FormTimeout)
	if err != nil {
		t.Fatal(err)
	}
	harness.VerifyValkey(t, got, 1, 0)
}

// TestQuorumLossTakeover: a 1x1 cluster whose primary dies has no majority to elect its
// replica; the operator issues CLUSTER FAILOVER TAKEOVER on it and says so, and every key the
// replica acknowledged is still there.
func TestQuorumLossTakeover(t *testing.T) {
	ns := "takeover"
	vc := harness.ActiveCluster(t, ns, 1, 1)
	harness.VerifyValkey(t, vc, 1, 1)
	keys := harness.WriteAcknowledged(t, vc, 100)
	victim := harness.PodWithRole(t, vc, v1.NodeRolePrimary)
	if err := harness.Cluster.Kubelet.KillPod(ns, victim); err != nil {
		t.Fatal(err)
	}
	healed := harness.WaitHealed(t, vc, victim, 2)
	harness.VerifyValkey(t, healed, 1, 1)
	harness.ReadBack(t, healed, keys)
	if !harness.Logged(t, "no quorum \u2014 issued TAKEOVER on replica", ns) {
		t.Error("no TAKEOVER line in the log")
	}
}

// TestLostShardIsServedAgain: both nodes of one shard of a 3x1 cluster die at once. The shard's
// keys are gone with them, but the cluster must serve all 16384 slots again, and the other
// shards keep their keys.
func TestLostShardIsServedAgain(t *testing.T) {
	ns := "lost-shard"
	vc := harness.ActiveCluster(t, ns, 3, 1)
	harness.VerifyValkey(t, vc, 3, 1)
	var shard int32 = -1
	var victims []string
	for _, n := range vc.Status.NodeDetails {
		if shard == -1 || n.Shard == shard {
			shard = n.Shard
			victims = append(victims, n.Pod)
		}
	}
	for _, p := range victims {
		if err := harness.Cluster.Kubelet.KillPod(ns, p); err != nil {
			t.Fatal(err)
		}
	}
	healed := harness.WaitHealed(t, vc, victims[0], 6)
	harness.VerifyValkey(t, healed, 3, 1)
	checkDataLost(t, vc, shard)
}

// TestEveryPodKilledWhileInvalid: the break test. A formed 2x1 cluster holding keys is made
// Invalid (its ValkeyConfig reference no longer resolves), every pod is killed while it is
// Invalid, then the reference is fixed. The cluster was formed once, so it is healed in place,
// never bootstrapped again, and says it lost its data exactly as when every pod of an Active
// cluster dies: a WARN line naming each shard and its slots, and the DataLost condition.
func TestEveryPodKilledWhileInvalid(t *testing.T) {
	// Observed before the fix: Invalid, then Bootstrapping, Forming and Active, Ready, every key
	// gone, and no WARN line and no DataLost condition said so.
	ns := "invalid-kill"
	const shards, replicas = 2, 1
	vc := harness.ActiveCluster(t, ns, shards, replicas)
	harness.WaitReady(t, vc, shards, replicas, nil, harness.FormTimeout)
	keys := harness.WriteAcknowledged(t, vc, 100)
	formedAt := harness.CurrentCluster(t, vc).Status.FormedAt
	if formedAt == nil {
		t.Fatal("an Active cluster without status.formedAt")
	}

	config := vc.Spec.ConfigRef
	missing := ns + "-missing"
	harness.EditCluster(t, vc, func(c *v1.ValkeyCluster) { c.Spec.ConfigRef = missing })
	harness.WaitStateMessage(t, vc, v1.StateInvalid, `ValkeyConfig "`+missing+`" not found`)

	exclude := map[string]bool{}
	for _, p := range harness.Pods(t, vc) {
		exclude[p.Name] = true
		if err := harness.Cluster.Kubelet.KillPod(ns, p.Name); err != nil {
			t.Fatal(err)
		}
	}
	if len(exclude) != shards*(replicas+1) {
		t.Fatalf("killed %d pods, want %d", len(exclude), shards*(replicas+1))
	}
	// Every pod is seen dead before the cause is fixed, so that the fix meets a cluster with no
	// copy of any shard left.
	harness.WaitFor(t, "every killed pod seen dead", time.Minute, func() string {
		if n := len(harness.Pods(t, vc)); n > 0 {
			return fmt.Sprintf("%d pods still running", n)
		}
		return ""
	})
	if cur := harness.CurrentCluster(t, vc); cur.Status.State != v1.StateInvalid || !cur.Status.FormedAt.Equal(formedAt) {
		t.Fatalf("state %s, formedAt %v with every pod dead and the reference still missing, want Invalid and %v", cur.Status.State, cur.Status.FormedAt, formedAt)
	}

	logFrom := len(harness.Op.Logs())
	start := time.Now()
	harness.EditCluster(t, vc, func(c *v1.ValkeyCluster) { c.Spec.ConfigRef = config })
	ready := harness.WaitReady(t, vc, shards, replicas, exclude, harness.HealTimeout)
	t.Logf("cause fixed: Ready again %s after", ready.Sub(start).Round(time.Millisecond))
	healed := harness.CurrentCluster(t, vc)
	harness.VerifyValkey(t, healed, shards, replicas)
	if healed.Status.State != v1.StateActive || healed.Status.Message != "" {
		t.Errorf("healed: state %s, message %q; want Active and no message", healed.Status.State, healed.Status.Message)
	}
	if !healed.Status.FormedAt.Equal(formedAt) {
		t.Errorf("status.formedAt %v after healing, want it kept: %v", healed.Status.FormedAt, formedAt)
	}

	// The keys really are gone: otherwise the test proves nothing about saying so.
	if kept := keysKept(t, healed, keys); kept > 0 {
		t.Fatalf("%d of %d keys survived the loss of every pod: was the data really gone?", kept, len(keys))
	}

	// Healed in place: Invalid straight back to Active, no second bootstrap over the formed
	// cluster.
	warned := map[string]bool{}
	var transitions []string
	for _, l := range harness.ParseLog(t, harness.Op.Logs()[logFrom:]) {
		if !strings.HasSuffix(l.Ref(), "."+ns) {
			continue
		}
		switch m := l.Message(); {
		case strings.HasPrefix(m, logging.MsgTransitioningPrefix) || m == logging.MsgClusterFormed:
			transitions = append(transitions, m)
			if m != logging.TransitioningTo(string(v1.StateActive)) {
				t.Errorf("a formed cluster coming back from Invalid: %s", l.Raw)
			}
		case m == logging.MsgShardDataLost:
			if l.Level != "WARN" {
				t.Errorf("data loss at %s: %s", l.Level, l.Raw)
			}
			if slots, _ := l.Fields[logging.FieldSlots].(string); slots == "" {
				t.Errorf("data-loss WARN line names no slots: %s", l.Raw)
			}
			warned[fmt.Sprint(l.Fields[logging.FieldShard])] = true
		}
	}
	if len(transitions) != 1 {
		t.Errorf("transitions after the fix: %q, want one to Active", transitions)
	}
	for shard := range shards {
		if !warned[strconv.Itoa(shard)] {
			t.Errorf("no %q WARN line for shard %d (lines named %v)", logging.MsgShardDataLost, shard, warned)
		}
	}
	c := meta.FindStatusCondition(healed.Status.Conditions, v1.ConditionDataLost)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != controllers.ReasonShardDataLost || !strings.Contains(c.Message, "shard") {
		t.Errorf("DataLost condition %+v, want True with reason %s naming the shards", c, controllers.ReasonShardDataLost)
	} else {
		t.Logf("%s: %s", c.Type, c.Message)
	}
}

// keysKept counts the keys of keys still readable, with their value, through a cluster client.
func keysKept(t *testing.T, vc *v1.ValkeyCluster, keys map[string]string) int {
	t.Helper()
	pods := harness.Pods(t, vc)
	c, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: []string{harness.PodAddr(pods[0])}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	kept := 0
	for k, v := range keys {
		got, err := c.Do(context.Background(), c.B().Get().Key(k).Build()).ToString()
		switch {
		case valkeygo.IsValkeyNil(err):
		case err != nil:
			t.Fatalf("GET %s: %v", k, err)
		case got == v:
			kept++
		}
	}
	return kept
}

// TestStatusWipedShardLost: a formed 2x1 cluster holding keys; with the operator stopped, its
// status is emptied through the status subresource (as `kubectl edit --subresource=status` or a
// restore without status would), and both pods of shard 1 die. The operator comes back to a
// cluster with no state and no status.formedAt, but its ValkeyNodes' spec still records that
// every node completed its join: the cluster is healed, never bootstrapped again in silence, and
// shard 1's loss is said (the WARN line, DataLost). Observed before the fix (break test): the
// cluster walked Bootstrapping -> Forming, 100 of 200 keys gone with no DataLost and no WARN,
// and in 1 run of 2 it stayed in Forming (one node kept the dead nodes at `fail?`).
func TestStatusWipedShardLost(t *testing.T) {
	const ns, shards, replicas, lost = "status-wiped", 2, 1, 1
	vc := harness.ActiveCluster(t, ns, shards, replicas)
	harness.WaitReady(t, vc, shards, replicas, nil, harness.FormTimeout)
	keys := harness.WriteAcknowledged(t, vc, 200)

	harness.Op.Kill(syscall.SIGKILL)
	cur := harness.CurrentCluster(t, vc)
	exclude := map[string]bool{}
	for _, n := range cur.Status.NodeDetails {
		if n.Shard == lost {
			exclude[n.Pod] = true
		}
	}
	if len(exclude) != replicas+1 {
		t.Fatalf("status names %d pods of shard %d, want %d", len(exclude), lost, replicas+1)
	}
	cur.Status = v1.ValkeyClusterStatus{}
	if err := harness.K8s.Status().Update(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
	for p := range exclude {
		if err := harness.Cluster.Kubelet.KillPod(ns, p); err != nil {
			t.Fatal(err)
		}
	}
	logFrom := len(harness.Op.Logs())
	var err error
	if harness.Op, err = harness.StartOperator(harness.OperatorBinary, harness.Cluster, harness.WorkDir, "operator", "RUST_LOG=info"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	harness.WaitReady(t, vc, shards, replicas, exclude, harness.HealTimeout)
	t.Logf("Ready %s after the operator came back", time.Since(start).Round(100*time.Millisecond))
	healed := harness.CurrentCluster(t, vc)
	harness.VerifyValkey(t, healed, shards, replicas)
	// Shard 1's keys really are gone (no copy survived), shard 0's are all there.
	kept := keysKept(t, healed, keys)
	t.Logf("keys kept %d of %d", kept, len(keys))
	if kept == 0 || kept == len(keys) {
		t.Fatalf("%d of %d keys kept: want shard 0's kept and shard 1's gone", kept, len(keys))
	}
	var transitions []string
	for _, l := range harness.ParseLog(t, harness.Op.Logs()[logFrom:]) {
		if strings.HasSuffix(l.Ref(), "."+ns) && strings.HasPrefix(l.Message(), logging.MsgTransitioningPrefix) {
			transitions = append(transitions, l.Message())
		}
	}
	t.Logf("transitions: %q", transitions)
	for _, m := range transitions {
		if m == logging.TransitioningTo(string(v1.StateForming)) {
			t.Errorf("a formed cluster whose status was wiped was formed again: %q", transitions)
		}
	}
	checkDataLost(t, vc, lost)
	if healed.Status.FormedAt == nil {
		t.Errorf("healed without status.formedAt")
	}
}
