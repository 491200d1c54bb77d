package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/slot"
	"github.com/gomomento/valkey-operator/tests/harness"
	"github.com/gomomento/valkey-operator/valkey"
)

// BenchmarkBaseline puts every kind of fault the chaos suite injects beside its baseline: the
// same fault, at the same moment, on a twin of the managed cluster (harness.Twin: the same pods,
// config and placement, formed by hand, no operator), on the same machine under the same load.
// For each it reports the longest run of refused writes on one slot, the operator's and Valkey's
// alone, over the shard the fault hit and over the other shards (which refuse too while a shard
// is down under cluster-require-full-coverage yes, Valkey's default).
//
// The operator only ever shortens a window: managed <= baseline for every kind, and a dead
// primary's container costs at most about a second.
//
// Report: make bench BENCH=Baseline (3 runs of each kind, about 40 min here); one kind:
// make bench BENCH=Baseline/kill. BASELINE_VALKEY=9.1.2 runs them on Valkey 9.
func BenchmarkBaseline(b *testing.B) {
	for _, k := range baselineKinds {
		b.Run(k.name, func(b *testing.B) { runBaseline(b, k) })
	}
}

// baselineKind is one fault, injected into the managed cluster and its twin at once.
type baselineKind struct {
	name             string
	shards, replicas int32
	// noFullCoverage sets cluster-require-full-coverage no on both.
	noFullCoverage bool
	// inject faults both sides and returns what to undo afterwards (a network to restore, a
	// node to start), or nil.
	inject func(b *testing.B, sides []*baseSide) (restore func())
}

// CutFor and StopFor are how long a cut network and a stopped node stay so, as in the chaos
// schedule (15 s cuts, 17–36 s stops).
const (
	CutFor  = 15 * time.Second
	StopFor = 20 * time.Second
	// TwinBound bounds the wait for a twin to take writes again: a quorum loss never heals
	// without an operator's TAKEOVER.
	TwinBound = 90 * time.Second
)

