package controllers

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/valkey"
)

type fakeChanges map[ctrl.Request]time.Time

func (f fakeChanges) LastChange(req ctrl.Request) time.Time { return f[req] }
func (f fakeChanges) Forget(req ctrl.Request)               { delete(f, req) }

func TestJitteredStaysWithinTheInterval(t *testing.T) {
	lo := time.Duration(float64(healthyInterval) * healthyJitter)
	for range 1000 {
		if d := jittered(healthyInterval); d < lo || d > healthyInterval {
			t.Fatalf("jittered(%s) = %s, want within [%s, %s]", healthyInterval, d, lo, healthyInterval)
		}
	}
}

// A quiet look stands in for a full pass only after a quiet full pass, with no watch event since
// it began, before the tick, and never for a TLS cluster.
func TestQuietLookOnlyWhenNothingWatchedChanged(t *testing.T) {
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "my-app", Name: "my-cluster"}}
	vc := &v1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "my-app", Name: "my-cluster"}}
	obs := &observation{snapshot: fsm.Snapshot{Pods: []fsm.Pod{{Name: "p-0"}}}} // no node asked: nothing to dial
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		quiet   bool
		tls     bool
		began   time.Duration // how long ago the full pass began
		changed time.Duration // how long ago a watch event came (0: none)
		want    bool
	}{
		{name: "quiet, nothing since", quiet: true, began: 5 * time.Second, want: true},
		{name: "the pass acted or waits", quiet: false, began: 5 * time.Second},
		{name: "a watch event since the pass began", quiet: true, began: 5 * time.Second, changed: time.Second},
		{name: "a watch event before it", quiet: true, began: 5 * time.Second, changed: 6 * time.Second, want: true},
		{name: "the tick is due", quiet: true, began: TickInterval},
		{name: "TLS", quiet: true, tls: true, began: 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changes := fakeChanges{}
			r := &ValkeyClusterReconciler{changes: changes}
			c := vc.DeepCopy()
			if tc.tls {
				c.Spec.TLS = &v1.TLSSpec{}
			}
			now := time.Now()
			r.rememberQuiet(now.Add(-tc.began), c, fsm.Active, obs, health{Ready: true}, valkey.Credentials{}, tc.quiet)
			if tc.changed > 0 {
				changes[req] = now.Add(-tc.changed)
			}
			res, ok := r.quietLook(ctx, req)
			if ok != tc.want {
				t.Fatalf("quiet look stood in for the pass: %v, want %v", ok, tc.want)
			}
			if ok && (res.RequeueAfter <= 0 || res.RequeueAfter > healthyInterval) {
				t.Errorf("next look after %s, want within (0, %s]", res.RequeueAfter, healthyInterval)
			}
		})
	}
}
