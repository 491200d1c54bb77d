package zones

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/tests/harness"
)

// TestDrainPrimaryNode: `kubectl drain` of the Kubernetes node that hosts a primary of a 3x1
// under the writer. Each shard has its PodDisruptionBudget, which the disruption controller
// (kube-controller-manager) reports healthy with one disruption allowed; while the primary's
// pod is being replaced, an eviction of the shard's other pod is refused (429) until the
// replacement holds a full copy, so no drain can take both copies at once; the primary hands
// its slots over gracefully (CLUSTER FAILOVER during the preStop delay), and every acknowledged
// key reads back.
func TestDrainPrimaryNode(t *testing.T) {
	// An earlier measurement of a drain before the budgets reported 13.2 s of refusal (2669
	// errors). With the graceful handover the first eviction refuses no write with or without
	// a budget (one run here with the budgets switched off: 0 refused); what the budget adds
	// is that the second copy of a shard waits.
	vc := drainCluster(t, "drain")
	w, opts := harness.StartClusterWriter(t, vc)
	victim := harness.PodWithRole(t, vc, v1.NodeRolePrimary)
	pods := harness.LivePods(t, vc)
	node, shard := pods[victim].Spec.NodeName, pods[victim].Labels[v1.LabelShard]
	var other string
	for name, p := range pods {
		if name != victim && p.Labels[v1.LabelShard] == shard {
			other = name
		}
	}
	t.Logf("shard %s: primary %s on %s, the other copy %s on %s", shard, victim, node, other, pods[other].Spec.NodeName)
	d := startDrain(t, vc, node)

	held := probeEviction(t, vc, shard, victim, other, d.start)
	t.Logf("eviction of %s (the shard's other copy) while %s was replaced: %s", other, victim, held)
	if held.refused == 0 {
		t.Errorf("no eviction of %s was refused while %s was being replaced", other, victim)
	}
	if held.allowedAfter > 0 && !held.replacementSynced {
		t.Errorf("the budget let %s (the shard's last full copy) go while its replacement was not synced: %s", other, held.replacement)
	}
	for _, u := range held.unsafe {
		t.Errorf("the budget allowed a disruption before the replacement synced: %s", u)
	}
	if held.otherErr != nil {
		t.Errorf("eviction of %s: %v", other, held.otherErr)
	}
	d.finish(t, vc, w, opts)
}

// TestDrainNodeHoldingBothCopies: the same drain, but the node holds both copies of a shard (its
// replica was moved there first). kubectl evicts one; the budget refuses the other, and the
// drain keeps retrying until the shard's replacement holds a full copy. Then the second copy
// goes, a primary by then, handing its slots to that replacement: no write refused, no key lost.
func TestDrainNodeHoldingBothCopies(t *testing.T) {
	vc := drainCluster(t, "drain-both")
	primary := harness.PodWithRole(t, vc, v1.NodeRolePrimary)
	pods := harness.LivePods(t, vc)
	node, shard := pods[primary].Spec.NodeName, pods[primary].Labels[v1.LabelShard]
	var replica string
	for name, p := range pods {
		if name != primary && p.Labels[v1.LabelShard] == shard {
			replica = name
		}
	}
	// Move the replica onto the primary's node: with every other node cordoned, its
	// replacement can land nowhere else.
	var nodes corev1.NodeList
	if err := harness.K8s.List(context.Background(), &nodes); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if n.Name != node {
			harness.Cordon(t, n.Name, true)
			t.Cleanup(func() { harness.Cordon(t, n.Name, false) })
		}
	}
	if err := harness.Cluster.Kubelet.KillPod(vc.Namespace, replica); err != nil {
		t.Fatal(err)
	}
	harness.WaitReady(t, vc, 3, 1, map[string]bool{replica: true}, harness.HealTimeout)
	for _, n := range nodes.Items {
		harness.Cordon(t, n.Name, false)
	}
	pods = harness.LivePods(t, vc)
	var copies []string
	for name, p := range pods {
		if p.Labels[v1.LabelShard] == shard {
			copies = append(copies, name)
			if p.Spec.NodeName != node {
				t.Fatalf("shard %s has a copy off %s after the move: %s on %s", shard, node, name, p.Spec.NodeName)
			}
		}
	}
	if len(copies) != 2 {
		t.Fatalf("shard %s has copies %v, want 2", shard, copies)
	}
	t.Logf("shard %s: both copies %v on %s", shard, copies, node)
	before := map[string]bool{}
	for name := range pods {
		before[name] = true
	}

	w, opts := harness.StartClusterWriter(t, vc)
	d := startDrain(t, vc, node)
	synced := watchShardSynced(t, vc, shard, before, d.start)
	out := d.finish(t, vc, w, opts)
	first, second := d.deletedAt[copies[0]], d.deletedAt[copies[1]]
	if first > second {
		first, second = second, first
	}
	at := synced()
	t.Logf("the shard's copies went %s and %s after the drain began; its first replacement was Active %s after",
		first.Round(time.Millisecond), second.Round(time.Millisecond), at.Round(time.Millisecond))
	if at == 0 || second < at {
		t.Errorf("the second copy of shard %s went (%s) before a replacement was Active (%s)", shard, second.Round(time.Millisecond), at.Round(time.Millisecond))
	}
	if !strings.Contains(out, "disruption budget") {
		t.Logf("kubectl printed no refusal (it may have waited out a Retry-After silently)")
	}
}

