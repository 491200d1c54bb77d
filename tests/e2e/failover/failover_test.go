package failover

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/tests/harness"
	"github.com/gomomento/valkey-operator/tests/localcluster"
	"github.com/gomomento/valkey-operator/valkey"
)

// TestPrimaryKilledUnderLoad: a primary's process is SIGKILLed while 16 writers write. The
// shard serves again, the cluster is Ready with a synced replacement, and no key a replica
// acknowledged (WAIT 1) is lost.
func TestPrimaryKilledUnderLoad(t *testing.T) {
	primaryLostUnderLoad(t, "kill-load", false, func(ns, pod string) error { return harness.Cluster.Kubelet.KillPod(ns, pod) })
}

// TestPrimaryPodDeletedUnderLoad: the same with `kubectl delete pod` of a primary, a planned
// loss (a drain): the operator may hand the slots over before the process stops.
func TestPrimaryPodDeletedUnderLoad(t *testing.T) {
	primaryLostUnderLoad(t, "delete-load", true, func(ns, pod string) error {
		return harness.K8s.Delete(context.Background(), &corev1.Pod{ObjectMeta: harness.ObjectMetaNS(ns, pod)})
	})
}

// TestPrimaryPodDeletedWithOperatorDown: a primary's pod is deleted while the operator is down
// (SIGKILLed just before; the one started at once waits out its lease, 15 s, before its first
// pass), so nobody issues the graceful failover a deletion gets. The Valkey 8 pod's preStop hook
// hands over by itself once its delay is over: no write is refused, and the replica's own log
// says it was a manual (graceful) failover, not Valkey's election after the primary stopped.
// Before the hook could hand over, the primary held to its limit, exited, and its slots refused
// writes for 8.7 s.
func TestPrimaryPodDeletedWithOperatorDown(t *testing.T) {
	const ns = "delete-nooperator"
	var victim string
	primaryLostUnderLoad(t, ns, true, func(ns, pod string) error {
		victim = pod
		harness.Op.Kill(syscall.SIGKILL)
		err := harness.K8s.Delete(context.Background(), &corev1.Pod{ObjectMeta: harness.ObjectMetaNS(ns, pod)})
		harness.RestartOperator(t)
		return err
	})
	var manual []string
	for _, p := range harness.Pods(t, &v1.ValkeyCluster{ObjectMeta: harness.ObjectMetaNS(ns, "vc")}) {
		path, err := harness.Cluster.Kubelet.LogPath(ns, p.Name, "valkey")
		if err != nil {
			continue
		}
		b, _ := os.ReadFile(path)
		if bytes.Contains(b, []byte("Manual failover user request accepted")) {
			manual = append(manual, p.Name)
		}
	}
	if len(manual) == 0 {
		t.Errorf("no replica of %s logged a manual failover: its slots were not handed over before it stopped", victim)
	}
}

