package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Scale inside the operator: several clusters reconcile at once (controller-runtime still runs
// one pass at a time per cluster), and each pass has a budget, so one slow cluster cannot hold
// a worker that the others need.
const (
	// MaxConcurrentReconciles is how many clusters reconcile at the same time. A pass spends
	// nearly all its time waiting on the API server and on Valkey nodes, so more workers than
	// cores is right; 10 lets 50 clusters that lost a node at once heal in a few passes each.
	MaxConcurrentReconciles = 10
	// DefaultPassBudget bounds one pass: observing every node (each command is itself bounded by
	// valkey.CommandTimeout), executing the plan and writing status. A pass that runs out is a
	// transient failure: it returns the error and the rate limiter requeues it.
	DefaultPassBudget = 10 * time.Second
)

// errPassBudget marks a pass that ran out of its budget.
var errPassBudget = errors.New("pass exceeded its time budget")

// Reconcile runs one pass over the cluster named by req under the pass budget. Its objects going
// away (the namespace is being deleted) is not an error: nothing is retried or logged at WARN.
// The next pass, whatever this one did, runs before any change a team makes (priorityLook), and
// an error the status already reports is retried at the look interval (pacing.go).
func (r *ValkeyClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := r.reconcileInBudget(ctx, req)
	if res.RequeueAfter > 0 || err != nil {
		res.Priority = ownPriority(priorityLook)
	}
	if onlyReported(err) {
		r.backoff.retrySteadily(req, jittered(healthyInterval))
	}
	return res, err
}

// reconcileInBudget is Reconcile's pass: a quiet look or a full pass, under the pass budget.
func (r *ValkeyClusterReconciler) reconcileInBudget(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	budget := r.PassBudget
	if budget <= 0 {
		budget = DefaultPassBudget
	}
	pctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	if res, ok := r.quietLook(pctx, req); ok {
		return res, nil
	}
	// A full pass that fails or acts must not leave the last quiet one to compare with.
	r.looks.forget(req.String())
	res, err := r.reconcilePass(pctx, req)
	switch {
	case err == nil:
		return res, nil
	case isGoingAway(err):
		// A create refused because the namespace is terminating: the namespace controller
		// deletes the cluster next; a retry would only be refused again.
		r.conns.Forget(req.String())
		return ctrl.Result{}, nil
	case errors.Is(err, context.DeadlineExceeded) && pctx.Err() != nil && ctx.Err() == nil:
		return ctrl.Result{}, fmt.Errorf("%w (%s): %w", errPassBudget, budget, err)
	default:
		return res, err
	}
}

// isGoingAway reports whether err is the API server refusing a create in a namespace that is
// being deleted (Forbidden with cause NamespaceTerminating).
func isGoingAway(err error) bool {
	return apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}

// namespaceGoingAway reports whether the namespace is being deleted (or already gone): its
// clusters are left alone, since whatever the operator created there would be refused or
// deleted again. Read from the API server with one GET (no namespace informer: the operator
// needs get on namespaces, not list or watch).
func (r *ValkeyClusterReconciler) namespaceGoingAway(ctx context.Context, name string) (bool, error) {
	var ns corev1.Namespace
	err := r.APIReader.Get(ctx, types.NamespacedName{Name: name}, &ns)
	if apierrors.IsNotFound(err) {
		return true, nil
	} else if err != nil {
		return false, fmt.Errorf("get namespace: %w", err)
	}
	return ns.DeletionTimestamp != nil || ns.Status.Phase == corev1.NamespaceTerminating, nil
}
