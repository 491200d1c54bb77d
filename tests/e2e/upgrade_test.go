package e2e

import (
	"context"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/tests/harness"
	"github.com/gomomento/valkey-operator/tests/localcluster"
	"github.com/gomomento/valkey-operator/valkey"
)

// rollTimeout bounds a wait for a rolling upgrade or a replica scaling to finish: a safety net,
// not a speed claim (make bench measures the roll).
const rollTimeout = 8 * time.Minute

// TestRollingConfigChangeTwoClusters: two 3×1 clusters share one ValkeyConfig; a `valkey`
// setting that needs a restart changes under continuous writes (one Valkey takes at run time
// applies live instead: TestLiveConfig). Both roll, one shard at a time each, with exactly
// one failover per shard; every node is replaced and runs the new setting (CONFIG GET); every
// acknowledged write reads back. A graceful CLUSTER FAILOVER loses no acknowledged write, so
// no loss is allowed here, replicated or not.
func TestRollingConfigChangeTwoClusters(t *testing.T) {
	lane(t)
	ns := "roll-config"
	setupNamespace(t, ns)
	create(t, newImage(ns+"-image"), newConfig(ns+"-config", ns+"-image"))
	a := newCluster(ns, "vc-a", ns+"-config")
	b := newCluster(ns, "vc-b", ns+"-config")
	create(t, a, b)
	for _, vc := range []*v1.ValkeyCluster{a, b} {
		waitReady(t, vc, 3, 1, nil, formTimeout)
	}
	before := map[string]bool{}
	for _, vc := range []*v1.ValkeyCluster{a, b} {
		for _, p := range clusterPods(t, vc) {
			before[p.Name] = true
		}
	}
	created := watchCreatedNodes(t, ns)
	detached := watchRetiringReplicas(t, a)
	wa, oa := startWriter(t, a)
	wb, ob := startWriterPrefix(t, b, ns+":b:")

	// tcp-backlog needs a restart (CONFIG SET refuses it), so it rolls; hz would apply live.
	editConfig(t, ns+"-config", func(c *v1.ValkeyConfig) { c.Spec.Valkey["tcp-backlog"] = "256" })
	start := time.Now()
	for _, vc := range []*v1.ValkeyCluster{a, b} {
		waitRolled(t, vc, 3, 1, before, rollTimeout)
	}
	t.Logf("both clusters rolled in %s", time.Since(start).Round(time.Second))
	for _, vc := range []*v1.ValkeyCluster{a, b} {
		for _, p := range clusterPods(t, vc) {
			if got := configGet(t, p, "tcp-backlog"); got != "256" {
				t.Errorf("%s: CONFIG GET tcp-backlog = %q, want 256", p.Name, got)
			}
		}
	}
	checkOneShardAtATime(t, created())
	detached()
	ra := finishWriter(t, wa, a, oa)
	rb := finishWriter(t, wb, b, ob)
	for _, r := range []harness.Report{ra, rb} {
		if r.LostUnreplicated > 0 {
			t.Errorf("%d keys acknowledged by the primary were lost: a graceful failover loses none", r.LostUnreplicated)
		}
		reportRefusals(t, r)
	}
	for _, vc := range []*v1.ValkeyCluster{a, b} {
		checkFailoversPerShard(t, vc, 3)
	}
}

// TestRollValkey9: a 3×1 cluster on Valkey 9 rolls (a config change) under the writer. A 9.x pod
// has no preStop hook, so each primary the roll demotes is detached from its new primary and kept
// plan.MovedHold before its deletion: clients learn the new owner from its MOVED answers, and it
// acknowledges no write meanwhile. No slot refuses writes for a second, nothing acknowledged is
// lost, one failover per shard.
func TestRollValkey9(t *testing.T) {
	lane(t)
	ns := "roll-9"
	vc := versionedCluster(t, ns, localcluster.Valkey9Version, 3, 1)
	waitReady(t, vc, 3, 1, nil, formTimeout)
	before := podNameSet(t, vc)
	detached := watchRetiringReplicas(t, vc)
	w, opts := startWriter(t, vc)
	start := time.Now()
	editConfig(t, ns+"-config", func(c *v1.ValkeyConfig) { c.Spec.Valkey["tcp-backlog"] = "256" })
	waitRolled(t, vc, 3, 1, before, rollTimeout)
	t.Logf("rolled in %s", time.Since(start).Round(time.Second))
	detached()
	r := finishWriter(t, w, vc, opts)
	if r.LostUnreplicated > 0 {
		t.Errorf("%d keys acknowledged by the primary were lost: a graceful failover loses none", r.LostUnreplicated)
	}
	reportRefusals(t, r)
	checkFailoversPerShard(t, vc, 3)
}

