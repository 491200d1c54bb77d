package heal

import (
	"context"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gomomento/valkey-operator/tests/harness"
)

// TestRestartedOperatorLeadsAtOnce: the operator's container dies (SIGKILL: its lease is not
// released) and starts again in the same pod. It holds the lease by the pod's name (POD_NAME), so
// it takes the lease back at once instead of waiting out the one the dead process held (15 s),
// during which no operator heals anything. The Lease must be renewed by the new process before
// the dead one's lease would have expired, and held under the same name.
func TestRestartedOperatorLeadsAtOnce(t *testing.T) {
	ctx := context.Background()
	key := client.ObjectKey{Namespace: "valkey-operator", Name: "valkey-operator.valkey.gomomento.com"}
	var before coordinationv1.Lease
	harness.WaitFor(t, "the operator to hold its lease", time.Minute, func() string {
		if err := harness.K8s.Get(ctx, key, &before); err != nil {
			return err.Error()
		}
		if before.Spec.HolderIdentity == nil || before.Spec.RenewTime == nil {
			return "no holder yet"
		}
		return ""
	})
	if *before.Spec.HolderIdentity != "local-operator" {
		t.Fatalf("lease held by %q, want the operator's pod name local-operator", *before.Spec.HolderIdentity)
	}
	harness.Op.Kill(syscall.SIGKILL)
	killed := time.Now()
	var err error
	if harness.Op, err = harness.StartOperator(harness.OperatorBinary, harness.Cluster, harness.WorkDir, "operator", "RUST_LOG=info"); err != nil {
		t.Fatal(err)
	}
	// The dead process's lease runs until its last renewal plus the lease's duration.
	var last coordinationv1.Lease
	if err := harness.K8s.Get(ctx, key, &last); err != nil {
		t.Fatal(err)
	}
	expires := last.Spec.RenewTime.Add(time.Duration(*last.Spec.LeaseDurationSeconds) * time.Second)
	var after coordinationv1.Lease
	harness.WaitFor(t, "the restarted operator to renew the lease", time.Minute, func() string {
		if err := harness.K8s.Get(ctx, key, &after); err != nil {
			return err.Error()
		}
		if after.Spec.RenewTime != nil && after.Spec.RenewTime.After(killed) {
			return ""
		}
		return "not renewed since the kill"
	})
	renewed := after.Spec.RenewTime.Time
	t.Logf("lease renewed %s after the kill, by %s; the dead process's lease ran until %s after it",
		renewed.Sub(killed).Round(time.Millisecond), *after.Spec.HolderIdentity, expires.Sub(killed).Round(time.Millisecond))
	if *after.Spec.HolderIdentity != "local-operator" {
		t.Errorf("lease held by %q after the restart, want local-operator", *after.Spec.HolderIdentity)
	}
	if !renewed.Before(expires) {
		t.Errorf("the restarted operator waited out the dead process's lease: renewed at %s, it expired at %s", renewed, expires)
	}
}
