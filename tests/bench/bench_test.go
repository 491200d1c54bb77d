package bench

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/tests/harness"
	"github.com/gomomento/valkey-operator/valkey"
)

// BenchmarkApplyToActive measures, on the local cluster with the real operator, the time from
// creating a ValkeyCluster to Ready, split into
//   - pod start: until every desired pod is Running with an IP (the operator's pod creation,
//     scheduler, kubelet, process start);
//   - formation: from there until Valkey itself says cluster_state:ok with every slot assigned
//     on every node (meet, slots, agreement);
//   - replica sync: from there until every replica's master_link_status is up;
//   - ready: from there until the Ready condition is True (how late the status tells it).
//
// s/active is create to status.state Active, as before.
// Report: go test -run '^$' -bench ApplyToActive -benchtime 3x ./tests/bench/
func BenchmarkApplyToActive(b *testing.B) {
	ctx := context.Background()
	img, cfg := harness.NewImage("bench-image"), harness.NewConfig("bench-config", "bench-image")
	for _, o := range []client.Object{img, cfg} {
		if err := harness.K8s.Create(ctx, o); err != nil && !isAlreadyExists(err) {
			b.Fatal(err)
		}
	}
	for _, shape := range []struct{ shards, replicas int32 }{{3, 1}, {10, 1}} {
		b.Run(fmt.Sprintf("%dx%d", shape.shards, shape.replicas), func(b *testing.B) {
			var sum [5]time.Duration // pods, formed, synced, ready, active (each since create)
			for range b.N {
				benchRuns++
				ns := fmt.Sprintf("bench-%dx%d-%d", shape.shards, shape.replicas, benchRuns)
				if err := ensureNS(ctx, ns); err != nil {
					b.Fatal(err)
				}
				vc := harness.NewCluster(ns, "vc", "bench-config", harness.WithShards(shape.shards), harness.WithReplicas(shape.replicas))
				start := time.Now()
				if err := harness.K8s.Create(ctx, vc); err != nil {
					b.Fatal(err)
				}
				want := int(shape.shards * (shape.replicas + 1))
				var at [5]time.Duration
				deadline := start.Add(harness.FormTimeout)
				for at[3] == 0 || at[4] == 0 || at[2] == 0 {
					since := time.Since(start)
					if at[0] == 0 && runningPods(ctx, vc) == want {
						at[0] = since
					}
					if at[0] != 0 && (at[1] == 0 || at[2] == 0) {
						formed, synced := valkeyProgress(ctx, vc)
						if at[1] == 0 && formed {
							at[1] = since
						}
						if at[1] != 0 && at[2] == 0 && synced {
							at[2] = since
						}
					}
					var got v1.ValkeyCluster
					if err := harness.K8s.Get(ctx, client.ObjectKeyFromObject(vc), &got); err == nil {
						if at[4] == 0 && got.Status.State == v1.StateActive {
							at[4] = since
						}
						if at[3] == 0 && meta.IsStatusConditionTrue(got.Status.Conditions, v1.ConditionReady) {
							at[3] = since
						}
					}
					if time.Now().After(deadline) {
						b.Fatalf("%s not Ready after %s (reached: %v)", ns, harness.FormTimeout, at)
					}
					time.Sleep(50 * time.Millisecond)
				}
				for i := range at {
					sum[i] += at[i]
				}
				b.StopTimer()
				_ = harness.K8s.Delete(ctx, &corev1.Namespace{ObjectMeta: objectMeta(ns)})
				b.StartTimer()
			}
			n := float64(b.N)
			b.ReportMetric(sum[0].Seconds()/n, "s/pods-running")
			b.ReportMetric((sum[1]-sum[0]).Seconds()/n, "s/formation")
			b.ReportMetric((sum[2]-sum[1]).Seconds()/n, "s/replica-sync")
			b.ReportMetric((sum[3]-sum[2]).Seconds()/n, "s/sync-to-ready")
			b.ReportMetric(sum[3].Seconds()/n, "s/ready")
			b.ReportMetric(sum[4].Seconds()/n, "s/active")
		})
	}
}

// valkeyProgress asks the cluster's running pods: formed when every one says cluster_state:ok
// with every slot assigned and knows all of them; synced when, besides, all the replicas the
// spec asks for are replicas with their link up (a node not yet attached is an empty primary,
// which must not count as synced).
func valkeyProgress(ctx context.Context, vc *v1.ValkeyCluster) (formed, synced bool) {
	var list corev1.PodList
	if err := harness.K8s.List(ctx, &list, client.InNamespace(vc.Namespace), client.MatchingLabels{v1.LabelCluster: vc.Name}); err != nil {
		return false, false
	}
	var addrs []string
	for _, p := range list.Items {
		if p.Status.PodIP != "" {
			addrs = append(addrs, harness.PodAddr(p))
		}
	}
	var s corev1.Secret
	if err := harness.K8s.Get(ctx, client.ObjectKey{Namespace: vc.Namespace, Name: v1.OperatorAuthSecretName(vc.Name)}, &s); err != nil {
		return false, false
	}
	creds := valkey.Credentials{Username: "_momento_operator", Password: string(s.Data["operator-password"])}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	linked := 0
	for _, v := range valkey.Observe(ctx, addrs, creds) {
		if !v.Reachable || !v.ClusterStateOK() || v.ClusterInfo["cluster_slots_assigned"] != "16384" || v.ClusterInfo["cluster_known_nodes"] != strconv.Itoa(len(addrs)) {
			return false, false
		}
		if me, _ := v.Myself(); me.Role == valkey.RoleReplica && v.ReplicaLinkUp() {
			linked++
		}
	}
	return len(addrs) > 0, linked == int(vc.Spec.Shards*vc.Spec.ReplicasPerShard)
}

