package logging

// The reasons kube-runtime gives for a reconcile (kube-runtime's ReconcileReason Display).
const (
	// ReasonObjectUpdated: the reconciled object itself was created, changed or deleted.
	ReasonObjectUpdated = "object updated"
	// ReasonReconcilerRetry: the previous reconcile asked to run again (Requeue/RequeueAfter).
	ReasonReconcilerRetry = "reconciler requested retry"
	// ReasonErrorPolicyRetry: the previous reconcile returned an error and is retried.
	ReasonErrorPolicyRetry = "error policy requested retry"
	// ReasonUnknown: a reconcile whose trigger was not recorded; kube-runtime prints the same
	// word for requests it has no reason for.
	ReasonUnknown = "unknown"

	relatedObjectUpdatedPrefix = "related object updated: "
)

// RelatedObjectUpdated is the reason for a reconcile triggered by an owned object; ref is that
// object's reference (see ObjectRef), e.g. "related object updated: Pod.v1./my-cluster-8c04d.my-app".
func RelatedObjectUpdated(ref string) string { return relatedObjectUpdatedPrefix + ref }