// TestUpgrade8To9: a 3×1 cluster on Valkey 8.0.1 is upgraded to 9.1.2 by repointing its
// ValkeyConfig's imageRef, under continuous writes. Every node is replaced and Valkey itself says
// 9.1.2 (INFO server); exactly one failover per shard; no acknowledged write is lost (a graceful
// failover loses none, replicated or not).
func TestUpgrade8To9(t *testing.T) {
	lane(t)
	ns := "roll-8to9"
	vc := activeCluster(t, ns, 3, 1)
	waitReady(t, vc, 3, 1, nil, formTimeout)
	nine := newImage(ns + "-image9")
	nine.Spec.Tag, nine.Spec.Version = localcluster.Valkey9Version, localcluster.Valkey9Version
	create(t, nine)
	before := podNameSet(t, vc)
	oldIDs := nodeIDSet(t, vc)
	created := watchCreatedNodes(t, ns)
	w, opts := startWriter(t, vc)
	start := time.Now()
	editConfig(t, ns+"-config", func(c *v1.ValkeyConfig) { c.Spec.ImageRef = nine.Name })
	waitRolled(t, vc, 3, 1, before, rollTimeout)
	t.Logf("8.0.1 -> %s in %s", localcluster.Valkey9Version, time.Since(start).Round(time.Second))
	for _, p := range clusterPods(t, vc) {
		if v := valkeyVersion(t, vc, p); v != localcluster.Valkey9Version {
			t.Errorf("%s: valkey_version %s after the upgrade", p.Name, v)
		}
	}
	checkOneShardAtATime(t, created())
	r := finishWriter(t, w, vc, opts)
	if r.LostUnreplicated > 0 {
		t.Errorf("%d keys acknowledged by the primary were lost: a graceful failover loses none", r.LostUnreplicated)
	}
	reportRefusals(t, r)
	checkFailoversPerShard(t, vc, 3)
	checkForgetLines(t, vc, oldIDs)
}

// watchRetiringReplicas polls vc's pods every 100 ms until the returned check runs: each pod being
// retired whose server still answers (a Valkey 8 pod in its preStop hold, a Valkey 9 one whose
// ValkeyNode is Leaving during plan.MovedHold) is asked INFO replication. The check fails the test if one that answered as a replica still had its link to
// its primary up: a retiring replica is detached first, so that in its last seconds it
// acknowledges no write a client's WAIT would count (valkey.Client.Detach). It also fails if no
// retiring replica was seen at all (the check would prove nothing).
func watchRetiringReplicas(t *testing.T, vc *v1.ValkeyCluster) func() {
	t.Helper()
	creds := operatorCreds(t, vc)
	stop := make(chan struct{})
	done := make(chan struct{})
	seen := map[string]string{} // pod -> the worst link status seen while it was being deleted
	first := map[string]time.Time{}
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			var list corev1.PodList
			if err := k8s.List(context.Background(), &list, client.InNamespace(vc.Namespace), client.MatchingLabels{v1.LabelCluster: vc.Name}); err != nil {
				continue
			}
			var nodes v1.ValkeyNodeList
			if err := k8s.List(context.Background(), &nodes, client.InNamespace(vc.Namespace)); err != nil {
				continue
			}
			leaving := map[string]bool{}
			for _, n := range nodes.Items {
				leaving[n.Name] = n.Spec.Lifecycle == v1.LifecycleLeaving
			}
			for _, p := range list.Items {
				if (p.DeletionTimestamp == nil && !leaving[p.Name]) || p.Status.PodIP == "" {
					continue
				}
				c, err := valkey.NewClient(addr(p), creds)
				if err != nil {
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				info, err := c.Info(ctx, "replication")
				cancel()
				c.Close()
				if err != nil || info["role"] != "slave" {
					continue
				}
				// The Leaving mark is written a moment before the detach: only what the node
				// says 300 ms after it was first seen retiring counts.
				if _, ok := first[p.Name]; !ok {
					first[p.Name] = time.Now()
				}
				if time.Since(first[p.Name]) >= 300*time.Millisecond && seen[p.Name] != "up" {
					seen[p.Name] = info["master_link_status"]
				}
			}
		}
	}()
	return func() {
		t.Helper()
		close(stop)
		<-done
		t.Logf("retiring replicas' replication link while they were being deleted: %v", seen)
		if len(seen) == 0 {
			t.Error("no retiring replica answered while being deleted: the detach was not observed")
		}
		for pod, link := range seen {
			if link == "up" {
				t.Errorf("%s was being deleted with its replication link up: not detached", pod)
			}
		}
	}
}

