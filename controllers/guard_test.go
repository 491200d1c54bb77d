package controllers

import (
	"slices"
	"strings"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gomomento/valkey-operator/fanout"
	"github.com/gomomento/valkey-operator/plan"
	"github.com/gomomento/valkey-operator/valkey/valkeytest"
)

// TestDisruptiveStepHoldsThePushes: the executor holds the guard while it carries out a
// disruptive step and after it, until an observation that began after the step; a harmless plan
// holds nothing.
func TestDisruptiveStepHoldsThePushes(t *testing.T) {
	f := newExecFixture(t, 2)
	g := &fanout.Guard{}
	f.r.Guard = g
	key := clusterKey(f.vc)
	heldDuring := ""
	f.node(1).OnFunc("CLUSTER FAILOVER", func([]string) valkeytest.Reply {
		heldDuring, _ = g.Busy(key, time.Now())
		return valkeytest.OK()
	})

	if err := f.run(t, plan.Meet{Pod: "p0", IP: "10.0.0.2", NodeID: "n1"}); err != nil {
		t.Fatal(err)
	}
	if what, busy := g.Busy(key, time.Now()); busy {
		t.Fatalf("a meet held the pushes: %q", what)
	}

	failover := plan.Failover{Pod: "p1", PrimaryID: "n0", Roll: true}
	if err := f.run(t, failover); err != nil {
		t.Fatal(err)
	}
	if heldDuring != failover.String() {
		t.Fatalf("during CLUSTER FAILOVER the guard held %q, want %q", heldDuring, failover.String())
	}
	if _, busy := g.Busy(key, time.Now()); !busy {
		t.Fatal("the failover's effect is not observed yet, but the pushes may go on")
	}
	g.Observed(key, time.Now())
	if what, busy := g.Busy(key, time.Now()); busy {
		t.Fatalf("observed after the failover, still held: %q", what)
	}
}

// TestACLPassHeldWhileAStepIsInFlight: through the seam, an ACL pass on a cluster whose
// disruptive step is in flight sends its nodes nothing and looks again in a second; once the
// cluster controller has observed the cluster after the step, the next ACL pass loads the file.
func TestACLPassHeldWhileAStepIsInFlight(t *testing.T) {
	s := newSeamPass(t)
	g := &fanout.Guard{}
	s.r.Guard = g
	s.pass(t)
	s.pass(t) // formed, and the ACL Secret rendered
	a := &ACLReconciler{Client: s.c, APIReader: s.c, Guard: g}
	a.conns.Dial = s.fleet.Dial
	t.Cleanup(func() { a.conns.Forget("ns/vc") })
	req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "vc"}}

	end := g.Begin("ns/vc", "vc-aaaaa takes over", time.Now())
	for _, step := range []string{"running", "ended, not yet observed"} {
		s.fleet.Reset()
		res, err := a.Reconcile(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if cmds := s.fleet.Commands(); len(cmds) != 0 {
			t.Fatalf("step %s: the ACL pass sent %v", step, cmds)
		}
		if res.RequeueAfter != aclCatchUpFast {
			t.Fatalf("step %s: next ACL pass in %s, want %s", step, res.RequeueAfter, aclCatchUpFast)
		}
		end(time.Now())
	}

	s.pass(t) // observes the cluster after the step
	s.fleet.Reset()
	if _, err := a.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if cmds := s.fleet.Commands(); !slices.ContainsFunc(cmds, func(c string) bool { return strings.Contains(c, "ACL ") }) {
		t.Fatalf("after the step was observed the ACL pass sent %v, want the ACL commands", cmds)
	}
}