// drainCluster makes an Active, Ready 3x1 named after its namespace (so the drain's pod
// selector matches this cluster's pods only) and waits for its budgets to be healthy.
func drainCluster(t *testing.T, ns string) *v1.ValkeyCluster {
	t.Helper()
	harness.SetupNamespace(t, ns)
	harness.Create(t, harness.NewImage(ns+"-image"), harness.NewConfig(ns+"-config", ns+"-image"))
	vc := harness.NewCluster(ns, ns, ns+"-config")
	harness.Create(t, vc)
	if _, err := harness.WaitState(context.Background(), harness.K8s, client.ObjectKeyFromObject(vc), v1.StateActive, harness.FormTimeout); err != nil {
		t.Fatal(err)
	}
	harness.WaitReady(t, vc, 3, 1, nil, harness.FormTimeout)
	t.Logf("budgets: %s", waitBudgetsHealthy(t, vc, 3, 1))
	return vc
}

// drain is a `kubectl drain` of one node, limited to one cluster's pods, running.
type drain struct {
	node      string
	start     time.Time
	out       bytes.Buffer
	done      chan error
	onNode    map[string]bool
	exits     map[string]func() podExit
	deletedAt map[string]time.Duration // filled by finish
	logBefore int
}

// startDrain starts `kubectl drain` of node for vc's pods, and watches the pods there.
func startDrain(t *testing.T, vc *v1.ValkeyCluster, node string) *drain {
	t.Helper()
	d := &drain{node: node, done: make(chan error, 1), onNode: map[string]bool{}, exits: map[string]func() podExit{},
		deletedAt: map[string]time.Duration{}, logBefore: len(harness.Op.Logs())}
	for name, p := range harness.LivePods(t, vc) {
		if p.Spec.NodeName == node {
			d.onNode[name] = true
		}
	}
	t.Logf("draining %s, where pods %v run", node, slices.Sorted(maps.Keys(d.onNode)))
	t.Cleanup(func() { harness.Cordon(t, node, false) })
	cmd := exec.Command("kubectl", "--kubeconfig", harness.Cluster.Kubeconfig, "drain", node,
		"--ignore-daemonsets", "--delete-emptydir-data", "--pod-selector", v1.LabelCluster+"="+vc.Name, "--timeout=3m")
	cmd.Stdout, cmd.Stderr = &d.out, &d.out
	d.start = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.done <- cmd.Wait() }()
	for name := range d.onNode {
		d.exits[name] = watchExit(t, vc.Namespace, name, d.start)
	}
	return d
}

