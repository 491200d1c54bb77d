package controllers

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./controllers -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Fatalf("%s differs from the golden file; if intended, rerun with -update and review the diff.\ngot:\n%s", name, got)
	}
}

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

func newResolved() *ResolvedConfig {
	return &ResolvedConfig{
		Chain:     []string{"standard", "base"},
		Image:     v1.ValkeyImageSpec{Repository: "valkey/valkey", Tag: "8.0.1", Version: "8.0.1"},
		Resources: v1.ValkeyResources{CPU: ptr.To(resource.MustParse("1")), Memory: ptr.To(resource.MustParse("2Gi"))},
		Valkey:    map[string]string{"maxmemory": "1500mb", "maxmemory-policy": "allkeys-lru"},
	}
}

// The pod is pinned by a golden file so that an operator upgrade that changes it (and would
// roll every pod through the spec hash) is a reviewed decision.
func TestBuildPodGolden(t *testing.T) {
	vc, rc := newTestCluster(), newResolved()
	conf := renderValkeyConf(rc)
	pod := buildPod(vc, rc, "my-cluster-8c04d", 2, podSpecHash(vc, rc, conf), v1.ZoneSpreadBestEffort)
	out, err := yaml.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "pod.yaml", out)
	golden(t, "valkey.conf", []byte(conf))
}

func TestSpecHash(t *testing.T) {
	vc, rc := newTestCluster(), newResolved()
	base := podSpecHash(vc, rc, renderValkeyConf(rc))
	same := newTestCluster()
	same.Spec.PodAnnotations = map[string]string{"other": "x"}
	same.Spec.Placement.ZoneSpread = v1.ZoneSpreadBestEffort
	if h := podSpecHash(same, rc, renderValkeyConf(rc)); h != base {
		t.Fatal("podAnnotations or zoneSpread changed the spec hash; they must not replace pods")
	}
	for name, mutate := range map[string]func(*v1.ValkeyCluster, *ResolvedConfig){
		"image":        func(_ *v1.ValkeyCluster, r *ResolvedConfig) { r.Image.Tag = "8.0.2" },
		"memory":       func(_ *v1.ValkeyCluster, r *ResolvedConfig) { r.Resources.Memory = ptr.To(resource.MustParse("3Gi")) },
		"config":       func(_ *v1.ValkeyCluster, r *ResolvedConfig) { r.Valkey = map[string]string{"maxmemory": "1mb"} },
		"zones":        func(c *v1.ValkeyCluster, _ *ResolvedConfig) { c.Spec.Placement.Zones = []string{"zone-c"} },
		"nodeSelector": func(c *v1.ValkeyCluster, _ *ResolvedConfig) { c.Spec.Placement.NodeSelector = nil },
	} {
		c, r := newTestCluster(), newResolved()
		mutate(c, r)
		if podSpecHash(c, r, renderValkeyConf(r)) == base {
			t.Errorf("changing %s did not change the spec hash", name)
		}
	}
}

func TestRenderACL(t *testing.T) {
	vc := newTestCluster()
	got := renderACL(vc, nil, "s3cret")
	if !strings.Contains(got, "user default on nopass ~* &* +@all\n") || strings.Contains(got, "s3cret") {
		t.Fatalf("no spec.acl: default user must stay as shipped and the password must be hashed:\n%s", got)
	}
	vc.Spec.ACL = []v1.ACLBinding{{
		Username:       "app-user",
		PasswordHashes: []string{strings.Repeat("a", 64), strings.Repeat("b", 64)},
		Permissions: []v1.ACLPermission{{RoleRef: "read-write", Keys: []v1.KeyPattern{
			{Pattern: "myapp:*", Access: v1.KeyAccessReadWrite}, {Pattern: "ro:*", Access: v1.KeyAccessRead}}}},
	}}
	roles := map[string]v1.ValkeyRoleSpec{"read-write": {
		Categories: []v1.CategoryRule{{Name: "read", Access: v1.RuleAllow}, {Name: "dangerous", Access: v1.RuleDeny}},
		Commands:   []v1.CommandRule{{Name: "cluster", Subcommand: "info", Access: v1.RuleAllow}},
	}}
	got = renderACL(vc, roles, "s3cret")
	want := "user app-user on resetpass resetkeys resetchannels -@all #" + strings.Repeat("a", 64) + " #" + strings.Repeat("b", 64) +
		" +@read -@dangerous +cluster|info ~myapp:* %R~ro:*\n"
	if !strings.Contains(got, "user default off") || !strings.HasSuffix(got, want) {
		t.Fatalf("got:\n%s\nwant suffix:\n%s", got, want)
	}
	// Declaring default replaces the switched-off line: a user may appear once in the file.
	vc.Spec.ACL[0].Username = "default"
	if got = renderACL(vc, roles, "s3cret"); strings.Count(got, "user default ") != 1 || strings.Contains(got, "user default off") {
		t.Fatalf("declared default user:\n%s", got)
	}
}

func TestResolveConfig(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = v1.AddToScheme(scheme)
	img := &v1.ValkeyImage{ObjectMeta: metav1.ObjectMeta{Name: "img"}, Spec: v1.ValkeyImageSpec{Repository: "valkey/valkey", Tag: "8.0.1", Version: "8.0.1"}}
	cfg := func(name, base, image string, valkey map[string]string) *v1.ValkeyConfig {
		return &v1.ValkeyConfig{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.ValkeyConfigSpec{BaseRef: base, ImageRef: image, Valkey: valkey}}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(img,
		cfg("base", "", "img", map[string]string{"maxmemory-policy": "allkeys-lru", "maxmemory": "1mb"}),
		cfg("small", "base", "", map[string]string{"maxmemory": "400mb"}),
		cfg("loop-a", "loop-b", "img", nil), cfg("loop-b", "loop-a", "", nil),
		cfg("orphan", "gone", "", nil), cfg("noimage", "", "missing", nil),
	).Build()
	ctx := context.Background()
	rc, err := resolveConfig(ctx, c, "small")
	if err != nil || rc.Valkey["maxmemory"] != "400mb" || rc.Valkey["maxmemory-policy"] != "allkeys-lru" || rc.Image.Tag != "8.0.1" || strings.Join(rc.Chain, ",") != "small,base" {
		t.Fatalf("inheritance: %+v, %v", rc, err)
	}
	for name, want := range map[string]string{
		"loop-a":  "ValkeyConfig baseRef cycle: loop-a -> loop-b -> loop-a",
		"orphan":  `ValkeyConfig "gone" not found (baseRef of orphan)`,
		"noimage": `ValkeyImage "missing" (imageRef of ValkeyConfig noimage) not found`,
		"absent":  `ValkeyConfig "absent" not found`,
	} {
		_, err := resolveConfig(ctx, c, name)
		var sp *SpecProblem
		if !errors.As(err, &sp) || sp.Reason != want {
			t.Errorf("%s: %v, want %q", name, err, want)
		}
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