// primaryLostUnderLoad loses a primary of a Ready 3x1 cluster through lose while the writer
// writes. A planned loss (the pod deleted) must, besides, refuse no write: the operator hands
// the slots over before the process stops.
func primaryLostUnderLoad(t *testing.T, ns string, planned bool, lose func(ns, pod string) error) {
	vc := harness.ActiveCluster(t, ns, 3, 1)
	harness.WaitReady(t, vc, 3, 1, nil, harness.FormTimeout)
	before := valkeyNodeNames(t, ns)
	watch := watchValkeyNodes(t, ns)
	w, opts := harness.StartClusterWriter(t, vc)
	victim := harness.PodWithRole(t, vc, v1.NodeRolePrimary)
	start := time.Now()
	if err := lose(ns, victim); err != nil {
		t.Fatal(err)
	}
	ready := harness.WaitReady(t, vc, 3, 1, map[string]bool{victim: true}, harness.HealTimeout)
	if err := w.WaitAcked(20, time.Minute); err != nil {
		t.Error(err)
	}
	r := harness.FinishWriter(t, w, vc, opts)
	longest, slot := r.LongestRefusal()
	t.Logf("lost primary %s: longest refusal %s (slot %d); Ready again %s after the fault",
		victim, longest.Round(time.Millisecond), slot, ready.Sub(start).Round(time.Millisecond))
	harness.VerifyValkey(t, harness.CurrentCluster(t, vc), 3, 1)
	if planned {
		// Its own subtest, so the rest of the evidence stands while graceful handover is missing.
		t.Run("a planned loss refuses no write", func(t *testing.T) {
			// Observed before the implementation: the deleted primary's slots refused writes
			// for 9.2 s (Valkey's own failover), every other slot for about 1 s (CLUSTERDOWN).
			// With the graceful handover: 0 refused in one run of two; in the other, one write
			// on each of the shard's slots failed with EOF (~140 ms) at the instant the old
			// primary was demoted (Valkey 8.0.1 disconnects a client blocked in WAIT when its
			// primary turns replica, and the client's pipelined SETs on that connection fail).
			// That connection close is Valkey's, not a refusal: it is counted apart (a write that
			// failed with EOF and succeeded on the client's next try within a second). Any other
			// error (CLUSTERDOWN, MOVED loops, TRYAGAIN) fails the test; writes that only went
			// unanswered within the writer's 1 s are latency, logged (latencyOnly).
			harness.CheckNoRefusal(t, r)
		})
	}
	t.Run("replacement ValkeyNode went Joining then Active", func(t *testing.T) {
		lifecycles := watch()
		if lifecycles == nil {
			t.Skip("needs ValkeyNode: issue 8")
		}
		for name, seen := range lifecycles {
			if before[name] {
				continue
			}
			if i := slices.Index(seen, "Joining"); i >= 0 && slices.Contains(seen[i:], "Active") {
				return
			}
		}
		t.Errorf("no new ValkeyNode went Joining then Active: %v", lifecycles)
	})
}

// TestTwoPrimariesKilled: two of three primaries killed at once leave no majority to elect
// their replicas; the operator takes over, and the cluster is Ready again.
func TestTwoPrimariesKilled(t *testing.T) {
	ns := "kill-two"
	vc := harness.ActiveCluster(t, ns, 3, 1)
	harness.WaitReady(t, vc, 3, 1, nil, harness.FormTimeout)
	w, opts := harness.StartClusterWriter(t, vc)
	victims := harness.Primaries(t, vc)[:2]
	start := time.Now()
	for _, p := range victims {
		if err := harness.Cluster.Kubelet.KillPod(ns, p.Pod); err != nil {
			t.Fatal(err)
		}
	}
	ready := harness.WaitReady(t, vc, 3, 1, map[string]bool{victims[0].Pod: true, victims[1].Pod: true}, harness.HealTimeout)
	if err := w.WaitAcked(20, time.Minute); err != nil {
		t.Error(err)
	}
	r := harness.FinishWriter(t, w, vc, opts)
	longest, slot := r.LongestRefusal()
	t.Logf("killed %s and %s: longest refusal %s (slot %d); Ready again %s after the fault",
		victims[0].Pod, victims[1].Pod, longest.Round(time.Millisecond), slot, ready.Sub(start).Round(time.Millisecond))
	harness.VerifyValkey(t, harness.CurrentCluster(t, vc), 3, 1)
	if !harness.Logged(t, harness.TakeoverMsg, ns) {
		t.Errorf("no %q line in the operator log", harness.TakeoverMsg)
	}
}