// nodeIDSet is the Valkey node id of every running pod of vc.
func nodeIDSet(t *testing.T, vc *v1.ValkeyCluster) map[string]bool {
	t.Helper()
	var addrs []string
	for _, p := range clusterPods(t, vc) {
		addrs = append(addrs, addr(p))
	}
	out := map[string]bool{}
	for _, v := range valkey.Observe(context.Background(), addrs, operatorCreds(t, vc)) {
		me, ok := v.Myself()
		if !ok {
			t.Fatalf("node %s: no id: %v", v.Addr, v.Err)
		}
		out[me.ID] = true
	}
	return out
}

// checkForgetLines: every id in retired was forgotten, with `forgetting node` lines per id (not
// per node told: no pod field) carrying the id and how many nodes were told, and no running node
// of vc knows any of them any more.
func checkForgetLines(t *testing.T, vc *v1.ValkeyCluster, retired map[string]bool) {
	t.Helper()
	per := map[string]int{}
	for _, l := range parseLog(t, operator.Logs()) {
		if l.message() != logging.MsgForgettingNode || !strings.HasSuffix(l.ref(), "."+vc.Namespace) {
			continue
		}
		id, _ := l.Fields[logging.FieldNode].(string)
		told, _ := l.Fields[logging.FieldNodes].(float64)
		if _, perPod := l.Fields[logging.FieldPod]; perPod || id == "" || told < 1 {
			t.Errorf("a forgetting node line without the id and count, or per node told: %s", l.raw)
		}
		per[id]++
	}
	for id := range retired {
		switch {
		case per[id] == 0:
			t.Errorf("retired node %s: no forgetting node line (all: %v)", id, per)
		case per[id] > 1:
			// A FORGET that failed on one node is retried on the next pass, with its own line.
			t.Logf("retired node %s: %d forgetting node lines (retried)", id, per[id])
		}
	}
	for _, p := range clusterPods(t, vc) {
		v := valkey.Observe(context.Background(), []string{addr(p)}, operatorCreds(t, vc))[0]
		for _, e := range v.Nodes {
			if retired[e.ID] {
				t.Errorf("%s still knows the retired node %s", p.Name, e.ID)
			}
		}
	}
}

func valkeyVersion(t testing.TB, vc *v1.ValkeyCluster, p corev1.Pod) string {
	t.Helper()
	c, err := valkey.NewClient(addr(p), operatorCreds(t, vc))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	info, err := c.Info(context.Background(), "server")
	if err != nil {
		t.Fatal(err)
	}
	return info["valkey_version"]
}

// TestRollingResourcesWithoutReplicas: a 3×0 cluster (no replica to fail over to) gets a
// resources change. Each shard gets a surge replica first, then hands over to it: no shard is
// ever wiped, and every key written during the roll reads back. Without replicas no write is
// acknowledged by WAIT 1; none acknowledged by the primary may be lost either (nothing crashes).
func TestRollingResourcesWithoutReplicas(t *testing.T) {
	lane(t)
	ns := "roll-surge"
	vc := activeCluster(t, ns, 3, 0)
	waitReady(t, vc, 3, 0, nil, formTimeout)
	before := podNameSet(t, vc)
	w, opts := startWriter(t, vc)
	editConfig(t, ns+"-config", func(c *v1.ValkeyConfig) { c.Spec.Resources.Memory = ptr.To(resource.MustParse("160Mi")) })
	waitRolled(t, vc, 3, 0, before, rollTimeout)
	for _, p := range clusterPods(t, vc) {
		if got := p.Spec.Containers[0].Resources.Limits.Memory().String(); got != "160Mi" {
			t.Errorf("%s: memory limit %s, want 160Mi", p.Name, got)
		}
	}
	r := finishWriter(t, w, vc, opts)
	if r.LostUnreplicated > 0 {
		t.Errorf("%d acknowledged keys lost: a surge replica and a graceful failover lose none", r.LostUnreplicated)
	}
	reportRefusals(t, r)
	checkFailoversPerShard(t, vc, 3)
}

