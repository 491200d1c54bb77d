package controllers

import (
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// CacheOptions keeps the manager's caches to what is the operator's: of the core kinds it
// creates (pods, per-node ConfigMaps, the cluster's Secrets and Service, the shards'
// PodDisruptionBudgets), only the objects that carry the cluster label, which it puts on every
// one of them. Without it the operator would cache every Secret, ConfigMap and Pod of the whole
// Kubernetes cluster: memory growing with other teams' objects, and every team's credentials in
// one heap. A Secret the operator does not create (a cluster's tls.secretRef) is read by name
// from the API server (APIReader), never cached. The label alone proves nothing (anyone who can
// write a Secret can set it): what is read from these caches is trusted only when a cluster
// controls it (see ownership.go).
func CacheOptions() cache.Options {
	ours, err := labels.NewRequirement(v1.LabelCluster, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant, valid label key
	}
	sel := labels.NewSelector().Add(*ours)
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}:                   {Label: sel},
		&corev1.ConfigMap{}:             {Label: sel},
		&corev1.Secret{}:                {Label: sel},
		&corev1.Service{}:               {Label: sel},
		&policyv1.PodDisruptionBudget{}: {Label: sel},
	}}
}