// TestTwoPrimaryNodesStopped: the Kubernetes nodes of two of three primaries lose power. Their
// pods stay Running in the API (nobody reports otherwise) but do not answer. Valkey cannot
// elect the replicas without a majority of primaries, so the operator must take over; the
// cluster ends Ready (on the nodes that are up) before Kubernetes evicts anything. The same over
// TLS, where the operator reaches every node by its DNS name: a stopped node's name still
// resolves (its pod is Running in the API), so every dial to it must time out, not hang, for the
// TAKEOVER to come (chaos seed 60606, TLS cluster: a node stop without a TAKEOVER for 18.6 s).
func TestTwoPrimaryNodesStopped(t *testing.T) {
	// Before the planner chain: no TAKEOVER; after 4 minutes still not Ready, "waiting for node
	// <pod on a stopped node> to answer" (the one planner returned early).
	t.Run("plaintext", func(t *testing.T) {
		ns := "stop-two"
		vc := harness.ActiveCluster(t, ns, 3, 1)
		twoPrimaryNodesStopped(t, vc)
	})
	t.Run("tls", func(t *testing.T) {
		vc, _ := harness.TLSCluster(t, "stop-two-tls", 3, 1)
		twoPrimaryNodesStopped(t, vc)
	})
}

func twoPrimaryNodesStopped(t *testing.T, vc *v1.ValkeyCluster) {
	ns := vc.Namespace
	harness.WaitReady(t, vc, 3, 1, nil, harness.FormTimeout)
	victims, stop := placeForNodeLoss(t, vc)
	w, opts := harness.StartClusterWriter(t, vc)
	start := time.Now()
	exclude := map[string]bool{}
	for _, node := range stop {
		for _, p := range harness.Pods(t, vc) {
			if p.Spec.NodeName == node {
				exclude[p.Name] = true
			}
		}
		if err := harness.Cluster.Kubelet.StopNode(node); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, node := range stop {
			if err := harness.Cluster.Kubelet.StartNode(node); err != nil {
				t.Errorf("restart node %s: %v", node, err)
			}
		}
	})
	t.Logf("stopped nodes %v (primaries %v; all pods there: %v)", stop, victims, exclude)
	ready := harness.WaitReady(t, vc, 3, 1, exclude, harness.HealTimeout)
	for p := range exclude {
		var pod corev1.Pod
		if err := harness.K8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: p}, &pod); err == nil && pod.DeletionTimestamp == nil && pod.Status.Phase != corev1.PodRunning {
			t.Logf("pod %s on a stopped node is %s", p, pod.Status.Phase)
		}
	}
	if err := w.WaitAcked(20, time.Minute); err != nil {
		t.Error(err)
	}
	r := harness.FinishWriter(t, w, vc, opts)
	longest, slot := r.LongestRefusal()
	takeover := harness.LoggedAt(t, harness.TakeoverMsg, ns)
	t.Logf("longest refusal %s (slot %d); TAKEOVER %s and Ready again %s after the nodes stopped", longest.Round(time.Millisecond), slot,
		takeover.Sub(start).Round(time.Millisecond), ready.Sub(start).Round(time.Millisecond))
	if takeover.IsZero() {
		t.Errorf("no %q line in the operator log", harness.TakeoverMsg)
	}
}

