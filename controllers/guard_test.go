package controllers

import (
	"crypto/tls"
	"crypto/x509"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gomomento/valkey-operator/acl"
	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fanout"
	"github.com/gomomento/valkey-operator/plan"
	"github.com/gomomento/valkey-operator/resources"
	"github.com/gomomento/valkey-operator/tlsmaterial"
	"github.com/gomomento/valkey-operator/tlsmaterial/tlstest"
	"github.com/gomomento/valkey-operator/valkey"
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

	failover := plan.Failover{Pod: "p1", PrimaryID: "n0", Purpose: plan.Roll}
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

	end := g.Begin(t.Context(), "ns/vc", "vc-aaaaa takes over")
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

// TestPushesAfterTheNodeClosedAnIdleConnection: a node that closed the ACL or TLS controller's
// pooled connection while it sat idle between passes (Valkey's `timeout`, a live setting a
// ValkeyConfig may set below the 30 s tick) is still told at once, with no failure to retry
// and no WARN; a node that is down still fails.
func TestPushesAfterTheNodeClosedAnIdleConnection(t *testing.T) {
	t.Run("ACL", func(t *testing.T) {
		s := newSeamPass(t)
		s.pass(t)
		s.pass(t) // formed, and the ACL Secret rendered
		a := &ACLReconciler{Client: s.c, APIReader: s.c}
		a.conns.Dial = s.fleet.Dial
		t.Cleanup(func() { a.conns.Forget("ns/vc") })
		vc := vcFor(t, s.c)
		file, creds, ok, err := a.desired(t.Context(), vc)
		if err != nil || !ok {
			t.Fatalf("desired: %v %v", ok, err)
		}
		load := func() nodeACL {
			return a.loadNode(t.Context(), "ns/vc", "vc-aaaaa", "10.0.0.1:6379", creds, file, acl.Normalize(file))
		}
		if n := load(); n.err != nil {
			t.Fatal(n.err)
		}
		node := s.fleet.Node("10.0.0.1:6379")
		node.Down(true)
		node.Down(false)
		if n := load(); n.err != nil {
			t.Fatalf("the node is up, but the pass after it closed the idle connection failed: %v", n.err)
		}
		node.Down(true)
		if n := load(); n.err == nil {
			t.Fatal("a node that is down was loaded")
		}
	})
	t.Run("TLS", func(t *testing.T) {
		ca := tlstest.NewPKI(t, "ca")
		certPEM, keyPEM := ca.Issue(tlstest.Leaf{})
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AddCert(ca.Cert)
		creds := valkey.Credentials{Username: acl.OperatorUser, Password: "op-pw", TLS: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
			ServerName: func(string) string { return "p0.vc.ns.svc.cluster.local" }}
		fleet := valkeytest.New()
		n := fleet.Node("10.0.0.1:6379")
		n.ServeTLS(&cert)
		r := &TLSReconciler{}
		r.conns.Dial = fleet.Dial
		defer r.conns.Forget("ns/vc")
		want := tlsmaterial.Fingerprint(cert.Certificate[0])
		// always: the tick's reload, which sends CONFIG SET over the pooled connection.
		if got := r.reloadNode(t.Context(), "ns/vc", "p0", n.Addr(), resources.TLSFileParams(&corev1.Pod{}), creds, want, true); got.err != nil {
			t.Fatal(got.err)
		}
		n.Down(true)
		n.Down(false)
		fleet.Reset()
		if got := r.reloadNode(t.Context(), "ns/vc", "p0", n.Addr(), resources.TLSFileParams(&corev1.Pod{}), creds, want, true); got.err != nil {
			t.Fatalf("the node is up, but the reload after it closed the idle connection failed: %v", got.err)
		}
		if cmds := fleet.Commands(); len(cmds) == 0 || !strings.Contains(cmds[len(cmds)-1], "CONFIG SET tls-ca-cert-file") {
			t.Fatalf("commands sent: %v, want the reload's CONFIG SET", cmds)
		}
	})
}

// TestHeldTLSTickStillReloads: the tick reloads every node (rule 3: a new ca.crt alone shows in
// no handshake); a tick that comes while the cluster's pushes are held is owed, and the next pass
// that may push reloads every node as the tick would have.
func TestHeldTLSTickStillReloads(t *testing.T) {
	for _, held := range []bool{false, true} {
		t.Run(map[bool]string{false: "not held", true: "held at the tick"}[held], func(t *testing.T) {
			ca := tlstest.NewPKI(t, "ca")
			certPEM, keyPEM := ca.Issue(tlstest.Leaf{})
			cert, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				t.Fatal(err)
			}
			f := newPassFixture().withPod("vc-aaaaa", "10.0.0.1").withCredential("pw")
			f.vc.Spec.TLS = &v1.TLSSpec{SecretRef: "vc-tls"}
			f.objects = append(f.objects, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "vc-tls", Namespace: "ns"},
				Data: map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM, "ca.crt": ca.PEM}})
			_, c := f.build(t)
			fleet := valkeytest.New()
			fleet.Node("10.0.0.1:6379").ServeTLS(&cert)
			g := &fanout.Guard{}
			r := &TLSReconciler{Client: c, APIReader: c, Guard: g}
			r.conns.Dial = fleet.Dial
			t.Cleanup(func() { r.forget("ns/vc") })
			req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "vc"}}
			if held {
				end := g.Begin(t.Context(), "ns/vc", "failover")
				end(time.Now())
				if _, err := r.Reconcile(t.Context(), req); err != nil { // the tick, held
					t.Fatal(err)
				}
				if n := len(fleet.Calls()); n != 0 {
					t.Fatalf("a held pass sent %d commands", n)
				}
				g.Observed("ns/vc", time.Now())
			}
			fleet.Reset()
			if _, err := r.Reconcile(t.Context(), req); err != nil {
				t.Fatal(err)
			}
			if cmds := fleet.Commands(); !slices.ContainsFunc(cmds, func(c string) bool { return strings.Contains(c, "CONFIG SET tls-") }) {
				t.Fatalf("the tick's reload of every node was never sent: %v", cmds)
			}
		})
	}
}

// TestSlotMovesHoldNoPushes: a reshard's steps leave the pushes alone (an atomic move needs the
// slot import grant the ACL controller loads meanwhile); every other disruptive step holds them.
func TestSlotMovesHoldNoPushes(t *testing.T) {
	for _, a := range []plan.Action{plan.MoveSlots{}, plan.CloseSlots{}, plan.Meet{}, plan.CreatePod{}, plan.SetBudget{}} {
		if holdsPushes(a) {
			t.Errorf("%T holds the pushes", a)
		}
	}
	for _, a := range []plan.Action{plan.Failover{}, plan.FailoverForce{}, plan.Takeover{}, plan.Forget{}, plan.DeletePod{}} {
		if !holdsPushes(a) {
			t.Errorf("%T does not hold the pushes", a)
		}
	}
}