// finish waits for the drain, then for the cluster to be Ready, reads every acknowledged key
// back, checks the log (a graceful handover, no forced failover) and that no write was refused.
// It returns kubectl's output.
func (d *drain) finish(t *testing.T, vc *v1.ValkeyCluster, w *harness.Writer, opts harness.WriterOptions) string {
	t.Helper()
	var err error
	select {
	case err = <-d.done:
	case <-time.After(4 * time.Minute):
		t.Fatalf("kubectl drain still running after 4 minutes:\n%s", d.out.String())
	}
	took := time.Since(d.start)
	out := strings.TrimSpace(d.out.String())
	if err != nil {
		t.Fatalf("kubectl drain: %v\n%s", err, out)
	}
	t.Logf("kubectl drain took %s:\n%s", took.Round(time.Millisecond), out)
	for _, name := range slices.Sorted(maps.Keys(d.exits)) {
		e := d.exits[name]()
		d.deletedAt[name] = e.deleting
		t.Logf("drained pod %s: %s", name, e)
	}

	ready := harness.WaitReady(t, vc, 3, 1, d.onNode, harness.HealTimeout)
	if err := w.WaitAcked(20, time.Minute); err != nil {
		t.Error(err)
	}
	r := harness.FinishWriter(t, w, vc, opts)
	longest, slot := r.LongestRefusal()
	t.Logf("drained %s: longest refusal %s (slot %d); Ready again %s after the drain began",
		d.node, longest.Round(time.Millisecond), slot, ready.Sub(d.start).Round(time.Millisecond))
	harness.VerifyValkey(t, harness.CurrentCluster(t, vc), 3, 1)

	handover := false
	for _, l := range harness.ParseLog(t, harness.Op.Logs()[d.logBefore:]) {
		if !strings.HasSuffix(l.Ref(), "."+vc.Namespace) {
			continue
		}
		switch l.Message() {
		case logging.MsgPrimaryLeavingHandover:
			handover = true
			t.Logf("%s %s: shard %v to %v", l.Timestamp, l.Message(), l.Fields[logging.FieldShard], l.Fields[logging.FieldPod])
		case logging.MsgUpdatingDisruptionBudget:
			t.Logf("%s %s: shard %v, min_available %v", l.Timestamp, l.Message(), l.Fields[logging.FieldShard], l.Fields[logging.FieldMinAvailable])
		case logging.MsgPrimaryGonePromoting, logging.MsgNoQuorumTakeover:
			t.Errorf("a drained primary was failed over by force, not handed over: %s", l.Raw)
		}
	}
	if !handover {
		t.Errorf("no %q line for the drain of %s", logging.MsgPrimaryLeavingHandover, d.node)
	}
	t.Run("the drained primaries' slots refused no write", func(t *testing.T) {
		harness.CheckNoRefusal(t, r)
	})
	t.Run("budgets healthy again", func(t *testing.T) {
		t.Logf("budgets: %s", waitBudgetsHealthy(t, vc, 3, 1))
	})
	return out
}

