package controllers

// The cluster's NetworkPolicy {cluster}-network: only the cluster's own pods reach its cluster
// bus (what it lets in, and why: resources.BuildNetworkPolicy; the rules: plan/network.go). It
// is one of the cluster's objects, owned like the others (ownership.go): created with the
// cluster as controller, put back when edited or deleted (the cache holds it by the cluster
// label and the controller watches it), and an object of its name that the cluster does not
// control is never changed: the cluster is Invalid, naming it.

import (
	"context"
	"fmt"
	"maps"

	"go.uber.org/zap"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/plan"
	"github.com/gomomento/valkey-operator/resources"
)

const kindNetworkPolicy = "NetworkPolicy"

// networkPolicyWanted reports whether vc keeps its NetworkPolicy (spec.network.policy, else the
// operator's default).
func (r *ValkeyClusterReconciler) networkPolicyWanted(vc *v1.ValkeyCluster) bool {
	return resources.PolicyMode(vc, r.DefaultNetworkPolicy) == v1.NetworkPolicyEnabled
}

// buildNetworkPolicy is the policy vc should have, for this operator's namespace.
func (r *ValkeyClusterReconciler) buildNetworkPolicy(vc *v1.ValkeyCluster) *networkingv1.NetworkPolicy {
	ns := r.OperatorNamespace
	if ns == "" {
		ns = DefaultOperatorNamespace
	}
	return resources.BuildNetworkPolicy(vc, ns)
}

// DefaultOperatorNamespace is the namespace the operator's pods run in when it is not told
// otherwise (POD_NAMESPACE): the release manifests' namespace.
const DefaultOperatorNamespace = "valkey-operator"

// observeNetworkPolicy reads the policy vc controls into the snapshot (fsm.Snapshot.NetworkPolicy)
// and keeps it in obs.networkPolicy for the executor. It is read from the cache, which holds the
// labelled ones; when the cache has none, from the API server, so that one without the label (a
// team's, or the cluster's own with its label removed) is still found. An object of its name
// that vc does not control leaves the policy unknown (nothing of that name is written), is
// remembered (the next pass is Invalid, naming it: recheckForeign) and is returned, for the pass
// to return with its outcome. A cluster that wants no policy looks only in the cache: a foreign
// object of that name is none of its business then.
func (r *ValkeyClusterReconciler) observeNetworkPolicy(ctx context.Context, vc *v1.ValkeyCluster, obs *observation) error {
	wanted := r.networkPolicyWanted(vc)
	obs.snapshot.NetworkPolicy = fsm.NetworkPolicy{Wanted: wanted}
	if wanted && v1.CheckNetworkClients(vc.Spec.Network) != nil {
		// The API server would refuse the policy as built: the one there stays as it is, and the
		// cluster is Invalid, saying why (load).
		return nil
	}
	key := types.NamespacedName{Namespace: vc.Namespace, Name: v1.NetworkPolicyName(vc.Name)}
	var np networkingv1.NetworkPolicy
	err := r.Get(ctx, key, &np)
	if apierrors.IsNotFound(err) && wanted {
		err = r.APIReader.Get(ctx, key, &np)
	}
	switch {
	case apierrors.IsNotFound(err):
		obs.snapshot.NetworkPolicy.Known = true
		return nil
	case err != nil:
		return fmt.Errorf("get NetworkPolicy %s: %w", key.Name, err)
	case !metav1.IsControlledBy(&np, vc):
		if !wanted {
			obs.snapshot.NetworkPolicy.Known = true
			return nil
		}
		r.foreign.add(clusterKey(vc), objectRef{kindNetworkPolicy, np.Name})
		return notControlled(kindNetworkPolicy, np.Name, vc.Name)
	}
	obs.networkPolicy = &np
	want := r.buildNetworkPolicy(vc)
	obs.snapshot.NetworkPolicy.Known = true
	obs.snapshot.NetworkPolicy.Exists = true
	obs.snapshot.NetworkPolicy.AsBuilt = equality.Semantic.DeepEqual(np.Spec, want.Spec) && hasLabels(np.Labels, want.Labels)
	return nil
}

// hasLabels reports whether have carries every label of want, with its value.
func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// setNetworkPolicy carries out a plan.SetNetworkPolicy: the policy as built, created, or written
// over the observed one by a merge patch of its spec and labels (a team's other labels stay). A
// policy found created meanwhile is checked to be the cluster's and left to the next pass.
func (r *ValkeyClusterReconciler) setNetworkPolicy(ctx context.Context, log *zap.Logger, vc *v1.ValkeyCluster, obs *observation, a plan.SetNetworkPolicy) error {
	want := r.buildNetworkPolicy(vc)
	if a.Create {
		err := r.Create(ctx, want)
		switch {
		case apierrors.IsAlreadyExists(err):
			_, err = r.checkOwned(ctx, vc, &networkingv1.NetworkPolicy{}, kindNetworkPolicy, want.Name)
			return err
		case err != nil:
			return fmt.Errorf("create NetworkPolicy %s: %w", want.Name, err)
		}
		log.Info(logging.MsgCreatingNetworkPolicy)
		return nil
	}
	have := obs.networkPolicy
	if have == nil {
		return fmt.Errorf("broken invariant: %s: no NetworkPolicy observed", a)
	}
	np := have.DeepCopy()
	np.Spec = want.Spec
	if np.Labels == nil {
		np.Labels = map[string]string{}
	}
	maps.Copy(np.Labels, want.Labels)
	log.Info(logging.MsgUpdatingNetworkPolicy)
	if err := r.Patch(ctx, np, client.MergeFrom(have)); err != nil {
		return fmt.Errorf("update NetworkPolicy %s: %w", np.Name, err)
	}
	return nil
}

// deleteNetworkPolicy carries out a plan.DeleteNetworkPolicy on the observed policy (by its UID:
// never one created since under the same name).
func (r *ValkeyClusterReconciler) deleteNetworkPolicy(ctx context.Context, log *zap.Logger, obs *observation) error {
	np := obs.networkPolicy
	if np == nil {
		return fmt.Errorf("broken invariant: %s: no NetworkPolicy observed", plan.DeleteNetworkPolicy{})
	}
	log.Info(logging.MsgDeletingNetworkPolicy)
	if err := r.Delete(ctx, np, client.Preconditions{UID: &np.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete NetworkPolicy %s: %w", np.Name, err)
	}
	return nil
}
