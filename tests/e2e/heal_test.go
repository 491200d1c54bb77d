package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"
	corev1 "k8s.io/api/core/v1"
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
	lane(t)
	ns := "heal"
	vc := activeCluster(t, ns, 3, 1)
	verifyValkey(t, vc, 3, 1)
	keys := writeAcknowledged(t, vc, 300)

	for _, role := range []v1.NodeRole{v1.NodeRoleReplica, v1.NodeRolePrimary} {
		t.Run("kill "+string(role), func(t *testing.T) {
			victim := podWithRole(t, vc, role)
			if err := cluster.Kubelet.KillPod(ns, victim); err != nil {
				t.Fatal(err)
			}
			healed := waitHealed(t, vc, victim, 6)
			verifyValkey(t, healed, 3, 1)
			readBack(t, healed, keys)
			// The dead node's record is gone and its replacement finished joining.
			for _, n := range waitNodesActive(t, vc, 6, nil) {
				if n.Name == victim {
					t.Fatalf("the ValkeyNode of the killed pod %s is still there", victim)
				}
			}
		})
	}
	if role := string(v1.NodeRolePrimary); !logged(t, "primary unhealthy but replicas exist, waiting for auto-failover", ns) {
		t.Errorf("no %q line after the %s was killed", "primary unhealthy but replicas exist, waiting for auto-failover", role)
	}
}

// podWithRole returns a pod whose node has role, from status.nodes.
func podWithRole(t testing.TB, vc *v1.ValkeyCluster, role v1.NodeRole) string {
	t.Helper()
	var cur v1.ValkeyCluster
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(vc), &cur); err != nil {
		t.Fatal(err)
	}
	for _, n := range cur.Status.Nodes {
		if n.Role == role {
			return n.Pod
		}
	}
	t.Fatalf("no %s in status.nodes %+v", role, cur.Status.Nodes)
	return ""
}

