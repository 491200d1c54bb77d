package controllers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
)

// The rules of targetspec.go on each state: a bootstrap works toward its snapshot, a formed
// cluster toward its spec; the snapshot holds the topology only.
func TestBootstrapTarget(t *testing.T) {
	spec := v1.ValkeyClusterSpec{ConfigRef: "cfg", Shards: 3, ReplicasPerShard: 1,
		ACL: []v1.ACLBinding{{Username: "app", PasswordHashes: []string{"h"}}}}
	snap := &v1.TargetSpec{ConfigRef: "cfg", Shards: 2, ReplicasPerShard: 0}
	formed := metav1.NewTime(time.Now())
	for _, c := range []struct {
		name   string
		status v1.ValkeyClusterStatus
		want   *v1.TargetSpec // nil: the live spec
		state  fsm.State      // the state the pass writes
		wrote  *v1.TargetSpec
	}{
		{"a new cluster snapshots its spec", v1.ValkeyClusterStatus{}, topologyOf(&spec), fsm.Bootstrapping, topologyOf(&spec)},
		{"bootstrapping keeps its snapshot", v1.ValkeyClusterStatus{State: fsm.Bootstrapping, TargetSpec: snap}, snap, fsm.Forming, snap},
		{"forming keeps it until Active", v1.ValkeyClusterStatus{State: fsm.Forming, TargetSpec: snap}, snap, fsm.Active, nil},
		{"a bootstrap without one (an older operator's) takes one", v1.ValkeyClusterStatus{State: fsm.Forming}, topologyOf(&spec), fsm.Forming, topologyOf(&spec)},
		{"invalid keeps it", v1.ValkeyClusterStatus{State: fsm.Invalid, TargetSpec: snap}, snap, fsm.Invalid, snap},
		{"invalid before any keeps none", v1.ValkeyClusterStatus{State: fsm.Invalid}, nil, fsm.Invalid, nil},
		{"invalid back to bootstrapping snapshots", v1.ValkeyClusterStatus{State: fsm.Invalid}, nil, fsm.Bootstrapping, topologyOf(&spec)},
		{"active follows its spec", v1.ValkeyClusterStatus{State: fsm.Active, FormedAt: &formed}, nil, fsm.Upgrading, nil},
		{"formed and invalid follows its spec", v1.ValkeyClusterStatus{State: fsm.Invalid, FormedAt: &formed, TargetSpec: snap}, nil, fsm.Active, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			vc := &v1.ValkeyCluster{Spec: spec, Status: c.status}
			got := bootstrapTarget(vc)
			if (got == nil) != (c.want == nil) || (got != nil && (got.Shards != c.want.Shards || got.ReplicasPerShard != c.want.ReplicasPerShard)) {
				t.Errorf("target %+v, want %+v", got, c.want)
			}
			st := vc.Status.DeepCopy()
			setTargetSpec(st, vc, c.state)
			if (st.TargetSpec == nil) != (c.wrote == nil) || (st.TargetSpec != nil && (st.TargetSpec.Shards != c.wrote.Shards || st.TargetSpec.ReplicasPerShard != c.wrote.ReplicasPerShard ||
				st.TargetSpec.ConfigRef != "cfg")) {
				t.Errorf("wrote %+v, want %+v", st.TargetSpec, c.wrote)
			}
		})
	}
}

// An edit of spec.shards during bootstrap waits: the pass after it creates no pod for the new
// shards and keeps status.targetSpec as the first pass wrote it.
func TestTopologyEditDuringBootstrapWaits(t *testing.T) {
	r, c := newPassFixture().build(t)
	if _, _, err := reconcileOnce(t, r); err != nil {
		t.Fatal(err)
	}
	var vc v1.ValkeyCluster
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: "vc"}, &vc); err != nil {
		t.Fatal(err)
	}
	if ts := vc.Status.TargetSpec; ts == nil || ts.Shards != 1 || ts.ConfigRef != "cfg" {
		t.Fatalf("targetSpec after the first pass: %+v", ts)
	}
	if n := podCount(t, c); n != 1 {
		t.Fatalf("%d pods, want 1", n)
	}
	vc.Spec.Shards, vc.Spec.ReplicasPerShard = 3, 1
	if err := c.Update(t.Context(), &vc); err != nil {
		t.Fatal(err)
	}
	if _, _, err := reconcileOnce(t, r); err != nil {
		t.Fatal(err)
	}
	if n := podCount(t, c); n != 1 {
		t.Errorf("%d pods after a topology edit during bootstrap, want still 1", n)
	}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: "vc"}, &vc); err != nil {
		t.Fatal(err)
	}
	if ts := vc.Status.TargetSpec; ts == nil || ts.Shards != 1 || ts.ReplicasPerShard != 0 {
		t.Errorf("targetSpec after the edit: %+v", ts)
	}
}
