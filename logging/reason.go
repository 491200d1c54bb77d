package logging

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ObjectRef formats an object reference as kube-runtime's ObjectRef Display does
// (kube-runtime/src/reflector/object_ref.rs): "Kind.version.group/name", then ".namespace" for
// namespaced objects. Core-group kinds keep the empty group: "Pod.v1./my-pod.my-app". An empty
// name prints as "<unnamed>".
func ObjectRef(gvk schema.GroupVersionKind, name, namespace string) string {
	if name == "" {
		name = "<unnamed>"
	}
	ref := gvk.Kind + "." + gvk.Version + "." + gvk.Group + "/" + name
	if namespace != "" {
		ref += "." + namespace
	}
	return ref
}

// ObjectRefFor is ObjectRef for an object, its kind looked up in scheme (objects read from the
// cache carry no TypeMeta).
func ObjectRefFor(obj client.Object, scheme *runtime.Scheme) string {
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		gvk = obj.GetObjectKind().GroupVersionKind()
		if gvk.Kind == "" {
			gvk.Kind = fmt.Sprintf("%T", obj)
		}
	}
	return ObjectRef(gvk, obj.GetName(), obj.GetNamespace())
}

// Tracker remembers why each reconcile.Request was enqueued, because controller-runtime does
// not say, and the reason is part of the reconcile span ("object.reason"). It follows
// kube-runtime's scheduler (kube-runtime/src/scheduler.rs): one pending reason per object; a
// new trigger replaces the pending one only if it is due no later (an object change
// pre-empts a retry scheduled 30 s ahead, but two changes in a row keep the first reason).
//
// Wiring, for a controller reconciling ValkeyCluster and owning Pods:
//
//	t := logging.NewTracker(v1alpha1.GroupVersion.WithKind("ValkeyCluster"), mgr.GetScheme())
//	ctrl.NewControllerManagedBy(mgr).Named("valkeycluster").
//		Watches(&v1alpha1.ValkeyCluster{}, t.Primary()).
//		Watches(&corev1.Pod{}, t.Owned(&v1alpha1.ValkeyCluster{}, mgr.GetRESTMapper())).
//		Complete(t.Reconciler(logging.Target(log, logging.TargetCluster), r))
//
// For() and Owns() cannot be used: their handlers are built inside the builder and cannot be
// wrapped. Inside the reconcile, logging.FromContext(ctx) is the logger in the span.
type Tracker struct {
	primary schema.GroupVersionKind
	scheme  *runtime.Scheme
	now     func() time.Time

	mu      sync.Mutex
	pending map[reconcile.Request]pendingReason
	// changed is when a watch last enqueued each request (not a retry: see LastChange).
	changed map[reconcile.Request]time.Time
}

type pendingReason struct {
	reason string
	due    time.Time
}

// NewTracker returns a Tracker for a controller whose reconciled kind is primary. scheme
// resolves the kinds of related objects.
func NewTracker(primary schema.GroupVersionKind, scheme *runtime.Scheme) *Tracker {
	return &Tracker{primary: primary, scheme: scheme, now: time.Now, pending: map[reconcile.Request]pendingReason{}, changed: map[reconcile.Request]time.Time{}}
}

// change notes that a watched object's event enqueued req.
func (t *Tracker) change(req reconcile.Request) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.changed[req] = t.now()
}

// LastChange is when an event of a watched object last enqueued req (zero if none did since
// Forget): unlike the pending reason, which a retry due earlier keeps, it is never hidden, so a
// reconciler may tell a pass that nothing watched asked for from one that something did.
func (t *Tracker) LastChange(req reconcile.Request) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.changed[req]
}

// Forget drops what the tracker keeps of req (its object is gone).
func (t *Tracker) Forget(req reconcile.Request) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.changed, req)
}

// Record notes that req was enqueued for reason, due at due.
func (t *Tracker) Record(req reconcile.Request, reason string, due time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.pending[req]; ok && old.due.Before(due) {
		return
	}
	t.pending[req] = pendingReason{reason: reason, due: due}
}

// Take returns and forgets the reason req was enqueued for; ReasonUnknown if none was recorded.
func (t *Tracker) Take(req reconcile.Request) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.pending[req]
	if !ok {
		return ReasonUnknown
	}
	delete(t.pending, req)
	return p.reason
}

// Ref is the reference of the reconciled object named by req.
func (t *Tracker) Ref(req reconcile.Request) string {
	return ObjectRef(t.primary, req.Name, req.Namespace)
}

// Primary enqueues the reconciled object itself on its own events, with the reason
// "object updated".
func (t *Tracker) Primary() handler.EventHandler {
	return t.Wrap(&handler.EnqueueRequestForObject{}, func(client.Object) string { return ReasonObjectUpdated })
}

// Owned enqueues the controller owner (of type ownerType) of the watched objects, with the
// reason "related object updated: <ref of the owned object>".
func (t *Tracker) Owned(ownerType client.Object, mapper meta.RESTMapper) handler.EventHandler {
	return t.Related(handler.EnqueueRequestForOwner(t.scheme, mapper, ownerType, handler.OnlyControllerOwner()))
}