// TestReplicaScaling: replicasPerShard 1 → 2 → 0 → 1 on a 2-shard cluster under writes; at
// each step Valkey has exactly the replicas asked for, synced, and every key reads back.
// Scaling down retires replicas only: no failover, no refused write.
func TestReplicaScaling(t *testing.T) {
	lane(t)
	ns := "scale-replicas"
	vc := activeCluster(t, ns, 2, 1)
	waitReady(t, vc, 2, 1, nil, formTimeout)
	keys := writeAcknowledged(t, vc, 300)
	w, opts := startWriter(t, vc)
	for _, n := range []int{2, 0, 1} {
		editCluster(t, vc, func(c *v1.ValkeyCluster) { c.Spec.ReplicasPerShard = int32(n) })
		start := time.Now()
		waitScaled(t, vc, 2, n, rollTimeout)
		t.Logf("replicasPerShard %d: done in %s", n, time.Since(start).Round(100*time.Millisecond))
		verifyValkey(t, currentCluster(t, vc), 2, n)
		readBack(t, vc, keys)
	}
	r := finishWriter(t, w, vc, opts)
	if r.LostUnreplicated > 0 {
		t.Errorf("%d acknowledged keys lost while scaling replicas", r.LostUnreplicated)
	}
	reportRefusals(t, r)
	if n := countLines(t, logging.MsgFailoverForUpgrade, ns, ""); n != 0 {
		t.Errorf("%d failovers while scaling replicas; scaling never moves a primary", n)
	}
}

// TestRollStallsAndReverts: a change that cannot roll stalls on one shard with the reason in
// status.message, the cluster keeps serving, and reverting the change finishes the roll (the stuck
// replacement is removed; nothing of the first shard's old nodes was retired). First an
// unsatisfiable nodeSelector (the scheduler's reason), then a valkey setting that makes
// valkey-server exit on start (the exit code).
func TestRollStallsAndReverts(t *testing.T) {
	lane(t)
	ns := "roll-stall"
	vc := activeCluster(t, ns, 2, 1)
	waitReady(t, vc, 2, 1, nil, formTimeout)
	before := podNameSet(t, vc)
	w, opts := startWriter(t, vc)

	editCluster(t, vc, func(c *v1.ValkeyCluster) {
		c.Spec.Placement = &v1.Placement{NodeSelector: map[string]string{"pool": "does-not-exist"}}
	})
	stalled := waitMessage(t, vc, "cannot be scheduled", 2*time.Minute)
	t.Logf("stalled: state %s, message %q", stalled.Status.State, stalled.Status.Message)
	if stalled.Status.State != v1.StateUpgrading {
		t.Errorf("state %s while the roll is stalled, want Upgrading", stalled.Status.State)
	}
	if c := meta.FindStatusCondition(stalled.Status.Conditions, v1.ConditionReady); c == nil || c.Status != "False" || c.Message != stalled.Status.Message {
		t.Errorf("Ready condition %+v, want False with the message", c)
	}
	if p := valkeyHealthy(t, vc, 2, 1, pendingPods(t, vc)); p != "" {
		t.Errorf("the old nodes must keep serving while the roll is stalled: %s", p)
	}
	if !loggedWithPod(t, logging.MsgBootstrapBlocked, ns) {
		t.Errorf("no %q line with a pod for the unschedulable replacement", logging.MsgBootstrapBlocked)
	}
	editCluster(t, vc, func(c *v1.ValkeyCluster) { c.Spec.Placement = nil })
	waitRolled(t, vc, 2, 1, nil, rollTimeout)
	if after := podNameSet(t, vc); !maps.Equal(after, before) {
		t.Errorf("reverting replaced nodes: before %v, after %v", keysOf(before), keysOf(after))
	}

	// A restart setting: a bad value of a live one is refused by CONFIG SET, and never rolls.
	editConfig(t, ns+"-config", func(c *v1.ValkeyConfig) { c.Spec.Valkey["tcp-backlog"] = "no-such-backlog" })
	stalled = waitMessage(t, vc, "exit code", 2*time.Minute)
	t.Logf("stalled: state %s, message %q", stalled.Status.State, stalled.Status.Message)
	if p := valkeyHealthy(t, vc, 2, 1, nil); p != "" {
		t.Errorf("the old nodes must keep serving while the roll is stalled: %s", p)
	}
	editConfig(t, ns+"-config", func(c *v1.ValkeyConfig) { delete(c.Spec.Valkey, "tcp-backlog") })
	waitRolled(t, vc, 2, 1, nil, rollTimeout)
	if after := podNameSet(t, vc); !maps.Equal(after, before) {
		t.Errorf("reverting replaced nodes: before %v, after %v", keysOf(before), keysOf(after))
	}
	r := finishWriter(t, w, vc, opts)
	if r.LostUnreplicated > 0 {
		t.Errorf("%d acknowledged keys lost", r.LostUnreplicated)
	}
	reportRefusals(t, r)
}