// killBench is the 3x1 cluster BenchmarkPrimaryKilled reuses: the framework calls a benchmark
// once with b.N = 1 and again with the -benchtime count, and each run heals the cluster.
var killBench *v1.ValkeyCluster

// BenchmarkPrimaryKilled kills a primary of a Ready 3x1 cluster (SIGKILL) while 16 writers
// write, and reports the longest time a slot refused writes and the time until the cluster is
// Ready again (Ready condition and Valkey agreeing). Issue 8 measured 7.8-9.1 s and ~41 s on
// main; its goal is <= 2 s and <= 10 s. Keys lost are reported (never asserted here; the
// tests assert).
func BenchmarkPrimaryKilled(b *testing.B) {
	if killBench == nil {
		killBench = benchCluster(b, "bench-kill", 3, 1)
	}
	vc := killBench
	var refusal, ready time.Duration
	lost := 0
	for range b.N {
		b.StopTimer()
		harness.WaitReady(b, vc, 3, 1, nil, harness.FormTimeout)
		w, opts := harness.StartClusterWriter(b, vc)
		victim := harness.PodWithRole(b, vc, v1.NodeRolePrimary)
		b.StartTimer()
		start := time.Now()
		if err := harness.Cluster.Kubelet.KillPod(vc.Namespace, victim); err != nil {
			b.Fatal(err)
		}
		ready += harness.WaitReady(b, vc, 3, 1, map[string]bool{victim: true}, harness.HealTimeout).Sub(start)
		b.StopTimer()
		if err := w.WaitAcked(20, time.Minute); err != nil {
			b.Error(err)
		}
		r, err := w.Report(context.Background(), harness.ClusterWriterOptions(b, vc, opts.Prefix))
		if err != nil {
			b.Fatal(err)
		}
		w.Close()
		b.Log(r.String())
		d, _ := r.LongestRefusal()
		refusal += d
		lost += r.LostReplicated + r.LostUnreplicated
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(refusal.Seconds()/n, "s/longest-refusal")
	b.ReportMetric(ready.Seconds()/n, "s/ready-after-kill")
	b.ReportMetric(float64(lost)/n, "keys-lost/kill")
}

// benchRuns numbers the benchmark's namespaces: the framework calls a benchmark more than
// once, and a namespace being deleted cannot be reused.
var benchRuns int

func runningPods(ctx context.Context, vc *v1.ValkeyCluster) int {
	var list corev1.PodList
	if err := harness.K8s.List(ctx, &list, client.InNamespace(vc.Namespace), client.MatchingLabels{v1.LabelCluster: vc.Name}); err != nil {
		return -1
	}
	n := 0
	for _, p := range list.Items {
		if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
			n++
		}
	}
	return n
}

// benchCluster creates a cluster of the given shape in a new namespace ns (its own image and
// config) and waits until it is Active. Unlike activeCluster nothing is deleted when the
// benchmark function returns: benchmarks reuse it across the framework's calls, and the local
// cluster goes away with the test binary.
func benchCluster(b *testing.B, ns string, shards, replicas int32, version ...string) *v1.ValkeyCluster {
	b.Helper()
	return benchClusterWith(b, ns, shards, replicas, nil, version...)
}

// benchClusterWith is benchCluster with the ValkeyConfig changed by tune before it is created.
func benchClusterWith(b *testing.B, ns string, shards, replicas int32, tune func(*v1.ValkeyConfig), version ...string) *v1.ValkeyCluster {
	b.Helper()
	ctx := context.Background()
	if err := ensureNS(ctx, ns); err != nil {
		b.Fatal(err)
	}
	vc := harness.NewCluster(ns, "vc", ns+"-config", harness.WithShards(shards), harness.WithReplicas(replicas))
	img := harness.NewImage(ns + "-image")
	if len(version) > 0 {
		img.Spec.Tag, img.Spec.Version = version[0], version[0]
	}
	cfg := harness.NewConfig(ns+"-config", ns+"-image")
	if tune != nil {
		tune(cfg)
	}
	for _, o := range []client.Object{img, cfg, vc} {
		if err := harness.K8s.Create(ctx, o); err != nil && !isAlreadyExists(err) {
			b.Fatal(err)
		}
	}
	got, err := harness.WaitState(ctx, harness.K8s, client.ObjectKeyFromObject(vc), v1.StateActive, harness.FormTimeout)
	if err != nil {
		b.Fatal(err)
	}
	return got
}