// placeForNodeLoss arranges a Ready 3x1 cluster so that stopping two Kubernetes nodes loses
// exactly two primaries and no shard entirely, and returns those two primaries and nodes.
// The scheduler's layout is whatever it is, so: pick two primaries on two different nodes X
// and Y (promoting a replica first if every primary shares a node), cordon X and Y, then
// until the layout fits, kill a replica of those two shards found on X or Y (its replacement
// lands elsewhere), and move the third shard's primary off X and Y (a graceful CLUSTER
// FAILOVER to its replica, after moving that replica off X and Y if needed).
func placeForNodeLoss(t *testing.T, vc *v1.ValkeyCluster) (victims []string, nodes []string) {
	t.Helper()
	var l clusterLayout
	var vi, vj int32
	for attempt := 0; ; attempt++ {
		l = layoutOf(t, vc)
		found := false
		for _, a := range l.shards {
			for _, b := range l.shards {
				if !found && a < b && l.node[l.primary[a]] != l.node[l.primary[b]] {
					vi, vj, found = a, b, true
				}
			}
		}
		if found {
			break
		}
		if attempt > 0 || len(l.replicas[l.shards[0]]) == 0 {
			t.Fatalf("no two primaries on different nodes: %s", l)
		}
		// Every primary on one node: promote shard 0's replica (on another node, by spread).
		promote(t, vc, l.replicas[l.shards[0]][0])
	}
	victims = []string{l.primary[vi], l.primary[vj]}
	nodes = []string{l.node[victims[0]], l.node[victims[1]]}
	for _, node := range nodes {
		harness.Cordon(t, node, true)
		t.Cleanup(func() { harness.Cordon(t, node, false) })
	}
	onVictimNode := func(pod string) bool { return slices.Contains(nodes, l.node[pod]) }
	for range 4 {
		l = layoutOf(t, vc)
		if l.primary[vi] != victims[0] || l.primary[vj] != victims[1] {
			t.Fatalf("the chosen primaries %v moved: %s", victims, l)
		}
		var kill []string
		for _, s := range []int32{vi, vj} {
			for _, r := range l.replicas[s] {
				if onVictimNode(r) {
					kill = append(kill, r)
				}
			}
		}
		var third int32
		for _, s := range l.shards {
			if s != vi && s != vj {
				third = s
			}
		}
		move := ""
		if onVictimNode(l.primary[third]) {
			for _, r := range l.replicas[third] {
				if onVictimNode(r) {
					kill = append(kill, r)
				} else if move == "" {
					move = r
				}
			}
		}
		if len(kill) == 0 && move == "" {
			t.Logf("layout for the node loss: %s", l)
			return victims, nodes
		}
		exclude := map[string]bool{}
		for _, p := range kill {
			exclude[p] = true
			if err := harness.Cluster.Kubelet.KillPod(vc.Namespace, p); err != nil {
				t.Fatal(err)
			}
		}
		if len(kill) > 0 {
			harness.WaitReady(t, vc, 3, 1, exclude, harness.HealTimeout)
		} else {
			promote(t, vc, move)
		}
	}
	t.Fatalf("could not arrange the layout: %s", layoutOf(t, vc))
	return nil, nil
}

// clusterLayout is where a cluster's pods run and what they are, from status.nodeDetails.
type clusterLayout struct {
	shards   []int32
	primary  map[int32]string   // shard -> primary pod
	replicas map[int32][]string // shard -> replica pods
	node     map[string]string  // pod -> Kubernetes node
}

func (l clusterLayout) String() string {
	var b strings.Builder
	for _, s := range l.shards {
		fmt.Fprintf(&b, "shard %d: primary %s@%s", s, l.primary[s], l.node[l.primary[s]])
		for _, r := range l.replicas[s] {
			fmt.Fprintf(&b, ", replica %s@%s", r, l.node[r])
		}
		b.WriteString("; ")
	}
	return b.String()
}

func layoutOf(t *testing.T, vc *v1.ValkeyCluster) clusterLayout {
	t.Helper()
	l := clusterLayout{primary: map[int32]string{}, replicas: map[int32][]string{}, node: map[string]string{}}
	for _, p := range harness.Pods(t, vc) {
		l.node[p.Name] = p.Spec.NodeName
	}
	for _, n := range harness.CurrentCluster(t, vc).Status.NodeDetails {
		if _, ok := l.node[n.Pod]; !ok {
			continue
		}
		if !slices.Contains(l.shards, n.Shard) {
			l.shards = append(l.shards, n.Shard)
		}
		if n.Role == v1.NodeRolePrimary {
			l.primary[n.Shard] = n.Pod
		} else {
			l.replicas[n.Shard] = append(l.replicas[n.Shard], n.Pod)
		}
	}
	slices.Sort(l.shards)
	if len(l.shards) != 3 || len(l.primary) != 3 {
		t.Fatalf("not a 3-shard layout: %s", l)
	}
	return l
}