// TestOperatorKilledDuringRoll: the operator is SIGKILLed at three random moments of a 3×1 roll
// under writes. It resumes from what it observes: the roll finishes, one failover per shard,
// every acknowledged write reads back.
func TestOperatorKilledDuringRoll(t *testing.T) {
	lane(t)
	ns := "roll-restart"
	vc := activeCluster(t, ns, 3, 1)
	waitReady(t, vc, 3, 1, nil, formTimeout)
	before := podNameSet(t, vc)
	created := watchCreatedNodes(t, ns)
	w, opts := startWriter(t, vc)
	editConfig(t, ns+"-config", func(c *v1.ValkeyConfig) { c.Spec.Valkey["tcp-backlog"] = "384" })
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	for i := range 3 {
		d := time.Duration(3+rng.Intn(12)) * time.Second
		time.Sleep(d)
		t.Logf("kill %d after %s more: state %s, %s", i+1, d, currentCluster(t, vc).Status.State, currentCluster(t, vc).Status.Message)
		restartOperator(t)
	}
	waitRolled(t, vc, 3, 1, before, rollTimeout)
	checkOneShardAtATime(t, created())
	r := finishWriter(t, w, vc, opts)
	if r.LostUnreplicated > 0 {
		t.Errorf("%d acknowledged keys lost", r.LostUnreplicated)
	}
	reportRefusals(t, r)
	checkFailoversPerShard(t, vc, 3)
}

// TestZonesChanged: a cluster spread over three zones is moved to two: every pod ends in the new
// zones, and its data with it.
func TestZonesChanged(t *testing.T) {
	lane(t)
	ns := "roll-zones"
	setupNamespace(t, ns)
	create(t, newImage(ns+"-image"), newConfig(ns+"-config", ns+"-image"))
	vc := newCluster(ns, "vc", ns+"-config", withShards(1), withReplicas(2))
	vc.Spec.Placement = &v1.Placement{Zones: []string{"zone-a", "zone-b", "zone-c"}}
	create(t, vc)
	waitReady(t, vc, 1, 2, nil, formTimeout)
	keys := writeAcknowledged(t, vc, 200)
	before := podNameSet(t, vc)
	// Reordering is not a change.
	editCluster(t, vc, func(c *v1.ValkeyCluster) { c.Spec.Placement.Zones = []string{"zone-c", "zone-a", "zone-b"} })
	passMark(t, vc)(2)
	if after := podNameSet(t, vc); !maps.Equal(after, before) || currentCluster(t, vc).Status.State != v1.StateActive {
		t.Errorf("reordering zones replaced pods or left Active: %v -> %v", keysOf(before), keysOf(after))
	}
	editCluster(t, vc, func(c *v1.ValkeyCluster) { c.Spec.Placement.Zones = []string{"zone-a", "zone-b"} })
	waitRolled(t, vc, 1, 2, before, rollTimeout)
	for _, p := range clusterPods(t, vc) {
		var node corev1.Node
		if err := k8s.Get(context.Background(), client.ObjectKey{Name: p.Spec.NodeName}, &node); err != nil {
			t.Fatal(err)
		}
		if z := node.Labels[corev1.LabelTopologyZone]; z != "zone-a" && z != "zone-b" {
			t.Errorf("%s runs in %s after the zones became zone-a, zone-b", p.Name, z)
		}
	}
	readBack(t, vc, keys)
}

