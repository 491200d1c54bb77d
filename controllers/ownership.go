package controllers

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// Own before you touch. The operator is shared by every team of a Kubernetes cluster, and the
// names of what it creates for a cluster are fixed ({cluster}, {cluster}-acl,
// {cluster}-operator-auth, {cluster}-shard-{i}) or follow a node's name ({node}-config, the pod).
// Anyone who can write a Secret or a Service in the namespace can create one of those names
// first; the cluster label proves nothing either. So an object is written, and what it holds is
// used (a credential, an ACL file mounted into the nodes), only when its controller owner
// reference is the cluster's (or, for a node's pod and ConfigMap, the node's ValkeyNode, itself
// controlled by the cluster). Every object the operator has ever created carries one, so the
// clusters of earlier operator versions pass the check unchanged. Anything else of such a name
// makes the cluster Invalid with a message that names it (notControlled), and nothing of it is
// changed; the cluster leaves Invalid once the object is deleted or renamed.

// notControlled is the SpecProblem for an object of a name the operator needs that the cluster
// does not control.
func notControlled(kind, name, cluster string) *SpecProblem {
	return &SpecProblem{Reason: fmt.Sprintf("%s %s is not controlled by ValkeyCluster %s: the operator neither changes nor trusts it; "+
		"delete or rename it, or give the cluster another name", kind, name, cluster)}
}

// objectRef names one object of a cluster's namespace by kind and name.
type objectRef struct{ kind, name string }

// foreignObjects remembers, per cluster ("namespace/name"), the objects found under one of its
// names that it does not control: they are checked again, by a read, at the start of every pass
// (ensureOwnership), instead of each pass trying to create them again and being refused.
type foreignObjects struct {
	mu sync.Mutex
	m  map[string]map[objectRef]bool
}

func (f *foreignObjects) add(cluster string, ref objectRef) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]map[objectRef]bool{}
	}
	if f.m[cluster] == nil {
		f.m[cluster] = map[objectRef]bool{}
	}
	f.m[cluster][ref] = true
}

func (f *foreignObjects) list(cluster string) []objectRef {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []objectRef
	for ref := range f.m[cluster] {
		out = append(out, ref)
	}
	return out
}

func (f *foreignObjects) drop(cluster string, ref objectRef) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m[cluster], ref)
}

func (f *foreignObjects) forget(cluster string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, cluster)
}

// newObject returns an empty object of one of the kinds checked by name.
func newObject(kind string) client.Object {
	switch kind {
	case "Service":
		return &corev1.Service{}
	case "Secret":
		return &corev1.Secret{}
	case "ConfigMap":
		return &corev1.ConfigMap{}
	case "Pod":
		return &corev1.Pod{}
	case kindNetworkPolicy:
		return &networkingv1.NetworkPolicy{}
	default:
		return nil
	}
}

// checkOwned reads kind/name of vc's namespace from the API server (not the cache, which holds
// only labelled objects) and returns a *SpecProblem when it exists and vc does not control it,
// remembering it for the next passes; exists says whether it is there at all.
func (r *ValkeyClusterReconciler) checkOwned(ctx context.Context, vc *v1.ValkeyCluster, obj client.Object, kind, name string) (exists bool, err error) {
	err = r.APIReader.Get(ctx, types.NamespacedName{Namespace: vc.Namespace, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		r.foreign.drop(clusterKey(vc), objectRef{kind, name})
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("get %s %s: %w", kind, name, err)
	}
	if !metav1.IsControlledBy(obj, vc) {
		r.foreign.add(clusterKey(vc), objectRef{kind, name})
		return true, notControlled(kind, name, vc.Name)
	}
	r.foreign.drop(clusterKey(vc), objectRef{kind, name})
	return true, nil
}

// recheckForeign reads again every object a previous pass found under one of vc's names without
// its control: still there and still not controlled, it is the pass's problem.
func (r *ValkeyClusterReconciler) recheckForeign(ctx context.Context, vc *v1.ValkeyCluster) error {
	for _, ref := range r.foreign.list(clusterKey(vc)) {
		if ref.kind == kindNetworkPolicy && !r.networkPolicyWanted(vc) {
			// Turned off: the name is no longer one the cluster needs.
			r.foreign.drop(clusterKey(vc), ref)
			continue
		}
		obj := newObject(ref.kind)
		if obj == nil {
			// PodDisruptionBudgets: observeBudgets reads them every pass.
			if ref.kind == "PodDisruptionBudget" {
				if err := r.checkBudget(ctx, vc, ref.name); err != nil {
					return err
				}
			}
			continue
		}
		if _, err := r.checkOwned(ctx, vc, obj, ref.kind, ref.name); err != nil {
			return err
		}
	}
	return nil
}

// ownedNodePods keeps the pods of list that are the pods the operator created for a ValkeyNode
// of vc (nodes: vc's ValkeyNodes): a pod that merely carries the cluster label is anybody's, and
// so is one that names a node as its controller without being the pod the node records
// (identity.go); the operator's credentials are never sent to either. The cluster controller
// reports the foreign ones.
func ownedNodePods(pods []corev1.Pod, nodes []v1.ValkeyNode, vc *v1.ValkeyCluster) []corev1.Pod {
	byName := map[string]*v1.ValkeyNode{}
	for i := range nodes {
		if metav1.IsControlledBy(&nodes[i], vc) {
			byName[nodes[i].Name] = &nodes[i]
		}
	}
	var out []corev1.Pod
	for _, p := range pods {
		// A node's pod has its ValkeyNode's name (see nodeOf).
		ref := metav1.GetControllerOf(&p)
		if ref == nil || ref.Kind != "ValkeyNode" || ref.APIVersion != v1.GroupVersion.String() || ref.Name != p.Name {
			continue
		}
		if vn := byName[p.Name]; vn != nil && vn.UID == ref.UID && foreignReason(&p, vn) == "" {
			out = append(out, p)
		}
	}
	return out
}

// listNodePods lists, from the cache, the pods of vc that one of its ValkeyNodes controls.
func listNodePods(ctx context.Context, c client.Reader, vc *v1.ValkeyCluster) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(vc.Namespace), client.MatchingFields{IndexByCluster: vc.Name}); err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	var nodes v1.ValkeyNodeList
	if err := c.List(ctx, &nodes, client.InNamespace(vc.Namespace), client.MatchingFields{IndexByCluster: vc.Name}); err != nil {
		return nil, fmt.Errorf("list ValkeyNodes: %w", err)
	}
	return ownedNodePods(pods.Items, nodes.Items, vc), nil
}

// ownedSecret reads the Secret name of vc's namespace with c (a reconciler's APIReader, which
// keeps a copy of the operator's own Secrets while their resourceVersion stays: SecretsByVersion):
// ok is false when it does not exist or vc does not control it (then it is not used; the cluster
// controller says why).
func ownedSecret(ctx context.Context, c client.Reader, vc *v1.ValkeyCluster, name string) (*corev1.Secret, bool, error) {
	var s corev1.Secret
	if err := c.Get(ctx, types.NamespacedName{Namespace: vc.Namespace, Name: name}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("get secret %s: %w", name, err)
	}
	if !metav1.IsControlledBy(&s, vc) {
		return nil, false, nil
	}
	return &s, true, nil
}

// ownedBy reports whether obj's controller is the owner ref names (by UID).
func ownedBy(obj client.Object, owner metav1.OwnerReference) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == owner.UID
}
