package logging

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestObjectRef(t *testing.T) {
	vc := schema.GroupVersionKind{Group: "valkey.gomomento.com", Version: "v1alpha1", Kind: "ValkeyCluster"}
	for _, tc := range []struct {
		gvk      schema.GroupVersionKind
		name, ns string
		want     string
	}{
		{vc, "my-cluster", "my-app", "ValkeyCluster.v1alpha1.valkey.gomomento.com/my-cluster.my-app"},
		{vc.GroupVersion().WithKind("ValkeyConfig"), "small", "", "ValkeyConfig.v1alpha1.valkey.gomomento.com/small"},
		// kube-runtime's own test cases.
		{corev1.SchemeGroupVersion.WithKind("Pod"), "my-pod", "my-namespace", "Pod.v1./my-pod.my-namespace"},
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, "my-deploy", "my-namespace", "Deployment.v1.apps/my-deploy.my-namespace"},
		{corev1.SchemeGroupVersion.WithKind("Node"), "my-node", "", "Node.v1./my-node"},
		{corev1.SchemeGroupVersion.WithKind("Pod"), "", "ns", "Pod.v1./<unnamed>.ns"},
	} {
		if got := ObjectRef(tc.gvk, tc.name, tc.ns); got != tc.want {
			t.Errorf("ObjectRef = %s, want %s", got, tc.want)
		}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "my-cluster-8c04d", Namespace: "my-app"}}
	if got := ObjectRefFor(pod, clientgoscheme.Scheme); got != podRef {
		t.Errorf("ObjectRefFor(pod) = %s, want %s", got, podRef)
	}
}

func TestTrackerRecordTake(t *testing.T) {
	tr := NewTracker(corev1.SchemeGroupVersion.WithKind("ConfigMap"), clientgoscheme.Scheme)
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "a"}}
	t0 := time.Unix(1000, 0)

	if got := tr.Take(req); got != ReasonUnknown {
		t.Errorf("nothing recorded: %q", got)
	}
	// A retry due later is pre-empted by a change due now.
	tr.Record(req, ReasonReconcilerRetry, t0.Add(30*time.Second))
	tr.Record(req, ReasonObjectUpdated, t0)
	// A second change (or a later retry) does not replace the pending reason.
	tr.Record(req, RelatedObjectUpdated(podRef), t0.Add(time.Second))
	tr.Record(req, ReasonReconcilerRetry, t0.Add(time.Minute))
	if got := tr.Take(req); got != ReasonObjectUpdated {
		t.Errorf("Take = %q, want %q", got, ReasonObjectUpdated)
	}
	if got := tr.Take(req); got != ReasonUnknown {
		t.Errorf("Take after Take = %q", got)
	}
}

func ownedPod() *corev1.Pod {
	yes := true
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: "my-cluster-8c04d", Namespace: "my-app",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "my-cluster", UID: "u", Controller: &yes}},
	}}
}

func TestTrackerHandlers(t *testing.T) {
	primary := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(primary, meta.RESTScopeNamespace)
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "my-app", Name: "my-cluster"}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "my-cluster", Namespace: "my-app"}}
	ctx := context.Background()

	queues := map[string]func() workqueue.TypedRateLimitingInterface[reconcile.Request]{
		"plain": func() workqueue.TypedRateLimitingInterface[reconcile.Request] {
			return workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
		},
		"priority": func() workqueue.TypedRateLimitingInterface[reconcile.Request] {
			return priorityqueue.New[reconcile.Request]("test")
		},
	}
	for name, newQueue := range queues {
		tr := NewTracker(primary, clientgoscheme.Scheme)
		q := newQueue()

		tr.Primary().Create(ctx, event.CreateEvent{Object: cm}, q)
		if got := tr.Take(req); got != ReasonObjectUpdated {
			t.Errorf("%s: primary create: %q", name, got)
		}
		tr.Owned(&corev1.ConfigMap{}, mapper).Update(ctx, event.UpdateEvent{ObjectOld: ownedPod(), ObjectNew: ownedPod()}, q)
		if got, want := tr.Take(req), RelatedObjectUpdated(podRef); got != want {
			t.Errorf("%s: owned update: %q, want %q", name, got, want)
		}
		if q.Len() == 0 {
			// The priority queue adds asynchronously; give it a moment.
			deadline := time.Now().Add(2 * time.Second)
			for q.Len() == 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
		}
		if q.Len() != 1 {
			t.Errorf("%s: queue length %d, want 1 (the handlers must still enqueue)", name, q.Len())
		}
		q.ShutDown()
	}
}

