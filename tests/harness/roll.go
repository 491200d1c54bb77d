package harness

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/valkey"
)

// RollTimeout bounds a wait for a rolling upgrade or a replica scaling to finish: a safety net,
// not a speed claim (make bench measures the roll).
const RollTimeout = 8 * time.Minute

// ValkeyVersion is the valkey_version that p's node reports (INFO server).
func ValkeyVersion(t testing.TB, vc *v1.ValkeyCluster, p corev1.Pod) string {
	t.Helper()
	c, err := valkey.NewClient(PodAddr(p), Creds(t, vc))
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

// Helpers.

// StartWriterPrefix starts a harness.Writer on vc's pods writing keys under prefix; it is closed
// at the end of the test.
func StartWriterPrefix(t testing.TB, vc *v1.ValkeyCluster, prefix string) (*Writer, WriterOptions) {
	t.Helper()
	opts := ClusterWriterOptions(t, vc, prefix)
	w, err := StartWriter(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	if err := w.WaitAcked(20, time.Minute); err != nil {
		t.Fatal(err)
	}
	return w, opts
}

// EditConfig applies edit to the ValkeyConfig name and updates it, retrying on conflicts.
func EditConfig(t testing.TB, name string, edit func(*v1.ValkeyConfig)) {
	t.Helper()
	for {
		var c v1.ValkeyConfig
		if err := K8s.Get(context.Background(), client.ObjectKey{Name: name}, &c); err != nil {
			t.Fatal(err)
		}
		edit(&c)
		err := K8s.Update(context.Background(), &c)
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "modified") {
			t.Fatal(err)
		}
	}
}

// EditCluster applies edit to the current vc and updates it, retrying on conflicts.
func EditCluster(t testing.TB, vc *v1.ValkeyCluster, edit func(*v1.ValkeyCluster)) {
	t.Helper()
	for {
		cur := CurrentCluster(t, vc)
		edit(cur)
		err := K8s.Update(context.Background(), cur)
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "modified") {
			t.Fatal(err)
		}
	}
}

func PodNameSet(t testing.TB, vc *v1.ValkeyCluster) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, p := range Pods(t, vc) {
		out[p.Name] = true
	}
	return out
}

// WaitRolled waits until no pod of before runs any more (nil: none is awaited), the cluster is
// Active and Ready for its generation, and Valkey agrees (ClusterHealthy).
func WaitRolled(t testing.TB, vc *v1.ValkeyCluster, shards, replicas int, before map[string]bool, timeout time.Duration) {
	t.Helper()
	problem := Poll(t.Context(), timeout, func() string {
		problem := ""
		cur := CurrentCluster(t, vc)
		for _, p := range Pods(t, vc) {
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
			problem = ClusterHealthy(t, vc, shards, replicas, nil)
		}
		return problem
	})
	if problem != "" {
		dumpValkey(t, vc)
		t.Fatalf("%s/%s not rolled within %s: %s", vc.Namespace, vc.Name, timeout, problem)
	}
}

// dumpValkey logs what each running pod's node says of the cluster (CLUSTER INFO, CLUSTER NODES,
// the replication link), so that a test that timed out shows Valkey's side of the stall, not
// only the operator's status.
func dumpValkey(t testing.TB, vc *v1.ValkeyCluster) {
	t.Helper()
	creds, err := OperatorCreds(context.Background(), K8s, vc)
	if err != nil {
		t.Logf("dump: no operator credentials: %v", err)
		return
	}
	for _, p := range Pods(t, vc) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		c, err := valkey.NewClient(PodAddr(p), creds)
		if err != nil {
			cancel()
			t.Logf("dump %s (%s): %v", p.Name, PodAddr(p), err)
			continue
		}
		info, ierr := c.ClusterInfo(ctx)
		repl, _ := c.Info(ctx, "replication")
		nodes, nerr := c.ClusterNodes(ctx)
		c.Close()
		cancel()
		var b strings.Builder
		fmt.Fprintf(&b, "dump %s (%s): cluster_state=%s slots_assigned=%s epoch=%s role=%s link=%s err=%v/%v",
			p.Name, PodAddr(p), info["cluster_state"], info["cluster_slots_assigned"], info["cluster_current_epoch"],
			repl["role"], repl["master_link_status"], ierr, nerr)
		for _, n := range nodes {
			fmt.Fprintf(&b, "\n    %.8s %s:%d %v primary=%.8s epoch=%d slots=%d %v migrating=%v importing=%v",
				n.ID, n.IP, n.Port, n.Flags, n.PrimaryID, n.ConfigEpoch, n.Slots.Count(), n.Slots, n.Migrating, n.Importing)
		}
		t.Log(b.String())
	}
}

// WaitScaled waits until the cluster is Active, Ready and Valkey has replicas per shard.
func WaitScaled(t testing.TB, vc *v1.ValkeyCluster, shards, replicas int, timeout time.Duration) {
	t.Helper()
	time.Sleep(time.Second) // let the operator see the new generation
	WaitRolled(t, vc, shards, replicas, nil, timeout)
}

