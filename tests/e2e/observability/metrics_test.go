package observability

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/tests/harness"
)

// TestMetricsThroughPrometheus: a real Prometheus scrapes the operator's metrics endpoint as a
// platform team's would, over HTTPS with the token of a ServiceAccount bound to the shipped
// valkey-operator-metrics-reader (the endpoint refuses a scrape without a token). A primary of a
// 3x1 is killed: Prometheus then shows the failover counted, the recovery in the histogram, the
// per-node memory of every node, and the cluster's Events say the same; once the cluster is
// deleted its series are gone from the scrape.
func TestMetricsThroughPrometheus(t *testing.T) {
	const ns = "metrics"
	ctx := context.Background()
	token := harness.MetricsToken(t)
	if code := scrapeStatus(t, harness.Op.MetricsAddr, ""); code != http.StatusUnauthorized {
		t.Fatalf("a scrape without a token: %d, want 401", code)
	}
	if code := scrapeStatus(t, harness.Op.MetricsAddr, token); code != http.StatusOK {
		t.Fatalf("a scrape with the reader's token: %d, want 200", code)
	}
	dir := filepath.Join(harness.WorkDir, "prometheus-"+ns)
	prom, err := harness.StartPrometheus(ctx, dir, harness.Op.MetricsAddr, token, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prom.Stop)

	vc := harness.ActiveCluster(t, ns, 3, 1)
	harness.WaitReady(t, vc, 3, 1, nil, harness.FormTimeout)
	sel := fmt.Sprintf(`namespace=%q,cluster=%q`, ns, vc.Name)
	waitQuery(t, prom, `valkey_cluster_ready{`+sel+`} == 1`, 1)
	waitQuery(t, prom, `valkey_cluster_state{`+sel+`,state="Active"} == 1`, 1)
	waitQuery(t, prom, `valkey_cluster_slots_served{`+sel+`} == 16384`, 1)

	// Keys, so that every replica has applied some of its primary's stream (a replica at offset 0
	// is not one the operator promotes: Valkey's own failover would be the only one counted in
	// the histogram, and none in the operator's counter).
	seeded := harness.SeedKeys(t, vc, 2000, harness.OpenUser)
	victim := harness.PodWithRole(t, vc, v1.NodeRolePrimary)
	if err := harness.Cluster.Kubelet.KillPod(ns, victim); err != nil {
		t.Fatal(err)
	}
	harness.WaitReady(t, vc, 3, 1, map[string]bool{victim: true}, harness.HealTimeout)
	harness.CheckSeeded(t, vc, seeded, harness.OpenUser)
	failovers := waitQuery(t, prom, `sum(valkey_cluster_failovers_total{`+sel+`}) >= 1`, 1)
	recovered := waitQuery(t, prom, `valkey_cluster_failover_recovery_seconds_count{`+sel+`} >= 1`, 1)
	sum := waitQuery(t, prom, `valkey_cluster_failover_recovery_seconds_sum{`+sel+`}`, 1)
	memory := waitQuery(t, prom, `valkey_node_used_memory_bytes{`+sel+`} > 0`, 6)
	t.Logf("through Prometheus: %v failovers, %v recoveries taking %.1f s in all, used memory of %d nodes", failovers[0].Value, recovered[0].Value, sum[0].Value, len(memory))
	if kinds, err := prom.Query(ctx, `valkey_cluster_failovers_total{`+sel+`} > 0`); err == nil {
		for _, k := range kinds {
			t.Logf("failovers of kind %s: %v", k.Metric["kind"], k.Value)
		}
	}

	var evs eventsv1.EventList
	if err := harness.K8s.List(ctx, &evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, e := range evs.Items {
		if e.Regarding.Kind == "ValkeyCluster" && e.Regarding.Name == vc.Name {
			reasons = append(reasons, e.Reason+": "+e.Note)
		}
	}
	t.Logf("Events of the cluster:\n  %s", strings.Join(reasons, "\n  "))
	for _, want := range []string{"Transition: cluster formed, transitioning to Active", "Failover: shard"} {
		if !slices.ContainsFunc(reasons, func(r string) bool { return strings.HasPrefix(r, want) }) {
			t.Errorf("no Event %q", want)
		}
	}

	if err := harness.K8s.Delete(ctx, vc); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, "the deleted cluster's series gone", time.Minute, func() string {
		got, err := prom.Query(ctx, `valkey_cluster_state{`+sel+`}`)
		if err == nil && len(got) == 0 {
			return ""
		}
		return fmt.Sprintf("still scraped: %v %v", got, err)
	})
}

// scrapeStatus GETs /metrics at addr over HTTPS with token ("" for none) and returns the status.
func scrapeStatus(t *testing.T, addr, token string) int {
	t.Helper()
	// The operator may have (re)started a moment ago: its endpoint is up within seconds.
	var code int
	harness.WaitFor(t, "the metrics endpoint", time.Minute, func() string {
		var err error
		code, _, err = harness.GetMetrics(addr, token)
		return harness.Problemf(err, "GET %s", addr)
	})
	return code
}

// waitQuery waits until the instant query returns at least n series and returns them.
func waitQuery(t *testing.T, p *harness.Prometheus, promql string, n int) []harness.Sample {
	t.Helper()
	var got []harness.Sample
	harness.WaitFor(t, fmt.Sprintf("%d series of %s", n, promql), 2*time.Minute, func() string {
		var err error
		got, err = p.Query(context.Background(), promql)
		if err == nil && len(got) >= n {
			return ""
		}
		return fmt.Sprintf("%d series, error %v", len(got), err)
	})
	return got
}
