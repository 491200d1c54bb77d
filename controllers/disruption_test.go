package controllers

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
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

// The budget of an existing shard as the planner sees it: its count, and whether the rest of its
// spec is as built (a hand edit to maxUnavailable is not).
func TestBudgetView(t *testing.T) {
	vc := newTestCluster()
	b := resources.BuildDisruptionBudget(vc, 1, 1)
	if got := budgetView(vc, 1, b); got != (fsm.Budget{MinAvailable: 2, AsBuilt: true}) {
		t.Errorf("as built: %+v", got)
	}
	b.Spec.MinAvailable, b.Spec.MaxUnavailable = nil, ptr.To(intstr.FromInt32(1))
	if got := budgetView(vc, 1, b); got != (fsm.Budget{MinAvailable: -1}) {
		t.Errorf("maxUnavailable: %+v", got)
	}
	b = resources.BuildDisruptionBudget(vc, 1, 0)
	b.Spec.Selector.MatchLabels[v1.LabelShard] = "2"
	if got := budgetView(vc, 1, b); got.AsBuilt {
		t.Errorf("another shard's selector taken as built: %+v", got)
	}
}

// Against the (fake) API server: the first pass creates one budget per shard, a second pass
// writes nothing, a changed replicasPerShard or a hand edit is patched back, and fewer shards
// delete the removed shard's budget once its pods are gone. A budget the cluster does not
// control is left alone.
func TestDisruptionBudgetActions(t *testing.T) {
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
		obs := &observation{snapshot: fsm.Snapshot{Shards: int(vc.Spec.Shards), ReplicasPerShard: int(vc.Spec.ReplicasPerShard)}}
		for _, s := range live {
			obs.snapshot.Pods = append(obs.snapshot.Pods, fsm.Pod{Name: "p", Shard: s, Phase: fsm.PodRunning, Lifecycle: string(v1.LifecycleActive)})
		}
		if err := r.observeBudgets(context.Background(), vc, obs); err != nil {
			t.Fatal(err)
		}
		if err := upkeepPass(t, r, log, vc, obs); err != nil {
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

// A budget of one of the cluster's names that it does not control is never touched: the
// observation leaves the budgets unknown (nothing is planned) and says why, once; while it stays,
// the budgets are not even read.
func TestForeignBudgetIsLeftAlone(t *testing.T) {
	vc := newTestCluster()
	theirs := resources.BuildDisruptionBudget(vc, 0, 0)
	theirs.OwnerReferences = nil
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(vc, theirs).Build()
	r := &ValkeyClusterReconciler{Client: c, APIReader: c}
	obs := &observation{snapshot: fsm.Snapshot{Shards: 3, ReplicasPerShard: 1}}
	if err := r.observeBudgets(context.Background(), vc, obs); err == nil || !strings.Contains(err.Error(), "not controlled") {
		t.Fatalf("a foreign budget: %v", err)
	}
	if obs.snapshot.BudgetsKnown {
		t.Fatal("budgets known beside a foreign one")
	}
	for _, a := range plan.Pass(fsm.Active, obs.snapshot).Actions {
		_, set := a.(plan.SetBudget)
		_, del := a.(plan.DeleteBudget)
		if set || del {
			t.Fatalf("planned %v beside a foreign budget", a)
		}
	}
	if err := r.observeBudgets(context.Background(), vc, obs); err != nil || obs.snapshot.BudgetsKnown {
		t.Fatalf("next pass: %v, known %v", err, obs.snapshot.BudgetsKnown)
	}
}

// TestBudgetsListedInPages: the budgets are listed in pages of the cluster's shards and a few
// more, and only the cluster's own are kept across pages: 300 budgets a team labelled with the
// cluster's label, named to come first, are looked at a page at a time and never held.
func TestBudgetsListedInPages(t *testing.T) {
	vc := newTestCluster()
	objs := []client.Object{vc}
	for s := range 3 {
		b := resources.BuildDisruptionBudget(vc, s, 0)
		b.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(vc, v1.GroupVersion.WithKind("ValkeyCluster"))}
		objs = append(objs, b)
	}
	for i := range 300 {
		objs = append(objs, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("a-team-%03d", i), Namespace: vc.Namespace,
			Labels: map[string]string{v1.LabelCluster: vc.Name}}})
	}
	pages, largest := 0, 0
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			lo := (&client.ListOptions{}).ApplyOptions(opts)
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			bl, ok := list.(*policyv1.PodDisruptionBudgetList)
			if !ok || lo.Limit == 0 {
				return nil
			}
			// A paging API server: the continuation is the offset of the next page.
			from, _ := strconv.Atoi(lo.Continue)
			items := bl.Items[from:]
			if int64(len(items)) > lo.Limit {
				items, bl.Continue = items[:lo.Limit], strconv.Itoa(from+int(lo.Limit))
			}
			bl.Items = items
			pages, largest = pages+1, max(largest, len(items))
			return nil
		},
	}).Build()
	r := &ValkeyClusterReconciler{Client: c, APIReader: c}
	obs := &observation{snapshot: fsm.Snapshot{Shards: 3}}
	if err := r.observeBudgets(t.Context(), vc, obs); err != nil {
		t.Fatal(err)
	}
	if len(obs.budgets) != 3 || !obs.snapshot.BudgetsKnown {
		t.Errorf("budgets %v, want the cluster's 3", obs.budgets)
	}
	if want := 3 + budgetListSlack; largest > want || pages < 300/want {
		t.Errorf("%d pages, the largest of %d budgets: want pages of at most %d", pages, largest, want)
	}
}