// promote makes the replica in pod its shard's primary with a graceful CLUSTER FAILOVER (no
// write lost) and waits until status and Valkey agree.
func promote(t *testing.T, vc *v1.ValkeyCluster, pod string) {
	t.Helper()
	for _, p := range harness.Pods(t, vc) {
		if p.Name != pod {
			continue
		}
		c, err := valkey.NewClient(harness.PodAddr(p), harness.Creds(t, vc))
		if err != nil {
			t.Fatal(err)
		}
		err = c.Failover(context.Background(), valkey.FailoverCoordinated)
		c.Close()
		if err != nil {
			t.Fatalf("CLUSTER FAILOVER on %s: %v", pod, err)
		}
		waitPrimaries(t, vc, []v1.NodeStatus{{Pod: pod}})
		harness.WaitReady(t, vc, 3, 1, nil, harness.FormTimeout)
		t.Logf("promoted %s on %s", pod, p.Spec.NodeName)
		return
	}
	t.Fatalf("no running pod %s", pod)
}

// waitPrimaries waits until each pod of want is a primary in status.nodeDetails.
func waitPrimaries(t *testing.T, vc *v1.ValkeyCluster, want []v1.NodeStatus) {
	t.Helper()
	harness.WaitFor(t, "primaries moved", time.Minute, func() string {
		cur := harness.CurrentCluster(t, vc)
		ok := 0
		for _, n := range cur.Status.NodeDetails {
			for _, w := range want {
				if n.Pod == w.Pod && n.Role == v1.NodeRolePrimary {
					ok++
				}
			}
		}
		if ok == len(want) {
			return ""
		}
		return fmt.Sprintf("status.nodeDetails %+v", cur.Status.NodeDetails)
	})
}