// watchShardSynced polls the ValkeyNodes every 100 ms and returns a function that stops and says
// when (from start) a node of shard that is not in before was first seen Active; 0 if none.
func watchShardSynced(t *testing.T, vc *v1.ValkeyCluster, shard string, before map[string]bool, start time.Time) func() time.Duration {
	t.Helper()
	n, _ := strconv.Atoi(shard)
	var mu sync.Mutex
	var at time.Duration
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		for {
			var list v1.ValkeyNodeList
			if err := harness.K8s.List(context.Background(), &list, client.InNamespace(vc.Namespace)); err == nil {
				for _, vn := range list.Items {
					mu.Lock()
					if !before[vn.Name] && int(vn.Spec.ShardIndex) == n && vn.Spec.Lifecycle == v1.LifecycleActive && at == 0 {
						at = time.Since(start)
					}
					mu.Unlock()
				}
			}
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	var once sync.Once
	stop := func() { once.Do(func() { close(done); <-finished }) }
	t.Cleanup(stop)
	return func() time.Duration { stop(); mu.Lock(); defer mu.Unlock(); return at }
}

// budgetStatus is one line per budget for the test log.
type budgetStatus []string

func (b budgetStatus) String() string { return strings.Join(b, "; ") }

// waitBudgetsHealthy waits until the cluster has exactly one budget per shard, named
// {cluster}-shard-{i}, owned by the cluster, selecting that shard's pods, and the disruption
// controller reports each as a whole shard (replicas+1 healthy pods, one disruption allowed).
func waitBudgetsHealthy(t *testing.T, vc *v1.ValkeyCluster, shards, replicas int) budgetStatus {
	t.Helper()
	var out budgetStatus
	// Is the disruption controller running, if this times out?
	harness.WaitFor(t, "budgets healthy", time.Minute, func() string {
		var list policyv1.PodDisruptionBudgetList
		if err := harness.K8s.List(context.Background(), &list, client.InNamespace(vc.Namespace)); err != nil {
			t.Fatal(err)
		}
		var problem string
		out = nil
		byName := map[string]policyv1.PodDisruptionBudget{}
		for _, b := range list.Items {
			byName[b.Name] = b
		}
		if len(list.Items) != shards {
			problem = fmt.Sprintf("%d budgets, want %d", len(list.Items), shards)
		}
		for i := range shards {
			name := v1.ShardDisruptionBudgetName(vc.Name, i)
			b, ok := byName[name]
			switch {
			case !ok:
				problem = "no budget " + name
				continue
			case !metav1.IsControlledBy(&b, harness.CurrentCluster(t, vc)):
				t.Fatalf("budget %s is not controlled by the cluster: %v", name, b.OwnerReferences)
			case b.Spec.Selector.MatchLabels[v1.LabelShard] != strconv.Itoa(i) || b.Spec.Selector.MatchLabels[v1.LabelCluster] != vc.Name:
				t.Fatalf("budget %s selects %v", name, b.Spec.Selector)
			}
			s := b.Status
			out = append(out, fmt.Sprintf("%s: expected %d, healthy %d/%d, allowed %d", name, s.ExpectedPods, s.CurrentHealthy, s.DesiredHealthy, s.DisruptionsAllowed))
			if s.ObservedGeneration != b.Generation || s.ExpectedPods != int32(replicas+1) || s.CurrentHealthy != int32(replicas+1) ||
				s.DesiredHealthy != int32(replicas) || s.DisruptionsAllowed != 1 || !meta.IsStatusConditionTrue(s.Conditions, policyv1.DisruptionAllowedCondition) {
				problem = fmt.Sprintf("%s: %+v", name, s)
			}
		}
		return problem
	})
	return out
}

// evictionProbe is what dry-run evictions of the shard's other pod, and the shard's budget, said
// while the drained primary's pod was replaced.
type evictionProbe struct {
	evictedAfter time.Duration // the drain's eviction of the victim, from the drain's start
	refused      int           // 429 TooManyRequests: the budget held
	processing   int           // of which: the budget's new spec not yet seen by the disruption controller
	firstRefusal time.Duration // from the victim's eviction
	allowedAfter time.Duration // first eviction the budget would have let through, from the victim's eviction; 0: none
	// replacement is what the shard's new pod was when the budget allowed an eviction again:
	// its ValkeyNode's lifecycle (Joining: not yet synced; Active: a full copy).
	replacement       string
	replacementSynced bool
	// samples of the budget's status; unsafe lists those that allowed a disruption while the
	// replacement was not synced yet.
	samples  int
	unsafe   []string
	otherErr error
}

func (p evictionProbe) String() string {
	s := fmt.Sprintf("victim evicted %s after the drain began; %d dry-run evictions refused (429; %d of them while the budget's new spec was being processed) from %s after",
		p.evictedAfter.Round(time.Millisecond), p.refused, p.processing, p.firstRefusal.Round(time.Millisecond))
	if p.allowedAfter > 0 {
		s += fmt.Sprintf(", allowed again %s after (the replacement's node then %s)", p.allowedAfter.Round(time.Millisecond), p.replacement)
	}
	return s + fmt.Sprintf("; budget status sampled %d times, %d allowing a disruption before the replacement synced", p.samples, len(p.unsafe))
}

// probeEviction waits until the drain evicted victim, then until the budget lets other go (or a
// minute passes) asks, in a loop and in this order: the eviction API to evict other with dry
// run (nothing is evicted; one request each, see dryRunEvict), the budget of shard for its
// status, and the ValkeyNodes for the replacement's lifecycle. A node only goes from Joining to
// Active, so a replacement still Joining when read was Joining when the eviction or the budget
// answered before.
func probeEviction(t *testing.T, vc *v1.ValkeyCluster, shard, victim, other string, start time.Time) evictionProbe {
	t.Helper()
	ctx := context.Background()
	var p evictionProbe
	var evicted time.Time
	for deadline := time.Now().Add(time.Minute); evicted.IsZero(); time.Sleep(20 * time.Millisecond) {
		var pod corev1.Pod
		err := harness.K8s.Get(ctx, client.ObjectKey{Namespace: vc.Namespace, Name: victim}, &pod)
		if apierrors.IsNotFound(err) || (err == nil && pod.DeletionTimestamp != nil) {
			evicted = time.Now()
		} else if time.Now().After(deadline) {
			p.otherErr = fmt.Errorf("the drain did not evict %s within a minute", victim)
			return p
		}
	}
	p.evictedAfter = evicted.Sub(start)
	cs, err := kubernetes.NewForConfig(harness.Cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(shard)
	budget := client.ObjectKey{Namespace: vc.Namespace, Name: v1.ShardDisruptionBudgetName(vc.Name, n)}
	var once sync.Once
	for deadline := evicted.Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		evErr := dryRunEvict(ctx, cs, vc.Namespace, other)
		at := time.Since(evicted)
		var b policyv1.PodDisruptionBudget
		bErr := harness.K8s.Get(ctx, budget, &b)
		state, synced := replacementState(t, vc, victim, other)
		if bErr == nil {
			p.samples++
			if b.Status.ObservedGeneration == b.Generation && b.Status.DisruptionsAllowed > 0 && !synced {
				p.unsafe = append(p.unsafe, fmt.Sprintf("%s after: %+v (replacement %s)", at.Round(time.Millisecond), b.Status, state))
			}
		}
		switch {
		case apierrors.IsTooManyRequests(evErr):
			once.Do(func() { p.firstRefusal = at })
			p.refused++
			if strings.Contains(evErr.Error(), "still being processed") {
				p.processing++
			}
		case evErr != nil:
			p.otherErr = evErr
			return p
		default:
			p.allowedAfter, p.replacement, p.replacementSynced = at, state, synced
			return p
		}
	}
	return p
}

// dryRunEvict asks the eviction API to evict pod with dry run (nothing is evicted), once: a 429
// is returned as it comes, where client-go would otherwise wait out its Retry-After and ask again.
func dryRunEvict(ctx context.Context, cs kubernetes.Interface, ns, pod string) error {
	ev := &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Namespace: ns, Name: pod},
		DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}},
	}
	// As client-go's Evict does: the policy/v1 client (its encoder) on the core API path.
	return cs.PolicyV1().RESTClient().Post().AbsPath("/api/v1").Namespace(ns).Resource("pods").Name(pod).
		SubResource("eviction").MaxRetries(0).Body(ev).Do(ctx).Error()
}

