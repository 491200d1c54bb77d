package harness

import (
	"context"
	"crypto/x509"
	"fmt"
	"strconv"
	"testing"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/valkey"
)

// Fixtures: small builders for the objects a test applies.

// NewImage builds a ValkeyImage of Valkey 8.0.1.
func NewImage(name string) *v1.ValkeyImage {
	return &v1.ValkeyImage{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.ValkeyImageSpec{Repository: "valkey/valkey", Tag: "8.0.1", Version: "8.0.1"}}
}

// NewConfig builds a ValkeyConfig of image with small resources, maxmemory 100mb and no
// diskless-sync delay (replicas sync at once).
func NewConfig(name, image string) *v1.ValkeyConfig {
	return &v1.ValkeyConfig{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.ValkeyConfigSpec{
		ImageRef:  image,
		Resources: &v1.ValkeyResources{CPU: ptr.To(resource.MustParse("500m")), Memory: ptr.To(resource.MustParse("256Mi"))},
		Valkey:    map[string]string{"maxmemory": "100mb", "repl-diskless-sync-delay": "0"},
	}}
}

// ClusterOpt changes a ValkeyCluster that NewCluster builds.
type ClusterOpt func(*v1.ValkeyCluster)

// WithShards sets spec.shards.
func WithShards(n int32) ClusterOpt { return func(c *v1.ValkeyCluster) { c.Spec.Shards = n } }

// WithReplicas sets spec.replicasPerShard.
func WithReplicas(n int32) ClusterOpt {
	return func(c *v1.ValkeyCluster) { c.Spec.ReplicasPerShard = n }
}

