package controllers

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/valkey"
)

// recordFailover writes status.failover when it changes, with a patch of its own: the intent of
// a failover must be in the API before the failover is issued (STYLE.md: intent, then act), so
// that a restarted operator does not issue a second one. It costs a write only on the passes
// that issue or clear a failover.
func (r *ValkeyClusterReconciler) recordFailover(ctx context.Context, vc *v1.ValkeyCluster, f *fsm.FailoverIntent) error {
	want := failoverStatus(f)
	if equality.Semantic.DeepEqual(want, vc.Status.Failover) {
		return nil
	}
	patch := client.MergeFrom(vc.DeepCopy())
	vc.Status.Failover = want
	if err := r.Status().Patch(ctx, vc, patch); err != nil {
		return fmt.Errorf("record failover intent: %w", err)
	}
	return nil
}

// failoverStatus is an intent in the API's terms.
func failoverStatus(f *fsm.FailoverIntent) *v1.FailoverStatus {
	if f == nil {
		return nil
	}
	mode := ""
	if f.Force {
		mode = string(valkey.FailoverForce)
	}
	return &v1.FailoverStatus{Shard: int32(f.Shard), Pod: f.Pod, PrimaryNodeID: f.PrimaryID, Mode: mode, StartedAt: metav1.NewTime(f.StartedAt.Truncate(time.Second))}
}