// replacementState describes the lifecycle of the cluster's ValkeyNodes in the shard of other,
// other than victim and other: the replacement of victim. synced is true when there is one and
// every one is Active.
func replacementState(t *testing.T, vc *v1.ValkeyCluster, victim, other string) (state string, synced bool) {
	t.Helper()
	var list v1.ValkeyNodeList
	if err := harness.K8s.List(context.Background(), &list, client.InNamespace(vc.Namespace)); err != nil {
		return err.Error(), false
	}
	var shard int32 = -1
	for _, n := range list.Items {
		if n.Name == other {
			shard = n.Spec.ShardIndex
		}
	}
	var out []string
	synced = true
	for _, n := range list.Items {
		if n.Name != victim && n.Name != other && n.Spec.ShardIndex == shard {
			out = append(out, n.Name+" "+string(n.Spec.Lifecycle))
			synced = synced && n.Spec.Lifecycle == v1.LifecycleActive
		}
	}
	if len(out) == 0 {
		return "not created", false
	}
	return strings.Join(out, ", "), synced
}

// podExit is how a drained pod went, in durations from the drain's start.
type podExit struct {
	deleting, ended, gone time.Duration
	how                   string
}

func (e podExit) String() string {
	return fmt.Sprintf("deleting %s after the drain began, container seen ended %s after (%s), object gone %s after",
		e.deleting.Round(time.Millisecond), e.ended.Round(time.Millisecond), e.how, e.gone.Round(time.Millisecond))
}

// watchExit polls pod every 100 ms until it is gone, and returns a function that stops and says
// when (from start) its deletion began, its container ended (and how) and the object went.
func watchExit(t *testing.T, ns, pod string, start time.Time) func() podExit {
	t.Helper()
	var mu sync.Mutex
	var e podExit
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		for {
			var p corev1.Pod
			err := harness.K8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: pod}, &p)
			at := time.Since(start)
			mu.Lock()
			if apierrors.IsNotFound(err) {
				e.gone = at
				if e.deleting == 0 {
					e.deleting = at
				}
				mu.Unlock()
				return
			}
			if err == nil && p.DeletionTimestamp != nil && e.deleting == 0 {
				e.deleting = at
			}
			for _, c := range p.Status.ContainerStatuses {
				if term := c.State.Terminated; term != nil && e.ended == 0 {
					e.ended = at
					e.how = fmt.Sprintf("%s, exit code %d, finished %s after the drain began", term.Reason, term.ExitCode, term.FinishedAt.Sub(start).Round(time.Millisecond))
				}
			}
			mu.Unlock()
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	var once sync.Once
	stop := func() { once.Do(func() { close(done); <-finished }) }
	t.Cleanup(stop)
	return func() podExit {
		stop()
		mu.Lock()
		defer mu.Unlock()
		return e
	}
}
