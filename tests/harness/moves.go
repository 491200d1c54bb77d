package harness

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/tests/localcluster"
	"github.com/gomomento/valkey-operator/valkey"
)

// FaultKeys is how many keys the fault tests seed: enough that every slot move carries keys, few
// enough to keep `make test` short (the 200 k figure is TestReshardValkey8's).
const FaultKeys = 50_000

// CheckMethod: on Valkey 9 every `moved slots` line of the namespace says atomic, and there is at
// least one; on 8 every one says classic. Settling an open slot is classic on both.
func CheckMethod(t *testing.T, ns, version string) {
	t.Helper()
	want := logging.MethodClassic
	if version == localcluster.Valkey9Version {
		want = logging.MethodAtomic
	}
	per := map[string]int{}
	for _, l := range ParseLog(t, Op.Logs()) {
		if l.Message() == logging.MsgMovingSlots && strings.HasSuffix(l.Ref(), "."+ns) {
			m, _ := l.Fields[logging.FieldMethod].(string)
			per[m]++
		}
	}
	t.Logf("moved slots lines by method: %v", per)
	if per[want] == 0 {
		t.Errorf("no %q line with method %s", logging.MsgMovingSlots, want)
	}
}

// CheckEvenSpread checks, by the first pod's CLUSTER NODES, that n primaries serve slots and
// that each serves 16384/n slots, give or take one.
func CheckEvenSpread(t *testing.T, vc *v1.ValkeyCluster, n int) {
	t.Helper()
	pods := Pods(t, vc)
	c, err := valkey.NewClient(PodAddr(pods[0]), Creds(t, vc))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	entries, err := c.ClusterNodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var counts []int
	for _, e := range entries {
		if e.Role == valkey.RolePrimary && e.Slots.Count() > 0 {
			counts = append(counts, e.Slots.Count())
		}
	}
	if len(counts) != n {
		t.Fatalf("%d primaries serve slots, want %d: %v", len(counts), n, counts)
	}
	for _, k := range counts {
		if k < valkey.SlotCount/n-1 || k > valkey.SlotCount/n+1 {
			t.Errorf("a primary serves %d slots, want %d±1 (all: %v)", k, valkey.SlotCount/n, counts)
		}
	}
}

// WaitLine waits until the operator logged message for namespace ns more than before times.
func WaitLine(t *testing.T, message, ns string, before int, timeout time.Duration) {
	t.Helper()
	// Every 100 ms: the caller acts right after the line, inside what it announced.
	deadline := time.Now().Add(timeout)
	for CountLines(t, message, ns, "") <= before {
		if time.Now().After(deadline) {
			t.Fatalf("no new %q line within %s", message, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
