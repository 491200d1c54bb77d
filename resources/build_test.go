package resources

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
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
		t.Fatalf("%v (run go test ./resources -update to create it)", err)
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
	conf := RenderValkeyConf(rc, "")
	vn := newTestNode(vc, rc)
	pod := BuildPod(vc, rc, vn, desiredSpecHash(vc, rc), v1.ZoneSpreadBestEffort)
	golden(t, "pod.yaml", marshal(t, pod))
	golden(t, "valkey.conf", []byte(conf))
}

// newTestNode is the ValkeyNode my-cluster-8c04d of shard 2, as the API server returns it
// after creation (with a UID, which the pod's owner reference carries).
func newTestNode(vc *v1.ValkeyCluster, rc *ResolvedConfig) *v1.ValkeyNode {
	vn := BuildValkeyNode(vc, rc, "my-cluster-8c04d", 2, v1.JoinTypeReplica)
	vn.UID = "0d7a3f3c-0000-4000-8000-000000000002"
	return vn
}

func marshal(t *testing.T, obj any) []byte {
	t.Helper()
	out, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The ValkeyNode and its ConfigMap are pinned like the pod: the node records exactly what its
// pod runs, and the ConfigMap is the valkey.conf the pod reads.
func TestBuildValkeyNodeAndConfigMapGolden(t *testing.T) {
	vc, rc := newTestCluster(), newResolved()
	vn := newTestNode(vc, rc)
	golden(t, "valkeynode.yaml", marshal(t, vn))
	golden(t, "node-configmap.yaml", marshal(t, BuildNodeConfigMap(vc, vn, RenderValkeyConf(rc, ""))))
}

// The ownership chain that garbage collection follows: cluster -> ValkeyNode -> pod and
// ConfigMap, each a controller reference, and the names and labels of the reference docs.
func TestNodeOwnershipNamesAndLabels(t *testing.T) {
	vc, rc := newTestCluster(), newResolved()
	vn := newTestNode(vc, rc)
	pod := BuildPod(vc, rc, vn, "hash", v1.ZoneSpreadBestEffort)
	cm := BuildNodeConfigMap(vc, vn, RenderValkeyConf(rc, ""))

	if !metav1.IsControlledBy(vn, vc) {
		t.Errorf("ValkeyNode owner references %+v, want the cluster as controller", vn.OwnerReferences)
	}
	for _, obj := range []metav1.Object{pod, cm} {
		if !metav1.IsControlledBy(obj, vn) || metav1.IsControlledBy(obj, vc) {
			t.Errorf("%s owner references %+v, want the ValkeyNode as controller", obj.GetName(), obj.GetOwnerReferences())
		}
		if obj.GetLabels()[v1.LabelCluster] != vc.Name || obj.GetLabels()["app.kubernetes.io/instance"] != vc.Name {
			t.Errorf("%s labels %v lack the cluster", obj.GetName(), obj.GetLabels())
		}
		if _, ok := obj.GetLabels()[v1.LabelJoinType]; ok {
			t.Errorf("%s carries the join-type label, which is on ValkeyNodes only", obj.GetName())
		}
	}
	if pod.Name != vn.Name || cm.Name != vn.Name+"-config" {
		t.Errorf("names: node %s, pod %s, ConfigMap %s", vn.Name, pod.Name, cm.Name)
	}
	if pod.Labels[v1.LabelShard] != "2" || vn.Labels[v1.LabelJoinType] != "replica" {
		t.Errorf("pod labels %v, node labels %v", pod.Labels, vn.Labels)
	}
	if _, ok := vn.Labels[v1.LabelShard]; ok {
		t.Errorf("the ValkeyNode carries the shard-index label; its spec.shardIndex says it")
	}
	if got := pod.Spec.Volumes[0].ConfigMap; got == nil || got.Name != cm.Name {
		t.Errorf("the pod mounts %+v, want its own ConfigMap %s", got, cm.Name)
	}
	var ports []string
	for _, p := range pod.Spec.Containers[0].Ports {
		ports = append(ports, p.Name)
	}
	if strings.Join(ports, ",") != "valkey,valkey-bus" {
		t.Errorf("container port names %v", ports)
	}
	if founding := BuildValkeyNode(vc, rc, "my-cluster-00000", 0, ""); founding.Labels[v1.LabelJoinType] != "" {
		t.Errorf("a founding node carries join-type %q", founding.Labels[v1.LabelJoinType])
	}
}

// concepts/pod-management.md, point by point: {cluster}-{random} names, found by
// app.kubernetes.io/instance and valkey.gomomento.com/shard-index; restartPolicy Never; a
// liveness probe and no readiness probe; an emptyDir data directory and no claim; the arm64
// toleration. (PodDisruptionBudgets are ours: see disruption.go.)
func TestPodAsPodManagementDescribes(t *testing.T) {
	vc, rc := newTestCluster(), newResolved()
	name := NewPodName(vc)
	if !strings.HasPrefix(name, "my-cluster-") || len(name) != len("my-cluster-")+5 {
		t.Errorf("pod name %q, want my-cluster-<5 random characters>", name)
	}
	pod := BuildPod(vc, rc, BuildValkeyNode(vc, rc, name, 2, ""), "h", v1.ZoneSpreadBestEffort)
	if pod.Labels["app.kubernetes.io/instance"] != "my-cluster" || pod.Labels[v1.LabelShard] != "2" {
		t.Errorf("labels %v", pod.Labels)
	}
	if pod.Spec.RestartPolicy != "Never" {
		t.Errorf("restartPolicy %q", pod.Spec.RestartPolicy)
	}
	c := pod.Spec.Containers[0]
	if len(pod.Spec.Containers) != 1 || c.LivenessProbe == nil || c.ReadinessProbe != nil || c.StartupProbe != nil {
		t.Errorf("want one container with a liveness probe only: %+v", pod.Spec.Containers)
	}
	for _, vol := range pod.Spec.Volumes {
		if vol.PersistentVolumeClaim != nil || (vol.Name == "data" && vol.EmptyDir == nil) {
			t.Errorf("volume %+v: want the data directory on an emptyDir, no claim", vol)
		}
	}
	want := []string{"kubernetes.io/arch=arm64:NoSchedule"}
	var got []string
	for _, tol := range pod.Spec.Tolerations {
		got = append(got, fmt.Sprintf("%s=%s:%s", tol.Key, tol.Value, tol.Effect))
	}
	if !slices.Equal(got, want) {
		t.Errorf("tolerations %v, want %v", got, want)
	}
}

// spec.valkeySettings are exactly the directives of the node's valkey.conf.
func TestValkeySettingsAreTheRenderedConf(t *testing.T) {
	rc := newResolved()
	settings := ValkeySettings(rc, false)
	lines := strings.Split(strings.TrimSpace(RenderValkeyConf(rc, "")), "\n")[1:] // after the header comment
	if len(lines) != len(settings) {
		t.Fatalf("%d conf lines, %d settings", len(lines), len(settings))
	}
	for _, l := range lines {
		k, v, _ := strings.Cut(l, " ")
		if settings[k] != v {
			t.Errorf("conf line %q, setting %q=%q", l, k, settings[k])
		}
	}
	if settings["cluster-enabled"] != "yes" || settings["maxmemory"] != "1500mb" {
		t.Errorf("forced or configured settings missing: %v", settings)
	}
}

// Directives the docs do not force reach valkey.conf as written, after the operator's own;
// every forced directive is written once, by the operator (admission and resolveConfig keep a
// user's copy out, which would otherwise come later in the file and win).
func TestPassThroughDirectivesReachTheConf(t *testing.T) {
	rc := newResolved()
	passed := map[string]string{
		"cluster-allow-reads-when-down": "yes", "cluster-require-full-coverage": "no",
		"tls-protocols": `"TLSv1.2 TLSv1.3"`, "tls-ciphersuites": "TLS_AES_256_GCM_SHA384",
		"unixsocket": "/tmp/valkey.sock", "loglevel": "warning",
	}
	maps.Copy(rc.Valkey, passed)
	lines := strings.Split(strings.TrimSpace(RenderValkeyConf(rc, "")), "\n")[1:]
	count := map[string]int{}
	lastOwned, firstUser := -1, len(lines)
	for i, l := range lines {
		k, v, _ := strings.Cut(l, " ")
		count[k]++
		if want, ok := passed[k]; ok {
			firstUser = min(firstUser, i)
			if v != want {
				t.Errorf("conf line %q, want %s %s", l, k, want)
			}
		} else if v1.IsOwnedDirective(k) {
			lastOwned = max(lastOwned, i)
		}
	}
	for k := range passed {
		if count[k] != 1 {
			t.Errorf("%s appears %d times in the conf, want once", k, count[k])
		}
	}
	for _, k := range []string{"port", "bind", "protected-mode", "dir", "aclfile", "cluster-enabled", "cluster-config-file", "cluster-node-timeout"} {
		if count[k] != 1 {
			t.Errorf("forced %s appears %d times, want once", k, count[k])
		}
	}
	if lastOwned > firstUser {
		t.Errorf("an operator directive comes after a ValkeyConfig one:\n%s", strings.Join(lines, "\n"))
	}
}

// The spec hash is the outdated test of a rolling upgrade: it changes with exactly the rows of
// the change-impact table that roll pods, and with nothing else.
func TestSpecHash(t *testing.T) {
	vc, rc := newTestCluster(), newResolved()
	base := desiredSpecHash(vc, rc)
	if got := NodeSpecHash(&newTestNode(vc, rc).Spec); got != base {
		t.Fatalf("a node built now hashes %s, the spec %s: every new node would be outdated", got, base)
	}
	for name, mutate := range map[string]func(*v1.ValkeyCluster, *ResolvedConfig){
		"podAnnotations": func(c *v1.ValkeyCluster, _ *ResolvedConfig) {
			c.Spec.PodAnnotations = map[string]string{"other": "x"}
		},
		"zoneSpread": func(c *v1.ValkeyCluster, _ *ResolvedConfig) {
			c.Spec.Placement.ZoneSpread = v1.ZoneSpreadBestEffort
		},
		"chain names": func(_ *v1.ValkeyCluster, r *ResolvedConfig) { r.Chain = []string{"renamed", "base"} },
		"zone order": func(c *v1.ValkeyCluster, _ *ResolvedConfig) {
			slices.Reverse(c.Spec.Placement.Zones)
			c.Spec.Placement.Zones = append(c.Spec.Placement.Zones, c.Spec.Placement.Zones[0])
		},
		"quantity spelling": func(_ *v1.ValkeyCluster, r *ResolvedConfig) {
			if r.Resources.CPU != nil {
				r.Resources.CPU = ptr.To(resource.MustParse(fmt.Sprintf("%dm", r.Resources.CPU.MilliValue())))
			}
		},
		"memory in bytes": func(_ *v1.ValkeyCluster, r *ResolvedConfig) {
			r.Resources.Memory = ptr.To(resource.MustParse(fmt.Sprintf("%d", r.Resources.Memory.Value())))
		},
		"shutdown-on-sigterm default": func(_ *v1.ValkeyCluster, r *ResolvedConfig) { r.Image.Version = "9.1.2" },
		// Applied live by the settings planner (liveconf): no pod is replaced for them.
		"live maxmemory": func(_ *v1.ValkeyCluster, r *ResolvedConfig) {
			r.Valkey = map[string]string{"maxmemory": "1mb"}
		},
		"live settings removed": func(_ *v1.ValkeyCluster, r *ResolvedConfig) { r.Valkey = nil },
		"live settings changed": func(_ *v1.ValkeyCluster, r *ResolvedConfig) {
			r.Valkey = map[string]string{"maxmemory-policy": "allkeys-lru", "hz": "50", "timeout": "300"}
		},
	} {
		c, r := newTestCluster(), newResolved()
		mutate(c, r)
		if h := desiredSpecHash(c, r); h != base {
			t.Errorf("changing %s changed the spec hash; it must not replace pods", name)
		}
	}
	for name, mutate := range map[string]func(*v1.ValkeyCluster, *ResolvedConfig){
		"image": func(_ *v1.ValkeyCluster, r *ResolvedConfig) { r.Image.Tag = "8.0.2" },
		"memory": func(_ *v1.ValkeyCluster, r *ResolvedConfig) {
			r.Resources.Memory = ptr.To(resource.MustParse("3Gi"))
		},
		"config": func(_ *v1.ValkeyCluster, r *ResolvedConfig) { r.Valkey = map[string]string{"databases": "4"} },
		"restart and live config": func(_ *v1.ValkeyCluster, r *ResolvedConfig) {
			r.Valkey = map[string]string{"maxmemory": "2mb", "appendonly": "yes"}
		},
		"zones":        func(c *v1.ValkeyCluster, _ *ResolvedConfig) { c.Spec.Placement.Zones = []string{"zone-c"} },
		"nodeSelector": func(c *v1.ValkeyCluster, _ *ResolvedConfig) { c.Spec.Placement.NodeSelector = nil },
	} {
		c, r := newTestCluster(), newResolved()
		mutate(c, r)
		if desiredSpecHash(c, r) == base {
			t.Errorf("changing %s did not change the spec hash", name)
		}
	}
	// The start hash (did a failed pod fail on the current spec?) sees the live settings too, as
	// written: any edit of a value is a new spec to try, even one Valkey would read the same (a
	// value that failed on start, "timeout 0300", is fixed as "300", which Go reads alike).
	c, r := newTestCluster(), newResolved()
	start := desiredStartHash(c, r)
	r.Valkey = map[string]string{"maxmemory": "1572864000", "maxmemory-policy": "ALLKEYS-LRU"}
	if desiredStartHash(c, r) == start {
		t.Error("the live values written otherwise left the start hash as it was")
	}
	r.Valkey = map[string]string{"maxmemory": `"1572864000"`, "maxmemory-policy": "ALLKEYS-LRU"}
	quoted := desiredStartHash(c, r)
	r.Valkey = map[string]string{"maxmemory": "1572864000", "maxmemory-policy": "ALLKEYS-LRU"}
	if desiredStartHash(c, r) != quoted {
		t.Error("quoting a value changed the start hash")
	}
	r.Valkey = map[string]string{"maxmemory": "1gb", "maxmemory-policy": "allkeys-lru"}
	if desiredStartHash(c, r) == start || desiredSpecHash(c, r) != base {
		t.Error("a live setting changed must change the start hash, not the spec hash")
	}
}

// The operator upgrade that moved the node's files to the original's paths (/var/lib/valkey,
// /etc/valkey/acl, /etc/valkey/tls) replaces no pod: a node recorded by the operator before it
// (testdata/valkeynode-before-paths.yaml, the golden file of commit c1ef0e5, /data and
// /etc/valkey-secret) hashes as a node built now, plain and with TLS; any other change still
// outdates it.
func TestSpecHashIgnoresOlderPaths(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "valkeynode-before-paths.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var older v1.ValkeyNode
	if err := yaml.Unmarshal(data, &older); err != nil {
		t.Fatal(err)
	}
	vc, rc := newTestCluster(), newResolved()
	now := newTestNode(vc, rc)
	if older.Spec.ValkeySettings["dir"] == now.Spec.ValkeySettings["dir"] || now.Spec.ValkeySettings["dir"] != "/var/lib/valkey" {
		t.Fatalf("dir %q before, %q now", older.Spec.ValkeySettings["dir"], now.Spec.ValkeySettings["dir"])
	}
	if NodeSpecHash(&older.Spec) != desiredSpecHash(vc, rc) {
		t.Error("a node an older operator recorded, with its paths, is outdated: the upgrade would roll every pod")
	}
	tlsOlder := older.DeepCopy()
	tlsOlder.Spec.TLSSecret = "vc-tls"
	for k, f := range map[string]string{"tls-cert-file": "tls.crt", "tls-key-file": "tls.key", "tls-ca-cert-file": "ca.crt"} {
		tlsOlder.Spec.ValkeySettings[k] = "/etc/valkey-tls/" + f
	}
	tlsNow := newTestNode(vc, rc)
	tlsNow.Spec.TLSSecret = "vc-tls"
	maps.Copy(tlsNow.Spec.ValkeySettings, map[string]string{"tls-cert-file": TLSMountPath + "/tls.crt", "tls-key-file": TLSMountPath + "/tls.key", "tls-ca-cert-file": TLSMountPath + "/ca.crt"})
	if NodeSpecHash(&tlsOlder.Spec) != NodeSpecHash(&tlsNow.Spec) {
		t.Error("a TLS node with the older paths is outdated")
	}
	older.Spec.ValkeySettings["databases"] = "4"
	if NodeSpecHash(&older.Spec) == desiredSpecHash(vc, rc) {
		t.Error("a setting changed on an older node did not outdate it")
	}
}

// A TLS cluster's nodes mount the Secret tls.secretRef names: pointing it at another Secret
// replaces them (a pod's volumes cannot change), while the same Secret rotated in place does
// not touch the spec.
func TestSpecHashTLSSecret(t *testing.T) {
	vc, rc := newTestCluster(), newResolved()
	vc.Spec.TLS = &v1.TLSSpec{SecretRef: "vc-tls"}
	base := desiredSpecHash(vc, rc)
	if got := NodeSpecHash(&newTestNode(vc, rc).Spec); got != base {
		t.Fatalf("a TLS node built now hashes %s, the spec %s", got, base)
	}
	vc.Spec.TLS.SecretRef = "vc-tls-2"
	if desiredSpecHash(vc, rc) == base {
		t.Error("naming another TLS Secret did not change the spec hash: the nodes would keep mounting the old one")
	}
}

// A deleted primary hands its slots over before it stops: Valkey 9 by itself on SIGTERM
// (shutdown-on-sigterm failover, which 8.x rejects), Valkey 8 through a preStop delay in which
// the operator fails over. Neither is in the spec hash: an operator upgrade that adds them does
// not roll running pods.
func TestHandoverOnDeletion(t *testing.T) {
	vc := newTestCluster()
	line := "shutdown-on-sigterm failover\n"
	for _, c := range []struct {
		version string
		nine    bool
	}{{"8.0.1", false}, {"8.1.0", false}, {"9.0.0", true}, {"9.1.2", true}, {"10.0.0", true}} {
		rc := newResolved()
		rc.Image.Version = c.version
		conf := RenderValkeyConf(rc, "")
		if strings.Contains(conf, line) != c.nine {
			t.Errorf("%s: shutdown-on-sigterm failover rendered: %v, want %v", c.version, !c.nine, c.nine)
		}
		vn := BuildValkeyNode(vc, rc, "my-cluster-8c04d", 0, "")
		withoutDefault := vn.Spec.DeepCopy()
		delete(withoutDefault.ValkeySettings, "shutdown-on-sigterm")
		if NodeSpecHash(&vn.Spec) != NodeSpecHash(withoutDefault) {
			t.Errorf("%s: the handover directive changed the spec hash", c.version)
		}
		hook := BuildPod(vc, rc, vn, "h", v1.ZoneSpreadBestEffort).Spec.Containers[0].Lifecycle
		if (hook != nil) == c.nine {
			t.Errorf("%s: preStop hook %+v", c.version, hook)
		}
		if hook != nil && preStopLimitSeconds+movedHoldSeconds+7 > 30 {
			t.Errorf("the preStop hook must end 7 s before terminationGracePeriodSeconds, for the server to shut down")
		}
	}
	// A directive the user sets is theirs, and in the hash like any other (setting it to the
	// operator's own default builds the same node).
	rc := newResolved()
	rc.Image.Version = "9.1.2"
	base := desiredSpecHash(vc, rc)
	rc.Valkey["shutdown-on-sigterm"] = "failover"
	if !strings.Contains(RenderValkeyConf(rc, ""), line) || desiredSpecHash(vc, rc) != base {
		t.Errorf("shutdown-on-sigterm set to the operator's default is rendered once and builds the same node")
	}
	rc.Valkey["shutdown-on-sigterm"] = "nosave"
	if desiredSpecHash(vc, rc) == base {
		t.Errorf("a configured shutdown-on-sigterm is rendered and hashed")
	}
}

// desiredSpecHash is NodeSpecHash of the spec a node created now would be built from, as a pass
// computes it.
func desiredSpecHash(vc *v1.ValkeyCluster, rc *ResolvedConfig) string {
	return NodeSpecHash(&BuildValkeyNode(vc, rc, "", 0, "").Spec)
}

// desiredStartHash is StartSpecHash of the spec a node created now would be built from.
func desiredStartHash(vc *v1.ValkeyCluster, rc *ResolvedConfig) string {
	return StartSpecHash(&BuildValkeyNode(vc, rc, "", 0, "").Spec)
}

// The data emptyDir's sizeLimit: copies of the dataset (bounded by the memory limit, else
// maxmemory) that a node may hold on disk at once, by persistence, plus slack; none when nothing
// bounds the dataset. It is derived from the node's record, so the spec hash, and with it every
// running node, is the same as before the limit existed (the golden pod's spec-hash did not move).
func TestDataSizeLimit(t *testing.T) {
	for _, tc := range []struct {
		name     string
		memory   string
		settings map[string]string
		want     string
	}{
		{"memory limit, no persistence", "2Gi", map[string]string{"save": `""`, "appendonly": "no", "maxmemory": "1500mb"}, "4160Mi"},
		{"RDB snapshots", "1Gi", map[string]string{"save": "3600 1", "appendonly": "no"}, "3136Mi"},
		{"AOF", "1Gi", map[string]string{"save": `""`, "appendonly": "yes"}, "5184Mi"},
		{"AOF and snapshots", "1Gi", map[string]string{"save": "3600 1", "appendonly": "YES"}, "6208Mi"},
		{"no memory limit: maxmemory", "", map[string]string{"maxmemory": "100mb"}, "264Mi"},
		{"unparsable memory: maxmemory", "lots", map[string]string{"maxmemory": "1gb"}, "2112Mi"},
		{"nothing bounds the dataset", "", map[string]string{"maxmemory": "0"}, ""},
		{"nothing at all", "", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := DataSizeLimit(&v1.ValkeyNodeSpec{Memory: tc.memory, ValkeySettings: tc.settings})
			switch {
			case tc.want == "" && got != nil:
				t.Fatalf("sizeLimit %s, want none", got)
			case tc.want == "":
			case got == nil || got.Cmp(resource.MustParse(tc.want)) != 0:
				t.Fatalf("sizeLimit %v, want %s", got, tc.want)
			}
		})
	}
	vc, rc := newTestCluster(), newResolved()
	vn := newTestNode(vc, rc)
	if got := BuildPod(vc, rc, vn, "h", v1.ZoneSpreadBestEffort).Spec.Volumes[2]; got.Name != "data" || got.EmptyDir.SizeLimit.Cmp(*DataVolumeLimit(&vn.Spec)) != 0 {
		t.Fatalf("the pod's data volume %+v", got)
	}
}