// Related wraps any handler mapping a related object to requests (EnqueueRequestsFromMapFunc,
// …) with the reason "related object updated: <ref of the related object>".
func (t *Tracker) Related(inner handler.EventHandler) handler.EventHandler {
	return t.Wrap(inner, func(obj client.Object) string { return RelatedObjectUpdated(ObjectRefFor(obj, t.scheme)) })
}

// Wrap records reason(event object) for every request inner enqueues.
func (t *Tracker) Wrap(inner handler.EventHandler, reason func(client.Object) string) handler.EventHandler {
	return &trackingHandler{t: t, inner: inner, reason: reason}
}

type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

type trackingHandler struct {
	t      *Tracker
	inner  handler.EventHandler
	reason func(client.Object) string
}

func (h *trackingHandler) queue(obj client.Object, q queue) queue {
	rq := recordingQueue{queue: q, t: h.t, reason: h.reason(obj)}
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		// Keep the priority queue visible: controller-runtime's handlers use AddWithOpts to
		// give the initial list low priority.
		return recordingPriorityQueue{recordingQueue: rq, pq: pq}
	}
	return rq
}

func (h *trackingHandler) Create(ctx context.Context, e event.CreateEvent, q queue) {
	h.inner.Create(ctx, e, h.queue(e.Object, q))
}

func (h *trackingHandler) Update(ctx context.Context, e event.UpdateEvent, q queue) {
	h.inner.Update(ctx, e, h.queue(e.ObjectNew, q))
}

func (h *trackingHandler) Delete(ctx context.Context, e event.DeleteEvent, q queue) {
	h.inner.Delete(ctx, e, h.queue(e.Object, q))
}

func (h *trackingHandler) Generic(ctx context.Context, e event.GenericEvent, q queue) {
	h.inner.Generic(ctx, e, h.queue(e.Object, q))
}

type recordingQueue struct {
	queue
	t      *Tracker
	reason string
}

func (q recordingQueue) Add(r reconcile.Request) {
	q.t.change(r)
	q.t.Record(r, q.reason, q.t.now())
	q.queue.Add(r)
}

func (q recordingQueue) AddAfter(r reconcile.Request, d time.Duration) {
	q.t.change(r)
	q.t.Record(r, q.reason, q.t.now().Add(d))
	q.queue.AddAfter(r, d)
}

func (q recordingQueue) AddRateLimited(r reconcile.Request) {
	q.t.change(r)
	q.t.Record(r, q.reason, q.t.now())
	q.queue.AddRateLimited(r)
}

type recordingPriorityQueue struct {
	recordingQueue
	pq priorityqueue.PriorityQueue[reconcile.Request]
}

func (q recordingPriorityQueue) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	for _, r := range items {
		q.t.change(r)
		q.t.Record(r, q.reason, q.t.now().Add(o.After))
	}
	q.pq.AddWithOpts(o, items...)
}

func (q recordingPriorityQueue) GetWithPriority() (reconcile.Request, int, bool) {
	return q.pq.GetWithPriority()
}

// Reconciler wraps inner so that each reconcile runs in the reconcile span: it takes the
// recorded reason, puts InSpan(log, span) into the context for logging.FromContext, and records
// why the next reconcile will run:
//
//   - Requeue or RequeueAfter: "reconciler requested retry", due then;
//   - an error (controller-runtime retries it with backoff): "error policy requested retry",
//     after logging `reconcile error, requeuing` at WARN in the span with cluster_name and
//     error (controller-runtime's own "Reconciler error" line is dropped by the logr adapter);
//   - a reconcile.TerminalError is not retried: it is logged at WARN as
//     `reconcile error, not retrying`;
//   - a panic is a broken invariant: `reconcile panicked` at ERROR, then retried as an error.
//
// log should carry the controller's target (Target(log, TargetCluster)).
func (t *Tracker) Reconciler(log *zap.Logger, inner reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
		l := InSpan(log, Span{Ref: t.Ref(req), Reason: t.Take(req)})
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v", r)
				l.Error(MsgReconcilePanicked, ClusterName(req.Name), Err(err))
				t.Record(req, ReasonErrorPolicyRetry, t.now())
			}
		}()
		res, err = inner.Reconcile(IntoContext(ctx, l), req)
		switch {
		case err != nil && errors.Is(err, reconcile.TerminalError(nil)):
			l.Warn(MsgReconcileErrorNoRetry, ClusterName(req.Name), Err(err))
		case err != nil:
			l.Warn(MsgReconcileError, ClusterName(req.Name), Err(err))
			t.Record(req, ReasonErrorPolicyRetry, t.now())
		case res.RequeueAfter > 0:
			t.Record(req, ReasonReconcilerRetry, t.now().Add(res.RequeueAfter))
		case res.Requeue: //nolint:staticcheck // still honoured by controller-runtime
			t.Record(req, ReasonReconcilerRetry, t.now())
		}
		return res, err
	})
}
