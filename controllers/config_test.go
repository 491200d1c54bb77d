package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/resources"
)

func newTestCluster() *v1.ValkeyCluster {
	return &v1.ValkeyCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "my-cluster", Namespace: "my-app", UID: "0d7a3f3c-0000-4000-8000-000000000001"},
		Spec: v1.ValkeyClusterSpec{
			ConfigRef: "standard", Shards: 3, ReplicasPerShard: 1,
			Placement:      &v1.Placement{Zones: []string{"zone-a", "zone-b"}, NodeSelector: map[string]string{"pool": "cache"}, ZoneSpread: v1.ZoneSpreadRequired},
			PodAnnotations: map[string]string{"example.com/scrape": "true"},
		},
	}
}

func newResolved() *resources.ResolvedConfig {
	return &resources.ResolvedConfig{
		Chain:     []string{"standard", "base"},
		Image:     v1.ValkeyImageSpec{Repository: "valkey/valkey", Tag: "8.0.1", Version: "8.0.1"},
		Resources: v1.ValkeyResources{CPU: ptr.To(resource.MustParse("1")), Memory: ptr.To(resource.MustParse("2Gi"))},
		Valkey:    map[string]string{"maxmemory": "1500mb", "maxmemory-policy": "allkeys-lru"},
	}
}

func TestResolveConfig(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = v1.AddToScheme(scheme)
	img := &v1.ValkeyImage{ObjectMeta: metav1.ObjectMeta{Name: "img"}, Spec: v1.ValkeyImageSpec{Repository: "valkey/valkey", Tag: "8.0.1", Version: "8.0.1"}}
	cfg := func(name, base, image string, valkey map[string]string) *v1.ValkeyConfig {
		return &v1.ValkeyConfig{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.ValkeyConfigSpec{BaseRef: base, ImageRef: image, Valkey: valkey}}
	}
	// chain(prefix, n) is n configs prefix-1 -> prefix-2 -> … -> prefix-n, the last naming img.
	chain := func(prefix string, n int) []client.Object {
		var out []client.Object
		for i := 1; i <= n; i++ {
			base, image := fmt.Sprintf("%s-%d", prefix, i+1), ""
			if i == n {
				base, image = "", "img"
			}
			out = append(out, cfg(fmt.Sprintf("%s-%d", prefix, i), base, image, nil))
		}
		return out
	}
	objs := []client.Object{img,
		cfg("base", "", "img", map[string]string{"maxmemory-policy": "allkeys-lru", "maxmemory": "1mb"}),
		cfg("small", "base", "", map[string]string{"maxmemory": "400mb"}),
		cfg("loop-a", "loop-b", "img", nil), cfg("loop-b", "loop-a", "", nil), cfg("self", "self", "img", nil),
		cfg("orphan", "gone", "", nil), cfg("noimage", "", "missing", nil),
		cfg("root-without-image", "", "", nil), cfg("leaf-without-image", "root-without-image", "", nil),
		cfg("forced", "base", "", map[string]string{"port": "7000"}),
		// Stored before the rules that refuse them: never rendered.
		cfg("module", "base", "", map[string]string{"loadmodule": "/usr/lib/valkey/x.so"}),
		cfg("debug", "base", "", map[string]string{"enable-debug-command": "local"}),
		cfg("nodebug", "base", "", map[string]string{"enable-debug-command": "no", "maxmemory-policy": "sometimes"}),
		cfg("confirmed", "base", "", nil),
	}
	objs[len(objs)-1].SetAnnotations(map[string]string{v1.AnnotationConfirmLiveSettings: "maxmemory=1mb"})
	objs[1].SetAnnotations(map[string]string{v1.AnnotationConfirmLiveSettings: "maxmemory-policy=allkeys-lru"})
	objs = append(append(objs, chain("ten", 10)...), chain("eleven", 11)...)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	ctx := context.Background()
	rc, err := resolveConfig(ctx, c, "small")
	if err != nil || rc.Valkey["maxmemory"] != "400mb" || rc.Valkey["maxmemory-policy"] != "allkeys-lru" || rc.Image.Tag != "8.0.1" || strings.Join(rc.Chain, ",") != "small,base" {
		t.Fatalf("inheritance: %+v, %v", rc, err)
	}
	// A value Valkey refuses of a live setting is left to Valkey (LiveSettingsRefused), not Invalid.
	if _, err := resolveConfig(ctx, c, "nodebug"); err != nil {
		t.Fatalf("enable-debug-command no and a live value Valkey refuses: %v", err)
	}
	// The chain's confirmations, base first.
	if rc, err := resolveConfig(ctx, c, "confirmed"); err != nil || strings.Join(rc.Confirmations, " ") != "maxmemory-policy=allkeys-lru maxmemory=1mb" {
		t.Fatalf("confirmations: %+v, %v", rc, err)
	}
	if rc, err := resolveConfig(ctx, c, "ten-1"); err != nil || len(rc.Chain) != 10 {
		t.Fatalf("a chain of 10 configs (the docs' limit): %+v, %v", rc, err)
	}
	// The messages of operations/troubleshooting.md, verbatim.
	for name, want := range map[string]string{
		"eleven-1":           "config inheritance depth exceeds 10 (cycle?)",
		"loop-a":             "config inheritance depth exceeds 10 (cycle?)",
		"self":               "config inheritance depth exceeds 10 (cycle?)",
		"orphan":             `ValkeyConfig "gone" not found`,
		"noimage":            `ValkeyImage "missing" not found`,
		"absent":             `ValkeyConfig "absent" not found`,
		"leaf-without-image": `no image_ref in config chain ending at "leaf-without-image"`,
		"forced":             `ValkeyConfig forced -> base sets "port", which the operator owns`,
		"module":             `ValkeyConfig module -> base sets "loadmodule", which the operator owns`,
		"debug":              `ValkeyConfig debug -> base sets "enable-debug-command", which can only be no on a shared platform`,
	} {
		_, err := resolveConfig(ctx, c, name)
		var sp *SpecProblem
		if !errors.As(err, &sp) || sp.Reason != want {
			t.Errorf("%s: %v, want %q", name, err, want)
		}
	}
}

