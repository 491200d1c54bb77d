package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// countingAPI is a fake API server that counts the Secret reads made of it.
func countingAPI(objs ...client.Object) (client.WithWatch, *int) {
	n := 0
	c := fake.NewClientBuilder().WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Secret); ok {
				n++
			}
			return c.Get(ctx, key, obj, opts...)
		},
	}).Build()
	return c, &n
}

func TestSecretsByVersion(t *testing.T) {
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "ns", Name: "vc-credential"}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Data: map[string][]byte{"operator-password": []byte("one")}}
	api, reads := countingAPI(secret)
	// The API server's fake answers the metadata reads too: the same objects, the same versions.
	r := SecretsByVersion(api, api)
	read := func() string {
		t.Helper()
		var s corev1.Secret
		if err := r.Get(ctx, key, &s); err != nil {
			t.Fatal(err)
		}
		return string(s.Data["operator-password"])
	}

	if got := read(); got != "one" || *reads != 1 {
		t.Fatalf("first read: %q after %d API reads, want one after 1", got, *reads)
	}
	if got := read(); got != "one" || *reads != 1 {
		t.Fatalf("same version: %q after %d API reads, want the copy kept, one after 1", got, *reads)
	}

	// A copy handed out is the caller's: changing it changes nothing kept.
	var mine corev1.Secret
	if err := r.Get(ctx, key, &mine); err != nil {
		t.Fatal(err)
	}
	mine.Data["operator-password"] = []byte("scribbled")
	if got := read(); got != "one" {
		t.Fatalf("after a caller changed its copy: %q, want one", got)
	}

	// A new version (the watch moved the metadata on) is read from the API server again.
	var cur corev1.Secret
	if err := api.Get(ctx, key, &cur); err != nil {
		t.Fatal(err)
	}
	*reads = 0
	cur.Data["operator-password"] = []byte("two")
	if err := api.Update(ctx, &cur); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "two" || *reads != 1 {
		t.Fatalf("new version: %q after %d API reads, want two after 1", got, *reads)
	}
	if got := read(); got != "two" || *reads != 1 {
		t.Fatalf("new version again: %q after %d API reads, want two after 1", got, *reads)
	}

	// Gone: NotFound, as the API server says, and nothing kept answers for it.
	if err := api.Delete(ctx, &cur); err != nil {
		t.Fatal(err)
	}
	var s corev1.Secret
	if err := r.Get(ctx, key, &s); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("deleted Secret: %v, want not found", err)
	}
}

func TestSecretsByVersionKeepsOnlyWhatTheCacheWatches(t *testing.T) {
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "ns", Name: "team-tls"}
	small := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "team-tls"}, Data: map[string][]byte{"tls.crt": []byte("pem")}}
	big := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "big"}, Data: map[string][]byte{"blob": make([]byte, maxKeptSecret+1)}}

	// A Secret the metadata cache does not hold (a team's, without the operator's label) is read
	// from the API server every time.
	api, reads := countingAPI(small)
	r := SecretsByVersion(api, fake.NewClientBuilder().Build())
	for range 3 {
		var s corev1.Secret
		if err := r.Get(ctx, key, &s); err != nil {
			t.Fatal(err)
		}
	}
	if *reads != 3 {
		t.Fatalf("unwatched Secret: %d API reads for 3 Gets, want 3", *reads)
	}

	// One larger than maxKeptSecret is never kept.
	api, reads = countingAPI(big)
	r = SecretsByVersion(api, api)
	for range 2 {
		var s corev1.Secret
		if err := r.Get(ctx, client.ObjectKeyFromObject(big), &s); err != nil {
			t.Fatal(err)
		}
	}
	if *reads != 2 {
		t.Fatalf("large Secret: %d API reads for 2 Gets, want 2", *reads)
	}

	// Other kinds pass through.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}}
	api, _ = countingAPI(cm)
	if err := SecretsByVersion(api, api).Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); err != nil {
		t.Fatal(err)
	}
}

// TestSecretsByVersionDropsWhatNoPassReads: the Secrets of a deleted cluster are never read again,
// so nothing but the sweep drops their copies (the operator's passwords, in the clear); it must
// run while every other read is served from what is kept, as in a steady fleet without TLS,
// where no read misses for hours.
func TestSecretsByVersionDropsWhatNoPassReads(t *testing.T) {
	ctx := context.Background()
	gone := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "deleted-operator-auth"}, Data: map[string][]byte{"operator-password": []byte("pw")}}
	live := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "live-operator-auth"}, Data: map[string][]byte{"operator-password": []byte("pw")}}
	api, _ := countingAPI(gone, live)
	r := SecretsByVersion(api, api).(*secretsByVersion)
	for _, s := range []*corev1.Secret{gone, live} {
		if err := r.Get(ctx, client.ObjectKeyFromObject(s), &corev1.Secret{}); err != nil {
			t.Fatal(err)
		}
	}
	// The deleted cluster's copy was last read longer than keptFor ago, and the last sweep was
	// more than a minute ago; the live cluster's passes go on reading its copy.
	r.mu.Lock()
	k := r.kept[client.ObjectKeyFromObject(gone)]
	k.used = time.Now().Add(-keptFor - time.Minute)
	r.kept[client.ObjectKeyFromObject(gone)] = k
	r.swept = time.Now().Add(-2 * time.Minute)
	r.mu.Unlock()
	if err := r.Get(ctx, client.ObjectKeyFromObject(live), &corev1.Secret{}); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	_, still := r.kept[client.ObjectKeyFromObject(gone)]
	r.mu.Unlock()
	if still {
		t.Fatalf("a copy unread for more than %s is still kept while every read hits", keptFor)
	}
}
