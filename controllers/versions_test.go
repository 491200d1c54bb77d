package controllers

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// A pass reads its cluster from the cache only when the cache shows the version the last pass
// ended with; anything else (no pass yet, a lagging or moved cache, a failed pass) from the API
// server.
func TestClusterVersionsReadTheCacheOnlyAtTheVersionThePassEndedWith(t *testing.T) {
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "ns", Name: "vc"}
	vc := func(rv, message string) *v1.ValkeyCluster {
		return &v1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vc", ResourceVersion: rv}, Status: v1.ValkeyClusterStatus{Message: message}}
	}
	apiReads := 0
	s := runtime.NewScheme()
	_ = v1.AddToScheme(s)
	api := fake.NewClientBuilder().WithScheme(s).WithObjects(vc("", "from the API server")).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			apiReads++
			return c.Get(ctx, key, obj, opts...)
		},
	}).Build()
	var cur v1.ValkeyCluster
	if err := api.Get(ctx, key, &cur); err != nil {
		t.Fatal(err)
	}
	apiReads = 0
	// The cache is another store: the same version as the API server's, a distinct message.
	cacheAt := func(rv string) client.Reader {
		c := fake.NewClientBuilder().WithScheme(s).WithObjects(vc("", "from the cache")).Build()
		var o v1.ValkeyCluster
		if err := c.Get(ctx, key, &o); err != nil {
			t.Fatal(err)
		}
		if rv != o.ResourceVersion {
			// fake clients number versions from 999: make the cache show another one.
			o.Status.Message = "from a cache at another version"
			if err := c.Update(ctx, &o); err != nil {
				t.Fatal(err)
			}
		}
		return c
	}
	var v clusterVersions
	read := func(cache client.Reader) string {
		t.Helper()
		var got v1.ValkeyCluster
		if err := v.load(ctx, cache, api, key, &got); err != nil {
			t.Fatal(err)
		}
		return got.Status.Message
	}
	same := cacheAt(cur.ResourceVersion)

	if got := read(same); got != "from the API server" || apiReads != 1 {
		t.Fatalf("no pass yet: %q, %d API reads; want the API server's", got, apiReads)
	}
	v.end(key.String(), cur.ResourceVersion, true)
	if got := read(same); got != "from the cache" || apiReads != 1 {
		t.Fatalf("cache at the version the pass ended with: %q, %d API reads; want the cache's", got, apiReads)
	}
	if got := read(cacheAt("another")); got != "from the API server" || apiReads != 2 {
		t.Fatalf("cache at another version: %q, %d API reads; want the API server's", got, apiReads)
	}
	v.end(key.String(), cur.ResourceVersion, false)
	if got := read(same); got != "from the API server" || apiReads != 3 {
		t.Fatalf("after a failed pass: %q, %d API reads; want the API server's", got, apiReads)
	}
	v.end(key.String(), cur.ResourceVersion, true)
	v.forget(key.String())
	if got := read(same); got != "from the API server" || apiReads != 4 {
		t.Fatalf("after forget: %q, %d API reads; want the API server's", got, apiReads)
	}
}