// TestEveryPodKilled: every pod of a 3x1 cluster killed at once. The cluster forms again,
// empty, and says so: a WARN line and a condition name the shards whose data was lost.
func TestEveryPodKilled(t *testing.T) {
	// Observed before the implementation: re-formed Ready 7.2 s after, every key gone, and no
	// WARN line and no condition said so.
	ns := "kill-all"
	vc := harness.ActiveCluster(t, ns, 3, 1)
	harness.WaitReady(t, vc, 3, 1, nil, harness.FormTimeout)
	w, opts := harness.StartClusterWriter(t, vc)
	if err := w.WaitAcked(50, time.Minute); err != nil {
		t.Fatal(err)
	}
	w.Stop()
	exclude := map[string]bool{}
	start := time.Now()
	for _, p := range harness.Pods(t, vc) {
		exclude[p.Name] = true
		if err := harness.Cluster.Kubelet.KillPod(ns, p.Name); err != nil {
			t.Fatal(err)
		}
	}
	ready := harness.WaitReady(t, vc, 3, 1, exclude, harness.HealTimeout)
	t.Logf("every pod killed: Ready again %s after", ready.Sub(start).Round(time.Millisecond))
	harness.VerifyValkey(t, harness.CurrentCluster(t, vc), 3, 1)
	r, err := w.Report(context.Background(), harness.ClusterWriterOptions(t, vc, opts.Prefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Log(r.String())
	if r.LostReplicated+r.LostUnreplicated != r.Acked {
		t.Errorf("%d of %d keys survived the loss of every pod: was the data really gone?", r.Acked-r.LostReplicated-r.LostUnreplicated, r.Acked)
	}
	warned := map[string]bool{} // shard -> a WARN line named it
	for _, l := range harness.ParseLog(t, harness.Op.Logs()) {
		if l.Level == "WARN" && strings.HasSuffix(l.Ref(), "."+ns) && strings.Contains(strings.ToLower(l.Message()), harness.DataLostWarn) {
			shard, one := l.Fields[logging.FieldShard]
			_, many := l.Fields[logging.FieldShards]
			if !one && !many {
				t.Errorf("data-loss WARN line names no shard: %s", l.Raw)
			}
			if slots, _ := l.Fields[logging.FieldSlots].(string); slots == "" {
				t.Errorf("data-loss WARN line names no slots: %s", l.Raw)
			}
			warned[fmt.Sprint(shard)] = true
		}
	}
	if len(warned) != 3 {
		t.Errorf("WARN lines with %q for %s name shards %v, want all 3", harness.DataLostWarn, ns, warned)
	}
	// Nothing waited for a failover: no shard had a live replica to promote.
	if harness.Logged(t, logging.MsgPrimaryUnhealthyWaiting, ns) {
		t.Errorf("%q logged although every replica was killed too", logging.MsgPrimaryUnhealthyWaiting)
	}
	cur := harness.CurrentCluster(t, vc)
	var found *string
	for _, c := range cur.Status.Conditions {
		if c.Type == harness.DataLostCondition || c.Reason == harness.DataLostReason {
			found = &c.Message
		}
	}
	switch {
	case found == nil:
		t.Errorf("no %s condition (or reason) in %+v", harness.DataLostCondition, cur.Status.Conditions)
	case !strings.Contains(strings.ToLower(*found), "shard"):
		t.Errorf("the data-loss condition does not name the shards: %q", *found)
	default:
		t.Logf("%s: %s", harness.DataLostCondition, *found)
	}
	if cur.Status.State != v1.StateActive || cur.Status.Message != "" {
		t.Errorf("re-formed: state %s, message %q; want Active and no message", cur.Status.State, cur.Status.Message)
	}
}

// TestOperatorKilledWhileHealing: a primary is killed, then the operator is SIGKILLed at
// random moments (seeded; the seed is logged) three times while it heals, and restarted each
// time. The cluster converges to Ready, and the shard failed over once: no second failover
// (from the log, and from Valkey: the distinct primaries seen for the shard's slots).
func TestOperatorKilledWhileHealing(t *testing.T) {
	ns := "kill-operator"
	vc := harness.ActiveCluster(t, ns, 3, 1)
	harness.WaitReady(t, vc, 3, 1, nil, harness.FormTimeout)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	w, opts := harness.StartClusterWriter(t, vc)
	victim := harness.PodWithRole(t, vc, v1.NodeRolePrimary)
	slot := slotOf(t, vc, victim)
	epochBefore := maxEpoch(t, vc)
	logBefore := bytes.LastIndexByte(harness.Op.Logs(), '\n') + 1
	owners, stopWatch := watchSlotOwners(t, vc, slot)
	start := time.Now()
	if err := harness.Cluster.Kubelet.KillPod(ns, victim); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		d := time.Duration(rng.Int63n(int64(4 * time.Second)))
		time.Sleep(d)
		cur := harness.CurrentCluster(t, vc)
		t.Logf("kill %d of the operator %s later (state %s, message %q)", i+1, d.Round(time.Millisecond), cur.Status.State, cur.Status.Message)
		harness.RestartOperator(t)
	}
	ready := harness.WaitReady(t, vc, 3, 1, map[string]bool{victim: true}, harness.HealTimeout)
	stopWatch()
	if err := w.WaitAcked(20, time.Minute); err != nil {
		t.Error(err)
	}
	r := harness.FinishWriter(t, w, vc, opts)
	longest, lslot := r.LongestRefusal()
	t.Logf("longest refusal %s (slot %d); Ready %s after the fault; cluster_current_epoch %d -> %d",
		longest.Round(time.Millisecond), lslot, ready.Sub(start).Round(time.Millisecond), epochBefore, maxEpoch(t, vc))
	harness.VerifyValkey(t, harness.CurrentCluster(t, vc), 3, 1)
	var failovers []string
	for _, l := range harness.ParseLog(t, harness.Op.Logs()[logBefore:]) {
		if strings.HasSuffix(l.Ref(), "."+ns) && harness.FailoverLine(l.Message()) {
			failovers = append(failovers, l.Raw)
		}
	}
	if len(failovers) > 1 {
		t.Errorf("%d failovers logged for one lost primary:\n%s", len(failovers), strings.Join(failovers, "\n"))
	}
	if seen := owners(); len(seen) > 2 {
		t.Errorf("slot %d had %d primaries (one failover is 2): %v", slot, len(seen), seen)
	}
}

// slotOf returns the first slot the primary in pod serves.
func slotOf(t *testing.T, vc *v1.ValkeyCluster, pod string) int {
	t.Helper()
	for _, p := range harness.Pods(t, vc) {
		if p.Name != pod {
			continue
		}
		v := valkey.Observe(context.Background(), []string{harness.PodAddr(p)}, harness.Creds(t, vc))[0]
		if me, ok := v.Myself(); ok && len(me.Slots) > 0 {
			return me.Slots[0].Start
		}
		t.Fatalf("%s serves no slot: %v", pod, v.Err)
	}
	t.Fatalf("no running pod %s", pod)
	return -1
}

// maxEpoch is the highest cluster_current_epoch among vc's running pods.
func maxEpoch(t *testing.T, vc *v1.ValkeyCluster) int {
	t.Helper()
	var addrs []string
	for _, p := range harness.Pods(t, vc) {
		addrs = append(addrs, harness.PodAddr(p))
	}
	best := 0
	for _, v := range valkey.Observe(context.Background(), addrs, harness.Creds(t, vc)) {
		if e, err := strconv.Atoi(v.ClusterInfo["cluster_current_epoch"]); err == nil && e > best {
			best = e
		}
	}
	return best
}

// watchSlotOwners records, every 200 ms until stopped, which node id every answering node
// says owns slot. It returns the distinct owners in the order first seen.
func watchSlotOwners(t *testing.T, vc *v1.ValkeyCluster, slot int) (owners func() []string, stop func()) {
	t.Helper()
	creds := harness.Creds(t, vc)
	var mu sync.Mutex
	var seen []string
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			var list corev1.PodList
			if err := harness.K8s.List(context.Background(), &list, client.InNamespace(vc.Namespace), client.MatchingLabels{v1.LabelCluster: vc.Name}); err == nil {
				var addrs []string
				for _, p := range list.Items {
					if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
						addrs = append(addrs, harness.PodAddr(p))
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				for _, v := range valkey.Observe(ctx, addrs, creds) {
					for _, n := range v.Nodes {
						if n.Role == valkey.RolePrimary && !n.Fail && n.Slots.Contains(slot) {
							mu.Lock()
							if !slices.Contains(seen, n.ID) {
								seen = append(seen, n.ID)
							}
							mu.Unlock()
						}
					}
				}
				cancel()
			}
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(done); <-finished }) }
	t.Cleanup(stop)
	return func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(seen) }, stop
}

