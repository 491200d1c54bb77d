package observability

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/metrics"
	"github.com/gomomento/valkey-operator/tests/harness"
)

// TestInvalidClusterAddsNoShardSeries: a manifest of 1 000 shards whose config does not exist is
// Invalid and has no pod; the operator's scrape shows its cluster series and no series per
// shard (each Invalid 1 000-shard manifest added 1 036 series, and a hundred of them broke a
// shared scrape limit).
func TestInvalidClusterAddsNoShardSeries(t *testing.T) {
	const ns = "series"
	harness.SetupNamespace(t, ns)
	vc := harness.NewCluster(ns, "big", "no-such-config", harness.WithShards(1000), harness.WithReplicas(0))
	harness.Create(t, vc)
	if _, err := harness.WaitState(context.Background(), harness.K8s, client.ObjectKeyFromObject(vc), v1.StateInvalid, time.Minute); err != nil {
		t.Fatal(err)
	}
	harness.PassMark(t, vc)(1) // a pass after the one that made it Invalid
	code, body, err := harness.GetMetrics(harness.Op.MetricsAddr, harness.MetricsToken(t))
	if err != nil || code != http.StatusOK {
		t.Fatalf("scrape: %d %v", code, err)
	}
	series, perShard := 0, 0
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || !strings.Contains(line, `cluster="big"`) || !strings.Contains(line, `namespace="series"`) {
			continue
		}
		series++
		if strings.Contains(line, `shard="`) {
			perShard++
		}
	}
	t.Logf("the Invalid 1 000-shard cluster has %d series, %d of them per shard", series, perShard)
	if perShard != 0 || series == 0 || series > 60 {
		t.Errorf("%d series, %d per shard: want the cluster's own series (about 36) and none per shard", series, perShard)
	}
}

// TestBadTokensAreLimited: 1 000 scrapes with made-up bearer tokens, 16 at once, cost the
// operator at most its budget of TokenReviews (metrics.ReviewsBurst, then
// metrics.ReviewsPerSecond), counted by the API server itself; the others are refused with 429
// without one. Meanwhile the platform's scraper is served and the operator keeps renewing its
// leader Lease. Before the budget each made-up token was one TokenReview. (Here the operator
// runs as cluster-admin, whose requests API Priority and Fairness exempts, so the Lease cannot
// be starved on this cluster; under a ServiceAccount they share one flow with the reviews.)
func TestBadTokensAreLimited(t *testing.T) {
	ctx := context.Background()
	token := harness.MetricsToken(t)
	cs, err := kubernetes.NewForConfig(harness.Cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	reviews := func() float64 {
		raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := 0.0
		for line := range strings.Lines(string(raw)) {
			if strings.HasPrefix(line, "apiserver_request_total{") && strings.Contains(line, `resource="tokenreviews"`) {
				v, err := strconv.ParseFloat(strings.TrimSpace(line[strings.LastIndexByte(line, ' ')+1:]), 64)
				if err != nil {
					t.Fatalf("parse %q: %v", line, err)
				}
				n += v
			}
		}
		return n
	}
	lease := func() *coordinationv1.Lease {
		l, err := cs.CoordinationV1().Leases("valkey-operator").Get(ctx, "valkey-operator.valkey.gomomento.com", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	if code := scrapeStatus(t, harness.Op.MetricsAddr, token); code != http.StatusOK {
		t.Fatalf("the reader's scrape: %d", code)
	}
	held := lease()
	before := reviews()
	start := time.Now()

	const flood = 1000
	codes := map[int]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range work {
				code, _, err := harness.GetMetrics(harness.Op.MetricsAddr, fmt.Sprintf("made-up-%d-%d", start.UnixNano(), i))
				if err != nil {
					code = -1
				}
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}
		})
	}
	served, renewals, last := 0, 0, held.Spec.RenewTime.Time
	longest := time.Duration(0)
	for i := range flood {
		work <- i
		if i%100 == 99 {
			if code, _, err := harness.GetMetrics(harness.Op.MetricsAddr, token); err == nil && code == http.StatusOK {
				served++
			}
			if l := lease(); l.Spec.RenewTime.After(last) {
				longest = max(longest, l.Spec.RenewTime.Sub(last))
				last, renewals = l.Spec.RenewTime.Time, renewals+1
			}
		}
	}
	close(work)
	wg.Wait()
	elapsed := time.Since(start)
	reviewed := reviews() - before
	after := lease()
	t.Logf("%d made-up tokens in %s: answers %v, %.0f TokenReviews; the reader served %d of 10 times; the Lease renewed %d times seen, the longest gap seen %s",
		flood, elapsed.Round(time.Millisecond), codes, reviewed, served, renewals, longest.Round(time.Millisecond))
	// The budget, the reader's token reviewed again (once a minute) and the pass marks' scrapes.
	if budget := float64(metrics.ReviewsBurst) + metrics.ReviewsPerSecond*elapsed.Seconds() + 3; reviewed > budget {
		t.Errorf("%.0f TokenReviews for %d made-up tokens in %s, want at most %.0f", reviewed, flood, elapsed.Round(time.Millisecond), budget)
	}
	if codes[http.StatusTooManyRequests] < flood/2 {
		t.Errorf("%d made-up tokens refused with 429, want most of %d", codes[http.StatusTooManyRequests], flood)
	}
	if served != flood/100 {
		t.Errorf("the reader's scrape was served %d of %d times during the flood", served, flood/100)
	}
	if *after.Spec.HolderIdentity != *held.Spec.HolderIdentity || time.Since(after.Spec.RenewTime.Time) > 15*time.Second {
		t.Errorf("the Lease: held by %s, renewed %s ago (before the flood: %s)", *after.Spec.HolderIdentity, time.Since(after.Spec.RenewTime.Time).Round(time.Second), *held.Spec.HolderIdentity)
	}
	if exited, code := harness.Op.Exited(); exited {
		t.Fatalf("the operator exited (%d) during the flood", code)
	}
}