// ConfigGet asks p's node for CONFIG GET key, as the default user (open: no spec.acl).
func ConfigGet(t testing.TB, p corev1.Pod, key string) string {
	t.Helper()
	c := DefaultUserClient(t, p)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := c.Do(ctx, c.B().ConfigGet().Parameter(key).Build()).AsStrMap()
	if err != nil {
		t.Fatalf("%s: CONFIG GET %s: %v", p.Name, key, err)
	}
	return kv[key]
}

// DefaultUserClient connects to p's node alone, as the default user (open: no spec.acl).
func DefaultUserClient(t testing.TB, p corev1.Pod) valkeygo.Client {
	t.Helper()
	c, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: []string{PodAddr(p)}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// CountLines counts the operator's lines with message in namespace ns (and for cluster, when
// not "").
func CountLines(t *testing.T, message, ns, cluster string) int {
	t.Helper()
	n := 0
	for _, l := range ParseLog(t, Op.Logs()) {
		if l.Message() != message || !strings.HasSuffix(l.Ref(), "."+ns) {
			continue
		}
		if name, _ := l.Fields[logging.FieldClusterName].(string); cluster == "" || name == cluster {
			n++
		}
	}
	return n
}

// LoggedWithPod reports whether the operator logged message for a cluster in ns with a pod
// field.
func LoggedWithPod(t *testing.T, message, ns string) bool {
	t.Helper()
	for _, l := range ParseLog(t, Op.Logs()) {
		if pod, _ := l.Fields[logging.FieldPod].(string); l.Message() == message && strings.HasSuffix(l.Ref(), "."+ns) && pod != "" {
			return true
		}
	}
	return false
}

// CheckFailoversPerShard: the roll issued exactly one failover per shard (`failover to up-to-date
// replica for rolling upgrade`, counted per shard field), and no other failover.
func CheckFailoversPerShard(t testing.TB, vc *v1.ValkeyCluster, shards int) {
	t.Helper()
	per := map[float64]int{}
	for _, l := range ParseLog(t, Op.Logs()) {
		if !strings.HasSuffix(l.Ref(), "."+vc.Namespace) {
			continue
		}
		if name, _ := l.Fields[logging.FieldClusterName].(string); name != vc.Name {
			continue
		}
		switch {
		case l.Message() == logging.MsgFailoverForUpgrade:
			shard, _ := l.Fields[logging.FieldShard].(float64)
			per[shard]++
		case l.Message() == logging.MsgSpreadingPrimaries:
			// After the roll, not part of it: a roll's replacements cannot always land where
			// the primaries stay spread over zones (plan/spread.go).
			t.Logf("%s: after the roll, %s: shard %v leaves zone %v", vc.Name, l.Message(), l.Fields[logging.FieldShard], l.Fields[logging.FieldZone])
		case FailoverLine(l.Message()):
			t.Errorf("%s: unexpected failover during the roll: %s", vc.Name, l.Message())
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

// WatchCreatedNodes records the ValkeyNodes created in ns from now on, in creation order, with
// their cluster and shard index.
func WatchCreatedNodes(t testing.TB, ns string) func() []CreatedNode {
	t.Helper()
	known := map[string]bool{}
	var list v1.ValkeyNodeList
	if err := K8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, n := range list.Items {
		known[n.Name] = true
	}
	var mu sync.Mutex
	var out []CreatedNode
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		for {
			var list v1.ValkeyNodeList
			if err := K8s.List(context.Background(), &list, client.InNamespace(ns)); err == nil {
				sort.Slice(list.Items, func(i, j int) bool {
					return list.Items[i].CreationTimestamp.Before(&list.Items[j].CreationTimestamp)
				})
				mu.Lock()
				for _, n := range list.Items {
					if !known[n.Name] {
						known[n.Name] = true
						out = append(out, CreatedNode{Name: n.Name, Cluster: n.Spec.ClusterName, Shard: int(n.Spec.ShardIndex), Image: n.Spec.Image})
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
	return func() []CreatedNode {
		stop()
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(out)
	}
}

// CreatedNode is a ValkeyNode seen created, for WatchCreatedNodes.
type CreatedNode struct {
	Name, Cluster string
	Shard         int
	// Image is the node's image (ValkeyNode spec.image): what its pod runs all its life.
	Image string
}

// LatencyOnly: every failed write of the slot got no reply within the writer's 1 s budget; Valkey
// and the connection refused none. That is latency, which `make bench` measures and a test does
// not assert: a graceful failover pauses the primary's writes until its replica has caught up,
// and on the 2-core CI machine that pause and the scheduling around it held every slot of two
// shards 1.2 s at once during a roll, and three slots of a drained node 2.2–3.0 s (two writes
// each) at load 20–30. Any write Valkey refused (CLUSTERDOWN, MOVED loops, TRYAGAIN, READONLY)
// still fails; the tests that use this also fail on a forced failover, and wait for the slots to
// acknowledge writes again, so a slot left unserved does not pass as latency.
func LatencyOnly(s SlotReport) bool {
	return s.Failures > 0 && s.Failures == s.Unanswered
}

// MemoryInForce is the memory limit p's kubelet reports applied to its container
// (status.containerStatuses[].resources), "none reported" when it reports none.
func MemoryInForce(p corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Resources != nil {
			return cs.Resources.Limits.Memory().String()
		}
	}
	return "none reported"
}
