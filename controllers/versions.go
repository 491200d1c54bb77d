package controllers

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// clusterVersions keeps the resourceVersion of each cluster as its last pass ended, so that the
// next pass reads the cluster from the cache when the cache holds exactly that version.
//
// A pass must decide from the status the previous pass wrote, or a transition would be decided
// (and logged) twice; the cache may not have caught up with that write yet, so every pass read
// the cluster from the API server. Yet most passes of a fleet write nothing (a Ready cluster's
// tick), and then the cache's copy is the one the pass ended with as soon as it shows the same
// version: that saves one API request per pass (a tenth of the operator's API reads at 100
// clusters, the Fleet benchmark's audit log). A version the cache does not show, a pass that
// failed (its status write may have landed unseen) and a cluster not seen yet are read from
// the API server, as before.
type clusterVersions struct {
	mu sync.Mutex
	m  map[string]string // cluster key -> resourceVersion its last pass ended with
}

// load reads the cluster named key into vc: from cache when it holds the version the last pass
// ended with, else from api.
func (v *clusterVersions) load(ctx context.Context, cache, api client.Reader, key types.NamespacedName, vc *v1.ValkeyCluster) error {
	v.mu.Lock()
	want := v.m[key.String()]
	v.mu.Unlock()
	if want != "" {
		var c v1.ValkeyCluster
		if err := cache.Get(ctx, key, &c); err == nil && c.ResourceVersion == want {
			*vc = c
			return nil
		}
	}
	return api.Get(ctx, key, vc)
}

// end records the version a pass of key ended with; a pass that failed records nothing.
func (v *clusterVersions) end(key, resourceVersion string, ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !ok || resourceVersion == "" {
		delete(v.m, key)
		return
	}
	if v.m == nil {
		v.m = map[string]string{}
	}
	v.m[key] = resourceVersion
}

func (v *clusterVersions) forget(key string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.m, key)
}