// Helpers.

// startWriterPrefix starts a harness.Writer on vc's pods writing keys under prefix; it is closed
// at the end of the test.
func startWriterPrefix(t testing.TB, vc *v1.ValkeyCluster, prefix string) (*harness.Writer, harness.WriterOptions) {
	t.Helper()
	opts := writerOptions(t, vc, prefix)
	w, err := harness.StartWriter(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	if err := w.WaitAcked(20, time.Minute); err != nil {
		t.Fatal(err)
	}
	return w, opts
}

func editConfig(t testing.TB, name string, edit func(*v1.ValkeyConfig)) {
	t.Helper()
	for {
		var c v1.ValkeyConfig
		if err := k8s.Get(context.Background(), client.ObjectKey{Name: name}, &c); err != nil {
			t.Fatal(err)
		}
		edit(&c)
		err := k8s.Update(context.Background(), &c)
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "modified") {
			t.Fatal(err)
		}
	}
}

func editCluster(t testing.TB, vc *v1.ValkeyCluster, edit func(*v1.ValkeyCluster)) {
	t.Helper()
	for {
		cur := currentCluster(t, vc)
		edit(cur)
		err := k8s.Update(context.Background(), cur)
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "modified") {
			t.Fatal(err)
		}
	}
}

func podNameSet(t testing.TB, vc *v1.ValkeyCluster) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, p := range clusterPods(t, vc) {
		out[p.Name] = true
	}
	return out
}

