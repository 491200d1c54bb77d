package controllers

import (
	"context"
	"testing"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
)

// A copy moving to another zone keeps its moved-from mark until it has joined, even when its
// shard is back to its count before then (the copy it was to replace died, or replicasPerShard
// was raised): the mark is what lets the upgrade planner retire it when its zone has no room
// (plan.RetireNoRoom). Dropped early, a copy pinned to a zone that cannot take it stays Pending
// for good and its shard stays a copy short (plan/spread_break_test.go shows the planner side).
// Once it has joined and its shard is at its count, the mark goes.
func TestSettleMovesKeepsTheMarkUntilTheJoin(t *testing.T) {
	vc := newTestCluster()
	vc.Spec.Shards, vc.Spec.ReplicasPerShard = 1, 1
	primary := testNode(vc, "my-cluster-aaaaa", 0, v1.LifecycleActive)
	moving := testNode(vc, "my-cluster-bbbbb", 0, v1.LifecycleJoining)
	moving.Annotations = map[string]string{v1.AnnotationMovedFrom: "zone-a"}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(primary, moving).Build()
	r := &ValkeyClusterReconciler{Client: c, APIReader: c}
	obs := func() *observation {
		var vn v1.ValkeyNode
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(moving), &vn); err != nil {
			t.Fatal(err)
		}
		return &observation{
			nodes: map[string]*v1.ValkeyNode{primary.Name: primary, moving.Name: &vn},
			snapshot: fsm.Snapshot{Shards: 1, ReplicasPerShard: 1, Pods: []fsm.Pod{
				{Name: primary.Name, Shard: 0, Phase: fsm.PodRunning, Lifecycle: string(v1.LifecycleActive)},
				{Name: moving.Name, Shard: 0, Phase: fsm.PodPending, Lifecycle: string(vn.Spec.Lifecycle), MovedFrom: vn.Annotations[v1.AnnotationMovedFrom], Unschedulable: "0/3 nodes are available"},
			}},
		}
	}
	mark := func() string {
		var vn v1.ValkeyNode
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(moving), &vn); err != nil {
			t.Fatal(err)
		}
		return vn.Annotations[v1.AnnotationMovedFrom]
	}
	if err := upkeepPass(t, r, zap.NewNop(), vc, obs()); err != nil {
		t.Fatal(err)
	}
	if mark() == "" {
		t.Fatalf("the mark of %s, not joined yet (Pending, unschedulable), was dropped: nothing will retire it now", moving.Name)
	}
	// Joined: the mark goes.
	var vn v1.ValkeyNode
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(moving), &vn); err != nil {
		t.Fatal(err)
	}
	vn.Spec.Lifecycle = v1.LifecycleActive
	if err := c.Update(context.Background(), &vn); err != nil {
		t.Fatal(err)
	}
	o := obs()
	o.snapshot.Pods[1].Phase, o.snapshot.Pods[1].Unschedulable = fsm.PodRunning, ""
	if err := upkeepPass(t, r, zap.NewNop(), vc, o); err != nil {
		t.Fatal(err)
	}
	if m := mark(); m != "" {
		t.Fatalf("joined and its shard at its count, %s still marked moved from %s", moving.Name, m)
	}
}

// takesPods against what the scheduler does with a Valkey pod, whose tolerations are the arm64
// one plus the two DefaultTolerationSeconds adds (not-ready and unreachable, NoExecute, 300 s).
// Those two never make a zone up on their own: the node lifecycle controller puts them on a node
// whose Ready condition is not True, beside their NoSchedule twins that nothing tolerates.
func TestTakesPodsMatchesTheScheduler(t *testing.T) {
	ready := corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}
	notReady := corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}}
	taint := func(key, value string, e corev1.TaintEffect) []corev1.Taint {
		return []corev1.Taint{{Key: key, Value: value, Effect: e}}
	}
	cases := []struct {
		name   string
		spec   corev1.NodeSpec
		status corev1.NodeStatus
		want   bool
	}{
		{"ready", corev1.NodeSpec{}, ready, true},
		{"cordoned", corev1.NodeSpec{Unschedulable: true}, ready, false},
		{"not ready", corev1.NodeSpec{}, notReady, false},
		{"unreachable, as the node lifecycle controller taints it", corev1.NodeSpec{Taints: append(
			taint("node.kubernetes.io/unreachable", "", corev1.TaintEffectNoSchedule),
			taint("node.kubernetes.io/unreachable", "", corev1.TaintEffectNoExecute)...)}, notReady, false},
		{"arm64 pool", corev1.NodeSpec{Taints: taint(corev1.LabelArchStable, "arm64", corev1.TaintEffectNoSchedule)}, ready, true},
		{"arm64 NoExecute: not the toleration's effect", corev1.NodeSpec{Taints: taint(corev1.LabelArchStable, "arm64", corev1.TaintEffectNoExecute)}, ready, false},
		{"prefer-no-schedule only", corev1.NodeSpec{Taints: taint("example.com/spot", "", corev1.TaintEffectPreferNoSchedule)}, ready, true},
		{"memory pressure", corev1.NodeSpec{Taints: taint("node.kubernetes.io/memory-pressure", "", corev1.TaintEffectNoSchedule)}, ready, false},
		{"being scaled down", corev1.NodeSpec{Taints: taint("ToBeDeletedByClusterAutoscaler", "1", corev1.TaintEffectNoSchedule)}, ready, false},
	}
	for _, c := range cases {
		n := &corev1.Node{Spec: c.spec, Status: c.status}
		if got := takesPods(n); got != c.want {
			t.Errorf("%s: takesPods %v, want %v", c.name, got, c.want)
		}
	}
}
