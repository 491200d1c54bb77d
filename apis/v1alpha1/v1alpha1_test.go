package v1alpha1_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// Pure tests: the Go helpers, and the generated CRDs read as files (no API server).

func readCRD(t *testing.T, plural string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	path := filepath.Join("..", "..", "manifests", "crds", "valkey.gomomento.com_"+plural+".yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read generated CRD (run `make manifests`): %v", err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != v1alpha1.Version {
		t.Fatalf("%s: want exactly version %s, got %+v", path, v1alpha1.Version, crd.Spec.Versions)
	}
	return crd
}

// The CEL rules on ValkeyConfig spec.valkey are hand-written markers; the Go table of owned
// directives is what the operator checks resolved configs with. They must say the same
// thing, rule for rule and word for word.
func TestCRDDirectiveRulesMatchGoTable(t *testing.T) {
	crd := readCRD(t, "valkeyconfigs")
	valkey := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["valkey"]
	got := map[string]string{}
	const lowercaseRule = "self.all(k, k.matches('^[a-z0-9][a-z0-9-]*$'))"
	for _, rule := range valkey.XValidations {
		msg := rule.Message
		if rule.Rule == lowercaseRule {
			// The one rule whose message names the key: it starts with the Go message.
			msg = strings.TrimPrefix(strings.SplitN(rule.MessageExpression, ":", 2)[0], "'")
		} else if rule.MessageExpression != "" {
			t.Errorf("rule %q has a messageExpression; the per-directive rules use fixed messages", rule.Rule)
		}
		got[rule.Rule] = msg
	}
	want := map[string]string{
		lowercaseRule:          v1alpha1.LowercaseMessage,
		"!('logfile' in self)": v1alpha1.LogfileMessage,
	}
	for _, d := range v1alpha1.OwnedDirectives() {
		want[fmt.Sprintf("!('%s' in self)", d)] = v1alpha1.OwnedDirectiveMessage(d)
	}
	for _, d := range v1alpha1.ValueRuleDirectives() {
		rule, msg := v1alpha1.ValueRuleCEL(d)
		want[rule] = msg
	}
	for rule, msg := range want {
		if got[rule] != msg {
			t.Errorf("CRD rule %s\n  has message %q\n  want        %q", rule, got[rule], msg)
		}
	}
	for rule := range got {
		if _, ok := want[rule]; !ok {
			t.Errorf("CRD has rule %s that the Go table does not know", rule)
		}
	}
}

func TestCheckDirective(t *testing.T) {
	tests := []struct {
		name, value string
		wantErr     string
	}{
		{name: "maxmemory", value: "1500mb"},
		{name: "maxmemory-policy", value: "allkeys-lru"},
		{name: "loglevel", value: "notice"},
		{name: "save", value: ""},
		{name: "client-output-buffer-limit", value: "pubsub 32mb 8mb 60"},
		{name: "cluster-allow-reads-when-down", value: "yes"},
		{name: "cluster-require-full-coverage", value: "no"},
		{name: "tls-protocols", value: "TLSv1.3"},
		{name: "tls-ciphersuites", value: "TLS_AES_256_GCM_SHA384"},
		{name: "unixsocket", value: "/tmp/valkey.sock"},
		{name: "port", value: "7000", wantErr: "valkey directive port cannot be set (forced: the Service, the probes and the operator reach every node on port 6379"},
		{name: "replicaof", value: "10.0.0.1 6379", wantErr: "valkey directive replicaof cannot be set (Valkey refuses replicaof in cluster mode"},
		{name: "tls-port", value: "6380", wantErr: "valkey directive tls-port cannot be set (forced in TLS mode: TLS is configured from the ValkeyCluster's spec.tls"},
		{name: "cluster-node-timeout", value: "15000", wantErr: "valkey directive cluster-node-timeout cannot be set (forced: the operator runs every node in cluster mode"},
		{name: "logfile", value: "/tmp/valkey.log", wantErr: v1alpha1.LogfileMessage},
		{name: "PORT", value: "7000", wantErr: v1alpha1.LowercaseMessage},
		{name: "Maxmemory", value: "1gb", wantErr: v1alpha1.LowercaseMessage},
		{name: "max memory", value: "1gb", wantErr: v1alpha1.LowercaseMessage},
		{name: "", value: "x", wantErr: v1alpha1.LowercaseMessage},
		{name: "maxmemory", value: "1mb\nport 7000", wantErr: "valkey directive maxmemory: valkey directive values must be one line: a line break would start another directive"},
		{name: "maxmemory", value: "1mb\rport 7000", wantErr: "values must be one line"},
		{name: "loadmodule", value: "/usr/lib/valkey/modules/x.so", wantErr: "valkey directive loadmodule cannot be set (a module is native code"},
		{name: "enable-debug-command", value: "no"},
		{name: "enable-debug-command", value: "NO"},
		{name: "enable-debug-command", value: "local", wantErr: "valkey directive enable-debug-command can only be no"},
		{name: "enable-module-command", value: "yes", wantErr: "valkey directive enable-module-command can only be no"},
		{name: "enable-protected-configs", value: "yes", wantErr: "valkey directive enable-protected-configs can only be no"},
		{name: "maxmemory-policy", value: "sometimes", wantErr: "valkey directive maxmemory-policy must be one of"},
		{name: "maxmemory", value: "1.5gb", wantErr: "valkey directive maxmemory must be a size in bytes"},
		{name: "timeout", value: "2147483648", wantErr: "valkey directive timeout must be a whole number"},
		{name: "timeout", value: "2147483647"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%q=%q", tc.name, tc.value), func(t *testing.T) {
			err := v1alpha1.CheckDirective(tc.name, tc.value)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("accepted, want %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("error %q, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

// SPEC §2.8: exactly the forced settings of reference/forced-settings.md (base and TLS mode,
// primaryuser and primaryauth under their old names too, and the bus port the operator
// publishes), and the directives that cannot work beside them, are refused; every other
// directive passes through, as in the original.
func TestOwnedDirectivesAreTheForcedSettingsAndNoMore(t *testing.T) {
	want := []string{
		// forced-settings.md, base settings.
		"cluster-enabled", "cluster-node-timeout", "cluster-config-file", "dir", "port", "bind",
		"protected-mode", "aclfile", "primaryuser", "primaryauth",
		// Their old names, and the bus port.
		"masteruser", "masterauth", "cluster-port",
		// forced-settings.md, TLS-mode settings.
		"tls-port", "tls-cluster", "tls-replication", "tls-cert-file", "tls-key-file",
		"tls-ca-cert-file", "tls-auth-clients", "cluster-announce-hostname",
		"cluster-preferred-endpoint-type",
		// Announced addresses: a node announcing another address than its pod's is cut off
		// from its cluster (break test: a roll stalled with the shard's healthy replica retired).
		"cluster-announce-ip", "cluster-announce-port", "cluster-announce-bus-port",
		"cluster-announce-tls-port", "cluster-announce-client-ipv4", "cluster-announce-client-ipv6",
		"replica-announce-ip", "replica-announce-port", "slave-announce-ip", "slave-announce-port",
		// Cannot work beside them.
		"daemonize", "include", "user", "requirepass", "replicaof", "slaveof", "rename-command",
		// Native code inside a node of a shared platform.
		"loadmodule",
	}
	slices.Sort(want)
	if got := v1alpha1.OwnedDirectives(); !slices.Equal(got, want) {
		t.Errorf("OwnedDirectives() =\n  %v\nwant\n  %v", got, want)
	}
	if v1alpha1.CheckDirective("logfile", "x") == nil {
		t.Error("logfile is allowed, want it refused")
	}
	for _, d := range []string{
		"loglevel", "save", "appendonly", "pidfile", "unixsocket", "unixsocketperm",
		"dbfilename", "appendfilename", "cluster-allow-reads-when-down",
		"cluster-require-full-coverage", "cluster-replica-validity-factor",
		"tls-protocols", "tls-ciphersuites", "tls-ciphers", "tls-prefer-server-ciphers",
	} {
		if err := v1alpha1.CheckDirective(d, "x"); err != nil {
			t.Errorf("%s refused: %v", d, err)
		}
	}
	if err := v1alpha1.CheckDirective("maxmemory", "1gb"); err != nil {
		t.Errorf("maxmemory refused: %v", err)
	}
	if !slices.IsSorted(v1alpha1.OwnedDirectives()) {
		t.Error("OwnedDirectives is not sorted")
	}
	for _, d := range []string{"port", "PORT", "Tls-Port", "cluster-enabled", "logfile", "LogFile", "rename-command"} {
		if !v1alpha1.IsOwnedDirective(d) {
			t.Errorf("IsOwnedDirective(%q) = false", d)
		}
	}
	for _, d := range []string{"maxmemory", "loglevel", "save", "tls", "clusterx"} {
		if v1alpha1.IsOwnedDirective(d) {
			t.Errorf("IsOwnedDirective(%q) = true", d)
		}
	}
	if v1alpha1.OwnedDirectiveMessage("maxmemory") != "" {
		t.Error("OwnedDirectiveMessage gives a message for an allowed directive")
	}
}

func TestPrinterColumns(t *testing.T) {
	tests := []struct {
		plural string
		want   []string // name=jsonPath, in order
	}{
		// The original's four (reference/cluster-status.md: CONFIG SHARDS REPLICAS STATE) in
		// its order, so scripts reading columns by position keep working; ours after them.
		{"valkeyclusters", []string{
			"Config=.spec.configRef", "Shards=.spec.shards", "Replicas=.spec.replicasPerShard",
			"State=.status.state", "Ready=.status.readyNodes", "Message=.status.message",
			"Age=.metadata.creationTimestamp",
		}},
		{"valkeynodes", []string{"Cluster=.spec.clusterName", "Image=.spec.image", "Lifecycle=.spec.lifecycle"}},
		{"valkeyimages", []string{"Repository=.spec.repository", "Tag=.spec.tag", "Version=.spec.version", "Age=.metadata.creationTimestamp"}},
		{"valkeyconfigs", []string{"ImageRef=.spec.imageRef", "BaseRef=.spec.baseRef", "Age=.metadata.creationTimestamp"}},
		{"valkeyroles", nil},
	}
	for _, tc := range tests {
		t.Run(tc.plural, func(t *testing.T) {
			var got []string
			for _, col := range readCRD(t, tc.plural).Spec.Versions[0].AdditionalPrinterColumns {
				got = append(got, col.Name+"="+col.JSONPath)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("printer columns %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCRDScopesAndStatusSubresource(t *testing.T) {
	for plural, scope := range map[string]apiextensionsv1.ResourceScope{
		"valkeyclusters": apiextensionsv1.NamespaceScoped,
		"valkeyconfigs":  apiextensionsv1.ClusterScoped,
		"valkeyimages":   apiextensionsv1.ClusterScoped,
		"valkeyroles":    apiextensionsv1.ClusterScoped,
	} {
		crd := readCRD(t, plural)
		if crd.Spec.Scope != scope {
			t.Errorf("%s scope %s, want %s", plural, crd.Spec.Scope, scope)
		}
		if crd.Spec.Group != v1alpha1.Group {
			t.Errorf("%s group %s, want %s", plural, crd.Spec.Group, v1alpha1.Group)
		}
		if sub := crd.Spec.Versions[0].Subresources; sub == nil || sub.Status == nil {
			t.Errorf("%s has no status subresource", plural)
		}
	}
}

func TestSchemeKnowsEveryKind(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"ValkeyImage", "ValkeyConfig", "ValkeyRole", "ValkeyCluster"} {
		for _, k := range []string{kind, kind + "List"} {
			if _, err := scheme.New(v1alpha1.GroupVersion.WithKind(k)); err != nil {
				t.Errorf("scheme.New(%s): %v", k, err)
			}
		}
	}
}

func TestHelpers(t *testing.T) {
	if !v1alpha1.IsReservedKey(v1alpha1.AnnotationSpecHash) || !v1alpha1.IsReservedKey(v1alpha1.LabelShard) ||
		v1alpha1.IsReservedKey("prometheus.io/scrape") || v1alpha1.IsReservedKey("valkey.gomomento.com") {
		t.Error("IsReservedKey: wrong answer")
	}
	// The documented keys (reference/labels-annotations.md) and our own.
	if v1alpha1.LabelCluster != "valkey.gomomento.com/cluster" || v1alpha1.LabelShard != "valkey.gomomento.com/shard-index" ||
		v1alpha1.LabelJoinType != "valkey.gomomento.com/join-type" || v1alpha1.AnnotationSpecHash != "valkey.gomomento.com/spec-hash" {
		t.Error("label and annotation keys changed: they are on every live pod")
	}
	if got := v1alpha1.OperatorAuthSecretName("my-cluster"); got != "my-cluster-operator-auth" {
		t.Errorf("OperatorAuthSecretName = %q", got)
	}
	if got := v1alpha1.NodeConfigMapName("my-cluster-1a4f2"); got != "my-cluster-1a4f2-config" {
		t.Errorf("NodeConfigMapName = %q", got)
	}
	states := v1alpha1.States()
	if want := []v1alpha1.State{"Bootstrapping", "Forming", "Active", "Upgrading", "Invalid"}; !slices.Equal(states, want) {
		t.Errorf("States() = %v, want %v", states, want)
	}
	for _, s := range states {
		if !s.IsValid() {
			t.Errorf("%s.IsValid() = false", s)
		}
	}
	if v1alpha1.State("Creating").IsValid() || v1alpha1.State("").IsValid() {
		t.Error("State.IsValid accepts an unknown state")
	}
	if !v1alpha1.ZoneSpreadBestEffort.IsValid() || !v1alpha1.ZoneSpreadRequired.IsValid() ||
		v1alpha1.ZoneSpread("").IsValid() || v1alpha1.ZoneSpread("BestEffort").IsValid() {
		t.Error("ZoneSpread.IsValid: wrong answer")
	}
	if n := (v1alpha1.ValkeyClusterSpec{Shards: 3, ReplicasPerShard: 2}).NodeCount(); n != 9 {
		t.Errorf("NodeCount() = %d, want 9", n)
	}
	if img := (v1alpha1.ValkeyImageSpec{Repository: "valkey/valkey", Tag: "9.0.0"}).Image(); img != "valkey/valkey:9.0.0" {
		t.Errorf("Image() = %q", img)
	}
	if gr := v1alpha1.Resource("valkeyclusters"); gr.Group != v1alpha1.Group || gr.Resource != "valkeyclusters" {
		t.Errorf("Resource() = %v", gr)
	}
}

func TestDeepCopyIsDeep(t *testing.T) {
	orig := &v1alpha1.ValkeyCluster{Spec: v1alpha1.ValkeyClusterSpec{
		PodAnnotations: map[string]string{"a": "1"},
		Placement:      &v1alpha1.Placement{Zones: []string{"z1"}, NodeSelector: map[string]string{"pool": "a"}},
		ACL:            []v1alpha1.ACLBinding{{Username: "u", PasswordHashes: []string{"h"}}},
		TLS:            &v1alpha1.TLSSpec{SecretRef: "s"},
	}}
	cp := orig.DeepCopy()
	if !reflect.DeepEqual(orig, cp) {
		t.Fatalf("DeepCopy differs from the original:\n%+v\n%+v", orig.Spec, cp.Spec)
	}
	if (*v1alpha1.ValkeyClusterSpec)(nil).DeepCopy() != nil {
		t.Error("DeepCopy of a nil spec is not nil")
	}
	cp.Spec.PodAnnotations["a"] = "2"
	cp.Spec.Placement.Zones[0] = "z2"
	cp.Spec.Placement.NodeSelector["pool"] = "b"
	cp.Spec.ACL[0].PasswordHashes[0] = "h2"
	cp.Spec.TLS.SecretRef = "s2"
	if orig.Spec.PodAnnotations["a"] != "1" || orig.Spec.Placement.Zones[0] != "z1" || orig.Spec.Placement.NodeSelector["pool"] != "a" ||
		orig.Spec.ACL[0].PasswordHashes[0] != "h" || orig.Spec.TLS.SecretRef != "s" {
		t.Errorf("DeepCopy shares memory with the original: %+v", orig.Spec)
	}
}

func TestConfigDeepCopyIsDeep(t *testing.T) {
	cpu := resource.MustParse("1")
	orig := &v1alpha1.ValkeyConfig{Spec: v1alpha1.ValkeyConfigSpec{
		ImageRef:  "valkey-9-0",
		Resources: &v1alpha1.ValkeyResources{CPU: &cpu},
		Valkey:    map[string]string{"maxmemory": "1gb"},
		ACL: []v1alpha1.ACLBinding{{Username: "u", PasswordHashes: []string{"h"}, Permissions: []v1alpha1.ACLPermission{{
			RoleRef: "r", Keys: []v1alpha1.KeyPattern{{Pattern: "a:*"}}, Channels: []string{"c"},
		}}}},
	}}
	cp := orig.DeepCopy()
	if !reflect.DeepEqual(orig, cp) {
		t.Fatalf("DeepCopy differs from the original:\n%+v\n%+v", orig.Spec, cp.Spec)
	}
	cp.Spec.Valkey["maxmemory"] = "2gb"
	cp.Spec.Resources.CPU.Add(resource.MustParse("1"))
	cp.Spec.ACL[0].Permissions[0].Keys[0].Pattern = "b:*"
	cp.Spec.ACL[0].Permissions[0].Channels[0] = "d"
	if orig.Spec.Valkey["maxmemory"] != "1gb" || orig.Spec.Resources.CPU.String() != "1" ||
		orig.Spec.ACL[0].Permissions[0].Keys[0].Pattern != "a:*" || orig.Spec.ACL[0].Permissions[0].Channels[0] != "c" {
		t.Errorf("DeepCopy shares memory with the original: %+v", orig.Spec)
	}
	if (*v1alpha1.ValkeyConfigSpec)(nil).DeepCopy() != nil || (*v1alpha1.Placement)(nil).DeepCopy() != nil {
		t.Error("DeepCopy of nil is not nil")
	}
	empty := (&v1alpha1.ValkeyConfigSpec{}).DeepCopy()
	if empty.Valkey != nil || empty.ACL != nil || empty.Resources != nil {
		t.Errorf("DeepCopy of an empty spec allocated fields: %+v", empty)
	}
}

// The bounds are Go constants for the operator and literals in the CRD's schema and CEL rules;
// they must agree.
func TestCRDBoundsMatchConstants(t *testing.T) {
	crd := readCRD(t, "valkeyclusters")
	root := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	spec, status := root.Properties["spec"], root.Properties["status"]
	rules := func(s apiextensionsv1.JSONSchemaProps) string {
		var all []string
		for _, r := range s.XValidations {
			all = append(all, r.Rule)
		}
		return strings.Join(all, "\n")
	}
	for _, c := range []struct{ where, want string }{
		{rules(spec.Properties["shards"]), fmt.Sprintf("self <= %d", v1alpha1.MaxShards)},
		{rules(spec.Properties["replicasPerShard"]), fmt.Sprintf("self <= %d", v1alpha1.MaxReplicasPerShard)},
		{rules(spec), fmt.Sprintf("self.shards * (self.replicasPerShard + 1) <= %d", v1alpha1.MaxNodes)},
		{rules(spec.Properties["podAnnotations"]), fmt.Sprintf(".sum() <= %d", v1alpha1.MaxPodAnnotationsBytes)},
		{rules(*root), fmt.Sprintf("self.metadata.name.size() <= %d", v1alpha1.MaxClusterNameLength)},
	} {
		if !strings.Contains(c.where, c.want) {
			t.Errorf("CRD rules\n%s\ndo not contain %q", c.where, c.want)
		}
	}
	node := readCRD(t, "valkeynodes").Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	for _, c := range []struct {
		name   string
		schema apiextensionsv1.JSONSchemaProps
		max    float64
	}{
		{"spec.shards", spec.Properties["shards"], v1alpha1.MaxShards},
		{"spec.replicasPerShard", spec.Properties["replicasPerShard"], v1alpha1.MaxReplicasPerShard},
		{"status.failover.shard", status.Properties["failover"].Properties["shard"], v1alpha1.MaxShardIndex},
		{"status.observedGeneration", status.Properties["observedGeneration"], v1alpha1.MaxExactJSONInteger},
		{"ValkeyNode spec.shardIndex", node.Properties["shardIndex"], v1alpha1.MaxShardIndex},
	} {
		if c.schema.Maximum == nil || *c.schema.Maximum != c.max {
			t.Errorf("%s: schema maximum %v, want %v", c.name, c.schema.Maximum, c.max)
		}
	}
	values := spec.Properties["podAnnotations"].AdditionalProperties.Schema
	if values.MaxLength == nil || *values.MaxLength != v1alpha1.MaxPodAnnotationsBytes {
		t.Errorf("podAnnotations values: maxLength %v, want %d", values.MaxLength, v1alpha1.MaxPodAnnotationsBytes)
	}
	if v1alpha1.MaxPodAnnotationsBytes > v1alpha1.PodAnnotationsSizeLimit/2 {
		t.Errorf("MaxPodAnnotationsBytes %d leaves less than half of Kubernetes' %d for the operator and others", v1alpha1.MaxPodAnnotationsBytes, v1alpha1.PodAnnotationsSizeLimit)
	}
}

func TestNodeDeepCopyIsDeep(t *testing.T) {
	orig := &v1alpha1.ValkeyNode{Spec: v1alpha1.ValkeyNodeSpec{
		ValkeySettings: map[string]string{"maxmemory": "1gb"},
		Placement:      &v1alpha1.Placement{Zones: []string{"z1"}, NodeSelector: map[string]string{"pool": "a"}},
	}}
	cp := orig.DeepCopy()
	if !reflect.DeepEqual(orig, cp) {
		t.Fatalf("copy differs: %+v", cp)
	}
	cp.Spec.ValkeySettings["maxmemory"] = "2gb"
	cp.Spec.Placement.Zones[0] = "z2"
	cp.Spec.Placement.NodeSelector["pool"] = "b"
	if orig.Spec.ValkeySettings["maxmemory"] != "1gb" || orig.Spec.Placement.Zones[0] != "z1" || orig.Spec.Placement.NodeSelector["pool"] != "a" {
		t.Errorf("DeepCopy shares memory with the original: %+v", orig.Spec)
	}
}

// A digest in spec.tag pins the image: with a tag, or alone (then the pods run repository@digest).
func TestImageJoinsTagsAndDigests(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for tag, want := range map[string]string{
		"9.0.0":           "valkey/valkey:9.0.0",
		"9.0.0@" + digest: "valkey/valkey:9.0.0@" + digest,
		digest:            "valkey/valkey@" + digest,
		"@" + digest:      "valkey/valkey@" + digest,
	} {
		if got := (v1alpha1.ValkeyImageSpec{Repository: "valkey/valkey", Tag: tag}).Image(); got != want {
			t.Errorf("tag %q: Image() = %q, want %q", tag, got, want)
		}
	}
}
