package harness

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

var (
	readerTokenOnce sync.Once
	readerToken     string
)

// PassMark returns a function that waits until the operator has made n more reconcile passes over
// vc than when passMark was called (valkey_cluster_reconcile_passes_total): a check that nothing
// more happens must first know that the operator looked, or it passes with an operator that
// stopped. Passes counted by an operator restarted meanwhile count from 0.
func PassMark(t *testing.T, vc *v1.ValkeyCluster) func(n int) {
	t.Helper()
	mark, addr := clusterPasses(t, vc), Op.MetricsAddr
	return func(n int) {
		t.Helper()
		WaitFor(t, fmt.Sprintf("%d operator passes over %s/%s", n, vc.Namespace, vc.Name), 2*time.Minute, func() string {
			got := clusterPasses(t, vc)
			if Op.MetricsAddr != addr || got < mark {
				mark, addr = 0, Op.MetricsAddr // another operator process
			}
			if got-mark >= float64(n) {
				return ""
			}
			return fmt.Sprintf("%v passes", got-mark)
		})
	}
}

// clusterPasses reads valkey_cluster_reconcile_passes_total of vc from the operator's metrics
// endpoint (0 before its first pass).
func clusterPasses(t testing.TB, vc *v1.ValkeyCluster) float64 {
	t.Helper()
	readerTokenOnce.Do(func() { readerToken = MetricsToken(t) })
	var body []byte
	// An operator (re)started a moment ago serves within seconds.
	WaitFor(t, "the operator's metrics", time.Minute, func() string {
		code, b, err := GetMetrics(Op.MetricsAddr, readerToken)
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("scrape: %d", code)
		}
		body = b
		return Problemf(err, "scrape %s", Op.MetricsAddr)
	})
	want := fmt.Sprintf(`cluster=%q`, vc.Name)
	wantNS := fmt.Sprintf(`namespace=%q`, vc.Namespace)
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "valkey_cluster_reconcile_passes_total{") || !strings.Contains(line, want) || !strings.Contains(line, wantNS) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("parse %q: %v", line, err)
		}
		return v
	}
	return 0
}

// PassGaps samples the operator's passes over vc (valkey_cluster_reconcile_passes_total) every
// half second until to, and returns the time between consecutive passes seen from from on, the
// last one being from the last pass to to (a pass overdue counts). It samples on purpose, at its
// own interval: the gaps are what it measures. An operator restarted meanwhile fails the test.
func PassGaps(t testing.TB, vc *v1.ValkeyCluster, from, to time.Time) []time.Duration {
	t.Helper()
	addr := Op.MetricsAddr
	count := clusterPasses(t, vc)
	var seen []time.Time
	for now := time.Now(); now.Before(to); now = time.Now() {
		time.Sleep(500 * time.Millisecond)
		if Op.MetricsAddr != addr {
			t.Fatal("the operator restarted while its passes were sampled")
		}
		if got := clusterPasses(t, vc); got > count {
			count = got
			if now.After(from) {
				seen = append(seen, time.Now())
			}
		}
	}
	var gaps []time.Duration
	last := from
	for _, at := range seen {
		gaps = append(gaps, at.Sub(last))
		last = at
	}
	return append(gaps, to.Sub(last))
}