// TestDataVolumeLimit: a pod's data volume is sized for its node grown GrowthRoom times in
// place, from its memory or, without one, its maxmemory; the settings it was given stay as they
// are (the record is not changed).
func TestDataVolumeLimit(t *testing.T) {
	settings := map[string]string{"maxmemory": "100mb"}
	for _, tc := range []struct {
		name, memory, want string
	}{
		{"memory", "256Mi", "1088Mi"},
		{"maxmemory", "", "464Mi"},
	} {
		got := DataVolumeLimit(&v1.ValkeyNodeSpec{Memory: tc.memory, ValkeySettings: settings})
		if got == nil || got.Cmp(resource.MustParse(tc.want)) != 0 {
			t.Errorf("%s: %v, want %s", tc.name, got, tc.want)
		}
	}
	if settings["maxmemory"] != "100mb" {
		t.Fatalf("the spec's settings changed: %v", settings)
	}
	if got := DataVolumeLimit(&v1.ValkeyNodeSpec{}); got != nil {
		t.Fatalf("nothing bounds the dataset: %v", got)
	}
}

// TestShapeHash: the shape leaves out CPU and memory, and only them.
func TestShapeHash(t *testing.T) {
	a := v1.ValkeyNodeSpec{Image: "valkey/valkey:8.0.1", CPU: "500m", Memory: "256Mi", ValkeySettings: map[string]string{"appendonly": "no"}}
	b := a
	b.CPU, b.Memory = "1", "512Mi"
	if NodeSpecHash(&a) == NodeSpecHash(&b) || ShapeHash(&a) != ShapeHash(&b) {
		t.Fatal("a size change: another spec hash, the same shape")
	}
	c := a
	c.Image = "valkey/valkey:9.1.2"
	if ShapeHash(&a) == ShapeHash(&c) {
		t.Fatal("an image change: the same shape")
	}
}
