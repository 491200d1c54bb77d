package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/tests/harness"
	"github.com/gomomento/valkey-operator/tests/localcluster"
)

// demo builds and runs the operator against c, applies manifests/samples/demo.yaml (a
// ValkeyImage, a ValkeyConfig and a 3×1 ValkeyCluster), waits for Active and prints how to
// reach the cluster. The operator stops with the local cluster.
func demo(ctx context.Context, c *localcluster.Cluster) error {
	fmt.Fprintln(os.Stderr, "building the operator...")
	bin, err := harness.BuildOperator(c.Dir)
	if err != nil {
		return err
	}
	if err := harness.InstallCRDs(c); err != nil {
		return fmt.Errorf("install CRDs: %w", err)
	}
	k8s, err := harness.Client(c)
	if err != nil {
		return err
	}
	if err := harness.EnsureNamespace(ctx, k8s, "valkey-operator"); err != nil {
		return err
	}
	op, err := harness.StartOperator(bin, c, c.Dir, "operator", "RUST_LOG=info")
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		op.Kill(syscall.SIGTERM)
	}()
	sample := filepath.Join(harness.RepoRoot(), "manifests", "samples", "demo.yaml")
	if out, err := harness.Kubectl(c, nil, "apply", "-f", sample); err != nil {
		return err
	} else {
		fmt.Print(string(out))
	}
	fmt.Fprintln(os.Stderr, "waiting for my-app/my-cluster to become Active...")
	start := time.Now()
	key := client.ObjectKey{Namespace: "my-app", Name: "my-cluster"}
	if _, err := harness.WaitState(ctx, k8s, key, v1.StateActive, 5*time.Minute); err != nil {
		return fmt.Errorf("%w (operator log: %s)", err, op.Stdout)
	}
	fmt.Printf("my-app/my-cluster is Active after %s\n\n", time.Since(start).Round(100*time.Millisecond))
	out, _ := harness.Kubectl(c, nil, "get", "valkeycluster", "-n", "my-app")
	fmt.Println(string(out))
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace("my-app"), client.MatchingLabels{v1.LabelCluster: "my-cluster"}); err != nil {
		return err
	}
	ip := ""
	for _, p := range pods.Items {
		if p.Status.PodIP != "" {
			ip = p.Status.PodIP
			break
		}
	}
	promLine := "  (no Prometheus: make prometheus builds it)\n"
	if token, err := harness.MetricsReaderToken(ctx, k8s); err != nil {
		fmt.Fprintln(os.Stderr, "prometheus:", err)
	} else if prom, err := harness.StartPrometheus(ctx, filepath.Join(c.Dir, "prometheus"), op.MetricsAddr, token, 5*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "prometheus:", err)
	} else {
		go func() {
			<-ctx.Done()
			prom.Stop()
		}()
		promLine = fmt.Sprintf("  %[1]s (its API; the UI is not built in)\n"+
			"  curl -s %[1]s/api/v1/query --data-urlencode 'query=valkey_node_used_memory_bytes{cluster=\"my-cluster\"}' | jq -r '.data.result[] | \"\\(.metric.pod) \\(.value[1])\"'\n", prom.URL)
	}
	fmt.Printf(`reach it:
  export KUBECONFIG=%[1]s PATH=%[4]s:$PATH
  kubectl get valkeycluster -A
  kubectl -n my-app get pods -o wide
  valkey-cli -c -h %[2]s -p 6379 set greeting hello
  valkey-cli -c -h %[2]s -p 6379 get greeting
  valkey-cli -h %[2]s -p 6379 cluster info

the operator's log (JSON lines, as in the log contract):
  %[3]s
  jq 'select(.fields.cluster_name == "my-cluster")' %[3]s

a Prometheus scraping the operator's metrics (https://%[5]s/metrics, with a ServiceAccount token):
%[6]s
`, c.Kubeconfig, ip, op.Stdout, localcluster.DefaultBinDir(), op.MetricsAddr, promLine)
	return nil
}
