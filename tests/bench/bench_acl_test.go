package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/tests/harness"
	"github.com/gomomento/valkey-operator/tests/localcluster"
)

// BenchmarkACLPropagation measures the time from an ACL change reaching the API server (a user
// bound on the cluster, as `kubectl apply` does) until every node of a 3×1 cluster enforces it
// (AUTH as that user works on all six), split into:
//   - render: until the operator has written the new users.acl into the {cluster}-acl Secret;
//   - volume: from there until the kubelet has refreshed that Secret's volume in every pod (the
//     local kubelet resyncs every 2 s; a real kubelet takes up to its sync period plus its cache
//     TTL, about a minute by default);
//   - operator: the rest, the ACL controller's part: total minus the time spent waiting for the
//     volume, when the nodes had to wait for it. On Valkey 9 the controller loads the mounted
//     file (ACL LOAD), so it waits for the volume; on Valkey 8.0.1 it applies the rendered rules
//     with ACL SETUSER and does not (the volume then only matters to a node that restarts).
//
// Report: go test -run '^$' -bench ACLPropagation -benchtime 5x ./tests/bench/
func BenchmarkACLPropagation(b *testing.B) {
	for _, version := range []string{"8.0.1", localcluster.Valkey9Version} {
		b.Run(version, func(b *testing.B) {
			ctx := context.Background()
			benchRuns++
			ns := fmt.Sprintf("bench-acl-%d", benchRuns)
			if err := ensureNS(ctx, ns); err != nil {
				b.Fatal(err)
			}
			img := harness.NewImage(ns + "-image")
			img.Spec.Tag, img.Spec.Version = version, version
			rw := harness.Role(ns+"-rw", []string{"read", "write"})
			vc := harness.NewCluster(ns, "vc", ns+"-config", harness.WithShards(3), harness.WithReplicas(1))
			for _, o := range []client.Object{img, harness.NewConfig(ns+"-config", img.Name), rw, vc} {
				if err := harness.K8s.Create(ctx, o); err != nil && !isAlreadyExists(err) {
					b.Fatal(err)
				}
			}
			defer func() {
				_ = harness.K8s.Delete(ctx, &corev1.Namespace{ObjectMeta: objectMeta(ns)})
				_ = harness.K8s.Delete(ctx, rw)
			}()
			if _, err := harness.WaitState(ctx, harness.K8s, client.ObjectKeyFromObject(vc), v1.StateActive, harness.FormTimeout); err != nil {
				b.Fatal(err)
			}
			harness.WaitReady(b, vc, 3, 1, nil, harness.FormTimeout)
			var render, volume, operator, total time.Duration
			b.ResetTimer()
			for i := range b.N {
				user, pw := fmt.Sprintf("bench%d", i), fmt.Sprintf("pw-%d-%d", benchRuns, i)
				pods := harness.Pods(b, vc)
				start := time.Now()
				cur := harness.CurrentCluster(b, vc)
				cur.Spec.ACL = append(cur.Spec.ACL, harness.Bind(user, []string{pw}, harness.Permit(rw.Name, "app:*", v1.KeyAccessReadWrite)))
				if err := harness.K8s.Update(ctx, cur); err != nil {
					b.Fatal(err)
				}
				rendered, mounted, enforced := aclMilestones(b, vc, pods, user, pw, start)
				took := enforced
				waited := max(0, min(mounted, enforced)-rendered) // time the nodes spent behind the volume
				b.Logf("%s: %s enforced on all %d nodes after %s (render %s, volume %s after render, last node %s after its file)",
					version, user, len(pods), took.Round(time.Millisecond), rendered.Round(time.Millisecond),
					(mounted - rendered).Round(time.Millisecond), (enforced - mounted).Round(time.Millisecond))
				render += rendered
				volume += mounted - rendered
				operator += took - waited
				total += took
			}
			b.StopTimer()
			n := float64(b.N)
			b.ReportMetric(total.Seconds()/n, "s/enforced")
			b.ReportMetric(render.Seconds()/n, "s/render")
			b.ReportMetric(volume.Seconds()/n, "s/volume")
			b.ReportMetric(operator.Seconds()/n, "s/operator")
		})
	}
}

// aclMilestones polls, from start, until the {cluster}-acl Secret names user (rendered), every
// pod's mounted users.acl does (mounted), and every pod authenticates user with pw (enforced):
// each as a duration since start.
func aclMilestones(b *testing.B, vc *v1.ValkeyCluster, pods []corev1.Pod, user, pw string, start time.Time) (rendered, mounted, enforced time.Duration) {
	b.Helper()
	ctx := context.Background()
	needle := []byte("user " + user + " ")
	deadline := start.Add(2 * time.Minute)
	files := map[string]bool{}
	nodes := map[string]bool{}
	for rendered == 0 || mounted == 0 || enforced == 0 {
		if time.Now().After(deadline) {
			b.Fatalf("%s not everywhere within 2 minutes: rendered %s, %d/%d files, %d/%d nodes", user, rendered, len(files), len(pods), len(nodes), len(pods))
		}
		if rendered == 0 {
			var s corev1.Secret
			if err := harness.K8s.Get(ctx, client.ObjectKey{Namespace: vc.Namespace, Name: vc.Name + "-acl"}, &s); err == nil && bytes.Contains(s.Data["users.acl"], needle) {
				rendered = time.Since(start)
			}
		}
		for _, p := range pods {
			if !files[p.Name] {
				dir, err := harness.Cluster.Kubelet.VolumePath(p.Namespace, p.Name, "secret")
				if err != nil {
					b.Fatal(err)
				}
				if data, err := os.ReadFile(filepath.Join(dir, "users.acl")); err == nil && bytes.Contains(data, needle) {
					files[p.Name] = true
				}
			}
			if !nodes[p.Name] {
				if _, err := harness.NodeDo(p, user, pw, "PING"); err == nil {
					nodes[p.Name] = true
				}
			}
		}
		if mounted == 0 && len(files) == len(pods) {
			mounted = time.Since(start)
		}
		if enforced == 0 && len(nodes) == len(pods) {
			enforced = time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return rendered, mounted, enforced
}