var baselineKinds = []baselineKind{
	{name: "kill", shards: 3, replicas: 1, inject: func(b *testing.B, sides []*baseSide) func() {
		for _, s := range sides {
			s.kill(b, s.pod(b, 0, true, 0))
		}
		return nil
	}},
	{name: "delete-pod", shards: 3, replicas: 1, inject: func(b *testing.B, sides []*baseSide) func() {
		for _, s := range sides {
			s.delete(b, s.pod(b, 0, true, 0))
		}
		return nil
	}},
	{name: "cut-network", shards: 3, replicas: 1, inject: cutPrimary},
	{name: "cut-network-coverage-no", shards: 3, replicas: 1, noFullCoverage: true, inject: cutPrimary},
	// Two primaries: a cut leaves one of two, no majority, and Valkey alone never fails the
	// shard over while the cut lasts (the 2x2 of chaos seed 60606's network cuts).
	{name: "cut-network-2x2", shards: 2, replicas: 2, inject: cutPrimary},
	{name: "stop-node", shards: 3, replicas: 1, inject: func(b *testing.B, sides []*baseSide) func() {
		// The twin runs its copies where the managed cluster's run, so the node holds the same
		// roles of both.
		node := sides[0].pod(b, 0, true, 0).Spec.NodeName
		for _, s := range sides[1:] {
			if got := s.pod(b, 0, true, 0).Spec.NodeName; got != node {
				b.Logf("the twin's primary of shard 0 runs on %s, the managed one's on %s", got, node)
			}
		}
		b.Logf("stopping %s: %s", node, describeNode(b, sides, node))
		if err := harness.Cluster.Kubelet.StopNode(node); err != nil {
			b.Fatal(err)
		}
		return func() {
			if err := harness.Cluster.Kubelet.StartNode(node); err != nil {
				b.Error(err)
			}
		}
	}},
	// Chaos seed 60606, tls +08:08: the primary killed right after a graceful failover made it
	// one (the spread's, a roll's), while the other primaries may still see the old primary as a
	// primary and refuse it their vote.
	{name: "kill-after-handover", shards: 3, replicas: 1, inject: func(b *testing.B, sides []*baseSide) func() {
		// Each side kills its new primary as soon as the handover shows in the two nodes' own
		// views, the sides side by side.
		errs := make(chan error, len(sides))
		for _, s := range sides {
			old, replica := s.pod(b, 0, true, 0), s.pod(b, 0, false, 0)
			go func() {
				err := harness.Handover(b.Context(), replica, old, s.creds([]corev1.Pod{replica, old}))
				if err == nil {
					s.at = time.Now()
					err = harness.Cluster.Kubelet.KillPod(replica.Namespace, replica.Name)
				}
				errs <- err
			}()
		}
		for range sides {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
		return nil
	}},
	// Chaos seed 60606, tls +03:09: a primary killed and a replica of another shard deleted.
	{name: "pair", shards: 3, replicas: 1, inject: func(b *testing.B, sides []*baseSide) func() {
		for _, s := range sides {
			p, r := s.pod(b, 0, true, 0), s.pod(b, 1, false, 0)
			s.kill(b, p)
			s.delete(b, r)
		}
		return nil
	}},
}

// cutPrimary cuts shard 0's primary's network on both sides for CutFor.
func cutPrimary(b *testing.B, sides []*baseSide) func() {
	var cut []corev1.Pod
	for _, s := range sides {
		p := s.pod(b, 0, true, 0)
		if err := harness.Cluster.Kubelet.CutPodNetwork(p.Namespace, p.Name); err != nil {
			b.Fatal(err)
		}
		cut = append(cut, p)
	}
	return func() {
		time.Sleep(time.Until(sides[0].at.Add(CutFor)))
		for _, p := range cut {
			// The operator may have replaced the pod meanwhile: nothing left to restore.
			_ = harness.Cluster.Kubelet.RestorePodNetwork(p.Namespace, p.Name)
		}
	}
}

// baseSide is one of the two clusters faulted: the managed one or its twin.
type baseSide struct {
	name   string
	vc     *v1.ValkeyCluster // the managed cluster
	twin   *harness.Twin     // nil on the managed side
	writer *harness.Writer
	at     time.Time // when the fault was injected
	// shard0 are the slots of the shard the faults hit (shard 0), for telling its refusals
	// from the other shards'.
	shard0 slot.Set
}

func (s *baseSide) pod(b *testing.B, shard int, primary bool, pick int) corev1.Pod {
	b.Helper()
	var p corev1.Pod
	var err error
	if s.twin != nil {
		p, err = s.twin.Resolve(b.Context(), shard, primary, pick)
	} else {
		p, err = harness.ShardPod(b.Context(), s.vc, func([]corev1.Pod) valkey.Credentials { return harness.Creds(b, s.vc) }, shard, primary, pick)
	}
	if err != nil {
		b.Fatal(err)
	}
	return p
}

func (s *baseSide) creds(pods []corev1.Pod) valkey.Credentials {
	if s.twin != nil {
		return s.twin.Creds(pods)
	}
	creds, _ := harness.OperatorCreds(context.Background(), harness.K8s, s.vc)
	return creds
}

func (s *baseSide) kill(b *testing.B, p corev1.Pod) {
	b.Helper()
	if err := harness.Cluster.Kubelet.KillPod(p.Namespace, p.Name); err != nil {
		b.Fatal(err)
	}
}

func (s *baseSide) delete(b *testing.B, p corev1.Pod) {
	b.Helper()
	if err := harness.K8s.Delete(b.Context(), &p); err != nil && !apierrors.IsNotFound(err) {
		b.Fatal(err)
	}
}

// window is the longest refusal on one slot that began after the fault (less half a second,
// the writer's own lag), on shard 0's slots and on the others'.
func (s *baseSide) window(until time.Time) (hit, others time.Duration) {
	for _, r := range s.writer.Refusals() {
		if r.Start.Before(s.at.Add(-500*time.Millisecond)) || r.Start.After(until) {
			continue
		}
		d := r.End.Sub(r.Start)
		if s.shard0.Contains(r.Slot) {
			hit = max(hit, d)
		} else {
			others = max(others, d)
		}
	}
	return hit, others
}

// baseClusters are the managed clusters of the benchmark, one per shape and coverage, reused
// across runs: each run waits for it to be Ready again.
var baseClusters = map[string]*v1.ValkeyCluster{}

func baseCluster(b *testing.B, k baselineKind) *v1.ValkeyCluster {
	key := fmt.Sprintf("%dx%d-%v", k.shards, k.replicas, k.noFullCoverage)
	if vc := baseClusters[key]; vc != nil {
		return vc
	}
	version := os.Getenv("BASELINE_VALKEY")
	if version == "" {
		version = "8.0.1"
	}
	ns := fmt.Sprintf("bench-base-%dx%d", k.shards, k.replicas)
	if k.noFullCoverage {
		ns += "-nfc"
	}
	vc := benchClusterWith(b, ns, k.shards, k.replicas, func(c *v1.ValkeyConfig) {
		if k.noFullCoverage {
			c.Spec.Valkey["cluster-require-full-coverage"] = "no"
		}
	}, version)
	baseClusters[key] = vc
	return vc
}

func runBaseline(b *testing.B, k baselineKind) {
	vc := baseCluster(b, k)
	var sum, worst [2][2]time.Duration // [managed, twin][hit, others]
	for run := range b.N {
		b.StopTimer()
		harness.WaitReady(b, vc, int(k.shards), int(k.replicas), nil, harness.HealTimeout)
		harness.WaitPrimariesSpread(b, vc)
		w, wopts := harness.StartClusterWriter(b, vc)
		twin, err := harness.BuildTwin(b.Context(), harness.TwinOptions{K8s: harness.K8s, Managed: vc, Name: "twin",
			Writer: harness.WriterOptions{Prefix: wopts.Prefix, Interval: wopts.Interval, WaitEvery: wopts.WaitEvery}})
		if err != nil {
			b.Fatal(err)
		}
		even := slot.EvenSpread(int(k.shards))
		sides := []*baseSide{
			{name: "managed", vc: vc, writer: w, shard0: slot.Set{even[0]}},
			{name: "baseline", vc: vc, twin: twin, writer: twin.Writer, shard0: slot.Set{even[0]}},
		}
		if err := w.WaitAcked(5, time.Minute); err != nil {
			b.Fatal(err)
		}
		b.Logf("run %d: managed %s; twin %s", run, describeCluster(b, vc), twin.Describe(b.Context()))
		b.StartTimer()
		at := time.Now()
		for _, s := range sides {
			s.at = at
		}
		restore := k.inject(b, sides)
		if restore != nil {
			if k.name == "stop-node" {
				time.Sleep(time.Until(at.Add(StopFor)))
			}
			restore()
		}
		// The managed side: Ready again with every copy; the baseline: writes taken on every slot
		// again, or TwinBound.
		twinDone := make(chan time.Time, 1)
		go func() {
			_ = twin.Writer.WaitAcked(3, TwinBound)
			twinDone <- time.Now()
		}()
		harness.WaitReady(b, vc, int(k.shards), int(k.replicas), nil, harness.HealTimeout)
		if err := w.WaitAcked(3, time.Minute); err != nil {
			b.Error(err)
		}
		twinEnd := <-twinDone
		b.StopTimer()
		var got [2][2]time.Duration
		got[0][0], got[0][1] = sides[0].window(time.Now())
		got[1][0], got[1][1] = sides[1].window(twinEnd)
		r, err := w.Report(context.Background(), harness.ClusterWriterOptions(b, vc, wopts.Prefix))
		if err != nil {
			b.Fatal(err)
		}
		w.Close()
		if r.LostReplicated > 0 {
			b.Errorf("%d writes acknowledged by WAIT 1 lost", r.LostReplicated)
		}
		twin.Delete(context.Background())
		b.Logf("run %d %s: longest refusal, shard hit / other shards: managed %s / %s, baseline %s / %s%s; managed writer: %d acknowledged, %d lost unreplicated",
			run, k.name, got[0][0].Round(10*time.Millisecond), got[0][1].Round(10*time.Millisecond),
			got[1][0].Round(10*time.Millisecond), got[1][1].Round(10*time.Millisecond), unhealed(twinEnd.Sub(at)), r.Acked, r.LostUnreplicated)
		for i := range got {
			for j := range got[i] {
				sum[i][j] += got[i][j]
				worst[i][j] = max(worst[i][j], got[i][j])
			}
		}
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(sum[0][0].Seconds()/n, "s/managed-hit")
	b.ReportMetric(sum[1][0].Seconds()/n, "s/baseline-hit")
	b.ReportMetric(sum[0][1].Seconds()/n, "s/managed-others")
	b.ReportMetric(sum[1][1].Seconds()/n, "s/baseline-others")
	b.ReportMetric(worst[0][0].Seconds(), "s/managed-hit-max")
	b.ReportMetric(worst[1][0].Seconds(), "s/baseline-hit-max")
}

// unhealed says when the twin did not take writes again within TwinBound.
func unhealed(d time.Duration) string {
	if d >= TwinBound {
		return fmt.Sprintf(" (baseline not healed within %s)", TwinBound)
	}
	return ""
}

// describeCluster is the managed cluster's layout for the log: node: pod(role) ...
func describeCluster(b *testing.B, vc *v1.ValkeyCluster) string {
	nodes := map[string][]string{}
	for _, p := range harness.Pods(b, vc) {
		role := "replica"
		if primary, _, err := harness.NodeRole(b.Context(), p, harness.Creds(b, vc)); err == nil && primary {
			role = "primary"
		}
		nodes[p.Spec.NodeName] = append(nodes[p.Spec.NodeName], fmt.Sprintf("%s(shard %s %s)", p.Name, p.Labels[v1.LabelShard], role))
	}
	var out []string
	for n, pods := range nodes {
		slices.Sort(pods)
		out = append(out, n+": "+strings.Join(pods, " "))
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// describeNode lists what runs on node, on each side.
func describeNode(b *testing.B, sides []*baseSide, node string) string {
	var out []string
	for _, s := range sides {
		if s.twin == nil {
			for _, p := range harness.Pods(b, s.vc) {
				if p.Spec.NodeName == node {
					out = append(out, p.Name)
				}
			}
			continue
		}
		pods, _ := s.twin.Pods(b.Context())
		for _, p := range pods {
			if p.Spec.NodeName == node {
				out = append(out, p.Name)
			}
		}
	}
	return strings.Join(out, " ")
}
