package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// podListSlack is how many more pods with the cluster label than the cluster has names for
// (podNames) one list of the pass reads. A team's pods with the label are nobody's nodes.
const podListSlack = 16

// podNames are the names a pod of vc can have for the pass: its ValkeyNodes' (a node's pod has
// its node's name) and the pods the last status listed (a retired node's pod, on its way out).
// No other pod is ever used (observe): the cluster label proves nothing.
func podNames(vc *v1.ValkeyCluster, nodes map[string]*v1.ValkeyNode) []string {
	names := make([]string, 0, len(nodes)+len(vc.Status.Nodes)+len(vc.Status.NodeDetails))
	for name := range nodes {
		names = append(names, name)
	}
	names = append(names, vc.Status.Nodes...)
	for _, n := range vc.Status.NodeDetails {
		names = append(names, n.Pod)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// listPods reads vc's pods of those names from the API server (not the cache: a pod created a
// pass ago must be seen, or it would be created again), sorted by name.
//
// Bounded whatever a team labels: one list by the cluster label, at most len(names) +
// podListSlack pods long, keeps the pods of those names. When more pods carry the label (the
// list has a continuation), the rest are not listed: the names not found in that page are read
// one by one (a name not there has no pod). So a pass holds and looks at most one page and one
// pod per name; other pods with the label are never read past that page, never asked, never
// counted, never changed.
func listPods(ctx context.Context, c client.Reader, vc *v1.ValkeyCluster, names []string) ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := c.List(ctx, &list, client.InNamespace(vc.Namespace), client.MatchingLabels{v1.LabelCluster: vc.Name},
		client.Limit(int64(len(names)+podListSlack))); err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	var out []corev1.Pod
	found := make(map[string]bool, len(names))
	for _, name := range names {
		found[name] = false
	}
	for i := range list.Items {
		if p := &list.Items[i]; !found[p.Name] {
			if _, named := found[p.Name]; named {
				out = append(out, *p)
				found[p.Name] = true
			}
		}
	}
	if list.Continue == "" {
		return out, nil
	}
	for _, name := range names {
		if found[name] {
			continue
		}
		var p corev1.Pod
		err := c.Get(ctx, types.NamespacedName{Namespace: vc.Namespace, Name: name}, &p)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("get pod %s: %w", name, err)
		case p.Labels[v1.LabelCluster] != vc.Name:
			continue // as the list: only pods with the cluster's label
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
