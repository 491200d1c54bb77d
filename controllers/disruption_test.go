package controllers

import (
	"context"
	"slices"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/plan"
	"github.com/gomomento/valkey-operator/resources"
)

func TestPlanDisruptionBudgets(t *testing.T) {
	vc := newTestCluster() // 3 shards, 1 replica each
	built := func(shard int, joining int32) *policyv1.PodDisruptionBudget {
		return resources.BuildDisruptionBudget(vc, shard, joining)
	}
	edited := built(1, 0)
	edited.Spec.MinAvailable = ptr.To(intstr.FromInt32(0))
	maxUnavailable := built(2, 0)
	maxUnavailable.Spec.MinAvailable, maxUnavailable.Spec.MaxUnavailable = nil, ptr.To(intstr.FromInt32(1))
	whole := map[int]*policyv1.PodDisruptionBudget{0: built(0, 0), 1: built(1, 0), 2: built(2, 0)}
	// pod is a live pod of shard in lifecycle lc.
	pod := func(shard int, lc v1.NodeLifecycle) fsm.Pod {
		return fsm.Pod{Name: "p", Shard: shard, Phase: fsm.PodRunning, Lifecycle: string(lc)}
	}
	active := func(shards ...int) []fsm.Pod {
		var out []fsm.Pod
		for _, s := range shards {
			out = append(out, pod(s, v1.LifecycleActive), pod(s, v1.LifecycleActive))
		}
		return out
	}
	type change struct {
		name         string
		minAvailable int
	}
	for _, tc := range []struct {
		name                   string
		have                   map[int]*policyv1.PodDisruptionBudget
		live                   []fsm.Pod
		creating               []int
		create, update, remove []change
	}{
		{name: "new cluster: one per shard, none evictable while every node joins", live: []fsm.Pod{pod(0, v1.LifecycleJoining), pod(0, v1.LifecycleJoining)},
			create: []change{{"my-cluster-shard-0", 3}, {"my-cluster-shard-1", 1}, {"my-cluster-shard-2", 1}}},
		{name: "settled: nothing", have: whole, live: active(0, 1, 2)},
		{name: "a replacement syncing: its shard's other copy is held", have: whole,
			live:   append(active(0, 2), pod(1, v1.LifecycleActive), pod(1, v1.LifecycleJoining)),
			update: []change{{"my-cluster-shard-1", 2}}},
		{name: "a replacement about to be created counts before it exists", have: whole,
			live: append(active(0, 2), pod(1, v1.LifecycleActive)), creating: []int{1},
			update: []change{{"my-cluster-shard-1", 2}}},
		{name: "edited ones brought back", have: map[int]*policyv1.PodDisruptionBudget{0: built(0, 0), 1: edited, 2: maxUnavailable},
			live: active(0, 1, 2), update: []change{{"my-cluster-shard-1", 1}, {"my-cluster-shard-2", 1}}},
		{name: "a removed shard's budget stays while it has pods",
			have: map[int]*policyv1.PodDisruptionBudget{0: built(0, 0), 1: built(1, 0), 2: built(2, 0), 3: built(3, 0), 4: built(4, 0)},
			live: active(0, 1, 2, 3), remove: []change{{"my-cluster-shard-4", 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := planDisruptionBudgets(vc, tc.have, tc.live, tc.creating)
			for _, c := range []struct {
				what string
				got  []*policyv1.PodDisruptionBudget
				want []change
			}{{"create", got.create, tc.create}, {"update", got.update, tc.update}, {"remove", got.remove, tc.remove}} {
				var have []change
				for _, b := range c.got {
					have = append(have, change{b.Name, b.Spec.MinAvailable.IntValue()})
				}
				if !slices.Equal(have, c.want) {
					t.Errorf("%s %v, want %v", c.what, have, c.want)
				}
			}
		})
	}
}

// Against the (fake) API server: the first pass creates one budget per shard, a second pass
// writes nothing, a changed replicasPerShard or a hand edit is patched back, and fewer shards
// delete the removed shard's budget once its pods are gone. A budget the cluster does not
// control is left alone.
func TestEnsureDisruptionBudgets(t *testing.T) {
	vc := newTestCluster()
	foreign := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "theirs", Namespace: vc.Namespace,
		Labels: map[string]string{v1.LabelCluster: vc.Name, v1.LabelShard: "7"}}}
	var writes []string
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(vc, foreign).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			writes = append(writes, "create "+obj.GetName())
			return c.Create(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			writes = append(writes, "patch "+obj.GetName())
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			writes = append(writes, "delete "+obj.GetName())
			return c.Delete(ctx, obj, opts...)
		},
	}).Build()
	r := &ValkeyClusterReconciler{Client: c, APIReader: c}
	core, logs := observer.New(zap.InfoLevel)
	log := zap.New(core)
	pass := func(live ...int) []string {
		t.Helper()
		writes = nil
		obs := &observation{}
		for _, s := range live {
			obs.snapshot.Pods = append(obs.snapshot.Pods, fsm.Pod{Name: "p", Shard: s, Phase: fsm.PodRunning, Lifecycle: string(v1.LifecycleActive)})
		}
		if err := r.ensureDisruptionBudgets(context.Background(), log, vc, obs, plan.Plan{}); err != nil {
			t.Fatal(err)
		}
		return writes
	}

	if got := pass(); !slices.Equal(got, []string{"create my-cluster-shard-0", "create my-cluster-shard-1", "create my-cluster-shard-2"}) {
		t.Errorf("first pass: %v", got)
	}
	if n := logs.FilterMessage(logging.MsgCreatingDisruptionBudget).Len(); n != 3 {
		t.Errorf("%d %q lines, want 3", n, logging.MsgCreatingDisruptionBudget)
	}
	if got := pass(0, 1, 2); len(got) != 0 {
		t.Errorf("second pass wrote %v", got)
	}
	vc.Spec.ReplicasPerShard = 2
	if got := pass(0, 1, 2); len(got) != 3 {
		t.Errorf("replicasPerShard 1 -> 2: %v, want three updates", got)
	}
	var b policyv1.PodDisruptionBudget
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: vc.Namespace, Name: "my-cluster-shard-1"}, &b); err != nil {
		t.Fatal(err)
	}
	if *b.Spec.MinAvailable != intstr.FromInt32(2) {
		t.Errorf("minAvailable %v after the update, want 2", b.Spec.MinAvailable)
	}
	// A hand edit to maxUnavailable (which would allow no eviction at all) is undone.
	b.Spec.MinAvailable, b.Spec.MaxUnavailable = nil, ptr.To(intstr.FromInt32(1))
	if err := c.Update(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if got := pass(0, 1, 2); !slices.Equal(got, []string{"patch my-cluster-shard-1"}) {
		t.Errorf("after a hand edit: %v", got)
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(&b), &b); err != nil {
		t.Fatal(err)
	}
	if b.Spec.MaxUnavailable != nil || b.Spec.MinAvailable == nil || *b.Spec.MinAvailable != intstr.FromInt32(2) {
		t.Errorf("after the hand edit was undone: minAvailable %v, maxUnavailable %v", b.Spec.MinAvailable, b.Spec.MaxUnavailable)
	}
	vc.Spec.Shards = 1
	if got := pass(0, 2); !slices.Equal(got, []string{"delete my-cluster-shard-1"}) {
		t.Errorf("shards 3 -> 1 with shard 2 still live: %v, want shard 1's budget deleted only", got)
	}
	if got := pass(0); !slices.Equal(got, []string{"delete my-cluster-shard-2"}) {
		t.Errorf("shard 2's pods gone: %v", got)
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(foreign), &b); err != nil {
		t.Errorf("a budget the cluster does not control: %v", err)
	}
}
