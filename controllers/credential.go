package controllers

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/resources"
)

// ReasonCredentialMissing is the Degraded condition's reason while the operator's credential
// Secret of a cluster with nodes is missing.
const ReasonCredentialMissing = "CredentialMissing"

// credentialMissing is the operator's credential Secret gone from under a cluster that has
// nodes. The nodes' ACL holds the hash of the original password and nothing can rotate it, so
// a new password would lock the operator (and any node it then creates) out of the cluster:
// the pass stops and says so instead.
type credentialMissing struct {
	Secret, Key string
	// ACLSecret holds the replication password in its auth.conf (masterauth), for the user's
	// recovery of the repl-password key; the operator's password is nowhere else.
	ACLSecret string
}

func (e *credentialMissing) Error() string {
	return fmt.Sprintf("operator credential Secret %s (key %q) is missing", e.Secret, e.Key)
}

// message is status.message while the Secret is missing: what happened, why the operator does
// not fix it, and how the user does. It names Secrets and keys, never a value.
func (e *credentialMissing) message() string {
	return fmt.Sprintf("operator credential Secret %s (key %q) is missing and is not regenerated: the nodes only accept "+
		"the original password. The cluster keeps serving, but the operator cannot manage it until the Secret is "+
		"recreated with that password (from a backup: the nodes hold only its hash; key %q may be left out, the "+
		"operator takes it back from the masterauth line of key %q in Secret %s)",
		e.Secret, e.Key, resources.ReplPasswordKey, resources.AuthFileName, e.ACLSecret)
}

// hasPods reports whether any pod of the cluster exists, whatever its phase: a pod that has
// ever started loaded the cluster's ACL file, so the cluster is no longer brand new.
func (r *ValkeyClusterReconciler) hasPods(ctx context.Context, vc *v1.ValkeyCluster) (bool, error) {
	nodes, err := r.observeNodes(ctx, vc)
	if err != nil {
		return false, err
	}
	var list corev1.PodList
	if list.Items, err = listPods(ctx, r.APIReader, vc, podNames(vc, nodes)); err != nil {
		return false, err
	}
	for i := range list.Items {
		// A node's pod is controlled by its ValkeyNode, one of this cluster's, of the pod's name
		// (pods from before ValkeyNodes by the cluster): another team's pod with the label and a
		// borrowed owner reference must not hold a new cluster back.
		p := &list.Items[i]
		ref := metav1.GetControllerOf(p)
		if ref == nil {
			continue
		}
		if vn, ok := nodes[ref.Name]; ref.UID == vc.UID || (ref.Kind == "ValkeyNode" && ok && vn.UID == ref.UID && ref.Name == p.Name) {
			return true, nil
		}
	}
	return false, nil
}

// holdWithoutCredential ends a pass whose cluster lost its credential Secret: nothing is
// created or deleted (the nodes keep serving as they are), the WARN line names the Secret and
// key once per tick, and status says why with Degraded True. The Secret recreated by hand is
// seen on the next tick (it has no owner reference, so no watch reports it).
func (r *ValkeyClusterReconciler) holdWithoutCredential(ctx context.Context, log *zap.Logger, vc *v1.ValkeyCluster, missing *credentialMissing) (ctrl.Result, error) {
	if r.ticks.due("credential/"+vc.Namespace+"/"+vc.Name, time.Now()) {
		log.Warn(logging.MsgCredentialMissing, zap.String(logging.FieldSecret, missing.Secret), zap.String(logging.FieldKey, missing.Key))
	}
	st := vc.Status.DeepCopy()
	st.Message = missing.message()
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: v1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: ReasonCredentialMissing,
		Message: missing.Error() + "; not regenerated while the cluster has nodes", ObservedGeneration: vc.Generation,
	})
	// Without the credential the operator cannot ask the nodes: whether the cluster is whole is
	// unknown, not what the last observation said.
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: v1.ConditionReady, Status: metav1.ConditionUnknown, Reason: ReasonCredentialMissing,
		Message: "the operator cannot observe the nodes: " + missing.Error(), ObservedGeneration: vc.Generation,
	})
	return ctrl.Result{RequeueAfter: TickInterval}, r.patchStatus(ctx, vc, st)
}
