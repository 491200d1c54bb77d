package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// CacheOptions keeps the manager's caches to what is the operator's: of the core kinds it
// creates (pods, per-node ConfigMaps, the cluster's Secrets and Service, the shards'
// PodDisruptionBudgets, the cluster's NetworkPolicy), only the objects that carry the cluster label, which it puts on every
// one of them, without their managed fields. Without it the operator would cache every Secret,
// ConfigMap and Pod of the whole Kubernetes cluster: memory growing with other teams' objects,
// and every team's credentials in one heap. The label alone proves nothing (anyone who can write
// an object can set it): what is read is trusted only when a cluster controls it (see
// ownership.go), and Secrets and ConfigMaps, the kinds a team can fill by the megabyte, are not
// cached at all but read by name (ClientOptions) and watched by their metadata only (break test:
// 150 labelled ConfigMaps of 0.9 MB and 200 Secrets of 0.7 MB took the operator from 63 MB to
// 505 MB, its limit being 512 Mi).
func CacheOptions() cache.Options {
	ours, err := labels.NewRequirement(v1.LabelCluster, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant, valid label key
	}
	sel := labels.NewSelector().Add(*ours)
	return cache.Options{DefaultTransform: cache.TransformStripManagedFields(), ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}:                   {Label: sel},
		&corev1.ConfigMap{}:             {Label: sel},
		&corev1.Secret{}:                {Label: sel},
		&corev1.Service{}:               {Label: sel},
		&policyv1.PodDisruptionBudget{}: {Label: sel},
		&networkingv1.NetworkPolicy{}:   {Label: sel},
		// Every node of the Kubernetes cluster, but only what zones.go reads of it.
		&corev1.Node{}: {Transform: stripNode},
	}}
}

// ClientOptions makes the manager's client read Secrets and ConfigMaps from the API server, never
// from a cache (see CacheOptions): a few reads by name per pass, and no informer holding them.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}}}}
}

// IndexByCluster names the cache index of pods and ValkeyNodes by their cluster label
// (IndexCaches). A label selector on the cache scans every object of the namespace, so with every
// team's clusters in one namespace the ACL and TLS controllers' listing of one cluster's pods on
// each pass grew with the square of the fleet: 21 % of the operator's CPU samples at 500
// clusters of 1×0 in one namespace (the Fleet benchmark's profile). The index makes it a lookup.
const IndexByCluster = "metadata.labels.cluster"

// IndexCaches registers IndexByCluster on the manager's cache; called once, before it starts.
func IndexCaches(ctx context.Context, indexer client.FieldIndexer) error {
	for _, obj := range []client.Object{&corev1.Pod{}, &v1.ValkeyNode{}} {
		if err := indexer.IndexField(ctx, obj, IndexByCluster, clusterLabel); err != nil {
			return fmt.Errorf("index %T by cluster: %w", obj, err)
		}
	}
	return nil
}

// clusterLabel is the index value of an object: its cluster label, when it has one.
func clusterLabel(o client.Object) []string {
	if name, ok := o.GetLabels()[v1.LabelCluster]; ok {
		return []string{name}
	}
	return nil
}