// valkeyNodeGVK is the per-node record of reference/api/valkeynode.md.
var valkeyNodeGVK = schema.GroupVersionKind{Group: "valkey.gomomento.com", Version: "v1alpha1", Kind: "ValkeyNodeList"}

// valkeyNodeNames returns the ValkeyNodes in ns now (empty if the kind is not served).
func valkeyNodeNames(t *testing.T, ns string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(valkeyNodeGVK)
	if err := harness.K8s.List(context.Background(), &list, client.InNamespace(ns)); err == nil {
		for _, o := range list.Items {
			out[o.GetName()] = true
		}
	}
	return out
}

// watchValkeyNodes polls the ValkeyNodes of ns every 200 ms, as `kubectl get valkeynodes -w`
// would show them, and returns a function that stops and gives, per node, the distinct
// .spec.lifecycle values seen in order; nil when the kind is not served.
func watchValkeyNodes(t *testing.T, ns string) func() map[string][]string {
	t.Helper()
	var mu sync.Mutex
	seen := map[string][]string{}
	served := true
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		for {
			var list unstructured.UnstructuredList
			list.SetGroupVersionKind(valkeyNodeGVK)
			err := harness.K8s.List(context.Background(), &list, client.InNamespace(ns))
			mu.Lock()
			if meta.IsNoMatchError(err) {
				served = false
			}
			for _, o := range list.Items {
				l, _, _ := unstructured.NestedString(o.Object, "spec", "lifecycle")
				if s := seen[o.GetName()]; len(s) == 0 || s[len(s)-1] != l {
					seen[o.GetName()] = append(s, l)
				}
			}
			mu.Unlock()
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	var once sync.Once
	stop := func() { once.Do(func() { close(done); <-finished }) }
	t.Cleanup(stop)
	return func() map[string][]string {
		stop()
		mu.Lock()
		defer mu.Unlock()
		if !served {
			return nil
		}
		return seen
	}
}

// TestPrimaryPodDeletedValkey9: `kubectl delete pod` of a primary of a 3x2 on Valkey 9.1.2
// under the writer. Valkey 9 hands its slots over by itself on SIGTERM (shutdown-on-sigterm
// failover: it pauses its writers, waits for its most caught-up replica and sends it CLUSTER
// FAILOVER), so the operator leaves the handover to it: a CLUSTER FAILOVER of the operator's
// own, sent to a replica meanwhile, restarts the manual failover under way (chaos seed 60606,
// acl +08:51: one slot's writes unanswered for 8.8 s where the cluster's twin, without the
// operator, waited 2.5 s). The operator sends no failover of its own. What the handover costs
// is logged: the old primary exits right after it, and the writer's client dials its address
// (gone with the pod: "i/o timeout") until it learns the new owner, about 1.5-2 s here, with or
// without the operator's failover; Valkey 8's preStop hold, which keeps the old primary
// answering MOVED after the handover, does not exist on this path.
func TestPrimaryPodDeletedValkey9(t *testing.T) {
	const ns = "delete-nine"
	vc := harness.ActiveCluster(t, ns, 3, 2, localcluster.Valkey9Version)
	harness.WaitReady(t, vc, 3, 2, nil, harness.FormTimeout)
	w, opts := harness.StartClusterWriter(t, vc)
	victim := harness.PodWithRole(t, vc, v1.NodeRolePrimary)
	logBefore := len(harness.Op.Logs())
	start := time.Now()
	if err := harness.K8s.Delete(context.Background(), &corev1.Pod{ObjectMeta: harness.ObjectMetaNS(ns, victim)}); err != nil {
		t.Fatal(err)
	}
	ready := harness.WaitReady(t, vc, 3, 2, map[string]bool{victim: true}, harness.HealTimeout)
	if err := w.WaitAcked(20, time.Minute); err != nil {
		t.Error(err)
	}
	r := harness.FinishWriter(t, w, vc, opts)
	longest, slot := r.LongestRefusal()
	t.Logf("deleted primary %s: longest run of failed writes %s (slot %d); Ready again %s after the delete",
		victim, longest.Round(time.Millisecond), slot, ready.Sub(start).Round(time.Millisecond))
	harness.VerifyValkey(t, harness.CurrentCluster(t, vc), 3, 2)
	for _, l := range harness.ParseLog(t, harness.Op.Logs()[logBefore:]) {
		if !strings.HasSuffix(l.Ref(), "."+ns) {
			continue
		}
		switch l.Message() {
		case logging.MsgPrimaryLeavingHandover, logging.MsgPrimaryGonePromoting, logging.MsgPrimaryGoneTakeover, logging.MsgNoQuorumTakeover:
			t.Errorf("the operator failed over a Valkey 9 primary that hands over by itself: %s", l.Raw)
		}
	}
}