// waitHealed waits until the cluster is Ready again with `want` running pods, none of them
// victim, and no Failed pod left.
func waitHealed(t testing.TB, vc *v1.ValkeyCluster, victim string, want int) *v1.ValkeyCluster {
	t.Helper()
	deadline := time.Now().Add(formTimeout)
	for {
		var cur v1.ValkeyCluster
		var pods corev1.PodList
		err1 := k8s.Get(context.Background(), client.ObjectKeyFromObject(vc), &cur)
		err2 := k8s.List(context.Background(), &pods, client.InNamespace(vc.Namespace), client.MatchingLabels{v1.LabelCluster: vc.Name})
		if err1 == nil && err2 == nil {
			running, others := 0, 0
			for _, p := range pods.Items {
				if p.Name == victim {
					others++
				} else if p.Status.Phase == corev1.PodRunning {
					running++
				} else {
					others++
				}
			}
			if running == want && others == 0 && cur.Status.State == v1.StateActive && meta.IsStatusConditionTrue(cur.Status.Conditions, v1.ConditionReady) && int(cur.Status.ReadyNodes) == want {
				return &cur
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not healed after killing %s: state %s, message %q, %d pods", victim, cur.Status.State, cur.Status.Message, len(pods.Items))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// writeAcknowledged writes n keys through a cluster client and waits, per key, until a replica
// acknowledged it (WAIT 1), so the data survives the loss of its primary.
func writeAcknowledged(t *testing.T, vc *v1.ValkeyCluster, n int) map[string]string {
	t.Helper()
	ctx := context.Background()
	pods := clusterPods(t, vc)
	c, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: []string{addr(pods[0])}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	keys := map[string]string{}
	for i := range n {
		k, v := fmt.Sprintf("heal:{%d}:k", i), strconv.Itoa(i*7)
		// SET and WAIT go to the same node because they share the hash tag's slot.
		res := c.DoMulti(ctx, c.B().Set().Key(k).Value(v).Build(), c.B().Wait().Numreplicas(1).Timeout(5000).Build())
		for _, r := range res {
			if err := r.Error(); err != nil {
				t.Fatalf("SET/WAIT %s: %v", k, err)
			}
		}
		if acked, _ := res[1].AsInt64(); acked < 1 {
			t.Fatalf("WAIT for %s: %d replicas acknowledged", k, acked)
		}
		keys[k] = v
	}
	return keys
}

func readBack(t *testing.T, vc *v1.ValkeyCluster, keys map[string]string) {
	t.Helper()
	pods := clusterPods(t, vc)
	c, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: []string{addr(pods[len(pods)-1])}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for k, v := range keys {
		got, err := c.Do(context.Background(), c.B().Get().Key(k).Build()).ToString()
		if err != nil || got != v {
			t.Fatalf("GET %s: %q, %v (want %q)", k, got, err, v)
		}
	}
}

// logged reports whether the operator's log has a line with message for a cluster in ns.
func logged(t testing.TB, message, ns string) bool {
	t.Helper()
	for _, l := range parseLog(t, operator.Logs()) {
		if l.message() == message && strings.HasSuffix(l.ref(), "."+ns) {
			return true
		}
	}
	return false
}

// TestSoleNodeShardIsServedAgain: with no replicas, losing a primary loses its keys, but the
// operator must bring the shard back: a new pod, the dead node forgotten once the cluster
// agrees it failed, the shard's slots assigned to the new node, cluster_state:ok again.
func TestSoleNodeShardIsServedAgain(t *testing.T) {
	lane(t)
	ns := "sole"
	vc := activeCluster(t, ns, 2, 0)
	victim := podWithRole(t, vc, v1.NodeRolePrimary)
	if err := cluster.Kubelet.KillPod(ns, victim); err != nil {
		t.Fatal(err)
	}
	var shard int32 = -1
	for _, n := range vc.Status.Nodes {
		if n.Pod == victim {
			shard = n.Shard
		}
	}
	verifyValkey(t, waitHealed(t, vc, victim, 2), 2, 0)
	checkDataLost(t, vc, shard)
}

// checkDataLost checks that the operator said shard lost its data: a WARN line naming the shard
// and its slots, and the DataLost condition naming the shard; and that no other shard was said to.
func checkDataLost(t *testing.T, vc *v1.ValkeyCluster, shard int32) {
	t.Helper()
	var warned []string
	for _, l := range parseLog(t, operator.Logs()) {
		if l.message() == logging.MsgShardDataLost && strings.HasSuffix(l.ref(), "."+vc.Namespace) {
			if l.Level != "WARN" {
				t.Errorf("data loss at %s: %s", l.Level, l.raw)
			}
			warned = append(warned, fmt.Sprintf("shard %v slots %v", l.Fields[logging.FieldShard], l.Fields[logging.FieldSlots]))
			if fmt.Sprint(l.Fields[logging.FieldShard]) != fmt.Sprint(shard) {
				t.Errorf("data-loss WARN for shard %v, want only shard %d: %s", l.Fields[logging.FieldShard], shard, l.raw)
			}
		}
	}
	if len(warned) == 0 {
		t.Errorf("no %q WARN line for shard %d", logging.MsgShardDataLost, shard)
	}
	var cur v1.ValkeyCluster
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(vc), &cur); err != nil {
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
	lane(t)
	ns := "crashing"
	setupNamespace(t, ns)
	cfg := newConfig("crashing-config", "crashing-image")
	cfg.Spec.Valkey["maxmemory"] = "banana"
	create(t, newImage("crashing-image"), cfg)
	vc := newCluster(ns, "vc", "crashing-config", withShards(1), withReplicas(0))
	create(t, vc)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var cur v1.ValkeyCluster
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(vc), &cur); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(cur.Status.Message, "not creating more until the spec changes") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no stop after failing pods: state %s, message %q", cur.Status.State, cur.Status.Message)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// Two more passes: still exactly two pods.
	passMark(t, vc)(2)
	if n := len(podNames(t, vc)); n != 2 {
		t.Fatalf("%d pods, want the 2 that failed", n)
	}
	var fixed v1.ValkeyConfig
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: "crashing-config"}, &fixed); err != nil {
		t.Fatal(err)
	}
	fixed.Spec.Valkey["maxmemory"] = "100mb"
	if err := k8s.Update(context.Background(), &fixed); err != nil {
		t.Fatal(err)
	}
	got, err := harness.WaitState(context.Background(), k8s, client.ObjectKeyFromObject(vc), v1.StateActive, formTimeout)
	if err != nil {
		t.Fatal(err)
	}
	verifyValkey(t, got, 1, 0)
}

// TestQuorumLossTakeover: a 1x1 cluster whose primary dies has no majority to elect its
// replica; the operator issues CLUSTER FAILOVER TAKEOVER on it and says so, and every key the
// replica acknowledged is still there.
func TestQuorumLossTakeover(t *testing.T) {
	lane(t)
	ns := "takeover"
	vc := activeCluster(t, ns, 1, 1)
	verifyValkey(t, vc, 1, 1)
	keys := writeAcknowledged(t, vc, 100)
	victim := podWithRole(t, vc, v1.NodeRolePrimary)
	if err := cluster.Kubelet.KillPod(ns, victim); err != nil {
		t.Fatal(err)
	}
	healed := waitHealed(t, vc, victim, 2)
	verifyValkey(t, healed, 1, 1)
	readBack(t, healed, keys)
	if !logged(t, "no quorum \u2014 issued TAKEOVER on replica", ns) {
		t.Error("no TAKEOVER line in the log")
	}
}

// TestLostShardIsServedAgain: both nodes of one shard of a 3x1 cluster die at once. The shard's
// keys are gone with them, but the cluster must serve all 16384 slots again, and the other
// shards keep their keys.
func TestLostShardIsServedAgain(t *testing.T) {
	lane(t)
	ns := "lost-shard"
	vc := activeCluster(t, ns, 3, 1)
	verifyValkey(t, vc, 3, 1)
	var shard int32 = -1
	var victims []string
	for _, n := range vc.Status.Nodes {
		if shard == -1 || n.Shard == shard {
			shard = n.Shard
			victims = append(victims, n.Pod)
		}
	}
	for _, p := range victims {
		if err := cluster.Kubelet.KillPod(ns, p); err != nil {
			t.Fatal(err)
		}
	}
	healed := waitHealed(t, vc, victims[0], 6)
	verifyValkey(t, healed, 3, 1)
	checkDataLost(t, vc, shard)
}

// TestEveryPodKilledWhileInvalid: the break test. A formed 2x1 cluster holding keys is made
// Invalid (its ValkeyConfig reference no longer resolves), every pod is killed while it is
// Invalid, then the reference is fixed. The cluster was formed once, so it is healed in place,
// never bootstrapped again, and says it lost its data exactly as when every pod of an Active
// cluster dies: a WARN line naming each shard and its slots, and the DataLost condition.
func TestEveryPodKilledWhileInvalid(t *testing.T) {
	lane(t)
	// Observed before the fix: Invalid, then Bootstrapping, Forming and Active, Ready, every key
	// gone, and no WARN line and no DataLost condition said so.
	ns := "invalid-kill"
	const shards, replicas = 2, 1
	vc := activeCluster(t, ns, shards, replicas)
	waitReady(t, vc, shards, replicas, nil, formTimeout)
	keys := writeAcknowledged(t, vc, 100)
	formedAt := currentCluster(t, vc).Status.FormedAt
	if formedAt == nil {
		t.Fatal("an Active cluster without status.formedAt")
	}

	config := vc.Spec.ConfigRef
	missing := ns + "-missing"
	updateCluster(t, vc, func(c *v1.ValkeyCluster) { c.Spec.ConfigRef = missing })
	waitStateMessage(t, vc, v1.StateInvalid, `ValkeyConfig "`+missing+`" not found`)

	exclude := map[string]bool{}
	for _, p := range clusterPods(t, vc) {
		exclude[p.Name] = true
		if err := cluster.Kubelet.KillPod(ns, p.Name); err != nil {
			t.Fatal(err)
		}
	}
	if len(exclude) != shards*(replicas+1) {
		t.Fatalf("killed %d pods, want %d", len(exclude), shards*(replicas+1))
	}
	// Every pod is seen dead before the cause is fixed, so that the fix meets a cluster with no
	// copy of any shard left.
	deadline := time.Now().Add(time.Minute)
	for len(clusterPods(t, vc)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d pods still running a minute after they were killed", len(clusterPods(t, vc)))
		}
		time.Sleep(250 * time.Millisecond)
	}
	if cur := currentCluster(t, vc); cur.Status.State != v1.StateInvalid || !cur.Status.FormedAt.Equal(formedAt) {
		t.Fatalf("state %s, formedAt %v with every pod dead and the reference still missing, want Invalid and %v", cur.Status.State, cur.Status.FormedAt, formedAt)
	}

	logFrom := len(operator.Logs())
	start := time.Now()
	updateCluster(t, vc, func(c *v1.ValkeyCluster) { c.Spec.ConfigRef = config })
	ready := waitReady(t, vc, shards, replicas, exclude, healTimeout)
	t.Logf("cause fixed: Ready again %s after", ready.Sub(start).Round(time.Millisecond))
	healed := currentCluster(t, vc)
	verifyValkey(t, healed, shards, replicas)
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
	for _, l := range parseLog(t, operator.Logs()[logFrom:]) {
		if !strings.HasSuffix(l.ref(), "."+ns) {
			continue
		}
		switch m := l.message(); {
		case strings.HasPrefix(m, logging.MsgTransitioningPrefix) || m == logging.MsgClusterFormed:
			transitions = append(transitions, m)
			if m != logging.TransitioningTo(string(v1.StateActive)) {
				t.Errorf("a formed cluster coming back from Invalid: %s", l.raw)
			}
		case m == logging.MsgShardDataLost:
			if l.Level != "WARN" {
				t.Errorf("data loss at %s: %s", l.Level, l.raw)
			}
			if slots, _ := l.Fields[logging.FieldSlots].(string); slots == "" {
				t.Errorf("data-loss WARN line names no slots: %s", l.raw)
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
	pods := clusterPods(t, vc)
	c, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: []string{addr(pods[0])}, DisableCache: true})
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
	lane(t)
	const ns, shards, replicas, lost = "status-wiped", 2, 1, 1
	vc := activeCluster(t, ns, shards, replicas)
	waitReady(t, vc, shards, replicas, nil, formTimeout)
	keys := writeAcknowledged(t, vc, 200)

	operator.Kill(syscall.SIGKILL)
	cur := currentCluster(t, vc)
	exclude := map[string]bool{}
	for _, n := range cur.Status.Nodes {
		if n.Shard == lost {
			exclude[n.Pod] = true
		}
	}
	if len(exclude) != replicas+1 {
		t.Fatalf("status names %d pods of shard %d, want %d", len(exclude), lost, replicas+1)
	}
	cur.Status = v1.ValkeyClusterStatus{}
	if err := k8s.Status().Update(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
	for p := range exclude {
		if err := cluster.Kubelet.KillPod(ns, p); err != nil {
			t.Fatal(err)
		}
	}
	logFrom := len(operator.Logs())
	var err error
	if operator, err = harness.StartOperator(binary, cluster, workDir, "operator", "RUST_LOG=info"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitReady(t, vc, shards, replicas, exclude, healTimeout)
	t.Logf("Ready %s after the operator came back", time.Since(start).Round(100*time.Millisecond))
	healed := currentCluster(t, vc)
	verifyValkey(t, healed, shards, replicas)
	// Shard 1's keys really are gone (no copy survived), shard 0's are all there.
	kept := keysKept(t, healed, keys)
	t.Logf("keys kept %d of %d", kept, len(keys))
	if kept == 0 || kept == len(keys) {
		t.Fatalf("%d of %d keys kept: want shard 0's kept and shard 1's gone", kept, len(keys))
	}
	var transitions []string
	for _, l := range parseLog(t, operator.Logs()[logFrom:]) {
		if strings.HasSuffix(l.ref(), "."+ns) && strings.HasPrefix(l.message(), logging.MsgTransitioningPrefix) {
			transitions = append(transitions, l.message())
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
