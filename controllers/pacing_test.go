package controllers

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/tlsmaterial/tlstest"
	"github.com/gomomento/valkey-operator/valkey"
	"github.com/gomomento/valkey-operator/valkey/valkeytest"
)

// TestBackoffCappedAtTheLook: a pass that keeps failing is retried after a delay that doubles
// from backoffBase and never exceeds MaxBackoff, the health-look interval (controller-runtime's
// default went on to 1 000 s); a success resets it.
func TestBackoffCappedAtTheLook(t *testing.T) {
	b := newBackoff()
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "vc"}}
	var last time.Duration
	for i := range 40 {
		d := b.When(req)
		if d > MaxBackoff || d < last {
			t.Fatalf("retry %d after %s (the one before %s): want a growing delay of at most %s", i, d, last, MaxBackoff)
		}
		last = d
	}
	if last != MaxBackoff {
		t.Fatalf("after 40 failures the retry waits %s, want %s", last, MaxBackoff)
	}
	b.Forget(req)
	if d := b.When(req); d != backoffBase {
		t.Fatalf("after a success the first retry waits %s, want %s", d, backoffBase)
	}
}

// TestOnlyReported: an error counts as reported when everything it joins or wraps is a
// reportedError or a *SpecProblem.
func TestOnlyReported(t *testing.T) {
	refused := reported(errors.New("ERR refused"))
	foreign := notControlled("PodDisruptionBudget", "vc-shard-0", "vc")
	other := errors.New("get pods: timeout")
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{other, false},
		{refused, true},
		{foreign, true},
		{fmt.Errorf("pod p: %w", refused), true},
		{errors.Join(foreign, nil, refused), true},
		{errors.Join(refused, other), false},
		{fmt.Errorf("%w (10s): %w", errPassBudget, refused), false},
	} {
		if got := onlyReported(tc.err); got != tc.want {
			t.Errorf("onlyReported(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestRefusedLiveValueRetriedSteadily: through the seam, a formed cluster whose ValkeyConfig
// sets a live value the node refuses (maxclients above what the node's file limit allows, which
// no schema can judge): every pass returns the refusal (the WARN `reconcile error, requeuing`),
// and is retried at the look interval without its back-off growing; the next pass outranks
// changes (priorityLook).
func TestRefusedLiveValueRetriedSteadily(t *testing.T) {
	s := newSeamPass(t)
	s.pass(t)
	s.pass(t) // formed
	s.r.backoff = newBackoff()
	var cfg v1.ValkeyConfig
	if err := s.c.Get(t.Context(), client.ObjectKey{Name: "cfg"}, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Spec.Valkey = map[string]string{"maxclients": "50000"}
	if err := s.c.Update(t.Context(), &cfg); err != nil {
		t.Fatal(err)
	}
	s.fleet.Node("10.0.0.1:6379").On("CONFIG SET", valkeytest.Err("ERR CONFIG SET failed (possibly related to argument 'maxclients') - "+
		"The operating system is not able to handle the specified number of clients, try with 19968"))
	req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "vc"}}
	for i := range 12 {
		res, _, err := reconcileOnce(t, s.r)
		if err == nil {
			t.Fatalf("pass %d: no error, want the refusal", i)
		}
		if res.Priority == nil || *res.Priority != priorityLook {
			t.Fatalf("pass %d: next pass at priority %v, want %d", i, res.Priority, priorityLook)
		}
		d := s.r.backoff.When(req)
		if d < time.Duration(healthyJitter*float64(healthyInterval)) || d > healthyInterval {
			t.Fatalf("pass %d (%v): retried after %s, want the look interval (%s)", i, err, d, healthyInterval)
		}
		if n := s.r.backoff.NumRequeues(req); n != 0 {
			t.Fatalf("pass %d: the back-off counts %d failures, want none", i, n)
		}
	}
}

// TestLooksOutrankChanges: controller-runtime's own controller and priority queue, one worker,
// a flood of changes (a new cluster's event every half millisecond, each pass 2 ms) that never
// lets the queue empty. A formed cluster is looked at again and again by the cluster
// reconciler's own requeues, each within a few changes of being due, whether it was queued by
// the initial list (where controller-runtime puts it at low priority) or by a change; a
// never-formed cluster of the initial list waits for the flood to end. Before the priorities,
// the first never came, and the second fell behind the flood, further at each look.
func TestLooksOutrankChanges(t *testing.T) {
	for _, initial := range []bool{true, false} {
		t.Run(fmt.Sprintf("initial list %v", initial), func(t *testing.T) {
			s := newSeamPass(t)
			s.pass(t)
			s.pass(t) // formed: status.formedAt is set
			formedVC := vcFor(t, s.c)
			if formedVC.Status.FormedAt == nil {
				t.Fatal("the seam cluster did not form")
			}
			fresh := &v1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "fresh"}}
			var mu sync.Mutex
			looks, freshPasses, changes, sinceLook, worstGap := 0, 0, 0, 0, 0
			rec := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
				mu.Lock()
				switch req.Name {
				case "vc":
					looks++
					if looks > 1 {
						worstGap = max(worstGap, sinceLook)
					}
					sinceLook = 0
					mu.Unlock()
					res, err := s.r.Reconcile(ctx, req)
					// The seam cluster is healthy: its next look comes after 4-5 s; sooner here, at
					// the priority the reconciler gave.
					res.RequeueAfter = 20 * time.Millisecond
					return res, err
				case "fresh":
					freshPasses++
				default:
					changes++
					sinceLook++
				}
				mu.Unlock()
				time.Sleep(2 * time.Millisecond)
				return reconcile.Result{}, nil
			})
			c, err := controller.NewTypedUnmanaged("looks", controller.TypedOptions[reconcile.Request]{
				Reconciler: rec, MaxConcurrentReconciles: 1, SkipNameValidation: new(true), UsePriorityQueue: new(true)})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var flood sync.WaitGroup
			src := source.TypedFunc[reconcile.Request](func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
				h := &firstLookHandler{}
				// The initial list, as controller-runtime's informer source gives it after a start,
				// or the formed cluster's change (a pod of it changed, say).
				h.Create(ctx, event.CreateEvent{Object: formedVC, IsInInitialList: initial}, q)
				h.Create(ctx, event.CreateEvent{Object: fresh, IsInInitialList: true}, q)
				flood.Go(func() {
					for i := 0; ctx.Err() == nil; i++ {
						h.Create(ctx, event.CreateEvent{Object: &v1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("change-%d", i)}}}, q)
						time.Sleep(500 * time.Microsecond)
					}
				})
				return nil
			})
			if err := c.Watch(src); err != nil {
				t.Fatal(err)
			}
			go func() { _ = c.Start(ctx) }()
			for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
				mu.Lock()
				done := changes >= 500
				mu.Unlock()
				if done {
					break
				}
			}
			cancel()
			flood.Wait()
			mu.Lock()
			defer mu.Unlock()
			t.Logf("%d looks at the formed cluster, at most %d changes between two; %d passes of the never-formed one; %d changes", looks, worstGap, freshPasses, changes)
			if looks < 5 || worstGap > 50 {
				t.Errorf("the formed cluster was looked at %d times while %d changes were served, at most %d between two looks: its looks starve", looks, changes, worstGap)
			}
			if freshPasses != 0 {
				t.Errorf("the never-formed cluster of the initial list ran %d times before the changes", freshPasses)
			}
		})
	}
}