func keysOf(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// waitRolled waits until no pod of before runs any more (nil: none is awaited), the cluster is
// Active and Ready for its generation, and Valkey agrees (valkeyHealthy).
func waitRolled(t testing.TB, vc *v1.ValkeyCluster, shards, replicas int, before map[string]bool, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		problem := ""
		cur := currentCluster(t, vc)
		for _, p := range clusterPods(t, vc) {
			if before[p.Name] {
				problem = "old pod " + p.Name + " still runs"
			}
		}
		switch {
		case problem != "":
		case cur.Status.State != v1.StateActive:
			problem = fmt.Sprintf("state %s: %s", cur.Status.State, cur.Status.Message)
		case cur.Status.ObservedGeneration != cur.Generation || !meta.IsStatusConditionTrue(cur.Status.Conditions, v1.ConditionReady):
			problem = fmt.Sprintf("not Ready for generation %d: %s", cur.Generation, cur.Status.Message)
		default:
			problem = valkeyHealthy(t, vc, shards, replicas, nil)
		}
		if problem == "" {
			return
		}
		if time.Now().After(deadline) {
			dumpValkey(t, vc)
			t.Fatalf("%s/%s not rolled within %s: %s", vc.Namespace, vc.Name, timeout, problem)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// dumpValkey logs what each running pod's node says of the cluster (CLUSTER INFO, CLUSTER NODES,
// the replication link), so that a test that timed out shows Valkey's side of the stall, not
// only the operator's status.
func dumpValkey(t testing.TB, vc *v1.ValkeyCluster) {
	t.Helper()
	creds, err := harness.OperatorCreds(context.Background(), k8s, vc)
	if err != nil {
		t.Logf("dump: no operator credentials: %v", err)
		return
	}
	for _, p := range clusterPods(t, vc) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		c, err := valkey.NewClient(addr(p), creds)
		if err != nil {
			cancel()
			t.Logf("dump %s (%s): %v", p.Name, addr(p), err)
			continue
		}
		info, ierr := c.ClusterInfo(ctx)
		repl, _ := c.Info(ctx, "replication")
		nodes, nerr := c.ClusterNodes(ctx)
		c.Close()
		cancel()
		var b strings.Builder
		fmt.Fprintf(&b, "dump %s (%s): cluster_state=%s slots_assigned=%s epoch=%s role=%s link=%s err=%v/%v",
			p.Name, addr(p), info["cluster_state"], info["cluster_slots_assigned"], info["cluster_current_epoch"],
			repl["role"], repl["master_link_status"], ierr, nerr)
		for _, n := range nodes {
			fmt.Fprintf(&b, "\n    %.8s %s:%d %v primary=%.8s epoch=%d slots=%d %v migrating=%v importing=%v",
				n.ID, n.IP, n.Port, n.Flags, n.PrimaryID, n.ConfigEpoch, n.Slots.Count(), n.Slots, n.Migrating, n.Importing)
		}
		t.Log(b.String())
	}
}

// waitScaled waits until the cluster is Active, Ready and Valkey has replicas per shard.
func waitScaled(t testing.TB, vc *v1.ValkeyCluster, shards, replicas int, timeout time.Duration) {
	t.Helper()
	time.Sleep(time.Second) // let the operator see the new generation
	waitRolled(t, vc, shards, replicas, nil, timeout)
}

// waitMessage waits until status.message contains want and returns the cluster.
func waitMessage(t *testing.T, vc *v1.ValkeyCluster, want string, timeout time.Duration) *v1.ValkeyCluster {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		cur := currentCluster(t, vc)
		if strings.Contains(cur.Status.Message, want) {
			return cur
		}
		if time.Now().After(deadline) {
			t.Fatalf("status.message never said %q; last: state %s, %q", want, cur.Status.State, cur.Status.Message)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// pendingPods are the cluster's pods that do not run (a stuck replacement).
func pendingPods(t *testing.T, vc *v1.ValkeyCluster) map[string]bool {
	t.Helper()
	var list corev1.PodList
	if err := k8s.List(context.Background(), &list, client.InNamespace(vc.Namespace), client.MatchingLabels{v1.LabelCluster: vc.Name}); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, p := range list.Items {
		if p.Status.Phase != corev1.PodRunning {
			out[p.Name] = true
		}
	}
	return out
}

// configGet asks p's node for CONFIG GET key, as the default user (open: no spec.acl).
func configGet(t testing.TB, p corev1.Pod, key string) string {
	t.Helper()
	c := defaultUserClient(t, p)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := c.Do(ctx, c.B().ConfigGet().Parameter(key).Build()).AsStrMap()
	if err != nil {
		t.Fatalf("%s: CONFIG GET %s: %v", p.Name, key, err)
	}
	return kv[key]
}

// defaultUserClient connects to p's node alone, as the default user (open: no spec.acl).
func defaultUserClient(t testing.TB, p corev1.Pod) valkeygo.Client {
	t.Helper()
	c, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: []string{addr(p)}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// countLines counts the operator's lines with message in namespace ns (and for cluster, when
// not "").
func countLines(t *testing.T, message, ns, cluster string) int {
	t.Helper()
	n := 0
	for _, l := range parseLog(t, operator.Logs()) {
		if l.message() != message || !strings.HasSuffix(l.ref(), "."+ns) {
			continue
		}
		if name, _ := l.Fields[logging.FieldClusterName].(string); cluster == "" || name == cluster {
			n++
		}
	}
	return n
}

func loggedWithPod(t *testing.T, message, ns string) bool {
	t.Helper()
	for _, l := range parseLog(t, operator.Logs()) {
		if pod, _ := l.Fields[logging.FieldPod].(string); l.message() == message && strings.HasSuffix(l.ref(), "."+ns) && pod != "" {
			return true
		}
	}
	return false
}

// checkFailoversPerShard: the roll issued exactly one failover per shard (`failover to up-to-date
// replica for rolling upgrade`, counted per shard field), and no other failover.
func checkFailoversPerShard(t testing.TB, vc *v1.ValkeyCluster, shards int) {
	t.Helper()
	per := map[float64]int{}
	for _, l := range parseLog(t, operator.Logs()) {
		if !strings.HasSuffix(l.ref(), "."+vc.Namespace) {
			continue
		}
		if name, _ := l.Fields[logging.FieldClusterName].(string); name != vc.Name {
			continue
		}
		switch {
		case l.message() == logging.MsgFailoverForUpgrade:
			shard, _ := l.Fields[logging.FieldShard].(float64)
			per[shard]++
		case l.message() == logging.MsgSpreadingPrimaries:
			// After the roll, not part of it: a roll's replacements cannot always land where
			// the primaries stay spread over zones (plan/spread.go).
			t.Logf("%s: after the roll, %s: shard %v leaves zone %v", vc.Name, l.message(), l.Fields[logging.FieldShard], l.Fields[logging.FieldZone])
		case failoverLine(l.message()):
			t.Errorf("%s: unexpected failover during the roll: %s", vc.Name, l.message())
		}
	}
	if len(per) != shards {
		t.Errorf("%s: failovers for the roll per shard %v, want one in each of %d shards", vc.Name, per, shards)
	}
	for shard, n := range per {
		if n != 1 {
			t.Errorf("%s: shard %v failed over %d times for one change", vc.Name, shard, n)
		}
	}
}

// reportRefusals logs, per slot that refused writes, how many and for how long: the figure the
// issue asks for (goal 0 errors, at most 100 ms); the test fails on a refusal of a second or
// more, which no graceful failover explains, but not on writes that only went unanswered
// (latencyOnly).
func reportRefusals(t testing.TB, r harness.Report) {
	t.Helper()
	for _, s := range r.Slots {
		if s.Failures == 0 {
			continue
		}
		t.Logf("slot %d: %d writes failed, longest refusal %s (last error: %s)", s.Slot, s.Failures, s.LongestRefusal.Round(time.Millisecond), s.LastError)
		if latencyOnly(s) {
			continue
		}
		if s.LongestRefusal >= time.Second {
			t.Errorf("slot %d refused writes for %s during the roll", s.Slot, s.LongestRefusal.Round(time.Millisecond))
		}
	}
}

// watchCreatedNodes records the ValkeyNodes created in ns from now on, in creation order, with
// their cluster and shard index.
func watchCreatedNodes(t testing.TB, ns string) func() []createdNode {
	t.Helper()
	known := map[string]bool{}
	var list v1.ValkeyNodeList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, n := range list.Items {
		known[n.Name] = true
	}
	var mu sync.Mutex
	var out []createdNode
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		for {
			var list v1.ValkeyNodeList
			if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err == nil {
				sort.Slice(list.Items, func(i, j int) bool {
					return list.Items[i].CreationTimestamp.Before(&list.Items[j].CreationTimestamp)
				})
				mu.Lock()
				for _, n := range list.Items {
					if !known[n.Name] {
						known[n.Name] = true
						out = append(out, createdNode{Name: n.Name, Cluster: n.Spec.ClusterName, Shard: int(n.Spec.ShardIndex), Image: n.Spec.Image})
					}
				}
				mu.Unlock()
			}
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
	return func() []createdNode {
		stop()
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(out)
	}
}

type createdNode struct {
	Name, Cluster string
	Shard         int
	// Image is the node's image (ValkeyNode spec.image): what its pod runs all its life.
	Image string
}

// checkOneShardAtATime: per cluster, the nodes the roll created came shard by shard (all of one
// shard's before any of the next): one shard in motion at a time.
func checkOneShardAtATime(t *testing.T, created []createdNode) {
	t.Helper()
	byCluster := map[string][]int{}
	for _, n := range created {
		byCluster[n.Cluster] = append(byCluster[n.Cluster], n.Shard)
	}
	for c, shards := range byCluster {
		t.Logf("%s: nodes created for shards %v", c, shards)
		seen := map[int]bool{}
		for i, s := range shards {
			if seen[s] && shards[i-1] != s {
				t.Errorf("%s: shard %d was in motion twice (creation order %v): not one shard at a time", c, s, shards)
				break
			}
			seen[s] = true
		}
	}
}

// latencyOnly: every failed write of the slot got no reply within the writer's 1 s budget; Valkey
// and the connection refused none. That is latency, which `make bench` measures and a test does
// not assert: a graceful failover pauses the primary's writes until its replica has caught up,
// and on the 2-core CI machine that pause and the scheduling around it held every slot of two
// shards 1.2 s at once during a roll, and three slots of a drained node 2.2–3.0 s (two writes
// each) at load 20–30. Any write Valkey refused (CLUSTERDOWN, MOVED loops, TRYAGAIN, READONLY)
// still fails; the tests that use this also fail on a forced failover, and wait for the slots to
// acknowledge writes again, so a slot left unserved does not pass as latency.
func latencyOnly(s harness.SlotReport) bool {
	return s.Failures > 0 && s.Failures == s.Unanswered
}
