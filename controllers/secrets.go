package controllers

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SecretsByVersion returns a reader that reads like api, except a Secret: one whose metadata
// the metadata cache (meta, the manager's cache) holds is served from a copy read from the API
// server, as long as the cache shows the same resourceVersion; a Secret the cache does not
// hold (not labelled by the operator, or not seen yet) is read from api every time; one it holds
// at another version than the copy is read from api, and that copy kept.
//
// Why: Secrets are not cached (CacheOptions: a team can fill them by the megabyte, and an
// informer would hold every team's credentials), so every pass read its cluster's Secrets from
// the API server: two thirds of the operator's API reads in the steady state (19 of 41 per
// second at 100 clusters, the Fleet benchmark's audit log), and at 500 clusters the reconcile
// workers spent most of their time waiting on the API server. The operator already watches its
// Secrets' metadata (each change triggers a pass), so the resourceVersion tells it when its copy
// is stale, at no extra request. What is kept is bounded: only Secrets the operator read by name,
// each at most maxKeptSecret bytes of data (a larger one is read every time), dropped when a
// read finds the metadata cache no longer holds it, or when no read asked for it for keptFor.
func SecretsByVersion(api, meta client.Reader) client.Reader {
	return &secretsByVersion{Reader: api, meta: meta, kept: map[types.NamespacedName]keptSecret{}}
}

// maxKeptSecret bounds the data of a Secret SecretsByVersion keeps: the operator's own (ACL file,
// passwords) are a few kB.
const maxKeptSecret = 64 << 10

// keptFor is how long a kept Secret that no pass reads stays (its cluster deleted, say): every
// pass of a cluster reads its Secrets, at least once a tick.
const keptFor = 10 * time.Minute

type secretsByVersion struct {
	client.Reader
	meta  client.Reader
	mu    sync.Mutex
	kept  map[types.NamespacedName]keptSecret
	swept time.Time
}

type keptSecret struct {
	s    *corev1.Secret
	used time.Time
}

// Get reads obj; see SecretsByVersion.
func (s *secretsByVersion) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	out, ok := obj.(*corev1.Secret)
	if !ok || len(opts) > 0 {
		return s.Reader.Get(ctx, key, obj, opts...)
	}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	cached := s.meta.Get(ctx, key, m) == nil
	now := time.Now()
	s.mu.Lock()
	// On every read, not only on one that misses: the copies of a deleted cluster are never read
	// again, and in a steady fleet every other read hits.
	s.sweep(now)
	k, hit := s.kept[key]
	if cached && hit && k.s.ResourceVersion == m.ResourceVersion {
		k.used = now
		s.kept[key] = k
		s.mu.Unlock()
		k.s.DeepCopyInto(out)
		return nil
	}
	// Stale, or not in the cache (not the operator's label, not seen yet, or gone): nothing kept
	// may answer for it.
	delete(s.kept, key)
	s.mu.Unlock()
	if err := s.Reader.Get(ctx, key, out); err != nil {
		return err
	}
	if cached && secretSize(out) <= maxKeptSecret {
		s.mu.Lock()
		s.kept[key] = keptSecret{s: out.DeepCopy(), used: now}
		s.mu.Unlock()
	}
	return nil
}

// sweep drops the Secrets no pass read for keptFor, at most once a minute. Called with s.mu held.
func (s *secretsByVersion) sweep(now time.Time) {
	if now.Sub(s.swept) < time.Minute {
		return
	}
	s.swept = now
	for key, k := range s.kept {
		if now.Sub(k.used) > keptFor {
			delete(s.kept, key)
		}
	}
}

// secretSize is the size of a Secret's data.
func secretSize(s *corev1.Secret) int {
	n := 0
	for k, v := range s.Data {
		n += len(k) + len(v)
	}
	for k, v := range s.StringData {
		n += len(k) + len(v)
	}
	return n
}
