package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// Pacing: how soon a failed pass is retried, in which order the queued passes run, and how long
// an ACL or TLS pass may take. One operator serves every team's clusters; none of these may let
// one team's cluster, or its changes, take the health looks of the others.

// Back-off of a failed pass. controller-runtime's default doubles from 5 ms up to 1 000 s: a
// cluster whose passes kept failing (a refused live value, a slow etcd) was looked at 82 s apart
// after five minutes, and not at all for a quarter of an hour later on, while only a pass sees
// a majority of primaries cut off (healthyInterval). So each controller's back-off doubles from
// backoffBase up to MaxBackoff, healthyInterval: a cluster whose passes fail is still looked at
// as often as a healthy one, and no more often once its first retries failed.
const (
	backoffBase = 5 * time.Millisecond
	// MaxBackoff is the longest a failed pass waits for its retry.
	MaxBackoff = healthyInterval
)

// backoff is a controller's rate limiter: per cluster, backoffBase doubled at each failure up
// to MaxBackoff. A pass whose error its status already reports (reported) is retried steadily
// instead: after the delay steady was given, without counting a failure, so that the back-off
// does not grow for a cause the user has been told of and has to fix.
type backoff struct {
	workqueue.TypedRateLimiter[reconcile.Request]
	mu     sync.Mutex
	steady map[reconcile.Request]time.Duration
}

// newBackoff returns a controller's rate limiter (controller.Options.RateLimiter).
func newBackoff() *backoff {
	return &backoff{
		TypedRateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](backoffBase, MaxBackoff),
		steady:           map[reconcile.Request]time.Duration{},
	}
}

// When is the delay before req's retry.
func (b *backoff) When(req reconcile.Request) time.Duration {
	b.mu.Lock()
	d, ok := b.steady[req]
	delete(b.steady, req)
	b.mu.Unlock()
	if ok {
		return d
	}
	return b.TypedRateLimiter.When(req)
}

// Forget resets req's back-off (its pass succeeded).
func (b *backoff) Forget(req reconcile.Request) {
	b.mu.Lock()
	delete(b.steady, req)
	b.mu.Unlock()
	b.TypedRateLimiter.Forget(req)
}

// retrySteadily makes req's next retry come after d, without growing its back-off. A nil
// backoff (a reconciler not set up with a manager, in tests) does nothing.
func (b *backoff) retrySteadily(req reconcile.Request, d time.Duration) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.steady[req] = d
}

// reportedError is a pass error the cluster's status already says (a live value Valkey refused,
// in status.message; an object of one of the cluster's names it does not control, Invalid): the
// pass returns it, so `reconcile error, requeuing` says it at WARN, but retrying it sooner
// cannot help until the user acts, so it is retried at the health-look interval
// (retrySteadily) rather than with a growing back-off.
type reportedError struct{ error }

func (e reportedError) Unwrap() error { return e.error }

// reported marks err as one the status reports (nil stays nil).
func reported(err error) error {
	if err == nil {
		return nil
	}
	return reportedError{err}
}

// onlyReported reports whether every error err joins or wraps is one the status reports: a
// reportedError, or a *SpecProblem (the cluster is Invalid and its message says why).
func onlyReported(err error) bool {
	switch e := err.(type) { //nolint:errorlint // walks what err joins and wraps itself: every error, not the first match
	case nil:
		return false
	case reportedError, *SpecProblem:
		return true
	case interface{ Unwrap() []error }:
		errs := e.Unwrap()
		for _, x := range errs {
			if !onlyReported(x) {
				return false
			}
		}
		return len(errs) > 0
	case interface{ Unwrap() error }:
		return onlyReported(e.Unwrap())
	}
	return false
}

// Priorities. controller-runtime's priority queue serves the highest priority first; it queues
// the initial list (every cluster, after the operator starts) at handler.LowPriority and a
// watch event at 0, and keeps an item's priority on its requeues unless the result sets one.
// Left so, after a restart every existing cluster's health looks ran at low priority for good,
// behind any change a team makes: a stream of changes (a team's own pods churning, a fleet
// rollout) could starve them, and a majority cut off would go unseen.
//
// So the cluster controller's own requeues (its next look, a retry, a wait while it heals) and
// the first pass of a formed cluster after a start run at priorityLook, above any change: they
// are bounded (one per cluster per look interval, MaxBackoff at the most for a retry), and a
// quiet look costs a round trip to the nodes. A change waits behind them only while the workers
// are all busy with looks. Clusters never formed keep the low priority of the initial list: they
// serve nothing yet.
const priorityLook = 1

// ownPriority is the priority of a controller's own requeues (reconcile.Result.Priority).
func ownPriority(p int) *int { return &p }

// firstLookHandler enqueues a ValkeyCluster on its own events as EnqueueRequestForObject does,
// except that a formed cluster of the initial list is queued at priorityLook.
type firstLookHandler struct {
	handler.EnqueueRequestForObject
}

// Create implements handler.EventHandler.
func (h *firstLookHandler) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok && e.IsInInitialList && formed(e.Object) {
		q = atPriority{PriorityQueue: pq, priority: priorityLook}
	}
	h.EnqueueRequestForObject.Create(ctx, e, q)
}

// formed reports whether obj is a ValkeyCluster that formed once (status.formedAt).
func formed(obj client.Object) bool {
	vc, ok := obj.(*v1.ValkeyCluster)
	return ok && vc.Status.FormedAt != nil
}

// atPriority adds every item at one priority.
type atPriority struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	priority int
}

func (q atPriority) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	o.Priority = ownPriority(q.priority)
	q.PriorityQueue.AddWithOpts(o, items...)
}

// withBudget runs pass under budget (DefaultPassBudget when zero or less): a pass that runs out
// of it returns errPassBudget, which the rate limiter retries, so one slow cluster (a hung node, a
// slow API server) holds a worker that the other clusters need no longer than that.
func withBudget(ctx context.Context, budget time.Duration, pass func(context.Context) (reconcile.Result, error)) (reconcile.Result, error) {
	if budget <= 0 {
		budget = DefaultPassBudget
	}
	pctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	res, err := pass(pctx)
	if err != nil && errors.Is(err, context.DeadlineExceeded) && pctx.Err() != nil && ctx.Err() == nil {
		return reconcile.Result{}, fmt.Errorf("%w (%s): %w", errPassBudget, budget, err)
	}
	return res, err
}