type fakeReconciler func(context.Context, reconcile.Request) (reconcile.Result, error)

func (f fakeReconciler) Reconcile(ctx context.Context, r reconcile.Request) (reconcile.Result, error) {
	return f(ctx, r)
}

func TestTrackerReconcilerGolden(t *testing.T) {
	var out bytes.Buffer
	log := Target(New(&out, nil, "info", fixedClock), TargetCluster)
	vc := schema.GroupVersionKind{Group: "valkey.gomomento.com", Version: "v1alpha1", Kind: "ValkeyCluster"}
	tr := NewTracker(vc, clientgoscheme.Scheme)
	tr.now = fixedClock
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "my-app", Name: "my-cluster"}}

	var step int
	inner := fakeReconciler(func(ctx context.Context, r reconcile.Request) (reconcile.Result, error) {
		step++
		FromContext(ctx).Info(MsgActiveTick, ClusterName(r.Name), zap.Int(FieldShards, 3), zap.Int(FieldNodes, 6))
		switch step {
		case 1:
			return reconcile.Result{RequeueAfter: 30 * time.Second}, nil
		case 2:
			return reconcile.Result{}, errors.New("CLUSTER NODES on my-cluster-8c04d: connection refused")
		case 3:
			panic("slot 42 owned by two primaries")
		default:
			return reconcile.Result{}, reconcile.TerminalError(errors.New("unrecoverable"))
		}
	})
	r := tr.Reconciler(log, inner)
	tr.Record(req, RelatedObjectUpdated(podRef), fixedClock())
	for i := 0; i < 4; i++ {
		_, err := r.Reconcile(context.Background(), req)
		if (i == 0) != (err == nil) {
			t.Errorf("reconcile %d: err = %v", i+1, err)
		}
	}
	golden(t, "reconcile.golden", out.Bytes())
}

// A watch event is remembered as a change even when a retry due earlier keeps the pending
// reason; a retry the reconciler asked for is not a change.
func TestTrackerLastChange(t *testing.T) {
	primary := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "my-app", Name: "my-cluster"}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "my-cluster", Namespace: "my-app"}}
	now := time.Date(2026, 12, 4, 6, 0, 0, 0, time.UTC)
	tr := NewTracker(primary, clientgoscheme.Scheme)
	tr.now = func() time.Time { return now }
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()

	if got := tr.LastChange(req); !got.IsZero() {
		t.Fatalf("LastChange before any event = %v", got)
	}
	r := tr.Reconciler(zap.NewNop(), fakeReconciler(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}))
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if got := tr.LastChange(req); !got.IsZero() {
		t.Errorf("a requested retry counted as a change: %v", got)
	}
	now = now.Add(5 * time.Second) // the retry (due 1 s after the pass) is overdue: it keeps the reason
	tr.Primary().Update(context.Background(), event.UpdateEvent{ObjectOld: cm, ObjectNew: cm}, q)
	if got := tr.LastChange(req); !got.Equal(now) {
		t.Errorf("LastChange = %v, want %v", got, now)
	}
	if got := tr.Take(req); got != ReasonReconcilerRetry {
		t.Errorf("pending reason %q, want the earlier retry's", got)
	}
	tr.Forget(req)
	if got := tr.LastChange(req); !got.IsZero() {
		t.Errorf("LastChange after Forget = %v", got)
	}
}