// silentDialer wraps dial: while hang is set, a connection to addr is accepted and never
// answered (a hung server, or one paused by a client), and a TLS handshake with it never ends.
type silentDialer struct {
	dial  valkey.Dialer
	addr  string
	hang  atomic.Bool
	dials atomic.Int32 // while hanging
	all   atomic.Int32
}

func (d *silentDialer) Dial(ctx context.Context, addr string, conf *tls.Config) (net.Conn, error) {
	if addr == d.addr {
		d.all.Add(1)
	}
	if addr != d.addr || !d.hang.Load() {
		return d.dial(ctx, addr, conf)
	}
	d.dials.Add(1)
	if conf != nil {
		<-ctx.Done() // the handshake never ends
		return nil, ctx.Err()
	}
	client, server := net.Pipe()
	go func() { _, _ = io.Copy(io.Discard, server) }() // read everything, answer nothing
	return client, nil
}

// TestSilentNodeBacksOff: through the seam, a node that accepts connections and never answers.
// The ACL and TLS controllers try it once, then leave it alone for silentFirst, twice as long
// after each silent try up to silentLongest, while the other passes go on; once it answers it
// is told again at once. Before, it was tried on every catch-up pass, every second, each try
// holding a worker for the whole timeout.
func TestSilentNodeBacksOff(t *testing.T) {
	const key = "ns/vc/vc-aaaaa"
	req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "vc"}}
	expire := func(r *nodeRetries) {
		r.mu.Lock()
		defer r.mu.Unlock()
		s := r.silent[key]
		s.until = time.Now().Add(-time.Millisecond)
		r.silent[key] = s
	}
	gap := func(r *nodeRetries) time.Duration {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.silent[key].gap
	}
	check := func(t *testing.T, d *silentDialer, r *nodeRetries, reconcile func() (ctrl.Result, error)) {
		t.Helper()
		d.hang.Store(true)
		start := time.Now()
		if _, err := reconcile(); err != nil {
			t.Fatal(err)
		}
		t.Logf("a pass with the silent node: %s", time.Since(start).Round(time.Millisecond))
		if n := d.dials.Load(); n != 1 || gap(r) != silentFirst {
			t.Fatalf("after the first silent try: %d dials, back-off %s; want 1 and %s", n, gap(r), silentFirst)
		}
		for range 5 {
			res, err := reconcile()
			if err != nil {
				t.Fatal(err)
			}
			if res.RequeueAfter > 5*time.Second {
				t.Fatalf("next pass in %s: the other nodes must not wait for the silent one", res.RequeueAfter)
			}
		}
		if n := d.dials.Load(); n != 1 {
			t.Fatalf("%d dials of the silent node within its back-off, want 1", n)
		}
		expire(r)
		if _, err := reconcile(); err != nil {
			t.Fatal(err)
		}
		if n, got := d.dials.Load(), gap(r); n != 2 || got != 2*silentFirst {
			t.Fatalf("second silent try: %d dials, back-off %s; want 2 and %s", n, got, 2*silentFirst)
		}
		for range 5 { // the tries after, without waiting for each: the back-off stops growing
			r.heard(key, true, time.Now())
		}
		if got := gap(r); got != silentLongest {
			t.Fatalf("back-off %s after many silent tries, want %s", got, silentLongest)
		}
		d.hang.Store(false)
		expire(r)
		before := d.all.Load()
		if _, err := reconcile(); err != nil {
			t.Fatal(err)
		}
		if told := d.all.Load() > before; !told || gap(r) != 0 {
			t.Fatalf("the node answers again: told %v, back-off %s", told, gap(r))
		}
	}
	t.Run("ACL", func(t *testing.T) {
		s := newSeamPass(t)
		s.pass(t)
		s.pass(t) // formed, and the ACL Secret rendered
		d := &silentDialer{dial: s.fleet.Dial, addr: "10.0.0.1:6379"}
		a := &ACLReconciler{Client: s.c, APIReader: s.c}
		a.conns.Dial = d.Dial
		t.Cleanup(func() { a.conns.Forget("ns/vc") })
		check(t, d, &a.nodeRetries, func() (ctrl.Result, error) { return a.Reconcile(t.Context(), req) })
	})
	t.Run("TLS", func(t *testing.T) {
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
		d := &silentDialer{dial: fleet.Dial, addr: "10.0.0.1:6379"}
		r := &TLSReconciler{Client: c, APIReader: c}
		r.conns.Dial = d.Dial
		t.Cleanup(func() { r.forget("ns/vc") })
		if _, err := r.Reconcile(t.Context(), req); err != nil { // the tick: every node reloaded
			t.Fatal(err)
		}
		check(t, d, &r.nodeRetries, func() (ctrl.Result, error) { return r.Reconcile(t.Context(), req) })
	})
}

// TestACLAndTLSPassBudgets: an ACL or TLS pass that the API server holds runs out of its budget
// and returns errPassBudget, as a cluster pass does, instead of holding one of the controller's
// workers until the API server answers.
func TestACLAndTLSPassBudgets(t *testing.T) {
	f := newPassFixture().withCredential("pw")
	f.vc.Spec.TLS = &v1.TLSSpec{SecretRef: "vc-tls"}
	f.funcs.Get = func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if _, ok := obj.(*v1.ValkeyCluster); ok {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(5 * time.Second):
				return errors.New("no budget: the API server answered after 5 s")
			}
		}
		return c.Get(ctx, key, obj, opts...)
	}
	_, c := f.build(t)
	req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "vc"}}
	for name, r := range map[string]reconcile.Reconciler{
		"ACL": &ACLReconciler{Client: c, APIReader: c, PassBudget: 300 * time.Millisecond},
		"TLS": &TLSReconciler{Client: c, APIReader: c, PassBudget: 300 * time.Millisecond},
	} {
		_, err := r.Reconcile(t.Context(), req)
		if !errors.Is(err, errPassBudget) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: %v; want the pass budget exceeded", name, err)
		}
	}
}