func TestMaxclientsProblem(t *testing.T) {
	for _, c := range []struct {
		maxclients string
		nodes      int
		problem    bool
	}{
		{"", 8, false},
		{"10000", 100, false},
		{"48", 8, false}, // 2*7 + 32 = 46
		{"45", 8, true},  // the break test's 3 -> 4 at 48 still fits; 45 does not
		{"16", 6, true},  // a 3x1 whose bus links alone take 10
		{"34", 2, false}, // 2*1 + 32
		{"nonsense", 6, false},
	} {
		p := maxclientsProblem(c.maxclients, c.nodes)
		if (p != "") != c.problem {
			t.Errorf("maxclients %q, %d nodes: problem %q, want one: %v", c.maxclients, c.nodes, p, c.problem)
		}
	}
	want := "maxclients 16 is too low for 8 nodes: Valkey counts the cluster bus links (2 per other node) in it; set at least 46"
	if p := maxclientsProblem("16", 8); p != want {
		t.Errorf("message %q, want %q", p, want)
	}
}

func TestTickLogOncePerTickAndForgets(t *testing.T) {
	var tl tickLog
	t0 := time.Unix(1000, 0)
	if !tl.due("a", t0) || tl.due("a", t0.Add(time.Second)) || !tl.due("a", t0.Add(TickInterval)) {
		t.Fatal("due must be true once per tick")
	}
	tl.due("gone-pod", t0.Add(TickInterval))
	tl.due("b", t0.Add(3*TickInterval))
	if _, kept := tl.last["gone-pod"]; kept {
		t.Fatal("an entry older than a tick is kept")
	}
}