// NewCluster builds a ValkeyCluster ns/name of config, 3 shards of 1 replica unless opts say
// otherwise.
func NewCluster(ns, name, config string, opts ...ClusterOpt) *v1.ValkeyCluster {
	c := &v1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: v1.ValkeyClusterSpec{ConfigRef: config, Shards: 3, ReplicasPerShard: 1}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// SetupNamespace creates a namespace for one test and deletes it (and so the clusters in it)
// at the end.
func SetupNamespace(t testing.TB, name string) {
	t.Helper()
	ctx := context.Background()
	if err := EnsureNamespace(ctx, K8s, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = K8s.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
}

// ActiveCluster creates, in a new namespace ns, an image (Valkey 8.0.1, or version when given),
// a config and a cluster of the given shape named vc, and waits until it is Active.
func ActiveCluster(t testing.TB, ns string, shards, replicas int32, version ...string) *v1.ValkeyCluster {
	t.Helper()
	SetupNamespace(t, ns)
	img := NewImage(ns + "-image")
	if len(version) > 0 {
		img.Spec.Tag, img.Spec.Version = version[0], version[0]
	}
	Create(t, img, NewConfig(ns+"-config", ns+"-image"))
	vc := NewCluster(ns, "vc", ns+"-config", WithShards(shards), WithReplicas(replicas))
	Create(t, vc)
	got, err := WaitState(context.Background(), K8s, client.ObjectKeyFromObject(vc), v1.StateActive, FormTimeout)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// Create creates objs; the cluster-scoped ones are deleted when the test ends (the namespaced
// ones go with their namespace, see SetupNamespace).
func Create(t testing.TB, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := K8s.Create(context.Background(), o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
		if o.GetNamespace() == "" {
			// Cluster-scoped (images, configs): gone with the test, like its namespace.
			t.Cleanup(func() { _ = K8s.Delete(context.Background(), o) })
		}
	}
}

// Pods returns the cluster's running pods by name.
func Pods(t testing.TB, vc *v1.ValkeyCluster) []corev1.Pod {
	t.Helper()
	pods, err := ClusterPods(context.Background(), K8s, vc)
	if err != nil {
		t.Fatal(err)
	}
	return pods
}

// Creds reads the operator's generated credentials for vc. For a TLS cluster (vc.Spec.TLS set)
// they are over TLS, trusting the ca.crt of the Secret vc names and verifying each of the pods
// running now under its DNS name, so that a test written for plaintext (WaitReady, a failover
// by hand) runs on a TLS cluster unchanged.
func Creds(t testing.TB, vc *v1.ValkeyCluster) valkey.Credentials {
	t.Helper()
	creds, err := OperatorCreds(context.Background(), K8s, vc)
	if err != nil {
		t.Fatal(err)
	}
	if vc.Spec.TLS == nil {
		return creds
	}
	return TLSCreds(creds, vc, Pods(t, vc), SecretRoots(t, vc))
}

// SecretRoots are the CAs in the ca.crt of the TLS Secret vc names.
func SecretRoots(t testing.TB, vc *v1.ValkeyCluster) *x509.CertPool {
	t.Helper()
	var s corev1.Secret
	if err := K8s.Get(context.Background(), client.ObjectKey{Namespace: vc.Namespace, Name: vc.Spec.TLS.SecretRef}, &s); err != nil {
		t.Fatalf("TLS Secret of %s/%s: %v", vc.Namespace, vc.Name, err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(s.Data["ca.crt"]) {
		t.Fatalf("TLS Secret %s/%s: no CA in ca.crt", vc.Namespace, vc.Spec.TLS.SecretRef)
	}
	return roots
}

// VerifyValkey checks the cluster through Valkey itself: every node says cluster_state:ok with
// 16384 slots assigned and knows every node; each slot has exactly one owner; there are
// `shards` primaries, each with `replicas` replicas attached and linked; keys written through
// a cluster client seeded with one node are read back through a client seeded with another.
func VerifyValkey(t testing.TB, vc *v1.ValkeyCluster, shards, replicas int) {
	t.Helper()
	ctx := context.Background()
	pods := Pods(t, vc)
	if want := shards * (replicas + 1); len(pods) != want {
		t.Fatalf("%d running pods, want %d", len(pods), want)
	}
	creds := Creds(t, vc)
	var addrs []string
	for _, p := range pods {
		addrs = append(addrs, PodAddr(p))
	}
	views := valkey.Observe(ctx, addrs, creds)
	owner := make([]string, valkey.SlotCount)
	replicasOf := map[string]int{}
	primaries := 0
	for _, v := range views {
		if !v.Reachable {
			t.Fatalf("node %s unreachable: %v", v.Addr, v.Err)
		}
		if !v.ClusterStateOK() || v.ClusterInfo["cluster_slots_assigned"] != "16384" || v.ClusterInfo["cluster_known_nodes"] != strconv.Itoa(len(pods)) {
			t.Fatalf("node %s: CLUSTER INFO %v", v.Addr, v.ClusterInfo)
		}
		me, _ := v.Myself()
		switch me.Role {
		case valkey.RolePrimary:
			primaries++
			for _, r := range me.Slots {
				for s := r.Start; s <= r.End; s++ {
					if owner[s] != "" {
						t.Fatalf("slot %d owned by %s and %s", s, owner[s], me.ID)
					}
					owner[s] = me.ID
				}
			}
		case valkey.RoleReplica:
			replicasOf[me.PrimaryID]++
			if !v.ReplicaLinkUp() {
				// Attached; the first sync may still be under way. Wait for it, bounded.
				WaitLinkUp(t, v.Addr, creds)
			}
		}
	}
	for s, o := range owner {
		if o == "" {
			t.Fatalf("slot %d has no owner", s)
		}
	}
	if primaries != shards {
		t.Fatalf("%d primaries, want %d", primaries, shards)
	}
	if replicas > 0 {
		if len(replicasOf) != shards {
			t.Fatalf("replicas follow %d primaries, want %d: %v", len(replicasOf), shards, replicasOf)
		}
		for id, n := range replicasOf {
			if n != replicas {
				t.Fatalf("primary %s has %d replicas, want %d", id, n, replicas)
			}
		}
	}
	roundTripKeys(t, addrs[0], addrs[len(addrs)-1], vc.Name)
}

// WaitLinkUp waits until the replica at a has its link to its primary up (its first sync done).
func WaitLinkUp(t testing.TB, a string, creds valkey.Credentials) {
	t.Helper()
	WaitFor(t, "replica "+a+" synced with its primary", 2*time.Minute, func() string {
		if v := valkey.Observe(context.Background(), []string{a}, creds)[0]; !v.ReplicaLinkUp() {
			return "link not up"
		}
		return ""
	})
}

// roundTripKeys writes keys through a cluster client seeded with one node and reads them back
// through a client seeded with another. The default user is as Valkey ships it (no spec.acl).
func roundTripKeys(t testing.TB, writeVia, readVia, prefix string) {
	t.Helper()
	ctx := context.Background()
	w, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: []string{writeVia}, DisableCache: true})
	if err != nil {
		t.Fatalf("cluster client via %s: %v", writeVia, err)
	}
	defer w.Close()
	const n = 200
	for i := range n {
		key := fmt.Sprintf("%s:key:%d", prefix, i)
		if err := w.Do(ctx, w.B().Set().Key(key).Value(strconv.Itoa(i)).Build()).Error(); err != nil {
			t.Fatalf("SET %s via %s: %v", key, writeVia, err)
		}
	}
	r, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: []string{readVia}, DisableCache: true})
	if err != nil {
		t.Fatalf("cluster client via %s: %v", readVia, err)
	}
	defer r.Close()
	for i := range n {
		key := fmt.Sprintf("%s:key:%d", prefix, i)
		got, err := r.Do(ctx, r.B().Get().Key(key).Build()).ToString()
		if err != nil || got != strconv.Itoa(i) {
			t.Fatalf("GET %s via %s: %q, %v", key, readVia, got, err)
		}
	}
}
