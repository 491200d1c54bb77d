package harness

import (
	"testing"
	"time"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// LiveTimeout bounds the wait for a live setting to reach every node: a safety net, not a speed
// claim (BenchmarkLiveConfig measures it).
const LiveTimeout = time.Minute

// WaitLiveSettings waits until every running pod of vc answers CONFIG GET with want.
func WaitLiveSettings(t testing.TB, vc *v1.ValkeyCluster, want map[string]string, timeout time.Duration) {
	t.Helper()
	WaitFor(t, "live settings applied", timeout, func() string {
		miss := ""
		for _, p := range Pods(t, vc) {
			for k, v := range want {
				if got := ConfigGet(t, p, k); got != v {
					miss = p.Name + ": " + k + " = " + got
				}
			}
		}
		return miss
	})
}
