package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
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
	lane(t)
	const ns = "metrics"
	ctx := context.Background()
	token := metricsReaderToken(t)
	if code := scrapeStatus(t, operator.MetricsAddr, ""); code != http.StatusUnauthorized {
		t.Fatalf("a scrape without a token: %d, want 401", code)
	}
	if code := scrapeStatus(t, operator.MetricsAddr, token); code != http.StatusOK {
		t.Fatalf("a scrape with the reader's token: %d, want 200", code)
	}
	dir := filepath.Join(workDir, "prometheus-"+ns)
	prom, err := harness.StartPrometheus(ctx, dir, operator.MetricsAddr, token, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prom.Stop)

	vc := activeCluster(t, ns, 3, 1)
	waitReady(t, vc, 3, 1, nil, formTimeout)
	sel := fmt.Sprintf(`namespace=%q,cluster=%q`, ns, vc.Name)
	waitQuery(t, prom, `valkey_cluster_ready{`+sel+`} == 1`, 1)
	waitQuery(t, prom, `valkey_cluster_state{`+sel+`,state="Active"} == 1`, 1)
	waitQuery(t, prom, `valkey_cluster_slots_served{`+sel+`} == 16384`, 1)

	// Keys, so that every replica has applied some of its primary's stream (a replica at offset 0
	// is not one the operator promotes: Valkey's own failover would be the only one counted in
	// the histogram, and none in the operator's counter).
	seeded := seedKeys(t, vc, 2000, openUser)
	victim := podWithRole(t, vc, v1.NodeRolePrimary)
	if err := cluster.Kubelet.KillPod(ns, victim); err != nil {
		t.Fatal(err)
	}
	waitReady(t, vc, 3, 1, map[string]bool{victim: true}, healTimeout)
	checkSeeded(t, vc, seeded, openUser)
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
	if err := k8s.List(ctx, &evs, client.InNamespace(ns)); err != nil {
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

	if err := k8s.Delete(ctx, vc); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		got, err := prom.Query(ctx, `valkey_cluster_state{`+sel+`}`)
		if err == nil && len(got) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deleted cluster's series are still scraped: %v %v", got, err)
		}
		time.Sleep(time.Second)
	}
}

// metricsReaderToken is harness.MetricsReaderToken, for a test.
func metricsReaderToken(t *testing.T) string {
	t.Helper()
	token, err := harness.MetricsReaderToken(context.Background(), k8s)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// scrapeStatus GETs /metrics at addr over HTTPS with token ("" for none) and returns the status.
func scrapeStatus(t *testing.T, addr, token string) int {
	t.Helper()
	// The operator may have (re)started a moment ago: its endpoint is up within seconds.
	deadline := time.Now().Add(time.Minute)
	for {
		code, _, err := getMetrics(addr, token)
		if err == nil {
			return code
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// getMetrics GETs /metrics at addr over HTTPS with token ("" for none), once, and returns the
// status and the body.
func getMetrics(addr, token string) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodGet, "https://"+addr+"/metrics", nil)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the operator's self-signed certificate
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// waitQuery waits until the instant query returns at least n series and returns them.
func waitQuery(t *testing.T, p *harness.Prometheus, promql string, n int) []harness.Sample {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got, err := p.Query(context.Background(), promql)
		if err == nil && len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus: %s gave %d series (want %d): %v", promql, len(got), n, err)
		}
		time.Sleep(time.Second)
	}
}
